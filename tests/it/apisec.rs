//! API security and spec-letter fixes through the real binary: failed authentication is
//! never audited, the action log is bounded, streams end with their session, login works
//! with a stale cookie and over the failure limit, strict numbers and addresses, bounded
//! suppression bodies, static capabilities, hardening without work, the control client.

use std::io::Write;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;

fn bearer(t: &str) -> String {
    format!("Bearer {t}")
}

/// Config for a daemon that watches nothing and schedules no scan.
const QUIET: &str =
    "[files]\nwatch = []\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n";

fn audit_rows(d: &Daemon) -> Vec<(String, String, String, String)> {
    let db = rusqlite::Connection::open(d.state.join("svc.db")).unwrap();
    let mut st = db
        .prepare("SELECT actor, action, target, outcome FROM audit ORDER BY id")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Stops the daemon and waits until its last log line reached the stderr file.
fn stop_and_read_log(d: &mut Daemon) -> String {
    assert_eq!(d.stop(), 0);
    wait_until(10, "the daemon's last log line", || {
        let log = d.stderr();
        log.contains("stopped").then_some(log)
    })
}

#[test]
fn failed_authentication_is_counted_and_logged_once_never_audited() {
    let mut d = Daemon::start("authfail", QUIET);
    // A long path with a bidirectional override and a C1 control (NEL) in it.
    let long = format!("/api/v1/sessions/\u{202e}\u{85}{}", "x".repeat(15_000));
    let mut c = d.client();
    for _ in 0..30 {
        let r = c.send(
            "DELETE",
            &long,
            &[("Authorization", "Bearer wrong-token-wrong-token")],
            b"",
        );
        assert!(matches!(r.status, 401 | 429), "{}", r.status);
        c.send("DELETE", "/api/v1/sessions/abc", &[], b"")
            .expect(401);
        c.send(
            "POST",
            "/login",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            b"token=wrong-token-wrong-token",
        );
    }
    let m = d.get("/metrics", METRICS).expect(200).text();
    let count = |reason: &str| -> u64 {
        let key = format!("svc_auth_failures_total{{reason=\"{reason}\"}} ");
        m.lines()
            .find_map(|l| l.strip_prefix(key.as_str()))
            .unwrap_or_else(|| panic!("no {key} in {m}"))
            .parse()
            .unwrap()
    };
    assert_eq!(count("no_credential"), 30);
    // 20 failures reach the limit; the other 40 attempts are answered 429.
    assert_eq!(count("invalid_token") + count("invalid_login"), 20);
    assert_eq!(count("rate_limited"), 40);
    // An authenticated write is audited.
    d.req(
        "DELETE",
        "/api/v1/sessions/0123456789abcdef0123456789abcdef",
        &[("Authorization", &bearer(ADMIN))],
        b"",
    )
    .expect(404);
    let log = stop_and_read_log(&mut d);
    let rows = audit_rows(&d);
    assert_eq!(rows.len(), 1, "only the authenticated request: {rows:?}");
    assert_eq!(rows[0].0, "ops-admin");
    assert_eq!(rows[0].3, "not_found");
    // One line a minute for the address, the path cut and escaped.
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("authentication failure"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].len() < 400, "{}", lines[0]);
    assert!(
        !lines[0].contains('\u{202e}') && !lines[0].contains('\u{85}'),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("\\u{202e}\\u{85}xxx"), "{}", lines[0]);
}

#[test]
fn action_log_is_bounded_and_listed_as_a_queue_row() {
    let dir = temp_dir("auditcap");
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(&config, format!("{}{QUIET}", base_config(&state))).unwrap();
    // The retention key in a drop-in: tables merge.
    std::fs::create_dir_all(dir.join("conf.d")).unwrap();
    std::fs::write(
        dir.join("conf.d/audit.toml"),
        "[webui]\naudit_max_entries = 200\n",
    )
    .unwrap();
    let mut d = Daemon::start_with(dir, config, state, &[]);
    let s = d.get("/api/v1/status", READ).expect(200).json();
    let row = &s["queues"]["actionlog.writes"];
    assert_eq!(row["capacity"], 64, "{s}");
    assert_eq!(row["depth_unit"], "records");
    let mut c = d.client();
    let auth = bearer(ADMIN);
    let long = "t".repeat(300);
    c.send(
        "DELETE",
        &format!("/api/v1/sessions/{long}"),
        &[("Authorization", &auth)],
        b"",
    )
    .expect(404);
    for i in 0..210 {
        c.send(
            "DELETE",
            &format!("/api/v1/sessions/n{i}"),
            &[("Authorization", &auth)],
            b"",
        )
        .expect(404);
    }
    stop_and_read_log(&mut d);
    let rows = audit_rows(&d);
    assert_eq!(rows.len(), 200);
    assert_eq!(rows.last().unwrap().2, "n209");
    assert_eq!(rows.first().unwrap().2, "n10");
}

#[test]
fn audit_targets_are_capped() {
    let mut d = Daemon::start("audittarget", QUIET);
    let long = "t".repeat(300);
    d.req(
        "DELETE",
        &format!("/api/v1/sessions/{long}"),
        &[("Authorization", &bearer(ADMIN))],
        b"",
    )
    .expect(404);
    stop_and_read_log(&mut d);
    let rows = audit_rows(&d);
    assert_eq!(rows[0].2.chars().count(), 256);
}

/// Opens `/api/v1/events` with `headers`; returns the client once the preamble arrived.
fn open_stream(d: &Daemon, headers: &[(&str, &str)]) -> Client {
    let mut c = d.client();
    // Longer than the 2-second promise, shorter than the 15-second heartbeat.
    c.stream
        .sock
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    c.write_request("GET", "/api/v1/events", headers, b"");
    assert_eq!(c.read_head().status, 200);
    c.read_until(|t| t.contains("retry:"));
    c
}

/// Reads until the server closes the stream (a read timeout panics the test).
fn wait_closed(c: &mut Client, what: &str) {
    let text = c.read_until(|_| false);
    assert!(text.contains("retry:"), "{what}: {text}");
}

#[test]
fn session_streams_end_with_their_session_bearer_streams_do_not() {
    let d = Daemon::start("streams", QUIET);
    let (ck1, _) = login(&d, ADMIN);
    let (ck2, csrf2) = login(&d, ADMIN);
    let (ck3, _) = login(&d, ADMIN);
    let h = |ck: &str| format!("svc_auth={ck}");
    let auth = bearer(ADMIN);
    let mut bearer_stream = open_stream(&d, &[("Authorization", &auth)]);
    let mut s1 = open_stream(&d, &[("Cookie", &h(&ck1))]);
    let mut s2 = open_stream(&d, &[("Cookie", &h(&ck2))]);
    let mut s3 = open_stream(&d, &[("Cookie", &h(&ck3))]);
    let subscribers = || d.get("/api/v1/status", READ).json()["events"]["subscribers"].clone();
    assert_eq!(subscribers(), 4);
    // Revoking one session ends its stream only.
    let own = d
        .req("GET", "/api/v1/sessions", &[("Cookie", &h(&ck1))], b"")
        .expect(200)
        .json();
    let id1 = own["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["current"] == true)
        .and_then(|s| s["id"].as_str())
        .unwrap()
        .to_string();
    d.req(
        "DELETE",
        &format!("/api/v1/sessions/{id1}"),
        &[("Authorization", &auth)],
        b"",
    )
    .expect(200);
    wait_closed(&mut s1, "revoked session");
    // Logout ends the stream of the session that logged out.
    d.req(
        "POST",
        "/logout",
        &[("Cookie", &h(&ck2)), ("X-CSRF-Token", &csrf2)],
        b"",
    )
    .expect(200);
    wait_closed(&mut s2, "logged-out session");
    // Revoking all ends the rest; the Bearer stream stays.
    d.req(
        "DELETE",
        "/api/v1/sessions",
        &[("Authorization", &auth)],
        b"",
    )
    .expect(200);
    wait_closed(&mut s3, "revoke all");
    wait_until(10, "only the Bearer stream left", || {
        (subscribers() == 1).then_some(())
    });
    bearer_stream
        .stream
        .sock
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 64];
    use std::io::Read;
    match bearer_stream.stream.read(&mut buf) {
        Err(e) => assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "{e}"
        ),
        Ok(n) => panic!("the Bearer stream answered {n} bytes or closed"),
    }
}

#[test]
fn login_works_with_a_stale_cookie_a_live_one_and_over_the_limit() {
    let d = Daemon::start(
        "loginstale",
        "[webui.limits]\nauth_failures_per_minute = 3\n",
    );
    let ct = ("Content-Type", "application/x-www-form-urlencoded");
    let token = format!("token={ADMIN}");
    let stale = format!("svc_auth={}", "ab".repeat(32));
    let r = d.req(
        "POST",
        "/login",
        &[ct, ("Cookie", &stale)],
        token.as_bytes(),
    );
    assert_eq!(r.status, 303, "{}", r.text());
    assert_eq!(r.json(), json!({ "ok": true, "location": "/" }));
    assert_eq!(r.header("location"), Some("/"));
    // A live session cookie without a CSRF token does not stand in the way either.
    let (live, _) = login(&d, ADMIN);
    let r = d.req(
        "POST",
        "/login",
        &[ct, ("Cookie", &format!("svc_auth={live}"))],
        token.as_bytes(),
    );
    assert_eq!(r.status, 303, "{}", r.text());
    // Over the failure limit: failing attempts 429, a valid token still logs in.
    for _ in 0..3 {
        d.req("POST", "/login", &[ct], b"token=wrong-token-wrong-token")
            .expect(401);
    }
    d.req("POST", "/login", &[ct], b"token=wrong-token-wrong-token")
        .expect(429);
    d.get("/api/v1/status", "wrong-token-wrong-token")
        .expect(429);
    let r = d.req("POST", "/login", &[ct], token.as_bytes());
    assert_eq!(r.status, 303, "{}", r.text());
    let cookie = r.header("set-cookie").unwrap().to_string();
    assert!(cookie.starts_with("svc_auth="));
    // Form logout answers a redirect too: ok, not an error.
    let r = d.req("GET", "/", &[], b"");
    assert_eq!(r.json(), json!({ "ok": true, "location": "/login" }));
}

#[test]
fn numbers_must_be_canonical_digits() {
    let d = Daemon::start("numbers", QUIET);
    let auth = bearer(ADMIN);
    let json_ct = ("Content-Type", "application/json");
    let mut ids = Vec::new();
    for i in 0..5 {
        let v = d
            .req(
                "POST",
                "/api/v1/suppressions",
                &[("Authorization", &auth), json_ct],
                format!(r#"{{"check":"c{i}","reason":"r"}}"#).as_bytes(),
            )
            .expect(201)
            .json();
        ids.push(v["id"].as_i64().unwrap());
    }
    let five = ids[4];
    for bad in [
        format!("+{five}"),
        format!("0{five}"),
        format!("0000{five}"),
        "00005300".to_string(),
        format!("{five}%20"),
        "-1".to_string(),
        "abc".to_string(),
        "0x5".to_string(),
    ] {
        let r = d.req(
            "DELETE",
            &format!("/api/v1/suppressions/{bad}"),
            &[("Authorization", &auth)],
            b"",
        );
        r.expect(400);
        assert!(
            r.json()["error"].as_str().unwrap().starts_with("id:"),
            "{bad}"
        );
    }
    assert_eq!(d.get("/api/v1/suppressions", ADMIN).json()["total"], 5);
    d.req(
        "DELETE",
        &format!("/api/v1/suppressions/{five}"),
        &[("Authorization", &auth)],
        b"",
    )
    .expect(200);
    d.req(
        "DELETE",
        "/api/v1/suppressions/5300",
        &[("Authorization", &auth)],
        b"",
    )
    .expect(404);
    // Every numeric query parameter.
    for (route, param) in [
        ("/api/v1/history?", "limit"),
        ("/api/v1/history?", "offset"),
        ("/api/v1/audit?", "limit"),
        ("/api/v1/findings/enriched?", "limit"),
        ("/api/v1/incident?ip=203.0.113.9&", "hours"),
    ] {
        for bad in ["%2B5", "05", "%205", "5%20", "-5", "5.0", "%EF%BC%95"] {
            let path = format!("{route}{param}={bad}");
            let r = d.get(&path, ADMIN);
            r.expect(400);
            assert!(
                r.json()["error"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{param}:")),
                "{path}: {}",
                r.text()
            );
        }
        d.get(&format!("{route}{param}=5"), ADMIN).expect(200);
    }
}

#[test]
fn ipv4_mapped_addresses_find_the_ipv4_incident() {
    let dir = temp_dir("mapped");
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
    {
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        for i in 0..5 {
            writeln!(f, "Nov 21 10:00:0{i} web1 sshd[30{i}]: Failed password for root from 203.0.113.9 port 4100{i} ssh2").unwrap();
        }
    }
    let body = wait_until(20, "the incident of 203.0.113.9", || {
        let v = d
            .get("/api/v1/incident?ip=::ffff:203.0.113.9", ADMIN)
            .expect(200)
            .json();
        (v["total"] == 1 && v["incidents"].as_array().is_some_and(|a| a.len() == 1)).then_some(v)
    });
    assert_eq!(body["ip"], "203.0.113.9");
    let plain = d
        .get("/api/v1/incident?ip=203.0.113.9", ADMIN)
        .expect(200)
        .json();
    assert_eq!(plain["items"], body["items"]);
    // A suppression body's mapped address is stored as IPv4.
    let v = d
        .req(
            "POST",
            "/api/v1/suppressions",
            &[
                ("Authorization", &bearer(ADMIN)),
                ("Content-Type", "application/json"),
            ],
            br#"{"check":"ssh_bruteforce","ip":"::ffff:203.0.113.9","reason":"ours"}"#,
        )
        .expect(201)
        .json();
    assert_eq!(v["suppression"]["ip"], "203.0.113.9");
}

#[test]
fn suppression_bodies_are_bounded() {
    let d = Daemon::start("suppbody", QUIET);
    let auth = bearer(ADMIN);
    let hdrs = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    // Just under 1 MiB of unknown keys.
    let mut body = String::from("{");
    let mut i = 0u32;
    while body.len() < 1_040_000 {
        body.push_str(&format!("\"{i:x}\":0,"));
        i += 1;
    }
    body.push_str("\"check\":\"c\",\"reason\":\"r\"}");
    let r = d.req("POST", "/api/v1/suppressions", &hdrs, body.as_bytes());
    r.expect(400);
    assert!(r.body.len() < 4096, "{} bytes", r.body.len());
    let v = r.json();
    assert_eq!(v["errors"].as_array().unwrap().len(), 20);
    assert_eq!(v["errors_truncated"], true);
    assert_eq!(
        v["errors"][0],
        json!({ "field": "0", "message": "unknown field" })
    );
    // A structural problem stops the parse: one error, the body not echoed.
    let r = d.req(
        "POST",
        "/api/v1/suppressions",
        &hdrs,
        br#"{"check":"secret-looking-value" "reason":"r"}"#,
    );
    r.expect(400);
    let v = r.json();
    assert_eq!(v["errors"].as_array().unwrap().len(), 1);
    assert_eq!(v["errors"][0]["field"], "body");
    assert_eq!(v["errors_truncated"], false);
    assert!(!r.text().contains("secret-looking-value"));
    // Nothing was stored.
    assert_eq!(d.get("/api/v1/suppressions", ADMIN).json()["total"], 0);
}

/// Issue 23 item 9: 16 parallel 1 MiB bodies of `[],[],...` to `threat/block-ip` peaked
/// at 331 MB RSS (each became a ~20 MiB value before any route looked at it). Every JSON
/// body is now checked for depth and size before it is parsed: the bursts cost about
/// their own bytes, the refusals are counted, and the answer names no body content.
#[test]
fn block_ip_bodies_are_bounded_before_parsing() {
    let d = Daemon::start("blockbody", QUIET);
    let pid = d.pid();
    let auth = bearer(ADMIN);
    let mut body = String::from("{\"ips\":[");
    while body.len() < 1_048_000 {
        body.push_str("[],");
    }
    body.push_str("[]]}");
    let body = std::sync::Arc::new(body.into_bytes());
    d.get("/api/v1/status", ADMIN).expect(200);
    let idle = rss(pid);
    let (stop, sampler) = peak_rss_sampler(pid, Duration::from_millis(10));
    let (addr, cert) = (d.addr, d.cert());
    let clients: Vec<_> = (0..16)
        .map(|_| {
            let (body, cert, auth) = (body.clone(), cert.clone(), auth.clone());
            std::thread::spawn(move || {
                Client::connect(addr, cert).send(
                    "POST",
                    "/api/v1/threat/block-ip",
                    &[
                        ("Authorization", &auth),
                        ("Content-Type", "application/json"),
                    ],
                    &body,
                )
            })
        })
        .collect();
    for c in clients {
        let r = c.join().unwrap();
        r.expect(400);
        let e = r.json()["error"].as_str().unwrap().to_string();
        assert!(e.contains("more than 10000 elements"), "{e}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = sampler.join().unwrap();
    println!(
        "RESULT block_ip_16x1MiB rss_mib idle {:.1} peak {:.1}",
        mib(idle),
        mib(peak)
    );
    // The bodies themselves are 16 MiB; before the fix the peak rose by about 300 MiB.
    assert!(
        peak.saturating_sub(idle) < 96 * 1024 * 1024,
        "idle {:.1} MiB, peak {:.1} MiB",
        mib(idle),
        mib(peak)
    );
    // Too deep: refused before parsing too.
    let deep = format!("{{\"ips\":{}{}}}", "[".repeat(20), "]".repeat(20));
    let r = d.req(
        "POST",
        "/api/v1/threat/block-ip",
        &[("Authorization", &auth)],
        deep.as_bytes(),
    );
    r.expect(400);
    assert!(r.text().contains("deep"), "{}", r.text());
    let m = d.get("/metrics", METRICS).expect(200).text();
    assert!(
        m.contains("svc_api_body_refused_total{reason=\"elements\"} 16\n"),
        "{m}"
    );
    assert!(
        m.contains("svc_api_body_refused_total{reason=\"depth\"} 1\n"),
        "{m}"
    );
}

/// Issue 23 item 12: `{"ip":"5.5.5.7","ip":"8.8.8.8"}` acted on 8.8.8.8 (the last key).
/// Every route's body refuses a repeated key, at any depth, before acting.
#[test]
fn json_bodies_with_a_repeated_key_are_refused_on_every_route() {
    let d = Daemon::start("dupkeys", QUIET);
    let auth = bearer(ADMIN);
    for (path, body) in [
        (
            "/api/v1/threat/block-ip",
            r#"{"ip":"192.0.2.7","ip":"198.51.100.8"}"#,
        ),
        (
            "/api/v1/threat/whitelist-ip",
            r#"{"ip":"192.0.2.7","reason":"a","reason":"b"}"#,
        ),
        ("/api/v1/undo/run", r#"{"undo_token":"a","undo_token":"b"}"#),
        (
            "/api/v1/waf/rules/apply",
            r#"{"disabled":[1],"disabled":[]}"#,
        ),
        (
            "/api/v1/waf/rules/escalation",
            r#"{"rule_id":1,"escalation":true,"escalation":false}"#,
        ),
        (
            "/api/v1/firewall/allow-ip",
            r#"{"ip":"192.0.2.7","ip":"198.51.100.8"}"#,
        ),
        (
            "/api/v1/settings/firewall/tentative-apply",
            r#"{"changes":{"tcp_in":[22],"tcp_in":[]}}"#,
        ),
    ] {
        let r = d.req(
            "POST",
            path,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            body.as_bytes(),
        );
        r.expect(400);
        let e = r.json()["error"].as_str().unwrap().to_string();
        assert!(e.contains("duplicate key"), "{path}: {e}");
    }
    let m = d.get("/metrics", METRICS).expect(200).text();
    assert!(
        m.contains("svc_api_body_refused_total{reason=\"duplicate_key\"} 7\n"),
        "{m}"
    );
}

#[test]
fn capabilities_are_static_and_hardening_starts_no_work() {
    let mut d = Daemon::start("capsharden", QUIET);
    let caps = d.get("/api/v1/capabilities", READ).expect(200).json();
    let expected: Vec<Value> = svc::api::capabilities::CAPABILITIES
        .iter()
        .map(|c| json!(c))
        .collect();
    assert_eq!(caps["items"], json!(expected));
    assert_eq!(caps["capabilities"], json!(expected));
    assert_eq!(caps["total"], expected.len());
    assert!(expected.contains(&json!("events.sse.v1")));
    let status = d.get("/api/v1/status", READ).json();
    assert_eq!(status["capabilities"], json!(expected));
    let h = d.get("/api/v1/hardening", ADMIN).expect(200).json();
    assert_eq!(h["report"], Value::Null, "{h}");
    assert!(h["reason"].as_str().is_some_and(|r| !r.is_empty()), "{h}");
    d.get("/api/v1/hardening", READ).expect(403);
    stop_and_read_log(&mut d);
    let db = rusqlite::Connection::open(d.state.join("svc.db")).unwrap();
    let stored: i64 = db
        .query_row("SELECT count(*) FROM kv WHERE key = 'hardening'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(stored, 0, "the request ran no hardening audit");
    let jobs: i64 = db
        .query_row("SELECT count(*) FROM scan_jobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(jobs, 0);
}

#[test]
fn status_tells_not_running_from_not_responding() {
    let dir = temp_dir("ctlclient");
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let config = dir.join("svc.toml");
    std::fs::write(&config, base_config(&state)).unwrap();
    let run = |args: &[&str]| {
        let mut full = args.to_vec();
        full.extend(["-c", config.to_str().unwrap()]);
        std::process::Command::new(svc_bin())
            .args(&full)
            .output()
            .unwrap()
    };
    let out = run(&["status"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not running"), "{err}");
    // A socket that accepts (the kernel queues the connection) but never answers.
    let _listener = std::os::unix::net::UnixListener::bind(state.join("svc.sock")).unwrap();
    let out = run(&["status"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not responding"), "{err}");
    assert!(!err.contains("not running"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Resident set size of a process, bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Samples the daemon's RSS every `every` until the flag is set; the thread returns the
/// peak.
fn peak_rss_sampler(
    pid: u32,
    every: Duration,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<u64>,
) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let sampler = std::thread::spawn(move || {
        let mut peak = 0;
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            peak = peak.max(rss(pid));
            std::thread::sleep(every);
        }
        peak
    });
    (stop, sampler)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// Issue 9 item 3: 32 clients at once each POST a 1 MiB suppression body of ~110,000
/// unknown keys, five times over. Prints RSS idle, at the peak of the bursts and 10 s after;
/// requires RSS to come back near idle (within 10 s, to idle + 24 MiB) and every answer to
/// stay small. `SVC_MEM_DAEMON_ENV="K=V K=V"` passes environment to the daemon (allocator
/// tunables, for benches/api-memory.sh).
#[test]
#[ignore = "memory benchmark (about 30 s): run by .ci/run and benches/api-memory.sh"]
fn suppression_floods_do_not_keep_memory() {
    let env_spec = std::env::var("SVC_MEM_DAEMON_ENV").unwrap_or_default();
    let env: Vec<(&str, &str)> = env_spec
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let dir = temp_dir("memflood");
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(&config, format!("{}{QUIET}", base_config(&state))).unwrap();
    let d = Daemon::start_with(dir, config, state, &env);
    let pid = d.pid();
    let mut body = String::from("{");
    let mut keys = 0u32;
    while body.len() < 1_048_000 {
        body.push_str(&format!("\"{keys:x}\":0,"));
        keys += 1;
    }
    body.push_str("\"z\":0}");
    let body = std::sync::Arc::new(body.into_bytes());
    // Warm up: every route family once, then let the daemon settle.
    for p in ["/api/v1/status", "/api/v1/health", "/metrics"] {
        d.get(p, ADMIN).expect(200);
    }
    let auth = bearer(ADMIN);
    d.req(
        "POST",
        "/api/v1/suppressions",
        &[("Authorization", &auth)],
        &body,
    )
    .expect(400);
    std::thread::sleep(Duration::from_secs(2));
    let idle = rss(pid);
    let (stop, sampler) = peak_rss_sampler(pid, Duration::from_millis(20));
    let (addr, cert) = (d.addr, d.cert());
    let mut largest_answer = 0;
    for _round in 0..5 {
        let clients: Vec<_> = (0..32)
            .map(|_| {
                let (body, cert, auth) = (body.clone(), cert.clone(), auth.clone());
                std::thread::spawn(move || {
                    let mut c = Client::connect(addr, cert);
                    let r = c.send(
                        "POST",
                        "/api/v1/suppressions",
                        &[
                            ("Authorization", &auth),
                            ("Content-Type", "application/json"),
                        ],
                        &body,
                    );
                    assert_eq!(r.status, 400);
                    r.body.len()
                })
            })
            .collect();
        for c in clients {
            largest_answer = largest_answer.max(c.join().unwrap());
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = sampler.join().unwrap();
    let burst_end = std::time::Instant::now();
    let near_idle = idle + 24 * 1024 * 1024;
    // RSS once a second for 10 s after the bursts (the figure the issue asks for is the
    // last); the test waits on the clock here because the time is what is measured.
    let mut trail = Vec::new();
    for s in 1..=10u64 {
        std::thread::sleep(Duration::from_secs(s).saturating_sub(burst_end.elapsed()));
        trail.push(rss(pid));
    }
    let after10 = *trail.last().unwrap_or(&0);
    let back_at = trail.iter().position(|&r| r <= near_idle).map(|i| i + 1);
    println!(
        "RESULT keys_per_body {keys} body_bytes {} answer_bytes_max {largest_answer}",
        body.len()
    );
    println!(
        "RESULT rss_mib idle {:.1} peak_during_32x5 {:.1} after_10s {:.1} near_idle_after_s {} env [{env_spec}]",
        mib(idle),
        mib(peak),
        mib(after10),
        back_at.map_or("never".to_string(), |s| s.to_string()),
    );
    let trail: Vec<String> = trail.iter().map(|&r| format!("{:.1}", mib(r))).collect();
    println!("RESULT rss_mib_each_second_after {}", trail.join(" "));
    assert!(largest_answer < 4096, "{largest_answer}");
    assert!(
        after10 <= near_idle,
        "RSS {after10} stayed above {near_idle}"
    );
}
