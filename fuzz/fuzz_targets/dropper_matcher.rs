//! The dropper-candidate matcher and the native phar reader: arbitrary bytes never panic,
//! a phar never hands out more members than its limit.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::watch::dropper::matcher::find_candidate;
use svc::watch::staged::phar;

fuzz_target!(|data: &[u8]| {
    if let Some(c) = find_candidate(data) {
        assert!(c.line >= 1);
    }
    let mut n = 0usize;
    let out = phar::read_bytes(data, "fuzz.phar", &mut |_, _| n += 1);
    assert!(out.members <= phar::MAX_FILES);
    assert!(n <= phar::MAX_FILES + 1);
});
