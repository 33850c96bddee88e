//! `/api/v1/history` with 1,000,000 history rows: latency of filtered pages, the CSV export,
//! and the daemon's RSS, over real TLS against the release binary.
//!
//! Run: `cargo bench --bench history`. Goals: filtered page p95 under 20 ms; CSV of 5,000
//! rows under 150 ms; RSS under 40 MiB. Prints figures; asserts nothing (timing is noisy on
//! shared machines).
//!
//! The daemon creates the schema on its first start; it is stopped, the rows are written
//! straight into svc.db with rusqlite (the triggers of migration 4 fill the per-day counts
//! and the text index as they would in production), and it is started again. The filled
//! database is kept under `CARGO_TARGET_TMPDIR` and reused while the schema version and row
//! count match; `SVC_BENCH_REFILL=1` rebuilds it. `SVC_BENCH_ROWS` changes the row count,
//! `SVC_BENCH_ITERS` the requests per case.

#![allow(
    clippy::disallowed_methods,
    reason = "test and benchmark fixtures are built with plain std::fs calls, as an attacker would"
)]

#[allow(dead_code)] // the benchmark uses part of the test harness
#[path = "../tests/it/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{params, Connection};

/// Bump when the generated rows or the schema of migration 4 change, so an old cache is not
/// reused.
const GENERATOR_VERSION: u32 = 2;
const DAY_MICROS: i64 = 86_400_000_000;
const SPAN_DAYS: i64 = 90;

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn hex(&mut self, digits: usize) -> String {
        let mut s = String::with_capacity(digits);
        while s.len() < digits {
            s.push_str(&format!("{:016x}", self.next()));
        }
        s.truncate(digits);
        s
    }

    fn ipv4(&mut self) -> String {
        format!(
            "{}.{}.{}.{}",
            1 + self.below(223),
            self.below(256),
            self.below(256),
            1 + self.below(254)
        )
    }
}

/// (check, severity level, relative weight)
const CHECKS: [(&str, u8, u64); 16] = [
    ("ssh_bruteforce", 1, 200),
    ("webshell", 2, 20),
    ("wp_login_bruteforce", 0, 250),
    ("suid_binary", 1, 10),
    ("cron_suspicious", 2, 10),
    ("php_malware", 2, 20),
    ("ftp_bruteforce", 0, 80),
    ("mail_spam_outbound", 1, 40),
    ("modsec_block", 0, 200),
    ("perf_error_log", 0, 50),
    ("world_writable", 0, 40),
    ("root_login", 1, 20),
    ("htaccess_injection", 1, 10),
    ("db_trigger_backdoor", 2, 5),
    ("port_scan", 0, 60),
    ("smtp_auth_bruteforce", 0, 80),
];
const SIGNATURES: [&str; 5] = [
    "eval_post",
    "base64_gzinflate",
    "preg_replace_e",
    "assert_get",
    "system_request",
];

struct Gen {
    rng: Rng,
    total_weight: u64,
}

/// One realistic history row: (at, check, severity, message, details, account, ip, path).
type GenRow = (
    i64,
    &'static str,
    u8,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
);

impl Gen {
    fn new() -> Gen {
        Gen {
            rng: Rng(0x5eed_1234_abcd_ef01),
            total_weight: CHECKS.iter().map(|c| c.2).sum(),
        }
    }

    fn row(&mut self, at: i64) -> GenRow {
        let mut pick = self.rng.below(self.total_weight);
        let (check, sev, _) = *CHECKS
            .iter()
            .find(|c| {
                if pick < c.2 {
                    true
                } else {
                    pick -= c.2;
                    false
                }
            })
            .unwrap_or(&CHECKS[0]);
        let account = format!("user{:04}", self.rng.below(500));
        let r = &mut self.rng;
        if check.contains("bruteforce")
            || matches!(check, "port_scan" | "modsec_block" | "root_login")
        {
            let ip = r.ipv4();
            let message = format!(
                "{}: {} failed attempts from {ip}",
                check.replace('_', " "),
                5 + r.below(500)
            );
            let details = format!(
                "window=60s; service={}; last_user={account}; rule_id={}",
                check.split('_').next().unwrap_or(check),
                900_000 + r.below(99_999)
            );
            let account = (r.below(2) == 0).then_some(account);
            (at, check, sev, message, details, account, Some(ip), None)
        } else if matches!(
            check,
            "webshell"
                | "php_malware"
                | "htaccess_injection"
                | "world_writable"
                | "suid_binary"
                | "perf_error_log"
        ) {
            let path = format!(
                "/home/{account}/public_html/wp-content/uploads/{}/{:02}/{}.php",
                2019 + r.below(8),
                1 + r.below(12),
                r.hex(8)
            );
            let message = format!("{} detected in {path}", check.replace('_', " "));
            let details = format!(
                "rule {} (high confidence) matched at offset {}: {}; sha256={}",
                SIGNATURES[r.below(5) as usize],
                r.below(90_000),
                "@eval(base64_decode($_POST['x']));",
                r.hex(64)
            );
            (
                at,
                check,
                sev,
                message,
                details,
                Some(account),
                None,
                Some(path),
            )
        } else {
            let message = format!("{} for account {account}", check.replace('_', " "));
            let details = format!("count={}; queue_id={}", 1 + r.below(9_999), r.hex(12));
            (at, check, sev, message, details, Some(account), None, None)
        }
    }
}

/// Writes `n` rows spread over the last [`SPAN_DAYS`] days (mostly in time order, a few
/// late arrivals up to ten minutes old, as replays produce).
fn fill(db: &Path, n: usize, now_micros: i64) -> Duration {
    let t0 = Instant::now();
    let mut c = Connection::open(db).unwrap();
    c.busy_timeout(Duration::from_secs(30)).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.pragma_update(None, "synchronous", "NORMAL").unwrap();
    let mut g = Gen::new();
    let start = now_micros - SPAN_DAYS * DAY_MICROS;
    let step = (SPAN_DAYS * DAY_MICROS) / n as i64;
    let mut written = 0usize;
    while written < n {
        let tx = c.transaction().unwrap();
        {
            let mut st = tx
                .prepare_cached(
                    "INSERT INTO history(at, check_name, severity, message, details, account, ip, path) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)",
                )
                .unwrap();
            for _ in 0..50_000.min(n - written) {
                let mut at = start + written as i64 * step + g.rng.below(step as u64) as i64;
                if g.rng.below(200) == 0 {
                    at -= g.rng.below(600_000_000) as i64;
                }
                let (at, check, sev, message, details, account, ip, path) = g.row(at);
                st.execute(params![at, check, sev, message, details, account, ip, path])
                    .unwrap();
                written += 1;
            }
        }
        tx.commit().unwrap();
        if written % 200_000 == 0 {
            println!(
                "  filled {written} rows ({:.0} s)",
                t0.elapsed().as_secs_f64()
            );
        }
    }
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    t0.elapsed()
}

fn user_version(db: &Path) -> i64 {
    Connection::open(db)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

fn row_count(db: &Path) -> i64 {
    Connection::open(db)
        .unwrap()
        .query_row("SELECT count(*) FROM history", [], |r| r.get(0))
        .unwrap_or(-1)
}

fn remove_wal(db: &Path) {
    for ext in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(PathBuf::from(format!("{}{ext}", db.display())));
    }
}

fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
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

struct Case {
    name: &'static str,
    query: String,
}

fn main() {
    let rows = env_num("SVC_BENCH_ROWS", 1_000_000);
    let iters = env_num("SVC_BENCH_ITERS", 200);
    let dir = common::temp_dir("bench-history");
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        format!(
            "{}[files]\nwatch = []\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n",
            common::base_config(&state)
        ),
    )
    .unwrap();
    let env = [("TZ", "Europe/Berlin")];
    let mut d = common::Daemon::start_with(dir.clone(), config.clone(), state.clone(), &env);
    d.stop();
    let db = state.join("svc.db");
    // Fold the daemon's write-ahead log into the file before copying or filling it.
    Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    remove_wal(&db);
    let version = user_version(&db);
    let cache_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-history");
    std::fs::create_dir_all(&cache_dir).unwrap();
    let cached = cache_dir.join(format!(
        "svc-{rows}-schema{version}-gen{GENERATOR_VERSION}.db"
    ));
    let refill = std::env::var("SVC_BENCH_REFILL").is_ok_and(|v| v == "1");
    let now = jiff::Timestamp::now();
    // The rows end "now" when generated; a cached copy is older but the filters below are
    // relative to the newest row, so they select the same shapes.
    if !refill && cached.exists() && row_count(&cached) == rows as i64 {
        std::fs::copy(&cached, &db).unwrap();
        println!("reused {} ({rows} rows)", cached.display());
    } else {
        println!("filling {rows} rows into {} ...", db.display());
        let took = fill(&db, rows, now.as_microsecond());
        println!("filled {rows} rows in {:.1} s", took.as_secs_f64());
        std::fs::copy(&db, &cached).unwrap();
    }
    let db_mib = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0) as f64 / 1048576.0;
    let newest: i64 = Connection::open(&db)
        .unwrap()
        .query_row("SELECT max(at) FROM history", [], |r| r.get(0))
        .unwrap();
    let newest = jiff::Timestamp::from_microsecond(newest).unwrap();
    let days_ago = |days: i64| {
        (newest - jiff::SignedDuration::from_hours(24 * days))
            .to_zoned(jiff::tz::TimeZone::get("Europe/Berlin").unwrap())
            .date()
            .to_string()
    };
    let instant_ago = |hours: i64| (newest - jiff::SignedDuration::from_hours(hours)).to_string();

    let d = common::Daemon::start_with(dir.clone(), config, state, &env);
    let pid = d.pid();
    println!(
        "daemon pid {pid}; svc.db {db_mib:.0} MiB; RSS after start {:.1} MiB",
        status_kib(pid, "VmRSS:") as f64 / 1024.0
    );

    let enc = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    let cases = vec![
        Case {
            name: "no filter",
            query: String::new(),
        },
        Case {
            name: "severity=critical",
            query: "severity=critical".into(),
        },
        Case {
            name: "severity=high,critical",
            query: "severity=high,critical".into(),
        },
        Case {
            name: "checks=webshell",
            query: "checks=webshell".into(),
        },
        Case {
            name: "checks=db_trigger_backdoor,suid_binary",
            query: "checks=db_trigger_backdoor,suid_binary".into(),
        },
        Case {
            name: "checks=2 + severity=warning",
            query: "checks=ssh_bruteforce,wp_login_bruteforce&severity=warning".into(),
        },
        Case {
            name: "last 7 days (dates)",
            query: format!("from={}&to={}", days_ago(7), days_ago(0)),
        },
        Case {
            name: "30 days ago, 1 day (RFC 3339) + critical",
            query: format!(
                "from={}&to={}&severity=critical",
                enc(&instant_ago(30 * 24)),
                enc(&instant_ago(29 * 24))
            ),
        },
        Case {
            name: "60 days + high,critical + 3 checks",
            query: format!(
                "from={}&severity=high,critical&checks=webshell,php_malware,root_login",
                days_ago(60)
            ),
        },
        Case {
            name: "warning offset=5000",
            query: "severity=warning&offset=5000".into(),
        },
        Case {
            name: "limit=1000",
            query: "limit=1000".into(),
        },
        Case {
            name: "search=user0042 (account)",
            query: "search=user0042".into(),
        },
        Case {
            name: "search=eval_post (dense)",
            query: "search=eval_post".into(),
        },
        Case {
            name: "search=bruteforce (very dense)",
            query: "search=bruteforce".into(),
        },
        Case {
            name: "search=SHA prefix (rare)",
            query: "search=deadbee".into(),
        },
        Case {
            name: "search=user0042 + last 14 days",
            query: format!("search=user0042&from={}", days_ago(14)),
        },
        Case {
            name: "search=user0042 + 40-50 days ago",
            query: format!("search=user0042&from={}&to={}", days_ago(50), days_ago(40)),
        },
        Case {
            name: "search=42 (short, scan)",
            query: "search=42".into(),
        },
    ];
    let auth = format!("Bearer {}", common::READ);
    let mut client = d.client();
    let mut get = |path: &str| -> (u16, usize, Duration, String) {
        let t0 = Instant::now();
        let r = client.send("GET", path, &[("Authorization", &auth)], b"");
        let took = t0.elapsed();
        let total = if r.status == 200 && r.header("content-type") == Some("application/json") {
            let v = r.json();
            format!("total {} truncated {}", v["total"], v["truncated"])
        } else {
            String::new()
        };
        (r.status, r.body.len(), took, total)
    };
    println!("\n{iters} requests per case on one keep-alive TLS connection (ms):");
    println!(
        "{:<44} {:>7} {:>7} {:>7} {:>7}  result",
        "case", "p50", "p95", "p99", "max"
    );
    let mut worst_p95: f64 = 0.0;
    for case in &cases {
        let path = format!("/api/v1/history?{}", case.query);
        let (status, _, _, info) = get(&path);
        assert_eq!(status, 200, "{path}");
        let mut ms: Vec<f64> = (0..iters)
            .map(|_| get(&path).2.as_secs_f64() * 1e3)
            .collect();
        ms.sort_by(|a, b| a.total_cmp(b));
        let p95 = pct(&ms, 0.95);
        worst_p95 = worst_p95.max(p95);
        println!(
            "{:<44} {:>7.2} {:>7.2} {:>7.2} {:>7.2}  {info}",
            case.name,
            pct(&ms, 0.5),
            p95,
            pct(&ms, 0.99),
            ms[ms.len() - 1]
        );
    }
    println!("worst p95 over the cases: {worst_p95:.2} ms (goal < 20 ms)");
    let rss = |when: &str| {
        println!(
            "RSS {when}: VmRSS {:.1} MiB, VmHWM {:.1} MiB",
            status_kib(pid, "VmRSS:") as f64 / 1024.0,
            status_kib(pid, "VmHWM:") as f64 / 1024.0
        )
    };
    rss("after the page cases");

    println!("\nCSV export (newest 5,000 matches), 30 requests each (ms):");
    for (name, q) in [
        ("csv no filter", String::new()),
        ("csv severity=warning", "severity=warning".to_string()),
        (
            "csv last 30 days + checks=2",
            format!("from={}&checks=ssh_bruteforce,modsec_block", days_ago(30)),
        ),
        ("csv search=user0042", "search=user0042".to_string()),
    ] {
        let path = format!("/api/v1/history/csv?{q}");
        let (status, bytes, _, _) = get(&path);
        assert_eq!(status, 200);
        let mut ms: Vec<f64> = (0..30).map(|_| get(&path).2.as_secs_f64() * 1e3).collect();
        ms.sort_by(|a, b| a.total_cmp(b));
        println!(
            "{name:<44} p50 {:>7.2}  p95 {:>7.2}  max {:>7.2}  ({:.0} KiB)",
            pct(&ms, 0.5),
            pct(&ms, 0.95),
            ms[ms.len() - 1],
            bytes as f64 / 1024.0
        );
    }

    rss("after the CSV cases");
    println!("\nstats routes, 30 requests each (ms):");
    for path in [
        "/api/v1/stats",
        "/api/v1/stats/trend",
        "/api/v1/stats/timeline",
    ] {
        let (status, _, _, _) = get(path);
        assert_eq!(status, 200);
        let mut ms: Vec<f64> = (0..30).map(|_| get(path).2.as_secs_f64() * 1e3).collect();
        ms.sort_by(|a, b| a.total_cmp(b));
        println!(
            "{path:<44} p50 {:>7.2}  p95 {:>7.2}",
            pct(&ms, 0.5),
            pct(&ms, 0.95)
        );
    }

    rss("after the stats routes");
    // Parallel load: every HTTP worker may hold a read connection with its page cache.
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let addr = d.addr;
            let cert = d.cert();
            let auth = auth.clone();
            std::thread::spawn(move || {
                let mut c = common::Client::connect(addr, cert);
                for q in [
                    "severity=critical",
                    "search=eval_post",
                    "limit=1000",
                    "checks=webshell",
                ] {
                    for _ in 0..10 {
                        let r = c.send(
                            "GET",
                            &format!("/api/v1/history?{q}"),
                            &[("Authorization", &auth)],
                            b"",
                        );
                        assert_eq!(r.status, 200);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    println!(
        "\ndaemon RSS after the runs (incl. 8 parallel clients): VmRSS {:.1} MiB, VmHWM (peak) {:.1} MiB (goal < 40 MiB)",
        status_kib(pid, "VmRSS:") as f64 / 1024.0,
        status_kib(pid, "VmHWM:") as f64 / 1024.0
    );
    drop(d);
    let _ = std::fs::remove_dir_all(dir);
}
