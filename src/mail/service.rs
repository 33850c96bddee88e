//! [`MailAv`]: the running mail antivirus (watcher, scanner threads, clamd probe,
//! quarantine), its statistics and status, and the operations the API calls.
//!
//! Rows: `spool.scanner` (messages waiting to be scanned, 1,024 slots, one running slot per
//! scanner thread; a refused admission, a recovered scanner panic or an unreadable message
//! is a loss) and `email_av.scans` (engine calls; a clamd call that fails is a loss and
//! `delivery_failed` stays on the row while clamd is unreachable). Both exist only while
//! the watcher runs.

use std::collections::HashSet;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use jiff::Timestamp;
use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use serde_json::{json, Value};

use super::clamd::{self, Clamd};
use super::mime::Reason;
use super::quarantine::{Candidate, MailQuarantine, Meta, QError};
use super::scanner::{self, Engines, ScanOptions, ScanResult};
use super::spool::{self, Mta};
use super::staging::Staging;
use super::watcher::{self, Admit, Job};
use crate::clock::SharedClock;
use crate::config::mail::MailConfig;
use crate::findings::{Engine, Finding, Severity};
use crate::lograte::LogLimiter;
use crate::queue::{
    BoundedQueue, Flag, LagBasis, QueueHealth, Registry, RowConfig, RowError, RowHandle,
};
use crate::scan::signatures::{RuleError, SignatureSet};
use crate::store::mail::Counts;
use crate::store::Store;
use crate::text::for_log;

/// Capacity of `spool.scanner`.
pub const SCANNER_CAPACITY: u64 = 1024;
/// How often clamd is probed (`PING`, `VERSION`) and how often an unreachable clamd is
/// reported again.
pub const CLAMD_PROBE: Duration = Duration::from_secs(30);
pub const CLAMD_REMIND: Duration = Duration::from_secs(600);
/// Message ids remembered as scanned at most (beyond it, the set is cleared and
/// messages still queued are scanned again).
const MAX_SEEN: usize = 200_000;

/// Counters since start (atomics).
#[derive(Default)]
struct Totals {
    scanned: AtomicU64,
    infected: AtomicU64,
    quarantined: AtomicU64,
    incomplete: AtomicU64,
    errors: AtomicU64,
    clamd: [AtomicU64; 3],
    signatures: [AtomicU64; 3],
}

fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// Watcher state for the status route.
#[derive(Clone, Debug, Default, Serialize)]
struct WatchInfo {
    active: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    mta: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spool_path: Option<String>,
    watched_directories: usize,
    #[serde(
        serialize_with = "crate::timefmt::ser_opt",
        skip_serializing_if = "Option::is_none"
    )]
    last_sweep: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    staging_error: Option<String>,
}

struct Shared {
    store: Store,
    clock: SharedClock,
    engine: Arc<Engine>,
    cfg: RwLock<(MailConfig, PathBuf)>,
    totals: Totals,
    started: Timestamp,
    clamd_health: Arc<clamd::Health>,
    clamd_down_since: Mutex<Option<(Timestamp, Timestamp)>>,
    watch: Mutex<WatchInfo>,
    quarantine: RwLock<Arc<MailQuarantine>>,
    released: Mutex<HashSet<String>>,
    seen: Mutex<HashSet<String>>,
    /// Built when the watcher first starts: a host that scans no mail keeps no compiled
    /// rules for it.
    signatures: OnceLock<Arc<SignatureSet>>,
    /// The number of shipped rules (status shows it before the set is built).
    shipped_rules: usize,
    log: LogLimiter,
    pending_recovery: AtomicBool,
}

struct Runtime {
    stop: Arc<AtomicBool>,
    queue: BoundedQueue<Job>,
    threads: Vec<JoinHandle<()>>,
    _rows: Vec<RowHandle>,
}

/// The mail antivirus handle (`api::Services.mail`).
pub struct MailAv {
    shared: Arc<Shared>,
    registry: Arc<Registry>,
    runtime: Mutex<Option<Runtime>>,
}

fn quarantine_dir(cfg: &MailConfig, state: &Path) -> PathBuf {
    cfg.quarantine_path
        .clone()
        .unwrap_or_else(|| state.join("mail-quarantine"))
}

/// Why the mail antivirus could not be built or started.
#[derive(Debug)]
pub enum MailError {
    /// The shipped signatures did not compile (a build defect).
    Signatures(RuleError),
    /// A queue row could not be built or registered.
    Queue(RowError),
    /// A watcher or scanner thread could not be started.
    Spawn(std::io::Error),
}

impl From<RowError> for MailError {
    fn from(e: RowError) -> Self {
        MailError::Queue(e)
    }
}

impl std::fmt::Display for MailError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MailError::Signatures(e) => write!(f, "shipped signatures: {e}"),
            MailError::Queue(e) => write!(f, "{e}"),
            MailError::Spawn(e) => write!(f, "cannot start a mail thread: {e}"),
        }
    }
}

impl std::error::Error for MailError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MailError::Signatures(e) => Some(e),
            MailError::Queue(e) => Some(e),
            MailError::Spawn(e) => Some(e),
        }
    }
}

impl MailAv {
    /// Builds the handle and finishes quarantine operations a crash interrupted; the
    /// watcher starts with [`MailAv::start`].
    pub fn new(
        cfg: &MailConfig,
        state_path: &Path,
        store: Store,
        clock: SharedClock,
        engine: Arc<Engine>,
        registry: Arc<Registry>,
    ) -> Result<Arc<MailAv>, MailError> {
        let shipped_rules = SignatureSet::shipped_rule_count().map_err(MailError::Signatures)?;
        let q = Arc::new(MailQuarantine::new(
            quarantine_dir(cfg, state_path),
            store.clone(),
            clock.clone(),
        ));
        // Interrupted operations first: a release finished here counts as released.
        let left = q.recover();
        let shared = Arc::new(Shared {
            store,
            started: clock.now(),
            log: LogLimiter::per_minute(clock.clone()),
            clock,
            engine,
            cfg: RwLock::new((cfg.clone(), state_path.to_path_buf())),
            totals: Totals::default(),
            clamd_health: Arc::new(clamd::Health::default()),
            clamd_down_since: Mutex::new(None),
            watch: Mutex::new(WatchInfo::default()),
            quarantine: RwLock::new(q.clone()),
            released: Mutex::new(q.released_queue_ids().into_iter().collect()),
            seen: Mutex::new(HashSet::new()),
            signatures: OnceLock::new(),
            shipped_rules,
            pending_recovery: AtomicBool::new(false),
        });
        shared.pending_recovery.store(left > 0, Ordering::SeqCst);
        Ok(Arc::new(MailAv {
            shared,
            registry,
            runtime: Mutex::new(None),
        }))
    }

    /// Starts the watcher and scanners when `mail.enabled`.
    pub fn start(&self) -> Result<(), MailError> {
        let mut slot = self.runtime.lock();
        if slot.is_some() {
            return Ok(());
        }
        let (cfg, state) = self.shared.cfg.read().clone();
        self.shared
            .clamd_health
            .configure(cfg.clamd_endpoint().as_ref());
        if !cfg.enabled {
            *self.shared.watch.lock() = WatchInfo::default();
            return Ok(());
        }
        let Some((root, mta)) = spool::detect(cfg.spool_path.as_deref()) else {
            let why = match &cfg.spool_path {
                Some(p) => format!(
                    "{} is not an Exim or Postfix spool (no input/, incoming/ or active/)",
                    crate::text::escape_path(p)
                ),
                None => "no MTA spool found (tried /var/spool/exim4, /var/spool/exim, /var/spool/postfix)".into(),
            };
            log::warn!("mail antivirus: {why}");
            *self.shared.watch.lock() = WatchInfo {
                error: Some(why),
                ..WatchInfo::default()
            };
            return Ok(());
        };
        self.shared.watch.lock().staging_error = None;
        let staging = match Staging::prepare(&state) {
            Ok(s) => Some(Arc::new(s)),
            Err(e) => {
                self.report_staging(&e.to_string());
                None
            }
        };
        let clock = self.shared.clock.clone();
        let queue: BoundedQueue<Job> = BoundedQueue::new(
            clock.clone(),
            RowConfig::new("messages")
                .capacity(SCANNER_CAPACITY)
                .running_slots(cfg.scan_threads),
        )
        .map_err(RowError::at("spool.scanner"))?;
        let av_row = QueueHealth::new(
            clock.clone(),
            RowConfig::new("scans")
                .capacity(cfg.scan_threads as u64)
                .lag_basis(LagBasis::OperationProgress)
                .running_slots(cfg.scan_threads),
        );
        let rows = vec![
            self.registry
                .register("spool.scanner", queue.health().clone())
                .map_err(RowError::at("spool.scanner"))?,
            self.registry
                .register("email_av.scans", av_row.clone())
                .map_err(RowError::at("email_av.scans"))?,
        ];
        let signatures = match self.shared.signatures.get() {
            Some(s) => s.clone(),
            None => {
                let s = Arc::new(SignatureSet::shipped().map_err(MailError::Signatures)?);
                self.shared.signatures.get_or_init(|| s).clone()
            }
        };
        let engines = Arc::new(Engines {
            clamd: cfg
                .clamd_endpoint()
                .map(|e| Clamd::new(e, Duration::from_secs(cfg.clamd_timeout_seconds))),
            clamd_health: self.shared.clamd_health.clone(),
            signatures,
            row: av_row.clone(),
            clock: clock.clone(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        {
            let mut w = self.shared.watch.lock();
            *w = WatchInfo {
                active: true,
                mta: Some(mta.as_str()),
                spool_path: Some(root.to_string_lossy().into_owned()),
                staging_error: w.staging_error.take(),
                ..WatchInfo::default()
            };
        }
        self.shared.seen.lock().clear();
        let mut threads = Vec::new();
        for i in 0..cfg.scan_threads {
            let ctx = ScanCtx {
                shared: self.shared.clone(),
                engines: engines.clone(),
                queue: queue.clone(),
                stop: stop.clone(),
                root: root.clone(),
                mta,
                staging: staging.clone(),
                cfg: cfg.clone(),
            };
            threads.push(
                std::thread::Builder::new()
                    .name(format!("mail-scan-{i}"))
                    .spawn(move || ctx.run())
                    .map_err(MailError::Spawn)?,
            );
        }
        let admit: Arc<dyn Admit> = Arc::new(Admitter {
            shared: self.shared.clone(),
            queue: queue.clone(),
            engines: engines.clone(),
            last_probe: Mutex::new(None),
        });
        {
            let (root, stop) = (root.clone(), stop.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("mail-spool".into())
                    .spawn(move || watcher::run(root, mta, admit, stop))
                    .map_err(MailError::Spawn)?,
            );
        }
        log::info!(
            "mail antivirus: watching {} ({}), clamd {}, {} scanner thread(s)",
            crate::text::escape_path(&root),
            mta.as_str(),
            engines
                .clamd
                .as_ref()
                .map_or("off".to_string(), |c| c.endpoint.to_string()),
            cfg.scan_threads
        );
        *slot = Some(Runtime {
            stop,
            queue,
            threads,
            _rows: rows,
        });
        Ok(())
    }

    /// Stops the watcher and scanners (messages waiting are scanned at the next start).
    pub fn stop(&self) {
        if let Some(rt) = self.runtime.lock().take() {
            rt.stop.store(true, Ordering::SeqCst);
            rt.queue.close();
            for t in rt.threads {
                let _ = t.join();
            }
        }
        self.shared.watch.lock().active = false;
    }

    /// Applies a new `[mail]` section: the watcher and scanners restart with it.
    /// `state_path` is a restart key: the running one is kept.
    pub fn reconfigure(&self, cfg: &MailConfig) -> Result<(), MailError> {
        self.stop();
        let state_path = self.shared.cfg.read().1.clone();
        let state_path = state_path.as_path();
        *self.shared.cfg.write() = (cfg.clone(), state_path.to_path_buf());
        *self.shared.quarantine.write() = Arc::new(MailQuarantine::new(
            quarantine_dir(cfg, state_path),
            self.shared.store.clone(),
            self.shared.clock.clone(),
        ));
        self.start()
    }

    fn report_staging(&self, why: &str) {
        report_staging(&self.shared, why);
    }

    fn quarantine(&self) -> Arc<MailQuarantine> {
        self.shared.quarantine.read().clone()
    }

    /// `GET /api/v1/email/stats`.
    pub fn stats(&self) -> Value {
        let t = &self.shared.totals;
        let eng = |a: &[AtomicU64; 3]| json!({"scanned": load(&a[0]), "infected": load(&a[1]), "errors": load(&a[2])});
        let since_start = json!({
            "scanned": load(&t.scanned),
            "infected": load(&t.infected),
            "quarantined": load(&t.quarantined),
            "incomplete": load(&t.incomplete),
            "errors": load(&t.errors),
            "engines": {"clamd": eng(&t.clamd), "signatures": eng(&t.signatures)},
        });
        let hour = hour_of(self.shared.clock.now());
        let last = match self
            .shared
            .store
            .read(move |c| crate::store::mail::sum_since(c, hour - 23))
        {
            Ok(rows) => {
                let get = |e: &str| {
                    rows.iter()
                        .find(|(n, _)| n == e)
                        .map(|(_, c)| *c)
                        .unwrap_or_default()
                };
                let m = get("message");
                let ce = |c: Counts| json!({"scanned": c.scanned, "infected": c.infected, "errors": c.errors});
                json!({
                    "scanned": m.scanned,
                    "infected": m.infected,
                    "quarantined": m.quarantined,
                    "incomplete": m.incomplete,
                    "errors": m.errors,
                    "engines": {"clamd": ce(get("clamd")), "signatures": ce(get("signatures"))},
                })
            }
            Err(_) => Value::Null,
        };
        json!({
            "scanned": load(&t.scanned),
            "infected": load(&t.infected),
            "quarantined": load(&t.quarantined),
            "incomplete": load(&t.incomplete),
            "since_start": since_start,
            "last_24h": last,
            "started_at": crate::timefmt::rfc3339(self.shared.started),
        })
    }

    /// `GET /api/v1/email/av/status` (memory only).
    pub fn status(&self) -> Value {
        let (cfg, state) = self.shared.cfg.read().clone();
        let w = self.shared.watch.lock().clone();
        let clamd = self.shared.clamd_health.snapshot();
        let clamd_status = if !clamd.configured {
            "off"
        } else {
            match clamd.reachable {
                Some(true) => "ok",
                Some(false) => "unreachable",
                None => "unknown",
            }
        };
        json!({
            "enabled": cfg.enabled,
            "active": w.active,
            "watcher": w,
            "spool_path": w.spool_path,
            "quarantine": {
                "enabled": cfg.quarantine,
                "path": quarantine_dir(&cfg, &state).to_string_lossy(),
            },
            "staging": {
                "path": state.join(super::staging::DIR_NAME).to_string_lossy(),
                "ok": w.staging_error.is_none(),
            },
            "fail_open": true,
            "engines": {
                "clamd": {
                    "status": clamd_status,
                    "health": clamd,
                },
                "signatures": {
                    "status": "ok",
                    "rules": self.shared.signatures.get().map_or(self.shared.shipped_rules, |s| s.rules().len()),
                    "version": env!("CARGO_PKG_VERSION"),
                },
            },
        })
    }

    /// `GET /api/v1/email/quarantine`.
    pub fn list(
        &self,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<super::quarantine::Entry>, u64), QError> {
        self.quarantine().list(offset, limit)
    }

    /// Releases a quarantined message back into its spool.
    pub fn release(&self, id: &str, actor: &str) -> Result<Value, QError> {
        let q = self.quarantine();
        let r = q.release(id);
        match &r {
            Ok(queue_id) => {
                self.shared.released.lock().insert(queue_id.clone());
                log::info!(
                    "mail quarantine {id}: message {} released by {}",
                    for_log(queue_id, 64),
                    for_log(actor, 64)
                );
            }
            Err(e) => log::warn!(
                "mail quarantine {id}: release by {} failed: {e}",
                for_log(actor, 64)
            ),
        }
        let queue_id = r?;
        Ok(json!({"ok": true, "id": id, "state": "released", "queue_id": queue_id}))
    }

    /// Deletes a quarantined message.
    pub fn delete(&self, id: &str, actor: &str) -> Result<Value, QError> {
        let r = self.quarantine().delete(id);
        match &r {
            Ok(()) => log::info!("mail quarantine {id}: deleted by {}", for_log(actor, 64)),
            Err(e) => log::warn!(
                "mail quarantine {id}: delete by {} failed: {e}",
                for_log(actor, 64)
            ),
        }
        r?;
        Ok(json!({"ok": true, "id": id, "state": "deleted"}))
    }
}

fn hour_of(t: Timestamp) -> i64 {
    t.as_second().div_euclid(3600)
}

fn report_staging(shared: &Shared, why: &str) {
    shared.watch.lock().staging_error = Some(why.to_string());
    crate::warn_limited!(
        shared.log,
        "staging",
        "",
        "mail antivirus: {why}; parts over 1 MiB are not scanned"
    );
    let f = Finding::new(
        "email_av",
        Severity::High,
        "Mail staging directory refused",
        shared.clock.now(),
    )
    .with_details(format!(
        "{why}; attachments larger than the in-memory limit are not scanned until it is fixed"
    ));
    shared.engine.submit(f);
}

/// Receives ready messages from the watcher.
struct Admitter {
    shared: Arc<Shared>,
    queue: BoundedQueue<Job>,
    engines: Arc<Engines>,
    last_probe: Mutex<Option<std::time::Instant>>,
}

impl Admit for Admitter {
    fn admit(&self, job: Job) -> bool {
        if self.shared.released.lock().contains(&job.id) {
            return true;
        }
        {
            let mut seen = self.shared.seen.lock();
            if seen.len() >= MAX_SEEN {
                seen.clear();
            }
            if !seen.insert(job.id.clone()) {
                return true;
            }
        }
        match self.queue.try_push(job) {
            Ok(()) => true,
            Err(refused) => {
                // Counted as a loss when the refusal drops; the next sweep admits it again.
                self.shared.seen.lock().remove(&refused.item().id);
                crate::warn_limited!(
                    self.shared.log,
                    "spool_full",
                    "",
                    "mail antivirus: scan queue full; message left for the next sweep"
                );
                false
            }
        }
    }

    fn swept(&self, present: &HashSet<String>, watched: usize) {
        self.shared.seen.lock().retain(|id| present.contains(id));
        let mut w = self.shared.watch.lock();
        w.watched_directories = watched;
        w.last_sweep = Some(self.shared.clock.now());
    }

    fn tick(&self) {
        if self.shared.pending_recovery.load(Ordering::SeqCst) {
            let q = self.shared.quarantine.read().clone();
            let left = q.recover();
            self.shared.released.lock().extend(q.released_queue_ids());
            self.shared
                .pending_recovery
                .store(left > 0, Ordering::SeqCst);
        }
        let due = self
            .last_probe
            .lock()
            .is_none_or(|t| t.elapsed() >= CLAMD_PROBE);
        if due {
            *self.last_probe.lock() = Some(std::time::Instant::now());
            probe_clamd(&self.shared, &self.engines);
        }
    }
}

fn probe_clamd(shared: &Shared, engines: &Engines) {
    let Some(c) = &engines.clamd else {
        return;
    };
    let now = shared.clock.now();
    match c.ping().and_then(|()| c.version()) {
        Ok(v) => {
            shared.clamd_health.ok(now, Some(v));
            engines.row.set_flag(Flag::DeliveryFailed, false);
            if shared.clamd_down_since.lock().take().is_some() {
                log::info!("mail antivirus: clamd at {} reachable again", c.endpoint);
            }
        }
        Err(e) => {
            shared.clamd_health.failed(now, &e);
            clamd_down(shared, engines, &e.to_string());
        }
    }
}

/// clamd unreachable: the row condition, a log line and a WARNING finding (again every
/// ten minutes while it lasts). Mail keeps flowing (fail-open).
fn clamd_down(shared: &Shared, engines: &Engines, why: &str) {
    engines.row.set_flag(Flag::DeliveryFailed, true);
    let now = shared.clock.now();
    let mut down = shared.clamd_down_since.lock();
    let remind = match *down {
        None => true,
        Some((_, last)) => now.duration_since(last).as_secs() >= CLAMD_REMIND.as_secs() as i64,
    };
    if !remind {
        return;
    }
    *down = Some((down.map_or(now, |(s, _)| s), now));
    drop(down);
    let ep = engines
        .clamd
        .as_ref()
        .map(|c| c.endpoint.to_string())
        .unwrap_or_default();
    log::warn!("mail antivirus: clamd at {ep} unreachable ({why}); mail is delivered without clamd (fail-open)");
    shared.engine.submit(
        Finding::new(
            "email_av",
            Severity::Warning,
            format!("clamd unreachable at {ep}: mail is scanned by the signature engine only (fail-open)"),
            now,
        )
        .with_details(crate::text::for_log(why, 300)),
    );
}

/// One scanner thread.
struct ScanCtx {
    shared: Arc<Shared>,
    engines: Arc<Engines>,
    queue: BoundedQueue<Job>,
    stop: Arc<AtomicBool>,
    root: PathBuf,
    mta: Mta,
    staging: Option<Arc<Staging>>,
    cfg: MailConfig,
}

/// Why a message was not scanned.
enum Skip {
    /// Gone from the spool (delivered meanwhile): not a loss.
    Gone,
    /// Unreadable or not a queue file: a loss.
    Bad(String),
}

impl ScanCtx {
    fn run(self) {
        while !self.stop.load(Ordering::SeqCst) {
            let guard = match self.queue.pop_timeout(Duration::from_millis(500)) {
                Ok(g) => g,
                Err(crate::queue::PopError::Timeout) => continue,
                Err(_) => break,
            };
            let job = (*guard).clone();
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.process(&job)));
            match outcome {
                Ok(Ok(())) | Ok(Err(Skip::Gone)) => {
                    guard.finish();
                }
                Ok(Err(Skip::Bad(why))) => {
                    crate::warn_limited!(
                        self.shared.log,
                        "unreadable",
                        "",
                        "mail antivirus: message {} not scanned: {why}",
                        for_log(&job.id, 64)
                    );
                    guard.lose();
                }
                Err(_) => {
                    log::error!(
                        "mail antivirus: scanner panicked on message {}; counted as lost work",
                        for_log(&job.id, 64)
                    );
                    guard.lose();
                }
            }
        }
    }

    fn staging(&self) -> Option<Arc<Staging>> {
        let s = self.staging.as_ref()?;
        match s.verify() {
            Ok(()) => Some(s.clone()),
            Err(e) => {
                report_staging(&self.shared, &e.to_string());
                None
            }
        }
    }

    fn process(&self, job: &Job) -> Result<(), Skip> {
        if self.shared.released.lock().contains(&job.id) {
            return Ok(());
        }
        let root =
            crate::sys::dir::Dir::walk_trusted(&self.root).map_err(|e| Skip::Bad(e.to_string()))?;
        let dir = match root.open_beneath(Path::new(&job.dir)) {
            Ok(d) => d,
            Err(crate::sys::dir::Error::NotFound { .. }) => return Err(Skip::Gone),
            Err(e) => return Err(Skip::Bad(e.to_string())),
        };
        let open = |name: &str| match dir.open_regular(std::ffi::OsStr::new(name)) {
            Ok(f) => Ok(f),
            Err(crate::sys::dir::Error::NotFound { .. }) => Err(Skip::Gone),
            Err(e) => Err(Skip::Bad(e.to_string())),
        };
        let staging = self.staging();
        match self.mta {
            Mta::Exim => {
                let mut h = Vec::new();
                open(&format!("{}-H", job.id))?
                    .take(spool::MAX_HEADER_FILE)
                    .read_to_end(&mut h)
                    .map_err(|e| Skip::Bad(e.to_string()))?;
                let env = spool::parse_exim_header(&h).map_err(|e| Skip::Bad(e.to_string()))?;
                let data = open(&format!("{}-D", job.id))?;
                let size = data.metadata().map(|m| m.len()).unwrap_or(0) + h.len() as u64;
                let mut body = data.try_clone().map_err(|e| Skip::Bad(e.to_string()))?;
                spool::skip_data_id_line(&mut body).map_err(|e| Skip::Bad(e.to_string()))?;
                let mut stream = std::io::Read::chain(env.headers.as_slice(), body);
                let result = scanner::scan_message(
                    &mut stream,
                    &self.engines,
                    &self.options(staging, env.outbound),
                );
                let hash = job.dir.rsplit('/').next().unwrap_or("").to_string();
                let msglog = if job.dir.contains('/') {
                    format!("msglog/{hash}")
                } else {
                    "msglog".to_string()
                };
                let files = vec![
                    Candidate {
                        role: "H",
                        dir: job.dir.clone(),
                        name: format!("{}-H", job.id),
                        required: true,
                    },
                    Candidate {
                        role: "J",
                        dir: job.dir.clone(),
                        name: format!("{}-J", job.id),
                        required: false,
                    },
                    Candidate {
                        role: "msglog",
                        dir: msglog,
                        name: job.id.clone(),
                        required: false,
                    },
                    Candidate {
                        role: "D",
                        dir: job.dir.clone(),
                        name: format!("{}-D", job.id),
                        required: true,
                    },
                ];
                self.finish(job, &env, result, &files, Some(&data), size);
            }
            Mta::Postfix => {
                let f = open(&job.id)?;
                let size = f.metadata().map(|m| m.len()).unwrap_or(0);
                let mut reader = spool::PostfixReader::new(std::io::BufReader::new(
                    f.try_clone().map_err(|e| Skip::Bad(e.to_string()))?,
                ));
                let outbound = false;
                let result = scanner::scan_message(
                    &mut reader,
                    &self.engines,
                    &self.options(staging, outbound),
                );
                let _ = reader.finish();
                let env = reader.env.clone();
                let files = vec![Candidate {
                    role: "queue",
                    dir: job.dir.clone(),
                    name: job.id.clone(),
                    required: true,
                }];
                self.finish(job, &env, result, &files, None, size);
            }
        }
        Ok(())
    }

    fn options(&self, staging: Option<Arc<Staging>>, outbound: bool) -> ScanOptions {
        let mut limits = self.cfg.limits;
        if staging.is_none() {
            // Without staging, parts stay in memory: bounded by the memory threshold.
            limits.mem_part_bytes = limits.mem_part_bytes.max(1024 * 1024);
        }
        ScanOptions {
            limits,
            archive: self.cfg.archive,
            staging,
            outbound: outbound && self.cfg.content_scan,
        }
    }

    fn finish(
        &self,
        job: &Job,
        env: &spool::Envelope,
        result: ScanResult,
        files: &[Candidate],
        lock: Option<&File>,
        size: u64,
    ) {
        let sh = &self.shared;
        let now = sh.clock.now();
        let incomplete = result.all_incomplete();
        let infected = result.infected();
        let headers = &result.report.headers;
        let sender = for_log(&env.sender, 200);
        let rcpts = env
            .recipients
            .iter()
            .take(5)
            .map(|r| for_log(r, 200))
            .collect::<Vec<_>>()
            .join(", ");
        let mid = headers
            .message_id
            .as_deref()
            .map(|m| for_log(m, 200))
            .unwrap_or_else(|| "(none)".into());
        // Counters.
        let t = &sh.totals;
        t.scanned.fetch_add(1, Ordering::Relaxed);
        let mut msg = Counts {
            scanned: 1,
            ..Counts::default()
        };
        let mut cl = Counts::default();
        let mut sg = Counts::default();
        if self.engines.clamd.is_some() {
            cl.scanned = u64::from(result.clamd_scans > 0);
            cl.errors = u64::from(result.clamd_errors > 0);
            cl.infected = u64::from(result.verdicts.iter().any(|v| v.engine == "clamd"));
        }
        sg.scanned = 1;
        sg.infected = u64::from(result.verdicts.iter().any(|v| v.engine == "signatures"));
        for (a, c) in [(&t.clamd, &cl), (&t.signatures, &sg)] {
            a[0].fetch_add(c.scanned, Ordering::Relaxed);
            a[1].fetch_add(c.infected, Ordering::Relaxed);
            a[2].fetch_add(c.errors, Ordering::Relaxed);
        }
        if result.clamd_errors > 0 {
            if let Some(e) = &result.clamd_error {
                if sh.clamd_health.reachable() == Some(false) {
                    clamd_down(sh, &self.engines, e);
                }
            }
        }
        if !incomplete.is_empty() {
            t.incomplete.fetch_add(1, Ordering::Relaxed);
            msg.incomplete = 1;
            let mut kinds: Vec<Reason> = incomplete.iter().map(|i| i.reason).collect();
            kinds.sort();
            kinds.dedup();
            for k in &kinds {
                let parts: Vec<&str> = incomplete
                    .iter()
                    .filter(|i| i.reason == *k)
                    .map(|i| i.part.as_str())
                    .take(5)
                    .collect();
                sh.engine.submit(
                    Finding::new("email_scan_incomplete", Severity::Warning, format!("Mail incompletely scanned: {}", k.describe()), now)
                        .with_details(format!("message {} (Message-ID {mid}) from {sender}, part(s) {}; recovered content and later parts were scanned", for_log(&job.id, 64), parts.join(", "))),
                );
            }
            log::info!(
                "mail {}: incompletely scanned ({})",
                for_log(&job.id, 64),
                kinds
                    .iter()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        for hit in &result.content {
            sh.engine.submit(
                Finding::new(
                    "email_content",
                    if hit.kind == "credentials" {
                        Severity::High
                    } else {
                        Severity::Warning
                    },
                    format!(
                        "Outbound mail from {sender} contains {}",
                        hit.kind.replace('_', " ")
                    ),
                    now,
                )
                .with_details(format!(
                    "{}; message {} (Message-ID {mid}) to {rcpts}",
                    hit.detail,
                    for_log(&job.id, 64)
                )),
            );
        }
        if !result.verdicts.is_empty() {
            t.infected.fetch_add(u64::from(infected), Ordering::Relaxed);
            msg.infected = u64::from(infected);
        }
        let sigs = result
            .verdicts
            .iter()
            .map(|v| format!("{} {} ({})", v.engine, for_log(&v.signature, 100), v.rating))
            .collect::<Vec<_>>()
            .join(", ");
        let mut quarantined = None;
        let mut q_error = None;
        if infected && self.cfg.quarantine {
            let meta = Meta {
                message_id: headers.message_id.clone(),
                sender: env.sender.clone(),
                recipients: env.recipients.clone(),
                subject: headers.subject.clone(),
                verdicts: result.verdicts.clone(),
                parts: result.parts.clone(),
                incomplete: incomplete.clone(),
                size,
            };
            match sh
                .quarantine
                .read()
                .clone()
                .quarantine(&self.root, self.mta, &job.id, files, lock, &meta)
            {
                Ok(id) => quarantined = Some(id),
                Err(QError::Locked) => {
                    // The MTA is delivering it: the next sweep scans it again.
                    sh.seen.lock().remove(&job.id);
                    log::info!(
                        "mail {}: infected but being delivered; retried at the next sweep",
                        for_log(&job.id, 64)
                    );
                }
                Err(QError::Missing(_)) => {}
                Err(e) => {
                    let paths = e.paths();
                    q_error = Some(e.to_string());
                    sh.engine.submit(
                        Finding::new(
                            "email_av",
                            Severity::High,
                            format!("Mail quarantine of {} failed", for_log(&job.id, 64)),
                            now,
                        )
                        .with_details(format!("{e}; affected paths: {}", paths.join(", "))),
                    );
                }
            }
        }
        if let Some(id) = &quarantined {
            t.quarantined.fetch_add(1, Ordering::Relaxed);
            msg.quarantined = 1;
            let _ = id;
        }
        if !result.verdicts.is_empty() {
            let state = match (&quarantined, &q_error, infected && self.cfg.quarantine) {
                (Some(id), _, _) => format!("quarantined as {id}"),
                (None, Some(e), _) => format!("quarantine failed: {e}"),
                (None, None, true) => "quarantine deferred".to_string(),
                (None, None, false) => "not quarantined".to_string(),
            };
            log::warn!(
                "mail {} from {sender} to {rcpts} (Message-ID {mid}): {} ({sigs}); {state}",
                for_log(&job.id, 64),
                if infected { "infected" } else { "suspicious" }
            );
            let sev = if quarantined.is_some() || !infected {
                Severity::High
            } else {
                Severity::Critical
            };
            let names = result
                .verdicts
                .iter()
                .filter_map(|v| v.member.as_ref().or(v.name.as_ref()))
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            sh.engine.submit(
                Finding::new(
                    "email_malware",
                    sev,
                    format!(
                        "{} mail {} from {sender}: {} ({state})",
                        if infected { "Infected" } else { "Suspicious" },
                        for_log(&job.id, 64),
                        for_log(&result.verdicts[0].signature, 100)
                    ),
                    now,
                )
                .with_details(format!(
                    "Message-ID {mid}; recipients {rcpts}; verdicts {sigs}; attachments {names}"
                )),
            );
        }
        // Hourly counters for the 24-hour statistics (fire and forget; a refusal only
        // costs those figures).
        let hour = hour_of(now);
        let _ = sh.store.write_detached(move |c| {
            crate::store::mail::add_hour(c, hour, "message", &msg)?;
            crate::store::mail::add_hour(c, hour, "clamd", &cl)?;
            crate::store::mail::add_hour(c, hour, "signatures", &sg)
        });
    }
}
