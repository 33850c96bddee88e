//! MTA queue files: Exim `-H` headers and Postfix queue records must never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::io::Read;
use svc::mail::spool::{parse_exim_header, PostfixReader};

fuzz_target!(|data: &[u8]| {
    let _ = parse_exim_header(data);
    let mut r = PostfixReader::new(data);
    let mut sink = Vec::new();
    let _ = (&mut r).take(1 << 20).read_to_end(&mut sink);
    let _ = r.finish();
});
