//! Admission instants of a bounded queue, in a ring indexed by sequence number.
//!
//! The n-th admitted item (sequence `n`) writes its admission instant to `ring[n % cap]`;
//! the head of the queue is the item with sequence `dequeued`, so its age is
//! `now - ring[dequeued % cap]`, read without a lock. Each slot packs the instant in
//! milliseconds (upper 44 bits, 557 years) with the low 20 bits of the sequence number, so a
//! reader can tell whether the slot already holds the head's instant; when it does not (a
//! producer between its send and its stamp), the head's age is unknown for that read.
//! Capacities are at most 2^20 (`BoundedQueue::MAX_CAPACITY`), so within one lap of the ring
//! every slot's tag is distinct from the tag of the next sequence that reuses it, except
//! for a capacity of exactly 2^20, where a stale read is possible only in that window.

use std::sync::atomic::{AtomicU64, Ordering};

const TAG_BITS: u32 = 20;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
const MS_MASK: u64 = (1 << 44) - 1;
const NANOS_PER_MS: i64 = 1_000_000;

pub(crate) struct AdmissionRing {
    slots: Box<[AtomicU64]>,
}

impl AdmissionRing {
    /// A ring of `cap` slots (`cap >= 1`).
    pub(crate) fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        AdmissionRing {
            // Slot i is first written by sequence i; start it tagged with a different value.
            slots: (0..cap)
                .map(|i| AtomicU64::new(((i as u64).wrapping_add(1)) & TAG_MASK))
                .collect(),
        }
    }

    #[inline]
    fn slot(&self, seq: u64) -> Option<&AtomicU64> {
        self.slots.get((seq % self.slots.len() as u64) as usize)
    }

    /// Records the admission instant (health-clock nanoseconds) of sequence `seq`.
    #[inline]
    pub(crate) fn stamp(&self, seq: u64, admitted_nanos: i64) {
        let ms = (admitted_nanos.max(0) / NANOS_PER_MS) as u64 & MS_MASK;
        if let Some(s) = self.slot(seq) {
            s.store((ms << TAG_BITS) | (seq & TAG_MASK), Ordering::Release);
        }
    }

    /// Admission instant (health-clock nanoseconds, millisecond resolution) of sequence
    /// `seq`, if its slot holds it.
    pub(crate) fn admitted(&self, seq: u64) -> Option<i64> {
        let v = self.slot(seq)?.load(Ordering::Acquire);
        if v & TAG_MASK != seq & TAG_MASK {
            return None;
        }
        i64::try_from(v >> TAG_BITS)
            .ok()
            .map(|ms| ms.saturating_mul(NANOS_PER_MS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_lookup_by_sequence_and_reuse() {
        let r = AdmissionRing::new(3);
        assert_eq!(
            r.admitted(0),
            None,
            "unwritten slot is not mistaken for a stamp"
        );
        r.stamp(0, 5_000_000_000);
        r.stamp(1, 6_000_000_000);
        assert_eq!(r.admitted(0), Some(5_000_000_000));
        assert_eq!(r.admitted(1), Some(6_000_000_000));
        assert_eq!(r.admitted(2), None);
        r.stamp(3, 7_000_000_000); // reuses slot 0
        assert_eq!(r.admitted(0), None);
        assert_eq!(r.admitted(3), Some(7_000_000_000));
        let one = AdmissionRing::new(0);
        one.stamp(9, 1_000_000);
        assert_eq!(one.admitted(9), Some(1_000_000));
    }
}
