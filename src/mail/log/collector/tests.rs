use std::io::Write;
use std::time::Instant;

use super::*;
use crate::clock::ManualClock;
use crate::watch::tail::testutil::TempDir;

const EXIM: &str = include_str!("../fixtures/exim-mainlog-default.log");

fn append(path: &Path, s: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(s.as_bytes()).unwrap();
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn detect_prefers_the_configured_then_the_first_existing_candidate() {
    let dir = TempDir::new("mail-detect");
    assert!(detect_logs(&[], dir.path()).is_empty());
    std::fs::create_dir_all(dir.path().join("var/log/exim4")).unwrap();
    std::fs::write(dir.path().join("var/log/mail.log"), "").unwrap();
    assert_eq!(
        detect_logs(&[], dir.path()),
        [dir.path().join("var/log/mail.log")]
    );
    std::fs::write(dir.path().join("var/log/exim4/mainlog"), "").unwrap();
    assert_eq!(
        detect_logs(&[], dir.path()),
        [dir.path().join("var/log/exim4/mainlog")]
    );
    let own = [PathBuf::from("/srv/mail.log")];
    assert_eq!(detect_logs(&own, dir.path()), own);
}

#[test]
fn lines_become_records_and_findings_and_rows_come_and_go() {
    let dir = TempDir::new("mail-coll");
    let store = Store::open(&dir.path().join("svc.db")).unwrap();
    let registry = Registry::new();
    let clock = ManualClock::at_epoch_2026();
    let engine = Engine::new(clock.clone(), store.clone(), &registry, dir.path()).unwrap();
    engine.start().unwrap();
    let comps = Components::default();
    let log = dir.path().join("mainlog");
    append(&log, "2026-11-23 17:48:44 exim 4.96 daemon started\n");
    let c = MailLogCollector::start(
        std::slice::from_ref(&log),
        LedgerSettings::default(),
        None,
        TimeZone::UTC,
        clock.clone(),
        &engine,
        &registry,
        &comps,
        &store,
    )
    .unwrap();
    let rows = registry.snapshot();
    assert!(rows.contains_key(FILE_ROW) && rows.contains_key(DELIVERY_ROW));
    append(&log, EXIM);
    let count = |sql: &'static str| {
        store
            .read(|c| c.query_row(sql, [], |r| r.get::<_, i64>(0)))
            .unwrap()
    };
    wait_until("messages stored", || {
        count("SELECT count(*) FROM mail_messages") == 6
    });
    wait_until("forward stored", || {
        count("SELECT count(*) FROM mail_forwards") == 1
    });
    assert!(engine.flush(Duration::from_secs(10)));
    wait_until("findings", || {
        count("SELECT count(*) FROM history WHERE check_name IN ('mail_per_account', 'email_forwarder_audit')") == 2
    });
    assert_eq!(
        count("SELECT count(*) FROM mail_messages WHERE relay_mismatch = 1"),
        1
    );
    c.stop();
    let rows = registry.snapshot();
    assert!(!rows.contains_key(FILE_ROW) && !rows.contains_key(DELIVERY_ROW));
    // A restart resumes after what was read: nothing is recorded twice.
    let c = MailLogCollector::start(
        std::slice::from_ref(&log),
        LedgerSettings::default(),
        None,
        TimeZone::UTC,
        clock.clone(),
        &engine,
        &registry,
        &comps,
        &store,
    )
    .unwrap();
    append(
        &log,
        "2026-11-23 17:49:00 1xVY9o-0007Ae-2p <= www@example.com U=root P=local S=300\n",
    );
    wait_until("the new message", || {
        count("SELECT count(*) FROM mail_messages WHERE queue_id = '1xvy9o-0007ae-2p'") == 1
    });
    assert_eq!(count("SELECT count(*) FROM mail_forwards"), 1);
    c.stop();
    engine.shutdown();
    store.close();
}
