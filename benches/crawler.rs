//! Crawler verification figures (goal from issue 15): 10,000 distinct addresses claiming
//! Googlebot, verified by forward-confirmed reverse DNS against a loopback DNS server:
//! throughput (verifications/s until every job has settled), the cost of the non-blocking
//! `check` on the request path, and memory (RSS growth over the run, bytes per address).
//!
//! Side by side in one run, two DNS servers on loopback answering the same records:
//! the small server of the test harness (`tests/it/common/dnsserver.rs`) and Debian's
//! `dnsmasq` (skipped, and said so, when it is not installed). Address mix: 50 % confirmed
//! (PTR under googlebot.com and a matching A record), 25 % spoofed (PTR under
//! googlebot.com, no A record), 25 % without PTR (NXDOMAIN). Addresses come from the
//! benchmarking range 198.18.0.0/15. Every verification also commits its record to a real
//! SQLite store.
//!
//! Run: `cargo bench --bench crawler`. Prints `RESULT key value` lines; asserts nothing.
//! `SVC_BENCH_ADDRESSES` changes the address count.
#![allow(
    clippy::disallowed_methods,
    reason = "benchmark fixtures (temp dirs, /proc, dnsmasq config) use plain std::fs calls"
)]

#[path = "../tests/it/common/dnsserver.rs"]
mod dnsserver;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use svc::clock::{SharedClock, SystemClock};
use svc::crawler::ranges::RangeSet;
use svc::crawler::{BotCheck, BotOracle, Verifier, VerifierSettings};
use svc::queue::Registry;
use svc::store::Store;

const UA: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

fn addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 0)) + 1 + i as u32)
}

fn host(i: usize) -> String {
    format!("crawl-{i}.googlebot.com")
}

/// 0: confirmed, 1: spoofed, 2 and 3: confirmed / no PTR alternately.
fn kind(i: usize) -> u8 {
    match i % 4 {
        0 | 2 => 0,
        1 => 1,
        _ => 2,
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|v| v.parse().unwrap_or(0)))
        })
        .unwrap_or(0)
}

struct Dnsmasq {
    child: Child,
    dir: std::path::PathBuf,
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_dnsmasq(n: usize) -> Option<(Dnsmasq, SocketAddr)> {
    let bin = ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())?;
    let port = {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
        s.local_addr().ok()?.port()
    };
    let dir = std::env::temp_dir().join(format!("svc-bench-dnsmasq-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let mut conf = format!(
        "port={port}\nlisten-address=127.0.0.1\nbind-interfaces\nno-resolv\nno-hosts\nno-poll\n\
         user=root\ngroup=root\ncache-size=0\nlocal=/in-addr.arpa/\nlocal=/googlebot.com/\n"
    );
    for i in 0..n {
        let ip = addr(i);
        match kind(i) {
            0 => conf.push_str(&format!("host-record={},{ip}\n", host(i))),
            1 => conf.push_str(&format!(
                "ptr-record={},{}\n",
                dnsserver::reverse_name(IpAddr::V4(ip)),
                host(i)
            )),
            _ => {}
        }
    }
    let path = dir.join("dnsmasq.conf");
    std::fs::write(&path, conf).ok()?;
    let child = Command::new(bin)
        .arg("--keep-in-foreground")
        .arg(format!("--conf-file={}", path.display()))
        .arg(format!("--pid-file={}", dir.join("pid").display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let server: SocketAddr = ([127, 0, 0, 1], port).into();
    let guard = Dnsmasq { child, dir };
    // Ready when it answers.
    let r = svc::dns::Resolver::new(vec![server]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if r.ptr(
            IpAddr::V4(addr(0)),
            Instant::now() + Duration::from_millis(200),
        )
        .is_ok()
        {
            return Some((guard, server));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

fn run(label: &str, server: SocketAddr, n: usize) {
    let dir =
        std::env::temp_dir().join(format!("svc-bench-crawler-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = Store::open(&dir.join("svc.db")).unwrap();
    let clock: SharedClock = SystemClock::shared();
    let registry = Registry::new();
    let rss0 = rss_kib();
    let v = Verifier::start(
        VerifierSettings {
            enabled: true,
            operator: Vec::new(),
            dns_server: Some(server),
        },
        RangeSet::default(),
        clock,
        store.clone(),
        &registry,
    )
    .unwrap();
    let t0 = Instant::now();
    let mut check_time = Duration::ZERO;
    let mut refused = 0usize;
    let mut i = 0;
    // Requests arrive as fast as the queue admits them (a full queue answers Unverified,
    // the address is asked again later, as a later request would).
    let mut waiting: Vec<usize> = (0..n).collect();
    while !waiting.is_empty() {
        let mut next = Vec::new();
        for &k in &waiting {
            let c0 = Instant::now();
            let r = v.check(IpAddr::V4(addr(k)), UA);
            check_time += c0.elapsed();
            i += 1;
            match r {
                BotCheck::Pending { .. } => {}
                BotCheck::Unverified { .. } => {
                    refused += 1;
                    next.push(k);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        waiting = next;
        if !waiting.is_empty() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    while !v.idle() {
        std::thread::sleep(Duration::from_millis(5));
    }
    let elapsed = t0.elapsed();
    let rss1 = rss_kib();
    let mut verified = 0;
    let mut spoofed = 0;
    let mut unresolved = 0;
    let c1 = Instant::now();
    for k in 0..n {
        match v.check(IpAddr::V4(addr(k)), UA) {
            BotCheck::Verified { .. } => verified += 1,
            BotCheck::Spoofed { .. } => spoofed += 1,
            BotCheck::Unresolved { .. } => unresolved += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    let cached = c1.elapsed();
    let (history, results) = v.sizes();
    println!("RESULT {label}.addresses {n}");
    println!(
        "RESULT {label}.settled_seconds {:.3}",
        elapsed.as_secs_f64()
    );
    println!(
        "RESULT {label}.verifications_per_second {:.0}",
        n as f64 / elapsed.as_secs_f64()
    );
    println!(
        "RESULT {label}.check_admission_ns_per_call {:.0}",
        check_time.as_nanos() as f64 / i as f64
    );
    println!("RESULT {label}.queue_full_answers {refused}");
    println!(
        "RESULT {label}.check_cached_ns_per_call {:.0}",
        cached.as_nanos() as f64 / n as f64
    );
    println!("RESULT {label}.verified {verified}");
    println!("RESULT {label}.spoofed {spoofed}");
    println!("RESULT {label}.unresolved_no_ptr {unresolved}");
    println!("RESULT {label}.history_entries {history}");
    println!("RESULT {label}.cached_results {results}");
    println!(
        "RESULT {label}.rss_growth_kib {}",
        rss1.saturating_sub(rss0)
    );
    println!(
        "RESULT {label}.rss_bytes_per_address {:.0}",
        (rss1.saturating_sub(rss0) * 1024) as f64 / n as f64
    );
    v.stop();
    store.close();
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let n: usize = std::env::var("SVC_BENCH_ADDRESSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let srv = dnsserver::DnsServer::start();
    for i in 0..n {
        let ip = IpAddr::V4(addr(i));
        match kind(i) {
            0 => {
                srv.ptr(ip, &host(i));
                srv.addr_record(&host(i), ip);
            }
            1 => srv.ptr(ip, &host(i)),
            _ => {}
        }
    }
    run("harness_dns", srv.addr(), n);
    println!("RESULT harness_dns.queries {}", srv.total());
    drop(srv);
    match start_dnsmasq(n) {
        Some((_guard, server)) => run("dnsmasq", server, n),
        None => println!("RESULT dnsmasq.skipped not installed or did not start"),
    }
    let _ = Arc::new(());
}
