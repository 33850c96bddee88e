//! The reporter end to end against a loopback HTTP collector: formats, dedup, failure and
//! retry across a restart, final refusals.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::clock::ManualClock;
use crate::config::abuse::{ReportConfig, ReportDestination, ReportFormat};
use crate::net::https::testsrv::Server;
use crate::queue::Condition;
use crate::threat::autoblock::Trigger;

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn confirmed(ip: &str, check: &str) -> Confirmed {
    Confirmed {
        ip: ip.parse().unwrap(),
        trigger: Some(Trigger::Finding(check.into())),
        reason: format!("auto: {check} (score 40)"),
        counts: [8, 0, 0, 0, 0, 2, 0],
        at: 1_767_225_600_000_000,
        expires: None,
    }
}

#[test]
fn reports_reach_both_formats_once_and_survive_failures_and_a_restart() {
    let status = Arc::new(AtomicU16::new(503));
    let srv = {
        let status = status.clone();
        Server::http(move |_| (status.load(Ordering::SeqCst), vec![], b"{}".to_vec()))
    };
    let var = format!("SVC_TEST_ABUSE_KEY_{}", std::process::id());
    std::env::set_var(&var, "s3cr3t-key");
    let cfg = ReportConfig {
        enabled: true,
        spool_limit: 100,
        destinations: vec![
            ReportDestination {
                name: "central".into(),
                url: srv.url("/api/v2/report"),
                format: ReportFormat::AbuseIpDb,
                api_key_env: var.clone(),
                dedup_window_hours: 24,
            },
            ReportDestination {
                name: "mine".into(),
                url: srv.url("/collect"),
                format: ReportFormat::Json,
                api_key_env: String::new(),
                dedup_window_hours: 1,
            },
        ],
    };
    let dir = std::env::temp_dir().join(format!("svc-abuse-rep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = Store::open(&dir.join("svc.db")).unwrap();
    let clock = ManualClock::at_epoch_2026();
    let open = |reg: &Arc<Registry>| {
        let r = Reporter::new(
            &cfg,
            Roots::default(),
            Duration::from_secs(5),
            clock.clone(),
            store.clone(),
            reg,
        )
        .unwrap()
        .unwrap();
        r.start().unwrap();
        r
    };
    let reg = Registry::new();
    let r = open(&reg);
    r.confirmed(&confirmed("192.0.2.7", "ssh_bruteforce"));
    // Both destinations fail once (503) and keep the report.
    wait_for("two failed attempts", || {
        r.spool().counters.failed_attempts.load(Ordering::SeqCst) >= 2
    });
    let row = reg.snapshot()[spool::ROW].clone();
    assert_eq!(row.dropped_total, 0);
    assert!(
        row.conditions.contains(&Condition::DeliveryFailed),
        "{row:?}"
    );
    assert!(row.conditions.contains(&Condition::RetryFailed), "{row:?}");
    assert_eq!(r.spool().len(), 2);
    // The same address and categories again: deduplicated for both destinations.
    r.confirmed(&confirmed("192.0.2.7", "ssh_bruteforce"));
    wait_for("dedup", || {
        r.spool().counters.deduplicated.load(Ordering::SeqCst) == 2
    });
    // Two minutes unreachable: degraded.
    clock.advance_secs(121);
    assert!(reg.snapshot()[spool::ROW]
        .conditions
        .contains(&Condition::ObservedLag));
    r.shutdown();
    drop(r);
    // Restarted with the collector answering: the spooled reports go out at once.
    status.store(200, Ordering::SeqCst);
    let before = srv.count();
    let reg = Registry::new();
    let r = open(&reg);
    wait_for("delivery after the restart", || r.spool().is_empty());
    assert_eq!(r.spool().counters.delivered.load(Ordering::SeqCst), 2);
    assert_eq!(srv.count(), before + 2);
    let seen = srv.seen.lock().clone();
    let central = seen
        .iter()
        .rev()
        .find(|s| s.path == "/api/v2/report")
        .unwrap();
    assert_eq!(central.header("Key"), Some("s3cr3t-key"));
    let form = String::from_utf8(central.body.clone()).unwrap();
    assert!(
        form.starts_with("ip=192.0.2.7&categories=18%2C22&comment=Blocked%20automatically"),
        "{form}"
    );
    assert!(form.contains("events%3A%20brute_force%208"), "{form}");
    assert!(!form.contains("auth_success"), "{form}");
    let mine = seen.iter().rev().find(|s| s.path == "/collect").unwrap();
    assert_eq!(mine.header("Authorization"), None);
    let v: serde_json::Value = serde_json::from_slice(&mine.body).unwrap();
    assert_eq!(v["ip"], "192.0.2.7");
    assert_eq!(v["categories"], serde_json::json!(["brute_force", "ssh"]));
    assert_eq!(v["time"], "2026-01-01T00:00:00.000000Z");
    let row = reg.snapshot()[spool::ROW].clone();
    assert!(row.conditions.is_empty(), "{row:?}");
    // Still within central's window (24 h) but past mine's (1 h): only mine is sent again.
    clock.advance_secs(2 * 3600);
    r.confirmed(&confirmed("192.0.2.7", "ssh_bruteforce"));
    wait_for("mine's second report", || {
        r.spool().counters.delivered.load(Ordering::SeqCst) == 3
    });
    assert_eq!(r.spool().counters.deduplicated.load(Ordering::SeqCst), 1);
    // A final refusal drops the report as a loss.
    status.store(422, Ordering::SeqCst);
    r.confirmed(&confirmed("198.51.100.9", "modsec_block_escalation"));
    wait_for("two refusals", || {
        r.spool().counters.rejected.load(Ordering::SeqCst) == 2
    });
    wait_for("an empty spool", || r.spool().is_empty());
    assert_eq!(reg.snapshot()[spool::ROW].dropped_total, 2);
    // A block without an abuse category is not reported.
    let mut login = confirmed("203.0.113.5", "x");
    login.trigger = Some(Trigger::Evidence);
    login.counts = [0, 0, 0, 0, 0, 4, 0];
    r.confirmed(&login);
    assert_eq!(r.counters.uncategorized.load(Ordering::SeqCst), 1);
    r.shutdown();
    store.close();
    std::env::remove_var(&var);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn answers_are_classified_and_backoff_is_bounded() {
    assert_eq!(classify(200, None, b""), Attempt::Delivered);
    assert_eq!(classify(204, None, b""), Attempt::Delivered);
    assert_eq!(
        classify(422, None, b"{\"errors\":[1]}\n"),
        Attempt::Rejected(422, ": {\"errors\":[1]}".into())
    );
    assert_eq!(
        classify(400, None, b""),
        Attempt::Rejected(400, String::new())
    );
    for s in [401, 403, 404, 408, 500, 503] {
        assert!(
            matches!(classify(s, None, b""), Attempt::Failed(_, None)),
            "{s}"
        );
    }
    assert_eq!(
        classify(429, Some(99_999), b""),
        Attempt::Failed("HTTP 429".into(), Some(MAX_RETRY_AFTER))
    );
    assert_eq!(backoff(1), FIRST_BACKOFF);
    assert_eq!(backoff(2), FIRST_BACKOFF * 2);
    assert_eq!(backoff(50), MAX_BACKOFF);
    let r = Report::of_block(&confirmed("::ffff:192.0.2.1", "wp_login_bruteforce")).unwrap();
    assert_eq!(r.ip.to_string(), "192.0.2.1");
    assert_eq!(r.categories, vec!["brute_force", "web_app_attack"]);
    assert_eq!(
        r.comment,
        "Blocked automatically by svc: wp_login_bruteforce (score 40); events: brute_force 8"
    );
}
