//! Injectable time source.
//!
//! Every rule that depends on elapsed time ("one minute without progress", "blocked for 24
//! hours", session deadlines) reads time through a [`Clock`], so tests drive time with a
//! [`ManualClock`] instead of sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use jiff::{SignedDuration, Timestamp};

/// A source of wall-clock and monotonic time.
pub trait Clock: Send + Sync + 'static {
    /// Current wall-clock instant, truncated to microseconds (the API's precision).
    fn now(&self) -> Timestamp;
    /// Monotonic nanoseconds since an arbitrary origin; never goes backwards.
    fn monotonic_nanos(&self) -> i64;
}

/// Shared handle to a clock.
pub type SharedClock = Arc<dyn Clock>;

/// Truncates an instant to whole microseconds, the precision the API prints and stores.
pub fn truncate_micros(ts: Timestamp) -> Timestamp {
    let micros = ts.as_microsecond();
    Timestamp::from_microsecond(micros).unwrap_or(ts)
}

/// The real clock.
#[derive(Debug)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    pub fn new() -> Self {
        SystemClock {
            origin: Instant::now(),
        }
    }

    pub fn shared() -> SharedClock {
        Arc::new(SystemClock::new())
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        truncate_micros(Timestamp::now())
    }

    fn monotonic_nanos(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(i64::MAX)
    }
}

/// A clock that only moves when told to. Wall and monotonic time advance together.
#[derive(Debug)]
pub struct ManualClock {
    wall_micros: AtomicI64,
    mono_nanos: AtomicI64,
}

impl ManualClock {
    /// A manual clock starting at `start`.
    pub fn new(start: Timestamp) -> Arc<Self> {
        Arc::new(ManualClock {
            wall_micros: AtomicI64::new(start.as_microsecond()),
            mono_nanos: AtomicI64::new(1_000_000_000),
        })
    }

    /// A manual clock starting at 2026-01-01T00:00:00Z.
    pub fn at_epoch_2026() -> Arc<Self> {
        Self::new(Timestamp::from_second(1_767_225_600).expect("valid constant instant"))
    }

    /// Moves both wall and monotonic time forward.
    pub fn advance(&self, by: std::time::Duration) {
        let nanos = i64::try_from(by.as_nanos()).unwrap_or(i64::MAX);
        self.mono_nanos.fetch_add(nanos, Ordering::SeqCst);
        self.wall_micros.fetch_add(nanos / 1_000, Ordering::SeqCst);
    }

    /// Moves time forward by whole seconds.
    pub fn advance_secs(&self, secs: u64) {
        self.advance(std::time::Duration::from_secs(secs));
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        let micros = self.wall_micros.load(Ordering::SeqCst);
        Timestamp::from_microsecond(micros).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn monotonic_nanos(&self) -> i64 {
        self.mono_nanos.load(Ordering::SeqCst)
    }
}

/// Seconds (fractional) between two monotonic readings, never negative.
pub fn secs_between(earlier_nanos: i64, later_nanos: i64) -> f64 {
    (later_nanos.saturating_sub(earlier_nanos)).max(0) as f64 / 1e9
}

/// Adds a duration to an instant, saturating at the representable range.
pub fn add(ts: Timestamp, d: std::time::Duration) -> Timestamp {
    let sd = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
    ts.checked_add(sd).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::at_epoch_2026();
        let a = c.now();
        let m = c.monotonic_nanos();
        assert_eq!(a, c.now());
        c.advance_secs(61);
        assert_eq!(c.now().as_second() - a.as_second(), 61);
        assert!((secs_between(m, c.monotonic_nanos()) - 61.0).abs() < 1e-9);
    }

    #[test]
    fn system_clock_truncates_to_micros() {
        let c = SystemClock::new();
        assert_eq!(c.now().subsec_nanosecond() % 1_000, 0);
    }
}
