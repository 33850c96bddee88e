//! `GET /api/v1/events`: the live event stream (Server-Sent Events). Format and loss rules:
//! [`crate::events`].
//!
//! A stream opened with a browser session is tied to it: every [`SESSION_CHECK`] the stream
//! counts as activity on the session (its idle deadline does not pass while it is open), and
//! the stream ends within a second once the session is revoked (one or all), logged out or
//! reaches its absolute deadline. A stream opened with a Bearer token is tied to that token
//! the same way: it ends within [`SESSION_CHECK`] of a reload that removes the token
//! (issue 35 item 9; the token is kept only as its digest).

use std::time::{Duration, Instant};

use crate::http::{Body, Request, Response};

use super::auth::{Caller, Via};
use super::App;

/// How often a session-bound stream checks (and refreshes) its session.
pub const SESSION_CHECK: Duration = Duration::from_millis(250);

/// What keeps a stream open besides the server: the browser session or the API token it
/// was opened with.
enum Tie {
    None,
    Session(String),
    Token(super::auth::TokenId),
}

/// Subscribes the caller and answers a stream; 503 over `webui.limits.max_sse_subscribers`
/// or during shutdown.
pub fn stream(app: &App, req: &Request, c: &Caller) -> Response {
    let tie = match (c.via, &c.session) {
        (Via::Browser, Some((id, _))) => Tie::Session(id.clone()),
        _ => match super::router::bearer(req) {
            Some(token) => Tie::Token(super::auth::token_id(token)),
            None => Tie::None,
        },
    };
    match app.services.events.subscribe() {
        Ok(sub) => {
            let peer = req.remote.to_string();
            let sessions = app.sessions.clone();
            let tokens = app.tokens.clone();
            let body = move |w: &mut dyn std::io::Write| {
                let mut next = Instant::now();
                let alive = |what: &str, ok: bool| {
                    if !ok {
                        log::debug!("event stream to {peer} ends: its {what} ended");
                    }
                    ok
                };
                match &tie {
                    Tie::None => sub.run(w, &peer),
                    Tie::Session(id) => sub.run_while(w, &peer, || {
                        let now = Instant::now();
                        if now < next {
                            return true;
                        }
                        next = now + SESSION_CHECK;
                        alive("session", sessions.keep_alive(id))
                    }),
                    Tie::Token(id) => sub.run_while(w, &peer, || {
                        let now = Instant::now();
                        if now < next {
                            return true;
                        }
                        next = now + SESSION_CHECK;
                        alive("token", tokens.is_configured(id))
                    }),
                }
            };
            Response {
                status: 200,
                headers: vec![
                    ("Content-Type".into(), "text/event-stream".into()),
                    // Tell buffering reverse proxies to pass events on at once.
                    ("X-Accel-Buffering".into(), "no".into()),
                ],
                body: Body::Stream(Box::new(body)),
            }
        }
        Err(e) => Response::error(503, &e.to_string()).with_header("Retry-After", "5"),
    }
}
