//! `/proc/net/tcp{,6}` tables of the direct SMTP egress sampler: never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::mail::egress::procnet::parse_table;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (sockets, skipped) = parse_table(text);
    assert!(sockets.len() as u64 + skipped <= text.lines().count() as u64);
});
