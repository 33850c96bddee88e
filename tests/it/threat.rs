//! Threat intelligence through the real binary over real TLS: the `/api/v1/threat/*` and
//! `/api/v1/undo/*` routes and `svc threat`, fed by the real authentication-log detector.
//! Tests that block use real nftables inside the network namespaces of
//! `tests/it/firewall.rs` (skipped without root, failing under `CI=true`).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::*;
use crate::firewall::{post, require};

pub(crate) fn failures(ip: &str, n: usize) -> Vec<String> {
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

/// `[logs]` on a fresh auth log in `dir`, and the log's path.
fn auth_log(dir: &Path) -> (String, PathBuf) {
    let log = dir.join("auth.log");
    std::fs::write(
        &log,
        "Nov 21 00:00:00 host sshd[1]: Server listening on 0.0.0.0 port 22.\n",
    )
    .unwrap();
    let extra = format!(
        "[logs]\nauth = [{log:?}]\n[files]\nwatch = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[thresholds]\nauth_failures = 5\n",
        log = log.display().to_string()
    );
    (extra, log)
}

fn start(tag: &str, more: &str) -> (Daemon, PathBuf) {
    let dir = temp_dir(tag);
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let (extra, log) = auth_log(&dir);
    std::fs::write(&config, format!("{}{extra}{more}", base_config(&state))).unwrap();
    (Daemon::start_with(dir, config, state, &[]), log)
}

fn cli(d: &Daemon, args: &[&str]) -> (i32, String, String) {
    let mut full = vec!["threat"];
    full.extend_from_slice(args);
    let out = d.cli(&full);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn lookup(d: &Daemon, ip: &str) -> Value {
    d.get(&format!("/api/v1/threat/ip?ip={ip}"), ADMIN)
        .expect(200)
        .json()
}

fn is_rfc3339_utc(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.ends_with('Z') && s.parse::<jiff::Timestamp>().is_ok())
}

#[test]
fn routes_answer_with_scopes_envelopes_and_validation() {
    let (d, log) = start("threat-routes", "");
    // Read scope: statistics; admin: detail.
    let s = d.get("/api/v1/threat/stats", READ).expect(200).json();
    assert_eq!(s["total_addresses"], 0);
    assert!(s["by_type"].as_array().unwrap().len() >= 6);
    d.get("/api/v1/threat/db-stats", READ).expect(200);
    let top = d
        .get("/api/v1/threat/top-attackers", READ)
        .expect(200)
        .json();
    assert_eq!(top["items"], json!([]));
    assert_eq!(top["truncated"], false);
    assert!(top.get("limit").is_some());
    assert!(top.get("total").is_none(), "envelope rule 3: {top}");
    for path in [
        "/api/v1/threat/ip?ip=192.0.2.9",
        "/api/v1/threat/events?ip=192.0.2.9",
        "/api/v1/threat/whitelist",
        "/api/v1/undo/pending",
    ] {
        d.get(path, READ).expect(403);
        d.get(path, ADMIN).expect(200);
    }
    post(
        &d,
        "/api/v1/threat/clear-ip",
        READ,
        json!({"ip": "192.0.2.9"}),
    )
    .expect(403);
    // Invalid input is 400 with an error.
    for path in [
        "/api/v1/threat/ip",
        "/api/v1/threat/ip?ip=nope",
        "/api/v1/threat/events?ip=300.1.1.1",
        "/api/v1/threat/top-attackers?limit=0",
        "/api/v1/threat/top-attackers?limit=x",
    ] {
        let r = d.get(path, ADMIN);
        r.expect(400);
        assert!(r.json()["error"].is_string(), "{path}");
    }
    // Without the firewall engine, blocks and whitelists answer 503.
    let r = post(
        &d,
        "/api/v1/threat/block-ip",
        ADMIN,
        json!({"ip": "192.0.2.9"}),
    );
    r.expect(503);
    assert!(r.json()["error"].is_string());
    // A clean address.
    let v = lookup(&d, "192.0.2.9");
    assert_eq!(v["ip"], "192.0.2.9");
    assert_eq!(v["verdict"], "clean");
    assert_eq!(v["score"], 0);
    assert_eq!(v["blocked"], false);
    assert_eq!(v["whitelisted"], false);
    assert_eq!(v["flagged"], false);
    assert_eq!(v["events"], json!([]));
    assert!(v["rdap"].is_null());
    let names: Vec<&str> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            for k in ["name", "score", "reason", "status"] {
                assert!(l.get(k).is_some(), "source line without {k}: {l}");
            }
            l["name"].as_str().unwrap()
        })
        .collect();
    assert!(names.contains(&"local_db"), "{names:?}");

    // A brute force in the auth log becomes events, a score and a top attacker.
    append_lines(&log, &failures("203.0.113.9", 8));
    let v = wait_until(20, "a scored record", || {
        let v = lookup(&d, "203.0.113.9");
        (v["score"].as_u64().unwrap_or(0) > 0 && !v["events"].as_array().unwrap().is_empty())
            .then_some(v)
    });
    assert_ne!(v["verdict"], "clean");
    let e = &v["events"][0];
    assert_eq!(e["type"], "brute_force");
    assert_eq!(e["check"], "ssh_bruteforce");
    assert!(["CRITICAL", "HIGH", "WARNING"].contains(&e["sev"].as_str().unwrap()));
    assert!(is_rfc3339_utc(&e["at"]), "{e}");
    let ev = d
        .get("/api/v1/threat/events?ip=203.0.113.9&limit=1", ADMIN)
        .expect(200)
        .json();
    assert_eq!(ev["items"].as_array().unwrap().len(), 1);
    assert_eq!(ev["limit"], 1);
    assert!(ev.get("total").is_none());
    let top = d
        .get("/api/v1/threat/top-attackers", READ)
        .expect(200)
        .json();
    assert_eq!(top["items"][0]["ip"], "203.0.113.9");
    assert!(top["items"][0]["score"].as_u64().unwrap() > 0);
    let s = d.get("/api/v1/threat/stats", READ).expect(200).json();
    assert_eq!(s["total_addresses"], 1);
    let score = v["score"].as_u64().unwrap();

    // Clear keeps the events, answers an undo token; undo restores the score.
    let r = post(
        &d,
        "/api/v1/threat/clear-ip",
        ADMIN,
        json!({"ip": "203.0.113.9"}),
    );
    r.expect(200);
    let r = r.json();
    assert_eq!(r["ok"], true);
    let token = r["undo_token"].as_str().unwrap().to_string();
    let after = lookup(&d, "203.0.113.9");
    assert_eq!(after["verdict"], "clean");
    assert!(
        !after["events"].as_array().unwrap().is_empty(),
        "events kept"
    );
    let p = d.get("/api/v1/undo/pending", ADMIN).expect(200).json();
    let item = &p["items"][0];
    assert_eq!(item["undo_token"], token.as_str());
    assert!(is_rfc3339_utc(&item["expires_at"]), "{item}");
    let r = post(&d, "/api/v1/undo/run", ADMIN, json!({"undo_token": token}));
    r.expect(200);
    assert_eq!(r.json()["ok"], true);
    assert!(lookup(&d, "203.0.113.9")["score"].as_u64().unwrap() >= score - 1);
    post(&d, "/api/v1/undo/run", ADMIN, json!({"undo_token": token})).expect(404);
    // A later decision invalidates an older undo entry: 409.
    let t1 = post(
        &d,
        "/api/v1/threat/clear-ip",
        ADMIN,
        json!({"ip": "203.0.113.9"}),
    )
    .json()["undo_token"]
        .as_str()
        .unwrap()
        .to_string();
    post(
        &d,
        "/api/v1/threat/clear-ip",
        ADMIN,
        json!({"ip": "203.0.113.9"}),
    )
    .expect(200);
    let r = post(&d, "/api/v1/undo/run", ADMIN, json!({"undo_token": t1}));
    r.expect(409);
    assert!(r.json()["error"].is_string());
    post(&d, "/api/v1/undo/run", ADMIN, json!({})).expect(400);

    // Bulk forms: invalid addresses listed; all invalid is 400; nothing changed is 409.
    let r = post(
        &d,
        "/api/v1/threat/clear-ip",
        ADMIN,
        json!({"ips": ["203.0.113.9", "bad", "198.51.100.77"]}),
    );
    r.expect(200);
    let r = r.json();
    assert_eq!(r["changed"], json!(["203.0.113.9"]));
    assert_eq!(r["invalid"], json!(["bad"]));
    assert_eq!(r["skipped"], json!(["198.51.100.77"]));
    assert_eq!(r["warnings"].as_array().unwrap().len(), 1);
    assert_eq!(r["failed"], json!([]));
    assert!(r["undo_token"].is_string());
    let r = post(
        &d,
        "/api/v1/threat/clear-ip",
        ADMIN,
        json!({"ips": ["x", "y"]}),
    );
    r.expect(400);
    assert_eq!(r.json()["invalid"], json!(["x", "y"]));
    let r = post(
        &d,
        "/api/v1/threat/clear-ip",
        ADMIN,
        json!({"ips": ["198.51.100.77"]}),
    );
    r.expect(409);
    assert!(r.json()["error"].is_string());
    let many: Vec<String> = (0..1001)
        .map(|i| format!("10.0.{}.{}", i / 256, i % 256))
        .collect();
    post(&d, "/api/v1/threat/block-ip", ADMIN, json!({"ips": many})).expect(400);
    post(
        &d,
        "/api/v1/threat/clear-ip",
        ADMIN,
        json!({"ip": "192.0.2.1", "x": 1}),
    )
    .expect(400);
    // Wrong method.
    d.req(
        "POST",
        "/api/v1/threat/stats",
        &[("Authorization", &format!("Bearer {ADMIN}"))],
        b"",
    )
    .expect(405);

    // The command line mirrors the routes over the control socket.
    let (code, out, err) = cli(&d, &["lookup", "203.0.113.9"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("203.0.113.9: "), "{out}");
    assert!(out.contains("local_db"), "{out}");
    let (code, out, _) = cli(&d, &["lookup", "203.0.113.9", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ip"], "203.0.113.9");
    let (code, out, _) = cli(&d, &["top"]);
    assert_eq!(code, 0);
    assert!(out.contains("203.0.113.9"), "{out}");
    let (code, out, _) = cli(&d, &["stats"]);
    assert_eq!(code, 0);
    assert!(out.contains("1 addresses"), "{out}");
    let (code, out, err) = cli(&d, &["events", "203.0.113.9", "--limit", "5"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.contains(" HIGH "), "{out}");
    let (code, out, err) = cli(&d, &["clear", "203.0.113.9"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("undo with: svc threat undo "), "{out}");
    let (code, out, _) = cli(&d, &["undo"]);
    assert_eq!(code, 0);
    let token = out.split_whitespace().next().unwrap().to_string();
    let (code, out, err) = cli(&d, &["undo", &token]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("undone clear for 203.0.113.9"), "{out}");
    let (code, _, err) = cli(&d, &["lookup", "nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("not an IP address"), "{err}");
    let (code, _, err) = cli(&d, &["block", "192.0.2.9"]);
    assert_eq!(code, 1);
    assert!(err.contains("firewall"), "{err}");
    assert_eq!(cli(&d, &["block"]).0, 2);
    assert_eq!(cli(&d, &["bogus"]).0, 2);
    // CLI writes are audited.
    let a = d.get("/api/v1/audit", ADMIN).json();
    assert!(
        a["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["action"] == "threat.clear" && i["via"] == "control"),
        "{a}"
    );
}

#[test]
fn a_brute_force_in_the_auth_log_becomes_a_score_a_verdict_and_a_block() {
    let Some(net) = require("threat-auto") else {
        return;
    };
    let dir_probe = temp_dir("threat-auto-log");
    let (logs, log) = auth_log(&dir_probe);
    let d = net.daemon(
        "threat-auto",
        "",
        &format!("{logs}[auto_response]\ndry_run = false\n"),
    );
    assert!(net.connects("192.0.2.1"), "open before the attack");
    append_lines(&log, &failures("192.0.2.2", 8));
    let c = wait_until(20, "the automatic block", || {
        let c = d.get("/api/v1/firewall/check?ip=192.0.2.2", ADMIN).json();
        (c["blocked"] == true).then_some(c)
    });
    assert!(c["temporary"].as_str().unwrap().contains("auto"), "{c}");
    assert!(net.set("block4").contains("192.0.2.2"));
    assert!(!net.connects("192.0.2.1"), "the attacker is dropped");
    assert!(
        net.connects("198.51.100.1"),
        "the peer's other address is not"
    );
    let v = lookup(&d, "192.0.2.2");
    assert_eq!(v["verdict"], "blocked");
    assert_eq!(v["blocked"], true);
    assert!(v["score"].as_u64().unwrap() > 0);
    assert_eq!(v["events"][0]["type"], "brute_force");
    let s = d.get("/api/v1/threat/stats", READ).json();
    assert_eq!(s["auto_block"]["dry_run"], false);
    assert_eq!(s["auto_block"]["blocked_total"], 1);
    let b = d.get("/api/v1/blocked-ips", READ).json();
    assert_eq!(b["items"][0]["source"], "auto");
    // The auto-block rows are reported.
    let st = d.get("/api/v1/status", READ).json();
    for row in [
        "auto_block.waiting",
        "auto_block.active",
        "auto_block.pending",
        "auto_block.candidates",
        "attackdb.events",
        "attackdb.records",
    ] {
        assert!(st["queues"].get(row).is_some(), "{row} missing");
    }
    // An allow-listed address is never blocked automatically.
    post(
        &d,
        "/api/v1/threat/whitelist-ip",
        ADMIN,
        json!({"ip": "198.51.100.2"}),
    )
    .expect(200);
    append_lines(&log, &failures("198.51.100.2", 8));
    wait_until(20, "the second attacker's events", || {
        (!lookup(&d, "198.51.100.2")["events"]
            .as_array()
            .unwrap()
            .is_empty())
        .then_some(())
    });
    // The state owner works in cycles of a second; a cycle that ran after the events
    // has seen them (blocks counted stay 1).
    let cycles = |d: &Daemon| {
        d.get("/api/v1/threat/stats", READ).json()["auto_block"]["cycles"]
            .as_u64()
            .unwrap_or(0)
    };
    let before = cycles(&d);
    wait_until(10, "two more auto-block cycles", || {
        (cycles(&d) >= before + 2).then_some(())
    });
    assert_eq!(
        d.get("/api/v1/firewall/check?ip=198.51.100.2", ADMIN)
            .json()["blocked"],
        false
    );
    assert!(net.connects("198.51.100.1"));
    let _ = std::fs::remove_dir_all(dir_probe);
}

#[test]
fn operator_blocks_follow_the_state_table_with_undo() {
    let Some(net) = require("threat-state") else {
        return;
    };
    let d = net.daemon("threat-state", "", "");
    // 24-hour block: expiring evidence, an undo token.
    let r = post(
        &d,
        "/api/v1/threat/block-ip",
        ADMIN,
        json!({"ip": "192.0.2.2"}),
    );
    r.expect(200);
    let r = r.json();
    assert_eq!(r["ok"], true);
    assert!(is_rfc3339_utc(&r["expires_at"]), "{r}");
    let t_block = r["undo_token"].as_str().unwrap().to_string();
    assert!(net.set("block4").contains("192.0.2.2"));
    assert!(!net.connects("192.0.2.1"));
    assert_eq!(lookup(&d, "192.0.2.2")["verdict"], "blocked");
    // Undo: the address is unblocked again (no prior block).
    post(
        &d,
        "/api/v1/undo/run",
        ADMIN,
        json!({"undo_token": t_block}),
    )
    .expect(200);
    assert!(!net.set("block4").contains("192.0.2.2"));
    assert!(net.connects("192.0.2.1"));

    // Permanent block; a 24-hour block of it is refused (single 409, bulk skipped).
    let r = post(
        &d,
        "/api/v1/threat/block-ip-permanent",
        ADMIN,
        json!({"ip": "192.0.2.2", "reason": "ssh brute force"}),
    );
    r.expect(200);
    assert_eq!(r.json()["permanent"], true);
    let r = post(
        &d,
        "/api/v1/threat/block-ip",
        ADMIN,
        json!({"ip": "192.0.2.2"}),
    );
    r.expect(409);
    assert!(r.json()["error"].as_str().unwrap().contains("permanently"));
    let r = post(
        &d,
        "/api/v1/threat/block-ip",
        ADMIN,
        json!({"ips": ["192.0.2.2", "198.51.100.2", "nope"]}),
    );
    r.expect(200);
    let r = r.json();
    assert_eq!(r["changed"], json!(["198.51.100.2"]));
    assert_eq!(r["skipped"], json!(["192.0.2.2"]));
    assert_eq!(r["invalid"], json!(["nope"]));
    assert!(r["warnings"][0].as_str().unwrap().contains("unblock first"));
    let t_bulk = r["undo_token"].as_str().unwrap().to_string();
    assert!(!net.connects("198.51.100.1"));
    // Nothing changed: 409.
    post(
        &d,
        "/api/v1/threat/block-ip",
        ADMIN,
        json!({"ips": ["192.0.2.2"]}),
    )
    .expect(409);
    // Bulk undo restores the prior lifetime (198.51.100.2 was not blocked).
    let r = post(&d, "/api/v1/undo/run", ADMIN, json!({"undo_token": t_bulk}));
    r.expect(200);
    assert_eq!(r.json()["restored"], json!(["198.51.100.2"]));
    assert!(net.connects("198.51.100.1"));
    assert!(!net.connects("192.0.2.1"), "the permanent block stays");

    // Unblocked with permanent evidence: the lookup reports it flagged.
    post(
        &d,
        "/api/v1/firewall/unban",
        ADMIN,
        json!({"ip": "192.0.2.2"}),
    )
    .expect(200);
    let v = lookup(&d, "192.0.2.2");
    assert_eq!(v["blocked"], false);
    assert_eq!(v["flagged"], true, "{v}");

    // A whitelist decision invalidates an older undo entry; temporary whitelist answers
    // duration_seconds.
    let t_perm = post(
        &d,
        "/api/v1/threat/block-ip-permanent",
        ADMIN,
        json!({"ip": "198.51.100.2"}),
    )
    .json()["undo_token"]
        .as_str()
        .unwrap()
        .to_string();
    let r = post(
        &d,
        "/api/v1/threat/temp-whitelist-ip",
        ADMIN,
        json!({"ip": "198.51.100.2", "hours": 2}),
    );
    r.expect(200);
    let r = r.json();
    assert_eq!(r["duration_seconds"], 7200);
    assert!(is_rfc3339_utc(&r["expires_at"]));
    assert!(net.connects("198.51.100.1"), "whitelisted");
    post(&d, "/api/v1/undo/run", ADMIN, json!({"undo_token": t_perm})).expect(409);
    for bad in [
        json!({"ip": "198.51.100.2", "hours": 0}),
        json!({"ip": "198.51.100.2", "hours": 169}),
    ] {
        post(&d, "/api/v1/threat/temp-whitelist-ip", ADMIN, bad).expect(400);
    }
    let w = d.get("/api/v1/threat/whitelist", ADMIN).expect(200).json();
    assert_eq!(w["items"][0]["ip"], "198.51.100.2");
    assert!(is_rfc3339_utc(&w["items"][0]["expires_at"]));
    let v = lookup(&d, "198.51.100.2");
    assert_eq!(v["whitelisted"], true);
    // Unwhitelist, then undo of the unwhitelist puts the entry back.
    let r = post(
        &d,
        "/api/v1/threat/unwhitelist-ip",
        ADMIN,
        json!({"ip": "198.51.100.2"}),
    );
    r.expect(200);
    let t_un = r.json()["undo_token"].as_str().unwrap().to_string();
    assert_eq!(lookup(&d, "198.51.100.2")["whitelisted"], false);
    post(
        &d,
        "/api/v1/threat/unwhitelist-ip",
        ADMIN,
        json!({"ip": "198.51.100.2"}),
    )
    .expect(409);
    post(&d, "/api/v1/undo/run", ADMIN, json!({"undo_token": t_un})).expect(200);
    assert_eq!(lookup(&d, "198.51.100.2")["whitelisted"], true);

    // The command line blocks and whitelists too.
    let (code, out, err) = cli(&d, &["block", "192.0.2.2"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("blocked 192.0.2.2 until "), "{out}");
    assert!(!net.connects("192.0.2.1"));
    let (code, _, err) = cli(&d, &["block", "192.0.2.2", "--permanent"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&d, &["block", "192.0.2.2"]);
    assert_eq!(code, 1);
    assert!(err.contains("permanently"), "{err}");
    let (code, out, err) = cli(&d, &["whitelist", "192.0.2.2", "--hours", "3"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("whitelisted 192.0.2.2 until "), "{out}");
    assert!(net.connects("192.0.2.1"));
    let (code, _, err) = cli(&d, &["unwhitelist", "192.0.2.2"]);
    assert_eq!(code, 0, "{err}");
}
