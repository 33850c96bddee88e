//! Performance and hardening reports.

use std::sync::atomic::Ordering;

use serde_json::{json, Map};

use crate::http::{Request, Response};

use super::auth::Caller;
use super::App;

/// (user, system) CPU time in clock ticks from the text of `/proc/<pid>/stat`.
pub fn cpu_ticks(stat: &str) -> Option<(u64, u64)> {
    // The command name (field 2) is in parentheses and may hold spaces or ')'.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state); utime is field 14, stime field 15.
    Some((fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?))
}

/// (RSS bytes, threads) from the text of `/proc/<pid>/status`.
pub fn rss_and_threads(status: &str) -> (Option<u64>, Option<u64>) {
    let mut rss = None;
    let mut threads = None;
    for line in status.lines() {
        if let Some(v) = line.strip_prefix("VmRSS:") {
            rss = v
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .map(|kb| kb * 1024);
        } else if let Some(v) = line.strip_prefix("Threads:") {
            threads = v.trim().parse().ok();
        }
    }
    (rss, threads)
}

fn clock_ticks() -> u64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(n)) if n > 0 => n as u64,
        _ => 100,
    }
}

fn file_len(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// `GET /api/v1/performance`: the daemon's own CPU time, memory, threads, store size and
/// per-queue throughput. Unknown values are `null`.
pub fn performance(app: &App, _req: &Request, _c: &Caller) -> Response {
    let tck = clock_ticks();
    let cpu = crate::fsutil::read_daemon_string(std::path::Path::new("/proc/self/stat"))
        .ok()
        .and_then(|s| cpu_ticks(&s));
    let secs = |t: u64| (t as f64 / tck as f64 * 100.0).round() / 100.0;
    let (rss, threads) =
        crate::fsutil::read_daemon_string(std::path::Path::new("/proc/self/status"))
            .map(|s| rss_and_threads(&s))
            .unwrap_or((None, None));
    let db = app.store.path().to_path_buf();
    let with_suffix = |sfx: &str| {
        let mut s = db.clone().into_os_string();
        s.push(sfx);
        std::path::PathBuf::from(s)
    };
    let (db_bytes, wal_bytes, shm_bytes) = (
        file_len(&db),
        file_len(&with_suffix("-wal")),
        file_len(&with_suffix("-shm")),
    );
    let engine = &app.services.engine;
    let dispatched = engine.counters.dispatched.load(Ordering::Relaxed);
    let suppressed = engine.counters.suppressed.load(Ordering::Relaxed);
    let files_scanned = app
        .services
        .components
        .map()
        .get("files")
        .map(|c| c.events_total);
    let store = app.store.health();
    let mut queues = Map::new();
    for (name, row) in app.services.registry.snapshot() {
        let mut q = json!({
            "waiting": row.waiting,
            "running": row.running,
            "dropped_total": row.dropped_total,
        });
        let processed = match name.as_str() {
            "findings.ingest" => Some(dispatched + suppressed),
            "fanotify.analyzer" => files_scanned,
            _ => None,
        };
        if let Some(p) = processed {
            q["processed_total"] = json!(p);
        }
        queues.insert(name, q);
    }
    let mut out = json!({
        "uptime_seconds": app.uptime_seconds(),
        "pid": app.runtime.pid,
        "cpu": {
            "user_seconds": cpu.map(|c| secs(c.0)),
            "system_seconds": cpu.map(|c| secs(c.1)),
            "clock_ticks_per_second": tck,
        },
        "memory": { "rss_bytes": rss },
        "threads": threads,
        "store": {
            "db_bytes": db_bytes,
            "wal_bytes": wal_bytes,
            "shm_bytes": shm_bytes,
            "total_bytes": db_bytes + wal_bytes + shm_bytes,
        },
        "queues": queues,
        "processed": {
            "findings_dispatched": dispatched,
            "findings_suppressed": suppressed,
            "files_scanned": files_scanned,
            "store_writes": store.writes_ok,
            "store_write_failures": store.writes_failed,
            "store_commits": store.commits,
        },
    });
    if let Some(g) = &app.services.geoip {
        out["geoip"] = g.describe();
    }
    Response::json(200, &out)
}

/// `GET /api/v1/hardening`: the last stored hardening audit report, from memory. It never
/// starts work: when no report is stored yet (no deep scan has run since the store was
/// created) the answer is 200 `{"report": null, "reason": ...}`.
pub fn hardening(app: &App, _req: &Request, _c: &Caller) -> Response {
    match app.services.jobs.hardening() {
        Some(report) => Response::json(200, &report),
        None => Response::json(
            200,
            &json!({ "report": null, "reason": NO_HARDENING_REPORT }),
        ),
    }
}

/// Why `/api/v1/hardening` has no report.
pub const NO_HARDENING_REPORT: &str = "no hardening audit has been stored yet: the deep scan (checks.deep_interval_min) or `svc check` stores one";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_parsers() {
        let stat = "1234 (svc (x) y) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 75 0 0 20 0 9 0 100 1000 200 18446744073709551615";
        assert_eq!(cpu_ticks(stat), Some((250, 75)));
        assert_eq!(cpu_ticks("garbage"), None);
        assert_eq!(cpu_ticks("1 (x) S 1 2"), None);
        let status = "Name:\tsvc\nVmRSS:\t   12345 kB\nThreads:\t9\n";
        assert_eq!(rss_and_threads(status), (Some(12345 * 1024), Some(9)));
        assert_eq!(rss_and_threads(""), (None, None));
    }
}
