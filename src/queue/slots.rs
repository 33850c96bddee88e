//! Running work: each running operation publishes its start instant (and its current phase
//! with the phase's start) in its own atomic slot, claimed by one compare-and-swap.
//! Operations beyond the slot count are counted in `running` without an age.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};

use super::types::{dur_nanos, Phase, PhaseBudgets};

const FREE: i64 = i64::MIN;

struct Slot {
    start: AtomicI64,
    phase_start: AtomicI64,
    phase: AtomicU8,
}

pub(crate) struct RunningSlots {
    slots: Box<[Slot]>,
    untracked: AtomicU64,
}

/// What a reader learns from one pass over the slots.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct RunningScan {
    pub count: u64,
    /// Health-clock nanoseconds the oldest tracked operation has run.
    pub oldest_nanos: i64,
    /// Some tracked operation has been in its current phase for its phase's budget or longer.
    pub over_budget: bool,
    /// Some tracked operation is within its current phase budget.
    pub healthy: bool,
}

/// Which slot a running operation holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotId {
    Tracked(usize),
    Untracked,
}

impl RunningSlots {
    pub(crate) fn new(n: usize) -> Self {
        RunningSlots {
            slots: (0..n)
                .map(|_| Slot {
                    start: AtomicI64::new(FREE),
                    phase_start: AtomicI64::new(FREE),
                    phase: AtomicU8::new(0),
                })
                .collect(),
            untracked: AtomicU64::new(0),
        }
    }

    /// Claims a slot for an operation starting at `now` (health clock) in `phase`.
    #[inline]
    pub(crate) fn claim(&self, now: i64, phase: Phase) -> SlotId {
        let now = if now == FREE { FREE + 1 } else { now };
        for (i, s) in self.slots.iter().enumerate() {
            if s.start.load(Ordering::Relaxed) == FREE
                && s.start
                    .compare_exchange(FREE, now, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                s.phase.store(phase.index() as u8, Ordering::Relaxed);
                s.phase_start.store(now, Ordering::Release);
                return SlotId::Tracked(i);
            }
        }
        self.untracked.fetch_add(1, Ordering::Relaxed);
        SlotId::Untracked
    }

    pub(crate) fn set_phase(&self, id: SlotId, phase: Phase, now: i64) {
        if let SlotId::Tracked(i) = id {
            if let Some(s) = self.slots.get(i) {
                s.phase.store(phase.index() as u8, Ordering::Relaxed);
                s.phase_start.store(now, Ordering::Release);
            }
        }
    }

    #[inline]
    pub(crate) fn release(&self, id: SlotId) {
        match id {
            SlotId::Tracked(i) => {
                if let Some(s) = self.slots.get(i) {
                    s.start.store(FREE, Ordering::Release);
                }
            }
            SlotId::Untracked => {
                self.untracked.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn scan(&self, now: i64, budgets: &PhaseBudgets) -> RunningScan {
        let mut out = RunningScan {
            count: self.untracked.load(Ordering::Relaxed),
            ..RunningScan::default()
        };
        for s in self.slots.iter() {
            let start = s.start.load(Ordering::Acquire);
            if start == FREE {
                continue;
            }
            out.count += 1;
            out.oldest_nanos = out.oldest_nanos.max(now.saturating_sub(start));
            // A phase start left over from the slot's previous operation is older than this
            // operation's start; never measure a phase from before its operation began.
            let phase_start = s.phase_start.load(Ordering::Acquire).max(start);
            let phase = Phase::from_index(s.phase.load(Ordering::Relaxed));
            let in_phase = now.saturating_sub(phase_start);
            if in_phase >= dur_nanos(budgets.get(phase)) {
                out.over_budget = true;
            } else {
                out.healthy = true;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const S: i64 = 1_000_000_000;

    #[test]
    fn slots_track_oldest_and_overflow_is_untracked() {
        let r = RunningSlots::new(2);
        let a = r.claim(10 * S, Phase::Processing);
        let b = r.claim(20 * S, Phase::Processing);
        let c = r.claim(30 * S, Phase::Processing);
        assert_eq!(c, SlotId::Untracked);
        let scan = r.scan(40 * S, &PhaseBudgets::default());
        assert_eq!(scan.count, 3);
        assert_eq!(scan.oldest_nanos, 30 * S);
        r.release(a);
        r.release(c);
        let scan = r.scan(40 * S, &PhaseBudgets::default());
        assert_eq!((scan.count, scan.oldest_nanos), (1, 20 * S));
        r.release(b);
        assert_eq!(r.scan(40 * S, &PhaseBudgets::default()).count, 0);
    }

    #[test]
    fn phase_budget_is_per_phase() {
        let r = RunningSlots::new(1);
        let b = PhaseBudgets::default().with(Phase::Processing, Duration::from_secs(300));
        let id = r.claim(0, Phase::Setup);
        assert!(r.scan(59 * S, &b).healthy);
        r.set_phase(id, Phase::Processing, 59 * S);
        let scan = r.scan(350 * S, &b);
        assert!(scan.healthy && !scan.over_budget);
        assert_eq!(scan.oldest_nanos, 350 * S);
        assert!(r.scan(359 * S, &b).over_budget);
    }
}
