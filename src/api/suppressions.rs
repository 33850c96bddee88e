//! Suppression routes (admin): list, create, delete.
//!
//! `POST /api/v1/suppressions` takes a JSON object:
//!
//! | field | type | rule |
//! |---|---|---|
//! | `check` | string | required; the finding's check name |
//! | `message` | string | optional; exact message |
//! | `path_prefix` | string | optional; absolute path, covers itself and everything below |
//! | `ip` | string | optional; an IP address |
//! | `account` | string | optional; exact account name |
//! | `reason` | string | required; why (shown in the finding's action history) |
//! | `expires_hours` | integer | optional; 1 to 87,600; absent = until deleted |
//!
//! Optional fields may be `null` or `""` (absent). Unknown fields are errors. Invalid bodies
//! answer 400 with `error` and `errors` (a list of `{field, message}`).

use serde_json::{json, Map, Value};

use crate::findings::suppress;
use crate::http::{Request, Response};
use crate::store::suppressions::{NewSuppression, Suppression};

use super::auth::Caller;
use super::data::store_failed;
use super::App;

/// Longest `expires_hours` (ten years).
pub const MAX_EXPIRES_HOURS: u64 = 87_600;

const FIELDS: &[(&str, usize)] = &[
    ("check", 128),
    ("message", 4096),
    ("path_prefix", 4096),
    ("ip", 64),
    ("account", 256),
    ("reason", 1024),
];

type FieldErrors = Vec<(String, String)>;

fn text(
    body: &Map<String, Value>,
    field: &str,
    max: usize,
    required: bool,
    errs: &mut FieldErrors,
) -> Option<String> {
    let value = match body.get(field) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(Value::String(s)) => {
            if s.chars().count() > max {
                errs.push((field.into(), format!("must be at most {max} characters")));
                return None;
            }
            if s.contains('\0') {
                errs.push((field.into(), "must not contain NUL".into()));
                return None;
            }
            Some(s.clone())
        }
        Some(_) => {
            errs.push((field.into(), "must be a string".into()));
            return None;
        }
    };
    if value.is_none() && required {
        errs.push((field.into(), "is required".into()));
    }
    value
}

/// Parses and validates a request body into a rule (expiry relative to `now`).
pub fn parse_body(body: &[u8], now: jiff::Timestamp) -> Result<NewSuppression, FieldErrors> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| vec![("body".to_string(), format!("not valid JSON: {e}"))])?;
    let Value::Object(m) = v else {
        return Err(vec![("body".into(), "must be a JSON object".into())]);
    };
    let mut errs = FieldErrors::new();
    for k in m.keys() {
        if k != "expires_hours" && !FIELDS.iter().any(|(f, _)| f == k) {
            errs.push((k.clone(), "unknown field".into()));
        }
    }
    let get = |f: &str, req: bool, errs: &mut FieldErrors| {
        let max = FIELDS
            .iter()
            .find(|(n, _)| *n == f)
            .map_or(256, |(_, m)| *m);
        text(&m, f, max, req, errs)
    };
    let check = get("check", true, &mut errs);
    let message = get("message", false, &mut errs);
    let path_prefix = get("path_prefix", false, &mut errs);
    if path_prefix.as_ref().is_some_and(|p| !p.starts_with('/')) {
        errs.push(("path_prefix".into(), "must be an absolute path".into()));
    }
    let ip = get("ip", false, &mut errs);
    let ip = match ip.map(|s| s.trim().parse::<std::net::IpAddr>()) {
        None => None,
        Some(Ok(a)) => Some(a.to_canonical().to_string()),
        Some(Err(_)) => {
            errs.push(("ip".into(), "not a valid IP address".into()));
            None
        }
    };
    let account = get("account", false, &mut errs);
    let reason = get("reason", true, &mut errs);
    let expires = match m.get("expires_hours") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(h) if (1..=MAX_EXPIRES_HOURS).contains(&h) => Some(crate::clock::add(
                now,
                std::time::Duration::from_secs(h * 3600),
            )),
            _ => {
                errs.push((
                    "expires_hours".into(),
                    format!("must be an integer from 1 to {MAX_EXPIRES_HOURS}"),
                ));
                None
            }
        },
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
        Err(errs) => {
            let first = errs
                .first()
                .map(|(f, m)| format!("{f}: {m}"))
                .unwrap_or_default();
            let list: Vec<Value> = errs
                .iter()
                .map(|(f, m)| json!({ "field": f, "message": m }))
                .collect();
            return Response::json(
                400,
                &json!({ "error": format!("invalid suppression: {first}"), "errors": list }),
            );
        }
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

/// `DELETE /api/v1/suppressions/<id>`: `{ok: true, id}`; unknown id 404.
pub fn delete(app: &App, req: &Request, _c: &Caller) -> Response {
    let seg = req.path.rsplit('/').next().unwrap_or("");
    let Ok(id) = seg.parse::<i64>() else {
        return Response::error(404, &format!("no suppression {seg:?}"));
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

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_767_225_600).unwrap()
    }

    fn fields_of(r: Result<NewSuppression, FieldErrors>) -> Vec<String> {
        r.unwrap_err().into_iter().map(|(f, _)| f).collect()
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
    }

    #[test]
    fn invalid_bodies_name_every_bad_field() {
        assert_eq!(fields_of(parse_body(b"nope", now())), ["body"]);
        assert_eq!(fields_of(parse_body(b"[1]", now())), ["body"]);
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
    }
}
