//! The `email_content` check and clamd's scan answers on arbitrary text: never panic, and
//! keep at most `MAX_HITS` hits.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::mail::{clamd::parse_scan_answer, content};

fuzz_target!(|data: &[u8]| {
    let mut hits = Vec::new();
    content::inspect(data, data.first().is_some_and(|b| b & 1 == 1), &mut hits);
    assert!(hits.len() <= content::MAX_HITS);
    let _ = parse_scan_answer(&String::from_utf8_lossy(data));
});
