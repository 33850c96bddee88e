//! WAF routes (thin: the logic is in `crate::waf` and `crate::store::waf`; statistics, rules,
//! apply and escalation answers come from `crate::waf::control`, which the control socket's
//! `waf.*` commands use too).
//!
//! | Route | Scope | Answer |
//! |---|---|---|
//! | `GET /api/v1/waf/stats` | read | collector, rules loaded, denies and events in 24 h, top rules, top IPs, escalation settings, reload state |
//! | `GET /api/v1/waf/events` | read | list envelope of events (filters `from`, `to`, `severity`, `ip`, `rule`, `country`; `limit`, `offset`) |
//! | `GET /api/v1/waf/blocks` | read | the same, deny events only |
//! | `GET /api/v1/waf/rules` | admin | svc's rules: id, description, enabled, staged, escalation, hits_24h |
//! | `POST /api/v1/waf/rules/apply` | admin | `{"disabled": [ids]}`: write the overrides, reload once |
//! | `GET /api/v1/waf/rules/escalation` | admin | rule ids excluded from escalation |
//! | `POST /api/v1/waf/rules/escalation` | admin | `{"rule_id": N, "escalation": bool}` |

use jiff::Timestamp;
use serde_json::{json, Value};

use crate::http::{Request, Response};
use crate::store::waf::{self as store, Filter, Row};
use crate::timefmt::rfc3339;
use crate::waf::control;

use super::auth::Caller;
use super::daterange;
use super::history::{parse_count, parse_severities, server_tz, ParamError};
use super::App;

/// Default and largest page.
pub const DEFAULT_LIMIT: u64 = 100;
pub const MAX_LIMIT: u64 = 1000;

fn instant(micros: i64) -> String {
    rfc3339(Timestamp::from_microsecond(micros).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn unavailable(e: impl std::fmt::Display) -> Response {
    log::warn!("waf query failed: {e}");
    Response::error(503, &format!("WAF data is unavailable: {e}"))
}

fn present(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// Parses the list parameters; `deny_only` for `/waf/blocks`.
fn query(req: &Request, deny_only: bool) -> Result<(Filter, u64, u64), ParamError> {
    let get = |n: &str| req.query_param(n);
    let limit = parse_count("limit", get("limit").as_deref(), DEFAULT_LIMIT, MAX_LIMIT)?;
    let offset = parse_count("offset", get("offset").as_deref(), 0, i64::MAX as u64)?;
    let range = daterange::parse_range(get("from").as_deref(), get("to").as_deref(), &server_tz())
        .map_err(|e| ParamError {
            param: e.param,
            message: e.to_string(),
        })?
        .ceil_micros();
    let ip = match present(get("ip")) {
        None => None,
        Some(s) => Some(
            super::params::parse_ip(&s)
                .map_err(|_| ParamError::new("ip", "expected an IPv4 or IPv6 address", &s))?
                .to_canonical()
                .to_string(),
        ),
    };
    let rule = match present(get("rule")) {
        None => None,
        Some(s) => Some(
            super::params::parse_uint(&s)
                .ok()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| ParamError::new("rule", "expected a rule id", &s))?,
        ),
    };
    let country = match present(get("country")) {
        None => None,
        Some(s) if s.len() == 2 && s.bytes().all(|b| b.is_ascii_alphabetic()) => {
            Some(s.to_ascii_uppercase())
        }
        Some(s) => {
            return Err(ParamError::new(
                "country",
                "expected a two-letter ISO country code",
                &s,
            ))
        }
    };
    let filter = Filter {
        from: range.from.map(|t| t.as_microsecond()),
        to: range.to_exclusive.map(|t| t.as_microsecond()),
        severities: parse_severities(get("severity").as_deref())?,
        ip,
        rule,
        country,
        action: deny_only.then_some("deny"),
    };
    Ok((filter, offset, limit))
}

fn item(r: &Row) -> Value {
    json!({
        "id": r.id,
        "at": instant(r.at),
        "ip": r.ip,
        "country": r.country,
        "host": r.host,
        "uri": r.uri,
        "method": r.method,
        "rule_id": r.rule_id,
        "message": r.message,
        "severity": r.severity.label(),
        "action": r.action,
        "format": r.format,
        "unique_id": r.unique_id,
        "status": r.status,
    })
}

fn list(app: &App, req: &Request, deny_only: bool) -> Response {
    let (filter, offset, limit) = match query(req, deny_only) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let (rows, total) = match app.store.read(|c| store::page(c, &filter, offset, limit)) {
        Ok(p) => p,
        Err(e) => return unavailable(e),
    };
    let truncated = offset.saturating_add(rows.len() as u64) < total;
    Response::json(
        200,
        &json!({
            "items": rows.iter().map(item).collect::<Vec<_>>(),
            "total": total,
            "offset": offset,
            "limit": limit,
            "truncated": truncated,
        }),
    )
}

/// `GET /api/v1/waf/events`.
pub fn events(app: &App, req: &Request, _c: &Caller) -> Response {
    list(app, req, false)
}

/// `GET /api/v1/waf/blocks`.
pub fn blocks(app: &App, req: &Request, _c: &Caller) -> Response {
    list(app, req, true)
}

/// `GET /api/v1/waf/stats`.
pub fn stats(app: &App, _req: &Request, _c: &Caller) -> Response {
    reply(control::stats(&app.services.waf, &app.store, &app.clock))
}

fn reply((status, v): control::Answer) -> Response {
    Response::json(status, &v)
}

/// `GET /api/v1/waf/rules`.
pub fn rules(app: &App, _req: &Request, _c: &Caller) -> Response {
    reply(control::rules(&app.services.waf, &app.store, &app.clock))
}

/// `POST /api/v1/waf/rules/apply` `{"disabled": [ids]}`.
pub fn apply(app: &App, req: &Request, _c: &Caller) -> Response {
    match app.json_body(req) {
        Ok(v) => reply(control::apply(&app.services.waf, &v)),
        Err(r) => r,
    }
}

/// `GET /api/v1/waf/rules/escalation`.
pub fn escalation(app: &App, _req: &Request, _c: &Caller) -> Response {
    reply(control::escalation(&app.services.waf))
}

/// `POST /api/v1/waf/rules/escalation` `{"rule_id": N, "escalation": bool}`.
pub fn set_escalation(app: &App, req: &Request, c: &Caller) -> Response {
    match app.json_body(req) {
        Ok(v) => reply(control::set_escalation(&app.services.waf, &v, &c.name)),
        Err(r) => r,
    }
}
