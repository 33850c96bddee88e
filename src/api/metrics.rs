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
