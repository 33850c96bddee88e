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
//!
//! The list page and the status of each failure come from `crate::mail::control`, which the
//! control socket's `mail.*` commands use too.

use serde_json::json;

use super::auth::Caller;
use super::params::uint_param;
use super::App;
use crate::http::{Request, Response};
use crate::mail::control::{self, DEFAULT_LIMIT, MAX_LIMIT};
use crate::mail::quarantine::QError;

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
    match control::page(&app.services.mail, offset, limit) {
        Ok(v) => Response::json(200, &v),
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
    let (status, msg) = (control::status(e), control::message(e));
    let paths = e.paths();
    if paths.is_empty() {
        Response::error(status, &msg)
    } else {
        Response::json(status, &json!({"error": msg, "paths": paths}))
    }
}
