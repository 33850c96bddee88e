//! WAF requests as JSON, shared by the HTTP routes (`api/waf.rs`) and the control-socket
//! commands `waf.*` (`svc waf`, from the daemon's command table): statistics, svc's rules,
//! the rules apply and the escalation exclusions. Each answer carries its HTTP status.
//!
//! Commands: `waf.stats`, `waf.rules`, `waf.escalation` (with `rule_id` and `escalation` it
//! sets, without it lists) and `waf.apply {disabled: [ids]}`.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{json, Value};

use super::rules::{ApplyError, ApplyOutcome, ReloadState};
use super::service::WafService;
use crate::clock::SharedClock;
use crate::store::waf as store;
use crate::store::Store;

/// How long an apply waits for the reload before answering 202.
pub const APPLY_WAIT: Duration = Duration::from_secs(20);
/// Most ids in one apply.
pub const MAX_DISABLED: usize = 1000;

const DAY_MICROS: i64 = 86_400_000_000;

/// A JSON answer with its HTTP status.
pub type Answer = (u16, Value);

fn failed(status: u16, msg: impl std::fmt::Display) -> Answer {
    (status, json!({ "error": msg.to_string() }))
}

fn store_failed(e: impl std::fmt::Display) -> Answer {
    log::warn!("waf query failed: {e}");
    failed(503, format!("WAF data is unavailable: {e}"))
}

/// `waf.stats` (`GET /api/v1/waf/stats`): collector, rules loaded, denies and events in
/// 24 h, top rules, top addresses, escalation settings, reload state.
pub fn stats(waf: &WafService, store: &Store, clock: &SharedClock) -> Answer {
    let since = clock.now().as_microsecond() - DAY_MICROS;
    let s = match store.read(|c| store::stats(c, since, 10)) {
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
            "engines": super::detect::engines(std::path::Path::new("/")),
            "stale_rules": super::detect::stale_trees(
                std::path::Path::new("/"),
                std::time::SystemTime::now(),
                cfg.rules_stale_days,
            )
            .into_iter()
            .map(|(tree, days)| json!({"tree": tree, "age_days": days}))
            .collect::<Vec<_>>(),
            "rules_loaded": waf.registry.current().len(),
            "svc_rules": super::registry::shipped().len(),
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

fn reload_json(r: &ReloadState) -> Value {
    json!({
        "running": r.running,
        "ok": r.ok,
        "detail": r.detail,
    })
}

/// `waf.rules` (`GET /api/v1/waf/rules`): svc's rules with id, description, enabled,
/// staged, escalation and hits in 24 h.
pub fn rules(waf: &WafService, store: &Store, clock: &SharedClock) -> Answer {
    let since = clock.now().as_microsecond() - DAY_MICROS;
    let hits: HashMap<u32, u64> = match store.read(|c| store::hits_by_rule(c, since)) {
        Ok(h) => h.into_iter().collect(),
        Err(e) => return store_failed(e),
    };
    let disabled = match waf.disabled() {
        Ok(d) => d,
        Err(e) => return store_failed(e),
    };
    let applied = waf.reload.lock().applied.clone();
    let items: Vec<Value> = super::registry::shipped()
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

/// `waf.apply` (`POST /api/v1/waf/rules/apply`) `{"disabled": [ids]}`: write the overrides,
/// reload once (202 when the reload is still running after [`APPLY_WAIT`]).
pub fn apply(waf: &WafService, v: &Value) -> Answer {
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
    match waf.apply(&set, APPLY_WAIT) {
        Ok(ApplyOutcome::Reloaded) => (200, json!({"ok": true, "reloaded": true, "disabled": set})),
        Ok(ApplyOutcome::Pending) => (
            202,
            json!({"ok": true, "reloaded": false, "pending": true, "disabled": set}),
        ),
        Err(e @ ApplyError::UnknownRule(id)) => {
            (400, json!({"error": e.to_string(), "rule_id": id}))
        }
        Err(e @ ApplyError::NotConfigured(_)) => failed(409, e),
        Err(e @ (ApplyError::Write { .. } | ApplyError::Store(_))) => failed(500, e),
        Err(e @ ApplyError::Reload(_)) => (
            502,
            json!({"error": e.to_string(), "ok": false, "reloaded": false, "disabled": set}),
        ),
    }
}

/// `waf.escalation` (`GET /api/v1/waf/rules/escalation`): rule ids excluded from escalation.
pub fn escalation(waf: &WafService) -> Answer {
    let off = waf.exclusions.list();
    (200, json!({"excluded": off, "total": off.len()}))
}

/// `waf.escalation {rule_id, escalation}` (`POST /api/v1/waf/rules/escalation`), by `by`.
pub fn set_escalation(waf: &WafService, v: &Value, by: &str) -> Answer {
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
    match waf.set_escalation(id, !on, by) {
        Ok(changed) => (
            200,
            json!({"ok": true, "rule_id": id, "escalation": on, "changed": changed}),
        ),
        Err(e) => store_failed(e),
    }
}

/// Control-socket command `name` (`waf.*`), run by root on the host. The answer always
/// carries `status`; a failure also `error` with the route's fields.
pub fn cli(
    waf: &WafService,
    store: &Store,
    clock: &SharedClock,
    name: &str,
    args: &Value,
) -> Value {
    let (status, mut v) = match name {
        "waf.stats" => stats(waf, store, clock),
        "waf.rules" => rules(waf, store, clock),
        "waf.escalation" if args.get("rule_id").is_some() => {
            set_escalation(waf, args, "control_socket")
        }
        "waf.escalation" => escalation(waf),
        "waf.apply" => apply(waf, args),
        other => failed(400, format!("unknown command {other:?}")),
    };
    if status >= 400 && v.get("error").is_none() {
        v["error"] = json!(format!("status {status}"));
    }
    v["status"] = json!(status);
    v
}
