//! Status rules of a row.

use std::time::Duration;

use super::*;

fn conds(h: &QueueHealth) -> Vec<Condition> {
    h.snapshot().conditions
}

#[test]
fn json_keys_are_exact_and_capacity_omitted_when_unavailable() {
    let (_c, h) = gauge(RowConfig::new("operations"));
    let v = serde_json::to_value(h.snapshot()).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "capacity_unavailable",
            "conditions",
            "depth_unavailable",
            "depth_unit",
            "dropped_last_minute",
            "dropped_lower_bound",
            "dropped_total",
            "full_seconds",
            "lag_basis",
            "lag_seconds",
            "oldest_running_seconds",
            "oldest_waiting_age_seconds",
            "running",
            "status",
            "waiting",
        ]
    );
    assert_eq!(v["capacity_unavailable"], true);
    assert_eq!(v["conditions"], serde_json::json!([]));
    assert_eq!(v["status"], "ok");
    assert_eq!(v["lag_basis"], "consumer_progress");
    assert_eq!(v["depth_unit"], "operations");
    let (_c, q) = queue(8);
    let v = serde_json::to_value(q.health().snapshot()).unwrap();
    assert_eq!(v["capacity"], 8);
    assert_eq!(v["capacity_unavailable"], false);
}

#[test]
fn one_minute_without_progress_is_backlog_lag() {
    let (c, q) = queue(8);
    q.try_push(1).unwrap();
    c.advance_secs(59);
    let r = q.health().snapshot();
    assert_eq!((r.lag_seconds, r.status), (Some(59.0), Status::Ok));
    assert_eq!(r.oldest_waiting_age_seconds, Some(59.0));
    c.advance_secs(1);
    let r = q.health().snapshot();
    assert_eq!(r.conditions, [Condition::BacklogLag]);
    assert_eq!(r.status, Status::Degraded);
    q.try_pop().unwrap().finish();
    let r = q.health().snapshot();
    assert_eq!(
        (r.lag_seconds, r.status, r.waiting),
        (Some(0.0), Status::Ok, Some(0))
    );
}

#[test]
fn arrival_after_long_idle_starts_without_lag() {
    let (c, q) = queue(8);
    c.advance_secs(600);
    q.try_push(1).unwrap();
    let r = q.health().snapshot();
    assert_eq!((r.lag_seconds, r.status), (Some(0.0), Status::Ok));
    c.advance_secs(30);
    assert_eq!(q.health().snapshot().lag_seconds, Some(30.0));
}

#[test]
fn stalled_consumer_shows_processing_and_backlog_lag() {
    let (c, q) = queue(8);
    q.try_push(1).unwrap();
    q.try_push(2).unwrap();
    let g = q.try_pop().unwrap();
    c.advance_secs(61);
    let r = q.health().snapshot();
    assert_eq!(r.running, 1);
    assert_eq!(r.waiting, Some(1));
    assert_eq!(r.oldest_running_seconds, 61.0);
    assert_eq!(r.lag_seconds, Some(61.0));
    assert_eq!(
        r.conditions,
        [Condition::ProcessingLag, Condition::BacklogLag]
    );
    assert_eq!(r.status, Status::Degraded);
    assert_eq!(g.finish(), 1);
    let r = q.health().snapshot();
    assert_eq!(
        (r.running, r.status, r.lag_seconds),
        (0, Status::Ok, Some(0.0))
    );
}

#[test]
fn healthy_long_operation_alone_does_not_degrade() {
    let mut cfg = RowConfig::new("operations").lag_basis(LagBasis::OperationProgress);
    cfg.phase_budgets = PhaseBudgets::default().with(Phase::Processing, Duration::from_secs(300));
    let (c, h) = gauge(cfg);
    let op = h.start_running();
    c.advance_secs(240);
    let r = h.snapshot();
    assert_eq!(
        (r.lag_seconds, r.status, r.running),
        (Some(240.0), Status::Ok, 1)
    );
    c.advance_secs(60);
    assert_eq!(conds(&h), [Condition::ProcessingLag]);
    op.set_phase(Phase::ResultHandling);
    assert_eq!(h.snapshot().status, Status::Ok);
    c.advance_secs(60);
    assert_eq!(h.snapshot().status, Status::Degraded);
    op.finish();
    assert_eq!(h.snapshot().status, Status::Ok);
}

#[test]
fn each_phase_has_its_own_budget() {
    let (c, h) = gauge(RowConfig::new("operations").lag_basis(LagBasis::OperationProgress));
    let op = h.start_running_in(Phase::Admission);
    c.advance_secs(59);
    op.set_phase(Phase::Setup);
    c.advance_secs(59);
    op.set_phase(Phase::Processing);
    c.advance_secs(59);
    let r = h.snapshot();
    assert_eq!((r.oldest_running_seconds, r.status), (177.0, Status::Ok));
    op.set_phase(Phase::Cleanup);
    c.advance_secs(60);
    assert_eq!(conds(&h), [Condition::ProcessingLag]);
    drop(op);
    assert_eq!(h.snapshot().status, Status::Ok);
}

#[test]
fn busy_healthy_consumer_is_not_backlog_lag() {
    let (c, s) = manual();
    let mut cfg = RowConfig::new("jobs").capacity(8);
    cfg.phase_budgets = PhaseBudgets::uniform(Duration::from_secs(600));
    let q = BoundedQueue::new(s, cfg).unwrap();
    q.try_push(1).unwrap();
    q.try_push(2).unwrap();
    let job = q.try_pop().unwrap();
    c.advance_secs(120);
    let r = q.health().snapshot();
    assert_eq!(r.lag_seconds, Some(120.0));
    assert_eq!((r.status, r.conditions.len()), (Status::Ok, 0));
    drop(job);
}

#[test]
fn three_losses_in_a_minute_warn_and_total_survives_recovery() {
    let (c, h) = gauge(RowConfig::new("records"));
    h.record_loss();
    h.record_loss();
    assert_eq!(h.snapshot().status, Status::Ok);
    c.advance_secs(30);
    h.record_loss();
    let r = h.snapshot();
    assert_eq!((r.dropped_last_minute, r.status), (3, Status::Warning));
    c.advance_secs(30);
    let r = h.snapshot();
    assert_eq!((r.dropped_last_minute, r.status), (1, Status::Ok));
    c.advance_secs(60);
    let r = h.snapshot();
    assert_eq!((r.dropped_last_minute, r.dropped_total), (0, 3));
    h.record_losses(5);
    assert_eq!(h.snapshot().dropped_total, 8);
}

#[test]
fn full_for_thirty_seconds_degrades_and_a_dequeue_resets_it() {
    let (c, s) = manual();
    let mut cfg = RowConfig::new("jobs").capacity(2);
    cfg.lag_budget = Duration::from_secs(3600);
    let q = BoundedQueue::new(s, cfg).unwrap();
    q.try_push(1).unwrap();
    c.advance_secs(10);
    q.try_push(2).unwrap();
    c.advance_secs(29);
    let r = q.health().snapshot();
    assert_eq!((r.full_seconds, r.status), (29.0, Status::Ok));
    c.advance_secs(1);
    assert_eq!(q.health().snapshot().status, Status::Degraded);
    q.try_pop().unwrap().finish();
    let r = q.health().snapshot();
    assert_eq!((r.full_seconds, r.status), (0.0, Status::Ok));
    q.try_push(3).unwrap();
    c.advance_secs(5);
    assert_eq!(q.health().snapshot().full_seconds, 5.0);
}

#[test]
fn refusals_do_not_restart_the_full_period() {
    let (c, s) = manual();
    let mut cfg = RowConfig::new("jobs").capacity(1);
    cfg.lag_budget = Duration::from_secs(3600);
    let q = BoundedQueue::new(s, cfg).unwrap();
    q.try_push(1).unwrap();
    c.advance_secs(20);
    drop(q.try_push(2).unwrap_err());
    c.advance_secs(10);
    let r = q.health().snapshot();
    assert_eq!((r.full_seconds, r.dropped_total), (30.0, 1));
    assert_eq!(r.status, Status::Degraded);
}

#[test]
fn surviving_retry_reports_retry_failed_without_loss() {
    let mut cfg = RowConfig::new("records").capacity(1000);
    cfg.lag_budget = Duration::from_secs(7200);
    let (c, h) = gauge(cfg);
    let t = h.admit();
    h.note_retry_failed();
    let r = h.snapshot();
    assert_eq!(r.conditions, [Condition::RetryFailed]);
    assert_eq!(
        (r.status, r.dropped_total, r.waiting),
        (Status::Warning, 0, Some(1))
    );
    c.advance_secs(60);
    assert_eq!(h.snapshot().status, Status::Ok);
    t.finish();
}

#[test]
fn retry_record_removal_counts_one_loss_per_unit() {
    let (_c, h) = gauge(RowConfig::new("records").capacity(1000));
    let expired = h.admit();
    let invalid = h.admit();
    let cancelled = h.admit();
    let kept = h.admit();
    assert_eq!(h.snapshot().waiting, Some(4));
    expired.lose();
    invalid.lose();
    cancelled.withdraw();
    let r = h.snapshot();
    assert_eq!((r.dropped_total, r.waiting), (2, Some(1)));
    let stamp = kept.admitted();
    kept.withdraw();
    let again = h.admit_stamped(stamp);
    assert_eq!(again.admitted(), stamp);
    again.finish();
    assert_eq!(h.snapshot().waiting, Some(0));
}

#[test]
fn uncertain_outcome_shows_a_minute_then_lower_bound_stays() {
    let (c, h) = gauge(RowConfig::new("records"));
    h.note_uncertain(Uncertain::Persistence);
    c.advance_secs(30);
    h.note_uncertain(Uncertain::Delivery);
    let r = h.snapshot();
    assert_eq!(
        r.conditions,
        [
            Condition::PersistenceUncertain,
            Condition::DeliveryUncertain
        ]
    );
    assert!(r.dropped_lower_bound);
    assert_eq!((r.status, r.dropped_total), (Status::Warning, 0));
    c.advance_secs(30);
    assert_eq!(conds(&h), [Condition::DeliveryUncertain]);
    c.advance_secs(30);
    let r = h.snapshot();
    assert!(r.conditions.is_empty() && r.dropped_lower_bound);
    assert_eq!(r.status, Status::Ok);
}

#[test]
fn state_io_then_unreadable_then_read_restores_depth() {
    let (_c, h) = gauge(
        RowConfig::new("findings")
            .capacity(10_000)
            .lag_basis(LagBasis::DeferredCheckpoint),
    );
    h.set_waiting(7);
    h.state_io_error();
    assert_eq!(conds(&h), [Condition::StateIo]);
    h.state_io_ok();
    assert!(conds(&h).is_empty());
    h.state_unreadable();
    let r = h.snapshot();
    assert_eq!((r.waiting, r.oldest_waiting_age_seconds), (None, None));
    assert!(r.depth_unavailable && r.dropped_lower_bound);
    assert_eq!(r.status, Status::Warning);
    let v = serde_json::to_value(&r).unwrap();
    assert!(v["waiting"].is_null());
    h.state_io_ok();
    assert!(h.snapshot().depth_unavailable, "only a read restores depth");
    h.state_read_ok(5);
    let r = h.snapshot();
    assert_eq!(
        (r.waiting, r.depth_unavailable, r.status),
        (Some(5), false, Status::Ok)
    );
    assert!(r.dropped_lower_bound);
}

#[test]
fn deferred_checkpoint_never_degrades_by_age_or_fullness() {
    let cfg = RowConfig::new("findings")
        .capacity(10)
        .lag_basis(LagBasis::DeferredCheckpoint);
    let (c, h) = gauge(cfg);
    h.set_waiting(10);
    let op = h.start_running();
    c.advance_secs(3600);
    let r = h.snapshot();
    assert_eq!(r.lag_seconds, Some(3600.0));
    assert_eq!(r.full_seconds, 3600.0);
    assert_eq!((r.status, r.conditions.len()), (Status::Ok, 0));
    op.finish();
}

#[test]
fn observed_age_degrades_after_its_budget() {
    let mut cfg = RowConfig::new("records").lag_basis(LagBasis::ObservedAge);
    cfg.lag_budget = Duration::from_secs(120);
    let (c, h) = gauge(cfg);
    h.set_waiting(3);
    h.note_progress();
    c.advance_secs(119);
    h.note_progress();
    let r = h.snapshot();
    assert_eq!((r.lag_seconds, r.status), (Some(119.0), Status::Ok));
    c.advance_secs(1);
    assert_eq!(conds(&h), [Condition::ObservedLag]);
    // An explicit oldest stamp (first observation persisted earlier) wins.
    let young = h.stamp();
    h.set_oldest_waiting(Some(young));
    assert_eq!(h.snapshot().status, Status::Ok);
    h.set_waiting(0);
    assert_eq!(h.snapshot().lag_seconds, Some(0.0));
}

#[test]
fn hold_pauses_ages_but_losses_still_count() {
    let (c, q) = queue(8);
    let h = q.health();
    h.hold();
    assert!(h.is_held());
    q.try_push(1).unwrap();
    let g = h.start_running();
    c.advance_secs(600);
    let r = h.snapshot();
    assert_eq!(r.oldest_waiting_age_seconds, Some(0.0));
    assert_eq!((r.oldest_running_seconds, r.lag_seconds), (0.0, Some(0.0)));
    h.record_losses(3);
    let r = h.snapshot();
    assert_eq!((r.dropped_last_minute, r.status), (3, Status::Warning));
    h.release();
    c.advance_secs(61);
    let r = h.snapshot();
    assert_eq!(r.oldest_waiting_age_seconds, Some(61.0));
    assert_eq!(r.oldest_running_seconds, 61.0);
    assert_eq!(r.dropped_last_minute, 0);
    assert_eq!(r.status, Status::Degraded);
    g.finish();
}

#[test]
fn lag_grace_delays_lag() {
    let (c, s) = manual();
    let mut cfg = RowConfig::new("findings").capacity(16_384);
    cfg.lag_grace = Duration::from_secs(45);
    let q = BoundedQueue::new(s, cfg).unwrap();
    q.try_push(1).unwrap();
    c.advance_secs(104);
    let r = q.health().snapshot();
    assert_eq!((r.lag_seconds, r.status), (Some(59.0), Status::Ok));
    assert_eq!(r.oldest_waiting_age_seconds, Some(104.0));
    c.advance_secs(1);
    assert_eq!(q.health().snapshot().status, Status::Degraded);
}

#[test]
fn owner_flags_warn_and_consumer_stopped_degrades() {
    let (_c, h) = gauge(RowConfig::new("notifications"));
    h.set_flag(Flag::SourceIo, true);
    h.set_flag(Flag::SpoolIo, true);
    h.set_flag(Flag::DeliveryFailed, true);
    let r = h.snapshot();
    assert_eq!(
        r.conditions,
        [
            Condition::SourceIo,
            Condition::SpoolIo,
            Condition::DeliveryFailed
        ]
    );
    assert_eq!(r.status, Status::Warning);
    h.set_flag(Flag::ConsumerStopped, true);
    assert!(h.flag(Flag::ConsumerStopped));
    assert_eq!(h.snapshot().status, Status::Degraded);
    for f in [
        Flag::SourceIo,
        Flag::SpoolIo,
        Flag::DeliveryFailed,
        Flag::ConsumerStopped,
    ] {
        h.set_flag(f, false);
    }
    assert_eq!(h.snapshot().status, Status::Ok);
}

#[test]
fn unmapped_ring_reports_unavailable_depth_and_lag() {
    let (_c, h) = gauge(RowConfig::new("bytes").capacity(1 << 20));
    h.set_waiting(4096);
    h.set_depth_unavailable(true);
    h.set_lag_basis(LagBasis::Unavailable);
    let r = h.snapshot();
    assert_eq!((r.waiting, r.lag_seconds), (None, None));
    assert_eq!(r.capacity, Some(1 << 20));
    let v = serde_json::to_value(&r).unwrap();
    assert!(v["lag_seconds"].is_null() && v["waiting"].is_null());
    assert_eq!(v["lag_basis"], "unavailable");
    assert_eq!(r.status, Status::Ok);
}

#[test]
fn file_source_in_bytes_ages_from_first_observation() {
    let (c, h) = gauge(RowConfig::new("bytes"));
    c.advance_secs(300);
    h.set_waiting(4096);
    c.advance_secs(30);
    h.set_waiting(8192); // still non-empty: age keeps running
    c.advance_secs(30);
    let r = h.snapshot();
    assert_eq!(r.oldest_waiting_age_seconds, Some(60.0));
    assert!(r.capacity_unavailable && r.status == Status::Degraded);
    h.note_progress();
    h.set_waiting(100);
    assert_eq!(h.snapshot().status, Status::Ok);
    h.set_capacity(Some(1000));
    assert_eq!(h.snapshot().capacity, Some(1000));
    h.set_capacity(None);
    assert!(h.snapshot().capacity_unavailable);
}

#[test]
fn panic_while_running_counts_lost_work() {
    let (_c, h) = gauge(RowConfig::new("operations"));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _op = h.start_running();
        panic!("scanner panic");
    }));
    assert!(r.is_err());
    let r = h.snapshot();
    assert_eq!((r.running, r.dropped_total), (0, 1));
    h.start_running().lose();
    h.start_running().cancel();
    drop(h.start_running());
    assert_eq!(h.snapshot().dropped_total, 2);
}

#[test]
fn row_json_round_trips_and_garbage_never_panics() {
    let (c, q) = queue(4);
    q.try_push(1).unwrap();
    c.advance_secs(70);
    let row = q.health().snapshot();
    let text = serde_json::to_vec(&row).unwrap();
    assert_eq!(Row::from_json(&text).unwrap(), row);
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for len in 0..2000usize {
        let mut buf = Vec::with_capacity(len % 200);
        for _ in 0..len % 200 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            buf.push(seed as u8);
        }
        if len % 3 == 0 {
            let cut = len % text.len();
            buf = text.get(..cut).unwrap_or_default().to_vec();
        }
        assert!(Row::from_json(&buf).is_err());
    }
    assert!(Row::from_json(br#"{"waiting":-1}"#).is_err());
}
