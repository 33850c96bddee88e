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
        "svc_http_lingering_closes_total",
        "counter",
        "Refused requests closed after a bounded read-and-discard of the rest of their input.",
        s.lingering.closes_total,
    );
    let _ = writeln!(
        out,
        "# HELP svc_http_lingering_cut_total Lingering closes cut short, by limit.\n# TYPE svc_http_lingering_cut_total counter"
    );
    for (reason, n) in [
        ("bytes", s.lingering.cut_bytes),
        ("deadline", s.lingering.cut_deadline),
    ] {
        let _ = writeln!(
            out,
            "svc_http_lingering_cut_total{{reason=\"{reason}\"}} {n}"
        );
    }
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

/// Published crawler ranges (`svc_botranges_*`) and verification counters.
pub fn crawler_metrics(out: &mut String, v: &crate::crawler::Verifier) {
    use std::sync::atomic::Ordering::Relaxed;
    let r = &v.range_status;
    gauge(
        out,
        "svc_botranges_refresh_success",
        "gauge",
        "1 when the last refresh of published crawler ranges fetched every feed, 0 when a feed failed, -1 before any refresh.",
        r.last_ok.load(Relaxed),
    );
    gauge(
        out,
        "svc_botranges_refresh_failure_total",
        "counter",
        "Refreshes of published crawler ranges in which a feed failed (the previous list stayed).",
        r.failures.load(Relaxed),
    );
    gauge(
        out,
        "svc_botranges_last_success_timestamp_seconds",
        "gauge",
        "Unix time of the last refresh that fetched every feed; 0 when none since start.",
        r.last_success.load(Relaxed),
    );
    let _ = writeln!(
        out,
        "# HELP svc_botranges_prefixes Published address ranges in force per crawler.\n# TYPE svc_botranges_prefixes gauge"
    );
    for (name, n) in v.ranges().counts() {
        let _ = writeln!(
            out,
            "svc_botranges_prefixes{{crawler=\"{}\"}} {n}",
            label(&name)
        );
    }
    let c = &v.counters;
    let _ = writeln!(
        out,
        "# HELP svc_bot_verifications_total Completed reverse-DNS verifications by result.\n# TYPE svc_bot_verifications_total counter"
    );
    for (result, n) in [
        ("verified", &c.verified),
        ("negative", &c.negative),
        ("no_ptr", &c.no_ptr),
        ("dns_failure", &c.dns_failures),
    ] {
        let _ = writeln!(
            out,
            "svc_bot_verifications_total{{result=\"{result}\"}} {}",
            n.load(Relaxed)
        );
    }
    let _ = writeln!(
        out,
        "# HELP svc_bot_verification_refused_total Verification admissions refused.\n# TYPE svc_bot_verification_refused_total counter"
    );
    for (reason, n) in [
        ("history_full", &c.history_refused),
        ("queue", &c.queue_refused),
    ] {
        let _ = writeln!(
            out,
            "svc_bot_verification_refused_total{{reason=\"{reason}\"}} {}",
            n.load(Relaxed)
        );
    }
    let (history, results) = v.sizes();
    gauge(
        out,
        "svc_bot_verification_history",
        "gauge",
        "Entries in the crawler attempt history.",
        history,
    );
    gauge(
        out,
        "svc_bot_verification_cached",
        "gauge",
        "Cached crawler verification results.",
        results,
    );
}
