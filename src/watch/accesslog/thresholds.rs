//! The handle a reload sets the detector's thresholds through (`thresholds.http_*`; the
//! value type is `config::access::AccessThresholds`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

pub use crate::config::access::{AccessThresholds, NAMES};

/// Thresholds shared with a running detector: a reload sets them; the detector applies
/// them before its next line (one atomic load per line), keeping its state.
pub struct SharedThresholds {
    generation: AtomicU64,
    value: Mutex<AccessThresholds>,
}

impl SharedThresholds {
    pub fn new(t: AccessThresholds) -> Arc<SharedThresholds> {
        Arc::new(SharedThresholds {
            generation: AtomicU64::new(0),
            value: Mutex::new(t),
        })
    }

    pub fn set(&self, t: AccessThresholds) {
        let mut v = self.value.lock();
        if *v != t {
            *v = t;
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    pub fn get(&self) -> AccessThresholds {
        self.value.lock().clone()
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}
