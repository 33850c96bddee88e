//! Registry: named rows, lifetime, reads that never wait.

use std::time::Duration;

use super::*;

#[test]
fn rows_exist_while_their_handle_lives() {
    let reg = Registry::new();
    let (_c, q) = queue(8);
    let (_c2, h) = gauge(RowConfig::new("bytes"));
    let a = reg.register("mail.delivery", q.health().clone()).unwrap();
    let b = reg.register("mail.file_source", h.clone()).unwrap();
    assert_eq!(a.name(), "mail.delivery");
    assert!(Arc::ptr_eq(b.health(), &h));
    let names: Vec<String> = reg.snapshot().into_keys().collect();
    assert_eq!(names, ["mail.delivery", "mail.file_source"]);
    drop(b);
    assert_eq!(reg.len(), 1);
    drop(a);
    assert!(reg.is_empty());
    assert_eq!(reg.worst_status(), Status::Ok);
}

#[test]
fn refused_registrations_are_counted() {
    let reg = Registry::with_max_rows(2);
    let (_c, h) = gauge(RowConfig::new("jobs"));
    let _a = reg.register("scans.jobs", h.clone()).unwrap();
    assert_eq!(
        reg.register("scans.jobs", h.clone()).unwrap_err(),
        RegisterError::Duplicate("scans.jobs".into())
    );
    for bad in ["", "Scans", "a b", "x/y", &"a".repeat(97)] {
        assert!(matches!(
            reg.register(bad, h.clone()),
            Err(RegisterError::InvalidName(_))
        ));
    }
    let _b = reg.register("scans.admission", h.clone()).unwrap();
    assert_eq!(
        reg.register("central.actions", h.clone()).unwrap_err(),
        RegisterError::Full { max_rows: 2 }
    );
    assert_eq!(reg.refused_registrations(), 7);
}

#[test]
fn worst_status_and_map_serialization() {
    let reg = Registry::new();
    let (c, q) = queue(8);
    let (_c2, h) = gauge(RowConfig::new("records"));
    let _a = reg.register("findings.ingest", q.health().clone()).unwrap();
    let _b = reg.register("attackdb.records", h.clone()).unwrap();
    h.note_retry_failed();
    assert_eq!(reg.worst_status(), Status::Warning);
    q.try_push(1).unwrap();
    c.advance_secs(60);
    h.note_retry_failed();
    assert_eq!(reg.worst_status(), Status::Degraded);
    let v = serde_json::to_value(reg.snapshot()).unwrap();
    assert_eq!(v["findings.ingest"]["status"], "degraded");
    assert_eq!(v["findings.ingest"]["conditions"][0], "backlog_lag");
    assert_eq!(v["attackdb.records"]["conditions"][0], "retry_failed");
}

#[test]
fn snapshot_answers_while_the_consumer_is_stalled_holding_work() {
    let reg = Registry::new();
    let (c, q) = queue(4);
    let _row = reg.register("findings.ingest", q.health().clone()).unwrap();
    q.try_push(1).unwrap();
    q.try_push(2).unwrap();
    let (holding_tx, holding_rx) = crossbeam_channel::bounded::<()>(0);
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(0);
    std::thread::scope(|s| {
        let consumer = q.clone();
        s.spawn(move || {
            let g = consumer.pop_timeout(Duration::from_secs(10)).unwrap();
            holding_tx.send(()).unwrap();
            // Stalled: holds the work guard until told to go.
            release_rx.recv().unwrap();
            g.finish();
        });
        holding_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        c.advance_secs(61);
        // Read on another thread with a watchdog, so a blocking read fails instead of hanging.
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        let reader = &reg;
        s.spawn(move || done_tx.send(reader.snapshot()).unwrap());
        let snap = done_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("snapshot must not wait for the stalled consumer");
        let row = &snap["findings.ingest"];
        assert_eq!((row.running, row.waiting), (1, Some(1)));
        assert_eq!(
            row.conditions,
            [Condition::ProcessingLag, Condition::BacklogLag]
        );
        assert_eq!(reg.worst_status(), Status::Degraded);
        release_tx.send(()).unwrap();
    });
    assert_eq!(q.health().snapshot().running, 0);
}
