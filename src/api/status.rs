//! Status, capabilities, health, components and metrics. All read memory only.

use std::fmt::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use crate::queue::Row;

use crate::http::{Request, Response};

use super::auth::Caller;
use super::metrics::{gauge, label};
use super::App;

/// Overall daemon state, security posture and faults, from in-memory health and the given
/// queue rows.
///
/// `status` is the worst of the store and every queue row (`ok`, `warning`, `degraded`);
/// `security_posture` follows [`crate::incidents::posture`].
pub(super) fn daemon_state(
    app: &App,
    rows: &BTreeMap<String, Row>,
) -> (&'static str, &'static str, Vec<String>) {
    use crate::queue::Status;
    let mut faults = Vec::new();
    let mut worst = Status::Ok;
    if !app.store.health().ok {
        faults.push("store: last write batch failed".to_string());
        worst = Status::Degraded;
    }
    if let Some(why) = &app.runtime.start_fallback {
        faults.push(format!(
            "running on the last configuration that started: the configuration on disk did not start ({why})"
        ));
        worst = worst.max(Status::Warning);
    }
    for (name, row) in rows {
        if row.status == Status::Degraded {
            faults.push(format!("queue {name} degraded"));
        }
        worst = worst.max(row.status);
    }
    let state = match worst {
        Status::Ok => "ok",
        Status::Warning => "warning",
        Status::Degraded => "degraded",
    };
    let inc = &app.services.incidents;
    let posture =
        crate::incidents::posture(inc.worst_open(), inc.open_by_severity(), !faults.is_empty());
    (state, posture, faults)
}

#[derive(Serialize)]
struct Counts {
    critical: u64,
    high: u64,
    warning: u64,
}

impl From<(u64, u64, u64)> for Counts {
    fn from((critical, high, warning): (u64, u64, u64)) -> Counts {
        Counts {
            critical,
            high,
            warning,
        }
    }
}

#[derive(Serialize)]
struct Attribution {
    current: u64,
    cumulative: u64,
}

/// Per check: findings correlation could not attribute to an account, now and since start.
fn correlation_attribution(app: &App) -> BTreeMap<String, Attribution> {
    let mut out: BTreeMap<String, Attribution> = app
        .services
        .incidents
        .unattributed_cumulative()
        .into_iter()
        .map(|(check, cumulative)| {
            (
                check,
                Attribution {
                    current: 0,
                    cumulative,
                },
            )
        })
        .collect();
    for (check, n) in &app.services.engine.active_summary().unattributed {
        out.entry(check.clone())
            .or_insert(Attribution {
                current: 0,
                cumulative: 0,
            })
            .current = *n;
    }
    out
}

#[derive(Serialize)]
struct ChallengeInfo {
    enabled: bool,
    pending: usize,
}

#[derive(Serialize)]
struct EventsInfo {
    subscribers: usize,
    max_subscribers: usize,
}

/// The status snapshot; `/api/v1/status` and `svc status --json` serialise the same value.
#[derive(Serialize)]
pub struct Snapshot<'a> {
    version: &'a str,
    status: &'static str,
    uptime_seconds: u64,
    #[serde(serialize_with = "crate::timefmt::ser")]
    started_at: jiff::Timestamp,
    started_at_token: &'a str,
    pid: u32,
    capabilities: &'static [&'static str],
    config_hash: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    binary_hash: Option<&'a str>,
    store: crate::store::StoreHealth,
    security_posture: &'static str,
    faults: Vec<String>,
    severity_counts: Counts,
    findings_active: u64,
    incidents_open_by_severity: Counts,
    /// Present once a finding has been merged into the active set since start.
    #[serde(skip_serializing_if = "Option::is_none")]
    correlation_attribution: Option<BTreeMap<String, Attribution>>,
    blocklist_size: u64,
    watchers: BTreeMap<String, crate::components::ComponentRow>,
    sessions_active: usize,
    #[serde(
        serialize_with = "crate::timefmt::ser_opt",
        skip_serializing_if = "Option::is_none"
    )]
    latest_scan: Option<jiff::Timestamp>,
    /// Legacy alias of `latest_scan`.
    #[serde(
        serialize_with = "crate::timefmt::ser_opt",
        skip_serializing_if = "Option::is_none"
    )]
    last_scan_time: Option<jiff::Timestamp>,
    queues: BTreeMap<String, Row>,
    /// CMS verification coverage: `core` and `plugins` groups when installation history
    /// exists, `{"error": ...}` when it could not be read.
    cms_verification: Value,
    /// HTTPS server: open connections, connections per phase, refusals by reason.
    http: crate::http::HttpSnapshot,
    events: EventsInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    alerts: Option<Value>,
    /// The proof-of-work challenge: `enabled` and `pending` (addresses routed, not yet
    /// solved, escalated or expired).
    challenge: ChallengeInfo,
    /// Firewall rollback timer: `state` (`none`, `pending`, `confirmed`, `reverted`, or
    /// `unavailable` without the engine), and `deadline`, `remaining_seconds` while pending.
    rollback: Value,
    /// Automatic responses: `{name, mode, since, keys}` (`enforce`, `dry_run`, `off`).
    automation: Vec<super::automation::Rollout>,
}

pub fn snapshot(app: &App) -> Snapshot<'_> {
    let queues = app.services.registry.snapshot();
    let (state, posture, faults) = daemon_state(app, &queues);
    let counts = app.services.engine.severity_counts();
    let latest = app.services.jobs.latest_scan();
    let merged = app
        .services
        .engine
        .counters
        .dispatched
        .load(Ordering::Relaxed)
        > 0;
    Snapshot {
        version: app.runtime.version,
        status: state,
        uptime_seconds: app.uptime_seconds(),
        started_at: app.runtime.started_at,
        started_at_token: &app.runtime.started_at_token,
        pid: app.runtime.pid,
        capabilities: super::capabilities::CAPABILITIES,
        config_hash: app.services.config.hash(),
        binary_hash: app.runtime.binary_hash.get().map(String::as_str),
        store: app.store.health(),
        security_posture: posture,
        faults,
        severity_counts: counts.into(),
        findings_active: counts.0 + counts.1 + counts.2,
        incidents_open_by_severity: app.services.incidents.open_by_severity().into(),
        correlation_attribution: merged.then(|| correlation_attribution(app)),
        blocklist_size: match &app.services.firewall {
            crate::firewall::Handle::Active(f) => f.blocked_count(),
            crate::firewall::Handle::Absent(_) => app.blocklist_size.load(Ordering::Relaxed),
        },
        watchers: app.services.components.map(),
        sessions_active: app.sessions.count(),
        latest_scan: latest,
        last_scan_time: latest,
        queues,
        cms_verification: app.services.cms.status(),
        http: app.server.get().map(|s| s.snapshot()).unwrap_or_default(),
        events: EventsInfo {
            subscribers: app.services.events.subscribers(),
            max_subscribers: app.services.events.max_subscribers(),
        },
        alerts: app.services.alerts.status(),
        rollback: app.services.firewall.rollback_view(),
        automation: super::automation::rollout(app),
        challenge: ChallengeInfo {
            enabled: app.services.challenge.is_some(),
            pending: app
                .services
                .challenge
                .as_ref()
                .map_or(0, |c| c.pending_count()),
        },
    }
}

/// Size of the last status body: the next one's buffer is reserved at once (it changes
/// little between requests).
static STATUS_BODY_LEN: AtomicUsize = AtomicUsize::new(0);

/// The reservation for a body after one of `last` bytes: an eighth more, at most 1 MiB.
fn status_capacity(last: usize) -> usize {
    last.saturating_add(last / 8)
        .saturating_add(512)
        .min(1 << 20)
}

pub fn status(app: &App, _req: &Request, _c: &Caller) -> Response {
    let capacity = status_capacity(STATUS_BODY_LEN.load(Ordering::Relaxed));
    let resp = Response::json_with_capacity(200, &snapshot(app), capacity);
    if let crate::http::Body::Full(b) = &resp.body {
        STATUS_BODY_LEN.store(b.len(), Ordering::Relaxed);
    }
    resp
}

/// `GET /api/v1/capabilities`: [`super::capabilities::CAPABILITIES`], fixed for the life of
/// the process.
pub fn capabilities(_app: &App, _req: &Request, _c: &Caller) -> Response {
    let caps = super::capabilities::CAPABILITIES;
    Response::json(
        200,
        &json!({ "items": caps, "total": caps.len(), "capabilities": caps }),
    )
}

#[derive(Serialize)]
struct FindingsEngineInfo {
    active: usize,
    dispatched_total: u64,
    parked: usize,
}

#[derive(Serialize)]
struct Engines {
    findings: FindingsEngineInfo,
}

#[derive(Serialize)]
struct Health {
    status: &'static str,
    faults: Vec<String>,
    store: crate::store::StoreHealth,
    http: crate::http::HttpSnapshot,
    watchers: BTreeMap<String, crate::components::ComponentRow>,
    engines: Engines,
    queues: BTreeMap<String, Row>,
}

pub fn health(app: &App, _req: &Request, _c: &Caller) -> Response {
    let queues = app.services.registry.snapshot();
    let (state, _, faults) = daemon_state(app, &queues);
    let engine = &app.services.engine;
    Response::json(
        200,
        &Health {
            status: state,
            faults,
            store: app.store.health(),
            http: app.server.get().map(|s| s.snapshot()).unwrap_or_default(),
            watchers: app.services.components.map(),
            engines: Engines {
                findings: FindingsEngineInfo {
                    active: engine.active_len(),
                    dispatched_total: engine.counters.dispatched.load(Ordering::Relaxed),
                    parked: engine.parked_len(),
                },
            },
            queues,
        },
    )
}

pub fn components(app: &App, _req: &Request, _c: &Caller) -> Response {
    let store = app.store.health();
    let mut items = vec![
        json!({ "name": "http", "kind": "server", "state": "running", "attached": true,
                "listen": app.cfg.webui.listen.to_string() }),
        json!({ "name": "store", "kind": "store", "state": if store.ok { "ok" } else { "failing" }, "attached": true,
                "events_total": store.writes_ok + store.writes_failed }),
        json!({ "name": "control_socket", "kind": "control", "state": "running", "attached": true,
                "path": app.cfg.socket_path().display().to_string() }),
    ];
    items.extend(app.services.components.rows().into_iter().map(|r| json!(r)));
    Response::json(200, &json!({ "items": items, "total": items.len() }))
}

pub fn metrics(app: &App, _req: &Request, _c: &Caller) -> Response {
    let mut out = String::with_capacity(4096);
    let _ = writeln!(
        out,
        "# HELP svc_build_info Build information.\n# TYPE svc_build_info gauge\nsvc_build_info{{version=\"{}\"}} 1",
        label(app.runtime.version)
    );
    gauge(
        &mut out,
        "svc_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
        app.uptime_seconds(),
    );
    let _ = writeln!(out, "# HELP svc_http_requests_total HTTP requests by route and status.\n# TYPE svc_http_requests_total counter");
    for ((route, status), n) in app.metrics.snapshot() {
        let _ = writeln!(
            out,
            "svc_http_requests_total{{route=\"{}\",status=\"{status}\"}} {n}",
            label(route)
        );
    }
    let _ = writeln!(out, "# HELP svc_api_body_refused_total JSON request bodies refused before use, by reason.\n# TYPE svc_api_body_refused_total counter");
    for r in super::body::Refusal::ALL {
        let _ = writeln!(
            out,
            "svc_api_body_refused_total{{reason=\"{}\"}} {}",
            r.as_str(),
            app.body_refusals.get(r)
        );
    }
    let _ = writeln!(
        out,
        "# HELP svc_auth_failures_total Requests that failed authentication (401, 429), by reason.\n# TYPE svc_auth_failures_total counter"
    );
    for reason in super::auth::FailReason::ALL {
        let _ = writeln!(
            out,
            "svc_auth_failures_total{{reason=\"{}\"}} {}",
            reason.as_str(),
            app.limiter.by_reason.get(reason)
        );
    }
    gauge(
        &mut out,
        "svc_auth_limiter_tracked_addresses",
        "gauge",
        "Addresses (IPv6 per /64) the authentication failure limiter tracks.",
        app.limiter.tracked(),
    );
    gauge(
        &mut out,
        "svc_auth_limiter_evicted_total",
        "counter",
        "Tracked addresses the failure limiter forgot to make room (least recently seen first).",
        app.limiter.evicted_total.load(Ordering::Relaxed),
    );
    gauge(
        &mut out,
        "svc_auth_rate_limited_total",
        "counter",
        "Requests refused with 429 after repeated authentication failures.",
        app.limiter.limited_total.load(Ordering::Relaxed),
    );
    if let Some(s) = app.server.get() {
        super::metrics::http_server(&mut out, &s.snapshot());
    }
    let st = app.store.health();
    gauge(
        &mut out,
        "svc_store_writes_total",
        "counter",
        "Committed store writes.",
        st.writes_ok,
    );
    gauge(
        &mut out,
        "svc_store_write_failures_total",
        "counter",
        "Failed store writes.",
        st.writes_failed,
    );
    gauge(
        &mut out,
        "svc_store_writes_refused_total",
        "counter",
        "Store writes refused because the writer queue was full.",
        st.writes_refused,
    );
    gauge(
        &mut out,
        "svc_audit_dropped_total",
        "counter",
        "Audit records lost: refused by the actionlog.writes row or not committed.",
        app.audit.dropped(),
    );
    gauge(
        &mut out,
        "svc_sessions_active",
        "gauge",
        "Active browser sessions.",
        app.sessions.count(),
    );
    let (critical, high, warning) = app.services.engine.severity_counts();
    let _ = writeln!(
        out,
        "# HELP svc_findings_active Active findings by severity.\n# TYPE svc_findings_active gauge"
    );
    for (sev, n) in [("CRITICAL", critical), ("HIGH", high), ("WARNING", warning)] {
        let _ = writeln!(out, "svc_findings_active{{severity=\"{sev}\"}} {n}");
    }
    event_metrics(&mut out, app);
    super::history::write_metrics(&mut out);
    let _ = writeln!(
        out,
        "# HELP svc_fix_refusals_total Fixes, quarantines and cleanings refused because the file was not the site's alone.\n# TYPE svc_fix_refusals_total counter"
    );
    for (reason, n) in crate::sys::dir::refusals() {
        let _ = writeln!(out, "svc_fix_refusals_total{{reason=\"{reason}\"}} {n}");
    }
    queue_metrics(&mut out, &app.services.registry.snapshot());
    super::metrics::watcher_metrics(&mut out, &app.services.components.rows());
    if let Some(c) = &app.services.challenge {
        for (name, kind, help, value) in c.metrics() {
            super::metrics::gauge(&mut out, name, kind, help, value);
        }
    }
    super::metrics::crawler_metrics(&mut out, &app.services.crawler);
    if let Some(f) = &app.services.fleet {
        super::fleet::write_metrics(&mut out, f);
    }
    Response::new(
        200,
        "text/plain; version=0.0.4; charset=utf-8",
        out.into_bytes(),
    )
}

/// Event-stream and alert counters (queue rows carry depth and losses).
fn event_metrics(out: &mut String, app: &App) {
    let bus = &app.services.events;
    let c = bus.counters();
    gauge(
        out,
        "svc_events_subscribers",
        "gauge",
        "Event-stream subscribers connected.",
        bus.subscribers(),
    );
    gauge(
        out,
        "svc_events_published_total",
        "counter",
        "Findings published to the event stream.",
        c.published.load(Ordering::Relaxed),
    );
    gauge(
        out,
        "svc_events_delivered_total",
        "counter",
        "Findings written to event-stream subscribers (one per subscriber).",
        c.delivered.load(Ordering::Relaxed),
    );
    gauge(
        out,
        "svc_events_refused_subscribers_total",
        "counter",
        "Event-stream subscriptions refused over the limit.",
        c.refused.load(Ordering::Relaxed),
    );
    let a = &app.services.alerts;
    if !a.enabled() {
        return;
    }
    let c = a.counters();
    gauge(
        out,
        "svc_alerts_sent_total",
        "counter",
        "Alerts the hourly budget passed to the notifier.",
        c.sent.load(Ordering::Relaxed),
    );
    gauge(
        out,
        "svc_alerts_held_back_total",
        "counter",
        "Alerts held back by the hourly budget (summarised when the window ends).",
        c.held_back.load(Ordering::Relaxed),
    );
    gauge(
        out,
        "svc_alerts_held_back_window",
        "gauge",
        "Alerts held back in the open budget window.",
        a.held_back_in_window(),
    );
    gauge(
        out,
        "svc_alerts_summaries_total",
        "counter",
        "Held-back summaries produced.",
        c.summaries.load(Ordering::Relaxed),
    );
}

/// Every queue row as metrics, labelled by queue name.
fn queue_metrics(out: &mut String, rows: &std::collections::BTreeMap<String, crate::queue::Row>) {
    type Field = fn(&crate::queue::Row) -> Option<f64>;
    let families: [(&str, &str, &str, Field); 7] = [
        ("svc_queue_waiting", "gauge", "Units waiting.", |r| {
            r.waiting.map(|w| w as f64)
        }),
        ("svc_queue_running", "gauge", "Units running.", |r| {
            Some(r.running as f64)
        }),
        (
            "svc_queue_dropped_total",
            "counter",
            "Losses since start.",
            |r| Some(r.dropped_total as f64),
        ),
        (
            "svc_queue_dropped_last_minute",
            "gauge",
            "Losses in the last minute.",
            |r| Some(r.dropped_last_minute as f64),
        ),
        (
            "svc_queue_oldest_waiting_age_seconds",
            "gauge",
            "Age of the oldest waiting unit.",
            |r| r.oldest_waiting_age_seconds,
        ),
        (
            "svc_queue_lag_seconds",
            "gauge",
            "Lag by the row's basis.",
            |r| r.lag_seconds,
        ),
        (
            "svc_queue_status",
            "gauge",
            "0 ok, 1 warning, 2 degraded.",
            |r| Some(r.status as u8 as f64),
        ),
    ];
    for (name, kind, help, get) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (q, row) in rows {
            if let Some(v) = get(row) {
                let _ = writeln!(out, "{name}{{queue=\"{}\"}} {v}", label(q));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn status_buffers_are_reserved_from_the_last_size_within_bounds() {
        assert_eq!(super::status_capacity(0), 512);
        assert_eq!(super::status_capacity(9_600), 9_600 + 1_200 + 512);
        assert_eq!(super::status_capacity(usize::MAX), 1 << 20);
    }
}
