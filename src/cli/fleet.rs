//! `svc fleet status`: the CrowdSec LAPI link over the control socket (`fleet.status`, the
//! same answer as `GET /api/v1/fleet`).
//!
//! Exit codes: 0 done; 1 the daemon not running; 2 usage error.

use serde_json::{json, Value};

use super::args::Args;
use super::family::{none, unknown, Family, Request, UsageError};
use crate::text::escape_controls;

/// `svc fleet`: verbs and flags in [`super::defs`].
pub static FAMILY: Family = Family {
    command: &super::defs::FLEET,
    request,
    human,
};

fn request(a: &Args) -> Result<Request, UsageError> {
    match a.verb() {
        "status" => {
            none(a)?;
            Ok(Request::new("fleet.status", json!({})))
        }
        _ => Err(unknown(a)),
    }
}

fn n(v: &Value) -> String {
    v.as_u64()
        .map_or_else(|| "-".to_string(), |n| n.to_string())
}

fn human(_cmd: &str, v: &Value) -> String {
    if v["enabled"] != true {
        return "fleet mode: off ([fleet] lapi_url and bouncer_key or machine_id/password unset)\n"
            .into();
    }
    let l = &v["lapi"];
    let d = &v["decisions"];
    let a = &v["alerts"];
    let mut out = format!(
        "LAPI {}: bouncer {}, watcher {}, {}\n",
        escape_controls(l["url"].as_str().unwrap_or("-")),
        if l["bouncer"] == true { "on" } else { "off" },
        if l["watcher"] == true { "on" } else { "off" },
        if l["bouncer"] != true {
            "not polling".to_string()
        } else if l["connected"] == true {
            format!(
                "connected (last poll {})",
                l["last_successful_poll"].as_str().unwrap_or("-")
            )
        } else {
            format!(
                "not connected ({} failures in a row, last successful poll {}{})",
                n(&l["consecutive_failures"]),
                l["last_successful_poll"].as_str().unwrap_or("never"),
                l["last_error"]
                    .as_str()
                    .map(|e| format!("; {}", escape_controls(e)))
                    .unwrap_or_default()
            )
        }
    );
    out += &format!(
        "decisions: {} received, {} applied ({} dry run), {} refused, {} skipped, {} deleted, {} unblocked\n",
        n(&d["received"]),
        n(&d["applied"]),
        n(&d["dry_run"]),
        n(&d["refused"]),
        n(&d["skipped"]),
        n(&d["deleted"]),
        n(&d["unblocked"]),
    );
    if a["enabled"] == true {
        out += &format!(
            "alerts: {} sent, {} pending, {} deduplicated, {} rejected, {} failed attempts\n",
            n(&a["sent"]),
            n(&a["pending"]),
            n(&a["deduplicated"]),
            n(&a["rejected"]),
            n(&a["failed_attempts"]),
        );
    }
    out
}
