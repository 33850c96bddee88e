//! Threat routes (`/api/v1/threat/*`). They go through `crate::threat::control`, which
//! parses the request, calls the subsystem and shapes the answer (the control socket's
//! `threat.*` commands use it too, from the daemon's command table); these functions only
//! carry the request in and the answer out.
//!
//! | Route | Scope | Command |
//! |---|---|---|
//! | `GET /api/v1/threat/stats` | read | `stats` |
//! | `GET /api/v1/threat/top-attackers?limit=N` | read | `top_attackers` |
//! | `GET /api/v1/threat/db-stats` | read | `db_stats` |
//! | `GET /api/v1/threat/ip?ip=A` | admin | `lookup` |
//! | `GET /api/v1/threat/events?ip=A&limit=N` | admin | `events` |
//! | `GET /api/v1/threat/whitelist` | admin | `whitelist` |
//! | `POST /api/v1/threat/block-ip` `{ip}` or `{ips}` | admin | `block` |
//! | `POST /api/v1/threat/block-ip-permanent` | admin | `block_permanent` |
//! | `POST /api/v1/threat/whitelist-ip` | admin | `whitelist_ip` |
//! | `POST /api/v1/threat/temp-whitelist-ip` `{ip, hours}` | admin | `temp_whitelist` |
//! | `POST /api/v1/threat/unwhitelist-ip` | admin | `unwhitelist` |
//! | `POST /api/v1/threat/clear-ip` | admin | `clear` |

use serde_json::{json, Map, Value};

use crate::http::{Request, Response};
use crate::threat::actions::Caller as ThreatCaller;
use crate::threat::control::{self, Reply, EVENTS_LIMIT, TOP_LIMIT};

use super::auth::Caller;
use super::App;

pub(super) fn caller(req: &Request, c: &Caller) -> ThreatCaller {
    ThreatCaller {
        name: c.name.clone(),
        protect: Some(req.remote.ip()),
    }
}

pub(super) fn respond(r: Reply) -> Response {
    Response::json(r.status, &r.body)
}

fn get(app: &App, req: &Request, c: &Caller, cmd: &str, args: Value) -> Response {
    respond(control::run(
        &app.services.threat,
        cmd,
        &args,
        &caller(req, c),
    ))
}

fn post(app: &App, req: &Request, c: &Caller, cmd: &str) -> Response {
    match app.json_body(req) {
        Ok(v) => respond(control::run(&app.services.threat, cmd, &v, &caller(req, c))),
        Err(r) => r,
    }
}

fn with_limit(
    req: &Request,
    (_, max): (u64, u64),
    m: &mut Map<String, Value>,
) -> Result<(), Response> {
    if let Some(l) = super::params::uint_param(req, "limit", 1, max)? {
        m.insert("limit".into(), l.into());
    }
    Ok(())
}

fn with_ip(req: &Request, m: &mut Map<String, Value>) -> Result<(), Response> {
    super::data::required(req, "ip")?;
    let ip = super::params::ip_param(req, "ip")?
        .ok_or_else(|| Response::error(400, "missing parameter: ip"))?;
    m.insert("ip".into(), ip.to_string().into());
    Ok(())
}

pub fn stats(app: &App, req: &Request, c: &Caller) -> Response {
    get(app, req, c, "stats", json!({}))
}

pub fn db_stats(app: &App, req: &Request, c: &Caller) -> Response {
    get(app, req, c, "db_stats", json!({}))
}

pub fn top_attackers(app: &App, req: &Request, c: &Caller) -> Response {
    let mut m = Map::new();
    if let Err(r) = with_limit(req, TOP_LIMIT, &mut m) {
        return r;
    }
    get(app, req, c, "top_attackers", Value::Object(m))
}

pub fn ip(app: &App, req: &Request, c: &Caller) -> Response {
    let mut m = Map::new();
    if let Err(r) = with_ip(req, &mut m) {
        return r;
    }
    get(app, req, c, "lookup", Value::Object(m))
}

pub fn events(app: &App, req: &Request, c: &Caller) -> Response {
    let mut m = Map::new();
    if let Err(r) = with_ip(req, &mut m).and_then(|_| with_limit(req, EVENTS_LIMIT, &mut m)) {
        return r;
    }
    get(app, req, c, "events", Value::Object(m))
}

pub fn whitelist(app: &App, req: &Request, c: &Caller) -> Response {
    get(app, req, c, "whitelist", json!({}))
}

pub fn block_ip(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "block")
}

pub fn block_ip_permanent(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "block_permanent")
}

pub fn whitelist_ip(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "whitelist_ip")
}

pub fn temp_whitelist_ip(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "temp_whitelist")
}

pub fn unwhitelist_ip(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "unwhitelist")
}

pub fn clear_ip(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "clear")
}
