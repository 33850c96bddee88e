//! Mail accounts: mail-log parsing rate and password-audit throughput.
//!
//! 1. `parse`: 500,000 Exim mainlog lines (the captured fixtures, message ids varied) through
//!    the parser and the ledger on one thread, lines/s on thread CPU time; side by side with
//!    Exim's own `eximstats` (Debian exim4-base) on the same file, wall time.
//! 2. `audit`: hashes/s per scheme through the shared pool (three slots, three callers),
//!    every candidate checked (no match), with values made by the independent tools
//!    (`openssl passwd`, `htpasswd`, `argon2`); and the peak RSS of the process during the
//!    64 MiB Argon2 run, against the 3 x 64 MiB bound.
//!
//! Run: `cargo bench --bench mail-accounts` (prints, asserts nothing); `MAIL_BENCH=parse`
//! runs the first part only.

#![allow(
    clippy::disallowed_methods,
    reason = "test and benchmark fixtures are built with plain std::fs calls, as an attacker would"
)]

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use sha2::Digest as _;

use svc::clock::SystemClock;
use svc::mail::log::ledger::{Ledger, LedgerSettings};
use svc::mail::log::parse_line;
use svc::mail::password::candidates::Candidates;
use svc::mail::password::pool::Checked;
use svc::mail::password::{parse, Field, HashPool};
use svc::queue::Registry;

const FIXTURES: [&str; 2] = [
    include_str!("../src/mail/log/fixtures/exim-mainlog-default.log"),
    include_str!("../src/mail/log/fixtures/exim-mainlog-all.log"),
];

fn thread_cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map(|ns| ns / 1e9)
        .unwrap_or(f64::NAN)
}

fn vm_hwm_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map(|kib| kib / 1024.0)
        .unwrap_or(f64::NAN)
}

fn lines(n: usize) -> String {
    let base: Vec<&str> = FIXTURES.iter().flat_map(|f| f.lines()).collect();
    let mut out = String::with_capacity(n * 200);
    for i in 0..n {
        let l = base[i % base.len()];
        // Vary the message ids so the ledger sees distinct messages.
        let l = l.replace("-0006", &format!("-{:04}", (i / base.len()) % 10_000));
        out.push_str(&l);
        out.push('\n');
    }
    out
}

fn bench_parse() {
    let n = 500_000;
    let text = lines(n);
    let mut ledger = Ledger::new(
        LedgerSettings::default(),
        SystemClock::shared(),
        jiff::tz::TimeZone::UTC,
    );
    let t0 = thread_cpu();
    let w0 = Instant::now();
    let mut events = 0u64;
    let mut findings = 0u64;
    let mut writes = 0usize;
    for line in text.lines() {
        if let Some(p) = parse_line(line) {
            events += 1;
            ledger.handle(&p, &mut |_| findings += 1);
            if ledger.writes_len() >= 4096 {
                writes += ledger.take_writes().len();
            }
        }
    }
    writes += ledger.take_writes().len();
    let cpu = thread_cpu() - t0;
    let wall = w0.elapsed().as_secs_f64();
    println!(
        "parse+ledger: {n} lines, {events} events, {writes} records, {findings} findings: {:.0} lines/s on thread CPU ({cpu:.3} s), {:.0} lines/s wall",
        n as f64 / cpu,
        n as f64 / wall
    );
    let t0 = thread_cpu();
    let mut k = 0u64;
    for line in text.lines() {
        k += u64::from(parse_line(line).is_some());
    }
    let cpu = thread_cpu() - t0;
    println!(
        "parse only: {:.0} lines/s on thread CPU ({k} events)",
        n as f64 / cpu
    );

    // Peer: eximstats on the same file.
    let dir = std::env::temp_dir().join(format!("svc-mail-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mainlog");
    std::fs::write(&file, &text).unwrap();
    if std::path::Path::new("/usr/sbin/eximstats").exists() {
        let w0 = Instant::now();
        let st = Command::new("/usr/sbin/eximstats")
            .arg("-nr")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let wall = w0.elapsed().as_secs_f64();
        println!(
            "peer eximstats -nr (Exim 4.96, Perl): {n} lines in {wall:.2} s wall = {:.0} lines/s ({st:?})",
            n as f64 / wall
        );
    } else {
        println!("peer eximstats: not installed");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tool(cmd: &str, args: &[&str], stdin: Option<&str>) -> Option<String> {
    let mut c = Command::new(cmd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    if let Some(s) = stdin {
        c.stdin.take()?.write_all(s.as_bytes()).ok()?;
    }
    drop(c.stdin.take());
    let out = c.wait_with_output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn values() -> Vec<(&'static str, String, usize)> {
    let pw = "Zq8!not-in-any-list";
    let mut v = Vec::new();
    v.push((
        "PLAIN-MD5",
        format!("{{PLAIN-MD5}}{}", hex::encode(md5::Md5::digest(pw))),
        3_564,
    ));
    let mut d = sha2::Sha512::digest(format!("{pw}saltsalt")).to_vec();
    d.extend_from_slice(b"saltsalt");
    v.push((
        "SSHA512",
        format!(
            "{{SSHA512}}{}",
            base64::engine::general_purpose::STANDARD.encode(d)
        ),
        3_564,
    ));
    if let Some(h) = tool("openssl", &["passwd", "-1", "-salt", "saltsalt", pw], None) {
        v.push(("MD5-CRYPT", h, 3_000));
    }
    if let Some(h) = tool("openssl", &["passwd", "-6", "-salt", "saltsalt", pw], None) {
        v.push(("SHA512-CRYPT (5,000 rounds)", h, 600));
    }
    if let Some(h) = tool("htpasswd", &["-nbB", "-C", "10", "u", pw], None) {
        v.push((
            "BLF-CRYPT (cost 10)",
            h.trim_start_matches("u:").to_string(),
            60,
        ));
    }
    if let Some(h) = tool(
        "argon2",
        &[
            "saltsaltsalt",
            "-id",
            "-k",
            "65536",
            "-t",
            "3",
            "-p",
            "1",
            "-e",
        ],
        Some(pw),
    ) {
        v.push((
            "ARGON2ID (64 MiB, t=3, p=1)",
            format!("{{ARGON2ID}}{h}"),
            12,
        ));
    }
    v
}

fn bench_audit() {
    let registry = Registry::new();
    let pool = HashPool::start(SystemClock::shared(), &registry).unwrap();
    let hwm_before = vm_hwm_mib();
    for (name, value, n) in values() {
        let Ok(Field::Value(stored)) = parse(value.as_bytes()) else {
            println!("{name}: value not parsed");
            continue;
        };
        let stored = Arc::new(stored);
        let cands = Arc::new(Candidates::new("bench@example.com", None, 2026, n));
        let len = cands.len();
        let batch = HashPool::batch_len(&stored);
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let w0 = Instant::now();
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (pool, stored, cands, next) =
                    (pool.clone(), stored.clone(), cands.clone(), next.clone());
                std::thread::spawn(move || {
                    let cancel = AtomicBool::new(false);
                    loop {
                        let i = next.fetch_add(batch, std::sync::atomic::Ordering::Relaxed);
                        if i >= len {
                            return;
                        }
                        let r = pool.check(
                            &stored,
                            &cands,
                            i..(i + batch).min(len),
                            &cancel,
                            pool.deadline_after(Duration::from_secs(300)),
                        );
                        assert!(matches!(r, Checked::NoMatch), "{r:?}");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let wall = w0.elapsed().as_secs_f64();
        println!(
            "audit {name}: {len} candidates in {wall:.2} s = {:.0} hashes/s (3 slots)",
            len as f64 / wall
        );
    }
    println!(
        "peak RSS (VmHWM) {:.0} MiB after the runs ({hwm_before:.0} MiB before); bound for Argon2: 3 x 64 MiB = 192 MiB above the base",
        vm_hwm_mib()
    );
    pool.shutdown();
}

fn main() {
    println!("mail bench (machine shared with other builds: figures are noisy)");
    bench_parse();
    if std::env::var("MAIL_BENCH").as_deref() != Ok("parse") {
        bench_audit();
    }
}
