//! `dropped_total` and `dropped_last_minute`: a cumulative counter plus a 60-slot ring of
//! per-second counts, lock-free.
//!
//! Each slot packs the second it belongs to (upper 40 bits) and that second's count (lower
//! 24 bits, saturating at 16,777,215) into one `AtomicU64`, so a stale slot is reset and
//! counted in one compare-and-swap.

use std::sync::atomic::{AtomicU64, Ordering};

const SLOTS: usize = 60;
const COUNT_BITS: u32 = 24;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const SEC_MASK: u64 = (1 << 40) - 1;

pub(crate) struct LossWindow {
    total: AtomicU64,
    slots: [AtomicU64; SLOTS],
}

fn second_of(raw_nanos: i64) -> u64 {
    (raw_nanos.max(0) as u64 / 1_000_000_000) & SEC_MASK
}

impl LossWindow {
    pub(crate) fn new() -> Self {
        LossWindow {
            total: AtomicU64::new(0),
            // Slot i starts tagged with a second it can never be asked for as "current".
            slots: std::array::from_fn(|_| AtomicU64::new(u64::MAX)),
        }
    }

    /// Counts `n` losses at raw monotonic instant `raw_nanos`.
    pub(crate) fn add(&self, n: u64, raw_nanos: i64) {
        if n == 0 {
            return;
        }
        self.total.fetch_add(n, Ordering::Relaxed);
        let sec = second_of(raw_nanos);
        let Some(slot) = self.slots.get((sec % SLOTS as u64) as usize) else {
            return;
        };
        let mut cur = slot.load(Ordering::Relaxed);
        loop {
            let next = if cur != u64::MAX && cur >> COUNT_BITS == sec {
                (sec << COUNT_BITS) | (cur & COUNT_MASK).saturating_add(n).min(COUNT_MASK)
            } else {
                (sec << COUNT_BITS) | n.min(COUNT_MASK)
            };
            match slot.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Losses in the current second and the 59 before it.
    pub(crate) fn last_minute(&self, raw_nanos: i64) -> u64 {
        let now = second_of(raw_nanos);
        let oldest = now.saturating_sub(SLOTS as u64 - 1);
        self.slots
            .iter()
            .map(|s| s.load(Ordering::Acquire))
            .filter(|v| *v != u64::MAX)
            .filter(|v| {
                let sec = v >> COUNT_BITS;
                sec >= oldest && sec <= now
            })
            .map(|v| v & COUNT_MASK)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn window_forgets_after_sixty_seconds_total_stays() {
        let w = LossWindow::new();
        w.add(2, 100 * S);
        w.add(1, 100 * S + S / 2);
        w.add(1, 130 * S);
        assert_eq!(w.last_minute(130 * S), 4);
        assert_eq!(w.last_minute(159 * S + S - 1), 4);
        assert_eq!(w.last_minute(160 * S), 1);
        assert_eq!(w.last_minute(190 * S), 0);
        // A slot reused a minute later is reset, not added to.
        w.add(1, 160 * S);
        assert_eq!(w.last_minute(160 * S), 2);
        assert_eq!(w.total(), 5);
        w.add(0, 161 * S);
        assert_eq!(w.total(), 5);
    }

    #[test]
    fn per_second_count_saturates_but_total_does_not() {
        let w = LossWindow::new();
        w.add(COUNT_MASK, 5 * S);
        w.add(10, 5 * S);
        assert_eq!(w.last_minute(5 * S), COUNT_MASK);
        assert_eq!(w.total(), COUNT_MASK + 10);
    }
}
