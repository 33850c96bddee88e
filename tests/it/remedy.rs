//! Remediation through the API (issue 27): finding ids, scan jobs, fixes and quarantine
//! actions, against the real daemon with the problems created on disk.

use crate::common::*;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// A daemon whose checks read `{dir}/fixture` (web root `{dir}/fixture/var/www`), without
/// scheduled scans; `env` goes to the daemon.
fn start(tag: &str, extra: &str, env: &[(&str, &str)]) -> (Daemon, PathBuf) {
    let dir = temp_dir(tag);
    let www = dir.join("fixture/var/www");
    std::fs::create_dir_all(&www).unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        format!(
            "{}[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\nroot = {root:?}\n{extra}",
            base_config(&state),
            root = dir.join("fixture").display().to_string(),
        ),
    )
    .unwrap();
    let d = Daemon::start_with(dir, config, state, env);
    (d, www)
}

fn restart(d: &mut Daemon, env: &[(&str, &str)]) -> Daemon {
    assert_eq!(d.stop(), 0);
    Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), env)
}

fn post(d: &Daemon, path: &str, token: &str, body: &Value) -> Resp {
    let auth = format!("Bearer {token}");
    d.req(
        "POST",
        path,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    )
}

/// Queues a scan of `kind` and waits until it is done; returns the job.
fn scan(d: &Daemon, kind: &str) -> Value {
    let r = post(d, "/api/v1/scan-jobs", ADMIN, &json!({ "kind": kind }));
    r.expect(202);
    let v = r.json();
    assert_eq!(v["ok"], true);
    assert_eq!(v["state"], "queued");
    let id = v["id"].as_i64().unwrap();
    wait_until(120, "the scan job to finish", || {
        let j = d.get(&format!("/api/v1/scan-jobs/{id}"), READ).json();
        (j["state"] == "done").then_some(j)
    })
}

fn findings(d: &Daemon, check: &str) -> Vec<Value> {
    d.get("/api/v1/findings", READ).json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == check)
        .cloned()
        .collect()
}

fn write_mode(p: &Path, body: &[u8], mode: u32) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Every finding route and the event stream carry the same short URL-safe id, which stays
/// the same across a rescan and a restart.
#[test]
fn findings_carry_stable_ids_in_every_route_and_the_event_stream() {
    let (mut d, www) = start("remedy-ids", "", &[]);
    write_mode(&www.join("open.php"), b"<?php echo 1;", 0o666);
    let mut events = d.client();
    events.write_request(
        "GET",
        "/api/v1/events",
        &[("Authorization", &format!("Bearer {READ}"))],
        b"",
    );
    events.read_head().expect(200);
    let job = scan(&d, "deep");
    assert!(job["findings"].as_i64().unwrap() >= 1, "{job}");
    let listed = findings(&d, "world_writable_php");
    assert_eq!(listed.len(), 1, "{listed:?}");
    let id = listed[0]["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 16, "{id}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    let enriched = d.get("/api/v1/findings/enriched", READ).json();
    let e = enriched["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "world_writable_php")
        .cloned()
        .unwrap();
    assert_eq!(e["id"], id.as_str());
    let text = events.read_until(|t| t.contains("world_writable_php"));
    let line = text
        .lines()
        .find(|l| l.starts_with("data:") && l.contains("world_writable_php"))
        .unwrap_or_else(|| panic!("no event: {text}"));
    let ev: Value = serde_json::from_str(line.trim_start_matches("data:").trim()).unwrap();
    let ev_id = ev["id"]
        .as_str()
        .or_else(|| ev["finding"]["id"].as_str())
        .unwrap_or_else(|| panic!("no id in {ev}"));
    assert_eq!(ev_id, id);
    drop(events);
    // A second scan merges into the same finding: same id.
    scan(&d, "deep");
    assert_eq!(findings(&d, "world_writable_php")[0]["id"], id.as_str());
    // After a restart the restored active set names it the same.
    let d2 = restart(&mut d, &[]);
    let again = wait_until(30, "the finding after the restart", || {
        findings(&d2, "world_writable_php").first().cloned()
    });
    assert_eq!(again["id"], id.as_str());
}

/// The scan-job routes: scopes, a bad kind, 202 and the job's life, 429 with Retry-After on
/// a full queue, cancel of a queued and of a running job, and the state table's restart
/// rule; `latest_scan` comes from finished jobs.
#[test]
fn scan_jobs_over_the_api_queue_cancel_and_survive_a_restart() {
    let dir = temp_dir("remedy-jobs-pause");
    let pause = dir.join("pause");
    let pause_s = pause.display().to_string();
    let env = [("SVC_TEST_SCAN_PAUSE", pause_s.as_str())];
    let (mut d, _www) = start("remedy-jobs", "", &env);
    // Scopes and bad input.
    post(&d, "/api/v1/scan-jobs", READ, &json!({"kind": "full"})).expect(403);
    post(&d, "/api/v1/scan-jobs", ADMIN, &json!({"kind": "weekly"})).expect(400);
    post(&d, "/api/v1/scan-jobs", ADMIN, &json!({})).expect(400);
    d.get("/api/v1/scan-jobs/0", READ).expect(400);
    d.get("/api/v1/scan-jobs/007", READ).expect(400);
    d.get("/api/v1/scan-jobs/99999", READ).expect(404);
    // One job runs (held at its start), eight wait, the tenth is refused.
    let first = post(&d, "/api/v1/scan-jobs", ADMIN, &json!({"kind": "critical"}));
    first.expect(202);
    let first = first.json()["id"].as_i64().unwrap();
    wait_until(30, "the first job to run", || {
        pause.with_extension("reached").exists().then_some(())
    });
    let mut waiting = Vec::new();
    for _ in 0..8 {
        let r = post(&d, "/api/v1/scan-jobs", ADMIN, &json!({"kind": "deep"}));
        r.expect(202);
        waiting.push(r.json()["id"].as_i64().unwrap());
    }
    let full = post(&d, "/api/v1/scan-jobs", ADMIN, &json!({"kind": "full"}));
    full.expect(429);
    assert_eq!(full.header("retry-after"), Some("30"));
    assert!(full.json()["error"].as_str().unwrap().contains("full"));
    let list = d.get("/api/v1/scan-jobs", READ).expect(200).json();
    let states: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states.iter().filter(|s| **s == "queued").count(),
        8,
        "{states:?}"
    );
    assert_eq!(
        states.iter().filter(|s| **s == "running").count(),
        1,
        "{states:?}"
    );
    // Cancel a waiting job (read scope may not), then the running one.
    let w0 = waiting[0];
    post(
        &d,
        &format!("/api/v1/scan-jobs/{w0}/cancel"),
        READ,
        &json!({}),
    )
    .expect(403);
    let c = post(
        &d,
        &format!("/api/v1/scan-jobs/{w0}/cancel"),
        ADMIN,
        &json!({}),
    );
    c.expect(200);
    assert_eq!(c.json()["was"], "queued");
    post(
        &d,
        &format!("/api/v1/scan-jobs/{w0}/cancel"),
        ADMIN,
        &json!({}),
    )
    .expect(409);
    let c = post(
        &d,
        &format!("/api/v1/scan-jobs/{first}/cancel"),
        ADMIN,
        &json!({}),
    );
    c.expect(200);
    assert_eq!(c.json()["was"], "running");
    let j = d.get(&format!("/api/v1/scan-jobs/{first}"), READ).json();
    assert_eq!(j["state"], "cancelled", "{j}");
    assert_eq!(j["reason"], "cancelled_while_running", "{j}");
    // The next job now holds the worker at its start; a restart leaves the rest behind.
    wait_until(30, "the next job to run", || {
        let j = d
            .get(&format!("/api/v1/scan-jobs/{}", waiting[1]), READ)
            .json();
        (j["state"] == "running").then_some(())
    });
    assert!(d.get("/api/v1/status", READ).json()["latest_scan"].is_null());
    d.kill9();
    let _ = std::fs::remove_file(pause.with_extension("reached"));
    let d2 = Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), &[]);
    for &id in &waiting[1..] {
        let j = d2.get(&format!("/api/v1/scan-jobs/{id}"), READ).json();
        assert_eq!(j["state"], "error", "{j}");
        assert_eq!(j["reason"], "daemon_restarted", "{j}");
    }
    let w0j = d2.get(&format!("/api/v1/scan-jobs/{w0}"), READ).json();
    assert_eq!(w0j["state"], "cancelled", "{w0j}");
    let s = d2.get("/api/v1/status", READ).json();
    assert_eq!(
        s["queues"]["scans.jobs"]["dropped_total"], 7,
        "{}",
        s["queues"]
    );
    // A finished job sets latest_scan.
    let job = scan(&d2, "critical");
    let s = d2.get("/api/v1/status", READ).json();
    assert_eq!(s["latest_scan"], job["finished_at"], "{s}");
}
