use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::clock::ManualClock;
use crate::findings::{Finding, Severity};
use crate::queue::{Registry, Row, Status};

fn bus(max: usize) -> (EventBus, Arc<Registry>, Arc<ManualClock>) {
    let clock = ManualClock::at_epoch_2026();
    let reg = Registry::new();
    let bus = EventBus::new(clock.clone(), &reg, max).unwrap();
    (bus, reg, clock)
}

fn row(reg: &Registry) -> Row {
    reg.snapshot()[ROW].clone()
}

fn finding(i: usize) -> Finding {
    Finding::new(
        "webshell",
        Severity::Critical,
        format!("webshell signature in /var/www/f{i}.php"),
        jiff::Timestamp::from_microsecond(1_767_225_600_123_456).unwrap(),
    )
    .with_path(format!("/var/www/f{i}.php"))
}

/// A peer that stopped reading: every write fails as the deadline would make it.
struct Stalled;

impl Write for Stalled {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::new(io::ErrorKind::WouldBlock, "deadline"))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Drives a subscription until its buffer is empty.
fn pump(sub: &mut Subscription, out: &mut Vec<u8>) {
    while !sub_is_empty(sub) {
        assert_eq!(sub.step(out, Duration::ZERO).unwrap(), Step::Continue);
    }
}

fn sub_is_empty(sub: &Subscription) -> bool {
    sub.buffered() == 0
}

fn events(out: &[u8]) -> Vec<(u64, serde_json::Value)> {
    let text = String::from_utf8(out.to_vec()).unwrap();
    text.split("\n\n")
        .filter(|b| b.contains("data: "))
        .map(|b| {
            let mut id = 0;
            let mut data = serde_json::Value::Null;
            let mut event = "";
            for line in b.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = v.parse().unwrap();
                } else if let Some(v) = line.strip_prefix("event: ") {
                    event = v;
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(v).unwrap();
                }
            }
            assert_eq!(event, "finding");
            (id, data)
        })
        .collect()
}

#[test]
fn row_exists_with_the_bus_and_is_idle_without_subscribers() {
    let (bus, reg, clock) = bus(4);
    let r = row(&reg);
    assert_eq!(r.depth_unit, "findings");
    assert_eq!((r.waiting, r.capacity, r.running), (Some(0), Some(0), 0));
    bus.publish(&finding(0));
    clock.advance_secs(3600);
    let r = row(&reg);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.dropped_total, 0);
    assert_eq!(bus.counters().published.load(Ordering::Relaxed), 1);
    drop(bus);
    assert!(
        !reg.snapshot().contains_key(ROW),
        "row removed with the bus"
    );
}

#[test]
fn events_carry_id_name_and_the_finding_json() {
    let (bus, reg, _clock) = bus(4);
    bus.publish(&finding(0)); // id 1, nobody listening
    let mut sub = bus.subscribe().unwrap();
    assert_eq!(row(&reg).capacity, Some(64));
    for i in 1..=3 {
        bus.publish(&finding(i));
    }
    assert_eq!(row(&reg).waiting, Some(3));
    let mut out = Vec::new();
    pump(&mut sub, &mut out);
    let evs = events(&out);
    assert_eq!(
        evs.iter().map(|e| e.0).collect::<Vec<_>>(),
        vec![2, 3, 4],
        "ids count every dispatched finding"
    );
    let f = &evs[0].1;
    assert_eq!(f["check"], "webshell");
    assert_eq!(f["severity"], "CRITICAL");
    assert_eq!(f["first_seen"], "2026-01-01T00:00:00.123456Z");
    assert_eq!(f["path"], "/var/www/f1.php");
    assert_eq!(f["count"], 1);
    let r = row(&reg);
    assert_eq!((r.waiting, r.dropped_total), (Some(0), 0));
    assert_eq!(sub.delivered(), 3);
    assert_eq!(bus.counters().delivered.load(Ordering::Relaxed), 3);
}

#[test]
fn a_stalled_subscriber_loses_only_its_own_events_and_frees_its_slot() {
    let (bus, reg, clock) = bus(4);
    let mut good = bus.subscribe().unwrap();
    let mut stalled = bus.subscribe().unwrap();
    assert_eq!(row(&reg).capacity, Some(128));
    let mut out = Vec::new();
    for i in 0..200 {
        bus.publish(&finding(i));
        // The reading subscriber keeps up; the stalled one never reads.
        if i % 16 == 15 {
            pump(&mut good, &mut out);
        }
    }
    pump(&mut good, &mut out);
    assert_eq!(events(&out).len(), 200, "the reader got every finding");
    let r = row(&reg);
    assert_eq!(r.waiting, Some(64), "the stalled buffer is full");
    assert_eq!(
        r.dropped_total,
        200 - 64,
        "overflow counted once per finding"
    );
    // Its next write fails (deadline): the batch in flight and the rest are losses.
    assert!(stalled.step(&mut Stalled, Duration::ZERO).is_err());
    assert!(stalled.failed());
    drop(stalled);
    let r = row(&reg);
    assert_eq!(
        r.dropped_total, 200,
        "every undelivered finding counted once"
    );
    assert_eq!((r.waiting, r.capacity), (Some(0), Some(64)));
    assert_eq!(bus.subscribers(), 1);
    drop(good);
    clock.advance_secs(120);
    let r = row(&reg);
    assert_eq!((r.capacity, r.full_seconds), (Some(0), 0.0));
    assert_eq!(r.status, Status::Ok, "{r:?}");
}

#[test]
fn subscriber_limit_refuses_and_a_freed_slot_is_reused() {
    let (bus, _reg, _clock) = bus(2);
    let a = bus.subscribe().unwrap();
    let _b = bus.subscribe().unwrap();
    assert_eq!(
        bus.subscribe().unwrap_err(),
        SubscribeError::Full { limit: 2 }
    );
    assert_eq!(bus.counters().refused.load(Ordering::Relaxed), 1);
    drop(a);
    assert!(bus.subscribe().is_ok());
}

#[test]
fn close_ends_streams_without_loss_and_refuses_new_ones() {
    let (bus, reg, _clock) = bus(4);
    let mut sub = bus.subscribe().unwrap();
    bus.publish(&finding(1));
    bus.close();
    assert_eq!(
        sub.step(&mut Vec::new(), Duration::from_secs(5)).unwrap(),
        Step::End
    );
    drop(sub);
    let r = row(&reg);
    assert_eq!((r.waiting, r.dropped_total), (Some(0), 0));
    assert_eq!(bus.subscribe().unwrap_err(), SubscribeError::Closed);
    bus.publish(&finding(2)); // ignored after close
}

#[test]
fn server_stop_flag_ends_streams() {
    let (bus, _reg, _clock) = bus(4);
    let flag = Arc::new(AtomicBool::new(false));
    bus.watch_server_stop(flag.clone());
    let mut sub = bus.subscribe().unwrap();
    assert_eq!(
        sub.step(&mut Vec::new(), Duration::ZERO).unwrap(),
        Step::Continue
    );
    flag.store(true, Ordering::SeqCst);
    assert_eq!(
        sub.step(&mut Vec::new(), Duration::ZERO).unwrap(),
        Step::End
    );
}

#[test]
fn heartbeat_after_fifteen_quiet_seconds() {
    let (bus, _reg, clock) = bus(4);
    let mut sub = bus.subscribe().unwrap();
    let mut out = Vec::new();
    sub.step(&mut out, Duration::ZERO).unwrap();
    assert!(out.is_empty());
    clock.advance_secs(14);
    sub.step(&mut out, Duration::ZERO).unwrap();
    assert!(out.is_empty());
    clock.advance_secs(1);
    sub.step(&mut out, Duration::ZERO).unwrap();
    assert_eq!(out, b": keep-alive\n\n");
    // A failed heartbeat fails the stream.
    clock.advance_secs(15);
    assert!(sub.step(&mut Stalled, Duration::ZERO).is_err());
    assert!(sub.failed());
}

#[test]
fn all_buffers_full_for_thirty_seconds_degrades() {
    let (bus, reg, clock) = bus(4);
    let a = bus.subscribe().unwrap();
    let mut b = bus.subscribe().unwrap();
    let mut out = Vec::new();
    for i in 0..64 {
        bus.publish(&finding(i));
    }
    pump(&mut b, &mut out);
    clock.advance_secs(31);
    let r = row(&reg);
    assert_eq!((r.waiting, r.capacity), (Some(64), Some(128)));
    assert_eq!(r.status, Status::Ok, "one of two buffers full: {r:?}");
    drop(b);
    // The one subscriber left stays full: its overflow warns, 30 s of it degrades.
    for i in 0..3 {
        bus.publish(&finding(i));
    }
    let r = row(&reg);
    assert_eq!(
        (r.waiting, r.capacity, r.dropped_total),
        (Some(64), Some(64), 3)
    );
    assert_eq!(r.status, Status::Warning, "{r:?}");
    clock.advance_secs(31);
    assert_eq!(row(&reg).status, Status::Degraded);
    drop(a);
    clock.advance_secs(60);
    assert_eq!(
        row(&reg).status,
        Status::Ok,
        "losses aged out, nothing waits"
    );
}

#[test]
fn encoded_frames_are_single_data_lines() {
    let f = finding(1).with_details("line one\nline two\r\n");
    let frame = subscriber::Frame::encode(7, &f).unwrap();
    let text = String::from_utf8(frame.bytes().to_vec()).unwrap();
    assert!(text.starts_with("id: 7\nevent: finding\ndata: {"));
    assert!(text.ends_with("}\n\n"));
    assert_eq!(text.matches('\n').count(), 4, "{text}");
}
