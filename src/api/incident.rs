//! `GET /api/v1/incident?ip=&account=&hours=` (admin): the timeline of one address or
//! account over the last `hours` (default 24, 1..=720), with its incidents.

use std::net::IpAddr;

use serde_json::json;

use crate::http::{Request, Response};

use super::auth::Caller;
use super::App;

/// Timeline events returned at most (newest first); `total` counts them all.
pub const MAX_EVENTS: usize = 500;

pub fn timeline(app: &App, req: &Request, _c: &Caller) -> Response {
    let ip = match req.query_param("ip").filter(|s| !s.trim().is_empty()) {
        None => None,
        Some(s) => match s.trim().parse::<IpAddr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                return Response::error(400, &format!("ip: not an IP address: {:?}", truncate(&s)))
            }
        },
    };
    let account = req
        .query_param("account")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    if ip.is_none() && account.is_none() {
        return Response::error(400, "ip or account: one of them is required");
    }
    let hours = match req.query_param("hours").filter(|s| !s.trim().is_empty()) {
        None => 24,
        Some(s) => match s.trim().parse::<i64>() {
            Ok(h) if (1..=720).contains(&h) => h,
            _ => {
                return Response::error(
                    400,
                    &format!(
                        "hours: must be an integer from 1 to 720, got {:?}",
                        truncate(&s)
                    ),
                )
            }
        },
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

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}
