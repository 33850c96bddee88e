//! Undo routes (`webui.undo.v1`): `GET /api/v1/undo/pending` lists the caller's undoable
//! changes (newest first, each with `undo_token`, `action`, `ips`, `created_at`,
//! `expires_at`, `valid`), `POST /api/v1/undo/run` `{"undo_token": T}` reverses one (409
//! when a later decision invalidated it, 404 for an unknown or expired token or another
//! caller's). Both admin scope; the changes come from the threat routes.

use serde_json::json;

use crate::http::{Request, Response};
use crate::threat::control;

use super::auth::Caller;
use super::threat::{caller, respond};
use super::App;

pub fn pending(app: &App, req: &Request, c: &Caller) -> Response {
    respond(control::run(
        &app.services.threat,
        "undo_pending",
        &json!({}),
        &caller(req, c),
    ))
}

pub fn run(app: &App, req: &Request, c: &Caller) -> Response {
    match app.json_body(req) {
        Ok(v) => respond(control::run(
            &app.services.threat,
            "undo_run",
            &v,
            &caller(req, c),
        )),
        Err(r) => r,
    }
}
