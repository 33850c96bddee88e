//! The authentication-log detector through the real binary: attacks become findings,
//! rotation loses nothing, and a SIGKILL while findings flow loses nothing either.

use crate::common::*;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn start(tag: &str) -> (Daemon, PathBuf) {
    let dir = temp_dir(tag);
    let log = dir.join("auth.log");
    std::fs::write(
        &log,
        "Nov 21 00:00:00 host sshd[1]: Server listening on 0.0.0.0 port 22.\n",
    )
    .unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let extra = format!(
        "[logs]\nauth = [{log:?}]\n[files]\nwatch = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[thresholds]\nauth_failures = 5\n",
        log = log.display().to_string()
    );
    std::fs::write(&config, format!("{}{extra}", base_config(&state))).unwrap();
    (Daemon::start_with(dir, config, state, &[]), log)
}

fn append(log: &Path, lines: &[String]) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
        .unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
    f.sync_all().unwrap();
}

fn failures(ip: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            format!(
                "Nov 21 10:00:{:02} web1 sshd[{}]: Failed password for root from {ip} port {} ssh2",
                i % 60,
                4000 + i,
                50000 + i
            )
        })
        .collect()
}

fn active(d: &Daemon) -> Vec<serde_json::Value> {
    d.get("/api/v1/findings", READ).expect(200).json()["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn wait_for(
    d: &Daemon,
    what: &str,
    pred: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    wait_until(20, what, || {
        let items = active(d);
        pred(&items).then_some(items)
    })
}

fn has_bruteforce(items: &[serde_json::Value], ip: &str) -> bool {
    items
        .iter()
        .any(|f| f["check"] == "ssh_bruteforce" && f["ip"] == ip)
}

#[test]
fn failures_from_one_address_become_a_finding() {
    let (d, log) = start("auth-basic");
    append(&log, &failures("203.0.113.9", 4));
    // Below the threshold: nothing yet. Then the fifth failure crosses it.
    std::thread::sleep(Duration::from_millis(700));
    assert!(!has_bruteforce(&active(&d), "203.0.113.9"));
    append(&log, &failures("203.0.113.9", 1));
    let items = wait_for(&d, "ssh_bruteforce", |i| has_bruteforce(i, "203.0.113.9"));
    let f = items
        .iter()
        .find(|f| f["check"] == "ssh_bruteforce")
        .unwrap();
    assert_eq!(f["severity"], "HIGH");
    assert!(f["message"].as_str().unwrap().contains("203.0.113.9"));
    // A root login from elsewhere is a warning.
    append(&log, &["Nov 21 10:01:00 web1 sshd[77]: Accepted password for root from 198.51.100.4 port 5555 ssh2".to_string()]);
    wait_for(&d, "root login", |i| {
        i.iter().any(|f| {
            f["severity"] == "WARNING"
                && f["message"].as_str().unwrap_or("").contains("198.51.100.4")
        })
    });
    let out = d.cli(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1 high"), "{text}");
    let s = d.get("/api/v1/status", READ).json();
    assert!(
        s["queues"]["auth.file_source"].is_object(),
        "{}",
        s["queues"]
    );
    assert_eq!(s["queues"]["auth.file_source"]["depth_unit"], "bytes");
    assert_eq!(s["incidents_open_by_severity"]["high"], 1);
    assert!(
        s["correlation_attribution"]["ssh_bruteforce"]["cumulative"]
            .as_u64()
            .unwrap()
            >= 1
    );
}

#[test]
fn rotation_by_rename_and_copytruncate_mid_attack_loses_nothing() {
    let (d, log) = start("auth-rotate");
    append(&log, &failures("192.0.2.10", 3));
    std::thread::sleep(Duration::from_millis(700));
    // Rename rotation: the rest of the attack goes to a new file.
    std::fs::rename(&log, log.with_extension("log.1")).unwrap();
    append(&log, &failures("192.0.2.10", 2));
    wait_for(&d, "finding across a rename", |i| {
        has_bruteforce(i, "192.0.2.10")
    });
    // copytruncate: the file is copied away and truncated in place.
    append(&log, &failures("192.0.2.20", 3));
    std::thread::sleep(Duration::from_millis(700));
    std::fs::copy(&log, log.with_extension("log.2")).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(0)
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    append(&log, &failures("192.0.2.20", 2));
    wait_for(&d, "finding across a copytruncate", |i| {
        has_bruteforce(i, "192.0.2.20")
    });
    // A log that disappears and comes back is picked up again.
    std::fs::remove_file(&log).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    append(&log, &failures("192.0.2.30", 5));
    wait_for(&d, "finding after the log reappeared", |i| {
        has_bruteforce(i, "192.0.2.30")
    });
}

#[test]
fn sigkill_while_findings_flow_loses_nothing() {
    let (mut d, log) = start("auth-kill");
    let ips: Vec<String> = (1..=40).map(|i| format!("198.51.100.{i}")).collect();
    // First half: attacks whose findings we watch appear, then more lines keep coming
    // (including a half-finished attack) while the daemon is killed.
    for ip in &ips[..20] {
        append(&log, &failures(ip, 5));
    }
    wait_for(&d, "first findings", |i| {
        i.iter().filter(|f| f["check"] == "ssh_bruteforce").count() >= 5
    });
    append(&log, &failures(&ips[20], 3));
    d.kill9();
    append(&log, &failures(&ips[20], 2));
    for ip in &ips[21..] {
        append(&log, &failures(ip, 5));
    }
    let d2 = Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), &[]);
    let items = wait_for(&d2, "all 40 findings", |i| {
        ips.iter().all(|ip| has_bruteforce(i, ip))
    });
    // Each attacker once in the active set, and no duplicate dispatch in history.
    for ip in &ips {
        let n = items
            .iter()
            .filter(|f| f["check"] == "ssh_bruteforce" && f["ip"] == ip.as_str())
            .count();
        assert_eq!(n, 1, "{ip}");
    }
    let db = rusqlite::Connection::open(d2.state.join("svc.db")).unwrap();
    let rows: i64 = db
        .query_row(
            "SELECT count(*) FROM history WHERE check_name = 'ssh_bruteforce'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        rows, 40,
        "each attack dispatched exactly once across the crash"
    );
}
