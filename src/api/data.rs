//! Data routes: enriched findings, finding detail, audit, export, blocked IPs; and the
//! parameter helpers the other data route files share.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::findings::suppress;
use crate::findings::{evidence, Finding, Severity};
use crate::geoip::Geo;
use crate::http::{Request, Response};
use crate::store::{data as sdata, StoreError};
use crate::timefmt::rfc3339;

use super::accounts::Users;
use super::auth::Caller;
use super::{fixes, App};

/// Dispatches listed in a finding's action history at most.
pub const DETAIL_DISPATCHES: usize = 100;
/// Audit entries sent at most (and the default).
pub const AUDIT_MAX: u64 = 200;

/// A query parameter, trimmed; empty or whitespace-only is absent.
pub(super) fn param(req: &Request, name: &str) -> Option<String> {
    req.query_param(name)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// A required query parameter, exactly as sent; missing or blank is a 400 naming it.
pub(super) fn required(req: &Request, name: &str) -> Result<String, Response> {
    match req.query_param(name) {
        Some(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(Response::error(400, &format!("missing parameter: {name}"))),
    }
}

/// An optional integer parameter within `min..=max`; anything else is a 400 naming it
/// (canonical digits only: [`super::params::uint_param`]).
pub(super) fn int_param(
    req: &Request,
    name: &str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, Response> {
    super::params::uint_param(req, name, min, max)
}

/// 503 for a store that could not answer.
pub(super) fn store_failed(e: StoreError) -> Response {
    Response::error(503, &format!("store unavailable: {e}"))
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(resp) => return resp,
        }
    };
}
pub(super) use tri;

/// A finding as an object, to which routes add keys.
pub(super) fn finding_object(f: &Finding) -> Map<String, Value> {
    match serde_json::to_value(f) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// One item of the enriched route: the finding's fields plus the enrichment.
#[derive(Serialize)]
struct Enriched<'a> {
    #[serde(flatten)]
    finding: &'a Finding,
    #[serde(skip_serializing_if = "Option::is_none")]
    geo: Option<Geo>,
    /// The owner of the path, for findings that name no account.
    #[serde(rename = "account", skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    fix: &'static str,
    /// Whether `POST /api/v1/fix` can fix it, and what that does.
    fixable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix_action: Option<crate::remedy::FixAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix_description: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    block_ip: Option<String>,
}

/// Adds `geo`, `account` (derived from the path's owner when the finding has none),
/// `fix` and, for checks that report an attacker, `block_ip`.
fn enrich<'a>(app: &App, f: &'a Finding, users: &mut Option<Users>) -> Enriched<'a> {
    let geo = match (&app.services.geoip, f.ip) {
        (Some(g), Some(ip)) => g.lookup(ip),
        _ => None,
    };
    let owner = if f.account.is_none() {
        f.path.as_deref().and_then(|p| {
            let users = users.get_or_insert_with(|| Users::load(app.services.jobs.context()));
            users.owner_of(std::path::Path::new(p))
        })
    } else {
        None
    };
    let block_ip = evidence::reports_attacker_address(&f.check)
        .then_some(f.ip)
        .flatten()
        .map(|ip| ip.to_string());
    let action = crate::remedy::plan(&f.check);
    Enriched {
        finding: f,
        geo,
        owner,
        fix: fixes::fix_for(&f.check),
        fixable: action.is_some(),
        fix_action: action,
        fix_description: action.map(|a| a.description()),
        block_ip,
    }
}

#[derive(Serialize)]
struct CheckType {
    count: u64,
    severity: Severity,
}

#[derive(Serialize)]
struct SeverityCounts {
    critical: u64,
    high: u64,
    warning: u64,
}

#[derive(Serialize)]
struct EnrichedPage<'a> {
    items: Vec<Enriched<'a>>,
    total: usize,
    offset: usize,
    limit: usize,
    truncated: bool,
    version: u64,
    check_types: BTreeMap<&'a str, CheckType>,
    severity_counts: SeverityCounts,
}

/// `GET /api/v1/findings/enriched?limit=&offset=&fields=`: a page of the active set in
/// severity-then-newest order (`limit` 1-10,000, default 1,000), with totals, per-check and
/// per-severity counts over all rows; `fields=version` answers `{version, total}` only.
pub fn enriched(app: &App, req: &Request, _c: &Caller) -> Response {
    match param(req, "fields").as_deref() {
        None => {}
        Some("version") => {
            let (version, total) = app.services.engine.version_and_len();
            return Response::json(200, &json!({ "version": version, "total": total }));
        }
        Some(other) => {
            return Response::error(
                400,
                &format!("invalid fields {other:?}: the only accepted value is \"version\""),
            )
        }
    }
    let (offset, limit) = tri!(super::findings::paging(req));
    let listing = app.services.engine.listing();
    let snap = listing.snapshot();
    let counts = snap.counts();
    let check_types: BTreeMap<&str, CheckType> = counts
        .by_check
        .iter()
        .filter_map(|(k, c)| {
            c.highest().map(|severity| {
                (
                    k.as_str(),
                    CheckType {
                        count: c.total(),
                        severity,
                    },
                )
            })
        })
        .collect();
    let (critical, high, warning) = snap.severity_counts();
    let page = listing.page(offset, limit);
    let total = listing.items().len();
    let truncated = offset.saturating_add(page.len()) < total;
    let mut users = None;
    let items: Vec<Enriched<'_>> = page.iter().map(|f| enrich(app, f, &mut users)).collect();
    Response::json(
        200,
        &EnrichedPage {
            items,
            total,
            offset,
            limit,
            truncated,
            version: snap.version(),
            check_types,
            severity_counts: SeverityCounts {
                critical,
                high,
                warning,
            },
        },
    )
}

fn action(at: Timestamp, kind: &str, mut extra: Map<String, Value>) -> (Timestamp, Value) {
    extra.insert("at".into(), json!(rfc3339(at)));
    extra.insert("action".into(), json!(kind));
    (at, Value::Object(extra))
}

fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// `GET /api/v1/finding-detail?check=&message=`: the finding (active, or rebuilt from its
/// history) with `active` and its action history, newest first.
pub fn finding_detail(app: &App, req: &Request, _c: &Caller) -> Response {
    let check = tri!(required(req, "check"));
    let message = tri!(required(req, "message"));
    let active = app
        .services
        .engine
        .with_active(|a| a.get(&check, &message).cloned());
    let (finding, is_active) = match active {
        Some(f) => (f, true),
        None => {
            let (c2, m2) = (check.clone(), message.clone());
            match app
                .store
                .read(move |c| sdata::finding_from_history(c, &c2, &m2))
            {
                Ok(Some(f)) => (f, false),
                Ok(None) => {
                    return Response::error(
                        404,
                        &format!("no finding of check {check:?} with that message"),
                    )
                }
                Err(e) => return store_failed(e),
            }
        }
    };
    let mut actions: Vec<(Timestamp, Value)> = Vec::new();
    let (c2, m2) = (check.clone(), message.clone());
    let (dispatches, dispatches_total) = match app
        .store
        .read(move |c| sdata::history_of(c, &c2, &m2, DETAIL_DISPATCHES))
    {
        Ok(v) => v,
        Err(e) => return store_failed(e),
    };
    for d in dispatches {
        actions.push(action(
            d.at,
            "dispatch",
            fields(json!({ "severity": d.severity })),
        ));
    }
    if let Some(path) = finding.path.clone() {
        let c2 = check.clone();
        let entries = match app
            .store
            .read(move |c| crate::store::quarantine::for_path(c, &c2, &path))
        {
            Ok(v) => v,
            Err(e) => return store_failed(e),
        };
        for q in entries {
            actions.push(action(
                q.quarantined_at,
                "quarantine",
                fields(json!({ "id": q.id, "reason": q.reason })),
            ));
            if let Some(at) = q.restored_at {
                actions.push(action(at, "restore", fields(json!({ "id": q.id }))));
            }
        }
    }
    if let Some(ip) = finding.ip {
        match app.store.read(move |c| sdata::blocked_ip(c, ip)) {
            Ok(Some(b)) => {
                let mut m = fields(json!({ "ip": b.ip, "reason": b.reason, "source": b.source }));
                if let Some(e) = b.expires {
                    m.insert("expires".into(), json!(rfc3339(e)));
                }
                actions.push(action(b.created, "block", m));
            }
            Ok(None) => {}
            Err(e) => return store_failed(e),
        }
    }
    let sup = &app.services.suppressions;
    let now = sup.now();
    let mut suppressed = false;
    for r in sup
        .rules()
        .iter()
        .filter(|r| suppress::matches_fields(r, &finding))
    {
        let in_force = suppress::in_force(r, now);
        suppressed |= in_force;
        let mut m = fields(json!({
            "id": r.id, "reason": r.reason, "by": r.created_by, "in_force": in_force,
        }));
        if let Some(e) = r.expires {
            m.insert("expires".into(), json!(rfc3339(e)));
        }
        actions.push(action(r.created, "suppress", m));
    }
    // Newest first; the sort is stable, so same-instant entries keep their kind order.
    actions.sort_by_key(|a| std::cmp::Reverse(a.0));
    let mut out = finding_object(&finding);
    out.insert("active".into(), json!(is_active));
    out.insert("suppressed".into(), json!(suppressed));
    out.insert("fix".into(), json!(fixes::fix_for(&finding.check)));
    let action = crate::remedy::plan(&finding.check);
    out.insert("fixable".into(), json!(action.is_some()));
    if let Some(a) = action {
        out.insert("fix_action".into(), json!(a));
        out.insert("fix_description".into(), json!(a.description()));
    }
    out.insert("dispatches_total".into(), json!(dispatches_total));
    out.insert(
        "actions".into(),
        Value::Array(actions.into_iter().map(|(_, v)| v).collect()),
    );
    Response::json(200, &Value::Object(out))
}

/// `GET /api/v1/audit?limit=`: the newest entries (200 at most), with `limit` and
/// `truncated` and no `total`.
pub fn audit(app: &App, req: &Request, _c: &Caller) -> Response {
    let limit = tri!(int_param(req, "limit", 1, AUDIT_MAX)).unwrap_or(AUDIT_MAX) as usize;
    let mut rows = match app.store.read(move |c| sdata::audit_newest(c, limit + 1)) {
        Ok(r) => r,
        Err(e) => return store_failed(e),
    };
    let truncated = rows.len() > limit;
    rows.truncate(limit);
    Response::json(
        200,
        &json!({ "items": rows, "offset": 0, "limit": limit, "truncated": truncated }),
    )
}

/// `GET /api/v1/export`: suppressions and the whitelist.
pub fn export(app: &App, _req: &Request, _c: &Caller) -> Response {
    let read = app
        .store
        .read(|c| Ok((crate::store::suppressions::list(c)?, sdata::whitelist(c)?)));
    match read {
        Ok((suppressions, whitelist)) => Response::json(
            200,
            &json!({
                "suppressions": suppressions,
                "whitelist": whitelist,
                "exported_at": rfc3339(app.clock.now()),
            }),
        ),
        Err(e) => store_failed(e),
    }
}

/// Entries `/api/v1/blocked-ips` sends by default, and at most.
pub const BLOCKED_DEFAULT_LIMIT: u64 = 1_000;
pub const BLOCKED_MAX_LIMIT: u64 = 100_000;

/// `GET /api/v1/blocked-ips?limit=&offset=`: blocks and dry-run records, newest first, each
/// `ip`, `reason`, `source`, `created_at`, `expires_at` (omitted when permanent),
/// `permanent`, and `dry_run: true` on recorded dry-run blocks. From the engine's memory;
/// from the store while the engine is absent.
pub fn blocked_ips(app: &App, req: &Request, _c: &Caller) -> Response {
    let limit = tri!(int_param(req, "limit", 1, BLOCKED_MAX_LIMIT)).unwrap_or(BLOCKED_DEFAULT_LIMIT)
        as usize;
    let offset = tri!(int_param(req, "offset", 0, i64::MAX as u64)).unwrap_or(0) as usize;
    let all = match &app.services.firewall {
        crate::firewall::Handle::Active(f) => f.list(),
        crate::firewall::Handle::Absent(_) => {
            let now = app.clock.now();
            match app.store.read(|c| crate::firewall::stored_list(c, now)) {
                Ok(v) => v,
                Err(e) => return store_failed(e),
            }
        }
    };
    let total = all.len();
    let items: Vec<Value> = all
        .iter()
        .skip(offset)
        .take(limit)
        .map(|l| l.to_json())
        .collect();
    let truncated = offset.saturating_add(items.len()) < total;
    Response::json(
        200,
        &json!({ "items": items, "total": total, "offset": offset, "limit": limit, "truncated": truncated }),
    )
}
