//! `BoundedQueue` mechanics.

use std::time::Duration;

use super::*;

#[test]
fn full_push_is_refused_counted_once_and_returned() {
    let (_c, q) = queue(1);
    q.try_push(1).unwrap();
    let r = q.try_push(2).unwrap_err();
    assert_eq!((r.reason(), *r.item()), (RefuseReason::Full, 2));
    assert_eq!(q.health().dropped_total(), 0, "counted when given up");
    assert_eq!(r.into_item(), 2);
    assert_eq!(q.health().dropped_total(), 1);
    drop(q.try_push(3).unwrap_err());
    assert_eq!(q.health().dropped_total(), 2);
    assert_eq!(q.try_push(4).unwrap_err().withdraw(), 4);
    assert_eq!(q.health().dropped_total(), 2, "withdrawal is not a loss");
    assert_eq!(q.len(), 1);
}

#[test]
fn refused_item_retried_later_is_not_a_loss() {
    let (c, q) = queue(1);
    q.try_push(1).unwrap();
    c.advance_secs(5);
    let refused = q.try_push(2).unwrap_err();
    let refused = q.retry(refused).unwrap_err();
    q.try_pop().unwrap().finish();
    q.retry(refused).unwrap();
    assert_eq!(q.health().dropped_total(), 0);
    c.advance_secs(5);
    assert_eq!(q.health().snapshot().oldest_waiting_age_seconds, Some(5.0));
}

#[test]
fn requeue_keeps_the_original_admission_age() {
    let (c, q) = queue(4);
    q.try_push(1).unwrap();
    c.advance_secs(50);
    let g = q.try_pop().unwrap();
    let stamp = g.admitted();
    g.requeue().unwrap();
    c.advance_secs(20);
    let r = q.health().snapshot();
    assert_eq!((r.waiting, r.running), (Some(1), 0));
    assert_eq!(r.oldest_waiting_age_seconds, Some(70.0));
    assert_eq!(r.dropped_total, 0);
    let g = q.try_pop().unwrap();
    assert_eq!(g.admitted(), stamp);
    g.finish();
}

#[test]
fn coalesced_items_keep_the_older_stamp() {
    let (c, q) = queue(4);
    q.try_push(1).unwrap();
    c.advance_secs(30);
    q.try_push(2).unwrap();
    let a = q.try_pop().unwrap();
    let b = q.try_pop().unwrap();
    let stamp = b.admitted().older(a.admitted());
    let merged = a.finish() + b.finish();
    q.try_push_stamped(merged, stamp).unwrap();
    c.advance_secs(10);
    assert_eq!(q.health().snapshot().oldest_waiting_age_seconds, Some(40.0));
}

#[test]
fn head_age_follows_the_ring() {
    let (c, q) = queue(3);
    q.try_push(1).unwrap();
    c.advance_secs(10);
    q.try_push(2).unwrap();
    c.advance_secs(10);
    assert_eq!(q.health().snapshot().oldest_waiting_age_seconds, Some(20.0));
    q.try_pop().unwrap().finish();
    assert_eq!(q.health().snapshot().oldest_waiting_age_seconds, Some(10.0));
    // Wrap the ring a few times.
    for i in 0..7 {
        q.try_push(i).unwrap();
        c.advance_secs(1);
        q.try_pop().unwrap().finish();
    }
    let r = q.health().snapshot();
    assert_eq!(
        (r.waiting, r.oldest_waiting_age_seconds),
        (Some(1), Some(1.0))
    );
    q.try_pop().unwrap().finish();
    assert_eq!(q.health().snapshot().oldest_waiting_age_seconds, Some(0.0));
}

#[test]
fn cancellation_close_and_drain_are_not_losses() {
    let (_c, q) = queue(4);
    q.try_push(1).unwrap();
    q.try_push(2).unwrap();
    q.try_push(3).unwrap();
    assert_eq!(q.try_pop().unwrap().cancel(), 1);
    q.close();
    assert!(q.is_closed());
    let r = q.try_push(9).unwrap_err();
    assert_eq!(r.reason(), RefuseReason::Closed);
    drop(r);
    assert_eq!(
        q.push_timeout(9, Duration::ZERO).unwrap_err().reason(),
        RefuseReason::Closed
    );
    assert_eq!(q.pop_timeout(Duration::ZERO).unwrap().finish(), 2);
    assert_eq!(q.drain(), vec![3]);
    assert_eq!(q.pop_timeout(Duration::ZERO).unwrap_err(), PopError::Closed);
    let r = q.health().snapshot();
    assert_eq!((r.dropped_total, r.waiting, r.running), (0, Some(0), 0));
}

#[test]
fn push_timeout_on_a_full_queue_is_one_loss() {
    let (_c, q) = queue(1);
    q.push_timeout(1, Duration::ZERO).unwrap();
    let r = q.push_timeout(2, Duration::ZERO).unwrap_err();
    assert_eq!(r.reason(), RefuseReason::Timeout);
    drop(r);
    assert_eq!(q.health().dropped_total(), 1);
    assert_eq!(q.pop_timeout(Duration::ZERO).unwrap().finish(), 1);
    assert_eq!(
        q.pop_timeout(Duration::ZERO).unwrap_err(),
        PopError::Timeout
    );
}

#[test]
fn blocked_producers_take_the_slots_pops_free_and_never_exceed_the_capacity() {
    let (_c, q) = queue(2);
    let per = 2_000u32;
    std::thread::scope(|s| {
        let producers: Vec<_> = (0..3)
            .map(|_| {
                let q = q.clone();
                s.spawn(move || {
                    for i in 0..per {
                        // Long enough never to time out here: every item gets in.
                        q.push_timeout(i, Duration::from_secs(60)).unwrap();
                    }
                })
            })
            .collect();
        let mut popped = 0u32;
        while popped < 3 * per {
            assert!(q.len() <= 2, "{}", q.len());
            if let Ok(g) = q.pop_timeout(Duration::from_secs(60)) {
                g.finish();
                popped += 1;
            }
        }
        for p in producers {
            p.join().unwrap();
        }
    });
    assert!(q.is_empty());
    assert_eq!(q.health().dropped_total(), 0);
    // A full queue still refuses at once without a wait, and after its timeout with one.
    q.try_push(1).unwrap();
    q.try_push(2).unwrap();
    assert_eq!(q.try_push(3).unwrap_err().reason(), RefuseReason::Full);
    let r = q.push_timeout(4, Duration::from_millis(20)).unwrap_err();
    assert_eq!(r.reason(), RefuseReason::Timeout);
}

#[test]
fn force_push_evicts_the_oldest_as_one_loss() {
    let (_c, q) = queue(2);
    assert_eq!(q.force_push(1).unwrap(), None);
    assert_eq!(q.force_push(2).unwrap(), None);
    assert_eq!(q.force_push(3).unwrap(), Some(1));
    let r = q.health().snapshot();
    assert_eq!((r.waiting, r.dropped_total), (Some(2), 1));
    assert_eq!(q.drain(), vec![2, 3]);
}

#[test]
fn worker_panic_loses_its_item_and_lose_counts_once() {
    let (_c, q) = queue(4);
    q.try_push(1).unwrap();
    q.try_push(2).unwrap();
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _g = q.try_pop().unwrap();
        panic!("worker panic");
    }));
    assert!(res.is_err());
    assert_eq!(q.try_pop().unwrap().lose(), 2);
    let r = q.health().snapshot();
    assert_eq!((r.dropped_total, r.running), (2, 0));
}

#[test]
fn guard_parts_and_phases() {
    let (c, q) = queue(4);
    q.try_push(5).unwrap();
    let mut g = q.try_pop().unwrap();
    *g += 1;
    g.set_phase(Phase::ResultHandling);
    let (item, _stamp, running) = g.into_parts();
    assert_eq!(item, 6);
    c.advance_secs(60);
    assert_eq!(q.health().snapshot().conditions, [Condition::ProcessingLag]);
    running.finish();
    assert_eq!(q.health().snapshot().status, Status::Ok);
}

#[test]
fn zero_or_missing_capacity_is_refused() {
    let (_c, s) = manual();
    assert_eq!(
        BoundedQueue::<u8>::new(s.clone(), RowConfig::new("jobs")).err(),
        Some(QueueConfigError::NoCapacity)
    );
    assert_eq!(
        BoundedQueue::<u8>::new(s.clone(), RowConfig::new("jobs").capacity(0)).err(),
        Some(QueueConfigError::NoCapacity)
    );
    assert_eq!(
        BoundedQueue::<u8>::new(s, RowConfig::new("jobs").capacity(u64::MAX)).err(),
        Some(QueueConfigError::CapacityTooLarge(u64::MAX))
    );
}

#[test]
fn concurrent_producers_and_consumers_balance() {
    let (_c, q) = queue(64);
    let per = 20_000u32;
    let accepted = std::thread::scope(|s| {
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let q = q.clone();
                s.spawn(move || {
                    let mut n = 0u64;
                    loop {
                        match q.pop_timeout(Duration::from_millis(50)) {
                            Ok(g) => {
                                g.finish();
                                n += 1;
                            }
                            Err(PopError::Closed) => return n,
                            Err(PopError::Timeout) => {}
                        }
                    }
                })
            })
            .collect();
        let producers: Vec<_> = (0..4)
            .map(|_| {
                let q = q.clone();
                s.spawn(move || {
                    let mut ok = 0u64;
                    for i in 0..per {
                        match q.try_push(i) {
                            Ok(()) => ok += 1,
                            Err(r) => drop(r),
                        }
                    }
                    ok
                })
            })
            .collect();
        let accepted: u64 = producers.into_iter().map(|p| p.join().unwrap()).sum();
        q.close();
        let consumed: u64 = consumers.into_iter().map(|c| c.join().unwrap()).sum();
        assert_eq!(accepted, consumed);
        accepted
    });
    let r = q.health().snapshot();
    assert_eq!((r.waiting, r.running), (Some(0), 0));
    assert_eq!(r.dropped_total + accepted, u64::from(per) * 4);
}

/// Throughput figure, not a test of correctness:
/// `cargo test --release --lib queue::tests::queue::bench -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_push_pop_throughput() {
    let q = BoundedQueue::<u64>::new(
        crate::clock::SystemClock::shared(),
        RowConfig::new("findings").capacity(16_384),
    )
    .unwrap();
    let n = 2_000_000u64;
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        let c = q.clone();
        let consumer = s.spawn(move || {
            let mut got = 0u64;
            while got < n {
                if let Ok(g) = c.pop_timeout(Duration::from_millis(100)) {
                    g.finish();
                    got += 1;
                }
            }
        });
        for i in 0..n {
            let mut item = i;
            loop {
                match q.try_push(item) {
                    Ok(()) => break,
                    Err(r) => {
                        item = r.withdraw();
                        std::thread::yield_now();
                    }
                }
            }
        }
        consumer.join().unwrap();
    });
    let el = start.elapsed();
    let single = std::time::Instant::now();
    for i in 0..n {
        q.try_push(i).unwrap();
        q.try_pop().unwrap().finish();
    }
    let single = single.elapsed();
    let snap = std::time::Instant::now();
    for _ in 0..10_000 {
        std::hint::black_box(q.health().snapshot());
    }
    println!(
        "1 producer + 1 consumer: {:.0} items/s; same-thread push+pop: {:.0} ns/item; snapshot: {:.0} ns",
        n as f64 / el.as_secs_f64(),
        single.as_nanos() as f64 / n as f64,
        snap.elapsed().as_nanos() as f64 / 10_000.0
    );
}

#[test]
#[ignore]
fn bench_clock_read() {
    use crate::clock::Clock;
    let c = crate::clock::SystemClock::new();
    let n = 2_000_000;
    let t = std::time::Instant::now();
    let mut x = 0i64;
    for _ in 0..n {
        x = x.wrapping_add(std::hint::black_box(c.monotonic_nanos()));
    }
    println!(
        "clock read: {:.0} ns ({x})",
        t.elapsed().as_nanos() as f64 / n as f64
    );
}
