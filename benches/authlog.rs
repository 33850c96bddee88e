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

use svc::clock::SystemClock;
use svc::watch::authlog::{parse_line, AuthDetector, AuthThresholds};
use svc::watch::tail::FileSource;

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

#[path = "authlog/lines.rs"]
mod lines;
use lines::{line, Rng};

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
    let mut findings = 0usize;
    let mut events = 0usize;
    for _ in 0..runs {
        // e2e: file -> tailer -> parse -> detect.
        let t0 = Instant::now();
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
        best[0] = best[0].min(t0.elapsed().as_secs_f64());
        assert_eq!(count, lines.len());
        findings = fnd;

        // parse+detect from memory.
        let t0 = Instant::now();
        let mut det = AuthDetector::new(th.clone(), SystemClock::shared());
        let mut ev = 0usize;
        for l in &lines {
            if det.process_line(l, &mut |_| {}) {
                ev += 1;
            }
        }
        best[1] = best[1].min(t0.elapsed().as_secs_f64());
        events = ev;

        // parse only.
        let t0 = Instant::now();
        let mut k = 0usize;
        for l in &lines {
            if let Some(e) = parse_line(std::hint::black_box(l)) {
                k += e.attempts as usize;
            }
        }
        std::hint::black_box(k);
        best[2] = best[2].min(t0.elapsed().as_secs_f64());

        // noise rejection, on contiguous text like the tailer's read buffer.
        let t0 = Instant::now();
        let mut k = 0usize;
        for l in &noise_refs {
            if parse_line(std::hint::black_box(l)).is_some() {
                k += 1;
            }
        }
        std::hint::black_box(k);
        best[3] = best[3].min(t0.elapsed().as_secs_f64());
    }
    let nl = lines.len();
    println!("events {events}, findings {findings} (best of {runs} runs, one core)");
    println!(
        "e2e (tail+parse+detect): {:>8.3} s  {:>12.0} lines/s",
        best[0],
        per_sec(nl, best[0])
    );
    println!(
        "parse+detect (memory):   {:>8.3} s  {:>12.0} lines/s",
        best[1],
        per_sec(nl, best[1])
    );
    println!(
        "parse only (memory):     {:>8.3} s  {:>12.0} lines/s",
        best[2],
        per_sec(nl, best[2])
    );
    println!(
        "non-PAM noise (parse):   {:>8.1} ns/line over {} lines",
        best[3] * 1e9 / noise_lines.len().max(1) as f64,
        noise_lines.len()
    );
    // Machine-readable lines for the comparison script.
    println!("RESULT lines {nl}");
    println!("RESULT e2e_lines_per_sec {:.0}", per_sec(nl, best[0]));
    println!(
        "RESULT parse_detect_lines_per_sec {:.0}",
        per_sec(nl, best[1])
    );
    if !keep {
        if let Some(dir) = path.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
