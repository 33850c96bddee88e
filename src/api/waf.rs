//! WAF routes (thin: the logic is in `crate::waf` and `crate::store::waf`).
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

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{json, Value};

use crate::http::{Request, Response};
use crate::store::waf::{self as store, Filter, Row};
use crate::timefmt::rfc3339;
use crate::waf::rules::{ApplyError, ApplyOutcome};

use super::auth::Caller;
use super::daterange;
use super::history::{parse_count, parse_severities, server_tz, ParamError};
use super::App;

/// Default and largest page.
pub const DEFAULT_LIMIT: u64 = 100;
pub const MAX_LIMIT: u64 = 1000;
/// How long an apply waits for the reload before answering 202.
pub const APPLY_WAIT: Duration = Duration::from_secs(20);
/// Most ids in one apply.
pub const MAX_DISABLED: usize = 1000;

const DAY_MICROS: i64 = 86_400_000_000;

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
    reply(stats_value(app))
}

/// A JSON answer with its status (routes and control-socket commands share them).
type Answer = (u16, Value);

fn reply((status, v): Answer) -> Response {
    Response::json(status, &v)
}

fn failed(status: u16, msg: impl std::fmt::Display) -> Answer {
    (status, json!({ "error": msg.to_string() }))
}

fn store_failed(e: impl std::fmt::Display) -> Answer {
    log::warn!("waf query failed: {e}");
    failed(503, format!("WAF data is unavailable: {e}"))
}

fn stats_value(app: &App) -> Answer {
    let waf = &app.services.waf;
    let since = app.clock.now().as_microsecond() - DAY_MICROS;
    let s = match app.store.read(|c| store::stats(c, since, 10)) {
        Ok(s) => s,
        Err(e) => return store_failed(e),
    };
    let c = &waf.counters;
    let cfg = waf.cfg.read().clone();
    let reload = waf.reload.lock().clone();
    (
        200,
        json!({
            "enabled": cfg.enabled,
            "collector": {
                "running": waf.collector_running(),
                "files": waf.paths.iter().map(|p| crate::text::escape_path(p).into_owned()).collect::<Vec<_>>(),
                "events_total": c.events.load(Ordering::Relaxed),
                "denies_total": c.denies.load(Ordering::Relaxed),
                "duplicates_total": c.duplicates.load(Ordering::Relaxed),
                "dropped_total": c.dropped.load(Ordering::Relaxed),
                "unparsed_total": c.unparsed.load(Ordering::Relaxed),
                "escalations_total": c.escalations.load(Ordering::Relaxed),
                "evicted_addresses_total": c.evicted.load(Ordering::Relaxed),
            },
            "engines": crate::waf::detect::engines(std::path::Path::new("/")),
            "stale_rules": crate::waf::detect::stale_trees(
                std::path::Path::new("/"),
                std::time::SystemTime::now(),
                cfg.rules_stale_days,
            )
            .into_iter()
            .map(|(tree, days)| json!({"tree": tree, "age_days": days}))
            .collect::<Vec<_>>(),
            "rules_loaded": waf.registry.current().len(),
            "svc_rules": crate::waf::registry::shipped().len(),
            "denies_24h": s.denies,
            "events_24h": s.events,
            "top_rules": s.top_rules.iter().map(|(r, n)| json!({"rule_id": r, "count": n})).collect::<Vec<_>>(),
            "top_ips": s.top_ips.iter().map(|(ip, n)| json!({"ip": ip, "count": n})).collect::<Vec<_>>(),
            "escalation": {
                "denies": cfg.escalation_denies,
                "window_minutes": cfg.escalation_window_minutes,
                "excluded_rules": waf.exclusions.list(),
            },
            "management": {
                "configured": cfg.management_missing().is_empty(),
                "missing": cfg.management_missing(),
                "reload": reload_json(&reload),
            },
        }),
    )
}

fn reload_json(r: &crate::waf::rules::ReloadState) -> Value {
    json!({
        "running": r.running,
        "ok": r.ok,
        "detail": r.detail,
    })
}

/// `GET /api/v1/waf/rules`.
pub fn rules(app: &App, _req: &Request, _c: &Caller) -> Response {
    reply(rules_value(app))
}

fn rules_value(app: &App) -> Answer {
    let waf = &app.services.waf;
    let since = app.clock.now().as_microsecond() - DAY_MICROS;
    let hits: HashMap<u32, u64> = match app.store.read(|c| store::hits_by_rule(c, since)) {
        Ok(h) => h.into_iter().collect(),
        Err(e) => return store_failed(e),
    };
    let disabled = match waf.disabled() {
        Ok(d) => d,
        Err(e) => return store_failed(e),
    };
    let applied = waf.reload.lock().applied.clone();
    let items: Vec<Value> = crate::waf::registry::shipped()
        .iter()
        .map(|r| {
            let off = disabled.contains(&r.id);
            // Staged: the stored state differs from what the web server last reloaded
            // (unknown since start: only a disabled rule is staged).
            let staged = match &applied {
                Some(a) => a.contains(&r.id) != off,
                None => off,
            };
            json!({
                "id": r.id,
                "description": r.description,
                "action": r.action.map(|a| a.as_str()),
                "enabled": !off,
                "staged": staged,
                "escalation": !waf.exclusions.is_off(r.id),
                "hits_24h": hits.get(&r.id).copied().unwrap_or(0),
            })
        })
        .collect();
    let total = items.len();
    (
        200,
        json!({
            "items": items,
            "total": total,
            "offset": 0,
            "limit": total,
            "truncated": false,
        }),
    )
}

/// `POST /api/v1/waf/rules/apply` `{"disabled": [ids]}`.
pub fn apply(app: &App, req: &Request, _c: &Caller) -> Response {
    match app.json_body(req) {
        Ok(v) => reply(apply_value(app, &v)),
        Err(r) => r,
    }
}

fn apply_value(app: &App, v: &Value) -> Answer {
    let Some(list) = v.get("disabled").and_then(Value::as_array) else {
        return failed(400, "disabled: expected an array of rule ids");
    };
    if list.len() > MAX_DISABLED {
        return failed(400, format!("disabled: at most {MAX_DISABLED} ids"));
    }
    let mut set = BTreeSet::new();
    for x in list {
        match x.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(id) => {
                set.insert(id);
            }
            None => return failed(400, format!("disabled: {x} is not a rule id")),
        }
    }
    match app.services.waf.apply(&set, APPLY_WAIT) {
        Ok(ApplyOutcome::Reloaded) => (200, json!({"ok": true, "reloaded": true, "disabled": set})),
        Ok(ApplyOutcome::Pending) => (
            202,
            json!({"ok": true, "reloaded": false, "pending": true, "disabled": set}),
        ),
        Err(e @ ApplyError::UnknownRule(id)) => {
            (400, json!({"error": e.to_string(), "rule_id": id}))
        }
        Err(e @ ApplyError::NotConfigured(_)) => failed(409, e),
        Err(e @ ApplyError::Write(_)) => failed(500, e),
        Err(e @ ApplyError::Reload(_)) => (
            502,
            json!({"error": e.to_string(), "ok": false, "reloaded": false, "disabled": set}),
        ),
    }
}

/// `GET /api/v1/waf/rules/escalation`.
pub fn escalation(app: &App, _req: &Request, _c: &Caller) -> Response {
    reply(escalation_value(app))
}

fn escalation_value(app: &App) -> Answer {
    let off = app.services.waf.exclusions.list();
    (200, json!({"excluded": off, "total": off.len()}))
}

/// `POST /api/v1/waf/rules/escalation` `{"rule_id": N, "escalation": bool}`.
pub fn set_escalation(app: &App, req: &Request, c: &Caller) -> Response {
    match app.json_body(req) {
        Ok(v) => reply(set_escalation_value(app, &v, &c.name)),
        Err(r) => r,
    }
}

fn set_escalation_value(app: &App, v: &Value, by: &str) -> Answer {
    let Some(id) = v
        .get("rule_id")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
    else {
        return failed(400, "rule_id: expected a rule id");
    };
    let Some(on) = v.get("escalation").and_then(Value::as_bool) else {
        return failed(400, "escalation: expected true or false");
    };
    match app.services.waf.set_escalation(id, !on, by) {
        Ok(changed) => (
            200,
            json!({"ok": true, "rule_id": id, "escalation": on, "changed": changed}),
        ),
        Err(e) => store_failed(e),
    }
}

/// Control-socket commands `waf.*` (`svc waf`): `waf.stats`, `waf.rules`,
/// `waf.escalation` (with `rule_id` and `escalation` it sets, without it lists) and
/// `waf.apply`. A failure answers `{"error": ...}` with the route's fields.
pub fn control(app: &App, name: &str, args: &Value) -> Value {
    let (status, mut v) = match name {
        "waf.stats" => stats_value(app),
        "waf.rules" => rules_value(app),
        "waf.escalation" if args.get("rule_id").is_some() => {
            set_escalation_value(app, args, "control_socket")
        }
        "waf.escalation" => escalation_value(app),
        "waf.apply" => apply_value(app, args),
        other => failed(400, format!("unknown command {other:?}")),
    };
    if status >= 400 && v.get("error").is_none() {
        v["error"] = json!(format!("status {status}"));
    }
    v["status"] = json!(status);
    v
}
