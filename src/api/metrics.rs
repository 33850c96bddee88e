//! HTTP counters and the Prometheus text rendering of `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write;

use parking_lot::Mutex;

/// Requests by (route pattern, status). Route labels are the router's fixed patterns, so
/// the label set is bounded.
#[derive(Default)]
pub struct HttpMetrics {
    by_route: Mutex<BTreeMap<(&'static str, u16), u64>>,
}

impl HttpMetrics {
    pub fn count(&self, route: &'static str, status: u16) {
        *self.by_route.lock().entry((route, status)).or_insert(0) += 1;
    }

    pub fn snapshot(&self) -> Vec<((&'static str, u16), u64)> {
        self.by_route.lock().iter().map(|(k, v)| (*k, *v)).collect()
    }
}

/// Escapes a Prometheus label value.
pub fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Appends one metric family with a single sample.
pub fn gauge(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
    );
}

/// The HTTPS server's metrics: connections by phase, refusals and timeouts by reason,
/// handshake failures, handler panics, and client-caused dependency warnings.
pub fn http_server(out: &mut String, s: &crate::http::HttpSnapshot) {
    gauge(
        out,
        "svc_http_open_connections",
        "gauge",
        "Open HTTPS connections (event streams not included).",
        s.open_connections,
    );
    let p = &s.phases;
    let _ = writeln!(
        out,
        "# HELP svc_http_connections Open HTTPS connections by phase.\n# TYPE svc_http_connections gauge"
    );
    for (name, n) in [
        ("handshake", p.handshake),
        ("idle", p.idle),
        ("head", p.head),
        ("body", p.body),
        ("worker", p.worker),
        ("write", p.write),
    ] {
        let _ = writeln!(out, "svc_http_connections{{phase=\"{name}\"}} {n}");
    }
    gauge(
        out,
        "svc_http_sse_streams",
        "gauge",
        "Open event streams.",
        s.sse_streams,
    );
    gauge(
        out,
        "svc_http_workers_busy",
        "gauge",
        "HTTP workers running a request.",
        s.workers_busy,
    );
    let _ = writeln!(
        out,
        "# HELP svc_http_refused_connections_total Connections closed at accept, by limit.\n# TYPE svc_http_refused_connections_total counter"
    );
    for (reason, n) in [
        ("max_connections", s.refused.max_connections),
        ("per_address", s.refused.per_address),
    ] {
        let _ = writeln!(
            out,
            "svc_http_refused_connections_total{{reason=\"{reason}\"}} {n}"
        );
    }
    let t = &s.timeouts;
    let _ = writeln!(
        out,
        "# HELP svc_http_timeouts_total Connections closed by a phase deadline.\n# TYPE svc_http_timeouts_total counter"
    );
    for (phase, n) in [
        ("handshake", t.handshake),
        ("idle", t.idle),
        ("head", t.head),
        ("body", t.body),
        ("write", t.write),
    ] {
        let _ = writeln!(out, "svc_http_timeouts_total{{phase=\"{phase}\"}} {n}");
    }
    gauge(
        out,
        "svc_http_handshake_failures_total",
        "counter",
        "Connections that ended before their TLS handshake completed.",
        s.handshake_failures_total,
    );
    gauge(
        out,
        "svc_http_panics_total",
        "counter",
        "Request handlers that panicked (each answered 500).",
        s.panics_total,
    );
    gauge(
        out,
        "svc_log_client_warnings_total",
        "counter",
        "Client-caused warnings of dependencies (TLS), logged at most once a minute per kind.",
        crate::http::logfilter::client_warnings_total(),
    );
}

/// Watcher (component) rows as metrics: attachment, events, errors, and each component's
/// own counters as `svc_watcher_<name>{watcher="<component>"}`.
pub fn watcher_metrics(out: &mut String, rows: &[crate::components::ComponentRow]) {
    type Field = fn(&crate::components::ComponentRow) -> u64;
    let families: [(&str, &str, &str, Field); 3] = [
        (
            "svc_watcher_attached",
            "gauge",
            "1 while the watcher is attached to its source.",
            |r| u64::from(r.attached),
        ),
        (
            "svc_watcher_events_total",
            "counter",
            "Events the watcher read.",
            |r| r.events_total,
        ),
        (
            "svc_watcher_errors_total",
            "counter",
            "Errors the watcher met.",
            |r| r.errors_total,
        ),
    ];
    for (name, kind, help, get) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for r in rows {
            let _ = writeln!(out, "{name}{{watcher=\"{}\"}} {}", label(&r.name), get(r));
        }
    }
    let mut names: Vec<&'static str> = rows
        .iter()
        .flat_map(|r| r.counters.keys().copied())
        .collect();
    names.sort_unstable();
    names.dedup();
    for counter in names {
        let kind = if counter.ends_with("_total") {
            "counter"
        } else {
            "gauge"
        };
        let _ = writeln!(
            out,
            "# HELP svc_watcher_{counter} Watcher counter {counter}.\n# TYPE svc_watcher_{counter} {kind}"
        );
        for r in rows {
            if let Some(v) = r.counters.get(counter) {
                let _ = writeln!(
                    out,
                    "svc_watcher_{counter}{{watcher=\"{}\"}} {v}",
                    label(&r.name)
                );
            }
        }
    }
}
