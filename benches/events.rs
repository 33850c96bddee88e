//! Event-stream fan-out through the real pipeline: N SSE subscribers (default 32) while the
//! daemon dispatches synthetic findings at a target rate (default 10,000/s for 10 s).
//!
//! Run: `cargo bench --features bench --bench events`
//! (knobs: `SVC_BENCH_SUBSCRIBERS`, `SVC_BENCH_RATE`, `SVC_BENCH_SECONDS`).
//!
//! Findings enter through the control-socket command `bench.inject` (cargo feature `bench`
//! only), which submits them to the real engine: ingest queue, dispatcher, store commit,
//! active set, then the event bus and every subscriber's TLS stream. Each subscriber is a
//! real TLS client on its own thread that parses the stream and checks event ids for gaps.
//! Prints per-subscriber received rate and losses, and the daemon's `events.deliveries` and
//! `findings.ingest` rows. Asserts nothing (timing is noisy on shared machines).

#![allow(
    clippy::disallowed_methods,
    reason = "test and benchmark fixtures are built with plain std::fs calls, as an attacker would"
)]

#[allow(dead_code)] // the benchmark uses part of the test harness
#[path = "../tests/it/common/mod.rs"]
mod common;

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

/// CPU seconds (user + system) used by process `pid` so far.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 (1-based), i.e. 11 and 12 after the state field.
    (ticks(11) + ticks(12)) / 100.0
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What one subscriber saw.
#[derive(Default)]
struct Seen {
    events: u64,
    first_id: u64,
    last_id: u64,
    /// Ids skipped between consecutive events (findings this subscriber lost).
    gaps: u64,
    /// (first lost id, how many) of each gap, the first 64.
    gap_list: Vec<(u64, u64)>,
    first_at: Option<Instant>,
    last_at: Option<Instant>,
    bytes: u64,
}

impl Seen {
    fn line(&mut self, line: &[u8]) {
        if let Some(id) = line.strip_prefix(b"id: ") {
            let id: u64 = std::str::from_utf8(id)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if self.events > 0 && id > self.last_id + 1 {
                self.gaps += id - self.last_id - 1;
                if self.gap_list.len() < 64 {
                    self.gap_list
                        .push((self.last_id + 1, id - self.last_id - 1));
                }
            }
            if self.events == 0 {
                self.first_id = id;
                self.first_at = Some(Instant::now());
            }
            self.last_id = id;
            self.last_at = Some(Instant::now());
            self.events += 1;
        }
    }
}

fn subscriber(
    d: &common::Daemon,
    live: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Seen> {
    let mut c = d.client();
    let auth = format!("Bearer {}", common::READ);
    c.write_request("GET", "/api/v1/events", &[("Authorization", &auth)], b"");
    let head = c.read_head();
    assert_eq!(head.status, 200, "subscribe");
    std::thread::spawn(move || {
        let _ = c
            .stream
            .sock
            .set_read_timeout(Some(Duration::from_millis(200)));
        let mut seen = Seen::default();
        let mut buf = vec![0u8; 64 * 1024];
        let mut partial: Vec<u8> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let n = match c.stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    continue
                }
                Err(_) => break,
            };
            seen.bytes += n as u64;
            partial.extend_from_slice(&buf[..n]);
            let mut start = 0;
            while let Some(pos) = memchr::memchr(b'\n', &partial[start..]) {
                let before = seen.events;
                seen.line(&partial[start..start + pos]);
                if seen.events > before {
                    live.fetch_add(1, Ordering::Relaxed);
                }
                start += pos + 1;
            }
            partial.drain(..start);
        }
        seen
    })
}

fn main() {
    let subscribers = env_u64("SVC_BENCH_SUBSCRIBERS", 32) as usize;
    let rate = env_u64("SVC_BENCH_RATE", 10_000);
    let seconds = env_u64("SVC_BENCH_SECONDS", 10);
    let count = rate * seconds;
    let d = common::Daemon::start(
        "bench-events",
        &format!(
            "[files]\nwatch = []\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[webui.limits]\nmax_sse_subscribers = {}\n",
            subscribers.max(1)
        ),
    );
    let live = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..subscribers)
        .map(|_| subscriber(&d, live.clone(), stop.clone()))
        .collect();
    let sock = d.state.join("svc.sock");
    let answer = svc::cli::control::request(
        &sock,
        "bench.inject",
        json!({ "count": count, "rate": rate, "distinct": 1000 }),
        Duration::from_secs(5),
    )
    .expect("bench.inject (build with --features bench)");
    assert_eq!(answer["ok"], true, "{answer}");
    let t0 = Instant::now();
    let daemon_pid = d.pid().to_string();
    let cpu0 = (cpu_seconds(&daemon_pid), cpu_seconds("self"));
    println!(
        "injecting {count} findings at {rate}/s to {subscribers} subscribers ({seconds} s)..."
    );
    // Wait until every subscriber has everything, or nothing moves for 5 s.
    let expected = count * subscribers as u64;
    let mut last = (0, Instant::now());
    loop {
        let now = live.load(Ordering::Relaxed);
        if now >= expected {
            break;
        }
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(5)
            && t0.elapsed() > Duration::from_secs(seconds)
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let wall = t0.elapsed();
    let cpu = (
        cpu_seconds(&daemon_pid) - cpu0.0,
        cpu_seconds("self") - cpu0.1,
    );
    let status = d.get("/api/v1/status", common::READ).json();
    let health = d.get("/api/v1/health", common::READ).json();
    stop.store(true, Ordering::Relaxed);
    let seen: Vec<Seen> = threads.into_iter().map(|t| t.join().unwrap()).collect();

    let mut rates = Vec::new();
    let mut total_lost = 0u64;
    for (i, s) in seen.iter().enumerate() {
        let span = match (s.first_at, s.last_at) {
            (Some(a), Some(b)) if b > a => (b - a).as_secs_f64(),
            _ => f64::NAN,
        };
        let rate_seen = s.events as f64 / span;
        let lost = count.saturating_sub(s.events);
        total_lost += lost;
        rates.push(rate_seen);
        println!(
            "subscriber {i:2}: received {:>7} of {count} ({:.0}/s over {:.2} s), id gaps {}, lost {lost}, {:.1} MB",
            s.events,
            rate_seen,
            span,
            s.gaps,
            s.bytes as f64 / 1e6
        );
    }
    if std::env::var_os("SVC_BENCH_GAPS").is_some() {
        for (i, s) in seen.iter().enumerate().take(4) {
            println!("subscriber {i} gaps (first id, length): {:?}", s.gap_list);
        }
    }
    rates.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let ingest = &status["queues"]["findings.ingest"];
    let deliveries = &status["queues"]["events.deliveries"];
    println!(
        "dispatched {} findings; findings.ingest dropped_total {}; events.deliveries dropped_total {}",
        health["engines"]["findings"]["dispatched_total"],
        ingest["dropped_total"],
        deliveries["dropped_total"]
    );
    println!(
        "per-subscriber received rate: min {:.0}/s, median {:.0}/s, max {:.0}/s; total lost {total_lost} of {expected} deliveries; wall {:.2} s",
        rates.first().copied().unwrap_or(0.0),
        rates.get(rates.len() / 2).copied().unwrap_or(0.0),
        rates.last().copied().unwrap_or(0.0),
        wall.as_secs_f64()
    );
    println!(
        "CPU during the run: daemon {:.1} s, benchmark clients {:.1} s (2 cores shared)",
        cpu.0, cpu.1
    );
}
