//! [`Capacity`]: a fixed bound kept as a count of taken slots, for a channel that allocates
//! its slots as they are used (the channel itself is unbounded). An admission takes a slot
//! first and sends only if it got one; the consumer gives slots back as it takes items.

use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Debug)]
pub(crate) struct Capacity {
    taken: AtomicUsize,
    max: usize,
}

impl Capacity {
    pub(crate) fn new(max: usize) -> Capacity {
        Capacity {
            taken: AtomicUsize::new(0),
            max,
        }
    }

    /// The bound.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Takes a slot if one is free. Sequentially consistent, so a producer that registers
    /// itself as waiting and then fails here is seen by the [`Capacity::give_back`] that
    /// frees the slot after it (`BoundedQueue::push_timeout` relies on this).
    #[inline]
    pub(crate) fn try_take(&self) -> bool {
        self.taken
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                (t < self.max).then_some(t + 1)
            })
            .is_ok()
    }

    /// Gives back `n` taken slots.
    #[inline]
    pub(crate) fn give_back(&self, n: usize) {
        self.taken.fetch_sub(n, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_up_to_the_bound_and_again_after_a_give_back() {
        let c = Capacity::new(2);
        assert!(c.try_take() && c.try_take());
        assert!(!c.try_take());
        c.give_back(2);
        assert!(c.try_take());
        assert_eq!(c.max(), 2);
    }
}
