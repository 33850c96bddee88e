//! Component rows for `/api/v1/components` and `/api/v1/health`: each collector publishes
//! its attachment state and event counts here (atomics and a short lock, never I/O).

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
}

impl Component {
    pub fn event(&self, at: Timestamp) {
        self.events.fetch_add(1, Ordering::Relaxed);
        self.last_event_us
            .store(at.as_microsecond(), Ordering::Relaxed);
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
