//! `GET /api/v1/events`: the live event stream (Server-Sent Events). Format and loss rules:
//! [`crate::events`].

use crate::http::{Body, Request, Response};

use super::auth::Caller;
use super::App;

/// Subscribes the caller and answers a stream; 503 over `webui.limits.max_sse_subscribers`
/// or during shutdown.
pub fn stream(app: &App, req: &Request, _c: &Caller) -> Response {
    match app.services.events.subscribe() {
        Ok(sub) => {
            let peer = req.remote.to_string();
            Response {
                status: 200,
                headers: vec![
                    ("Content-Type".into(), "text/event-stream".into()),
                    // Tell buffering reverse proxies to pass events on at once.
                    ("X-Accel-Buffering".into(), "no".into()),
                ],
                body: Body::Stream(Box::new(move |w| sub.run(w, &peer))),
            }
        }
        Err(e) => Response::error(503, &e.to_string()).with_header("Retry-After", "5"),
    }
}
