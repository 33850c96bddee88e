//! Console preferences (`webui.prefs.v1`): `GET/POST /api/v1/prefs/user` and
//! `/api/v1/prefs/views`, one JSON object per credential (the token's name; a browser
//! session counts as the token it logged in with) and kind, kept in the store's `kv` table.
//! GET answers the stored object (`{}` when none); POST replaces it with the body, any JSON
//! object of at most [`MAX_PREFS_BYTES`] (larger: 413, not an object: 400) and answers
//! `{ok: true}`.

use serde_json::{json, Value};

use crate::http::{Request, Response};

use super::auth::Caller;
use super::data::store_failed;
use super::App;

/// Largest stored preferences object, in bytes of its JSON text.
pub const MAX_PREFS_BYTES: usize = 64 * 1024;

/// The preference kind of the route (`user` or `views`).
fn kind(req: &Request) -> &'static str {
    if req.path.ends_with("/views") {
        "views"
    } else {
        "user"
    }
}

fn key(kind: &str, c: &Caller) -> String {
    format!("prefs.{kind}.{}", c.name)
}

/// `GET /api/v1/prefs/user|views`.
pub fn get(app: &App, req: &Request, c: &Caller) -> Response {
    let k = key(kind(req), c);
    match app.store.read(move |conn| crate::store::kv::get(conn, &k)) {
        Ok(Some(text)) => match serde_json::from_str::<Value>(&text) {
            Ok(v) => Response::json(200, &v),
            Err(_) => Response::json(200, &json!({})),
        },
        Ok(None) => Response::json(200, &json!({})),
        Err(e) => store_failed(e),
    }
}

/// `POST /api/v1/prefs/user|views`.
pub fn set(app: &App, req: &Request, c: &Caller) -> Response {
    if req.body.len() > MAX_PREFS_BYTES {
        return Response::error(
            413,
            &format!("preferences are at most {MAX_PREFS_BYTES} bytes of JSON"),
        );
    }
    let v = match app.json_body(req) {
        Ok(v) => v,
        Err(r) => return r,
    };
    if !v.is_object() {
        return Response::error(400, "preferences must be a JSON object");
    }
    let text = v.to_string();
    let k = key(kind(req), c);
    match app
        .store
        .write(move |conn| crate::store::kv::set(conn, &k, &text))
    {
        Ok(()) => Response::json(200, &json!({ "ok": true })),
        Err(e) => store_failed(e),
    }
}
