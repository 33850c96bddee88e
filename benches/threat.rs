//! Threat intelligence figures (goals from the issue):
//! 1. Attack-database ingest of 1,000,000 events, in memory (`AttackDb::record`, the work
//!    on a collector's thread): events/s, goal >= 200,000/s. Two shapes: every event a new
//!    address (1,000,000 records), and repeat attackers (100,000 addresses).
//! 2. Bytes per record at 1,000,000 addresses: the database's own estimate and the RSS
//!    growth divided by the records.
//! 3. The same 1,000,000 events through the subsystem ([`Threat`] with its persistence
//!    thread and a real store): the recording rate and the rate until every event is in
//!    SQLite (events dropped by the pending bound are reported).
//! 4. Verdict latency with every local source (attack database, permanent blocklist and
//!    firewall state on a real engine in a network namespace this benchmark creates, GeoIP,
//!    a threat feed) plus two remote sources (upstream cache, RDAP) on a loopback HTTP
//!    server, all caches warm: p50/p99/max over 100,000 verdicts, goal p99 < 1 ms.
//!
//! Run: `cargo bench --bench threat` (as root for part 4; otherwise part 4 runs without
//! the firewall engine and says so). Prints `RESULT key value` lines; asserts nothing.
//! `SVC_BENCH_EVENTS` changes the event count.
#![allow(
    clippy::disallowed_methods,
    reason = "benchmark fixtures (namespaces, temp dirs, /proc) use plain std::fs calls"
)]

#[allow(dead_code)] // the benchmark uses the GeoIP database writer of the test harness
#[path = "../tests/it/common/mmdb.rs"]
mod mmdb;

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use svc::clock::{SharedClock, SystemClock};
use svc::config::firewall::FirewallConfig;
use svc::config::threat::{RdapConfig, ReputationConfig, ThreatConfig, UpstreamConfig};
use svc::findings::evidence::AttackKind;
use svc::findings::Severity;
use svc::firewall::engine::{Actor, BlockItem, Firewall, Options};
use svc::firewall::{Handle, Net};
use svc::net::https::Roots;
use svc::queue::{QueueHealth, Registry, RowConfig};
use svc::store::Store;
use svc::threat::db::{AttackDb, AttackEvent};
use svc::threat::sources::feeds::{FeedSet, FeedSource, Loaded, Ranges};
use svc::threat::sources::{self, Blocklist, FirewallState, Geo, LocalDb};
use svc::threat::verdict::{Aggregator, Source};
use svc::threat::{Deps, Threat};

struct Ns(String);

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The i-th distinct address (10.0.0.0/8 and up, never loopback or local here).
fn addr(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000u32.wrapping_add(i)))
}

const KINDS: [AttackKind; 5] = [
    AttackKind::BruteForce,
    AttackKind::WafBlock,
    AttackKind::WebshellUpload,
    AttackKind::AuthSuccess,
    AttackKind::Phishing,
];

fn events(n: usize, addresses: u32, t0: i64) -> Vec<AttackEvent> {
    let accounts = ["alice", "bob", "carol", "dave", "erin", "frank", "grace"];
    (0..n)
        .map(|i| AttackEvent {
            ip: addr(i as u32 % addresses),
            kind: KINDS[i % KINDS.len()],
            at: t0 + i as i64,
            severity: Severity::High,
            check: "ssh_bruteforce".into(),
            accounts: vec![accounts[i % accounts.len()].to_string()],
            message: format!("SSH brute force from {}", addr(i as u32 % addresses)),
        })
        .collect()
}

fn db(clock: &SharedClock, max: usize) -> AttackDb {
    AttackDb::new(
        max,
        168,
        QueueHealth::new(clock.clone(), RowConfig::new("events")),
        QueueHealth::new(clock.clone(), RowConfig::new("records")),
    )
}

fn ingest_in_memory(n: usize, clock: &SharedClock) -> Arc<AttackDb> {
    let t0 = clock.now().as_microsecond();
    for (label, addresses) in [("new addresses", n as u32), ("repeat attackers", 100_000)] {
        let evs = events(n, addresses, t0);
        let rss0 = status_kib("VmRSS:");
        let d = db(clock, 1_000_000);
        let t = Instant::now();
        for e in &evs {
            d.record(e);
        }
        let secs = t.elapsed().as_secs_f64();
        let rss1 = status_kib("VmRSS:");
        let key = label.replace(' ', "_");
        println!(
            "ingest in memory, {label}: {n} events into {} records in {:.2} s = {:.0} events/s",
            d.len(),
            secs,
            n as f64 / secs
        );
        println!(
            "RESULT ingest_memory_{key}_events_per_second {:.0}",
            n as f64 / secs
        );
        if addresses as usize == n {
            let per = d.heap_bytes() / d.len().max(1);
            // The RSS growth also holds the events waiting for the store (at most
            // 500,000, the pending bound), so it is an upper bound for the records.
            let rss = (rss1.saturating_sub(rss0) * 1024) as f64 / d.len() as f64;
            println!(
                "bytes per record at {} addresses: {per} (estimate of the slab and index); RSS growth {rss:.0} bytes/record including {} events waiting for the store",
                d.len(),
                d.backlog().0
            );
            println!("RESULT bytes_per_record_estimate {per}");
            println!("RESULT bytes_per_record_rss_with_pending_events {rss:.0}");
        }
        if addresses != n as u32 {
            return Arc::new(d);
        }
    }
    unreachable!()
}

fn ingest_through_the_subsystem(n: usize, dir: &std::path::Path) {
    let clock = SystemClock::shared();
    let store = Store::open(&dir.join("svc.db")).unwrap();
    let registry = Registry::new();
    let alerts = svc::alerts::Alerts::start(
        &svc::config::alerts::AlertsConfig::default(),
        clock.clone(),
        store.clone(),
        &registry,
    )
    .unwrap();
    let t = Threat::start(
        Deps {
            clock: clock.clone(),
            store: store.clone(),
            registry,
            firewall: Handle::Absent("benchmark".into()),
            geoip: None,
            alerts,
            submit: Arc::new(|_| true),
        },
        &ThreatConfig {
            max_events: 10_000_000,
            ..ThreatConfig::default()
        },
        &ReputationConfig::default(),
    )
    .unwrap();
    let rec = t.recorder();
    let evs = events(n, 200_000, 0);
    let start = Instant::now();
    for e in &evs {
        rec.record(
            e.ip,
            e.kind,
            &e.check,
            e.severity,
            Some("alice"),
            &e.message,
            false,
        );
    }
    let recorded = start.elapsed().as_secs_f64();
    let deadline = Instant::now() + Duration::from_secs(600);
    while t.db.backlog() != (0, 0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let persisted = start.elapsed().as_secs_f64();
    let stored = t
        .persist
        .stored_events
        .load(std::sync::atomic::Ordering::Relaxed);
    let dropped =
        t.db.counters
            .events_dropped
            .load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "through the subsystem: {n} events recorded in {recorded:.2} s = {:.0} events/s; in SQLite after {persisted:.2} s = {:.0} events/s ({stored} stored, {dropped} dropped by the pending bound)",
        n as f64 / recorded,
        stored as f64 / persisted
    );
    println!(
        "RESULT ingest_subsystem_record_events_per_second {:.0}",
        n as f64 / recorded
    );
    println!(
        "RESULT ingest_subsystem_persisted_events_per_second {:.0}",
        stored as f64 / persisted
    );
    println!("RESULT ingest_subsystem_dropped_events {dropped}");
    t.shutdown();
    store.close();
}

/// A loopback HTTP server answering the upstream cache (`/score/<ip>`) and RDAP
/// (`/rdap/ip/<ip>`); returns its port.
fn loopback_server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut line = String::new();
                if r.read_line(&mut line).is_err() {
                    return;
                }
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).map_or(true, |n| n == 0) || h == "\r\n" {
                        break;
                    }
                }
                let body = if line.contains("/rdap/") {
                    r#"{"objectClassName":"ip network","name":"EXAMPLE-NET","entities":[{"roles":["registrant"],"vcardArray":["vcard",[["fn",{},"text","Example Org"]]]}]}"#
                } else {
                    r#"{"score": 10, "reason": "panel"}"#
                };
                let mut s = s;
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}

fn verdicts(dir: &std::path::Path, db: Arc<AttackDb>) {
    let clock = SystemClock::shared();
    // The firewall engine in a namespace of our own (root only).
    let mut _ns = None;
    let fw = match (
        nix::unistd::geteuid().is_root(),
        svc::firewall::script::locate("nft"),
    ) {
        (true, Some(nft)) => {
            let name = format!("svcbench-threat-{}", std::process::id());
            let ok = Command::new("ip")
                .args(["netns", "add", &name])
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                _ns = Some(Ns(name.clone()));
                let f = std::fs::File::open(format!("/run/netns/{name}")).unwrap();
                nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
                let store = Store::open(&dir.join("fw.db")).unwrap();
                let fw = Firewall::start(
                    Options {
                        file: FirewallConfig::default(),
                        auto_dry_run: true,
                        extra_tcp_in: vec![],
                        nft,
                    },
                    clock.clone(),
                    store,
                    &Registry::new(),
                )
                .unwrap();
                // 10,000 blocks: half permanent, half for a day.
                let items: Vec<BlockItem> = (0..10_000u32)
                    .map(|i| BlockItem {
                        net: Net::host(addr(i * 7)),
                        reason: "bench".into(),
                        duration: (i % 2 == 0).then(|| Duration::from_secs(86_400)),
                    })
                    .collect();
                fw.block(items, &Actor::operator("bench")).unwrap();
                Some(fw)
            } else {
                None
            }
        }
        _ => None,
    };
    let handle = match &fw {
        Some(f) => Handle::Active(f.clone()),
        None => {
            println!("verdicts: no firewall engine (needs root, ip and nft): blocklist and firewall state answer from the store and absent");
            Handle::Absent("benchmark without root".into())
        }
    };
    let store = Store::open(&dir.join("verdict.db")).unwrap();
    let city = dir.join("city.mmdb");
    let asn = dir.join("asn.mmdb");
    std::fs::write(
        &city,
        mmdb::build(
            6,
            "GeoLite2-City",
            &[(
                "10.0.0.0".parse().unwrap(),
                8,
                mmdb::city_record("AU", "Australia", "Sydney"),
            )],
        ),
    )
    .unwrap();
    std::fs::write(
        &asn,
        mmdb::build(
            4,
            "GeoLite2-ASN",
            &[(
                "10.0.0.0".parse().unwrap(),
                8,
                mmdb::asn_record(64_500, "Example Transit"),
            )],
        ),
    )
    .unwrap();
    let geoip = Arc::new(svc::geoip::GeoIp::from_paths(Some(&city), Some(&asn)).unwrap());
    let feeds = Arc::new(FeedSet::default());
    let nets: Vec<Net> = (0..10_000u32)
        .map(|i| Net::parse(&format!("{}/32", addr(i * 13))).unwrap())
        .collect();
    feeds.insert(
        "drop",
        Loaded {
            score: 60,
            ranges: Arc::new(Ranges::new(&nets)),
            entries: nets.len(),
            refreshed: Some(clock.now().as_microsecond()),
        },
    );
    let reminders = Arc::new(svc::threat::reminders::Reminders::new(
        clock.clone(),
        store.clone(),
        Arc::new(|_| true),
    ));
    let env = sources::Env {
        clock: clock.clone(),
        store: store.clone(),
        db: db.clone(),
        firewall: handle.clone(),
        geoip: Some(geoip.clone()),
        reminders,
        feeds: feeds.clone(),
    };
    let port = loopback_server();
    let roots = Roots::load(None).unwrap();
    let upstream = Arc::new(sources::upstream::Upstream::new(
        &UpstreamConfig {
            url: format!("http://127.0.0.1:{port}/score/"),
            token_env: String::new(),
            cache_ttl_min: 15,
            failure_threshold: 5,
            cooldown_seconds: 30,
        },
        &roots,
        Duration::from_secs(2),
        &env,
    ));
    let rdap = Arc::new(sources::rdap::Rdap::new(
        &RdapConfig {
            url: format!("http://127.0.0.1:{port}/rdap/ip/"),
        },
        &roots,
        Duration::from_secs(2),
        &env,
    ));
    let local: Vec<Arc<dyn Source>> = vec![
        Arc::new(LocalDb {
            db: db.clone(),
            clock: clock.clone(),
        }),
        Arc::new(Blocklist {
            firewall: handle.clone(),
            store: store.clone(),
        }),
        Arc::new(FirewallState {
            firewall: handle.clone(),
        }),
        Arc::new(Geo {
            geoip,
            watched: vec!["AU".into()],
            score: 20,
        }),
        Arc::new(FeedSource { set: feeds }),
    ];
    let mut all = local.clone();
    all.push(rdap);
    all.push(upstream);
    let tc = ThreatConfig::default();
    for (label, set, warm) in [
        ("local sources", local, 0usize),
        ("local + remote (warm caches)", all, 1000),
    ] {
        let agg = Aggregator::new(clock.clone(), &Registry::new());
        let w = tc.clone();
        agg.set_sources(set, Arc::new(move |n| w.weight(n)), Duration::from_secs(2))
            .unwrap();
        let n_addr = 1000u32;
        // Warm: every address once (remote answers land in their caches).
        // addr(3i): one in 7 is blocked, one in 13 is on the feed, all have records.
        for i in 0..n_addr {
            let v = agg.verdict(addr(i * 3), None);
            if warm > 0 && v.lines.iter().any(|l| l.to_json()["status"] == "timeout") {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let mut lat = Vec::with_capacity(100_000);
        let mut verdicts = std::collections::BTreeMap::<&str, u64>::new();
        for k in 0..100_000u32 {
            let ip = addr((k % n_addr) * 3);
            let t = Instant::now();
            let v = agg.verdict(ip, None);
            lat.push(t.elapsed().as_secs_f64() * 1e6);
            *verdicts.entry(v.verdict).or_default() += 1;
        }
        lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let key = if warm > 0 { "remote_warm" } else { "local" };
        println!(
            "verdict, {label}: p50 {:.1} us, p99 {:.1} us, max {:.1} us over {} verdicts ({verdicts:?})",
            pct(&lat, 0.5),
            pct(&lat, 0.99),
            lat[lat.len() - 1],
            lat.len()
        );
        println!("RESULT verdict_{key}_p50_us {:.1}", pct(&lat, 0.5));
        println!("RESULT verdict_{key}_p99_us {:.1}", pct(&lat, 0.99));
        agg.shutdown();
    }
    if let Some(f) = fw {
        f.shutdown();
    }
    store.close();
}

fn main() {
    let n: usize = std::env::var("SVC_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = std::env::temp_dir().join(format!("svc-bench-threat-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let clock = SystemClock::shared();
    let db = ingest_in_memory(n, &clock);
    ingest_through_the_subsystem(n, &dir);
    verdicts(&dir, db);
    let _ = std::fs::remove_dir_all(&dir);
}
