//! Cost of incident persistence and of the webhook spool, side by side with the memory-only
//! incidents in the same run.
//!
//! Run: `cargo bench --bench incidents`. Prints figures; asserts nothing.
//! - `observe`: findings/s folded into incidents, memory-only vs persistent (writer thread
//!   running), for a flood of repeats from few addresses and for many new addresses;
//! - `restore`: time to read 10,000 stored incidents back at start;
//! - `spool`: notifications/s committed to `panel.spool`.

#![allow(
    clippy::disallowed_methods,
    reason = "test and benchmark fixtures are built with plain std::fs calls, as an attacker would"
)]

#[allow(dead_code)] // the benchmark uses part of the test harness
#[path = "../tests/it/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use svc::clock::SystemClock;
use svc::findings::{Finding, Severity};
use svc::incidents::Incidents;
use svc::queue::Registry;
use svc::store::Store;

fn findings(n: usize, addresses: usize) -> Vec<Finding> {
    let now = jiff::Timestamp::now();
    (0..n)
        .map(|i| {
            let a = i % addresses;
            let mut f = Finding::new(
                "ssh_bruteforce",
                Severity::High,
                format!(
                    "SSH brute force from 10.{}.{}.{}",
                    a / 65536,
                    (a / 256) % 256,
                    a % 256
                ),
                now,
            );
            f.ip = Some(
                format!("10.{}.{}.{}", a / 65536, (a / 256) % 256, a % 256)
                    .parse()
                    .unwrap(),
            );
            f
        })
        .collect()
}

fn observe_rate(label: &str, inc: &Incidents, batch: &[Finding]) {
    let t0 = Instant::now();
    for f in batch {
        inc.observe(f);
    }
    let dt = t0.elapsed();
    println!(
        "  {label:<44} {:>10.0} findings/s ({} in {:.1} ms)",
        batch.len() as f64 / dt.as_secs_f64(),
        batch.len(),
        dt.as_secs_f64() * 1e3
    );
}

fn persistent(tag: &str) -> (Arc<Incidents>, Store) {
    let dir = common::temp_dir(tag);
    let store = Store::open(&dir.join("svc.db")).unwrap();
    let reg = Registry::new();
    let inc = Incidents::persistent(
        SystemClock::shared(),
        Duration::from_secs(3600),
        store.clone(),
        &reg,
    )
    .unwrap();
    inc.start_writer().unwrap();
    (inc, store)
}

fn main() {
    println!("incident persistence (shared machine: figures are noisy)");
    for (what, n, addresses) in [
        ("repeats from 10 addresses", 200_000, 10),
        ("10,000 distinct addresses", 10_000, 10_000),
    ] {
        println!(" {what}:");
        let batch = findings(n, addresses);
        let mem = Incidents::new(SystemClock::shared(), Duration::from_secs(3600));
        observe_rate("memory only", &mem, &batch);
        let (inc, store) = persistent("bench-inc-observe");
        let writes0 = store.health().commits;
        observe_rate("persistent (writer running)", &inc, &batch);
        let t0 = Instant::now();
        inc.shutdown();
        println!(
            "  {:<44} {:>10.1} ms, {} store commits in all",
            "final flush at shutdown",
            t0.elapsed().as_secs_f64() * 1e3,
            store.health().commits - writes0
        );
        store.close();
    }

    let (inc, store) = persistent("bench-inc-restore");
    for f in findings(10_000, 10_000) {
        inc.observe(&f);
    }
    inc.shutdown();
    let t0 = Instant::now();
    let again = Incidents::persistent(
        SystemClock::shared(),
        Duration::from_secs(3600),
        store.clone(),
        &Registry::new(),
    )
    .unwrap();
    println!(
        " restore of {} incidents at start: {:.1} ms",
        again.list().len(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    store.close();

    let dir = common::temp_dir("bench-spool");
    let store = Store::open(&dir.join("svc.db")).unwrap();
    let spool = svc::alerts::spool::Spool::open(
        store.clone(),
        SystemClock::shared(),
        &Registry::new(),
        svc::alerts::spool::CAPACITY,
    )
    .unwrap();
    let body = vec![b'x'; 1024];
    let n = 2_000;
    let t0 = Instant::now();
    for i in 0..n {
        spool.push(&format!("alert {i}"), &body);
    }
    let dt = t0.elapsed();
    println!(
        "webhook spool: {:.0} notifications/s committed one by one (1 KiB bodies, {n} in {:.0} ms)",
        n as f64 / dt.as_secs_f64(),
        dt.as_secs_f64() * 1e3
    );
    store.close();
}
