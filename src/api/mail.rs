//! Mail antivirus routes: statistics and watcher status (read), the quarantined-mail list
//! and its release and delete actions (admin, audited, CSRF for cookie callers).
//!
//! - `GET /api/v1/email/stats`: `scanned`, `infected`, `quarantined`, `incomplete`
//!   (since start), `since_start` and `last_24h` with the same keys plus `errors` and
//!   per-engine figures (`engines.clamd`, `engines.signatures`).
//! - `GET /api/v1/email/quarantine?offset=&limit=`: list envelope (`items`, `total`,
//!   `offset`, `limit`, `truncated`), newest first; `limit` 1 to 500, default 100.
//! - `GET /api/v1/email/av/status`: `active`, `spool_path`, `engines` with health and
//!   signature versions, the watcher, staging and quarantine state.
//! - `POST /api/v1/email/quarantine/<id>/release` and `.../<id>/delete`: 200 with the new
//!   state; unknown id 404; an entry in the wrong state or whose spool names are taken
//!   409; the MTA delivering the message 409; storage failures 500 naming the affected
//!   paths (the metadata is kept).

use serde_json::json;

use super::auth::Caller;
use super::params::uint_param;
use super::App;
use crate::http::{Request, Response};
use crate::mail::quarantine::QError;

/// Largest page of the quarantine list.
pub const MAX_LIMIT: u64 = 500;
/// Page size when none is given.
pub const DEFAULT_LIMIT: u64 = 100;

pub fn stats(app: &App, _req: &Request, _c: &Caller) -> Response {
    Response::json(200, &app.services.mail.stats())
}

pub fn av_status(app: &App, _req: &Request, _c: &Caller) -> Response {
    Response::json(200, &app.services.mail.status())
}

pub fn quarantine(app: &App, req: &Request, _c: &Caller) -> Response {
    let offset = match uint_param(req, "offset", 0, u32::MAX as u64) {
        Ok(v) => v.unwrap_or(0),
        Err(r) => return r,
    };
    let limit = match uint_param(req, "limit", 1, MAX_LIMIT) {
        Ok(v) => v.unwrap_or(DEFAULT_LIMIT),
        Err(r) => return r,
    };
    match app.services.mail.list(offset, limit) {
        Ok((items, total)) => {
            let truncated = offset.saturating_add(items.len() as u64) < total;
            Response::json(
                200,
                &json!({
                    "items": items,
                    "total": total,
                    "offset": offset,
                    "limit": limit,
                    "truncated": truncated,
                }),
            )
        }
        Err(e) => error(&e),
    }
}

/// `POST /api/v1/email/quarantine/<id>/release|delete`.
pub fn action(app: &App, req: &Request, c: &Caller) -> Response {
    let mut segs = req.path.rsplit('/');
    let (verb, id) = (segs.next().unwrap_or(""), segs.next().unwrap_or(""));
    let r = match verb {
        "release" => app.services.mail.release(id, &c.name),
        "delete" => app.services.mail.delete(id, &c.name),
        _ => return Response::error(404, "unknown action: use release or delete"),
    };
    match r {
        Ok(v) => Response::json(200, &v),
        Err(e) => error(&e),
    }
}

fn error(e: &QError) -> Response {
    let status = match e {
        QError::NotFound => 404,
        QError::State(_) | QError::Locked | QError::Conflict(_) => 409,
        QError::Store(_) => 503,
        QError::Missing(_) | QError::Storage { .. } => 500,
    };
    let msg = crate::text::for_log(&e.to_string(), 2000);
    let paths = e.paths();
    if paths.is_empty() {
        Response::error(status, &msg)
    } else {
        Response::json(status, &json!({"error": msg, "paths": paths}))
    }
}

/// Control-socket commands `mail.status`, `mail.stats`, `mail.list`, `mail.release`,
/// `mail.delete` (`svc mail`); releases and deletes are audited with actor `cli`, via
/// `control`. Failures answer `{"error": ..., "status": N}`.
pub fn control(app: &App, cmd: &str, args: &serde_json::Value) -> serde_json::Value {
    let mail = &app.services.mail;
    let id = args
        .get("id")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    let fail = |e: QError| {
        let status = match e {
            QError::NotFound => 404,
            QError::State(_) | QError::Locked | QError::Conflict(_) => 409,
            QError::Store(_) => 503,
            _ => 500,
        };
        json!({"error": crate::text::for_log(&e.to_string(), 2000), "status": status, "paths": e.paths()})
    };
    let (action, result) = match cmd {
        "mail.status" => return mail.status(),
        "mail.stats" => return mail.stats(),
        "mail.list" => {
            let limit = args
                .get("limit")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(DEFAULT_LIMIT)
                .clamp(1, MAX_LIMIT);
            let offset = args
                .get("offset")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0);
            return match mail.list(offset, limit) {
                Ok((items, total)) => {
                    json!({"items": items, "total": total, "offset": offset, "limit": limit,
                    "truncated": offset.saturating_add(items.len() as u64) < total})
                }
                Err(e) => fail(e),
            };
        }
        "mail.release" => ("email.quarantine.release", mail.release(id, "cli")),
        "mail.delete" => ("email.quarantine.delete", mail.delete(id, "cli")),
        other => {
            return json!({"error": format!("unknown command {}", crate::text::for_log(other, 64))})
        }
    };
    let outcome = match &result {
        Ok(_) => "ok",
        Err(QError::NotFound) => "not_found",
        Err(QError::State(_) | QError::Locked | QError::Conflict(_)) => "refused",
        Err(_) => "error",
    };
    app.audit.record(super::audit::Entry {
        at: app.clock.now(),
        actor: "cli",
        via: "control",
        action,
        target: &crate::text::cut(id, 64),
        outcome,
        remote_ip: "",
    });
    result.unwrap_or_else(fail)
}
