//! Throughput of the authentication-log detector on one core.
//!
//! Generates a 1,000,000-line auth log with a realistic mix (about 60% CRON / systemd /
//! sudo / kernel noise; sshd failures, invalid users, preauth closes and logins; PAM;
//! Dovecot), writes it to a file, then measures:
//! - `e2e`: FileSource reading the file from its start + parse + detect (the production path);
//! - `parse+detect`: the same lines from memory;
//! - `parse`: the parser alone; `noise`: the parser on CRON/systemd/sudo/kernel lines that
//!   are not PAM messages (ns/line, contiguous text).
//!
//! `AUTHLOG_BENCH_FILE=/path` keeps the generated file there (used by
//! `benches/authlog-vs-fail2ban.sh`); otherwise it goes to a private temp directory that is
//! removed afterwards. `AUTHLOG_BENCH_LINES` changes the line count.
//! Run: `cargo bench --bench authlog`.

#![allow(
    clippy::disallowed_methods,
    reason = "test and benchmark fixtures are built with plain std::fs calls, as an attacker would"
)]

use svc::clock::SystemClock;
use svc::watch::authlog::{parse_line, AuthDetector, AuthThresholds};
use svc::watch::tail::FileSource;

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

#[path = "authlog/lines.rs"]
mod lines;
use lines::{line, Rng};

/// On-CPU seconds of the calling thread (`/proc/thread-self/schedstat`): unlike wall time,
/// not inflated when other processes share the cores.
fn thread_cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map(|ns| ns / 1e9)
        .unwrap_or(f64::NAN)
}

/// Measures wall and thread-CPU time of `f`.
struct Timer(Instant, f64);

impl Timer {
    fn start() -> Timer {
        Timer(Instant::now(), thread_cpu())
    }
    /// (wall seconds, CPU seconds).
    fn stop(&self) -> (f64, f64) {
        (self.0.elapsed().as_secs_f64(), thread_cpu() - self.1)
    }
}

fn per_sec(n: usize, secs: f64) -> f64 {
    n as f64 / secs.max(1e-9)
}

fn main() {
    let n: u64 = std::env::var("AUTHLOG_BENCH_LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let (path, keep) = match std::env::var_os("AUTHLOG_BENCH_FILE") {
        Some(p) => (PathBuf::from(p), true),
        None => {
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("authlog-bench-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("bench dir");
            (dir.join("auth.log"), false)
        }
    };

    // Generate.
    let mut r = Rng(0x5EED_1234_ABCD_0001);
    let mut buf = String::new();
    let mut text = String::with_capacity(n as usize * 120);
    let mut noise_lines = Vec::new();
    let mut noise_total = 0usize;
    for i in 0..n {
        if line(&mut r, i, &mut buf) {
            noise_total += 1;
            if noise_lines.len() < 200_000 {
                noise_lines.push(buf.clone());
            }
        }
        text.push_str(&buf);
        text.push('\n');
    }
    let mut f = std::fs::File::create(&path).expect("create bench file");
    f.write_all(text.as_bytes()).expect("write bench file");
    f.sync_all().ok();
    drop(f);
    let lines: Vec<&str> = text.lines().collect();
    // Noise lines that are not PAM session lines (those parse into SessionOpened events).
    let noise_lines: Vec<String> = noise_lines
        .into_iter()
        .filter(|l| !l.contains("pam_unix"))
        .collect();
    let noise_text = noise_lines.join("\n");
    let noise_refs: Vec<&str> = noise_text.split('\n').collect();
    println!(
        "generated {} lines ({:.1} MB), {:.1}% noise, file {}",
        lines.len(),
        text.len() as f64 / 1e6,
        100.0 * noise_total as f64 / lines.len().max(1) as f64,
        path.display()
    );

    let th = AuthThresholds::default();
    let runs = 3;
    let mut best = [f64::MAX; 4];
    let mut best_cpu = [f64::MAX; 4];
    let mut findings = 0usize;
    let mut events = 0usize;
    let nl = lines.len();
    for _ in 0..runs {
        // e2e: file -> tailer -> parse -> detect.
        let t0 = Timer::start();
        let mut tailer = FileSource::from_start(&path);
        let mut det = AuthDetector::new(th.clone(), SystemClock::shared());
        let mut count = 0usize;
        let mut fnd = 0usize;
        loop {
            let st = tailer
                .poll_with(&mut |l| {
                    count += 1;
                    det.process_line(l, &mut |_| fnd += 1);
                    std::ops::ControlFlow::Continue(())
                })
                .expect("poll");
            if !st.more {
                break;
            }
        }
        let (w, c) = t0.stop();
        best[0] = best[0].min(w);
        best_cpu[0] = best_cpu[0].min(c);
        assert_eq!(count, lines.len());
        findings = fnd;

        // parse+detect from memory.
        let t0 = Timer::start();
        let mut det = AuthDetector::new(th.clone(), SystemClock::shared());
        let mut ev = 0usize;
        for l in &lines {
            if det.process_line(l, &mut |_| {}) {
                ev += 1;
            }
        }
        let (w, c) = t0.stop();
        best[1] = best[1].min(w);
        best_cpu[1] = best_cpu[1].min(c);
        events = ev;

        // parse only.
        let t0 = Timer::start();
        let mut k = 0usize;
        for l in &lines {
            if let Some(e) = parse_line(std::hint::black_box(l)) {
                k += e.attempts as usize;
            }
        }
        std::hint::black_box(k);
        let (w, c) = t0.stop();
        best[2] = best[2].min(w);
        best_cpu[2] = best_cpu[2].min(c);

        // noise rejection, on contiguous text like the tailer's read buffer.
        let t0 = Timer::start();
        let mut k = 0usize;
        for l in &noise_refs {
            if parse_line(std::hint::black_box(l)).is_some() {
                k += 1;
            }
        }
        std::hint::black_box(k);
        let (w, c) = t0.stop();
        best[3] = best[3].min(w);
        best_cpu[3] = best_cpu[3].min(c);
    }
    println!("events {events}, findings {findings} (best of {runs} runs, one core; wall time, and the thread's CPU time, which other processes on the machine do not inflate)");
    for (i, what) in [
        "e2e (tail+parse+detect):",
        "parse+detect (memory):  ",
        "parse only (memory):    ",
    ]
    .iter()
    .enumerate()
    {
        println!(
            "{what} {:>8.3} s wall {:>12.0} lines/s | {:>8.3} s CPU {:>12.0} lines/s",
            best[i],
            per_sec(nl, best[i]),
            best_cpu[i],
            per_sec(nl, best_cpu[i])
        );
    }
    println!(
        "non-PAM noise (parse):   {:>8.1} ns/line wall, {:.1} ns/line CPU, over {} lines",
        best[3] * 1e9 / noise_lines.len().max(1) as f64,
        best_cpu[3] * 1e9 / noise_lines.len().max(1) as f64,
        noise_lines.len()
    );
    // Machine-readable lines for the comparison script.
    println!("RESULT lines {nl}");
    println!("RESULT e2e_lines_per_sec {:.0}", per_sec(nl, best[0]));
    println!(
        "RESULT parse_detect_lines_per_sec {:.0}",
        per_sec(nl, best[1])
    );
    println!(
        "RESULT e2e_cpu_lines_per_sec {:.0}",
        per_sec(nl, best_cpu[0])
    );
    println!(
        "RESULT parse_detect_cpu_lines_per_sec {:.0}",
        per_sec(nl, best_cpu[1])
    );
    if !keep {
        if let Some(dir) = path.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
