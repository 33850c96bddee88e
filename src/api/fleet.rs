//! Fleet route (thin: the view is `crate::fleet::Fleet::status`, which the control socket's
//! `fleet.status` command answers too).
//!
//! | Route | Scope | Answer |
//! |---|---|---|
//! | `GET /api/v1/fleet` | read | the LAPI link, decisions received/applied/refused/skipped, alerts sent/pending (`{"enabled": false}` when fleet mode is off) |

use std::fmt::Write;

use serde_json::json;

use super::auth::Caller;
use super::App;
use crate::http::{Request, Response};

/// `GET /api/v1/fleet`.
pub fn status(app: &App, _req: &Request, _c: &Caller) -> Response {
    let v = match &app.services.fleet {
        Some(f) => f.status(),
        None => json!({ "enabled": false }),
    };
    Response::json(200, &v)
}

/// The fleet's samples of `/metrics` (each family's HELP and TYPE once).
pub fn write_metrics(out: &mut String, f: &crate::fleet::Fleet) {
    let mut last = "";
    for m in f.metrics() {
        if m.name != last {
            let _ = writeln!(
                out,
                "# HELP {} {}\n# TYPE {} {}",
                m.name, m.help, m.name, m.kind
            );
            last = m.name;
        }
        let labels: Vec<String> = m
            .labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", super::metrics::label(v)))
            .collect();
        if labels.is_empty() {
            let _ = writeln!(out, "{} {}", m.name, m.value);
        } else {
            let _ = writeln!(out, "{}{{{}}} {}", m.name, labels.join(","), m.value);
        }
    }
}
