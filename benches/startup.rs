//! Start-up to first successful `/api/v1/health`, and idle RSS, of the release binary.
//!
//! Run: `cargo bench --bench startup`. Goals: start to health under 150 ms, idle RSS at
//! most 15 MiB. Prints figures; asserts nothing (timing is noisy on shared machines).

#![allow(
    clippy::disallowed_methods,
    reason = "test and benchmark fixtures are built with plain std::fs calls, as an attacker would"
)]

#[allow(dead_code)] // the benchmark uses part of the test harness
#[path = "../tests/it/common/mod.rs"]
mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let dir = common::temp_dir("bench-startup");
    let state = dir.join("state");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        common::base_config(&state).replace("127.0.0.1:0", &format!("127.0.0.1:{port}")),
    )
    .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut samples = Vec::new();
    for run in 0..6 {
        let t0 = Instant::now();
        let mut child = Command::new(common::svc_bin())
            .args(["daemon", "-c", config.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut cert = None;
        let elapsed = loop {
            if t0.elapsed() > Duration::from_secs(10) {
                panic!("daemon did not answer within 10 s");
            }
            if cert.is_none() {
                cert = std::fs::read(state.join("tls/cert.pem"))
                    .ok()
                    .and_then(|pem| {
                        let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
                            .collect::<Result<_, _>>()
                            .ok()?;
                        certs.first().map(|c| c.as_ref().to_vec())
                    });
            }
            if let Some(c) = &cert {
                if std::net::TcpStream::connect(addr).is_ok() {
                    let mut client = common::Client::connect(addr, c.clone());
                    let r = client.send(
                        "GET",
                        "/api/v1/health",
                        &[("Authorization", &format!("Bearer {}", common::READ))],
                        b"",
                    );
                    if r.status == 200 {
                        break t0.elapsed();
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        std::thread::sleep(Duration::from_secs(1));
        let rss = rss_kib(child.id());
        let label = if run == 0 {
            "first start (generates TLS pair)"
        } else {
            "restart"
        };
        println!("run {run}: {label}: start to first /api/v1/health 200 = {:.1} ms; idle RSS = {:.1} MiB", elapsed.as_secs_f64() * 1e3, rss as f64 / 1024.0);
        if run > 0 {
            samples.push(elapsed.as_secs_f64() * 1e3);
        }
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let _ = child.wait();
    }
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "restart start-to-health median {:.1} ms (goal < 150 ms)",
        samples[samples.len() / 2]
    );
    let _ = std::fs::remove_dir_all(dir);
}
