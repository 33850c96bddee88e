//! The authentication-log collector through the real binary: attacks become findings,
//! rotation (while running and while down) and truncation lose nothing, a SIGKILL while
//! findings flow loses nothing and dispatches nothing twice, over-long lines are counted and
//! do not detach the watcher, and IPv4-mapped addresses are reported as IPv4.
//!
//! Tests wait on progress signals: the `auth_log` watcher row's `events_total` (lines read)
//! and the active findings; never on fixed sleeps.

use crate::common::*;

use std::io::Write;
use std::path::{Path, PathBuf};

fn config(dir: &Path, log: &Path) -> (PathBuf, PathBuf) {
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let extra = format!(
        "[logs]\nauth = [{log:?}]\n[files]\nwatch = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[thresholds]\nauth_failures = 5\n",
        log = log.display().to_string()
    );
    std::fs::write(&config, format!("{}{extra}", base_config(&state))).unwrap();
    (config, state)
}

fn start(tag: &str) -> (Daemon, PathBuf) {
    let dir = temp_dir(tag);
    let log = dir.join("auth.log");
    std::fs::write(
        &log,
        "Nov 21 00:00:00 host sshd[1]: Server listening on 0.0.0.0 port 22.\n",
    )
    .unwrap();
    let (config, state) = config(&dir, &log);
    (Daemon::start_with(dir, config, state, &[]), log)
}

fn restart(d: &Daemon) -> Daemon {
    Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), &[])
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

/// The `auth_log` watcher row.
fn watcher(d: &Daemon) -> serde_json::Value {
    let items = d.get("/api/v1/components", READ).expect(200).json()["items"].clone();
    items
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "auth_log")
        .cloned()
        .expect("auth_log component")
}

/// Waits until the watcher has read `n` lines in total since start.
fn wait_lines(d: &Daemon, n: u64) {
    wait_until(20, &format!("{n} lines read"), || {
        (watcher(d)["events_total"].as_u64() >= Some(n)).then_some(())
    });
}

fn history_count(d: &Daemon, check: &str, ip: &str) -> i64 {
    let db = rusqlite::Connection::open(d.state.join("svc.db")).unwrap();
    db.query_row(
        "SELECT count(*) FROM history WHERE check_name = ?1 AND ip = ?2",
        [check, ip],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn failures_from_one_address_become_a_finding() {
    let (d, log) = start("auth-basic");
    append_lines(&log, &failures("203.0.113.9", 4));
    // Below the threshold: nothing yet. Then the fifth failure crosses it.
    wait_lines(&d, 4);
    assert!(!has_bruteforce(&active(&d), "203.0.113.9"));
    append_lines(&log, &failures("203.0.113.9", 1));
    let items = wait_for(&d, "ssh_bruteforce", |i| has_bruteforce(i, "203.0.113.9"));
    let f = items
        .iter()
        .find(|f| f["check"] == "ssh_bruteforce")
        .unwrap();
    assert_eq!(f["severity"], "HIGH");
    assert!(f["message"].as_str().unwrap().contains("203.0.113.9"));
    // A root login from elsewhere is a warning.
    append_lines(&log, &["Nov 21 10:01:00 web1 sshd[77]: Accepted password for root from 198.51.100.4 port 5555 ssh2".to_string()]);
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
    let row = &s["queues"]["auth.file_source"];
    assert!(row.is_object(), "{}", s["queues"]);
    assert_eq!(row["depth_unit"], "bytes");
    assert_eq!(row["capacity_unavailable"], true);
    assert_eq!(row["waiting"], 0);
    assert_eq!(s["incidents_open_by_severity"]["high"], 1);
    assert!(
        s["correlation_attribution"]["ssh_bruteforce"]["cumulative"]
            .as_u64()
            .unwrap()
            >= 1
    );
    let w = watcher(&d);
    assert_eq!(w["state"], "attached");
    assert_eq!(w["events_total"], 6);
    assert_eq!(w["overlong_lines_total"], 0);
}

#[test]
fn rotation_by_rename_and_copytruncate_mid_attack_loses_nothing() {
    let (d, log) = start("auth-rotate");
    append_lines(&log, &failures("192.0.2.10", 3));
    wait_lines(&d, 3);
    // Rename rotation: the rest of the attack goes to a new file.
    std::fs::rename(&log, log.with_extension("log.1")).unwrap();
    append_lines(&log, &failures("192.0.2.10", 2));
    wait_for(&d, "finding across a rename", |i| {
        has_bruteforce(i, "192.0.2.10")
    });
    // copytruncate: the file is copied away and truncated in place.
    append_lines(&log, &failures("192.0.2.20", 3));
    wait_lines(&d, 8);
    std::fs::copy(&log, log.with_extension("log.2")).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(0)
        .unwrap();
    append_lines(&log, &failures("192.0.2.20", 2));
    wait_for(&d, "finding across a copytruncate", |i| {
        has_bruteforce(i, "192.0.2.20")
    });
    // A log that disappears and comes back is picked up again (the directory watch sees
    // it come back).
    std::fs::remove_file(&log).unwrap();
    append_lines(&log, &failures("192.0.2.30", 5));
    wait_for(&d, "finding after the log reappeared", |i| {
        has_bruteforce(i, "192.0.2.30")
    });
    assert!(watcher(&d)["rotations_total"].as_u64().unwrap() >= 2);
    assert!(watcher(&d)["truncations_total"].as_u64().unwrap() >= 1);
}

#[test]
fn a_log_rotated_while_the_daemon_was_down_is_read_from_the_rotated_file_first() {
    let (mut d, log) = start("auth-rotated-down");
    append_lines(&log, &failures("198.51.100.50", 3));
    wait_lines(&d, 3);
    // The first lines' position is committed with them; then the daemon goes away.
    wait_committed(&d, &log);
    assert_eq!(d.stop(), 0);
    // While down: two more failures in the old file, the file rotated away (logrotate's
    // default: rename), and a new file with a different attack.
    append_lines(&log, &failures("198.51.100.50", 2));
    std::fs::rename(&log, log.with_extension("log.1")).unwrap();
    append_lines(&log, &failures("198.51.100.60", 5));
    let d2 = restart(&d);
    // 3 before the stop (replayed, not emitted) + 2 from the rotated file = 5: a finding.
    wait_for(&d2, "findings from the rotated and the new file", |i| {
        has_bruteforce(i, "198.51.100.50") && has_bruteforce(i, "198.51.100.60")
    });
    assert_eq!(history_count(&d2, "ssh_bruteforce", "198.51.100.50"), 1);
    assert_eq!(watcher(&d2)["resumed_rotated_total"], 1);
}

/// Waits until the committed position of `log` is at its end.
fn wait_committed(d: &Daemon, log: &Path) {
    wait_until(20, "position committed", || {
        let db = rusqlite::Connection::open(d.state.join("svc.db")).unwrap();
        let off: i64 = db
            .query_row(
                "SELECT offset FROM source_checkpoints WHERE source = ?1",
                [format!("auth:{}", log.display())],
                |r| r.get(0),
            )
            .unwrap_or(0);
        (off as u64 == std::fs::metadata(log).unwrap().len()).then_some(())
    });
}

#[test]
fn a_log_rotated_by_copytruncate_while_the_daemon_was_down_loses_nothing() {
    let (mut d, log) = start("auth-copytrunc-down");
    append_lines(&log, &failures("198.51.100.80", 3));
    wait_lines(&d, 3);
    wait_committed(&d, &log);
    assert_eq!(d.stop(), 0);
    // While down: two more failures, then logrotate's copytruncate (the copy keeps the
    // unread lines, the live file is emptied in place), then new lines.
    append_lines(&log, &failures("198.51.100.80", 2));
    std::fs::copy(&log, log.with_extension("log.1")).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(0)
        .unwrap();
    append_lines(&log, &failures("198.51.100.81", 5));
    let d2 = restart(&d);
    wait_for(&d2, "findings from the copy and the emptied file", |i| {
        has_bruteforce(i, "198.51.100.80") && has_bruteforce(i, "198.51.100.81")
    });
    assert_eq!(history_count(&d2, "ssh_bruteforce", "198.51.100.80"), 1);
    assert_eq!(watcher(&d2)["resumed_rotated_total"], 1);
}

#[test]
fn a_log_truncated_and_rewritten_past_the_read_position_is_read_again() {
    let (mut d, log) = start("auth-refill");
    let filler: Vec<String> = (0..20)
        .map(|i| {
            format!("Nov 21 09:00:{i:02} web1 CRON[{i}]: (root) CMD (run-parts /etc/cron.hourly)")
        })
        .collect();
    append_lines(&log, &filler);
    wait_lines(&d, 20);
    // Live: truncated and rewritten (same inode) with more bytes than were read.
    let mut text = String::new();
    for l in failures("203.0.113.70", 5).iter().chain(&filler) {
        text.push_str(l);
        text.push('\n');
    }
    std::fs::write(&log, &text).unwrap();
    wait_for(&d, "finding from the rewritten start", |i| {
        has_bruteforce(i, "203.0.113.70")
    });
    // Across a restart: stopped, rewritten in place, started: the saved fingerprint no
    // longer matches, so the file is read from its start.
    wait_lines(&d, 20 + 25);
    assert_eq!(d.stop(), 0);
    let mut text = String::new();
    for l in filler
        .iter()
        .chain(&failures("203.0.113.71", 5))
        .chain(&filler)
    {
        text.push_str(l);
        text.push('\n');
    }
    let ino = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&log).unwrap().ino()
    };
    std::fs::write(&log, &text).unwrap();
    {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&log).unwrap().ino(), ino, "same inode");
    }
    let d2 = restart(&d);
    wait_for(&d2, "finding after a rewrite while down", |i| {
        has_bruteforce(i, "203.0.113.71")
    });
    assert!(watcher(&d2)["truncations_total"].as_u64().unwrap() >= 1);
}

#[test]
fn over_long_lines_are_counted_and_the_watcher_stays_attached() {
    let (d, log) = start("auth-long");
    // An over-long line still being written (no newline yet).
    {
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        f.write_all(&vec![b'A'; 20 * 1024]).unwrap();
    }
    wait_until(20, "the over-long line counted", || {
        (watcher(&d)["overlong_lines_total"] == 1).then_some(())
    });
    let w = watcher(&d);
    assert_eq!(w["state"], "attached", "{w}");
    assert_eq!(w["attached"], true);
    let h = d.get("/api/v1/health", READ).expect(200).json();
    assert_eq!(h["watchers"]["auth_log"]["overlong_lines_total"], 1);
    assert_eq!(h["watchers"]["auth_log"]["state"], "attached");
    let m = d.get("/metrics", METRICS).expect(200).text();
    assert!(
        m.contains("svc_watcher_overlong_lines_total{watcher=\"auth_log\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("svc_watcher_attached{watcher=\"auth_log\"} 1"),
        "{m}"
    );
    // The line ends; what follows is read normally.
    append_lines(&log, &["".to_string()]);
    append_lines(&log, &failures("192.0.2.77", 5));
    wait_for(&d, "finding after the over-long line", |i| {
        has_bruteforce(i, "192.0.2.77")
    });
    assert_eq!(watcher(&d)["overlong_lines_total"], 1);
}

#[test]
fn ipv4_mapped_addresses_are_reported_as_ipv4() {
    let (d, log) = start("auth-mapped");
    append_lines(&log, &failures("::ffff:203.0.113.9", 5));
    append_lines(&log, &["Nov 21 10:02:00 web1 sshd[78]: Accepted password for root from ::ffff:198.51.100.9 port 5556 ssh2".to_string()]);
    let items = wait_for(&d, "findings from mapped addresses", |i| {
        has_bruteforce(i, "203.0.113.9") && i.iter().any(|f| f["check"] == "ssh_root_login")
    });
    for f in &items {
        let ip = f["ip"].as_str().unwrap_or("");
        assert!(!ip.contains("::ffff:"), "{f}");
        assert!(
            !f["message"].as_str().unwrap_or("").contains("::ffff:"),
            "{f}"
        );
    }
    let root = items
        .iter()
        .find(|f| f["check"] == "ssh_root_login")
        .unwrap();
    assert_eq!(root["ip"], "198.51.100.9");
    assert_eq!(root["message"], "SSH root login from 198.51.100.9");
}

#[test]
fn sigkill_while_findings_flow_loses_nothing() {
    let (mut d, log) = start("auth-kill");
    let ips: Vec<String> = (1..=40).map(|i| format!("198.51.100.{i}")).collect();
    // First half: attacks whose findings we watch appear, then more lines keep coming
    // (including a half-finished attack) while the daemon is killed.
    for ip in &ips[..20] {
        append_lines(&log, &failures(ip, 5));
    }
    wait_for(&d, "first findings", |i| {
        i.iter().filter(|f| f["check"] == "ssh_bruteforce").count() >= 5
    });
    append_lines(&log, &failures(&ips[20], 3));
    d.kill9();
    append_lines(&log, &failures(&ips[20], 2));
    for ip in &ips[21..] {
        append_lines(&log, &failures(ip, 5));
    }
    let d2 = restart(&d);
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
