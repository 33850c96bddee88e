//! The API must never slow the dispatcher: 50 API clients (findings pages, enriched pages,
//! status, history, suppression create and delete) run against a daemon holding 100,000
//! active findings while 2,000 findings/s arrive for 60 s.
//!
//! Run: `cargo bench --features bench --bench api-under-ingest`
//! (knobs: `SVC_BENCH_CLIENTS` 50, `SVC_BENCH_RATE` 2000, `SVC_BENCH_SECONDS` 60,
//! `SVC_BENCH_ACTIVE` 100000).
//!
//! The active set is seeded into the store before the daemon starts; findings then enter
//! through the control-socket command `bench.inject` (cargo feature `bench`), which submits
//! them to the real engine without waiting, so a dispatcher that falls behind shows as
//! refusals: losses on the `findings.ingest` row. The injected findings repeat the seeded
//! keys, so the set stays at its size. Each client is a real TLS keep-alive connection on
//! its own thread. Prints, per route group, requests, errors and latency percentiles, and
//! the ingest losses, history rows written, and the daemon's CPU and peak RSS.
//! Goals: 0 ingest losses; write-route (suppression create/delete) p99 under 50 ms.
//! Asserts nothing (timing is noisy on shared machines).

#![allow(
    clippy::disallowed_methods,
    reason = "benchmark fixtures use plain std::fs calls"
)]

#[allow(dead_code)] // the benchmark uses part of the test harness
#[path = "../tests/it/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds (user + system) used by process `pid` so far.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn status_kib(pid: &str, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A tiny xorshift generator (each client its own).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Latencies (ms) and errors of one route group.
#[derive(Default)]
struct Group {
    ms: Vec<f64>,
    errors: u64,
    bytes: u64,
}

fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// One client: mixed requests on one keep-alive connection until `stop`.
fn client(
    d: &common::Daemon,
    id: u64,
    active: u64,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<BTreeMap<&'static str, Group>> {
    let mut c = d.client();
    std::thread::spawn(move || {
        let read = format!("Bearer {}", common::READ);
        let admin = format!("Bearer {}", common::ADMIN);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (id + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
        let mut groups: BTreeMap<&'static str, Group> = BTreeMap::new();
        let mut mine: Vec<i64> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let roll = rng.below(100);
            let (group, method, path, body, auth): (&str, &str, String, String, &str) = match roll {
                0..=29 => (
                    "findings page",
                    "GET",
                    format!(
                        "/api/v1/findings?limit=100&offset={}",
                        rng.below(active) / 100 * 100
                    ),
                    String::new(),
                    &read,
                ),
                30..=39 => (
                    "enriched page",
                    "GET",
                    "/api/v1/findings/enriched?limit=100".to_string(),
                    String::new(),
                    &read,
                ),
                40..=44 => (
                    "enriched version",
                    "GET",
                    "/api/v1/findings/enriched?fields=version".to_string(),
                    String::new(),
                    &read,
                ),
                45..=64 => (
                    "status",
                    "GET",
                    "/api/v1/status".to_string(),
                    String::new(),
                    &read,
                ),
                65..=79 => {
                    let q = if rng.below(5) == 0 {
                        format!("&search=finding%20{}", rng.below(active))
                    } else {
                        String::new()
                    };
                    (
                        "history page",
                        "GET",
                        format!("/api/v1/history?limit=50{q}"),
                        String::new(),
                        &read,
                    )
                }
                80..=91 => (
                    "suppression create",
                    "POST",
                    "/api/v1/suppressions".to_string(),
                    json!({
                        "check": "bench_synthetic",
                        "message": format!("synthetic finding {}", rng.below(active)),
                        "reason": "benchmark rule",
                        "expires_hours": 1,
                    })
                    .to_string(),
                    &admin,
                ),
                _ => match mine.pop() {
                    Some(rule) => (
                        "suppression delete",
                        "DELETE",
                        format!("/api/v1/suppressions/{rule}"),
                        String::new(),
                        &admin,
                    ),
                    None => continue,
                },
            };
            let mut headers = vec![("Authorization", auth)];
            if method == "POST" {
                headers.push(("Content-Type", "application/json"));
            }
            let t0 = Instant::now();
            let r = c.send(method, &path, &headers, body.as_bytes());
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            let g = groups.entry(group).or_default();
            g.ms.push(ms);
            g.bytes += r.body.len() as u64;
            if !(200..300).contains(&r.status) {
                g.errors += 1;
                if g.errors <= 3 {
                    eprintln!("{method} {path}: {} {}", r.status, r.text());
                }
            } else if method == "POST" {
                if let Some(rule) = r.json()["id"].as_i64() {
                    mine.push(rule);
                }
            }
        }
        groups
    })
}

fn main() {
    let clients = env_u64("SVC_BENCH_CLIENTS", 50);
    let rate = env_u64("SVC_BENCH_RATE", 2_000);
    let seconds = env_u64("SVC_BENCH_SECONDS", 60);
    let active = env_u64("SVC_BENCH_ACTIVE", 100_000);
    let count = rate * seconds;
    let extra = format!(
        "[files]\nwatch = []\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[findings]\nmax_active = {}\n[webui.limits]\nmax_connections = 512\n",
        active * 2
    );
    let mut d = common::Daemon::start("bench-api-under-ingest", &extra);
    assert_eq!(d.stop(), 0);
    // Seed the active set while the daemon is stopped: the keys bench.inject repeats.
    let t = Instant::now();
    {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros() as i64;
        let db = rusqlite::Connection::open(d.state.join("svc.db")).unwrap();
        let tx = db.unchecked_transaction().unwrap();
        {
            let mut st = tx
                .prepare(
                    "INSERT INTO active_findings(check_name, message, severity, details, account, ip, path, first_seen, last_seen, count)
                     VALUES ('bench_synthetic', ?1, 0, 'seeded by the benchmark', NULL, NULL, ?2, ?3, ?3, 1)",
                )
                .unwrap();
            for i in 0..active {
                st.execute(rusqlite::params![
                    format!("synthetic finding {i}"),
                    format!("/var/www/bench/{i}.php"),
                    now - i as i64 * 1000
                ])
                .unwrap();
            }
        }
        tx.commit().unwrap();
    }
    println!(
        "seeded {active} active findings in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let d = common::Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), &[]);
    let pid = d.pid().to_string();
    let status0 = d.get("/api/v1/status", common::READ).json();
    let dropped0 = status0["queues"]["findings.ingest"]["dropped_total"]
        .as_u64()
        .unwrap_or(0);
    println!(
        "daemon pid {pid}: {} active findings, RSS {:.1} MiB",
        d.get("/api/v1/findings/enriched?fields=version", common::READ)
            .json()["total"],
        status_kib(&pid, "VmRSS:") as f64 / 1024.0
    );
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..clients)
        .map(|i| client(&d, i, active, stop.clone()))
        .collect();
    let cpu0 = cpu_seconds(&pid);
    let answer = svc::cli::control::request(
        &d.state.join("svc.sock"),
        "bench.inject",
        json!({ "count": count, "rate": rate, "distinct": active }),
        Duration::from_secs(5),
    )
    .expect("bench.inject (build with --features bench)");
    assert_eq!(answer["ok"], true, "{answer}");
    let t0 = Instant::now();
    println!(
        "injecting {count} findings at {rate}/s for {seconds} s while {clients} API clients run..."
    );
    let history = |d: &common::Daemon| {
        d.get(
            "/api/v1/history?checks=bench_synthetic&limit=1",
            common::READ,
        )
        .json()["total"]
            .as_u64()
            .unwrap_or(0)
    };
    // The injector submits for `seconds`; then wait until the dispatcher settled.
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    let results: Vec<BTreeMap<&str, Group>> =
        threads.into_iter().map(|t| t.join().unwrap()).collect();
    let wall = t0.elapsed();
    let cpu = cpu_seconds(&pid) - cpu0;
    let settle = Instant::now();
    let mut written = history(&d);
    let mut last = (written, Instant::now());
    while settle.elapsed() < Duration::from_secs(60) {
        let status = d.get("/api/v1/status", common::READ).json();
        let row = &status["queues"]["findings.ingest"];
        let dropped = row["dropped_total"].as_u64().unwrap_or(0) - dropped0;
        written = history(&d);
        if written + dropped >= count {
            break;
        }
        if written != last.0 {
            last = (written, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(5) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = d.get("/api/v1/status", common::READ).json();
    let row = &status["queues"]["findings.ingest"];
    let dropped = row["dropped_total"].as_u64().unwrap_or(0) - dropped0;

    let mut merged: BTreeMap<&str, Group> = BTreeMap::new();
    for r in results {
        for (k, g) in r {
            let m = merged.entry(k).or_default();
            m.ms.extend(g.ms);
            m.errors += g.errors;
            m.bytes += g.bytes;
        }
    }
    println!(
        "{:<20} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "route group", "requests", "errors", "p50 ms", "p95 ms", "p99 ms", "max ms", "MB"
    );
    let mut writes: Vec<f64> = Vec::new();
    for (k, g) in merged.iter_mut() {
        g.ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
        if k.starts_with("suppression") {
            writes.extend(g.ms.iter().copied());
        }
        println!(
            "{:<20} {:>8} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            k,
            g.ms.len(),
            g.errors,
            percentile(&g.ms, 0.5),
            percentile(&g.ms, 0.95),
            percentile(&g.ms, 0.99),
            percentile(&g.ms, 1.0),
            g.bytes as f64 / 1e6
        );
    }
    writes.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let total: usize = merged.values().map(|g| g.ms.len()).sum();
    println!(
        "write routes (suppression create + delete): {} requests, p50 {:.1} ms, p99 {:.1} ms (goal < 50 ms)",
        writes.len(),
        percentile(&writes, 0.5),
        percentile(&writes, 0.99)
    );
    println!(
        "ingest: {count} injected at {rate}/s; findings.ingest losses {dropped} (goal 0); history rows written {written}; active now {}; {total} API requests in {:.1} s ({:.0}/s)",
        d.get("/api/v1/findings/enriched?fields=version", common::READ)
            .json()["total"],
        wall.as_secs_f64(),
        total as f64 / wall.as_secs_f64()
    );
    println!(
        "daemon: {:.1} CPU s during the run, peak RSS {:.1} MiB, RSS now {:.1} MiB (2 cores shared with the clients and other work)",
        cpu,
        status_kib(&pid, "VmHWM:") as f64 / 1024.0,
        status_kib(&pid, "VmRSS:") as f64 / 1024.0
    );
}
