//! Abuse-report spool figures, side by side with the panel webhook spool (`panel.spool`,
//! the other durable SQLite spool) in the same run:
//! 1. Admission into the durable spool (one committed write per report, as the ingress
//!    writer does): reports/s with one and with two destinations (dedup lookups and marks
//!    included), and `panel.spool` pushes/s of the same count.
//! 2. End to end: reports offered to a running reporter until a loopback HTTP collector
//!    has received every one (`json` format, one sender): reports/s.
//!
//! Run: `cargo bench --bench abuse`. Prints `RESULT key value` lines; asserts nothing.
//! `SVC_BENCH_REPORTS` changes the count (default 5,000).
#![allow(
    clippy::disallowed_methods,
    reason = "benchmark fixtures (temp dirs) use plain std::fs calls"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use svc::abuse::{Reporter, Spool};
use svc::clock::{SharedClock, SystemClock};
use svc::config::abuse::{ReportConfig, ReportDestination, ReportFormat};
use svc::net::https::Roots;
use svc::queue::Registry;
use svc::store::abuse::NewReport;
use svc::store::Store;
use svc::threat::autoblock::{BlockSink, Confirmed, Trigger};

fn count() -> usize {
    std::env::var("SVC_BENCH_REPORTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000)
}

fn fresh_store(tag: &str) -> (Store, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("svc-bench-abuse-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    (Store::open(&dir.join("svc.db")).unwrap(), dir)
}

fn ip(i: usize) -> String {
    format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255)
}

fn admission(n: usize, dests: usize) -> f64 {
    let (store, dir) = fresh_store(&format!("admit{dests}"));
    let clock: SharedClock = Arc::new(SystemClock::new());
    let list = (0..dests)
        .map(|i| (format!("d{i}"), Duration::from_secs(86_400)))
        .collect();
    let s = Spool::open(store.clone(), clock, &Registry::new(), n * 2 + 10, list).unwrap();
    let t = Instant::now();
    for i in 0..n {
        s.admit(NewReport {
            ip: ip(i),
            categories: vec!["brute_force".into(), "ssh".into()],
            comment:
                "Blocked automatically by svc: ssh_bruteforce (score 40); events: brute_force 1"
                    .into(),
            at: 0,
        });
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    assert_eq!(s.len(), n * dests);
    store.close();
    let _ = std::fs::remove_dir_all(dir);
    rate
}

fn panel_push(n: usize) -> f64 {
    let (store, dir) = fresh_store("panel");
    let clock: SharedClock = Arc::new(SystemClock::new());
    let s =
        svc::alerts::spool::Spool::open(store.clone(), clock, &Registry::new(), n + 10).unwrap();
    let body = br#"{"check":"ssh_bruteforce","severity":"HIGH","message":"SSH brute force from 192.0.2.1"}"#;
    let t = Instant::now();
    for i in 0..n {
        s.push(&format!("finding {i}"), body);
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    store.close();
    let _ = std::fs::remove_dir_all(dir);
    rate
}

/// A loopback collector (keep-alive, 200 to every POST); returns its port and counter.
fn collector() -> (u16, Arc<AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    std::thread::spawn(move || {
        for s in l.incoming().map_while(Result::ok) {
            let g = g.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s);
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut len = 0usize;
                    loop {
                        let mut h = String::new();
                        if r.read_line(&mut h).unwrap_or(0) == 0 {
                            return;
                        }
                        let h = h.trim_end();
                        if h.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = h.split_once(':') {
                            if k.eq_ignore_ascii_case("content-length") {
                                len = v.trim().parse().unwrap_or(0);
                            }
                        }
                    }
                    let mut body = vec![0; len];
                    if r.read_exact(&mut body).is_err() {
                        return;
                    }
                    g.fetch_add(1, Ordering::SeqCst);
                    let _ = r
                        .get_mut()
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                }
            });
        }
    });
    (port, got)
}

fn end_to_end(n: usize) -> f64 {
    let (store, dir) = fresh_store("e2e");
    let (port, got) = collector();
    let cfg = ReportConfig {
        enabled: true,
        spool_limit: n + 10,
        destinations: vec![ReportDestination {
            name: "collector".into(),
            url: format!("http://127.0.0.1:{port}/r"),
            format: ReportFormat::Json,
            api_key_env: String::new(),
            dedup_window_hours: 24,
        }],
    };
    let clock: SharedClock = Arc::new(SystemClock::new());
    let r = Reporter::new(
        &cfg,
        Roots::default(),
        Duration::from_secs(5),
        clock,
        store.clone(),
        &Registry::new(),
    )
    .unwrap()
    .unwrap();
    r.start().unwrap();
    let t = Instant::now();
    for i in 0..n {
        r.confirmed(&Confirmed {
            ip: ip(i).parse().unwrap(),
            trigger: Some(Trigger::Finding("ssh_bruteforce".into())),
            reason: "auto: ssh_bruteforce (score 40)".into(),
            counts: [1, 0, 0, 0, 0, 0, 0],
            at: 0,
            expires: None,
        });
    }
    while got.load(Ordering::SeqCst) < n as u64 {
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "collector got too few"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    r.shutdown();
    store.close();
    let _ = std::fs::remove_dir_all(dir);
    rate
}

fn main() {
    let n = count();
    println!("RESULT reports {n}");
    println!(
        "RESULT abuse_spool_admit_1_dest_per_s {:.0}",
        admission(n, 1)
    );
    println!(
        "RESULT abuse_spool_admit_2_dests_per_s {:.0}",
        admission(n, 2)
    );
    println!("RESULT panel_spool_push_per_s {:.0}", panel_push(n));
    println!(
        "RESULT abuse_end_to_end_delivered_per_s {:.0}",
        end_to_end(n)
    );
}
