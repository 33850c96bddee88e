//! [`Row`]: one health row as reported, and the status function that computes it.

use std::borrow::Cow;
use std::sync::atomic::{AtomicI64, Ordering};

use serde::{Deserialize, Serialize};

use super::health::{QueueHealth, NONE, NO_CAP};
use super::types::{dur_nanos, Condition, Flag, LagBasis, Status};

/// One row of `status.queues` / `snapshot.queues`. Key names and rules: see the table in
/// [`crate::queue`]. Durations are seconds with millisecond precision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Waiting units; `null` while `depth_unavailable`.
    pub waiting: Option<u64>,
    /// Fixed capacity; omitted when `capacity_unavailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u64>,
    pub capacity_unavailable: bool,
    pub running: u64,
    pub dropped_total: u64,
    pub dropped_last_minute: u64,
    /// Age of the head (oldest) waiting unit; 0 when empty; `null` while depth is unavailable.
    pub oldest_waiting_age_seconds: Option<f64>,
    /// Run time of the oldest running operation; 0 when none.
    pub oldest_running_seconds: f64,
    /// How long the row has been continuously full; 0 when not full.
    pub full_seconds: f64,
    pub depth_unit: Cow<'static, str>,
    /// Lag by `lag_basis`; `null` when the basis is `unavailable`.
    pub lag_seconds: Option<f64>,
    pub lag_basis: LagBasis,
    pub conditions: Vec<Condition>,
    pub depth_unavailable: bool,
    pub dropped_lower_bound: bool,
    pub status: Status,
}

impl Row {
    /// Parses a row sent by the daemon (e.g. `svc status --json` over the control socket).
    pub fn from_json(bytes: &[u8]) -> Result<Row, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

fn secs(nanos: i64) -> f64 {
    (nanos.max(0) as f64 / 1e6).round() / 1e3
}

fn recent(at: &AtomicI64, raw_now: i64, window: i64) -> bool {
    let t = at.load(Ordering::Acquire);
    t != NONE && raw_now.saturating_sub(t) < window
}

impl QueueHealth {
    /// Reads the row from atomics only; never blocks on producers, consumers or their locks.
    pub fn snapshot(&self) -> Row {
        let cfg = &self.config;
        let now = self.hclock.now();
        let raw = self.hclock.raw();
        let basis = LagBasis::from_u8(self.lag_basis.load(Ordering::Acquire));
        let depth_unavailable = self.depth_unavailable.load(Ordering::Acquire);
        let cap = self.capacity.load(Ordering::Acquire);
        let capacity = (cap != NO_CAP).then_some(cap);

        // Depth and the head's admission instant.
        let (waiting, head) = match &self.ring {
            Some(ring) => {
                let deq = self.dequeued.load(Ordering::Acquire);
                let adm = self.admitted.load(Ordering::Acquire);
                let w = adm.saturating_sub(deq);
                (w, if w > 0 { ring.admitted(deq) } else { None })
            }
            None => {
                let w = self.gauge.load(Ordering::Acquire).max(0) as u64;
                let head = if w == 0 {
                    None
                } else {
                    match self.oldest_stamp.load(Ordering::Acquire) {
                        NONE => {
                            Some(self.nonempty_since.load(Ordering::Acquire)).filter(|t| *t != NONE)
                        }
                        s => Some(s),
                    }
                };
                (w, head)
            }
        };
        let head_age = head.map_or(0, |a| now.saturating_sub(a).max(0));
        let run = self.running.scan(now, &cfg.phase_budgets);
        let since_progress = now
            .saturating_sub(self.last_progress.load(Ordering::Acquire))
            .max(0);
        let grace = dur_nanos(cfg.lag_grace);
        let budget = dur_nanos(cfg.lag_budget);
        let measured_waiting = waiting > 0 && !depth_unavailable;
        let waiting_lag = if measured_waiting {
            since_progress.min(head_age).saturating_sub(grace).max(0)
        } else {
            0
        };
        let head_lag = if measured_waiting { head_age } else { 0 };

        let lag = match basis {
            LagBasis::ConsumerProgress => {
                Some(waiting_lag.max(since_progress.min(run.oldest_nanos)))
            }
            LagBasis::OperationProgress => Some(run.oldest_nanos.max(waiting_lag)),
            LagBasis::DeferredCheckpoint => Some(head_lag),
            LagBasis::ObservedAge => Some(head_lag.saturating_sub(grace).max(0)),
            LagBasis::Unavailable => None,
        };

        let mut conditions = Vec::new();
        let progress_rules = matches!(
            basis,
            LagBasis::ConsumerProgress | LagBasis::OperationProgress
        );
        if progress_rules && run.over_budget {
            conditions.push(Condition::ProcessingLag);
        }
        if progress_rules && waiting_lag >= budget && !run.healthy {
            conditions.push(Condition::BacklogLag);
        }
        if basis == LagBasis::ObservedAge && measured_waiting && lag.unwrap_or(0) >= budget {
            conditions.push(Condition::ObservedLag);
        }
        let window = dur_nanos(cfg.transient_window);
        if recent(&self.retry_failed_at, raw, window) {
            conditions.push(Condition::RetryFailed);
        }
        if recent(&self.persistence_uncertain_at, raw, window) {
            conditions.push(Condition::PersistenceUncertain);
        }
        if recent(&self.delivery_uncertain_at, raw, window) {
            conditions.push(Condition::DeliveryUncertain);
        }
        let flags = self.flags.load(Ordering::Acquire);
        conditions.extend(
            Flag::ALL
                .iter()
                .filter(|f| flags & f.bit() != 0)
                .map(|f| f.condition()),
        );
        conditions.sort();

        let full_since = self.full_since.load(Ordering::Acquire);
        let full_nanos = match capacity {
            Some(c) if !depth_unavailable && waiting >= c && full_since != NONE => {
                now.saturating_sub(full_since).max(0)
            }
            _ => 0,
        };
        let dropped_last_minute = self.losses.last_minute(raw);

        let status = if conditions.iter().any(|c| c.degrades())
            || (basis != LagBasis::DeferredCheckpoint
                && full_nanos > 0
                && full_nanos >= dur_nanos(cfg.full_budget))
        {
            Status::Degraded
        } else if !conditions.is_empty()
            || (cfg.loss_warning > 0 && dropped_last_minute >= cfg.loss_warning)
        {
            Status::Warning
        } else {
            Status::Ok
        };

        Row {
            waiting: (!depth_unavailable).then_some(waiting),
            capacity,
            capacity_unavailable: capacity.is_none(),
            running: run.count,
            dropped_total: self.losses.total(),
            dropped_last_minute,
            oldest_waiting_age_seconds: (!depth_unavailable).then(|| secs(head_lag)),
            oldest_running_seconds: secs(run.oldest_nanos),
            full_seconds: secs(full_nanos),
            depth_unit: cfg.depth_unit.clone(),
            lag_seconds: lag.map(secs),
            lag_basis: basis,
            conditions,
            depth_unavailable,
            dropped_lower_bound: self.lower_bound.load(Ordering::Acquire),
            status,
        }
    }
}
