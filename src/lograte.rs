//! Rate-limited log lines for what clients cause.
//!
//! Anything a client can trigger at will (a rejected token, a malformed request, a TLS
//! handshake with an odd SNI) must not let it write the log at line rate. A [`LogLimiter`]
//! lets through at most one line per `(kind, key)` per period (a minute in the daemon) and
//! tells the caller how many were held back since the last line, so the next line can say so.
//!
//! Bounded: at most `max_keys` keys are tracked. When the table is full, new keys share one
//! overflow slot per kind (so a flood from many addresses still writes one line per kind per
//! period), and the table is swept of idle keys at most once per period, so no call scans it.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;

use crate::clock::SharedClock;

#[derive(Clone, Copy)]
struct Slot {
    last_ns: i64,
    held_back: u64,
}

struct Table {
    slots: HashMap<(&'static str, String), Slot>,
    last_sweep_ns: i64,
}

/// See the module documentation.
pub struct LogLimiter {
    clock: SharedClock,
    period_ns: i64,
    max_keys: usize,
    table: Mutex<Table>,
}

/// Key used for every new key of a kind once the table is full.
const OVERFLOW_KEY: &str = "";

impl LogLimiter {
    pub fn new(clock: SharedClock, period: Duration, max_keys: usize) -> LogLimiter {
        let now = clock.monotonic_nanos();
        LogLimiter {
            clock,
            period_ns: i64::try_from(period.as_nanos()).unwrap_or(i64::MAX),
            max_keys: max_keys.max(1),
            table: Mutex::new(Table {
                slots: HashMap::new(),
                last_sweep_ns: now,
            }),
        }
    }

    /// One line a minute per key, 4,096 keys: the daemon's setting.
    pub fn per_minute(clock: SharedClock) -> LogLimiter {
        LogLimiter::new(clock, Duration::from_secs(60), 4096)
    }

    /// `Some(held_back)` when a line of `kind` about `key` may be written now, with the
    /// number of lines held back since the last one; `None` when it must be dropped.
    pub fn admit(&self, kind: &'static str, key: &str) -> Option<u64> {
        let now = self.clock.monotonic_nanos();
        let mut t = self.table.lock();
        if now.saturating_sub(t.last_sweep_ns) >= self.period_ns {
            // Keys quiet for two periods are forgotten (a held-back count that old is dropped).
            let keep = self.period_ns.saturating_mul(2);
            t.slots.retain(|_, s| now.saturating_sub(s.last_ns) < keep);
            t.last_sweep_ns = now;
        }
        let full = t.slots.len() >= self.max_keys;
        let key = if full && !t.slots.contains_key(&(kind, key.to_string())) {
            OVERFLOW_KEY
        } else {
            key
        };
        match t.slots.get_mut(&(kind, key.to_string())) {
            Some(slot) if now.saturating_sub(slot.last_ns) < self.period_ns => {
                slot.held_back += 1;
                None
            }
            Some(slot) => {
                let n = slot.held_back;
                *slot = Slot {
                    last_ns: now,
                    held_back: 0,
                };
                Some(n)
            }
            None => {
                t.slots.insert(
                    (kind, key.to_string()),
                    Slot {
                        last_ns: now,
                        held_back: 0,
                    },
                );
                Some(0)
            }
        }
    }
}

/// Suffix for a line that follows held-back ones: `""` or `" (N more since the last)"`.
pub fn held_back_suffix(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" ({n} more since the last)")
    }
}

/// `warn_limited!(limiter, "kind", key, "format {}", args)` writes a WARN line when the
/// limiter admits it, with the held-back count appended.
#[macro_export]
macro_rules! warn_limited {
    ($limiter:expr, $kind:expr, $key:expr, $($arg:tt)+) => {
        if let Some(n) = $limiter.admit($kind, $key) {
            log::warn!("{}{}", format_args!($($arg)+), $crate::lograte::held_back_suffix(n));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn limiter(max: usize) -> (std::sync::Arc<ManualClock>, LogLimiter) {
        let clock = ManualClock::at_epoch_2026();
        let l = LogLimiter::new(clock.clone(), Duration::from_secs(60), max);
        (clock, l)
    }

    #[test]
    fn one_line_per_key_per_period_with_the_held_back_count() {
        let (clock, l) = limiter(16);
        assert_eq!(l.admit("auth", "192.0.2.1"), Some(0));
        for _ in 0..5 {
            assert_eq!(l.admit("auth", "192.0.2.1"), None);
        }
        assert_eq!(l.admit("auth", "192.0.2.2"), Some(0));
        assert_eq!(l.admit("tls", "192.0.2.1"), Some(0));
        clock.advance(Duration::from_secs(61));
        assert_eq!(l.admit("auth", "192.0.2.1"), Some(5));
        assert_eq!(l.admit("auth", "192.0.2.1"), None);
    }

    #[test]
    fn a_full_table_shares_one_overflow_slot_per_kind() {
        let (clock, l) = limiter(4);
        let mut written = 0;
        for i in 0..10_000 {
            if l.admit("auth", &format!("198.51.100.{i}")).is_some() {
                written += 1;
            }
        }
        // Four tracked keys plus one overflow line.
        assert_eq!(written, 5);
        // Still full a minute later: a new key reports what the overflow slot held back.
        clock.advance(Duration::from_secs(61));
        assert_eq!(l.admit("auth", "203.0.113.1"), Some(9_995));
        // Two quiet periods later the table is swept and new keys get their own slots.
        clock.advance(Duration::from_secs(121));
        assert_eq!(l.admit("auth", "203.0.113.2"), Some(0));
        assert_eq!(l.admit("auth", "203.0.113.2"), None);
    }
}
