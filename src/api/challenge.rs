//! `GET /api/v1/challenge/stats` (read scope): the proof-of-work challenge's counts
//! (`crate::challenge`). While the challenge is off: `enabled: false` and zero counts.

use serde_json::json;

use super::auth::Caller;
use super::App;
use crate::http::{Request, Response};

pub fn stats(app: &App, _req: &Request, _c: &Caller) -> Response {
    match &app.services.challenge {
        Some(c) => Response::json(200, &c.stats()),
        None => Response::json(
            200,
            &json!({
                "enabled": false, "pending": 0, "escalated": 0,
                "routed_by_check": {}, "recent": [],
            }),
        ),
    }
}
