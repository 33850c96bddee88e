//! Incident grouping and the incident timeline, and the audit route's limit, through the
//! real binary.

use crate::common::*;

use std::io::Write;
use std::time::{Duration, Instant};

fn bearer(t: &str) -> String {
    format!("Bearer {t}")
}

#[test]
fn findings_from_one_address_form_one_incident_with_a_timeline() {
    let dir = temp_dir("incident");
    let log = dir.join("auth.log");
    std::fs::write(&log, "").unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let extra = format!(
        "[logs]\nauth = [{:?}]\n[files]\nwatch = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n",
        log.display().to_string()
    );
    std::fs::write(&config, format!("{}{extra}", base_config(&state))).unwrap();
    let d = Daemon::start_with(dir, config, state, &[]);
    let ip = "203.0.113.77";
    {
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        for i in 0..5 {
            writeln!(f, "Nov 21 10:00:0{i} web1 sshd[30{i}]: Failed password for root from {ip} port 4100{i} ssh2").unwrap();
        }
        writeln!(
            f,
            "Nov 21 10:00:09 web1 sshd[399]: Accepted password for root from {ip} port 41999 ssh2"
        )
        .unwrap();
        writeln!(f, "Nov 21 10:00:09 web1 sshd[400]: Failed password for admin from 198.51.100.200 port 5000 ssh2").unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        let v = d
            .get(&format!("/api/v1/incident?ip={ip}"), ADMIN)
            .expect(200)
            .json();
        // History commits first; listeners (incidents) run right after the commit.
        if v["total"] == 2 && v["incidents"][0]["count"] == 2 {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "timeline never had both findings: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(body["ip"], ip);
    assert_eq!(body["hours"], 24);
    assert_eq!(body["window_seconds"], 86_400);
    assert_eq!(body["truncated"], false);
    let incidents = body["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 1, "one incident for the address: {body}");
    let inc = &incidents[0];
    assert_eq!(inc["kind"], "ip");
    assert_eq!(inc["state"], "open");
    assert_eq!(inc["severity"], "HIGH");
    assert_eq!(inc["count"], 2);
    let checks: Vec<&str> = inc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(checks, ["ssh_bruteforce", "ssh_root_login"]);
    let items = body["items"].as_array().unwrap();
    assert!(items
        .iter()
        .all(|e| e["ip"] == ip && e["at"].as_str().unwrap().ends_with('Z')));
    // A single failure elsewhere is no finding and no incident.
    let other = d
        .get("/api/v1/incident?ip=198.51.100.200&hours=1", ADMIN)
        .expect(200)
        .json();
    assert_eq!(other["total"], 0);
    assert_eq!(other["window_seconds"], 3600);
    assert_eq!(other["incidents"], serde_json::json!([]));
    // Status counts the open incident and the posture follows it.
    let s = d.get("/api/v1/status", READ).json();
    assert_eq!(s["incidents_open_by_severity"]["high"], 1);
    assert_eq!(s["security_posture"], "warning");
    // Scope and input errors.
    d.get(&format!("/api/v1/incident?ip={ip}"), READ)
        .expect(403);
    d.get("/api/v1/incident", ADMIN).expect(400);
    assert!(d
        .get("/api/v1/incident?ip=not-an-ip", ADMIN)
        .expect(400)
        .json()["error"]
        .as_str()
        .unwrap()
        .starts_with("ip:"));
    assert!(d
        .get(&format!("/api/v1/incident?ip={ip}&hours=0"), ADMIN)
        .expect(400)
        .json()["error"]
        .as_str()
        .unwrap()
        .starts_with("hours:"));
    d.get("/api/v1/incident?account=nobody-here", ADMIN)
        .expect(200);
    d.req(
        "POST",
        "/api/v1/incident",
        &[("Authorization", &bearer(ADMIN))],
        b"",
    )
    .expect(405);
}

#[test]
fn audit_answers_the_newest_200_entries() {
    let d = Daemon::start("auditlimit", "");
    let auth = bearer(ADMIN);
    let mut c = d.client();
    for i in 0..210 {
        let id = format!("{i:032x}");
        c.send(
            "DELETE",
            &format!("/api/v1/sessions/{id}"),
            &[("Authorization", &auth)],
            b"",
        )
        .expect(404);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let v = loop {
        let v = d.get("/api/v1/audit", ADMIN).expect(200).json();
        if v["items"][0]["target"] == format!("{:032x}", 209) {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "audit never caught up: {}",
            v["items"][0]
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 200);
    assert_eq!(v["limit"], 200);
    assert_eq!(v["truncated"], true);
    assert!(v.get("total").is_none(), "the audit route sends no total");
    // Newest first: targets 209 down to 10.
    assert_eq!(items[199]["target"], format!("{:032x}", 10));
    assert_eq!(items[0]["actor"], "ops-admin");
    assert_eq!(items[0]["via"], "token");
    assert_eq!(items[0]["action"], "session.revoke");
    assert_eq!(items[0]["outcome"], "not_found");
}
