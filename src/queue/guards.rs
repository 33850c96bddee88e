//! [`RunningGuard`] and [`Ticket`]: units of work that end exactly once, so a loss is
//! counted at most once per unit.

use std::sync::Arc;

use super::health::QueueHealth;
use super::slots::SlotId;
use super::types::{Admitted, Phase};

/// How a running operation or a ticket ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// Completed (progress).
    Finish,
    /// Lost: one loss (progress: the consumer moved on).
    Lose,
    /// Explicitly cancelled: no loss (progress).
    Cancel,
    /// Goes back to waiting (requeue / surviving retry): neither progress nor loss.
    Defer,
}

fn end_outcome(done: bool) -> Option<End> {
    if done {
        None
    } else if std::thread::panicking() {
        Some(End::Lose)
    } else {
        Some(End::Finish)
    }
}

/// One running operation on a row. Ends when consumed by a method or dropped; a drop during
/// a panic counts the operation as lost (recovered panics are lost work), any other drop as
/// finished.
#[must_use = "dropping the guard ends the running operation"]
pub struct RunningGuard<'a> {
    health: &'a QueueHealth,
    id: SlotId,
    done: bool,
}

impl<'a> RunningGuard<'a> {
    pub(super) fn new(health: &'a QueueHealth, id: SlotId) -> Self {
        RunningGuard {
            health,
            id,
            done: false,
        }
    }

    /// Enters `phase`; its budget is measured from now.
    pub fn set_phase(&self, phase: Phase) {
        self.health
            .running
            .set_phase(self.id, phase, self.health.now_nanos());
    }

    /// Completed: running ends, counts as progress.
    pub fn finish(mut self) {
        self.end(End::Finish);
    }

    /// Lost: running ends, exactly one loss.
    pub fn lose(mut self) {
        self.end(End::Lose);
    }

    /// Explicitly cancelled: running ends without a loss.
    pub fn cancel(mut self) {
        self.end(End::Cancel);
    }

    /// The unit goes back to waiting (requeue, surviving retry): running ends with neither
    /// progress nor loss.
    pub fn defer(mut self) {
        self.end(End::Defer);
    }

    fn end(&mut self, how: End) {
        self.done = true;
        let h = self.health;
        h.running.release(self.id);
        match how {
            End::Lose => {
                h.record_loss();
                h.note_progress();
            }
            End::Finish | End::Cancel => h.note_progress(),
            End::Defer => {}
        }
    }
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        if let Some(how) = end_outcome(self.done) {
            self.end(how);
        }
    }
}

/// One waiting unit on a gauge row (`waiting` + 1 while it lives). Resolve it exactly once;
/// a loss can therefore be counted at most once per unit. Dropped unresolved it counts as
/// finished, or as lost during a panic.
#[must_use = "dropping the ticket resolves the unit as finished"]
pub struct Ticket {
    health: Arc<QueueHealth>,
    admitted: Admitted,
    done: bool,
}

impl Ticket {
    pub(super) fn new(health: Arc<QueueHealth>, admitted: Admitted) -> Self {
        Ticket {
            health,
            admitted,
            done: false,
        }
    }

    /// The unit's admission stamp (retained across retries via `admit_stamped`).
    pub fn admitted(&self) -> Admitted {
        self.admitted
    }

    /// Done: waiting - 1, progress.
    pub fn finish(mut self) {
        self.end(End::Finish);
    }

    /// Lost (expired, invalid, overflowed, failed for good): waiting - 1, exactly one loss.
    pub fn lose(mut self) {
        self.end(End::Lose);
    }

    /// Withdrawn by explicit cancellation or shutdown drain: waiting - 1, no loss.
    pub fn withdraw(mut self) {
        self.end(End::Defer);
    }

    fn end(&mut self, how: End) {
        self.done = true;
        let h = &self.health;
        h.sub_waiting(1);
        match how {
            End::Lose => {
                h.record_loss();
                h.note_progress();
            }
            End::Finish | End::Cancel => h.note_progress(),
            End::Defer => {}
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(how) = end_outcome(self.done) {
            self.end(how);
        }
    }
}

impl std::fmt::Debug for RunningGuard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningGuard").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("admitted", &self.admitted)
            .finish_non_exhaustive()
    }
}
