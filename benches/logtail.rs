//! Log lines to findings through the real daemon: append-to-finding latency and the drain
//! of a 1,000,000-line burst.
//!
//! Starts the real `svc` binary tailing one auth log (no file watcher, no checks), then:
//! 1. **latency**: appends one `Accepted password for root` line at a time (a
//!    `ssh_root_login` finding each, distinct addresses), at random gaps of 5-25 ms, and
//!    times append -> the finding's event on an `/api/v1/events` stream (the finding has been
//!    committed to the store by then). Prints p50/p90/p99/max over the samples.
//! 2. **drain**: appends 1,000,000 lines of the generated mix (`benches/authlog/lines.rs`) in
//!    writes of 128 KiB, as `cat LOG >> followed.log` does (the fail2ban side of
//!    `benches/authlog-vs-fail2ban.sh` gets the same lines that way), and times from the
//!    first write until the log's committed position is at its end and every finding the
//!    lines produce is in history (the count is computed in this process by the same
//!    detector; the position is committed after its findings, so the first implies the
//!    second). Both are read from the daemon's database with a read-only connection, so the
//!    measurement puts no API work into the daemon. Prints the drain time, how long the
//!    append took, the daemon's peak RSS (`VmHWM`, over its whole life), its CPU per
//!    thread and the store transactions it committed.
//!
//! Args (after `--`): `--samples N` (default 300), `--lines N` (1,000,000), `--rounds N`
//! (drain rounds, default 1, each on a fresh daemon), `--skip-latency`, `--log FILE` (drain
//! this existing file instead of generating one; used by `benches/authlog-vs-fail2ban.sh`),
//! `--append-chunk BYTES` (bytes per write of the drain's append, default 131072; 0 writes
//! it all at once), `--summary FILE` (`key=value` lines). Prints and asserts nothing about
//! timing.
//!
//! Run: `cargo bench --bench logtail`.
#![allow(
    clippy::disallowed_methods,
    reason = "benchmark fixtures use plain std::fs calls"
)]

#[allow(dead_code)] // the benchmark uses part of the test harness
#[path = "../tests/it/common/mod.rs"]
mod common;

#[path = "authlog/lines.rs"]
mod lines;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use svc::clock::SystemClock;
use svc::watch::authlog::{AuthDetector, AuthThresholds};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// A `/proc/<pid>/status` field in KiB.
fn proc_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// CPU seconds (user + system) of `pid`.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU seconds per thread name of `pid` (threads of the same name summed).
fn thread_cpu(pid: u32) -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let tid: u32 = t.file_name().to_string_lossy().parse().unwrap_or(0);
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        let _ = tid;
        *out.entry(comm.trim().to_string()).or_insert(0.0) += (ticks(11) + ticks(12)) / 100.0;
    }
    out
}

fn start_daemon(tag: &str) -> (common::Daemon, PathBuf) {
    let dir = common::temp_dir(tag);
    let log = dir.join("auth.log");
    std::fs::write(
        &log,
        "Nov 21 00:00:00 host sshd[1]: Server listening on 0.0.0.0 port 22.\n",
    )
    .expect("write log");
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    // `checks.root` is the daemon's own directory, so that it follows only this log: on the
    // host root it would also find and follow the host's web-server log and mail journal,
    // which fail2ban's sshd jail beside it does not read either.
    let extra = format!(
        "[logs]\nauth = [{log:?}]\n[files]\nwatch = []\n[checks]\nroot = {root:?}\ncritical_interval_min = 0\ndeep_interval_min = 0\n",
        log = log.display().to_string(),
        root = dir.display().to_string()
    );
    std::fs::write(&config, format!("{}{extra}", common::base_config(&state)))
        .expect("write config");
    (common::Daemon::start_with(dir, config, state, &[]), log)
}

/// One event-stream subscriber: sends `(ip, received at)` for each finding event.
fn subscribe(
    d: &common::Daemon,
    stop: Arc<AtomicBool>,
) -> (
    mpsc::Receiver<(String, Instant)>,
    std::thread::JoinHandle<()>,
) {
    let mut c = d.client();
    let auth = format!("Bearer {}", common::READ);
    c.write_request("GET", "/api/v1/events", &[("Authorization", &auth)], b"");
    let head = c.read_head();
    assert_eq!(head.status, 200, "subscribe");
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let _ = c
            .stream
            .sock
            .set_read_timeout(Some(Duration::from_millis(100)));
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
            let at = Instant::now();
            partial.extend_from_slice(&buf[..n]);
            let mut start = 0;
            while let Some(pos) = memchr::memchr(b'\n', &partial[start..]) {
                let line = &partial[start..start + pos];
                if let Some(data) = line.strip_prefix(b"data: ") {
                    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
                        let ip = v["ip"].as_str().unwrap_or("").to_string();
                        let _ = tx.send((ip, at));
                    }
                }
                start += pos + 1;
            }
            partial.drain(..start);
        }
    });
    (rx, t)
}

/// Appends `text` to `log` in writes of `chunk` bytes (all of it in one write when `chunk`
/// is 0).
fn append(log: &Path, text: &[u8], chunk: usize) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(log)
        .expect("open log");
    let chunk = if chunk == 0 { text.len().max(1) } else { chunk };
    for part in text.chunks(chunk) {
        f.write_all(part).expect("append");
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

struct Latency {
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
    lost: usize,
}

fn latency(samples: usize) -> Latency {
    let (d, log) = start_daemon("bench-logtail-lat");
    let stop = Arc::new(AtomicBool::new(false));
    let (rx, t) = subscribe(&d, stop.clone());
    let mut rng = lines::Rng(0xC0FF_EE00_1234_5678);
    let mut ms = Vec::with_capacity(samples);
    let mut lost = 0;
    // A few unmeasured rounds first (connections, page cache, first store writes).
    for i in 0..samples + 10 {
        let ip = format!(
            "{}.{}",
            ["192.0.2", "198.51.100", "203.0.113"][i % 3],
            i / 3 % 250 + 1
        );
        let line = format!(
            "{} web1 sshd[{}]: Accepted password for root from {ip} port {} ssh2\n",
            lines::timestamp(i as u64),
            1000 + i,
            20_000 + i
        );
        std::thread::sleep(Duration::from_millis(5 + rng.below(21)));
        while rx.try_recv().is_ok() {}
        let t0 = Instant::now();
        append(&log, line.as_bytes(), 0);
        let deadline = t0 + Duration::from_secs(5);
        let mut got = None;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match rx.recv_timeout(left) {
                Ok((seen, at)) if seen == ip => {
                    got = Some(at);
                    break;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        if i < 10 {
            continue;
        }
        match got {
            Some(at) => ms.push((at - t0).as_secs_f64() * 1e3),
            None => lost += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = t.join();
    let dir = d.dir.clone();
    drop(d);
    let _ = std::fs::remove_dir_all(dir);
    ms.sort_by(f64::total_cmp);
    Latency {
        p50: percentile(&ms, 0.50),
        p90: percentile(&ms, 0.90),
        p99: percentile(&ms, 0.99),
        max: ms.last().copied().unwrap_or(f64::NAN),
        lost,
    }
}

/// Findings the detector produces for `text` with default thresholds.
fn expected_findings(text: &str) -> u64 {
    let mut det = AuthDetector::new(AuthThresholds::default(), SystemClock::shared());
    let mut n = 0u64;
    for l in text.lines() {
        det.process_line(l, &mut |_| n += 1);
    }
    n
}

struct Drain {
    lines: usize,
    bytes: usize,
    findings: u64,
    dispatched: u64,
    drain_secs: f64,
    /// How long the append itself took (the drain's clock starts before it).
    append_secs: f64,
    settled: bool,
    idle_rss_kib: u64,
    peak_rss_kib: u64,
    cpu_secs: f64,
    /// CPU seconds per daemon thread during the drain (the busiest ones).
    threads: Vec<(String, f64)>,
    ingest_dropped: u64,
    /// Store transactions and write jobs committed during the drain.
    store_commits: u64,
    store_writes: u64,
}

/// `(store_commits, store_writes)` from `/api/v1/performance`.
fn store_counts(d: &common::Daemon) -> (u64, u64) {
    let p = d.get("/api/v1/performance", common::ADMIN).json();
    (
        json_u64(&p["processed"]["store_commits"]),
        json_u64(&p["processed"]["store_writes"]),
    )
}

fn json_u64(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// The committed position of the log, read from the daemon's database with a read-only
/// connection (WAL readers never block the daemon's writer). Cheaper for the daemon than
/// polling its API, which would put TLS handshakes and status work into the measurement.
fn committed_offset(db: &rusqlite::Connection, key: &str) -> u64 {
    db.query_row(
        "SELECT offset FROM source_checkpoints WHERE source = ?1",
        [key],
        |r| r.get::<_, i64>(0),
    )
    .map_or(0, |o| o as u64)
}

/// History rows. A count walks the whole table, so the drain loop counts only once the
/// position reached the end: polled every 2 ms through the drain it took CPU from the
/// daemon on a 2-core machine.
fn history_rows(db: &rusqlite::Connection) -> u64 {
    db.query_row("SELECT count(*) FROM history", [], |r| r.get::<_, i64>(0))
        .map_or(0, |n| n as u64)
}

fn drain(text: &str, expected: u64, chunk: usize) -> Drain {
    let (d, log) = start_daemon("bench-logtail-drain");
    let pid = d.pid();
    let key = format!("auth:{}", log.display());
    let db = rusqlite::Connection::open_with_flags(
        d.state.join("svc.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open the daemon's database read-only");
    let base = history_rows(&db);
    std::thread::sleep(Duration::from_millis(300));
    let idle_rss_kib = proc_kib(pid, "VmRSS:");
    let store0 = store_counts(&d);
    let cpu0 = cpu_seconds(pid);
    let threads0 = thread_cpu(pid);
    let size0 = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let end = size0 + text.len() as u64;
    let t0 = Instant::now();
    append(&log, text.as_bytes(), chunk);
    let append_secs = t0.elapsed().as_secs_f64();
    let mut last_change = (0u64, 0u64, Instant::now());
    let (drain_at, settled, seen) = loop {
        let offset = committed_offset(&db, &key);
        let n = if offset >= end {
            history_rows(&db).saturating_sub(base)
        } else {
            last_change.0
        };
        let now = Instant::now();
        if (n, offset) != (last_change.0, last_change.1) {
            last_change = (n, offset, now);
        }
        if offset >= end && n >= expected {
            break (now, true, n);
        }
        if now - last_change.2 > Duration::from_secs(10) {
            // Not everything expected arrived: report when it last moved.
            break (last_change.2, false, n);
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let mut threads: Vec<(String, f64)> = thread_cpu(pid)
        .into_iter()
        .map(|(n, c)| {
            let before = threads0.get(&n).copied().unwrap_or(0.0);
            (n, c - before)
        })
        .filter(|(_, c)| *c >= 0.01)
        .collect();
    threads.sort_by(|a, b| b.1.total_cmp(&a.1));
    let h = d.get("/api/v1/status", common::READ).json();
    let store1 = store_counts(&d);
    let r = Drain {
        store_commits: store1.0.saturating_sub(store0.0),
        store_writes: store1.1.saturating_sub(store0.1),
        threads,
        lines: text.lines().count(),
        bytes: text.len(),
        findings: expected,
        dispatched: seen,
        drain_secs: (drain_at - t0).as_secs_f64(),
        append_secs,
        settled,
        idle_rss_kib,
        peak_rss_kib: proc_kib(pid, "VmHWM:"),
        cpu_secs: cpu_seconds(pid) - cpu0,
        ingest_dropped: json_u64(&h["queues"]["findings.ingest"]["dropped_total"]),
    };
    // The daemon's directory holds a copy of the whole log: remove it.
    let dir = d.dir.clone();
    drop(d);
    let _ = std::fs::remove_dir_all(dir);
    r
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let samples: usize = arg(&args, "--samples")
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let n: u64 = arg(&args, "--lines")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: usize = arg(&args, "--rounds")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut summary = String::new();

    if !args.iter().any(|a| a == "--skip-latency") {
        let l = latency(samples);
        println!(
            "append -> finding latency over {samples} lines: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms, lost {}",
            l.p50, l.p90, l.p99, l.max, l.lost
        );
        summary += &format!(
            "latency_p50_ms={:.3}\nlatency_p90_ms={:.3}\nlatency_p99_ms={:.3}\nlatency_max_ms={:.3}\nlatency_lost={}\n",
            l.p50, l.p90, l.p99, l.max, l.lost
        );
    }

    let text = match arg(&args, "--log") {
        Some(p) => std::fs::read_to_string(&p).expect("read --log file"),
        None => lines::generate(n),
    };
    // `cat LOG >> followed.log`, as the fail2ban side of `benches/authlog-vs-fail2ban.sh`
    // appends, writes 128 KiB at a time.
    let chunk: usize = arg(&args, "--append-chunk")
        .and_then(|v| v.parse().ok())
        .unwrap_or(128 * 1024);
    let expected = expected_findings(&text);
    for round in 1..=rounds {
        let r = drain(&text, expected, chunk);
        println!(
            "drain round {round}: {} lines ({:.1} MB), {} findings: all lines and findings committed in {:.3} s{} (the append took {:.3} s); daemon peak RSS {:.1} MiB (idle {:.1} MiB), CPU {:.2} s, ingest losses {}",
            r.lines,
            r.bytes as f64 / 1e6,
            r.findings,
            r.drain_secs,
            if r.settled {
                String::new()
            } else {
                format!(" (NOT all: {} of {} dispatched)", r.dispatched, r.findings)
            },
            r.append_secs,
            r.peak_rss_kib as f64 / 1024.0,
            r.idle_rss_kib as f64 / 1024.0,
            r.cpu_secs,
            r.ingest_dropped
        );
        println!(
            "  store: {} transactions for {} write jobs; daemon CPU by thread: {}",
            r.store_commits,
            r.store_writes,
            r.threads
                .iter()
                .map(|(n, c)| format!("{n} {c:.2} s"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        summary += &format!(
            "drain_lines={}\ndrain_findings={}\ndrain_dispatched={}\ndrain_secs={:.4}\nappend_secs={:.4}\ndrain_complete={}\npeak_rss_kib={}\nidle_rss_kib={}\ndrain_cpu_secs={:.2}\nstore_commits={}\n",
            r.lines, r.findings, r.dispatched, r.drain_secs, r.append_secs, r.settled, r.peak_rss_kib, r.idle_rss_kib, r.cpu_secs, r.store_commits
        );
    }
    if let Some(p) = arg(&args, "--summary") {
        std::fs::write(p, summary).expect("write summary");
    }
}
