//! Suppression routes (admin): list, create, delete.
//!
//! `POST /api/v1/suppressions` takes a JSON object:
//!
//! | field | type | rule |
//! |---|---|---|
//! | `check` | string | required; the finding's check name |
//! | `message` | string | optional; exact message |
//! | `path_prefix` | string | optional; absolute path, covers itself and everything below |
//! | `ip` | string | optional; an IP address (IPv4-mapped IPv6 is stored as IPv4) |
//! | `account` | string | optional; exact account name |
//! | `reason` | string | required; why (shown in the finding's action history) |
//! | `expires_hours` | integer | optional; 1 to 87,600; absent = until deleted |
//!
//! Optional fields may be `null` or `""` (absent). Unknown and repeated fields are errors.
//! Invalid bodies answer 400 with `error`, `errors` (a list of `{field, message}`) and
//! `errors_truncated`.
//!
//! Guarantees of [`parse_body`] (outside input, fuzzed by `fuzz_targets/suppression_body`):
//! - The body is read as a stream of keys and values; nothing but the values of the seven
//!   known fields is kept, and values that are not strings or numbers are skipped without
//!   being built. One request costs about its body size (the body plus at most one copy of
//!   each known string field), whatever it holds.
//! - Parsing stops at the first structural problem (invalid JSON, trailing data, a body
//!   that is not an object): one `body` error naming the line and column, never echoing
//!   the body.
//! - At most [`MAX_ERRORS`] validation errors are reported, then `errors_truncated` is true.
//!   Field names are echoed cut to [`ECHO_FIELD_CHARS`] characters.
//! - `DELETE /api/v1/suppressions/<id>` takes a canonical number
//!   ([`super::params::parse_uint`]): `+5` or `005` is 400, never rule 5.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{json, Value};

use crate::findings::suppress;
use crate::http::{Request, Response};
use crate::store::suppressions::{NewSuppression, Suppression};

use super::auth::Caller;
use super::data::store_failed;
use super::App;

/// Longest `expires_hours` (ten years).
pub const MAX_EXPIRES_HOURS: u64 = 87_600;
/// Validation errors reported at most; `errors_truncated` says when more were found.
pub const MAX_ERRORS: usize = 20;
/// Characters of an unknown field's name echoed at most.
pub const ECHO_FIELD_CHARS: usize = 64;

/// Known fields and their longest value in characters (`expires_hours` is a number).
const FIELDS: &[(&str, usize)] = &[
    ("check", 128),
    ("message", 4096),
    ("path_prefix", 4096),
    ("ip", 64),
    ("account", 256),
    ("reason", 1024),
    ("expires_hours", 0),
];
const CHECK: usize = 0;
const MESSAGE: usize = 1;
const PATH_PREFIX: usize = 2;
const IP: usize = 3;
const ACCOUNT: usize = 4;
const REASON: usize = 5;

/// Errors of one body: at most [`MAX_ERRORS`] `(field, message)` pairs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FieldErrors {
    pub errors: Vec<(String, String)>,
    /// More errors were found than reported.
    pub truncated: bool,
}

impl FieldErrors {
    fn push(&mut self, field: &str, message: impl Into<String>) {
        if self.errors.len() < MAX_ERRORS {
            self.errors.push((
                crate::text::cut(field, ECHO_FIELD_CHARS).into_owned(),
                message.into(),
            ));
        } else {
            self.truncated = true;
        }
    }

    fn is_empty(&self) -> bool {
        self.errors.is_empty() && !self.truncated
    }

    /// The field names, in order (tests).
    pub fn fields(&self) -> Vec<&str> {
        self.errors.iter().map(|(f, _)| f.as_str()).collect()
    }

    fn one(field: &str, message: impl Into<String>) -> FieldErrors {
        let mut e = FieldErrors::default();
        e.push(field, message);
        e
    }
}

/// A known field's value, kept only as far as validation needs it.
#[derive(Debug)]
enum Raw {
    Null,
    Str(String),
    UInt(u64),
    /// Any other JSON value, skipped while parsing; the name of its type.
    Other(&'static str),
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Raw, E> {
        Ok(Raw::Other("a boolean"))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Raw, E> {
        Ok(Raw::UInt(v))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Raw, E> {
        Ok(Raw::Other("a negative number"))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Raw, E> {
        Ok(Raw::Other("a number with a fraction or exponent"))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Raw, E> {
        Ok(Raw::Str(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Raw, E> {
        Ok(Raw::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Raw::Other("an array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Raw::Other("an object"))
    }
}

impl<'de> de::Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Raw, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

/// A key: the index of a known field, or an unknown name (cut for echoing).
enum Key {
    Known(usize),
    Unknown(String),
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(match FIELDS.iter().position(|(n, _)| *n == v) {
            Some(i) => Key::Known(i),
            None => Key::Unknown(crate::text::cut(v, ECHO_FIELD_CHARS).into_owned()),
        })
    }
}

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

/// Walks the top-level object: known values into their slots, everything else counted as
/// an error and skipped.
struct BodyVisitor<'a> {
    slots: &'a mut [Option<Raw>; 7],
    errs: &'a mut FieldErrors,
}

impl<'de> Visitor<'de> for BodyVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Known(i) => {
                    let v = map.next_value::<Raw>()?;
                    if self.slots[i].is_some() {
                        self.errs.push(FIELDS[i].0, "appears more than once");
                    } else {
                        self.slots[i] = Some(v);
                    }
                }
                Key::Unknown(name) => {
                    self.errs.push(&name, "unknown field");
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// The `body` error for a structural problem; never echoes the body.
fn structural(e: &serde_json::Error) -> FieldErrors {
    use serde_json::error::Category;
    let msg = match e.classify() {
        // Syntax messages are fixed texts plus the position.
        Category::Syntax | Category::Eof => format!("not valid JSON: {e}"),
        // Data errors may quote the value; say what was expected instead.
        Category::Data | Category::Io => format!(
            "must be a JSON object (line {} column {})",
            e.line(),
            e.column()
        ),
    };
    FieldErrors::one("body", msg)
}

fn text(slot: Option<Raw>, i: usize, required: bool, errs: &mut FieldErrors) -> Option<String> {
    let (field, max) = FIELDS[i];
    let value = match slot {
        None | Some(Raw::Null) => None,
        Some(Raw::Str(s)) if s.trim().is_empty() => None,
        Some(Raw::Str(s)) => {
            if s.chars().nth(max).is_some() {
                errs.push(field, format!("must be at most {max} characters"));
                return None;
            }
            if s.contains('\0') {
                errs.push(field, "must not contain NUL");
                return None;
            }
            Some(s)
        }
        Some(Raw::UInt(_)) => {
            errs.push(field, "must be a string, not a number");
            return None;
        }
        Some(Raw::Other(kind)) => {
            errs.push(field, format!("must be a string, not {kind}"));
            return None;
        }
    };
    if value.is_none() && required {
        errs.push(field, "is required");
    }
    value
}

/// Parses and validates a request body into a rule (expiry relative to `now`).
pub fn parse_body(body: &[u8], now: jiff::Timestamp) -> Result<NewSuppression, FieldErrors> {
    let mut slots: [Option<Raw>; 7] = Default::default();
    let mut errs = FieldErrors::default();
    let mut de = serde_json::Deserializer::from_slice(body);
    de.deserialize_map(BodyVisitor {
        slots: &mut slots,
        errs: &mut errs,
    })
    .and_then(|()| de.end())
    .map_err(|e| structural(&e))?;
    let [check, message, path_prefix, ip, account, reason, expires_hours] = slots;
    let check = text(check, CHECK, true, &mut errs);
    let message = text(message, MESSAGE, false, &mut errs);
    let path_prefix = text(path_prefix, PATH_PREFIX, false, &mut errs);
    if path_prefix.as_ref().is_some_and(|p| !p.starts_with('/')) {
        errs.push("path_prefix", "must be an absolute path");
    }
    let ip = match text(ip, IP, false, &mut errs).map(|s| super::params::parse_ip(&s)) {
        None => None,
        Some(Ok(a)) => Some(a.to_string()),
        Some(Err(e)) => {
            errs.push("ip", e.to_string());
            None
        }
    };
    let account = text(account, ACCOUNT, false, &mut errs);
    let reason = text(reason, REASON, true, &mut errs);
    let expires = match expires_hours {
        None | Some(Raw::Null) => None,
        Some(Raw::UInt(h)) if (1..=MAX_EXPIRES_HOURS).contains(&h) => Some(crate::clock::add(
            now,
            std::time::Duration::from_secs(h * 3600),
        )),
        Some(_) => {
            errs.push(
                "expires_hours",
                format!("must be an integer from 1 to {MAX_EXPIRES_HOURS}"),
            );
            None
        }
    };
    match (check, reason) {
        (Some(check), Some(reason)) if errs.is_empty() => Ok(NewSuppression {
            check,
            message,
            path_prefix,
            ip,
            account,
            reason,
            expires,
        }),
        _ => Err(errs),
    }
}

/// The 400 answer for an invalid body.
fn invalid(errs: &FieldErrors) -> Response {
    let first = errs
        .errors
        .first()
        .map(|(f, m)| format!("{}: {m}", crate::text::escape_controls(f)))
        .unwrap_or_default();
    let list: Vec<Value> = errs
        .errors
        .iter()
        .map(|(f, m)| json!({ "field": f, "message": m }))
        .collect();
    Response::json(
        400,
        &json!({
            "error": format!("invalid suppression: {first}"),
            "errors": list,
            "errors_truncated": errs.truncated,
        }),
    )
}
fn rule_json(r: &Suppression, now: jiff::Timestamp) -> Value {
    let mut v = json!(r);
    v["in_force"] = json!(suppress::in_force(r, now));
    v
}

/// `GET /api/v1/suppressions`: every rule, newest first, with `in_force`.
pub fn list(app: &App, _req: &Request, _c: &Caller) -> Response {
    let s = &app.services.suppressions;
    let now = s.now();
    let items: Vec<Value> = s.rules().iter().map(|r| rule_json(r, now)).collect();
    Response::json(200, &json!({ "items": items, "total": items.len() }))
}

/// `POST /api/v1/suppressions`: 201 `{ok, id, suppression, removed_active}`.
pub fn create(app: &App, req: &Request, c: &Caller) -> Response {
    let s = &app.services.suppressions;
    let new = match parse_body(&req.body, s.now()) {
        Ok(n) => n,
        Err(errs) => return invalid(&errs),
    };
    let rule = match s.create(new, &c.name) {
        Ok(r) => r,
        Err(e) => return store_failed(e),
    };
    let mut out = json!({
        "ok": true,
        "id": rule.id,
        "suppression": rule_json(&rule, s.now()),
    });
    match app.services.engine.apply_suppressions() {
        Ok(n) => out["removed_active"] = json!(n),
        Err(e) => {
            out["removed_active"] = json!(0);
            out["warning"] = json!(format!(
                "the rule is stored but matching active findings could not be removed now: {e}"
            ));
        }
    }
    Response::json(201, &out)
}

/// `DELETE /api/v1/suppressions/<id>`: `{ok: true, id}`; an id that is not a canonical
/// number 400; unknown id 404.
pub fn delete(app: &App, req: &Request, _c: &Caller) -> Response {
    let seg = req.path.rsplit('/').next().unwrap_or("");
    let id = match super::params::uint_in("id", seg, 1, i64::MAX as u64) {
        Ok(n) => n as i64,
        Err(resp) => return resp,
    };
    match app.services.suppressions.delete(id) {
        Ok(true) => Response::json(200, &json!({ "ok": true, "id": id })),
        Ok(false) => Response::error(404, &format!("no suppression {id}")),
        Err(e) => store_failed(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Body;

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_767_225_600).unwrap()
    }

    fn fields_of(r: Result<NewSuppression, FieldErrors>) -> Vec<String> {
        r.unwrap_err()
            .fields()
            .into_iter()
            .map(String::from)
            .collect()
    }

    #[test]
    fn valid_bodies_parse() {
        let n = parse_body(
            br#"{"check":"ssh_bruteforce","ip":"::ffff:192.0.2.7","reason":"our scanner","expires_hours":2,"message":null,"account":""}"#,
            now(),
        )
        .unwrap();
        assert_eq!(n.check, "ssh_bruteforce");
        assert_eq!(n.ip.as_deref(), Some("192.0.2.7"));
        assert_eq!(n.message, None);
        assert_eq!(n.account, None);
        assert_eq!(n.expires.unwrap().as_second() - now().as_second(), 7200);
        // Escaped keys and values are read like plain ones.
        let n = parse_body(br#" {"che\u0063k":"x","reason":"r\u00e9"} "#, now()).unwrap();
        assert_eq!((n.check.as_str(), n.reason.as_str()), ("x", "ré"));
    }

    #[test]
    fn invalid_bodies_name_every_bad_field() {
        assert_eq!(fields_of(parse_body(b"nope", now())), ["body"]);
        assert_eq!(fields_of(parse_body(b"[1]", now())), ["body"]);
        assert_eq!(fields_of(parse_body(b"", now())), ["body"]);
        let mut f = fields_of(parse_body(
            br#"{"ip":"999.1.1.1","path_prefix":"relative","expires_hours":0,"extra":1,"account":5}"#,
            now(),
        ));
        f.sort();
        assert_eq!(
            f,
            [
                "account",
                "check",
                "expires_hours",
                "extra",
                "ip",
                "path_prefix",
                "reason"
            ]
        );
        let long = format!(r#"{{"check":"{}","reason":"r"}}"#, "c".repeat(200));
        assert_eq!(fields_of(parse_body(long.as_bytes(), now())), ["check"]);
        for bad in [
            r#"{"check":"c","reason":"r","expires_hours":2.5}"#,
            r#"{"check":"c","reason":"r","expires_hours":-1}"#,
            r#"{"check":"c","reason":"r","expires_hours":"2"}"#,
            r#"{"check":"c","reason":"r","expires_hours":87601}"#,
        ] {
            assert_eq!(
                fields_of(parse_body(bad.as_bytes(), now())),
                ["expires_hours"],
                "{bad}"
            );
        }
        assert_eq!(
            fields_of(parse_body(
                br#"{"check":"c","check":"d","reason":"r"}"#,
                now()
            )),
            ["check"]
        );
        assert_eq!(
            fields_of(parse_body(br#"{"check":{"a":[1,2]},"reason":true}"#, now())),
            ["check", "reason"]
        );
    }

    #[test]
    fn structural_problems_stop_parsing_without_echoing_the_body() {
        for bad in [
            &br#"{"a":1,"b":2 "c":3}"#[..],
            br#"{"check":"c","reason":"r"} trailing"#,
            br#"{"check":"c","reason":"r""#,
            br#""a string that must not be echoed back""#,
            b"\xff\xfe",
        ] {
            let e = parse_body(bad, now()).unwrap_err();
            assert_eq!(e.fields(), ["body"], "{:?}", String::from_utf8_lossy(bad));
            assert!(!e.errors[0].1.contains("echoed"), "{:?}", e.errors[0].1);
        }
        // Deep nesting costs neither the stack nor more than the body.
        let deep = format!(r#"{{"x":{}{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_body(deep.as_bytes(), now()).is_err());
        let deep = format!(
            r#"{{"check":{}{}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(parse_body(deep.as_bytes(), now()).is_err());
    }

    #[test]
    fn many_unknown_keys_report_twenty_errors_then_truncate() {
        let mut body = String::from("{");
        for i in 0..100_000 {
            body.push_str(&format!("\"k{i}\":{i},"));
        }
        body.push_str(&format!("\"{}\":1}}", "n".repeat(10_000)));
        let e = parse_body(body.as_bytes(), now()).unwrap_err();
        assert_eq!(e.errors.len(), MAX_ERRORS);
        assert!(e.truncated);
        assert_eq!(e.errors[0].0, "k0");
        let resp = invalid(&e);
        let Body::Full(b) = resp.body else {
            panic!("full body expected")
        };
        assert!(b.len() < 4096, "{} bytes", b.len());
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["errors_truncated"], true);
        assert_eq!(v["errors"].as_array().unwrap().len(), MAX_ERRORS);
        // A long unknown name is echoed cut.
        let e = parse_body(
            format!("{{\"{}\":1}}", "n".repeat(10_000)).as_bytes(),
            now(),
        )
        .unwrap_err();
        assert!(e.errors[0].0.chars().count() <= ECHO_FIELD_CHARS);
    }
}
