//! The tolerant base64 decoder: never panics, and feeding the input in two chunks at any
//! split gives the same output as feeding it whole.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::mail::decode::{decode_base64, Base64Decoder};

fuzz_target!(|data: &[u8]| {
    let whole = decode_base64(data);
    let split = data.first().map_or(0, |b| *b as usize % (data.len() + 1));
    let mut d = Base64Decoder::new();
    d.feed(&data[..split]);
    d.feed(&data[split..]);
    d.finish();
    let _ = d.take_divergence();
    assert_eq!(d.take_out(), whole.quartet, "chunking changed the result");
});
