//! Throughput of WAF log parsing on one core (issue goal: 300,000 lines/s or better).
//!
//! Builds a 1,000,000-line stream from the real log lines captured from Apache
//! (mod_security2) and nginx (libmodsecurity 3) in `tests/fixtures/waf/` (error logs, JSON
//! and native audit logs) plus the LiteSpeed fixture, with client addresses and unique ids
//! varied per copy, interleaved with ordinary error-log noise (about half the lines: PHP
//! warnings, access-control denials, nginx upstream errors that are not ModSecurity lines),
//! then measures on the calling thread's CPU clock:
//! - `parse`: [`svc::waf::parse::Parser`] alone (events produced, nothing stored);
//! - `handler`: the collector's line handler without a store: parse, de-duplicate,
//!   escalation windows (the production path minus the batched SQLite insert).
//!
//! Run: `cargo bench --bench waflog` (`WAFLOG_BENCH_LINES` changes the line count). Prints,
//! asserts nothing.

#![allow(
    clippy::disallowed_methods,
    reason = "test and benchmark fixtures are built with plain std::fs calls, as an attacker would"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::tz::TimeZone;
use jiff::Timestamp;
use parking_lot::Mutex;
use svc::clock::SystemClock;
use svc::waf::collector::{Counters, Shared, WafHandler};
use svc::waf::escalate::{Exclusions, Thresholds};
use svc::waf::parse::{NoActions, Parser};
use svc::watch::tail::LineHandler;

fn thread_cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map(|ns| ns / 1e9)
        .unwrap_or(f64::NAN)
}

const FIXTURES: &[&str] = &[
    "apache-error.log",
    "nginx-error.log",
    "litespeed-error.log",
    "apache-audit.json",
    "nginx-audit.json",
    "apache-audit-native.log",
    "nginx-audit-native.log",
];

const NOISE: &[&str] = &[
    "[Mon Nov 23 17:10:25.516645 2026] [php:warn] [pid 13180:tid 13186] [client 198.51.100.7:45272] PHP Warning:  Undefined array key \"page\" in /var/www/html/wp-content/plugins/x/x.php on line 42",
    "[Mon Nov 23 17:10:25.530365 2026] [authz_core:error] [pid 13179:tid 13212] [client 198.51.100.8:45278] AH01630: client denied by server configuration: /var/www/html/.git",
    "2026/11/23 17:10:25 [error] 1234#1234: *77 upstream timed out (110: Connection timed out) while reading response header from upstream, client: 203.0.113.4, server: example.test, request: \"GET / HTTP/1.1\", upstream: \"fastcgi://unix:/run/php/php-fpm.sock\", host: \"example.test\"",
    "[Mon Nov 23 17:10:26.001000 2026] [ssl:info] [pid 13180:tid 13190] [client 192.0.2.50:51000] AH01964: Connection to child 3 established (server example.test:443)",
];

fn build(lines: usize) -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/waf/");
    let mut blocks: Vec<Vec<String>> = Vec::new();
    for f in FIXTURES {
        let text = std::fs::read_to_string(format!("{dir}{f}")).expect("fixture");
        blocks.push(text.lines().map(str::to_string).collect());
    }
    let mut out = Vec::with_capacity(lines);
    let mut copy = 0u32;
    'outer: loop {
        copy += 1;
        let ip = format!("203.0.{}.{}", (copy / 250) % 250, copy % 250 + 1);
        for b in &blocks {
            for l in b {
                if out.len() >= lines {
                    break 'outer;
                }
                let l = l
                    .replace("127.0.0.1", &ip)
                    .replace("::1", &format!("2001:db8::{copy:x}"))
                    .replace("unique_id \"", &format!("unique_id \"{copy}-"))
                    .replace("\"unique_id\":\"", &format!("\"unique_id\":\"{copy}-"));
                out.push(l);
                if out.len() < lines {
                    out.push(NOISE[out.len() % NOISE.len()].to_string());
                }
            }
        }
    }
    out
}

fn main() {
    let n: usize = std::env::var("WAFLOG_BENCH_LINES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let lines = build(n);
    let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
    println!(
        "waflog: {} lines, {:.1} MB (real Apache/nginx/LiteSpeed ModSecurity lines with varied addresses, half noise)",
        lines.len(),
        bytes as f64 / 1e6
    );
    let now = Timestamp::now();
    for round in 1..=3 {
        let mut p = Parser::new(TimeZone::UTC);
        let mut out = Vec::new();
        let mut events = 0usize;
        let (w, c) = (Instant::now(), thread_cpu());
        for l in &lines {
            p.line(l, now, &NoActions, &mut out);
            events += out.len();
            out.clear();
        }
        p.finish(now, &NoActions, &mut out);
        let (wall, cpu) = (w.elapsed().as_secs_f64(), thread_cpu() - c);
        println!(
            "round {round} parse:   {:>10.0} lines/s CPU ({:>10.0} wall), {:.0} ns/line, {events} events, {} unparsed",
            lines.len() as f64 / cpu,
            lines.len() as f64 / wall,
            cpu * 1e9 / lines.len() as f64,
            p.counters.unparsed,
        );

        let shared = Shared {
            exclusions: Exclusions::new([]),
            thresholds: Arc::new(Mutex::new(Thresholds {
                denies: 3,
                window: Duration::from_secs(600),
                max_addresses: 65_536,
            })),
            counters: Arc::new(Counters::default()),
            actions: Arc::new(NoActions),
            hook: None,
            sink: None,
            country: None,
            retention: Arc::new(Mutex::new((Duration::from_secs(86400), 1_000_000))),
        };
        let counters = shared.counters.clone();
        let mut h = WafHandler::new(shared, None, SystemClock::shared(), TimeZone::UTC);
        let mut findings = 0usize;
        let (w, c) = (Instant::now(), thread_cpu());
        for l in &lines {
            h.line(l, &mut |_| findings += 1);
        }
        h.maintain();
        let (wall, cpu) = (w.elapsed().as_secs_f64(), thread_cpu() - c);
        println!(
            "round {round} handler: {:>10.0} lines/s CPU ({:>10.0} wall), {:.0} ns/line, {} events, {} duplicates, {findings} escalations",
            lines.len() as f64 / cpu,
            lines.len() as f64 / wall,
            cpu * 1e9 / lines.len() as f64,
            counters.events.load(std::sync::atomic::Ordering::Relaxed),
            counters.duplicates.load(std::sync::atomic::Ordering::Relaxed),
        );
    }
}
