//! Component rows for `/api/v1/components` and `/api/v1/health`: each collector publishes
//! its attachment state and event counts here (atomics and a short lock, never I/O).
//!
//! Besides `events_total` and `errors_total`, a component may publish named counters of its
//! own ([`Component::counter`], e.g. `overlong_lines_total` of a log watcher); they appear
//! as extra keys of its row and as `svc_watcher_<name>{watcher="<component>"}` in
//! `/metrics`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use jiff::Timestamp;
use parking_lot::RwLock;
use serde::Serialize;

/// One component's live state.
#[derive(Default)]
pub struct Component {
    pub kind: &'static str,
    pub attached: AtomicBool,
    pub events: AtomicU64,
    pub errors: AtomicU64,
    last_event_us: AtomicI64,
    detail: RwLock<String>,
    counters: RwLock<Vec<(&'static str, Arc<AtomicU64>)>>,
}

impl Component {
    pub fn event(&self, at: Timestamp) {
        self.events.fetch_add(1, Ordering::Relaxed);
        self.last_event_us
            .store(at.as_microsecond(), Ordering::Relaxed);
    }

    /// `n` events at once (for example log lines read in one round), the last at `at`.
    pub fn events_at(&self, n: u64, at: Timestamp) {
        if n > 0 {
            self.events.fetch_add(n, Ordering::Relaxed);
            self.last_event_us
                .store(at.as_microsecond(), Ordering::Relaxed);
        }
    }

    /// The named counter `name` of this component (created at 0 on first use). Names are
    /// snake_case and end in `_total` for counts.
    pub fn counter(&self, name: &'static str) -> Arc<AtomicU64> {
        if let Some((_, c)) = self.counters.read().iter().find(|(n, _)| *n == name) {
            return c.clone();
        }
        let mut w = self.counters.write();
        if let Some((_, c)) = w.iter().find(|(n, _)| *n == name) {
            return c.clone();
        }
        let c = Arc::new(AtomicU64::new(0));
        w.push((name, c.clone()));
        c
    }

    pub fn set_detail(&self, d: impl Into<String>) {
        *self.detail.write() = d.into();
    }

    fn row(&self, name: &str) -> ComponentRow {
        let attached = self.attached.load(Ordering::Relaxed);
        let last = self.last_event_us.load(Ordering::Relaxed);
        ComponentRow {
            name: name.to_string(),
            kind: self.kind,
            state: if attached { "attached" } else { "detached" },
            attached,
            events_total: self.events.load(Ordering::Relaxed),
            errors_total: self.errors.load(Ordering::Relaxed),
            detail: self.detail.read().clone(),
            last_event: (last > 0)
                .then(|| Timestamp::from_microsecond(last).ok())
                .flatten(),
            counters: self
                .counters
                .read()
                .iter()
                .map(|(n, c)| (*n, c.load(Ordering::Relaxed)))
                .collect(),
        }
    }
}

/// One component as `/api/v1/components`, `status.watchers` and `svc doctor` show it.
#[derive(Clone, Debug, Serialize)]
pub struct ComponentRow {
    pub name: String,
    pub kind: &'static str,
    pub state: &'static str,
    pub attached: bool,
    pub events_total: u64,
    pub errors_total: u64,
    pub detail: String,
    #[serde(
        serialize_with = "crate::timefmt::ser_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_event: Option<Timestamp>,
    /// The component's own counters ([`Component::counter`]).
    #[serde(flatten)]
    pub counters: BTreeMap<&'static str, u64>,
}

/// All components by name.
#[derive(Default)]
pub struct Components {
    by_name: RwLock<BTreeMap<String, Arc<Component>>>,
}

impl Components {
    pub fn add(&self, name: &str, kind: &'static str) -> Arc<Component> {
        let c = Arc::new(Component {
            kind,
            ..Component::default()
        });
        self.by_name.write().insert(name.to_string(), c.clone());
        c
    }

    /// Removes a component (a collector a configuration reload turned off).
    pub fn remove(&self, name: &str) {
        self.by_name.write().remove(name);
    }

    pub fn rows(&self) -> Vec<ComponentRow> {
        self.by_name.read().iter().map(|(n, c)| c.row(n)).collect()
    }

    /// `{name: row}` for status `watchers`.
    pub fn map(&self) -> BTreeMap<String, ComponentRow> {
        self.by_name
            .read()
            .iter()
            .map(|(n, c)| (n.clone(), c.row(n)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_appear_on_the_row() {
        let all = Components::default();
        let c = all.add("auth_log", "log_watcher");
        c.counter("overlong_lines_total")
            .fetch_add(2, Ordering::Relaxed);
        assert!(Arc::ptr_eq(
            &c.counter("overlong_lines_total"),
            &c.counter("overlong_lines_total")
        ));
        c.events_at(3, Timestamp::from_second(1_767_225_600).unwrap());
        let row = &all.rows()[0];
        assert_eq!(row.events_total, 3);
        assert_eq!(row.counters.get("overlong_lines_total"), Some(&2));
        let v = serde_json::to_value(row).unwrap();
        assert_eq!(v["overlong_lines_total"], 2, "{v}");
        assert_eq!(v["state"], "detached");
    }
}
