//! The streaming MIME walker on arbitrary messages (tight limits so every limit path is
//! reached): it must never panic, never exceed its part and nesting limits, and report
//! at most 16 extra base64 interpretations.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::mail::mime::{walk_bytes, Limits};

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_depth: 6,
        max_parts: 64,
        max_extract_bytes: 1 << 20,
        ..Limits::default()
    };
    let (c, report) = walk_bytes(data, limits);
    let extra = c
        .parts
        .iter()
        .filter(|(p, _)| p.interpretation.is_some())
        .count();
    assert!(extra <= 16, "{extra} extra interpretations");
    let total: usize = c.parts.iter().map(|(_, b)| b.len()).sum();
    assert!(total as u64 <= limits.max_extract_bytes * 2 + 1024, "{total} bytes extracted");
    let _ = report;
});
