//! Rows and restore of incident snapshots, driven with a manual clock and a real store.

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::findings::Finding;
use crate::queue::{Condition, Row, Status};

struct Fixture {
    inc: Arc<Incidents>,
    reg: Arc<Registry>,
    clock: Arc<ManualClock>,
    store: Store,
    dir: std::path::PathBuf,
}

fn setup(tag: &str) -> Fixture {
    let dir = std::env::temp_dir().join(format!("svc-incpersist-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = Store::open(&dir.join("svc.db")).unwrap();
    let clock = ManualClock::at_epoch_2026();
    let reg = Registry::new();
    let inc = Incidents::persistent(
        clock.clone(),
        Duration::from_secs(3600),
        store.clone(),
        &reg,
    )
    .unwrap();
    Fixture {
        inc,
        reg,
        clock,
        store,
        dir,
    }
}

impl Fixture {
    fn row(&self, name: &str) -> Row {
        self.reg.snapshot()[name].clone()
    }

    fn finding(&self, ip: &str, check: &str) -> Finding {
        let mut f = Finding::new(
            check,
            Severity::High,
            format!("{check} from {ip}"),
            self.clock.now(),
        );
        f.ip = Some(ip.parse().unwrap());
        f
    }

    fn stored(&self) -> i64 {
        self.store
            .read(|c| c.query_row("SELECT count(*) FROM incident_snapshots", [], |r| r.get(0)))
            .unwrap()
    }

    fn finish(self) {
        self.store.close();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn rows_have_the_spec_names_units_and_bases() {
    let f = setup("rows");
    let w = f.row(ROW_WAITING);
    let a = f.row(ROW_ACTIVE);
    let d = f.row(ROW_DEFERRED);
    assert_eq!((&*w.depth_unit, w.capacity), ("records", Some(10_000)));
    assert_eq!(w.lag_basis, LagBasis::ConsumerProgress);
    assert_eq!((&*a.depth_unit, a.capacity), ("operations", Some(1)));
    assert_eq!(a.lag_basis, LagBasis::OperationProgress);
    assert_eq!(d.lag_basis, LagBasis::DeferredCheckpoint);
    assert_eq!((w.waiting, a.running, d.waiting), (Some(0), 0, Some(0)));
    f.finish();
}

#[test]
fn marks_coalesce_per_incident_and_keep_the_first_admission() {
    let f = setup("coalesce");
    f.inc.observe(&f.finding("203.0.113.1", "ssh_bruteforce"));
    f.clock.advance_secs(10);
    f.inc.observe(&f.finding("203.0.113.1", "pam_bruteforce"));
    f.inc.observe(&f.finding("203.0.113.2", "ssh_bruteforce"));
    let w = f.row(ROW_WAITING);
    assert_eq!(w.waiting, Some(2), "two incidents, three marks");
    assert_eq!(
        w.oldest_waiting_age_seconds,
        Some(10.0),
        "age kept across coalescing"
    );
    f.clock.advance_secs(5);
    assert_eq!(f.inc.write_pending(false), WriteOutcome::Written(2));
    let w = f.row(ROW_WAITING);
    assert_eq!(
        (w.waiting, w.oldest_waiting_age_seconds),
        (Some(0), Some(0.0))
    );
    assert_eq!(f.stored(), 2);
    assert_eq!(f.inc.write_pending(false), WriteOutcome::Idle);
    f.finish();
}

#[test]
fn the_active_row_shows_the_occupied_writer_and_its_lag() {
    let f = setup("active");
    f.inc.observe(&f.finding("198.51.100.7", "ssh_bruteforce"));
    let batch = f.inc.take_batch(false).expect("one record due");
    assert_eq!(batch.len(), 1);
    let a = f.row(ROW_ACTIVE);
    assert_eq!((a.running, a.status), (1, Status::Ok));
    assert_eq!(f.row(ROW_WAITING).waiting, Some(0), "taken by the writer");
    // A mutation while the writer is occupied waits for the next batch.
    f.inc.observe(&f.finding("198.51.100.7", "pam_bruteforce"));
    assert_eq!(f.row(ROW_WAITING).waiting, Some(1));
    f.clock.advance_secs(61);
    let a = f.row(ROW_ACTIVE);
    assert!(a.conditions.contains(&Condition::ProcessingLag), "{a:?}");
    assert_eq!(a.status, Status::Degraded);
    assert_eq!(f.inc.commit_batch(batch), WriteOutcome::Written(1));
    let a = f.row(ROW_ACTIVE);
    assert_eq!((a.running, a.status), (0, Status::Ok));
    // The later state is written after the earlier one: ordered.
    assert_eq!(f.inc.write_pending(false), WriteOutcome::Written(1));
    let checks: String = f
        .store
        .read(|c| c.query_row("SELECT checks FROM incident_snapshots", [], |r| r.get(0)))
        .unwrap();
    assert_eq!(checks, r#"["pam_bruteforce","ssh_bruteforce"]"#);
    f.finish();
}

#[test]
fn repeats_are_deferred_bookkeeping_whose_age_never_degrades() {
    let f = setup("deferred");
    f.inc.observe(&f.finding("192.0.2.77", "ssh_bruteforce"));
    assert_eq!(f.inc.write_pending(false), WriteOutcome::Written(1));
    // The same finding again only counts: bookkeeping, not written on its own.
    f.clock.advance_secs(10);
    f.inc.observe(&f.finding("192.0.2.77", "ssh_bruteforce"));
    f.inc.observe(&f.finding("192.0.2.77", "ssh_bruteforce"));
    let d = f.row(ROW_DEFERRED);
    assert_eq!((d.waiting, f.row(ROW_WAITING).waiting), (Some(1), Some(0)));
    assert_eq!(
        f.inc.write_pending(false),
        WriteOutcome::Idle,
        "bookkeeping waits"
    );
    f.clock.advance_secs(6 * 3600);
    let d = f.row(ROW_DEFERRED);
    assert_eq!(d.lag_seconds, Some(6.0 * 3600.0));
    assert!(d.conditions.is_empty(), "{d:?}");
    assert_eq!(
        d.status,
        Status::Ok,
        "deferred_checkpoint: age alone never degrades"
    );
    // The next change of any incident takes the bookkeeping along.
    f.inc.observe(&f.finding("192.0.2.78", "ssh_bruteforce"));
    assert_eq!(f.inc.write_pending(false), WriteOutcome::Written(2));
    assert_eq!(f.row(ROW_DEFERRED).waiting, Some(0));
    let count: i64 = f
        .store
        .read(|c| {
            c.query_row(
                "SELECT count FROM incident_snapshots WHERE key = '192.0.2.77'",
                [],
                |r| r.get(0),
            )
        })
        .unwrap();
    assert_eq!(count, 3);
    // A repeat left at shutdown is flushed.
    f.inc.observe(&f.finding("192.0.2.78", "ssh_bruteforce"));
    assert_eq!(f.row(ROW_DEFERRED).waiting, Some(1));
    f.inc.shutdown();
    assert_eq!(f.row(ROW_DEFERRED).waiting, Some(0));
    f.finish();
}

#[test]
fn an_eviction_removes_the_stored_snapshot_with_the_next_batch() {
    let f = setup("evict");
    f.inc.observe(&f.finding("10.0.0.1", "x"));
    f.clock.advance_secs(7200);
    for n in 0..(MAX_INCIDENTS - 1) {
        let ip = format!("10.1.{}.{}", n / 256, n % 256);
        f.inc.observe(&f.finding(&ip, "x"));
    }
    // Written in rounds of at most MAX_BATCH records.
    let mut rounds = Vec::new();
    loop {
        match f.inc.write_pending(false) {
            WriteOutcome::Written(n) => rounds.push(n),
            other => {
                assert_eq!(other, WriteOutcome::Idle);
                break;
            }
        }
    }
    assert_eq!(rounds.iter().sum::<usize>(), MAX_INCIDENTS);
    assert!(rounds.iter().all(|n| *n <= MAX_BATCH), "{rounds:?}");
    assert_eq!(rounds.len(), MAX_INCIDENTS.div_ceil(MAX_BATCH));
    f.inc.observe(&f.finding("10.2.0.1", "x"));
    assert_eq!(
        f.row(ROW_DEFERRED).waiting,
        Some(1),
        "the resolved 10.0.0.1 left"
    );
    assert_eq!(f.row(ROW_WAITING).waiting, Some(1));
    assert_eq!(f.inc.write_pending(false), WriteOutcome::Written(2));
    assert_eq!(f.stored(), MAX_INCIDENTS as i64);
    let gone: i64 = f
        .store
        .read(|c| {
            c.query_row(
                "SELECT count(*) FROM incident_snapshots WHERE key = '10.0.0.1'",
                [],
                |r| r.get(0),
            )
        })
        .unwrap();
    assert_eq!(gone, 0);
    f.finish();
}

#[test]
fn a_failed_commit_keeps_every_record_and_reports_state_io() {
    let f = setup("fail");
    f.inc.observe(&f.finding("192.0.2.10", "ssh_bruteforce"));
    f.store
        .write(|c| c.execute_batch("ALTER TABLE incident_snapshots RENAME TO gone"))
        .unwrap();
    f.clock.advance_secs(3);
    assert_eq!(f.inc.write_pending(false), WriteOutcome::Failed);
    let w = f.row(ROW_WAITING);
    assert_eq!(w.waiting, Some(1), "kept for the next attempt");
    assert_eq!(
        w.oldest_waiting_age_seconds,
        Some(3.0),
        "with its admission"
    );
    assert!(w.conditions.contains(&Condition::StateIo), "{w:?}");
    assert_eq!((w.dropped_total, f.row(ROW_ACTIVE).running), (0, 0));
    f.store
        .write(|c| c.execute_batch("ALTER TABLE gone RENAME TO incident_snapshots"))
        .unwrap();
    assert_eq!(f.inc.write_pending(false), WriteOutcome::Written(1));
    let w = f.row(ROW_WAITING);
    assert!(w.conditions.is_empty(), "{w:?}");
    assert_eq!((w.waiting, w.status), (Some(0), Status::Ok));
    f.finish();
}

#[test]
fn a_restart_restores_incidents_with_their_state_and_ids() {
    let f = setup("restore");
    f.inc.observe(&f.finding("203.0.113.50", "ssh_bruteforce"));
    f.inc.observe(&f.finding("203.0.113.50", "ssh_root_login"));
    let mut shell = Finding::new("webshell", Severity::Critical, "shell", f.clock.now());
    shell.account = Some("alice".into());
    f.inc.observe(&shell);
    f.inc.contain_ip("203.0.113.50".parse().unwrap());
    let before = serde_json::to_value(f.inc.list()).unwrap();
    f.inc.shutdown();
    drop(f.inc);
    // A new process: the same store, a new registry.
    let reg = Registry::new();
    let again = Incidents::persistent(
        f.clock.clone(),
        Duration::from_secs(3600),
        f.store.clone(),
        &reg,
    )
    .unwrap();
    let after = serde_json::to_value(again.list()).unwrap();
    assert_eq!(before, after);
    assert_eq!(again.open_by_severity(), (1, 1, 0));
    // Ids continue after the restored ones.
    again.observe(&Finding::new("x", Severity::Warning, "m", f.clock.now()));
    let max_before = before
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(again
        .list()
        .iter()
        .all(|i| i.kind != KeyKind::Host || i.id > max_before));
    // Time moves on while the daemon is down: restored incidents resolve by their window.
    f.clock.advance_secs(3601);
    assert_eq!(again.open_by_severity(), (0, 0, 0));
    again.shutdown();
    f.store.close();
    let _ = std::fs::remove_dir_all(&f.dir);
}

/// Writes `sql` into the store, then restores a persistent instance from it.
fn restored_after(f: &Fixture, sql: &'static str) -> Arc<Incidents> {
    f.store.write(move |c| c.execute_batch(sql)).unwrap();
    Incidents::persistent(
        f.clock.clone(),
        Duration::from_secs(3600),
        f.store.clone(),
        &Registry::new(),
    )
    .unwrap()
}

#[test]
fn unreadable_rows_are_removed_not_fatal() {
    let f = setup("bad");
    let again = restored_after(
        &f,
        "INSERT INTO incident_snapshots VALUES ('ip','not-an-ip',1,1,0,0,1,'[]','[]',0);
         INSERT INTO incident_snapshots VALUES ('account','bob',2,9,0,0,1,'[]','[]',0);
         INSERT INTO incident_snapshots VALUES ('host','x',3,1,0,0,1,'{','[]',0);
         INSERT INTO incident_snapshots VALUES ('account','carol',4,1,0,0,1,'[\"c\"]','[]',0);",
    );
    let list = again.list();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].key, "carol");
    assert_eq!(f.stored(), 1);
    f.finish();
}

#[test]
fn an_address_stored_in_another_text_is_written_again_in_the_usual_one() {
    let f = setup("canonical");
    let again = restored_after(
        &f,
        "INSERT INTO incident_snapshots VALUES ('ip','2001:DB8::1',1,1,0,0,1,'[\"a\"]','[]',0);
         INSERT INTO incident_snapshots VALUES ('ip','2001:db8::2',2,1,0,5,1,'[\"older\"]','[]',0);
         INSERT INTO incident_snapshots VALUES ('ip','2001:DB8:0::2',3,1,0,9,1,'[\"newer\"]','[]',0);",
    );
    let list = again.list();
    let shown: Vec<_> = list
        .iter()
        .map(|i| (i.key.as_str(), i.id, i.checks.clone()))
        .collect();
    assert_eq!(
        shown,
        [
            ("2001:db8::2", 3, vec!["newer".to_string()]),
            ("2001:db8::1", 1, vec!["a".to_string()]),
        ],
        "one incident per address, the newest activity kept"
    );
    assert_eq!(again.write_pending(false), WriteOutcome::Written(2));
    let stored: Vec<(String, String)> = f
        .store
        .read(|c| {
            let mut st = c.prepare("SELECT key, checks FROM incident_snapshots ORDER BY key")?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })
        .unwrap();
    assert_eq!(
        stored,
        [
            ("2001:db8::1".to_string(), r#"["a"]"#.to_string()),
            ("2001:db8::2".to_string(), r#"["newer"]"#.to_string()),
        ]
    );
    f.finish();
}

#[test]
fn set_window_applies_to_every_incident_at_once() {
    let clock = ManualClock::at_epoch_2026();
    let inc = Incidents::new(clock.clone(), Duration::from_secs(3600));
    let mut f = Finding::new("x", Severity::High, "m", clock.now());
    f.ip = Some("192.0.2.1".parse().unwrap());
    inc.observe(&f);
    clock.advance_secs(600);
    assert_eq!(inc.open_by_severity(), (0, 1, 0));
    inc.set_window(Duration::from_secs(300));
    assert_eq!(inc.open_by_severity(), (0, 0, 0));
    assert_eq!(inc.window(), Duration::from_secs(300));
}

#[test]
fn an_unreadable_row_says_which_row_and_why() {
    let row = |kind: &str, key: &str, severity: u8, first_seen: i64| IncidentRow {
        kind: kind.into(),
        key: key.into(),
        id: 1,
        severity,
        first_seen,
        last_seen: first_seen,
        count: 1,
        checks: vec![],
        accounts: vec![],
        contained: false,
    };
    let why = |r| from_row(r).map(|_| ()).unwrap_err().to_string();
    assert_eq!(why(row("dns", "x", 0, 0)), "dns \"x\": unknown kind");
    assert_eq!(why(row("ip", "x", 0, 0)), "ip \"x\": not an address");
    assert_eq!(why(row("host", "h", 9, 0)), "host \"h\": bad severity");
    assert!(why(row("account", "a", 0, i64::MAX)).starts_with("account \"a\": "));
    assert!(from_row(row("ip", "192.0.2.1", 1, 0)).is_ok());
}
