//! Findings ingest throughput (collector -> store) and detection latency (write -> finding).
//!
//! Run: `cargo bench --bench engine` (`-- ingest` or `-- latency` runs one part;
//! `SVC_BENCH_FINDINGS` sets the number of findings, default 500,000).
//!
//! Ingest: collectors' findings through `findings.ingest`, the dispatcher, the store commit
//! (history rows, day counts, active rows) and the active set, with the event bus (one
//! subscriber draining its stream) and the alert budget (a webhook to a closed loopback
//! port) attached as in the daemon. Prints findings/s, CPU seconds per million findings, peak
//! RSS, and how long the search index took to catch up after the last commit. Goal: 100,000
//! findings/s, peak RSS under 40 MiB. Latency: file detection under 1 s; log-line detection
//! under 2 s. Prints figures; asserts nothing.

#![allow(
    clippy::disallowed_methods,
    reason = "test and benchmark fixtures are built with plain std::fs calls, as an attacker would"
)]

#[allow(dead_code)] // the benchmark uses part of the test harness
#[path = "../tests/it/common/mod.rs"]
mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use svc::alerts::Alerts;
use svc::clock::SystemClock;
use svc::config::alerts::{AlertsConfig, WebhookConfig};
use svc::events::EventBus;
use svc::findings::{Engine, Finding, Ingest, Severity};
use svc::queue::Registry;
use svc::store::Store;

fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU seconds (user + system) this process used so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn ingest(n: usize) {
    let dir = common::temp_dir("bench-ingest");
    let store = Store::open(&dir.join("svc.db")).unwrap();
    let registry = Registry::new();
    let clock = SystemClock::shared();
    let engine = Engine::new(clock.clone(), store.clone(), &registry, &dir).unwrap();
    // The event bus with one subscriber that writes its stream to nowhere.
    let bus = EventBus::new(clock.clone(), &registry, 64).unwrap();
    engine.subscribe(bus.listener());
    let sub = bus.subscribe().unwrap();
    let streamer = std::thread::spawn(move || {
        let mut sink = std::io::sink();
        let _ = sub.run(&mut sink, "bench");
    });
    // The alert budget, its notifier pointed at a closed loopback port.
    let alerts = Alerts::start(
        &AlertsConfig {
            webhook: Some(WebhookConfig {
                url: "http://127.0.0.1:9/bench".into(),
                timeout_seconds: 1,
                max_attempts: 1,
            }),
            ..AlertsConfig::default()
        },
        clock.clone(),
        store.clone(),
        &registry,
    )
    .unwrap();
    engine.subscribe(alerts.listener());
    engine.start().unwrap();
    let rss_before = status_kib("VmRSS:");
    let now = jiff::Timestamp::now();
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    for i in 0..n {
        let ip = format!("203.0.{}.{}", (i / 256) % 4, i % 256);
        let f = Finding::new(
            "ssh_bruteforce",
            Severity::High,
            format!("SSH brute force from {ip}"),
            now,
        )
        .with_ip(ip.parse().unwrap())
        .with_details("5 failed logins within 600 s");
        // Block when the queue is full: this measures the dispatcher, not refusals.
        assert!(engine.submit_wait(Ingest::Finding(Box::new(f)), Duration::from_secs(30)));
    }
    assert!(engine.flush(Duration::from_secs(300)));
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let rss_peak = status_kib("VmHWM:");
    let row = &registry.snapshot()["findings.ingest"];
    let events = &registry.snapshot()["events.deliveries"];
    println!(
        "ingest: {n} findings collector->store+active set in {secs:.2} s = {:.0} findings/s ({:.2} CPU s per million findings, {:.0} findings per CPU second); dropped {}; active set {}; RSS {} -> {} KiB (peak {} KiB)",
        n as f64 / secs,
        cpu / n as f64 * 1e6,
        n as f64 / cpu,
        row.dropped_total,
        engine.active_len(),
        rss_before,
        status_kib("VmRSS:"),
        rss_peak,
    );
    println!(
        "  event bus: {} published, {} delivered to the subscriber, {} lost to its full buffer; alerts: {} selected, {} sent, {} held back",
        bus.counters().published.load(std::sync::atomic::Ordering::Relaxed),
        bus.counters().delivered.load(std::sync::atomic::Ordering::Relaxed),
        events.dropped_total,
        alerts.counters().selected.load(std::sync::atomic::Ordering::Relaxed),
        alerts.counters().sent.load(std::sync::atomic::Ordering::Relaxed),
        alerts.counters().held_back.load(std::sync::atomic::Ordering::Relaxed),
    );
    let t1 = Instant::now();
    while store.health().search_index_backlog > 0 && t1.elapsed() < Duration::from_secs(600) {
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "  search index caught up {:.2} s after the last commit (backlog {} rows)",
        t1.elapsed().as_secs_f64(),
        store.health().search_index_backlog
    );
    engine.shutdown();
    bus.close();
    let _ = streamer.join();
    alerts.shutdown(Duration::from_secs(1));
    store.close();
    let _ = std::fs::remove_dir_all(dir);
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn latency(samples: usize) {
    let dir = common::temp_dir("bench-latency");
    std::fs::create_dir_all(dir.join("www")).unwrap();
    let log = dir.join("auth.log");
    std::fs::write(&log, "").unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let extra = format!(
        "[files]\nwatch = [{:?}]\n[logs]\nauth = [{:?}]\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n",
        dir.join("www").display().to_string(),
        log.display().to_string()
    );
    std::fs::write(&config, format!("{}{extra}", common::base_config(&state))).unwrap();
    let d = common::Daemon::start_with(dir.clone(), config, state, &[]);
    let mut client = d.client();
    let auth = format!("Bearer {}", common::READ);
    let mut wait = |pred: &dyn Fn(&serde_json::Value) -> bool| -> f64 {
        let t0 = Instant::now();
        loop {
            let v = client
                .send("GET", "/api/v1/findings", &[("Authorization", &auth)], b"")
                .json();
            if v["items"].as_array().unwrap().iter().any(pred) {
                return t0.elapsed().as_secs_f64() * 1e3;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "no finding within 10 s"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    let mut file_ms = Vec::new();
    let mut log_ms = Vec::new();
    for i in 0..samples {
        let path = dir.join(format!("www/shell{i}.php"));
        std::fs::write(&path, "<?php @eval($_POST['x']); ?>").unwrap();
        let p = path.display().to_string();
        file_ms.push(wait(&|f| f["path"] == p.as_str()));
        let ip = format!("192.0.2.{}", i + 1);
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        for k in 0..5 {
            writeln!(f, "Nov 21 10:00:0{k} h sshd[9{k}]: Failed password for root from {ip} port 4{k}000 ssh2").unwrap();
        }
        drop(f);
        log_ms.push(wait(&|f| f["ip"] == ip.as_str()));
    }
    println!(
        "detection latency over {samples} samples: file write->finding p50 {:.0} ms p95 {:.0} ms max {:.0} ms; log line->finding p50 {:.0} ms p95 {:.0} ms max {:.0} ms",
        percentile(&mut file_ms, 0.5),
        percentile(&mut file_ms, 0.95),
        percentile(&mut file_ms, 1.0),
        percentile(&mut log_ms, 0.5),
        percentile(&mut log_ms, 0.95),
        percentile(&mut log_ms, 1.0),
    );
}

fn main() {
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let run = |part: &str| only.is_empty() || only.iter().any(|a| a == part);
    if run("ingest") {
        let n = std::env::var("SVC_BENCH_FINDINGS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(500_000);
        ingest(n);
    }
    if run("latency") {
        latency(30);
    }
}
