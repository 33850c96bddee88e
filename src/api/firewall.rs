//! Firewall routes (admin scope; writes audited and CSRF-checked by the router). They go
//! through `crate::firewall::control`, which parses the request, calls the engine and shapes
//! the answer (the control socket's `firewall.*` commands use it too, from the daemon's
//! command table); these functions only carry the request in and the answer out.
//!
//! | Route | Command |
//! |---|---|
//! | `GET /api/v1/firewall/status` | `status` |
//! | `GET /api/v1/firewall/check?ip=A` | `check` |
//! | `POST /api/v1/firewall/unban` `{ip}` | `unblock` |
//! | `POST /api/v1/firewall/allow-ip` `{ip, reason?, duration_seconds?}` | `allow` |
//! | `POST /api/v1/firewall/remove-allow` `{ip}` | `unallow` |
//! | `POST /api/v1/firewall/deny-subnet` `{subnet, reason?}` | `deny_subnet` |
//! | `POST /api/v1/firewall/remove-subnet` `{subnet}` | `remove_subnet` |
//! | `POST /api/v1/firewall/flush` | `flush` |
//! | `GET /api/v1/settings/firewall/rollback` | `rollback` |
//! | `POST /api/v1/settings/firewall/tentative-apply` `{changes, timeout_min}` | `tentative_apply` |
//! | `POST /api/v1/settings/firewall/confirm` | `confirm` |
//! | `POST /api/v1/settings/firewall/revert` | `revert` |

use serde_json::json;

use crate::firewall::control::{self, Reply};
use crate::firewall::Actor;
use crate::http::{Request, Response};

use super::auth::Caller;
use super::App;

fn actor(req: &Request, c: &Caller) -> Actor {
    Actor::Operator {
        name: c.name.clone(),
        protect: Some(req.remote.ip()),
    }
}

fn respond(r: Reply) -> Response {
    Response::json(r.status, &r.body)
}

fn post(app: &App, req: &Request, c: &Caller, cmd: &str) -> Response {
    match app.json_body(req) {
        Ok(v) => respond(control::run(
            &app.services.firewall,
            cmd,
            &v,
            &actor(req, c),
        )),
        Err(r) => r,
    }
}

pub fn status(app: &App, req: &Request, c: &Caller) -> Response {
    respond(control::run(
        &app.services.firewall,
        "status",
        &json!({}),
        &actor(req, c),
    ))
}

pub fn check(app: &App, req: &Request, c: &Caller) -> Response {
    let ip = match super::data::required(req, "ip") {
        Ok(v) => v,
        Err(r) => return r,
    };
    respond(control::run(
        &app.services.firewall,
        "check",
        &json!({ "ip": ip }),
        &actor(req, c),
    ))
}

pub fn unban(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "unblock")
}

pub fn allow_ip(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "allow")
}

pub fn remove_allow(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "unallow")
}

pub fn deny_subnet(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "deny_subnet")
}

pub fn remove_subnet(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "remove_subnet")
}

pub fn flush(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "flush")
}

pub fn rollback(app: &App, req: &Request, c: &Caller) -> Response {
    respond(control::run(
        &app.services.firewall,
        "rollback",
        &json!({}),
        &actor(req, c),
    ))
}

pub fn tentative_apply(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "tentative_apply")
}

pub fn confirm(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "confirm")
}

pub fn revert(app: &App, req: &Request, c: &Caller) -> Response {
    post(app, req, c, "revert")
}
