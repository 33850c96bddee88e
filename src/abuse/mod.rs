//! Abuse reporting (`[reputation.report]`, issue 15): confirmed abuse goes to a central
//! reporting service or a private collector.
//!
//! ```text
//! auto-block (a block that took effect) --BlockSink, never waits-->
//!   [abuse_reporting.ingress] --writer thread "abuse-ingress"--> dedup + SQLite spool
//!   [abuse_reporting.spool] --one sender thread per destination "abuse-send-<n>"--> HTTPS POST
//! ```
//!
//! Guarantees:
//! - Off by default; read at start (`reputation.report` is a restart key). Only blocks the
//!   firewall made are confirmed abuse: dry-run blocks, manual blocks and exemptions are not
//!   reported. A block reports its address, categories ([`category`]), an evidence summary
//!   (reason and event counts; no account names or log lines) and its time.
//! - Offering never waits: a full ingress (10,000, or `spool_limit` when smaller) refuses
//!   the report and counts one loss on `abuse_reporting.ingress`.
//! - Each report is spooled durably once per destination with the categories not sent to
//!   it within its dedup window (an address and category is never sent twice to one
//!   destination within `dedup_window_hours`, also across restarts), then delivered
//!   at least once: a row is removed only after a 2xx answer (or a final refusal: 400, 413,
//!   422, counted as loss). Failures retry with exponential back-off (5 s doubling to
//!   10 min, or `Retry-After` up to an hour); rows left at shutdown are sent after the
//!   restart.
//! - The API key is read from the environment variable `api_key_env` at each attempt and
//!   never logged; error texts never contain the URL.
//! - Remote URLs are `https://` (plain `http://` only to loopback), checked at load.

pub mod category;
pub mod format;
pub mod spool;

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};
use parking_lot::Mutex;

use crate::clock::SharedClock;
use crate::config::abuse::{ReportConfig, ReportDestination};
use crate::findings::evidence::AttackKind;
use crate::net::https::{Client, Roots};
use crate::queue::{BoundedQueue, Flag, PopError, Registry, RowConfig, RowHandle};
use crate::store::abuse::NewReport;
use crate::store::Store;
use crate::threat::autoblock::{BlockSink, Confirmed};

pub use spool::{Admit, Spool};

/// Why abuse reporting could not be set up.
#[derive(Debug)]
pub enum ReportError {
    /// A queue row could not be built or registered.
    Queue(crate::queue::RowError),
    /// The spool could not be read or cleaned.
    Spool(crate::store::StoreError),
    /// The writer or a sender thread could not be started.
    Spawn {
        thread: &'static str,
        source: std::io::Error,
    },
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::Queue(e) => write!(f, "{e}"),
            ReportError::Spool(e) => write!(f, "{}: {e}", spool::ROW),
            ReportError::Spawn { thread, source } => write!(f, "cannot start {thread}: {source}"),
        }
    }
}

impl std::error::Error for ReportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReportError::Queue(e) => Some(e),
            ReportError::Spool(e) => Some(e),
            ReportError::Spawn { source, .. } => Some(source),
        }
    }
}

/// Name of the ingress row.
pub const INGRESS_ROW: &str = "abuse_reporting.ingress";
/// Ingress capacity at most (smaller when `spool_limit` is).
pub const INGRESS_CAPACITY: usize = 10_000;
/// First retry delay after a failed attempt.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(5);
/// Longest retry delay (without `Retry-After`).
pub const MAX_BACKOFF: Duration = Duration::from_secs(600);
/// Longest `Retry-After` honoured.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);
/// Largest answer read from a destination.
const ANSWER_CAP: u64 = 64 * 1024;
/// How often dedup marks no window covers are forgotten.
const PRUNE_EVERY_US: i64 = 3600 * 1_000_000;

/// One confirmed abuse report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub ip: IpAddr,
    pub categories: Vec<&'static str>,
    /// Evidence summary.
    pub comment: String,
    /// Microseconds since the epoch.
    pub at: i64,
}

impl Report {
    /// The report of a confirmed block, or `None` when no category applies.
    pub fn of_block(c: &Confirmed) -> Option<Report> {
        let categories = category::of_block(c);
        if categories.is_empty() {
            return None;
        }
        let events: Vec<String> = AttackKind::ALL
            .iter()
            .zip(c.counts)
            .filter(|(k, n)| *n > 0 && category::of_kind(**k).is_some())
            .map(|(k, n)| format!("{} {n}", k.name()))
            .collect();
        let why = c.reason.strip_prefix("auto: ").unwrap_or(&c.reason);
        let mut comment = format!("Blocked automatically by svc: {why}");
        if !events.is_empty() {
            comment.push_str(&format!("; events: {}", events.join(", ")));
        }
        Some(Report {
            ip: c.ip.to_canonical(),
            categories,
            comment: format::clean_comment(&comment),
            at: c.at,
        })
    }
}

/// Counters of the ingress side (atomics, since start).
#[derive(Default, Debug)]
pub struct Counters {
    /// Confirmed blocks offered.
    pub offered: AtomicU64,
    /// Confirmed blocks with no report category (not reported).
    pub uncategorized: AtomicU64,
}

/// The running reporter.
pub struct Reporter {
    clock: SharedClock,
    spool: Arc<Spool>,
    ingress: BoundedQueue<Report>,
    _ingress_row: RowHandle,
    dests: Vec<ReportDestination>,
    roots: Roots,
    timeout: Duration,
    stop: AtomicBool,
    stop_tx: Mutex<Option<Sender<()>>>,
    stop_rx: Receiver<()>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    senders: Mutex<Vec<std::thread::JoinHandle<()>>>,
    pub counters: Counters,
    logs: crate::lograte::LogLimiter,
}

impl Reporter {
    /// Opens the spool and registers the rows; `None` when reporting is off. Threads start
    /// with [`Reporter::start`].
    pub fn new(
        cfg: &ReportConfig,
        roots: Roots,
        timeout: Duration,
        clock: SharedClock,
        store: Store,
        registry: &Arc<Registry>,
    ) -> Result<Option<Arc<Reporter>>, ReportError> {
        if !cfg.active() {
            return Ok(None);
        }
        let dests: Vec<(String, Duration)> = cfg
            .destinations
            .iter()
            .map(|d| {
                (
                    d.name.clone(),
                    Duration::from_secs(d.dedup_window_hours * 3600),
                )
            })
            .collect();
        let spool = Arc::new(Spool::open(
            store,
            clock.clone(),
            registry,
            cfg.spool_limit,
            dests,
        )?);
        let ingress = BoundedQueue::new(
            clock.clone(),
            RowConfig::new("reports")
                .capacity(INGRESS_CAPACITY.min(cfg.spool_limit) as u64)
                .running_slots(1),
        )
        .map_err(crate::queue::RowError::at(INGRESS_ROW))
        .map_err(ReportError::Queue)?;
        let ingress_row = registry
            .register(INGRESS_ROW, ingress.health().clone())
            .map_err(crate::queue::RowError::at(INGRESS_ROW))
            .map_err(ReportError::Queue)?;
        let (stop_tx, stop_rx) = bounded(1);
        let logs = crate::lograte::LogLimiter::new(clock.clone(), Duration::from_secs(60), 8);
        Ok(Some(Arc::new(Reporter {
            clock,
            spool,
            ingress,
            _ingress_row: ingress_row,
            dests: cfg.destinations.clone(),
            roots,
            timeout,
            stop: AtomicBool::new(false),
            stop_tx: Mutex::new(Some(stop_tx)),
            stop_rx,
            writer: Mutex::new(None),
            senders: Mutex::new(Vec::new()),
            counters: Counters::default(),
            logs,
        })))
    }

    /// The spool (counters, depth).
    pub fn spool(&self) -> &Arc<Spool> {
        &self.spool
    }

    /// Offers a report (never waits; a full ingress refuses it: one loss).
    pub fn offer(&self, r: Report) {
        self.counters.offered.fetch_add(1, Ordering::Relaxed);
        if self.ingress.try_push(r).is_err() {
            crate::warn_limited!(
                self.logs,
                "ingress_full",
                "",
                "{INGRESS_ROW}: full; an abuse report was dropped"
            );
        }
    }

    /// Starts the ingress writer and one sender per destination.
    pub fn start(self: &Arc<Self>) -> Result<(), ReportError> {
        let me = self.clone();
        let w = std::thread::Builder::new()
            .name("abuse-ingress".into())
            .spawn(move || me.write_loop())
            .map_err(|source| ReportError::Spawn {
                thread: "the abuse-report writer",
                source,
            })?;
        *self.writer.lock() = Some(w);
        for i in 0..self.dests.len() {
            let me = self.clone();
            let t = std::thread::Builder::new()
                .name(format!("abuse-send-{i}"))
                .spawn(move || me.send_loop(i))
                .map_err(|source| ReportError::Spawn {
                    thread: "an abuse-report sender",
                    source,
                })?;
            self.senders.lock().push(t);
        }
        Ok(())
    }

    /// Stops: the ingress is closed and drained into the spool (not a loss), then the
    /// senders stop (a request in progress ends within its deadline).
    pub fn shutdown(&self) {
        self.ingress.close();
        if let Some(w) = self.writer.lock().take() {
            let _ = w.join();
        }
        self.stop.store(true, Ordering::SeqCst);
        self.stop_tx.lock().take();
        for t in self.senders.lock().drain(..) {
            let _ = t.join();
        }
    }

    /// Ingress writer: reports into the durable spool; dedup marks pruned hourly.
    fn write_loop(&self) {
        let mut last_prune = i64::MIN;
        loop {
            let now = self.clock.now().as_microsecond();
            if now.saturating_sub(last_prune) >= PRUNE_EVERY_US {
                self.spool.prune();
                last_prune = now;
            }
            match self.ingress.pop_timeout(Duration::from_secs(1)) {
                Ok(g) => {
                    let (r, _, running) = g.into_parts();
                    let out = self.spool.admit(NewReport {
                        ip: r.ip.to_string(),
                        categories: r.categories.iter().map(|c| c.to_string()).collect(),
                        comment: r.comment,
                        at: r.at,
                    });
                    match out {
                        Admit::Stored | Admit::Uncertain => running.finish(),
                        Admit::Failed => running.lose(),
                    }
                }
                Err(PopError::Timeout) => {}
                Err(PopError::Closed) => return,
            }
        }
    }

    /// Waits `d` or until shutdown; false once stopping.
    fn pause(&self, d: Duration) -> bool {
        let _ = self.stop_rx.recv_timeout(d);
        !self.stop.load(Ordering::SeqCst)
    }

    /// One destination's sender.
    fn send_loop(&self, i: usize) {
        let Some(d) = self.dests.get(i) else { return };
        let Some(wake) = self.spool.waker(i) else {
            return;
        };
        let client = Client::new(&d.url, &self.roots, self.timeout, ANSWER_CAP, 0);
        let mut failures: u32 = 0;
        while !self.stop.load(Ordering::SeqCst) {
            let row = match self.spool.take(i) {
                Ok(Some(row)) => row,
                Ok(None) => {
                    crossbeam_channel::select! {
                        recv(wake) -> _ => {},
                        recv(self.stop_rx) -> _ => {},
                        default(Duration::from_secs(30)) => {},
                    }
                    continue;
                }
                Err(e) => {
                    crate::warn_limited!(
                        self.logs,
                        "spool_read",
                        &d.name,
                        "abuse report destination {}: cannot read the spool: {e}",
                        d.name
                    );
                    if !self.pause(FIRST_BACKOFF) {
                        return;
                    }
                    continue;
                }
            };
            let health = self.spool.health();
            let running = health.start_running();
            let outcome = self.attempt(&client, d, &row);
            running.finish();
            let c = &self.spool.counters;
            match outcome {
                Attempt::Delivered => {
                    failures = 0;
                    health.set_flag(Flag::DeliveryFailed, false);
                    c.delivered.fetch_add(1, Ordering::Relaxed);
                    if let Err(e) = self.spool.remove(i, row.id) {
                        // Sent again later: at least once.
                        crate::warn_limited!(
                            self.logs,
                            "spool_remove",
                            &d.name,
                            "abuse report destination {}: cannot remove a delivered report: {e}",
                            d.name
                        );
                    }
                    log::debug!("abuse report for {} sent to {}", row.ip, d.name);
                }
                Attempt::Rejected(status, why) => {
                    failures = 0;
                    c.rejected.fetch_add(1, Ordering::Relaxed);
                    health.record_loss();
                    crate::warn_limited!(
                        self.logs,
                        "rejected",
                        &d.name,
                        "abuse report destination {} refused the report for {} (HTTP {status}{why}); dropped",
                        d.name,
                        row.ip
                    );
                    if self.spool.remove(i, row.id).is_err() {
                        self.spool.release(i);
                    }
                }
                Attempt::Failed(why, retry_after) => {
                    self.spool.release(i);
                    c.failed_attempts.fetch_add(1, Ordering::Relaxed);
                    health.note_retry_failed();
                    health.set_flag(Flag::DeliveryFailed, true);
                    failures = failures.saturating_add(1);
                    let delay = retry_after.unwrap_or_else(|| backoff(failures));
                    crate::warn_limited!(
                        self.logs,
                        "failed",
                        &d.name,
                        "abuse report destination {}: {why}; retrying in {} s",
                        d.name,
                        delay.as_secs()
                    );
                    if !self.pause(delay) {
                        return;
                    }
                }
            }
        }
    }

    fn attempt(
        &self,
        client: &Client,
        d: &ReportDestination,
        row: &crate::store::abuse::SpoolRow,
    ) -> Attempt {
        let key = if d.api_key_env.is_empty() {
            String::new()
        } else {
            match std::env::var(&d.api_key_env) {
                Ok(k) if !k.is_empty() && !k.chars().any(char::is_control) => k,
                _ => {
                    return Attempt::Failed(
                        format!(
                            "the environment variable {} (api_key_env) is not set or not valid",
                            d.api_key_env
                        ),
                        None,
                    )
                }
            }
        };
        let req = format::build(d.format, row, &key);
        let headers: Vec<(&str, &str)> =
            req.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        match client.post(&d.url, &headers, &req.body) {
            Ok(f) => classify(f.status, f.retry_after, &f.body),
            Err(e) => Attempt::Failed(e.to_string(), None),
        }
    }
}

/// Result of one delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Attempt {
    Delivered,
    /// A final refusal: status and a short excerpt of the answer.
    Rejected(u16, String),
    /// Retry later (`Retry-After` when sent).
    Failed(String, Option<Duration>),
}

/// What an answer means: 2xx delivered; 400, 413 and 422 (a report the destination will
/// never take) final; everything else (401, 403, 404, 408, 429, 5xx, ...) retried, since a
/// fixed key, URL or outage lets the same report through later.
fn classify(status: u16, retry_after: Option<u64>, body: &[u8]) -> Attempt {
    match status {
        200..=299 => Attempt::Delivered,
        400 | 413 | 422 => {
            let text = String::from_utf8_lossy(body);
            let text = crate::text::for_log(text.trim(), 160);
            Attempt::Rejected(
                status,
                if text.is_empty() {
                    String::new()
                } else {
                    format!(": {text}")
                },
            )
        }
        _ => Attempt::Failed(
            format!("HTTP {status}"),
            retry_after.map(|s| Duration::from_secs(s).min(MAX_RETRY_AFTER)),
        ),
    }
}

/// Delay before the next attempt after `failures` failures in a row.
fn backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF.saturating_mul(1u32 << exp).min(MAX_BACKOFF)
}

impl BlockSink for Reporter {
    fn confirmed(&self, c: &Confirmed) {
        match Report::of_block(c) {
            Some(r) => self.offer(r),
            None => {
                self.counters.uncategorized.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests;
