//! Findings ingest and the active set through the real binary: paged findings routes with
//! their envelope and limits, the bound of the active set (evictions counted as losses,
//! counts from history unchanged), and suppressions created while findings stream in.

use crate::common::*;

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// Starts a daemon tailing `{dir}/auth.log` with `extra` TOML appended.
fn start(tag: &str, extra: &str) -> (Daemon, PathBuf) {
    let dir = temp_dir(tag);
    let log = dir.join("auth.log");
    std::fs::write(&log, "").unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let toml = format!(
        "{}[logs]\nauth = [{log:?}]\n[files]\nwatch = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[thresholds]\nauth_failures = 5\n{extra}",
        base_config(&state),
        log = log.display().to_string()
    );
    std::fs::write(&config, toml).unwrap();
    (Daemon::start_with(dir, config, state, &[]), log)
}

/// Five failed logins from `ip`: one `ssh_bruteforce` finding.
fn attack(ip: &str) -> String {
    (0..5)
        .map(|i| {
            format!("Nov 21 10:00:0{i} web1 sshd[{}]: Failed password for root from {ip} port {} ssh2\n", 4000 + i, 50000 + i)
        })
        .collect()
}

fn append(log: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// `n` distinct documentation addresses.
fn addresses(n: usize) -> Vec<String> {
    let nets = ["192.0.2", "198.51.100", "203.0.113"];
    (0..n)
        .map(|i| format!("{}.{}", nets[i / 250], 1 + i % 250))
        .collect()
}

fn items(v: &Value) -> &Vec<Value> {
    v["items"].as_array().expect("items is a list")
}

fn history_total(d: &Daemon, check: &str) -> u64 {
    d.get(&format!("/api/v1/history?checks={check}&limit=1"), READ)
        .expect(200)
        .json()["total"]
        .as_u64()
        .unwrap()
}

fn ingest_row(d: &Daemon) -> Value {
    d.get("/api/v1/status", READ).expect(200).json()["queues"]["findings.ingest"].clone()
}

fn post_json(d: &Daemon, path: &str, body: &str) -> Resp {
    let auth = format!("Bearer {ADMIN}");
    d.req(
        "POST",
        path,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        body.as_bytes(),
    )
}

#[test]
fn findings_routes_page_with_the_envelope_and_refuse_oversized_limits() {
    let (mut d, _log) = start("ingest-paging", "");
    assert_eq!(d.stop(), 0);
    // 2,500 active findings of three severities and many ages, written while stopped.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64;
    {
        let db = rusqlite::Connection::open(d.state.join("svc.db")).unwrap();
        let tx = db.unchecked_transaction().unwrap();
        for i in 0..2500i64 {
            let check = ["seed_a", "seed_b"][(i % 2) as usize];
            tx.execute(
                "INSERT INTO active_findings(check_name, message, severity, details, account, ip, path, first_seen, last_seen, count)
                 VALUES (?1, ?2, ?3, 'd', NULL, NULL, NULL, ?4, ?4, 1)",
                rusqlite::params![check, format!("m{i:04}"), i % 3, now - (i % 97) * 1_000_000],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let d = Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), &[]);
    for route in ["/api/v1/findings", "/api/v1/findings/enriched"] {
        let first = d.get(route, READ).expect(200).json();
        assert_eq!(items(&first).len(), 1000, "{route}: the default page");
        assert_eq!(first["total"], 2500);
        assert_eq!(
            (first["offset"].as_u64(), first["limit"].as_u64()),
            (Some(0), Some(1000))
        );
        assert_eq!(first["truncated"], true);
        // Pages of 700 put together give every finding once, in order.
        let mut all: Vec<Value> = Vec::new();
        for offset in (0..2500).step_by(700) {
            let p = d
                .get(&format!("{route}?limit=700&offset={offset}"), READ)
                .expect(200)
                .json();
            assert_eq!(p["offset"], offset);
            assert_eq!(p["limit"], 700);
            assert_eq!(p["total"], 2500);
            assert_eq!(p["truncated"], offset + 700 < 2500, "{route} {offset}");
            all.extend(items(&p).iter().cloned());
        }
        assert_eq!(all.len(), 2500);
        let keys: HashSet<String> = all.iter().map(|f| f["message"].to_string()).collect();
        assert_eq!(keys.len(), 2500, "{route}: no finding twice");
        let level = |f: &Value| match f["severity"].as_str().unwrap() {
            "CRITICAL" => 2,
            "HIGH" => 1,
            _ => 0,
        };
        for w in all.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            assert!(
                level(a) > level(b)
                    || (level(a) == level(b) && a["last_seen"].as_str() >= b["last_seen"].as_str()),
                "{route}: severity then newest: {a} before {b}"
            );
        }
        assert_eq!(
            items(&first)[..],
            all[..1000],
            "{route}: the first page is the start"
        );
        // Past the end: an empty page.
        let past = d
            .get(&format!("{route}?offset=5000"), READ)
            .expect(200)
            .json();
        assert!(items(&past).is_empty());
        assert_eq!(
            (past["total"].as_u64(), past["truncated"].as_bool()),
            (Some(2500), Some(false))
        );
        // The largest page is accepted; larger is a clear 400.
        let max = d
            .get(&format!("{route}?limit=10000"), READ)
            .expect(200)
            .json();
        assert_eq!(items(&max).len(), 2500);
        assert_eq!(max["truncated"], false);
        for (bad, param) in [
            ("limit=10001", "limit"),
            ("limit=0", "limit"),
            ("limit=x", "limit"),
            ("offset=-1", "offset"),
            ("offset=1.5", "offset"),
        ] {
            let r = d.get(&format!("{route}?{bad}"), READ);
            r.expect(400);
            let e = r.json()["error"].as_str().unwrap().to_string();
            assert!(e.contains(param), "{route}?{bad}: {e}");
        }
        let e = d.get(&format!("{route}?limit=20000"), READ).json()["error"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(e.contains("10000"), "the error names the maximum: {e}");
    }
    // Enriched: counts cover every row, not the page.
    let e = d
        .get("/api/v1/findings/enriched?limit=5", READ)
        .expect(200)
        .json();
    assert_eq!(items(&e).len(), 5);
    let sc = &e["severity_counts"];
    assert_eq!(
        sc["critical"].as_u64().unwrap()
            + sc["high"].as_u64().unwrap()
            + sc["warning"].as_u64().unwrap(),
        2500
    );
    assert_eq!(e["check_types"]["seed_a"]["count"], 1250);
    assert_eq!(e["check_types"]["seed_b"]["severity"], "CRITICAL");
    assert!(items(&e).iter().all(|f| f["severity"] == "CRITICAL"));
    let v = d
        .get("/api/v1/findings/enriched?fields=version", READ)
        .expect(200)
        .json();
    assert_eq!(v.as_object().unwrap().len(), 2);
    assert_eq!(v["total"], 2500);
}

#[test]
fn the_active_set_is_bounded_and_what_leaves_is_counted() {
    let (d, log) = start("ingest-bound", "[findings]\nmax_active = 10\n");
    let ips = addresses(15);
    for ip in &ips {
        append(&log, &attack(ip));
    }
    wait_until(30, "15 findings in history", || {
        (history_total(&d, "ssh_bruteforce") == 15).then_some(())
    });
    let f = d.get("/api/v1/findings", READ).expect(200).json();
    assert_eq!(f["total"], 10, "{f}");
    // The most recent stay (the tailer dispatches in file order).
    let shown: HashSet<&str> = items(&f)
        .iter()
        .map(|f| f["ip"].as_str().unwrap())
        .collect();
    assert!(shown.contains(ips[14].as_str()), "{shown:?}");
    assert!(!shown.contains(ips[0].as_str()), "{shown:?}");
    let row = ingest_row(&d);
    assert_eq!(row["dropped_total"], 5, "{row}");
    let s = d.get("/api/v1/status", READ).expect(200).json();
    assert_eq!(
        s["severity_counts"]["high"], 10,
        "status counts the active set"
    );
    // Counts from history still see every finding.
    let stats = d.get("/api/v1/stats", READ).expect(200).json();
    assert_eq!(stats["severity_counts"]["high"], 15, "{stats}");
    assert_eq!(
        d.get("/api/v1/findings/enriched?fields=version", READ)
            .json()["total"],
        10
    );
}

#[test]
fn suppressions_created_while_findings_arrive_lose_nothing() {
    let (d, log) = start("ingest-suppress", "");
    let ips = addresses(600);
    let suppressed: Vec<&String> = ips.iter().step_by(30).collect();
    let writer = {
        let (log, ips) = (log.clone(), ips.clone());
        std::thread::spawn(move || {
            for chunk in ips.chunks(20) {
                let text: String = chunk.iter().map(|ip| attack(ip)).collect();
                append(&log, &text);
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        })
    };
    for ip in &suppressed {
        let r = post_json(
            &d,
            "/api/v1/suppressions",
            &format!(r#"{{"check":"ssh_bruteforce","ip":"{ip}","reason":"our scanner"}}"#),
        );
        r.expect(201);
    }
    writer.join().unwrap();
    wait_until(60, "600 findings in history", || {
        (history_total(&d, "ssh_bruteforce") == 600).then_some(())
    });
    let row = ingest_row(&d);
    assert_eq!(row["dropped_total"], 0, "{row}");
    let f = d
        .get("/api/v1/findings?limit=10000", READ)
        .expect(200)
        .json();
    let shown: HashSet<&str> = items(&f)
        .iter()
        .map(|f| f["ip"].as_str().unwrap())
        .collect();
    for ip in &suppressed {
        assert!(!shown.contains(ip.as_str()), "{ip} is suppressed");
    }
    assert_eq!(f["total"], 600 - suppressed.len() as u64);
}
