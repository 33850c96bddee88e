//! The tolerant quoted-printable decoder: never panics, never grows its input, and
//! chunking never changes the result.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::mail::decode::{decode_qp, QpDecoder};

fuzz_target!(|data: &[u8]| {
    let (whole, _) = decode_qp(data);
    assert!(whole.len() <= data.len());
    let split = data.first().map_or(0, |b| *b as usize % (data.len() + 1));
    let mut d = QpDecoder::new();
    d.feed(&data[..split]);
    d.feed(&data[split..]);
    d.finish();
    let mut out = Vec::new();
    d.drain_out(|b| out.extend_from_slice(b));
    assert_eq!(out, whole, "chunking changed the result");
});
