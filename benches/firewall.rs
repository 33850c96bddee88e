//! Firewall engine figures, measured against real nftables in a network namespace this
//! benchmark creates (and deletes, also on a panic): the machine's own ruleset is never
//! touched. Run through `benches/firewall.sh`, which adds fail2ban's nftables action
//! banning the same 2,000 addresses in the same run; alone: `cargo bench --bench firewall`
//! (as root).
//!
//! Figures (goals from the issue):
//! 1. 100,000 blocks applied in one call: addresses/s (goal >= 20,000/s).
//! 2. One operator block with 100,000 present, call to kernel commit: p50/p99 (goal p99
//!    <= 50 ms); the element is checked in the kernel for a sample.
//! 3. Memory per tracked block at 100,000 (RSS delta and the tables' own estimate).
//! 4. The 2,000 addresses fail2ban bans: in one call, and one call per address.
//!
//! Prints `RESULT key value` lines; asserts nothing.
#![allow(
    clippy::disallowed_methods,
    reason = "benchmark fixtures (namespaces, temp dirs, /proc) use plain std::fs calls"
)]

use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use svc::clock::SystemClock;
use svc::config::firewall::FirewallConfig;
use svc::firewall::engine::{Actor, BlockItem, Firewall, Options};
use svc::firewall::Net;
use svc::queue::Registry;
use svc::store::Store;

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

/// The i-th of the 2,000 addresses both sides ban (10.200.0.0 upwards).
pub fn f2b_address(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(0x0ac8_0000 + i)
}

fn item(ip: IpAddr, secs: Option<u64>) -> BlockItem {
    BlockItem {
        net: Net::host(ip),
        reason: "bench".into(),
        duration: secs.map(Duration::from_secs),
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn in_kernel(ns: &str, ip: &str) -> bool {
    Command::new("ip")
        .args([
            "netns", "exec", ns, "nft", "get", "element", "inet", "svc", "block4",
        ])
        .arg(format!("{{ {ip} }}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn main() {
    if !nix::unistd::geteuid().is_root() {
        println!("firewall bench: needs root (network namespaces, nftables); skipped");
        return;
    }
    let Some(nft) = svc::firewall::script::locate("nft") else {
        println!("firewall bench: nft is not installed; skipped");
        return;
    };
    let name = format!("svcbench-{}", std::process::id());
    let ok = Command::new("ip")
        .args(["netns", "add", &name])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!("firewall bench: cannot create a network namespace; skipped");
        return;
    }
    let ns = Ns(name);
    let f = std::fs::File::open(format!("/run/netns/{}", ns.0)).unwrap();
    nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();

    let dir = std::env::temp_dir().join(format!("svc-bench-fw-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = Store::open(&dir.join("svc.db")).unwrap();
    let registry = Registry::new();
    let start = |store: &Store, registry: &Arc<Registry>| {
        Firewall::start(
            Options {
                file: FirewallConfig {
                    max_blocks: 1_000_000,
                    ..FirewallConfig::default()
                },
                auto_dry_run: true,
                extra_tcp_in: vec![],
                nft: nft.clone(),
            },
            SystemClock::shared(),
            store.clone(),
            registry,
        )
        .unwrap()
    };
    let fw = start(&store, &registry);
    let op = Actor::operator("bench");

    // 4a. The 2,000 fail2ban addresses in one call (empty table).
    let items: Vec<BlockItem> = (0..2000)
        .map(|i| item(f2b_address(i).into(), None))
        .collect();
    let t = Instant::now();
    fw.block(items, &op).unwrap();
    let bulk2k = t.elapsed().as_secs_f64();
    println!(
        "svc: 2,000 addresses in one call: {:.1} ms = {:.0} addresses/s",
        bulk2k * 1e3,
        2000.0 / bulk2k
    );
    println!("RESULT svc_2000_one_call_seconds {bulk2k:.6}");
    fw.flush_temporary().unwrap();
    for i in 0..2000 {
        let _ = fw.unblock(f2b_address(i).into());
    }
    // 4b. One call per address, like a ban per nft command.
    let t = Instant::now();
    for i in 0..2000 {
        fw.block(vec![item(f2b_address(i).into(), None)], &op)
            .unwrap();
    }
    let single2k = t.elapsed().as_secs_f64();
    println!(
        "svc: 2,000 addresses one call each: {:.2} s = {:.0} addresses/s",
        single2k,
        2000.0 / single2k
    );
    println!("RESULT svc_2000_per_address_seconds {single2k:.6}");
    for i in 0..2000 {
        let _ = fw.unblock(f2b_address(i).into());
    }

    // 1 + 3. 100,000 temporary blocks in one call; memory per tracked block.
    let rss0 = status_kib("VmRSS:");
    let heap0 = fw.heap_bytes();
    let items: Vec<BlockItem> = (0..100_000u32)
        .map(|i| item(Ipv4Addr::from(0x0a00_0000 + i * 3).into(), Some(86_400)))
        .collect();
    let t = Instant::now();
    let out = fw.block(items, &op).unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(out.len(), 100_000);
    let rss1 = status_kib("VmRSS:");
    let heap1 = fw.heap_bytes();
    println!(
        "svc: 100,000 blocks in one call: {secs:.3} s = {:.0} addresses/s (goal >= 20,000/s)",
        100_000.0 / secs
    );
    println!("RESULT svc_100k_addresses_per_sec {:.0}", 100_000.0 / secs);
    let per_rss = (rss1.saturating_sub(rss0) * 1024) as f64 / 100_000.0;
    let per_heap = heap1.saturating_sub(heap0) as f64 / 100_000.0;
    println!(
        "svc: memory per tracked block at 100,000: {per_rss:.0} bytes (RSS delta, includes transient batch buffers), {per_heap:.0} bytes (table entries)"
    );
    println!("RESULT svc_bytes_per_block_rss {per_rss:.0}");
    println!("RESULT svc_bytes_per_block_tables {per_heap:.0}");

    // 2. Single operator blocks beside 100,000.
    let mut lat = Vec::with_capacity(300);
    for i in 0..300u32 {
        let ip = Ipv4Addr::from(0xcb00_7100 + (i % 250) + ((i / 250) << 8));
        let t = Instant::now();
        fw.block(vec![item(ip.into(), None)], &op).unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        if i % 100 == 0 {
            assert!(in_kernel(&ns.0, &ip.to_string()), "{ip} not in nftables");
        }
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    println!(
        "svc: one operator block with 100,000 present, call to kernel commit: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (goal p99 <= 50 ms)",
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        lat[lat.len() - 1]
    );
    println!("RESULT svc_single_block_p99_ms {:.3}", pct(&lat, 0.99));

    // Re-assertion of the whole table (after a flush or at start) at this size.
    let t = Instant::now();
    fw.shutdown();
    drop(fw);
    let fw = start(&store, &registry);
    println!(
        "svc: start with {} stored blocks (load, create table, one batch): {:.2} s",
        fw.blocked_count(),
        t.elapsed().as_secs_f64()
    );
    fw.shutdown();
    store.close();
    let _ = std::fs::remove_dir_all(&dir);
}
