//! Request heads and query/form decoding must never panic and must respect the limits.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::http::request::{form_pairs, parse_head};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(head)) = parse_head(data, 64, 1 << 20) {
        assert!(head.len <= data.len());
        assert!(head.headers.len() <= 64);
        assert!(head.content_length <= 1 << 20);
        assert!(head.target.starts_with('/'));
    }
    for (k, v) in form_pairs(data) {
        assert!(k.len() <= data.len() * 3 && v.len() <= data.len() * 3);
    }
});
