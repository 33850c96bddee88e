//! `/api/v1/sessions` routes.

use crate::http::{Request, Response};

use super::auth::Caller;
use super::App;

pub fn list(app: &App, _req: &Request, c: &Caller) -> Response {
    let current = c.session.as_ref().map(|(id, _)| id.as_str());
    let items = app.sessions.list(current);
    Response::json(
        200,
        &serde_json::json!({ "items": items, "total": items.len() }),
    )
}

pub fn revoke_all(app: &App, _req: &Request, _c: &Caller) -> Response {
    match app.sessions.revoke_all() {
        Ok(n) => Response::json(200, &serde_json::json!({ "ok": true, "revoked": n })),
        Err(e) => Response::error(503, &format!("sessions could not be revoked: {e}")),
    }
}

pub fn revoke_one(app: &App, req: &Request, _c: &Caller) -> Response {
    let id = req.path.rsplit('/').next().unwrap_or("");
    match app.sessions.revoke(id) {
        Ok(true) => Response::json(200, &serde_json::json!({ "ok": true })),
        Ok(false) => Response::error(404, "no such session"),
        Err(e) => Response::error(503, &format!("session could not be revoked: {e}")),
    }
}
