//! [`QueueHealth`]: the health state of one row, atomics only.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use super::guards::{RunningGuard, Ticket};
use super::hclock::HealthClock;
use super::losses::LossWindow;
use super::ring::AdmissionRing;
use super::slots::RunningSlots;
use super::types::{Admitted, Flag, LagBasis, Phase, RowConfig, Uncertain};
use crate::clock::SharedClock;

pub(crate) const NONE: i64 = i64::MIN;
pub(crate) const NO_CAP: u64 = u64::MAX;

/// Health state of one row, shared as `Arc<QueueHealth>` between the row's owner (producers,
/// consumers, or a subsystem that measures itself) and the [`super::Registry`].
///
/// Guarantees:
/// - Every method is lock-free except [`hold`](Self::hold) / [`release`](Self::release),
///   which serialize among themselves only. [`snapshot`](Self::snapshot) reads atomics and
///   never waits for a producer, a consumer or a lock they hold.
/// - All time comes from the injected clock.
/// - Depth is either counted by a [`super::BoundedQueue`] (admitted minus dequeued, with an
///   admission ring), or, for rows that are not channels, set by the owner through the
///   gauge methods (`set_waiting`, `add_waiting`, `sub_waiting`, [`Ticket`]). Gauge methods
///   have no effect on the depth a queue-backed row reports.
pub struct QueueHealth {
    pub(super) hclock: HealthClock,
    pub(super) config: RowConfig,
    pub(super) capacity: AtomicU64,
    pub(super) lag_basis: AtomicU8,
    // Depth, gauge rows.
    pub(super) gauge: AtomicI64,
    pub(super) nonempty_since: AtomicI64,
    pub(super) oldest_stamp: AtomicI64,
    // Depth, queue-backed rows.
    pub(super) ring: Option<AdmissionRing>,
    pub(super) admitted: AtomicU64,
    pub(super) dequeued: AtomicU64,
    // Progress and fullness (health clock).
    pub(super) last_progress: AtomicI64,
    pub(super) full_since: AtomicI64,
    pub(super) running: RunningSlots,
    pub(super) losses: LossWindow,
    // Conditions.
    pub(super) flags: AtomicU32,
    pub(super) retry_failed_at: AtomicI64,
    pub(super) persistence_uncertain_at: AtomicI64,
    pub(super) delivery_uncertain_at: AtomicI64,
    pub(super) depth_unavailable: AtomicBool,
    pub(super) lower_bound: AtomicBool,
}

impl QueueHealth {
    /// A row that is not a channel: the owner reports depth through the gauge methods.
    pub fn new(clock: SharedClock, config: RowConfig) -> Arc<QueueHealth> {
        Arc::new(Self::build(clock, config, None))
    }

    pub(super) fn build(
        clock: SharedClock,
        config: RowConfig,
        ring: Option<AdmissionRing>,
    ) -> QueueHealth {
        let hclock = HealthClock::new(clock);
        let now = hclock.now();
        QueueHealth {
            capacity: AtomicU64::new(config.capacity.unwrap_or(NO_CAP)),
            lag_basis: AtomicU8::new(config.lag_basis.to_u8()),
            gauge: AtomicI64::new(0),
            nonempty_since: AtomicI64::new(NONE),
            oldest_stamp: AtomicI64::new(NONE),
            ring,
            admitted: AtomicU64::new(0),
            dequeued: AtomicU64::new(0),
            last_progress: AtomicI64::new(now),
            full_since: AtomicI64::new(NONE),
            running: RunningSlots::new(config.running_slots),
            losses: LossWindow::new(),
            flags: AtomicU32::new(0),
            retry_failed_at: AtomicI64::new(NONE),
            persistence_uncertain_at: AtomicI64::new(NONE),
            delivery_uncertain_at: AtomicI64::new(NONE),
            depth_unavailable: AtomicBool::new(false),
            lower_bound: AtomicBool::new(false),
            hclock,
            config,
        }
    }

    /// The row's configuration (thresholds are fixed at construction).
    pub fn config(&self) -> &RowConfig {
        &self.config
    }

    /// Admission stamp for "now" on this row's health clock.
    #[inline]
    pub fn stamp(&self) -> Admitted {
        Admitted(self.hclock.now())
    }

    // ----- depth (gauge rows) -----

    /// Sets the waiting depth (gauge rows). A transition from empty starts the waiting age
    /// ("first observation"); reaching empty clears it.
    pub fn set_waiting(&self, n: u64) {
        let new = i64::try_from(n).unwrap_or(i64::MAX);
        let prev = self.gauge.swap(new, Ordering::AcqRel);
        self.gauge_moved(prev, new);
    }

    /// Adds to the waiting depth (gauge rows).
    pub fn add_waiting(&self, n: u64) {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let prev = self.gauge.fetch_add(n, Ordering::AcqRel);
        self.gauge_moved(prev, prev.saturating_add(n));
    }

    /// Subtracts from the waiting depth (gauge rows); never reports below zero.
    pub fn sub_waiting(&self, n: u64) {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let prev = self.gauge.fetch_sub(n, Ordering::AcqRel);
        self.gauge_moved(prev, prev.saturating_sub(n));
    }

    fn gauge_moved(&self, prev: i64, new: i64) {
        let now = self.hclock.now();
        if new <= 0 {
            self.nonempty_since.store(NONE, Ordering::Release);
        } else if prev <= 0 {
            self.nonempty_since.store(now, Ordering::Release);
        }
        let cap = self.capacity.load(Ordering::Acquire);
        if cap != NO_CAP && new.max(0) as u64 >= cap {
            let _ =
                self.full_since
                    .compare_exchange(NONE, now, Ordering::AcqRel, Ordering::Relaxed);
        } else {
            self.full_since.store(NONE, Ordering::Release);
        }
    }

    /// Admission instant of the oldest waiting unit, when the owner knows it (gauge rows).
    /// Without it, the waiting age runs from the moment the row last became non-empty.
    pub fn set_oldest_waiting(&self, oldest: Option<Admitted>) {
        self.oldest_stamp
            .store(oldest.map_or(NONE, |a| a.0), Ordering::Release);
    }

    /// Changes the reported capacity (owner-measured rows; a queue's channel capacity is
    /// fixed); `None` reports `capacity_unavailable`.
    pub fn set_capacity(&self, capacity: Option<u64>) {
        let v = capacity.map_or(NO_CAP, |c| c.min(NO_CAP - 1));
        self.capacity.store(v, Ordering::Release);
    }

    /// Marks depth as (un)measurable; while unavailable, `waiting` and waiting age are `null`.
    pub fn set_depth_unavailable(&self, unavailable: bool) {
        self.depth_unavailable.store(unavailable, Ordering::Release);
    }

    /// Changes the lag basis (e.g. to `unavailable` after a kernel ring is unmapped).
    pub fn set_lag_basis(&self, basis: LagBasis) {
        self.lag_basis.store(basis.to_u8(), Ordering::Release);
    }

    /// Records consumer progress (gauge rows: e.g. bytes transferred).
    #[inline]
    pub fn note_progress(&self) {
        self.last_progress
            .store(self.hclock.now(), Ordering::Release);
    }

    /// Admits one unit on a gauge row: waiting + 1 until the ticket is resolved.
    pub fn admit(self: &Arc<Self>) -> Ticket {
        let stamp = self.stamp();
        self.admit_stamped(stamp)
    }

    /// Admits one unit keeping an earlier admission stamp (retry, coalescing).
    pub fn admit_stamped(self: &Arc<Self>, admitted: Admitted) -> Ticket {
        self.add_waiting(1);
        Ticket::new(Arc::clone(self), admitted)
    }

    // ----- running -----

    /// Marks one operation running (phase `Processing`) until the guard ends.
    pub fn start_running(&self) -> RunningGuard<'_> {
        self.start_running_in(Phase::Processing)
    }

    /// Marks one operation running, starting in `phase`.
    pub fn start_running_in(&self, phase: Phase) -> RunningGuard<'_> {
        self.start_running_at(self.hclock.now(), phase)
    }

    #[inline]
    pub(super) fn start_running_at(&self, now: i64, phase: Phase) -> RunningGuard<'_> {
        RunningGuard::new(self, self.running.claim(now, phase))
    }

    // ----- losses -----

    /// Counts one lost unit. Call exactly once per unit; [`Ticket::lose`],
    /// [`RunningGuard::lose`] and the queue's guards enforce this by consuming themselves.
    /// Removal of expired, invalid or overflowed retry records is a loss.
    pub fn record_loss(&self) {
        self.record_losses(1);
    }

    /// Counts `n` distinct lost units (e.g. an overflow that evicted `n` records).
    pub fn record_losses(&self, n: u64) {
        self.losses.add(n, self.hclock.raw());
    }

    /// Cumulative losses since the row was created (survives recovery).
    pub fn dropped_total(&self) -> u64 {
        self.losses.total()
    }

    // ----- conditions -----

    /// Sets or clears an owner-managed condition.
    pub fn set_flag(&self, flag: Flag, on: bool) {
        if on {
            self.flags.fetch_or(flag.bit(), Ordering::AcqRel);
        } else {
            self.flags.fetch_and(!flag.bit(), Ordering::AcqRel);
        }
    }

    /// Whether an owner-managed condition is set.
    pub fn flag(&self, flag: Flag) -> bool {
        self.flags.load(Ordering::Acquire) & flag.bit() != 0
    }

    /// A retry failed but its record survives: `retry_failed` for the transient window, no
    /// loss counted.
    pub fn note_retry_failed(&self) {
        self.retry_failed_at
            .store(self.hclock.raw(), Ordering::Release);
    }

    /// An outcome is unknown: `persistence_uncertain` / `delivery_uncertain` for the transient
    /// window, and `dropped_lower_bound` from now on (never cleared).
    pub fn note_uncertain(&self, kind: Uncertain) {
        let at = match kind {
            Uncertain::Persistence => &self.persistence_uncertain_at,
            Uncertain::Delivery => &self.delivery_uncertain_at,
        };
        at.store(self.hclock.raw(), Ordering::Release);
        self.lower_bound.store(true, Ordering::Release);
    }

    /// A state-file read or write failed: `state_io` until a successful state operation.
    pub fn state_io_error(&self) {
        self.set_flag(Flag::StateIo, true);
    }

    /// A failed write could not be read back: `state_io`, `depth_unavailable`, and
    /// `dropped_lower_bound` (never cleared).
    pub fn state_unreadable(&self) {
        self.set_flag(Flag::StateIo, true);
        self.depth_unavailable.store(true, Ordering::Release);
        self.lower_bound.store(true, Ordering::Release);
    }

    /// A state write succeeded: clears `state_io` (depth stays unavailable until a read).
    pub fn state_io_ok(&self) {
        self.set_flag(Flag::StateIo, false);
    }

    /// A state read succeeded with `depth` units: clears `state_io` and `depth_unavailable`
    /// and restores measured depth (gauge rows). `dropped_lower_bound` stays.
    pub fn state_read_ok(&self, depth: u64) {
        self.set_waiting(depth);
        self.set_flag(Flag::StateIo, false);
        self.depth_unavailable.store(false, Ordering::Release);
    }

    /// Marks `dropped_lower_bound` for good (some outcomes are unknown).
    pub fn mark_lower_bound(&self) {
        self.lower_bound.store(true, Ordering::Release);
    }

    // ----- hold -----

    /// Startup hold: the row's health clock stops, so waiting and running ages, lag and full
    /// duration pause. Losses still count. Idempotent.
    pub fn hold(&self) {
        self.hclock.hold();
    }

    /// Ends the hold; ages resume from where they paused. Idempotent.
    pub fn release(&self) {
        self.hclock.release();
    }

    /// Whether the row is held.
    pub fn is_held(&self) -> bool {
        self.hclock.is_held()
    }

    // ----- queue-backed hot path -----

    /// A queue admitted an item with stamp `admitted` at health instant `now`.
    #[inline]
    pub(super) fn on_admitted(&self, admitted: i64, now: i64) {
        let seq = self.admitted.fetch_add(1, Ordering::AcqRel);
        if let Some(r) = &self.ring {
            r.stamp(seq, admitted);
        }
        let waiting = seq
            .wrapping_add(1)
            .saturating_sub(self.dequeued.load(Ordering::Acquire));
        if waiting >= self.capacity.load(Ordering::Relaxed) {
            self.full_since.store(now, Ordering::Release);
        }
    }

    /// A queue refused an item because it was full.
    #[inline]
    pub(super) fn on_full(&self, now: i64) {
        if self.full_since.load(Ordering::Relaxed) == NONE {
            let _ =
                self.full_since
                    .compare_exchange(NONE, now, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// A queue item left the channel; `progress` when a consumer took it.
    #[inline]
    pub(super) fn on_removed(&self, now: i64, progress: bool) {
        self.dequeued.fetch_add(1, Ordering::AcqRel);
        if progress {
            self.last_progress.store(now, Ordering::Release);
        }
        if self.full_since.load(Ordering::Relaxed) != NONE {
            self.full_since.store(NONE, Ordering::Release);
        }
    }

    #[inline]
    pub(super) fn now_nanos(&self) -> i64 {
        self.hclock.now()
    }
}

impl std::fmt::Debug for QueueHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueHealth")
            .field("depth_unit", &self.config.depth_unit)
            .finish_non_exhaustive()
    }
}
