//! `GET /api/v1/incident?ip=&account=&hours=` (admin): the timeline of one address or
//! account over the last `hours` (default 24, 1..=720), with its incidents.

use serde_json::json;

use crate::http::{Request, Response};

use super::auth::Caller;
use super::params;
use super::App;

/// Timeline events returned at most (newest first); `total` counts them all.
pub const MAX_EVENTS: usize = 500;

pub fn timeline(app: &App, req: &Request, _c: &Caller) -> Response {
    // IPv4-mapped addresses are normalised, so `::ffff:203.0.113.9` finds 203.0.113.9.
    let ip = match params::ip_param(req, "ip") {
        Ok(ip) => ip,
        Err(resp) => return resp,
    };
    let account = req
        .query_param("account")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    if ip.is_none() && account.is_none() {
        return Response::error(400, "ip or account: one of them is required");
    }
    let hours = match params::uint_param(req, "hours", 1, 720) {
        Ok(h) => h.unwrap_or(24) as i64,
        Err(resp) => return resp,
    };
    let since = app
        .clock
        .now()
        .checked_sub(jiff::SignedDuration::from_hours(hours))
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let ip_s = ip.map(|i| i.to_string());
    let acct = account.clone();
    let rows = app.store.read(move |c| {
        crate::store::data::history_of_source(
            c,
            since,
            ip_s.as_deref(),
            acct.as_deref(),
            MAX_EVENTS,
        )
    });
    let (items, total) = match rows {
        Ok(r) => r,
        Err(e) => return Response::error(503, &format!("history unavailable: {e}")),
    };
    let incidents = app.services.incidents.matching(ip, account.as_deref());
    let mut body = json!({
        "hours": hours,
        "window_seconds": hours * 3600,
        "incident_window_seconds": app.services.incidents.window().as_secs(),
        "incidents": incidents,
        "items": items,
        "total": total,
        "offset": 0,
        "limit": MAX_EVENTS,
        "truncated": total > MAX_EVENTS as u64,
        "scan_truncated": false,
    });
    if let Some(ip) = ip {
        body["ip"] = json!(ip.to_string());
    }
    if let Some(a) = account {
        body["account"] = json!(a);
    }
    Response::json(200, &body)
}
