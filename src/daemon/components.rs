//! Component rows for `/api/v1/components` and `/api/v1/health`: each collector publishes
//! its attachment state and event counts here (atomics and a short lock, never I/O).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use jiff::Timestamp;
use parking_lot::RwLock;
use serde_json::{json, Value};

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

    fn to_json(&self, name: &str) -> Value {
        let mut v = json!({
            "name": name,
            "kind": self.kind,
            "state": if self.attached.load(Ordering::Relaxed) { "attached" } else { "detached" },
            "attached": self.attached.load(Ordering::Relaxed),
            "events_total": self.events.load(Ordering::Relaxed),
            "errors_total": self.errors.load(Ordering::Relaxed),
            "detail": self.detail.read().clone(),
        });
        let last = self.last_event_us.load(Ordering::Relaxed);
        if last > 0 {
            if let Ok(t) = Timestamp::from_microsecond(last) {
                v["last_event"] = json!(crate::timefmt::rfc3339(t));
            }
        }
        v
    }
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

    pub fn rows(&self) -> Vec<Value> {
        self.by_name
            .read()
            .iter()
            .map(|(n, c)| c.to_json(n))
            .collect()
    }

    /// `{name: {attached, events_total, ...}}` for status `watchers`.
    pub fn map(&self) -> serde_json::Map<String, Value> {
        self.by_name
            .read()
            .iter()
            .map(|(n, c)| (n.clone(), c.to_json(n)))
            .collect()
    }
}
