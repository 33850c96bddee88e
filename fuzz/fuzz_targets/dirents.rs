//! `getdents64` buffers: the directory-entry parser must never panic or read out of bounds,
//! and every record it accepts must move forward.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::sys::dirstream::parse_record;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while !rest.is_empty() {
        match parse_record(rest) {
            Ok((_, len)) if len > 0 && len <= rest.len() => rest = &rest[len..],
            Ok(_) => panic!("record length out of range"),
            Err(_) => break,
        }
    }
});
