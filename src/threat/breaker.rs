//! A fail-open circuit breaker for a remote source.
//!
//! Closed: every request goes through; `failure_threshold` consecutive failures open it.
//! Open: no request goes through (the source answers `skipped`, the verdict proceeds
//! without it: fail-open) until the cooldown has passed. Half-open: exactly one probe at a
//! time goes through; its success closes the breaker, its failure opens it for another
//! cooldown. Other callers are refused while the probe runs. A probe that ends without an
//! outcome (its guard dropped, a panic) frees the slot for the next caller.
//! Time is the injected clock's monotonic time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::clock::SharedClock;

#[derive(Debug, Default)]
struct State {
    failures: u32,
    /// Monotonic nanoseconds until which the breaker stays open.
    open_until: Option<i64>,
    probing: bool,
}

/// The breaker. Share as `Arc<Breaker>`.
pub struct Breaker {
    clock: SharedClock,
    threshold: u32,
    cooldown: Duration,
    state: Mutex<State>,
    /// Requests refused while open or probing.
    pub refused: AtomicU64,
    /// Times it opened.
    pub opened: AtomicU64,
}

/// Whether a request may go.
#[derive(Debug)]
pub enum Permit {
    /// Closed: go.
    Go,
    /// Half-open: this request is the one probe; report its outcome through the guard.
    Probe(ProbeGuard),
    /// Open (or another probe runs): do not send.
    Refused,
}

/// The running probe; dropping it without an outcome frees the probe slot.
pub struct ProbeGuard {
    breaker: Option<Arc<Breaker>>,
}

impl std::fmt::Debug for ProbeGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProbeGuard")
    }
}

impl Drop for ProbeGuard {
    fn drop(&mut self) {
        if let Some(b) = self.breaker.take() {
            b.state.lock().probing = false;
        }
    }
}

impl Breaker {
    pub fn new(clock: SharedClock, threshold: u32, cooldown: Duration) -> Arc<Breaker> {
        Arc::new(Breaker {
            clock,
            threshold: threshold.max(1),
            cooldown,
            state: Mutex::new(State::default()),
            refused: AtomicU64::new(0),
            opened: AtomicU64::new(0),
        })
    }

    /// Asks to send one request.
    pub fn acquire(self: &Arc<Self>) -> Permit {
        let now = self.clock.monotonic_nanos();
        let mut s = self.state.lock();
        match s.open_until {
            None => Permit::Go,
            Some(until) if now < until || s.probing => {
                drop(s);
                self.refused.fetch_add(1, Ordering::Relaxed);
                Permit::Refused
            }
            Some(_) => {
                s.probing = true;
                Permit::Probe(ProbeGuard {
                    breaker: Some(self.clone()),
                })
            }
        }
    }

    /// The request (or probe) succeeded.
    pub fn success(&self, probe: Option<ProbeGuard>) {
        let mut s = self.state.lock();
        s.failures = 0;
        s.open_until = None;
        s.probing = false;
        drop(s);
        if let Some(mut p) = probe {
            p.breaker = None;
        }
    }

    /// The request (or probe) failed.
    pub fn failure(&self, probe: Option<ProbeGuard>) {
        let now = self.clock.monotonic_nanos();
        let cool = i64::try_from(self.cooldown.as_nanos()).unwrap_or(i64::MAX);
        let mut s = self.state.lock();
        s.failures = s.failures.saturating_add(1);
        let was_probe = probe.is_some();
        if was_probe || (s.open_until.is_none() && s.failures >= self.threshold) {
            if s.open_until.is_none() {
                self.opened.fetch_add(1, Ordering::Relaxed);
            }
            s.open_until = Some(now.saturating_add(cool));
        }
        s.probing = false;
        drop(s);
        if let Some(mut p) = probe {
            p.breaker = None;
        }
    }

    /// `closed`, `open` or `half_open`.
    pub fn state_name(&self) -> &'static str {
        let now = self.clock.monotonic_nanos();
        let s = self.state.lock();
        match s.open_until {
            None => "closed",
            Some(u) if now < u => "open",
            Some(_) => "half_open",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn opens_after_failures_and_lets_one_probe_through() {
        let c = ManualClock::at_epoch_2026();
        let b = Breaker::new(c.clone(), 3, Duration::from_secs(30));
        for _ in 0..2 {
            assert!(matches!(b.acquire(), Permit::Go));
            b.failure(None);
        }
        assert_eq!(b.state_name(), "closed");
        assert!(matches!(b.acquire(), Permit::Go));
        b.failure(None);
        assert_eq!(b.state_name(), "open");
        assert!(matches!(b.acquire(), Permit::Refused));
        c.advance_secs(30);
        let Permit::Probe(p) = b.acquire() else {
            panic!("a probe after the cooldown")
        };
        // Only one probe at a time.
        assert!(matches!(b.acquire(), Permit::Refused));
        assert!(matches!(b.acquire(), Permit::Refused));
        b.failure(Some(p));
        assert_eq!(b.state_name(), "open");
        c.advance_secs(30);
        let Permit::Probe(p) = b.acquire() else {
            panic!("probe")
        };
        b.success(Some(p));
        assert_eq!(b.state_name(), "closed");
        assert!(matches!(b.acquire(), Permit::Go));
        // A probe dropped without an outcome frees the slot.
        for _ in 0..3 {
            b.failure(None);
        }
        c.advance_secs(31);
        let p = b.acquire();
        assert!(matches!(p, Permit::Probe(_)));
        drop(p);
        assert!(matches!(b.acquire(), Permit::Probe(_)));
        assert_eq!(b.opened.load(Ordering::Relaxed), 2);
    }
}
