//! `GET /api/v1/events`: the live event stream (Server-Sent Events). Format and loss rules:
//! [`crate::events`].
//!
//! A stream opened with a browser session is tied to it: every [`SESSION_CHECK`] the stream
//! counts as activity on the session (its idle deadline does not pass while it is open), and
//! the stream ends within a second once the session is revoked (one or all), logged out or
//! reaches its absolute deadline. Streams opened with a Bearer token are not tied to
//! anything but the server.

use std::time::{Duration, Instant};

use crate::http::{Body, Request, Response};

use super::auth::{Caller, Via};
use super::App;

/// How often a session-bound stream checks (and refreshes) its session.
pub const SESSION_CHECK: Duration = Duration::from_millis(250);

/// Subscribes the caller and answers a stream; 503 over `webui.limits.max_sse_subscribers`
/// or during shutdown.
pub fn stream(app: &App, req: &Request, c: &Caller) -> Response {
    let session = match (c.via, &c.session) {
        (Via::Browser, Some((id, _))) => Some(id.clone()),
        _ => None,
    };
    match app.services.events.subscribe() {
        Ok(sub) => {
            let peer = req.remote.to_string();
            let sessions = app.sessions.clone();
            let body = move |w: &mut dyn std::io::Write| match session {
                None => sub.run(w, &peer),
                Some(id) => {
                    let mut next = Instant::now();
                    sub.run_while(w, &peer, || {
                        let now = Instant::now();
                        if now < next {
                            return true;
                        }
                        next = now + SESSION_CHECK;
                        let alive = sessions.keep_alive(&id);
                        if !alive {
                            log::debug!("event stream to {peer} ends: its session ended");
                        }
                        alive
                    })
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
