//! Starts the collectors the configuration asks for, each on its own thread with its own
//! queue row, and stops them at shutdown.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::analyzer::{Analyzer, AnalyzerQueue, Offered, Restored};
use super::authlog::{AuthCollector, AuthThresholds, SharedThresholds};
use super::files::{BackendChoice, FileEvent, FileWatcher, WatchOptions};
use super::taint::{TaintWorker, TAINT_CAPACITY};
use crate::clock::SharedClock;
use crate::components::Components;
use crate::config::Config;
use crate::findings::Engine;
use crate::queue::{BoundedQueue, Registry, RowConfig, RowError, RowHandle};
use crate::scan::quarantine::{Quarantine, QuarantineControl, TrustRestored};
use crate::scan::signatures::{RuleError, SignatureSet};
use crate::scan::taint::Counters as TaintCounters;
use crate::store::Store;

/// Why a collector could not start.
#[derive(Debug)]
pub enum CollectorError {
    /// The shipped signatures did not compile (a build defect).
    Signatures(RuleError),
    /// A queue row could not be built or registered.
    Queue(RowError),
    /// The file watcher could not start.
    Watcher(std::io::Error),
    /// A collector thread could not be started.
    Spawn(std::io::Error),
    /// A log collector (auth or access) could not start.
    Log(super::tail::StartError),
}

impl From<RowError> for CollectorError {
    fn from(e: RowError) -> Self {
        CollectorError::Queue(e)
    }
}

impl From<super::tail::StartError> for CollectorError {
    fn from(e: super::tail::StartError) -> Self {
        CollectorError::Log(e)
    }
}

impl std::fmt::Display for CollectorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CollectorError::Signatures(e) => write!(f, "shipped signatures: {e}"),
            CollectorError::Queue(e) => write!(f, "{e}"),
            CollectorError::Watcher(e) => write!(f, "file watcher: {e}"),
            CollectorError::Spawn(e) => write!(f, "cannot start a collector thread: {e}"),
            CollectorError::Log(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CollectorError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CollectorError::Signatures(e) => Some(e),
            CollectorError::Queue(e) => Some(e),
            CollectorError::Watcher(e) | CollectorError::Spawn(e) => Some(e),
            CollectorError::Log(e) => Some(e),
        }
    }
}

/// Waiting file events the analyzer holds.
pub const ANALYZER_CAPACITY: u64 = 4096;

/// Running collectors.
pub struct Collectors {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    file_watcher: Option<FileWatcher>,
    queues: Vec<BoundedQueue<FileEvent>>,
    path_queues: Vec<BoundedQueue<PathBuf>>,
    /// What the PHP taint analysis did (files, flows, files over its caps).
    pub taint_counters: Arc<TaintCounters>,
    _rows: Vec<RowHandle>,
    /// The authentication-log collector (its own thread, row and stop).
    auth: Option<AuthCollector>,
    /// Files restored from quarantine (shared with the restore command).
    pub restored: Arc<Restored>,
    /// Thresholds of the running auth-log detector (configuration reload sets them).
    pub auth_thresholds: Option<Arc<SharedThresholds>>,
    /// The quarantine (`state_path/quarantine`, beneath `files.watch`), shared by the
    /// analyzer and the restore command.
    pub quarantine: Arc<Quarantine>,
}

impl Collectors {
    /// The handles the quarantine control commands need.
    pub fn quarantine_control(&self, store: Store, clock: SharedClock) -> QuarantineControl {
        QuarantineControl {
            store,
            quarantine: self.quarantine.clone(),
            restored: self.restored.clone(),
            clock,
        }
    }

    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(a) = &self.auth {
            a.request_stop();
        }
        if let Some(mut w) = self.file_watcher.take() {
            w.stop();
        }
        for q in &self.queues {
            q.close();
        }
        for q in &self.path_queues {
            q.close();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Some(a) = self.auth.take() {
            a.stop();
        }
    }
}

/// Starts the file watcher with its analyzer and the authentication-log watcher.
/// `restored` is shared with the quarantine restore command (and kept across a restart of
/// the collectors by a configuration reload).
#[allow(clippy::too_many_arguments)]
pub fn start_collectors(
    cfg: &Config,
    clock: SharedClock,
    engine: &Arc<Engine>,
    registry: &Arc<Registry>,
    components: &Arc<Components>,
    store: &Store,
    restored: Arc<Restored>,
    packages: Arc<dyn crate::watch::staged::PackageReader>,
    cleaner: Arc<dyn crate::watch::analyzer::InjectionCleaner>,
) -> Result<Collectors, CollectorError> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut c = Collectors {
        stop: stop.clone(),
        threads: Vec::new(),
        file_watcher: None,
        queues: Vec::new(),
        path_queues: Vec::new(),
        taint_counters: Arc::default(),
        _rows: Vec::new(),
        auth: None,
        restored,
        auth_thresholds: None,
        quarantine: Arc::new(Quarantine::new(
            cfg.state_path.join("quarantine"),
            cfg.engine.watch_roots.clone(),
        )),
    };
    let e = &cfg.engine;

    if !e.watch_roots.is_empty() {
        let signatures = Arc::new(SignatureSet::shipped().map_err(CollectorError::Signatures)?);
        let queue: BoundedQueue<FileEvent> = BoundedQueue::new(
            clock.clone(),
            RowConfig::new("files")
                .capacity(ANALYZER_CAPACITY)
                .running_slots(1),
        )
        .map_err(RowError::at("fanotify.analyzer"))?;
        c._rows.push(
            registry
                .register("fanotify.analyzer", queue.health().clone())
                .map_err(RowError::at("fanotify.analyzer"))?,
        );
        let (tx, rx) = crossbeam_channel::bounded::<FileEvent>(1024);
        let mut opts = WatchOptions::new(tx, clock.clone());
        opts.backend = e
            .watch_backend
            .parse::<BackendChoice>()
            .unwrap_or(BackendChoice::Auto);
        // The daemon's own writes (quarantine copies, TLS files) are never analysed; the rest
        // of the state directory may hold a watched root (`--dev` watches `.svc-dev/www`).
        opts.excluded_dirs = vec![
            cfg.state_path.join("quarantine"),
            cfg.state_path.join("tls"),
        ];
        let watcher =
            FileWatcher::start(e.watch_roots.clone(), opts).map_err(CollectorError::Watcher)?;
        let component = components.add("files", "file_watcher");
        component.attached.store(true, Ordering::Relaxed);
        component.set_detail(format!(
            "{} on {}",
            watcher.description(),
            e.watch_roots
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        log::info!("file watcher: {}", watcher.description());
        let counters = watcher.counters();
        // Trees whose changes may have gone unreported; the analyzer walks them.
        let reconcile = watcher.reconcile();
        c._rows.push(
            registry
                .register("fanotify.reconcile", reconcile.health().clone())
                .map_err(RowError::at("fanotify.reconcile"))?,
        );
        // Forward watcher events into the instrumented analyzer queue, merging an event into
        // one already waiting for the same path. A refusal is a loss of this row, and the
        // file's directory goes to the reconcile walk so the file is still scanned.
        let files = AnalyzerQueue::new(queue.clone());
        let fwd_q = files.clone();
        let queue_health = queue.health().clone();
        let fwd_stop = stop.clone();
        let fwd_reconcile = reconcile.clone();
        let fwd_component = component.clone();
        let fwd_clock = clock.clone();
        c.threads.push(
            std::thread::Builder::new()
                .name("files-forward".into())
                .spawn(move || {
                    let mut seen_drops = 0u64;
                    let mut seen_path_errors = 0u64;
                    let beat = crate::queue::heartbeat::Beat::register("files-forward", fwd_clock);
                    while !fwd_stop.load(Ordering::SeqCst) {
                        beat.beat();
                        if let Ok(ev) = rx.recv_timeout(Duration::from_millis(250)) {
                            if let Offered::Refused(ev) = fwd_q.offer(ev) {
                                fwd_reconcile.request_parent(&ev.path);
                            }
                        }
                        // Events the watcher could not hand over are losses of this row too.
                        let drops = counters.dropped.load(Ordering::Relaxed);
                        if drops > seen_drops {
                            queue_health.record_losses(drops - seen_drops);
                            seen_drops = drops;
                        }
                        // Paths the watcher could neither report nor walk are its errors.
                        let pe = counters.path_errors.load(Ordering::Relaxed);
                        if pe > seen_path_errors {
                            fwd_component
                                .errors
                                .fetch_add(pe - seen_path_errors, Ordering::Relaxed);
                            seen_path_errors = pe;
                        }
                    }
                })
                .map_err(CollectorError::Spawn)?,
        );
        let analyzer = Analyzer::new(
            signatures,
            engine.clone(),
            store.clone(),
            clock.clone(),
            c.quarantine.clone(),
            e.auto_quarantine,
            component,
            c.restored.clone(),
        )
        .with_reconcile(reconcile.worker())
        .with_cleaner(cleaner)
        .with_droppers(
            crate::watch::dropper::Droppers::start(clock.clone(), registry)
                .map_err(CollectorError::Queue)?,
        )
        .with_staged_packages(
            crate::watch::staged::StagedPackages::start(packages, clock.clone(), registry)
                .map_err(CollectorError::Queue)?,
        );
        // PHP files the analyzer saw go on to the taint analysis on a thread of their own.
        let taint: BoundedQueue<PathBuf> = BoundedQueue::new(
            clock.clone(),
            RowConfig::new("files")
                .capacity(TAINT_CAPACITY)
                .running_slots(1),
        )
        .map_err(RowError::at("php_taint.requests"))?;
        c._rows.push(
            registry
                .register("php_taint.requests", taint.health().clone())
                .map_err(RowError::at("php_taint.requests"))?,
        );
        let analyzer = analyzer.with_taint(taint.clone());
        let worker = TaintWorker::new(engine.clone(), clock.clone(), c.taint_counters.clone());
        let tstop = stop.clone();
        let tq = taint.clone();
        c.threads.push(
            std::thread::Builder::new()
                .name("php-taint".into())
                .spawn(move || worker.run(tq, tstop))
                .map_err(CollectorError::Spawn)?,
        );
        c.path_queues.push(taint);
        let astop = stop.clone();
        c.threads.push(
            std::thread::Builder::new()
                .name("files-analyzer".into())
                .spawn(move || analyzer.run(files, astop))
                .map_err(CollectorError::Spawn)?,
        );
        c.queues.push(queue);
        c.file_watcher = Some(watcher);
    }

    if !e.auth_logs.is_empty() {
        let thresholds = AuthThresholds {
            failures: e.auth_failures,
            window_secs: e.auth_window_seconds,
            max_tracked_addresses: e.auth_max_tracked_addresses,
            max_known_logins: e.auth_max_known_logins,
            new_address_mail: e.auth_new_address_mail,
        };
        let auth = AuthCollector::start(
            &e.auth_logs,
            thresholds,
            clock.clone(),
            engine,
            registry,
            components,
            store,
        )?;
        c.auth_thresholds = Some(auth.shared_thresholds());
        c.auth = Some(auth);
    }
    Ok(c)
}

impl TrustRestored for Restored {
    fn trust(&self, path: std::path::PathBuf, sha256: String) {
        self.add(path, sha256);
    }

    fn forget(&self, path: &std::path::Path, sha256: &str) {
        self.remove(path, sha256);
    }
}
