//! [`Refused`] and [`WorkGuard`]: what a push gives back and what a pop hands out.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::bounded::{BoundedQueue, RefuseReason};
use super::guards::RunningGuard;
use super::health::QueueHealth;
use super::types::{Admitted, Phase};

/// An item the queue refused. Dropping it, or taking the item with
/// [`into_item`](Self::into_item), counts exactly one loss (none when the reason is
/// [`RefuseReason::Closed`]); [`BoundedQueue::retry`] and [`withdraw`](Self::withdraw) count
/// none.
#[must_use = "dropping a refusal counts a loss"]
pub struct Refused<T> {
    pub(super) item: T,
    pub(super) admitted: Admitted,
    pub(super) reason: RefuseReason,
    pub(super) pending: PendingLoss,
}

/// Counts one loss when dropped, unless disarmed.
pub(super) struct PendingLoss(pub(super) Option<Arc<QueueHealth>>);

impl PendingLoss {
    pub(super) fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for PendingLoss {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            h.record_loss();
        }
    }
}

impl<T> Refused<T> {
    /// Why it was refused.
    pub fn reason(&self) -> RefuseReason {
        self.reason
    }

    /// The refused item.
    pub fn item(&self) -> &T {
        &self.item
    }

    /// The item's admission stamp.
    pub fn admitted(&self) -> Admitted {
        self.admitted
    }

    /// Gives the item up as lost (one loss unless closed) and returns it.
    pub fn into_item(self) -> T {
        self.item
    }

    /// Explicit cancellation: returns the item, no loss.
    pub fn withdraw(self) -> T {
        let Refused {
            item, mut pending, ..
        } = self;
        pending.disarm();
        item
    }
}

impl<T> fmt::Debug for Refused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refused")
            .field("reason", &self.reason)
            .finish()
    }
}

impl<T> fmt::Display for Refused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            RefuseReason::Full => write!(f, "queue full"),
            RefuseReason::Timeout => write!(f, "queue full for the whole wait"),
            RefuseReason::Closed => write!(f, "queue closed"),
        }
    }
}

impl<T> std::error::Error for Refused<T> {}

/// An item taken from the queue, running until the guard ends. Dropped without a method it
/// counts as finished, or as lost when dropped during a panic.
#[must_use = "dropping the guard finishes the item"]
pub struct WorkGuard<'q, T> {
    pub(super) queue: &'q BoundedQueue<T>,
    pub(super) item: T,
    pub(super) admitted: Admitted,
    pub(super) running: RunningGuard<'q>,
}

impl<'q, T> WorkGuard<'q, T> {
    /// The item's original admission stamp.
    pub fn admitted(&self) -> Admitted {
        self.admitted
    }

    /// Enters `phase` (budget measured from now).
    pub fn set_phase(&self, phase: Phase) {
        self.running.set_phase(phase);
    }

    /// Completed: returns the item.
    pub fn finish(self) -> T {
        self.running.finish();
        self.item
    }

    /// Lost (e.g. a recovered panic, a failed send): one loss; returns the item.
    pub fn lose(self) -> T {
        self.running.lose();
        self.item
    }

    /// Cancelled explicitly: no loss; returns the item.
    pub fn cancel(self) -> T {
        self.running.cancel();
        self.item
    }

    /// Puts the item back at the tail with its original stamp (age retained). Running ends
    /// without progress. A refusal is returned as [`Refused`] (one loss if not resolved).
    pub fn requeue(self) -> Result<(), Refused<T>> {
        self.running.defer();
        self.queue.try_push_stamped(self.item, self.admitted)
    }

    /// Splits the guard: the item, its stamp, and the running marker to end later.
    pub fn into_parts(self) -> (T, Admitted, RunningGuard<'q>) {
        (self.item, self.admitted, self.running)
    }
}

impl<T> fmt::Debug for WorkGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkGuard")
            .field("admitted", &self.admitted)
            .finish_non_exhaustive()
    }
}

impl<T> Deref for WorkGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.item
    }
}

impl<T> DerefMut for WorkGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.item
    }
}
