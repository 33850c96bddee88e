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
