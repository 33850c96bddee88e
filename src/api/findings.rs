//! Findings routes.

use serde_json::json;

use crate::http::{Request, Response};

use super::auth::Caller;
use super::App;

/// `GET /api/v1/findings`: the active set in the list envelope, highest severity first,
/// newest first within a severity.
pub fn list(app: &App, _req: &Request, _c: &Caller) -> Response {
    let items = app.services.engine.active();
    Response::json(200, &json!({ "items": items, "total": items.len() }))
}
