//! Throughput of the access-log collector's parser and detector on one core.
//!
//! Generates a 1,000,000-line `combined` access log with a realistic mix (about 85%
//! browser traffic over 20,000 addresses, crawlers, and WordPress login floods, XML-RPC
//! POSTs, author sweeps, probe-path 404s and scanner agents from a few addresses), writes
//! it to a file, then measures:
//! - `e2e`: FileSource reading the file from its start + parse + classify + detect (the
//!   production path, with the daemon's current crawler oracle, `NoVerification`);
//! - `parse+detect`: the same lines from memory;
//! - `parse`: the parser alone.
//!
//! `ACCESSLOG_BENCH_FILE=/path` keeps the generated file there (used by
//! `benches/accesslog-vs-fail2ban.sh`); otherwise it goes to a private temp directory that is
//! removed afterwards. `ACCESSLOG_BENCH_LINES` changes the line count.
//! Run: `cargo bench --bench accesslog`.

#![allow(
    clippy::disallowed_methods,
    reason = "benchmark fixtures are built with plain std::fs calls"
)]

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use svc::clock::SystemClock;
use svc::crawler::NoVerification;
use svc::watch::accesslog::{parse_line, AccessDetector, AccessThresholds};
use svc::watch::tail::FileSource;

/// On-CPU seconds of the calling thread (not inflated when other processes share the cores).
fn thread_cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map(|ns| ns / 1e9)
        .unwrap_or(f64::NAN)
}

struct Timer(Instant, f64);

impl Timer {
    fn start() -> Timer {
        Timer(Instant::now(), thread_cpu())
    }
    fn stop(&self) -> (f64, f64) {
        (self.0.elapsed().as_secs_f64(), thread_cpu() - self.1)
    }
}

fn per_sec(n: usize, secs: f64) -> f64 {
    n as f64 / secs.max(1e-9)
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.below(v.len() as u64) as usize]
    }
}

const BROWSERS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.39 Mobile Safari/537.36",
];
const CRAWLERS: &[&str] = &[
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
    "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
];
const PAGES: &[&str] = &[
    "/",
    "/blog/2026/11/how-to-host-wordpress/",
    "/wp-content/themes/twentytwentyfour/style.css?ver=1.2",
    "/wp-includes/js/jquery/jquery.min.js?ver=3.7.1",
    "/wp-content/uploads/2026/10/header-1024x576.jpg",
    "/shop/product/blue-widget/?utm_source=newsletter",
    "/wp-admin/admin-ajax.php",
    "/feed/",
    "/contact/",
];
const PROBES: &[&str] = &[
    "/.env",
    "/.git/config",
    "/phpmyadmin/index.php",
    "/wp-config.php.bak",
    "/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php",
    "/cgi-bin/luci",
    "/.aws/credentials",
    "/backup.sql",
];

fn addr(r: &mut Rng, pool: u64) -> String {
    let n = r.below(pool);
    match n % 4 {
        0 => format!("192.0.2.{}", n % 256),
        1 => format!("198.51.100.{}", n % 256),
        2 => format!("203.0.113.{}", n % 256),
        _ => format!("2001:db8:{:x}::{:x}", n >> 8, n & 0xff),
    }
}

fn line(r: &mut Rng, i: u64, out: &mut String) {
    use std::fmt::Write as _;
    out.clear();
    let sec = i / 400;
    let ts = format!(
        "26/Nov/2026:{:02}:{:02}:{:02} +0000",
        (sec / 3600) % 24,
        (sec / 60) % 60,
        sec % 60
    );
    let roll = r.below(1000);
    let (ip, method, target, status, ua) = if roll < 850 {
        let status = if r.below(50) == 0 { 404 } else { 200 };
        let t = if status == 404 {
            "/favicon.ico"
        } else {
            r.pick(PAGES)
        };
        (
            addr(r, 20_000),
            "GET",
            t.to_string(),
            status,
            r.pick(BROWSERS),
        )
    } else if roll < 900 {
        (
            addr(r, 64),
            "GET",
            r.pick(PAGES).to_string(),
            200,
            r.pick(CRAWLERS),
        )
    } else if roll < 930 {
        (
            addr(r, 40),
            "POST",
            "/wp-login.php".into(),
            200,
            r.pick(BROWSERS),
        )
    } else if roll < 945 {
        (
            addr(r, 20),
            "POST",
            "/xmlrpc.php".into(),
            200,
            "Python-urllib/3.11",
        )
    } else if roll < 960 {
        let t = format!("/?author={}", r.below(20) + 1);
        (addr(r, 20), "GET", t, 301, r.pick(BROWSERS))
    } else if roll < 990 {
        (
            addr(r, 30),
            "GET",
            r.pick(PROBES).to_string(),
            404,
            r.pick(BROWSERS),
        )
    } else {
        (
            addr(r, 10),
            "GET",
            "/".into(),
            200,
            "Mozilla/5.00 (Nikto/2.1.6) (Evasions:None) (Test:000003)",
        )
    };
    let bytes = 200 + r.below(30_000);
    let _ = write!(
        out,
        "{ip} - - [{ts}] \"{method} {target} HTTP/1.1\" {status} {bytes} \"https://example.com/\" \"{ua}\""
    );
}

fn main() {
    let n: u64 = std::env::var("ACCESSLOG_BENCH_LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let (path, keep) = match std::env::var_os("ACCESSLOG_BENCH_FILE") {
        Some(p) => (PathBuf::from(p), true),
        None => {
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("accesslog-bench-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("bench dir");
            (dir.join("access.log"), false)
        }
    };
    let mut r = Rng(0x5EED_ACCE_5510_0001);
    let mut buf = String::new();
    let mut text = String::with_capacity(n as usize * 200);
    for i in 0..n {
        line(&mut r, i, &mut buf);
        text.push_str(&buf);
        text.push('\n');
    }
    let mut f = std::fs::File::create(&path).expect("create bench file");
    f.write_all(text.as_bytes()).expect("write bench file");
    f.sync_all().ok();
    drop(f);
    let lines: Vec<&str> = text.lines().collect();
    let nl = lines.len();
    println!(
        "generated {nl} lines ({:.1} MB), file {}",
        text.len() as f64 / 1e6,
        path.display()
    );

    let th = AccessThresholds::default();
    let detector =
        || AccessDetector::new(th.clone(), SystemClock::shared(), Arc::new(NoVerification));
    let runs = 3;
    let mut best = [f64::MAX; 3];
    let mut best_cpu = [f64::MAX; 3];
    let mut findings = 0usize;
    let mut stats = None;
    for _ in 0..runs {
        let t0 = Timer::start();
        let mut tailer = FileSource::from_start(&path);
        let mut det = detector();
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
        assert_eq!(count, nl);
        findings = fnd;
        stats = Some(det.stats());

        let t0 = Timer::start();
        let mut det = detector();
        for l in &lines {
            det.process_line(l, &mut |_| {});
        }
        let (w, c) = t0.stop();
        best[1] = best[1].min(w);
        best_cpu[1] = best_cpu[1].min(c);

        let t0 = Timer::start();
        let mut k = 0usize;
        for l in &lines {
            if let Ok(p) = parse_line(std::hint::black_box(l)) {
                k += p.status as usize;
            }
        }
        std::hint::black_box(k);
        let (w, c) = t0.stop();
        best[2] = best[2].min(w);
        best_cpu[2] = best_cpu[2].min(c);
    }
    println!("findings {findings}, {stats:?} (best of {runs} runs, one core; wall time, and the thread's CPU time)");
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
    println!("RESULT lines {nl}");
    println!("RESULT e2e_lines_per_sec {:.0}", per_sec(nl, best[0]));
    println!(
        "RESULT e2e_cpu_lines_per_sec {:.0}",
        per_sec(nl, best_cpu[0])
    );
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
