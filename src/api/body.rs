//! JSON request bodies: the one reader of every route that takes a JSON body (threat,
//! undo, firewall, WAF; `/suppressions` keeps its own field-by-field parser, bounded the
//! same way).
//!
//! Guarantees of [`parse`] (outside input; never panics):
//! - Before anything is allocated, one pass over the bytes checks nesting depth (at most
//!   [`MAX_DEPTH`] arrays and objects inside one another) and size (at most
//!   [`MAX_ELEMENTS`] containers and separators). A parsed value costs tens of bytes per
//!   element, so without this a 1 MiB body of `[],[],...` became ~20 MiB in memory (issue 23
//!   item 9); with it a body costs about its own size.
//! - An object with a key twice is refused (400), at any depth: `{"ip":"a","ip":"b"}` must
//!   not mean `b` to one reader and `a` to another (issue 23 item 12).
//! - An empty body (or whitespace) is `{}`.
//! - Refusals are counted by reason ([`Refusals`], `svc_api_body_refused_total`); the
//!   answer never echoes the body, only a key name cut to 64 characters.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::http::{Request, Response};

/// Arrays and objects nested at most (the deepest route body, tentative firewall settings,
/// needs 3).
pub const MAX_DEPTH: usize = 8;
/// Containers plus separators (`,`) at most: above the largest list a route takes (1,000
/// addresses or rule ids) with room, far below what fills memory.
pub const MAX_ELEMENTS: usize = 10_000;

/// Why a body was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Depth,
    Elements,
    Duplicate,
    Syntax,
}

impl Refusal {
    pub const ALL: [Refusal; 4] = [
        Refusal::Depth,
        Refusal::Elements,
        Refusal::Duplicate,
        Refusal::Syntax,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Depth => "depth",
            Refusal::Elements => "elements",
            Refusal::Duplicate => "duplicate_key",
            Refusal::Syntax => "invalid_json",
        }
    }
}

/// Refused bodies by reason.
#[derive(Default)]
pub struct Refusals([AtomicU64; 4]);

impl Refusals {
    fn count(&self, r: Refusal) {
        self.0[r as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(&self, r: Refusal) -> u64 {
        self.0[r as usize].load(Ordering::Relaxed)
    }
}

/// A refused body: why, and the message for the 400 answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyError {
    pub refusal: Refusal,
    pub message: String,
}

/// Checks depth and size without allocating: strings are skipped (with their escapes),
/// brackets and commas outside them counted. Syntax is left to the parser.
pub fn scan(body: &[u8]) -> Result<(), BodyError> {
    let (mut depth, mut elements) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in body {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                elements += 1;
                if depth > MAX_DEPTH {
                    return Err(BodyError {
                        refusal: Refusal::Depth,
                        message: format!(
                            "the body nests arrays and objects more than {MAX_DEPTH} deep"
                        ),
                    });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b',' => elements += 1,
            _ => continue,
        }
        if elements > MAX_ELEMENTS {
            return Err(BodyError {
                refusal: Refusal::Elements,
                message: format!("the body has more than {MAX_ELEMENTS} elements"),
            });
        }
    }
    Ok(())
}

/// A JSON value read with duplicate keys refused.
struct Strict(Value);

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Strict;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }
    fn visit_none<E: de::Error>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Strict, E> {
        Ok(Strict(Value::Bool(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Strict, E> {
        Ok(Strict(Value::String(v.to_string())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Strict, E> {
        Ok(Strict(Value::String(v)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        let mut list = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            list.push(v);
        }
        Ok(Strict(Value::Array(list)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
        let mut m = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            if m.contains_key(&k) {
                return Err(de::Error::custom(format!(
                    "{DUPLICATE}{:?}",
                    crate::text::for_log(&k, 64)
                )));
            }
            let Strict(v) = map.next_value()?;
            m.insert(k, v);
        }
        Ok(Strict(Value::Object(m)))
    }
}

impl<'de> de::Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

/// The start of the parser's message for a repeated key.
const DUPLICATE: &str = "duplicate key ";

/// Parses a body under the rules above.
pub fn parse(body: &[u8]) -> Result<Value, BodyError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Value::Object(Map::new()));
    }
    scan(body)?;
    serde_json::from_slice::<Strict>(body)
        .map(|Strict(v)| v)
        .map_err(|e| {
            let text = e.to_string();
            if text.starts_with(DUPLICATE) {
                BodyError {
                    refusal: Refusal::Duplicate,
                    message: format!("the body is refused: {text}"),
                }
            } else {
                BodyError {
                    refusal: Refusal::Syntax,
                    message: format!("the body is not valid JSON: {e}"),
                }
            }
        })
}

impl super::App {
    /// The request's JSON body, or the 400 answer (counted).
    pub(super) fn json_body(&self, req: &Request) -> Result<Value, Response> {
        parse(&req.body).map_err(|e| {
            self.body_refusals.count(e.refusal);
            Response::error(400, &e.message)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(b: &[u8]) -> Option<Refusal> {
        parse(b).err().map(|e| e.refusal)
    }

    #[test]
    fn route_bodies_parse() {
        assert_eq!(parse(b"").unwrap(), serde_json::json!({}));
        assert_eq!(parse(b" \n").unwrap(), serde_json::json!({}));
        let v = parse(br#"{"ip":"192.0.2.1","ips":["a","b"],"n":-1.5,"x":null,"t":true}"#);
        assert_eq!(v.unwrap()["ips"][1], "b");
        let v = parse(br#"{"changes":{"tcp_in":[22,443],"x":{"y":[1]}},"timeout_min":5}"#);
        assert_eq!(v.unwrap()["changes"]["tcp_in"][1], 443);
        // Brackets and commas inside strings are text.
        let v = parse(format!(r#"{{"reason":"{}\"[{{,"}}"#, "[,".repeat(9000)).as_bytes());
        assert!(v.unwrap()["reason"].as_str().unwrap().ends_with("\"[{,"));
    }

    /// Issue 23 item 12: `{"ip":"5.5.5.7","ip":"8.8.8.8"}` meant 8.8.8.8.
    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        let e = parse(br#"{"ip":"5.5.5.7","ip":"8.8.8.8"}"#).unwrap_err();
        assert_eq!(e.refusal, Refusal::Duplicate);
        assert!(e.message.contains("duplicate key \"ip\""), "{}", e.message);
        assert!(!e.message.contains("8.8.8.8"), "{}", e.message);
        assert_eq!(
            refusal(br#"{"changes":{"a":1,"a":2}}"#),
            Some(Refusal::Duplicate)
        );
        assert_eq!(
            refusal(br#"{"ip\u0070":1,"ipp":2}"#),
            Some(Refusal::Duplicate)
        );
        assert_eq!(refusal(br#"[{"a":1},{"a":1}]"#), None);
    }

    /// Issue 23 item 9: bodies that inflate in memory are refused before parsing.
    #[test]
    fn depth_and_size_are_refused_before_parsing() {
        let deep = format!("{}{}", "[".repeat(9), "]".repeat(9));
        assert_eq!(refusal(deep.as_bytes()), Some(Refusal::Depth));
        let ok = format!("{}{}", "[".repeat(8), "]".repeat(8));
        assert_eq!(refusal(ok.as_bytes()), None);
        // An unclosed flood of brackets stops at the limit, not at the end.
        assert_eq!(refusal(&[b'['; 1 << 20]), Some(Refusal::Depth));
        let wide = format!("{{\"ips\":[{}[]]}}", "[],".repeat(MAX_ELEMENTS));
        assert_eq!(refusal(wide.as_bytes()), Some(Refusal::Elements));
        let list: Vec<String> = (0..1000)
            .map(|i| format!("\"192.0.2.{}\"", i % 256))
            .collect();
        let bulk = format!("{{\"ips\":[{}]}}", list.join(","));
        assert_eq!(refusal(bulk.as_bytes()), None);
    }

    #[test]
    fn syntax_errors_never_echo_the_body() {
        let e = parse(br#"{"token":"secret-looking" "x":1}"#).unwrap_err();
        assert_eq!(e.refusal, Refusal::Syntax);
        assert!(!e.message.contains("secret"), "{}", e.message);
        assert_eq!(refusal(b"{} {}"), Some(Refusal::Syntax));
        assert_eq!(refusal(b"\xff"), Some(Refusal::Syntax));
    }
}
