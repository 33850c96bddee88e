//! The mail-log collector: a [`Follower`] over the MTA's log files (`logs.mail`, detected
//! when empty: [`detect_logs`]) whose line handler parses each line ([`parse_line`]) into
//! the [`Ledger`]; the ledger's records go through the `mail.delivery` queue (64 slots,
//! one slot per line that produced records) to a writer thread that applies them to the
//! store. Findings go to the findings engine through the follower.
//!
//! Rows: `mail.file_source` (bytes of the logs not read yet; the follower's row) and
//! `mail.delivery`. Watcher row: `mail_log`. Checkpoint keys: `mail:<path>`.
//!
//! Guarantees:
//! - Backpressure, not loss: when `mail.delivery` is full the reader waits (the backlog
//!   stays in the file, shown by `mail.file_source`); a batch still refused after
//!   [`DELIVERY_WAIT`] is a counted loss on `mail.delivery`. A store write that fails is a
//!   counted loss too (`state_io` on the row).
//! - Lines replayed at start (the open hour of the per-account count) rebuild the ledger's
//!   counters only: their records were written before the restart and are not written
//!   again, and they raise no finding.
//! - [`MailLogCollector::stop`] stops the reader, lets the writer drain what was queued,
//!   and removes both rows, so a restart (reload) can register them again.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use jiff::tz::TimeZone;

use crate::clock::SharedClock;
use crate::components::Components;
use crate::findings::{Engine, Finding};
use crate::lograte::LogLimiter;
use crate::queue::{BoundedQueue, PopError, Registry, RowConfig, RowHandle};
use crate::store::mail_accounts::MailWrite;
use crate::store::Store;
use crate::watch::tail::{file_source_row, Follower, LineHandler, WakeHandle};

use super::journal::{JournalSettings, JournalSource};
use super::ledger::{Ledger, LedgerSettings};
use super::parse::{parse_line, Mta};
use super::queue;

/// The follower's row.
pub const FILE_ROW: &str = "mail.file_source";
/// The delivery queue's row.
pub const DELIVERY_ROW: &str = "mail.delivery";
/// Slots of `mail.delivery`.
pub const DELIVERY_SLOTS: u64 = 64;
/// How long the reader waits for a free `mail.delivery` slot before the batch is lost.
pub const DELIVERY_WAIT: Duration = Duration::from_secs(10);
/// The watcher row.
pub const COMPONENT: &str = "mail_log";
/// Prefix of the checkpoint keys.
pub const KEY_PREFIX: &str = "mail";
/// How often the queue is listed.
pub const QUEUE_INTERVAL: Duration = Duration::from_secs(300);

/// The queue sampler's settings: which MTA, the listing program, the size limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueSettings {
    pub mta: Mta,
    pub program: PathBuf,
    pub size_limit: u64,
}

impl QueueSettings {
    /// The MTA of `paths` (Exim when a path names it, else Postfix) and its listing
    /// program when installed.
    pub fn detect(paths: &[PathBuf], size_limit: u64) -> Option<QueueSettings> {
        const EXIM: &[&str] = &["/usr/sbin/exim", "/usr/sbin/exim4", "/usr/bin/exim"];
        // Without a log path (the journal source): whichever MTA is installed.
        let exim = if paths.is_empty() {
            EXIM.iter().any(|p| Path::new(p).is_file())
        } else {
            paths.iter().any(|p| p.to_string_lossy().contains("exim"))
        };
        let (mta, programs): (Mta, &[&str]) = if exim {
            (Mta::Exim, EXIM)
        } else {
            (Mta::Postfix, &["/usr/sbin/postqueue", "/usr/bin/postqueue"])
        };
        let program = programs.iter().map(PathBuf::from).find(|p| p.is_file())?;
        Some(QueueSettings {
            mta,
            program,
            size_limit,
        })
    }
}

/// The replay window: the per-account count's hour.
pub const WINDOW: Duration = Duration::from_secs(3600);

/// Log files tried, in order, when `logs.mail` is empty: Debian's Exim, Exim elsewhere
/// (RHEL, cPanel), then the syslog mail file (Postfix on Debian, RHEL).
pub const CANDIDATES: &[&str] = &[
    "/var/log/exim4/mainlog",
    "/var/log/exim/main.log",
    "/var/log/exim_mainlog",
    "/var/log/mail.log",
    "/var/log/maillog",
];

/// The logs to follow: `configured` when not empty, else the first existing candidate
/// below `root` (`/` in production).
pub fn detect_logs(configured: &[PathBuf], root: &Path) -> Vec<PathBuf> {
    if !configured.is_empty() {
        return configured.to_vec();
    }
    CANDIDATES
        .iter()
        .map(|c| root.join(c.trim_start_matches('/')))
        .find(|p| p.is_file())
        .into_iter()
        .collect()
}

struct Handler {
    ledger: Ledger,
    queue: BoundedQueue<Vec<MailWrite>>,
    limiter: LogLimiter,
}

impl LineHandler for Handler {
    fn line(&mut self, line: &str, emit: &mut dyn FnMut(Finding)) {
        let Some(p) = parse_line(line) else { return };
        self.ledger.handle(&p, emit);
        if self.ledger.writes_len() == 0 {
            return;
        }
        let batch = self.ledger.take_writes();
        if let Err(refused) = self.queue.push_timeout(batch, DELIVERY_WAIT) {
            // Counted on the row as one loss (a closed queue at shutdown is not a loss).
            drop(refused);
            crate::warn_limited!(
                self.limiter,
                "mail-log",
                "full",
                "mail log: the delivery queue stayed full; records of a line were dropped"
            );
        }
    }

    fn replay(&mut self, line: &str) {
        if let Some(p) = parse_line(line) {
            self.ledger.handle(&p, &mut |_| {});
            let _ = self.ledger.take_writes();
        }
    }
}

/// Why the collector could not start.
#[derive(Debug)]
pub enum StartError {
    /// A queue row could not be built or registered.
    Row(crate::queue::RowError),
    /// The reader or its wake pipe could not be created.
    Io(std::io::Error),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Row(e) => write!(f, "mail log: {e}"),
            StartError::Io(e) => write!(f, "mail log: {e}"),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Row(e) => Some(e),
            StartError::Io(e) => Some(e),
        }
    }
}

/// Where the lines come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Log files (row `mail.file_source`).
    Files(Vec<PathBuf>),
    /// The systemd journal (row `mail.journal_source`).
    Journal(JournalSettings),
}

/// A running mail-log collector.
pub struct MailLogCollector {
    engine: Arc<Engine>,
    stop: Arc<AtomicBool>,
    wake: Option<WakeHandle>,
    reader: Option<JoinHandle<()>>,
    writer: Option<JoinHandle<()>>,
    sampler: Option<JoinHandle<()>>,
    queue: BoundedQueue<Vec<MailWrite>>,
    paths: Vec<PathBuf>,
    _rows: Vec<RowHandle>,
}

impl MailLogCollector {
    /// Starts following `paths` (already detected; see [`detect_logs`]).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        paths: &[PathBuf],
        settings: LedgerSettings,
        queue_settings: Option<QueueSettings>,
        tz: TimeZone,
        clock: SharedClock,
        engine: &Arc<Engine>,
        registry: &Arc<Registry>,
        components: &Components,
        store: &Store,
    ) -> Result<MailLogCollector, StartError> {
        Self::start_from(
            Source::Files(paths.to_vec()),
            settings,
            queue_settings,
            tz,
            clock,
            engine,
            registry,
            components,
            store,
        )
    }

    /// Starts reading `source`.
    #[allow(clippy::too_many_arguments)]
    pub fn start_from(
        source: Source,
        settings: LedgerSettings,
        queue_settings: Option<QueueSettings>,
        tz: TimeZone,
        clock: SharedClock,
        engine: &Arc<Engine>,
        registry: &Arc<Registry>,
        components: &Components,
        store: &Store,
    ) -> Result<MailLogCollector, StartError> {
        let mut rows = Vec::new();
        let queue = BoundedQueue::new(
            clock.clone(),
            RowConfig::new("records").capacity(DELIVERY_SLOTS),
        )
        .map_err(crate::queue::RowError::at(DELIVERY_ROW))
        .map_err(StartError::Row)?;
        rows.push(
            registry
                .register(DELIVERY_ROW, queue.health().clone())
                .map_err(crate::queue::RowError::at(DELIVERY_ROW))
                .map_err(StartError::Row)?,
        );
        let handler = Handler {
            ledger: Ledger::new(settings, clock.clone(), tz),
            queue: queue.clone(),
            limiter: LogLimiter::per_minute(clock.clone()),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (paths, wake, reader) = match source {
            Source::Files(paths) => {
                let health = file_source_row(clock.clone());
                rows.push(
                    registry
                        .register(FILE_ROW, health.clone())
                        .map_err(crate::queue::RowError::at(FILE_ROW))
                        .map_err(StartError::Row)?,
                );
                let component = components.add(COMPONENT, "log_watcher");
                component.set_detail(
                    paths
                        .iter()
                        .map(|p| crate::text::escape_path(p).into_owned())
                        .collect::<Vec<_>>()
                        .join(", "),
                );
                let follower = Follower::new(
                    "mail log",
                    KEY_PREFIX,
                    &paths,
                    WINDOW,
                    handler,
                    store,
                    engine.clone(),
                    health,
                    component,
                    clock.clone(),
                )
                .map_err(StartError::Io)?;
                let wake = Some(follower.wake_handle());
                let reader = std::thread::Builder::new()
                    .name("mail-log".into())
                    .spawn(move || {
                        follower.run(&flag);
                    })
                    .map_err(StartError::Io)?;
                (paths, wake, reader)
            }
            Source::Journal(js) => {
                let component = components.add(COMPONENT, "log_watcher");
                component.set_detail("systemd journal (SYSLOG_FACILITY=2)".to_string());
                let e = engine.clone();
                let mut source = JournalSource::new(
                    js,
                    handler,
                    store.clone(),
                    Arc::new(move |f| {
                        e.submit(f);
                    }),
                    clock.clone(),
                    registry.clone(),
                );
                let reader = std::thread::Builder::new()
                    .name("mail-journal".into())
                    .spawn(move || source.run(&flag))
                    .map_err(StartError::Io)?;
                (Vec::new(), None, reader)
            }
        };
        let writer = {
            let queue = queue.clone();
            let store = store.clone();
            let limiter = LogLimiter::per_minute(clock.clone());
            std::thread::Builder::new()
                .name("mail-log-store".into())
                .spawn(move || write_loop(&queue, &store, &limiter))
                .map_err(StartError::Io)?
        };
        let sampler = match queue_settings {
            Some(qs) => {
                let (queue, engine, stop, clock) =
                    (queue.clone(), engine.clone(), stop.clone(), clock.clone());
                Some(
                    std::thread::Builder::new()
                        .name("mail-queue".into())
                        .spawn(move || sample_loop(&qs, &queue, &engine, &stop, &clock))
                        .map_err(StartError::Io)?,
                )
            }
            None => None,
        };
        Ok(MailLogCollector {
            engine: engine.clone(),
            stop,
            wake,
            reader: Some(reader),
            writer: Some(writer),
            sampler,
            queue,
            paths,
            _rows: rows,
        })
    }

    /// The followed files (none for the journal).
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(w) = &self.wake {
            w.wake();
        }
        if let Some(t) = self.reader.take() {
            let _ = t.join();
        }
        if let Some(t) = self.sampler.take() {
            let _ = t.join();
        }
        // The writer drains what is queued, then sees the queue closed.
        self.queue.close();
        if let Some(t) = self.writer.take() {
            let _ = t.join();
        }
    }

    /// Stops the reader, writes what was queued, waits (up to 5 s) for the submitted
    /// findings and positions to commit, and removes the rows.
    pub fn stop(mut self) {
        self.shutdown();
        if !self.engine.flush(Duration::from_secs(5)) {
            log::warn!("mail log: positions not committed within 5 s of stopping");
        }
    }
}

impl Drop for MailLogCollector {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Starts the collector as `cfg` asks (`logs.mail`, detected under `checks.root` when
/// empty; thresholds `thresholds.mail_*`), reading line times in `tz` (the server's
/// zone). `None` when there is no log to follow or the
/// collector cannot start (logged): the daemon runs on without it.
pub fn start_configured(
    cfg: &crate::config::Config,
    tz: TimeZone,
    clock: SharedClock,
    engine: &Arc<Engine>,
    registry: &Arc<Registry>,
    components: &Components,
    store: &Store,
) -> Option<MailLogCollector> {
    let paths = detect_logs(&cfg.engine.mail_logs, &cfg.engine.checks_root);
    let source = if !paths.is_empty() {
        Source::Files(paths.clone())
    } else if let Some(js) = JournalSettings::detect(&cfg.engine.checks_root) {
        log::info!("mail log: no MTA log file found; reading the systemd journal (mail facility)");
        Source::Journal(js)
    } else {
        log::info!(
            "mail log: no MTA log found (logs.mail is empty) and no systemd journal; the reader is off"
        );
        return None;
    };
    let settings = LedgerSettings {
        hourly_limit: cfg.engine.mail_per_account_hourly,
        auth_failures: cfg.engine.mail_auth_failures,
    };
    let queue_settings = QueueSettings::detect(&paths, cfg.engine.mail_queue_size);
    match MailLogCollector::start_from(
        source,
        settings,
        queue_settings,
        tz,
        clock,
        engine,
        registry,
        components,
        store,
    ) {
        Ok(c) => Some(c),
        Err(e) => {
            log::warn!("{e}");
            None
        }
    }
}

/// Lists the queue at start and every [`QUEUE_INTERVAL`]: a snapshot goes through
/// `mail.delivery` to the store, `mail_queue` findings to the engine. Stops within 200 ms
/// of `stop` (a running listing ends at its own deadline).
fn sample_loop(
    qs: &QueueSettings,
    queue: &BoundedQueue<Vec<MailWrite>>,
    engine: &Engine,
    stop: &AtomicBool,
    clock: &SharedClock,
) {
    let limiter = LogLimiter::per_minute(clock.clone());
    let program = qs.program.to_string_lossy().into_owned();
    let (_, args) = queue::list_command(qs.mta);
    loop {
        let now = clock.now();
        match queue::list(qs.mta, &program, args, now) {
            Ok(entries) => {
                let c = queue::compose(&entries);
                for f in queue::findings(&c, qs.size_limit, now) {
                    engine.submit(f);
                }
                let snapshot = MailWrite::QueueSnapshot {
                    at: now.as_microsecond(),
                    mta: qs.mta.label(),
                    size: i64::try_from(c.size).unwrap_or(i64::MAX),
                    oldest: c.oldest_age_seconds.and_then(|a| i64::try_from(a).ok()),
                    bounces: i64::try_from(c.bounces).unwrap_or(i64::MAX),
                    domains: serde_json::to_string(&c.domains).unwrap_or_else(|_| "[]".into()),
                };
                let _ = queue.push_timeout(vec![snapshot], DELIVERY_WAIT);
            }
            Err(e) => {
                crate::warn_limited!(limiter, "mail-queue", "list", "mail queue: {e}");
            }
        }
        let until = std::time::Instant::now() + QUEUE_INTERVAL;
        while std::time::Instant::now() < until {
            if stop.load(Ordering::Acquire) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn write_loop(queue: &BoundedQueue<Vec<MailWrite>>, store: &Store, limiter: &LogLimiter) {
    loop {
        let guard = match queue.pop_timeout(Duration::from_millis(500)) {
            Ok(g) => g,
            Err(PopError::Timeout) => continue,
            Err(PopError::Closed) => return,
        };
        // Batch what else is waiting into the same transaction (bounded by the slots).
        let mut batch: Vec<MailWrite> = guard.finish();
        let mut extra = 0;
        while extra < DELIVERY_SLOTS {
            match queue.try_pop() {
                Some(g) => batch.extend(g.finish()),
                None => break,
            }
            extra += 1;
        }
        let health = queue.health().clone();
        match store.write(move |c| crate::store::mail_accounts::apply(c, &batch)) {
            Ok(()) => health.state_io_ok(),
            Err(e) => {
                health.state_io_error();
                health.record_loss();
                crate::warn_limited!(
                    limiter,
                    "mail-log",
                    "store",
                    "mail log: records not stored: {e}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests;
