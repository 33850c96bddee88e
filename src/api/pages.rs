//! Browser login form, login and logout. The authenticated pages: [`super::console`].

use crate::config::Scope;
use crate::http::{Request, Response};

use super::audit::Entry;
use super::auth::{Caller, FailReason, Via};
use super::sessions::COOKIE;
use super::App;

use super::console::html;

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

pub fn login_form(_app: &App, _req: &Request, _c: &Caller) -> Response {
    html(
        200,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>svc login</title>\n<link rel=\"stylesheet\" href=\"/assets/console.css\">\n<link rel=\"icon\" href=\"/assets/icon.svg\"></head>\n<body>\n<main id=\"main\"><h1>svc</h1>\n<form method=\"post\" action=\"/login\">\n<label for=\"token\">Admin token</label>\n<input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required>\n<button type=\"submit\">Log in</button>\n</form></main>\n</body></html>\n".to_string(),
    )
}

fn session_cookie(value: &str, max_age: u64) -> String {
    format!("{COOKIE}={value}; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age={max_age}")
}

fn clear_cookie() -> String {
    format!("{COOKIE}=; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=0")
}

/// `POST /login`: exchanges an admin token (form field `token`) for a session cookie.
///
/// The route reads no other credential, so a stale session cookie never stands in the way.
/// A valid admin token succeeds even from an address over the failure limit (decision 4);
/// only a failing attempt from such an address is answered 429. A failed attempt is not
/// audited (it names no actor): it is counted and logged by [`App::credential_failed`].
pub fn login(app: &App, req: &Request, _c: &Caller) -> Response {
    let ip = req.remote.ip().to_canonical().to_string();
    let audit = |actor: &str, outcome: &str| {
        app.audit.record(Entry {
            at: app.clock.now(),
            actor,
            via: "browser",
            action: "login",
            target: "",
            outcome,
            remote_ip: &ip,
        })
    };
    let Some(token) = req.form_field("token") else {
        return Response::error(400, "form field token is required");
    };
    match app.tokens.lookup(token.trim()) {
        Some((name, Scope::Admin)) => {
            let ua = req.header("user-agent").unwrap_or("");
            let creator = super::auth::token_id(token.trim());
            match app.sessions.create(&name, creator, &ip, ua) {
                Ok((secret, _)) => {
                    audit(&name, "ok");
                    super::router::redirect("/").with_header(
                        "Set-Cookie",
                        session_cookie(&secret, app.sessions.max_age().as_secs()),
                    )
                }
                Err(e) => {
                    audit(&name, "error");
                    Response::error(503, &format!("session could not be stored: {e}"))
                }
            }
        }
        Some((name, Scope::Read)) => {
            audit(&name, "denied");
            Response::error(403, "only admin tokens can log in to the web interface")
        }
        None => match app.credential_failed(req, FailReason::InvalidLogin) {
            FailReason::RateLimited => super::router::too_many(),
            _ => Response::error(401, "invalid token"),
        },
    }
}

pub fn logout(app: &App, req: &Request, c: &Caller) -> Response {
    if let (Via::Browser, Some((id, _))) = (c.via, &c.session) {
        if let Err(e) = app.sessions.revoke(id) {
            return Response::error(503, &format!("session could not be revoked: {e}"));
        }
    }
    let is_form = req.header("content-type").is_some_and(|ct| {
        ct.to_ascii_lowercase()
            .starts_with("application/x-www-form-urlencoded")
    });
    let resp = if is_form {
        super::router::redirect("/login")
    } else {
        Response::json(200, &serde_json::json!({ "ok": true }))
    };
    resp.with_header("Set-Cookie", clear_cookie())
}
