//! Journal entries (`journalctl -o json`) of the mail-log journal source, read through the
//! bounded line reader: never a panic, every line the reconstruction makes parses or is
//! refused by the mail-log parser without a panic either.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::mail::log::journal::{entry_line, BoundedLines};
use svc::mail::log::parse_line;

fuzz_target!(|data: &[u8]| {
    let mut lines = BoundedLines::new(data, 4096);
    while let Some(l) = lines.next_line() {
        let Ok(json) = l else { continue };
        if let Ok(entry) = entry_line(&json) {
            if let Some(line) = entry.line {
                assert!(!line.contains('\n'));
                let _ = parse_line(&line);
            }
        }
    }
});
