//! Instrumented bounded queues and protection-queue health rows.
//!
//! Every protection queue is a [`BoundedQueue`] (a `crossbeam_channel` bounded channel plus
//! a [`QueueHealth`]) or, for subsystems that are not channels (file sources in bytes,
//! operation slots, retry records), a bare [`QueueHealth`] whose owner reports depth. Rows
//! are published under a name in a [`Registry`]; `status.queues`, `svc status --json`
//! (`snapshot.queues`) and `svc doctor` all read [`Registry::snapshot`], which reads atomics
//! only. All time comes from the injected [`crate::clock::SharedClock`].
//!
//! # Row keys
//!
//! | Key | Type | Meaning |
//! |---|---|---|
//! | `waiting` | integer or null | Units waiting (in `depth_unit`). `null` while `depth_unavailable`. |
//! | `capacity` | integer | Fixed capacity. Omitted when `capacity_unavailable`. |
//! | `capacity_unavailable` | boolean | The row has no fixed capacity. |
//! | `running` | integer | Units being processed now. |
//! | `dropped_total` | integer | Losses since the row was created; survives recovery. |
//! | `dropped_last_minute` | integer | Losses in the current second and the 59 before it (60 per-second slots). |
//! | `oldest_waiting_age_seconds` | number or null | Age of the head waiting unit since admission (or first observation), kept across retries and coalescing; 0 when empty; `null` while `depth_unavailable`. |
//! | `oldest_running_seconds` | number | Run time of the oldest running unit; 0 when none. |
//! | `full_seconds` | number | How long the row has been continuously full; 0 when not full. |
//! | `depth_unit` | string | `findings`, `bytes`, `directory_tasks`, `notifications`, `operations`, `records`, `jobs`, ... |
//! | `lag_seconds` | number or null | Lag measured by `lag_basis`; `null` when the basis is `unavailable`. |
//! | `lag_basis` | string | `consumer_progress`, `operation_progress`, `deferred_checkpoint`, `observed_age`, `unavailable`. |
//! | `conditions` | array of strings | Tokens below, in this order. Empty array when none. |
//! | `depth_unavailable` | boolean | Depth cannot be measured (unreadable state, journal source, unmapped ring). |
//! | `dropped_lower_bound` | boolean | Losses are only a lower bound (an uncertain outcome or unreadable state happened); never cleared. |
//! | `status` | string | `ok`, `warning` or `degraded`. |
//!
//! Durations are seconds with millisecond precision. Ages, lag and `full_seconds` run on the
//! row's health clock, which stops while the row is held (startup hold); loss windows and
//! transient conditions use real (monotonic) time, so losses still count while held.
//!
//! # Lag by basis
//!
//! With `since_progress` = time since the last dequeue or completion, `head_age` = age of
//! the head waiting unit, `waiting_lag` = `min(since_progress, head_age) - lag_grace` while
//! units wait (else 0):
//!
//! | `lag_basis` | `lag_seconds` | Lag conditions |
//! |---|---|---|
//! | `consumer_progress` | `max(waiting_lag, min(since_progress, oldest_running))` | `processing_lag`, `backlog_lag` |
//! | `operation_progress` | `max(oldest_running, waiting_lag)` | `processing_lag`, `backlog_lag` |
//! | `deferred_checkpoint` | `head_age` | none: age never degrades |
//! | `observed_age` | `head_age - lag_grace` | `observed_lag` |
//! | `unavailable` | `null` | none |
//!
//! # Conditions
//!
//! | Token | Set when | Effect |
//! |---|---|---|
//! | `processing_lag` | A running unit has been in its current phase (admission, setup, processing, result handling, cleanup) for that phase's budget (default 60 s each). A long operation within each phase budget does not trip it. | degraded |
//! | `backlog_lag` | `waiting_lag` reaches the lag budget (default 60 s) and no running unit is within its phase budget (a busy, healthy consumer is not lag). | degraded |
//! | `observed_lag` | `observed_age` row whose head is older than the lag budget (label `observed_lag` in `svc doctor`). | degraded |
//! | `retry_failed` | A retry failed and its record survives (no loss counted); shown for the transient window (60 s) after the last failure. | warning |
//! | `state_io` | A state-file read or write failed; cleared by the next successful state write or read. A failed write that cannot be read back also sets `depth_unavailable` and `dropped_lower_bound`; a later successful read restores measured depth. | warning |
//! | `source_io` | Owner flag: the source cannot be read. | warning |
//! | `persistence_uncertain` | An outcome of persistence is unknown; shown for 60 s after the last one, then `dropped_lower_bound` stays true. | warning |
//! | `delivery_uncertain` | As above, for delivery. | warning |
//! | `consumer_stopped` | Owner flag: the consumer is not running. | degraded |
//! | `spool_io` | Owner flag: spool I/O failed. | warning |
//! | `delivery_failed` | Owner flag: a delivery failed. | warning |
//!
//! # Status
//!
//! 1. `degraded` if any degrading condition is present (`processing_lag`, `backlog_lag`,
//!    `observed_lag`, `consumer_stopped`), or the row has been continuously full for the full
//!    budget (default 30 s; never on `deferred_checkpoint` rows).
//! 2. else `warning` if `dropped_last_minute` reaches the loss threshold (default 3) or any
//!    other condition is present.
//! 3. else `ok`.
//!
//! "Continuously full" ends at every dequeue: a saturated queue whose consumer keeps up is
//! not degraded by this rule; its refusals count as losses instead.
//!
//! # Losses
//!
//! A loss is counted once per unit of work: [`Refused`], [`WorkGuard::lose`],
//! [`RunningGuard::lose`] and [`Ticket::lose`] consume themselves, so a unit cannot be
//! counted twice; [`QueueHealth::record_losses`] takes a count of distinct units. Refused
//! pushes (full, timed out), evictions by [`BoundedQueue::force_push`], panics while a unit
//! runs, and removal of expired, invalid or overflowed retry records are losses. Explicit
//! cancellation, shutdown ([`BoundedQueue::close`], [`BoundedQueue::drain`]), a successful
//! [`BoundedQueue::retry`] of a refused item, a requeue and a surviving retry are not.
//! Uncertain outcomes are not counted; they make the total a lower bound.

mod bounded;
mod capacity;
mod error;
mod guards;
mod hclock;
mod health;
pub mod heartbeat;
mod ledger;
mod losses;
mod registry;
mod ring;
mod row;
mod slots;
mod types;
mod work;

pub use bounded::{BoundedQueue, PopError, QueueConfigError, RefuseReason};
pub(crate) use capacity::Capacity;
pub use error::{RowCause, RowError};
pub use guards::{RunningGuard, Ticket};
pub use health::QueueHealth;
pub use ledger::SpoolLedger;
pub use registry::{RegisterError, Registry, RowHandle};
pub use row::Row;
pub use types::{
    Admitted, Condition, Flag, LagBasis, Phase, PhaseBudgets, RowConfig, Status, Uncertain,
};
pub use work::{Refused, WorkGuard};

#[cfg(test)]
mod tests;
