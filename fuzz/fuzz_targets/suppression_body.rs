//! Fuzz target for the `POST /api/v1/suppressions` body parser and the shared parsers of
//! client numbers and addresses: never panics, never reports more than 20 errors, and a
//! parsed rule satisfies every validation rule.
//!
//! Run from the repository root: `cargo fuzz run suppression_body`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use svc::api::params::{parse_ip, parse_uint};
use svc::api::suppressions::{parse_body, MAX_ERRORS, ECHO_FIELD_CHARS};

fuzz_target!(|data: &[u8]| {
    let now = jiff::Timestamp::from_second(1_767_225_600).unwrap();
    match parse_body(data, now) {
        Ok(rule) => {
            assert!(!rule.check.trim().is_empty() && !rule.reason.trim().is_empty());
            assert!(rule.path_prefix.as_deref().is_none_or(|p| p.starts_with('/')));
            if let Some(ip) = &rule.ip {
                let parsed: std::net::IpAddr = ip.parse().unwrap();
                assert_eq!(parsed, parsed.to_canonical(), "stored canonical");
            }
        }
        Err(e) => {
            assert!(e.errors.len() <= MAX_ERRORS);
            assert!(!e.errors.is_empty() || e.truncated);
            for (field, _) in &e.errors {
                assert!(field.chars().count() <= ECHO_FIELD_CHARS);
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(n) = parse_uint(text) {
            assert_eq!(n.to_string(), text, "only canonical spellings parse");
        }
        if let Ok(ip) = parse_ip(text) {
            assert_eq!(ip, ip.to_canonical());
        }
    }
});
