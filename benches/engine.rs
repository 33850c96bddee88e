//! Findings ingest throughput (collector -> store) and detection latency (write -> finding).
//!
//! Run: `cargo bench --bench engine`. Goals: 50,000 findings/s with bounded memory; file
//! detection under 1 s; log-line detection under 2 s. Prints figures; asserts nothing.

#![allow(
    clippy::disallowed_methods,
    reason = "test and benchmark fixtures are built with plain std::fs calls, as an attacker would"
)]

#[allow(dead_code)] // the benchmark uses part of the test harness
#[path = "../tests/it/common/mod.rs"]
mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use svc::clock::SystemClock;
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

fn ingest(n: usize) {
    let dir = common::temp_dir("bench-ingest");
    let store = Store::open(&dir.join("svc.db")).unwrap();
    let registry = Registry::new();
    let clock = SystemClock::shared();
    let engine = Engine::new(clock.clone(), store.clone(), &registry, &dir).unwrap();
    engine.start().unwrap();
    let rss_before = status_kib("VmRSS:");
    let t0 = Instant::now();
    let now = jiff::Timestamp::now();
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
    assert!(engine.flush(Duration::from_secs(120)));
    let secs = t0.elapsed().as_secs_f64();
    let row = &registry.snapshot()["findings.ingest"];
    println!(
        "ingest: {n} findings collector->store in {secs:.2} s = {:.0} findings/s; dropped {}; active set {}; RSS {} -> {} KiB (peak {} KiB)",
        n as f64 / secs,
        row.dropped_total,
        engine.active_len(),
        rss_before,
        status_kib("VmRSS:"),
        status_kib("VmHWM:")
    );
    engine.shutdown();
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
    ingest(500_000);
    latency(30);
}
