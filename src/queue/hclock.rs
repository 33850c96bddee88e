//! The row's health clock: the injected monotonic clock minus the time the row was held.
//!
//! While a row is held (startup hold of `findings.ingest`) the health clock stands still, so
//! waiting ages, running ages, lag and full duration pause. Loss windows and transient
//! conditions use the raw monotonic clock and keep running.

use std::sync::atomic::{AtomicI64, Ordering};

use parking_lot::Mutex;

use crate::clock::SharedClock;

const NOT_HELD: i64 = i64::MIN;

pub(crate) struct HealthClock {
    clock: SharedClock,
    /// Health-clock value while held, or `NOT_HELD`.
    frozen: AtomicI64,
    /// Total raw nanoseconds spent held (before the current hold).
    offset: AtomicI64,
    /// Raw instant the current hold started.
    held_raw: AtomicI64,
    /// Serializes hold/release (controllers only; never taken by readers or the hot path).
    control: Mutex<()>,
}

impl HealthClock {
    pub(crate) fn new(clock: SharedClock) -> Self {
        HealthClock {
            clock,
            frozen: AtomicI64::new(NOT_HELD),
            offset: AtomicI64::new(0),
            held_raw: AtomicI64::new(0),
            control: Mutex::new(()),
        }
    }

    /// Raw monotonic nanoseconds.
    #[inline]
    pub(crate) fn raw(&self) -> i64 {
        self.clock.monotonic_nanos()
    }

    /// Health-clock nanoseconds (stands still while held).
    #[inline]
    pub(crate) fn now(&self) -> i64 {
        let f = self.frozen.load(Ordering::Acquire);
        if f != NOT_HELD {
            return f;
        }
        self.raw()
            .saturating_sub(self.offset.load(Ordering::Acquire))
    }

    pub(crate) fn is_held(&self) -> bool {
        self.frozen.load(Ordering::Acquire) != NOT_HELD
    }

    pub(crate) fn hold(&self) {
        let _g = self.control.lock();
        if self.is_held() {
            return;
        }
        let raw = self.raw();
        self.held_raw.store(raw, Ordering::Release);
        let eff = raw.saturating_sub(self.offset.load(Ordering::Acquire));
        self.frozen.store(eff, Ordering::Release);
    }

    pub(crate) fn release(&self) {
        let _g = self.control.lock();
        if !self.is_held() {
            return;
        }
        let paused = self
            .raw()
            .saturating_sub(self.held_raw.load(Ordering::Acquire))
            .max(0);
        self.offset.fetch_add(paused, Ordering::AcqRel);
        self.frozen.store(NOT_HELD, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn hold_freezes_and_release_resumes_without_jump() {
        let c = ManualClock::at_epoch_2026();
        let h = HealthClock::new(c.clone());
        let t0 = h.now();
        c.advance_secs(5);
        assert_eq!(h.now() - t0, 5_000_000_000);
        h.hold();
        h.hold(); // idempotent
        c.advance_secs(100);
        assert_eq!(h.now() - t0, 5_000_000_000);
        h.release();
        h.release(); // idempotent
        assert_eq!(h.now() - t0, 5_000_000_000);
        c.advance_secs(1);
        assert_eq!(h.now() - t0, 6_000_000_000);
    }
}
