//! Proof bodies and cookies posted to the challenge listener: the parser and the checks
//! must never panic and must refuse garbage with an error.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::challenge::pow::{cookie_valid, parse_proof, proof_ok};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = parse_proof(data) {
        let _ = proof_ok(&p.nonce, &p.counter, 12);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let ip = std::net::IpAddr::from([192, 0, 2, 1]);
        let _ = cookie_valid(b"fuzz-secret", ip, text, 1_767_225_600);
    }
});
