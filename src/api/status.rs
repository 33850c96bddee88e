//! Status, capabilities, health, components and metrics. All read memory only.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use serde_json::{json, Map, Value};

use crate::http::{Request, Response};
use crate::timefmt::rfc3339;

use super::auth::Caller;
use super::metrics::{gauge, label};
use super::App;

/// Feature identifiers this build supports (only what works).
pub fn capabilities_list(_app: &App) -> Vec<&'static str> {
    vec!["confd.dropins.v1", "status.queue_health.v1"]
}

/// Overall daemon state, security posture and faults, from in-memory health.
///
/// `status` is the worst of the store and every queue row (`ok`, `warning`, `degraded`).
/// `security_posture` is `critical` with an active CRITICAL finding, `warning` with daemon
/// faults (a degraded queue, a failing store) or an active HIGH finding, else `healthy`.
pub(super) fn daemon_state(app: &App) -> (&'static str, &'static str, Vec<String>) {
    use crate::queue::Status;
    let mut faults = Vec::new();
    let mut worst = Status::Ok;
    if !app.store.health().ok {
        faults.push("store: last write batch failed".to_string());
        worst = Status::Degraded;
    }
    for (name, row) in app.services.registry.snapshot() {
        if row.status == Status::Degraded {
            faults.push(format!("queue {name} degraded"));
        }
        worst = worst.max(row.status);
    }
    let (critical, high, _) = app.services.engine.severity_counts();
    let state = match worst {
        Status::Ok => "ok",
        Status::Warning => "warning",
        Status::Degraded => "degraded",
    };
    let posture = if critical > 0 {
        "critical"
    } else if high > 0 || worst == Status::Degraded || !faults.is_empty() {
        "warning"
    } else {
        "healthy"
    };
    (state, posture, faults)
}

pub fn snapshot(app: &App) -> Value {
    let (state, posture, faults) = daemon_state(app);
    let mut m = Map::new();
    m.insert("version".into(), json!(app.runtime.version));
    m.insert("status".into(), json!(state));
    m.insert("uptime_seconds".into(), json!(app.uptime_seconds()));
    m.insert("started_at".into(), json!(rfc3339(app.runtime.started_at)));
    m.insert(
        "started_at_token".into(),
        json!(app.runtime.started_at_token),
    );
    m.insert("pid".into(), json!(app.runtime.pid));
    m.insert("capabilities".into(), json!(capabilities_list(app)));
    m.insert("config_hash".into(), json!(app.cfg.hash));
    if let Some(h) = app.runtime.binary_hash.get() {
        m.insert("binary_hash".into(), json!(h));
    }
    m.insert("store".into(), json!(app.store.health()));
    m.insert("security_posture".into(), json!(posture));
    m.insert("faults".into(), json!(faults));
    let (critical, high, warning) = app.services.engine.severity_counts();
    m.insert(
        "severity_counts".into(),
        json!({ "critical": critical, "high": high, "warning": warning }),
    );
    m.insert("findings_active".into(), json!(critical + high + warning));
    m.insert(
        "incidents_open_by_severity".into(),
        json!({ "critical": 0, "high": 0, "warning": 0 }),
    );
    m.insert("blocklist_size".into(), json!(0));
    m.insert(
        "watchers".into(),
        Value::Object(app.services.components.map()),
    );
    m.insert("sessions_active".into(), json!(app.sessions.count()));
    if let Some(t) = app.services.jobs.latest_scan() {
        m.insert("latest_scan".into(), json!(rfc3339(t)));
        m.insert("last_scan_time".into(), json!(rfc3339(t)));
    }
    m.insert("queues".into(), json!(app.services.registry.snapshot()));
    Value::Object(m)
}

pub fn status(app: &App, _req: &Request, _c: &Caller) -> Response {
    Response::json(200, &snapshot(app))
}

pub fn capabilities(app: &App, _req: &Request, _c: &Caller) -> Response {
    let caps = capabilities_list(app);
    Response::json(
        200,
        &json!({ "items": caps, "total": caps.len(), "capabilities": caps }),
    )
}

pub fn health(app: &App, _req: &Request, _c: &Caller) -> Response {
    let (state, _, faults) = daemon_state(app);
    let server = app.server.get();
    Response::json(
        200,
        &json!({
            "status": state,
            "faults": faults,
            "store": app.store.health(),
            "http": {
                "open_connections": server.map(|s| s.open_connections.load(Ordering::Relaxed)).unwrap_or(0),
                "sse_streams": server.map(|s| s.sse_streams.load(Ordering::Relaxed)).unwrap_or(0),
            },
            "watchers": Value::Object(app.services.components.map()),
            "engines": { "findings": {
                "active": app.services.engine.active_len(),
                "dispatched_total": app.services.engine.counters.dispatched.load(Ordering::Relaxed),
                "parked": app.services.engine.parked_len(),
            } },
            "queues": app.services.registry.snapshot(),
        }),
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
    items.extend(app.services.components.rows());
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
    gauge(
        &mut out,
        "svc_auth_failures_total",
        "counter",
        "Failed authentications (invalid tokens and login attempts).",
        app.limiter.failures_total.load(Ordering::Relaxed),
    );
    gauge(
        &mut out,
        "svc_auth_rate_limited_total",
        "counter",
        "Requests refused with 429 after repeated authentication failures.",
        app.limiter.limited_total.load(Ordering::Relaxed),
    );
    if let Some(s) = app.server.get() {
        gauge(
            &mut out,
            "svc_http_open_connections",
            "gauge",
            "Open HTTPS connections.",
            s.open_connections.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "svc_http_sse_streams",
            "gauge",
            "Open event streams.",
            s.sse_streams.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "svc_http_refused_connections_total",
            "counter",
            "Connections refused over the limit.",
            s.refused_connections.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "svc_http_handshake_failures_total",
            "counter",
            "Failed or timed-out TLS handshakes.",
            s.handshake_failures.load(Ordering::Relaxed),
        );
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
        "Audit records that could not be queued.",
        app.audit.dropped.load(Ordering::Relaxed),
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
    super::history::write_metrics(&mut out);
    queue_metrics(&mut out, &app.services.registry.snapshot());
    Response::new(
        200,
        "text/plain; version=0.0.4; charset=utf-8",
        out.into_bytes(),
    )
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
