//! Value types of a health row: lag basis, phases, conditions, status, per-row config.

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How `lag_seconds` is measured on a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LagBasis {
    /// Time without consumer progress (dequeue or completion) while work exists.
    ConsumerProgress,
    /// Age of the oldest running operation; degradation is judged per phase budget.
    OperationProgress,
    /// Parked work awaiting a later checkpoint; age never degrades the row.
    DeferredCheckpoint,
    /// Age of the oldest observed waiting item (since admission or first observation).
    ObservedAge,
    /// Lag cannot be measured; `lag_seconds` is `null`.
    Unavailable,
}

impl LagBasis {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            LagBasis::ConsumerProgress => 0,
            LagBasis::OperationProgress => 1,
            LagBasis::DeferredCheckpoint => 2,
            LagBasis::ObservedAge => 3,
            LagBasis::Unavailable => 4,
        }
    }

    pub(crate) fn from_u8(v: u8) -> LagBasis {
        match v {
            0 => LagBasis::ConsumerProgress,
            1 => LagBasis::OperationProgress,
            2 => LagBasis::DeferredCheckpoint,
            3 => LagBasis::ObservedAge,
            _ => LagBasis::Unavailable,
        }
    }
}

/// Phase of a running operation. Each phase has its own budget ([`PhaseBudgets`]); the time
/// spent in the current phase is compared with that phase's budget only, so a long operation
/// that stays inside each phase budget never degrades its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    Admission,
    Setup,
    Processing,
    ResultHandling,
    Cleanup,
}

impl Phase {
    pub const ALL: [Phase; 5] = [
        Phase::Admission,
        Phase::Setup,
        Phase::Processing,
        Phase::ResultHandling,
        Phase::Cleanup,
    ];

    pub(crate) fn index(self) -> usize {
        match self {
            Phase::Admission => 0,
            Phase::Setup => 1,
            Phase::Processing => 2,
            Phase::ResultHandling => 3,
            Phase::Cleanup => 4,
        }
    }

    pub(crate) fn from_index(i: u8) -> Phase {
        Phase::ALL
            .get(usize::from(i))
            .copied()
            .unwrap_or(Phase::Processing)
    }
}

/// Per-phase budgets. Default: one minute each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseBudgets(pub [Duration; 5]);

impl PhaseBudgets {
    /// Every phase gets `d`.
    pub fn uniform(d: Duration) -> Self {
        PhaseBudgets([d; 5])
    }

    /// Returns a copy with `phase` set to `d`.
    pub fn with(mut self, phase: Phase, d: Duration) -> Self {
        if let Some(slot) = self.0.get_mut(phase.index()) {
            *slot = d;
        }
        self
    }

    /// Budget of one phase.
    pub fn get(&self, phase: Phase) -> Duration {
        self.0
            .get(phase.index())
            .copied()
            .unwrap_or(Duration::from_secs(60))
    }
}

impl Default for PhaseBudgets {
    fn default() -> Self {
        Self::uniform(Duration::from_secs(60))
    }
}

/// A condition token reported in a row's `conditions` array (serialized snake_case, in
/// declaration order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// A running operation exceeded the budget of its current phase (degrades).
    ProcessingLag,
    /// Work waits without consumer progress beyond the lag budget (degrades).
    BacklogLag,
    /// `observed_age` row whose oldest item is older than the lag budget (degrades).
    ObservedLag,
    /// A retry failed but its record survives; shown for the transient window (warning).
    RetryFailed,
    /// A state-file read or write failed (warning until a successful state operation).
    StateIo,
    /// The row's source could not be read (owner flag, warning).
    SourceIo,
    /// An outcome of persistence is unknown; shown for the transient window (warning).
    PersistenceUncertain,
    /// An outcome of delivery is unknown; shown for the transient window (warning).
    DeliveryUncertain,
    /// The consumer is not running (owner flag, degrades).
    ConsumerStopped,
    /// Spool I/O failed (owner flag, warning).
    SpoolIo,
    /// A delivery failed (owner flag, warning).
    DeliveryFailed,
}

impl Condition {
    /// Conditions that make a row `degraded`; every other condition makes it `warning`.
    pub fn degrades(self) -> bool {
        matches!(
            self,
            Condition::ProcessingLag
                | Condition::BacklogLag
                | Condition::ObservedLag
                | Condition::ConsumerStopped
        )
    }
}

/// Conditions the owner sets and clears explicitly ([`crate::queue::QueueHealth::set_flag`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flag {
    StateIo,
    SourceIo,
    SpoolIo,
    DeliveryFailed,
    ConsumerStopped,
}

impl Flag {
    pub(crate) const ALL: [Flag; 5] = [
        Flag::StateIo,
        Flag::SourceIo,
        Flag::SpoolIo,
        Flag::DeliveryFailed,
        Flag::ConsumerStopped,
    ];

    pub(crate) fn bit(self) -> u32 {
        match self {
            Flag::StateIo => 1,
            Flag::SourceIo => 2,
            Flag::SpoolIo => 4,
            Flag::DeliveryFailed => 8,
            Flag::ConsumerStopped => 16,
        }
    }

    pub(crate) fn condition(self) -> Condition {
        match self {
            Flag::StateIo => Condition::StateIo,
            Flag::SourceIo => Condition::SourceIo,
            Flag::SpoolIo => Condition::SpoolIo,
            Flag::DeliveryFailed => Condition::DeliveryFailed,
            Flag::ConsumerStopped => Condition::ConsumerStopped,
        }
    }
}

/// Kind of uncertain outcome ([`crate::queue::QueueHealth::note_uncertain`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Uncertain {
    Persistence,
    Delivery,
}

/// Row status. Ordered: `Ok < Warning < Degraded`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    #[default]
    Ok,
    Warning,
    Degraded,
}

/// Opaque admission instant of one unit of work, on its row's health clock (which pauses
/// while the row is held). Carry it with the item across retries and coalescing so waiting
/// age is retained; keep the older one when two units coalesce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Admitted(pub(crate) i64);

impl Admitted {
    /// The older of two stamps (use when coalescing two units into one).
    pub fn older(self, other: Admitted) -> Admitted {
        if other.0 < self.0 {
            other
        } else {
            self
        }
    }
}

/// Thresholds and shape of one row. Build with [`RowConfig::new`] and adjust fields.
#[derive(Clone, Debug, PartialEq)]
pub struct RowConfig {
    /// `depth_unit` key: `findings`, `bytes`, `directory_tasks`, `notifications`, ...
    pub depth_unit: Cow<'static, str>,
    /// Fixed capacity; `None` reports `capacity_unavailable`. Required by `BoundedQueue`.
    pub capacity: Option<u64>,
    /// Initial lag basis (owners may change it later, e.g. after a ring is unmapped).
    pub lag_basis: LagBasis,
    /// Waiting work without progress for longer than this is lag. Default 60 s.
    pub lag_budget: Duration,
    /// Waiting age below this never counts as lag (e.g. 45 s for held dropper findings).
    /// Default 0.
    pub lag_grace: Duration,
    /// Budget per phase of a running operation. Default 60 s each.
    pub phase_budgets: PhaseBudgets,
    /// Continuously full for this long degrades. Default 30 s.
    pub full_budget: Duration,
    /// This many losses in the last minute warn (0 disables the rule). Default 3.
    pub loss_warning: u64,
    /// How long `retry_failed`, `persistence_uncertain`, `delivery_uncertain` stay shown after
    /// the last occurrence. Default 60 s.
    pub transient_window: Duration,
    /// Running operations whose start instant is tracked (one atomic slot each). Operations
    /// beyond this are still counted in `running` but have no age. Default 4.
    pub running_slots: usize,
}

impl RowConfig {
    /// A row measured in `depth_unit`, with every default: no capacity, `consumer_progress`,
    /// 60 s lag and phase budgets, 30 s full budget, 3 losses warn, 60 s transient window.
    pub fn new(depth_unit: impl Into<Cow<'static, str>>) -> Self {
        RowConfig {
            depth_unit: depth_unit.into(),
            capacity: None,
            lag_basis: LagBasis::ConsumerProgress,
            lag_budget: Duration::from_secs(60),
            lag_grace: Duration::ZERO,
            phase_budgets: PhaseBudgets::default(),
            full_budget: Duration::from_secs(30),
            loss_warning: 3,
            transient_window: Duration::from_secs(60),
            running_slots: 4,
        }
    }

    /// Sets a fixed capacity.
    pub fn capacity(mut self, capacity: u64) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// Sets the lag basis.
    pub fn lag_basis(mut self, basis: LagBasis) -> Self {
        self.lag_basis = basis;
        self
    }

    /// Sets the number of tracked running slots.
    pub fn running_slots(mut self, n: usize) -> Self {
        self.running_slots = n;
        self
    }
}

pub(crate) fn dur_nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_serialize_snake_case() {
        let v = serde_json::to_string(&[Condition::ProcessingLag, Condition::DeliveryUncertain])
            .unwrap();
        assert_eq!(v, r#"["processing_lag","delivery_uncertain"]"#);
        assert_eq!(
            serde_json::to_string(&LagBasis::DeferredCheckpoint).unwrap(),
            r#""deferred_checkpoint""#
        );
        assert_eq!(
            serde_json::to_string(&Status::Degraded).unwrap(),
            r#""degraded""#
        );
        for b in 0..=5u8 {
            assert_eq!(
                LagBasis::from_u8(LagBasis::from_u8(b).to_u8()).to_u8(),
                b.min(4)
            );
        }
    }

    #[test]
    fn status_orders_and_stamps_coalesce_to_older() {
        assert!(Status::Ok < Status::Warning && Status::Warning < Status::Degraded);
        assert_eq!(Admitted(5).older(Admitted(3)), Admitted(3));
        assert_eq!(Admitted(3).older(Admitted(5)), Admitted(3));
        let b = PhaseBudgets::default().with(Phase::Processing, Duration::from_secs(300));
        assert_eq!(b.get(Phase::Processing), Duration::from_secs(300));
        assert_eq!(b.get(Phase::Setup), Duration::from_secs(60));
    }
}
