//! `fanotify.analyzer`: files closed after writing, moved or linked in are scanned against
//! the content signatures; matches become findings carrying path and account (the owner's
//! user name). With `auto_response.quarantine`, a high-confidence match moves the file into
//! quarantine; an `.htaccess` or `.user.ini` injection is cleaned instead (only the injected
//! lines go, the file is kept first as a pre-clean backup: [`InjectionCleaner`]), so the
//! site keeps its own rewrite rules.
//!
//! The same thread walks the `fanotify.reconcile` queue (trees whose changes may have gone
//! unreported), in batches between live events: after at most [`LIVE_BURST`] live events
//! it runs one batch of at most [`RECONCILE_BATCH`] directory entries or
//! [`RECONCILE_SLICE`], whichever ends first, so neither starves the other. Files found by
//! the walk are opened relative to their directory's descriptor, so no path length stops
//! them; live events whose path is 4,096 bytes or more are opened by steps from `/`.
//! Failures other than vanished files count as errors of the `files` component and are
//! logged (one line a minute).

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::components::Component;
use crate::findings::Engine;
use crate::lograte::LogLimiter;
use crate::queue::{BoundedQueue, PopError, WorkGuard};
use crate::scan::quarantine;
use crate::scan::signatures::{Match, SignatureSet};
use crate::store::Store;
use crate::text::escape_path;
use crate::watch::dropper::{self, Droppers};
use crate::watch::files::{self, FileEvent, ReconcileWorker};
use crate::watch::staged::{self, StagedPackages};

/// Live events handled at most between two reconcile batches.
pub const LIVE_BURST: usize = 64;
/// Directory entries read at most per reconcile batch.
pub const RECONCILE_BATCH: usize = 512;
/// Longest reconcile batch.
pub const RECONCILE_SLICE: Duration = Duration::from_millis(50);
/// Longest wait for a live event while nothing else is to do.
const IDLE_WAIT: Duration = Duration::from_millis(250);

/// Files an operator restored from quarantine: that exact content at that path is trusted
/// and is neither reported nor quarantined again (any change to the file ends the trust).
#[derive(Default)]
pub struct Restored {
    by_path: parking_lot::Mutex<HashMap<PathBuf, String>>,
}

impl Restored {
    /// Loads restored entries from the quarantine table.
    pub fn load(store: &Store) -> Restored {
        let r = Restored::default();
        if let Ok(entries) = store.read(crate::store::quarantine::list) {
            for e in entries.into_iter().filter(|e| e.restored_at.is_some()) {
                if let Ok(rec) = serde_json::from_value::<quarantine::QuarantineRecord>(e.record) {
                    if let Ok(p) = rec.original_path_buf() {
                        r.add(p, rec.sha256);
                    }
                }
            }
        }
        r
    }

    pub fn add(&self, path: PathBuf, sha256: String) {
        self.by_path.lock().insert(path, sha256);
    }

    /// Withdraws the trust in `sha256` at `path` (a restore that failed).
    pub fn remove(&self, path: &Path, sha256: &str) {
        let mut m = self.by_path.lock();
        if m.get(path).is_some_and(|s| s == sha256) {
            m.remove(path);
        }
    }

    /// True when `path` was restored and still has the restored content.
    pub fn is_trusted(&self, path: &Path) -> bool {
        let Some(expected) = self.by_path.lock().get(path).cloned() else {
            return false;
        };
        use sha2::{Digest, Sha256};
        let Ok(mut f) = crate::sys::dir::open_regular_trusted(path, false) else {
            return false;
        };
        let mut h = Sha256::new();
        if std::io::copy(&mut f, &mut h).is_err() {
            return false;
        }
        hex::encode(h.finalize()) == expected
    }
}

/// The analyzer's queue (`fanotify.analyzer`) with the paths whose event waits in it. An
/// event for a path already waiting is merged into the waiting one: that scan has not
/// opened the file yet, so it reads what the later event reported. A file created and
/// written by one writer while the watcher lags (its `FAN_CREATE` already finds content,
/// its close-write follows) is then scanned and reported once, not twice. A path leaves the
/// set as its event is popped, before the scan reads the file, so an event that arrives
/// during a scan is queued again. Holds at most as many paths as the queue holds events.
/// Cheap to clone; clones share the queue and the set.
#[derive(Clone)]
pub struct AnalyzerQueue {
    events: BoundedQueue<FileEvent>,
    waiting: Arc<parking_lot::Mutex<HashSet<PathBuf>>>,
}

/// What [`AnalyzerQueue::offer`] did with an event.
#[derive(Debug, PartialEq, Eq)]
pub enum Offered {
    Queued,
    /// The path was already waiting; the event was merged into that one.
    Coalesced,
    /// The queue was full: the event is handed back (the caller walks its directory).
    Refused(FileEvent),
}

impl AnalyzerQueue {
    pub fn new(events: BoundedQueue<FileEvent>) -> AnalyzerQueue {
        AnalyzerQueue {
            events,
            waiting: Arc::default(),
        }
    }

    /// Queues `ev` unless its path is already waiting.
    pub fn offer(&self, ev: FileEvent) -> Offered {
        // Marked before the push, so no event is popped while its path is unmarked.
        if !self.waiting.lock().insert(ev.path.clone()) {
            return Offered::Coalesced;
        }
        match self.events.try_push(ev) {
            Ok(()) => Offered::Queued,
            Err(refused) => {
                let ev = refused.into_item();
                self.waiting.lock().remove(&ev.path);
                Offered::Refused(ev)
            }
        }
    }

    /// Takes the next event (waiting up to `timeout`); a later event for its path is
    /// queued again.
    pub fn pop_timeout(&self, timeout: Duration) -> Result<WorkGuard<'_, FileEvent>, PopError> {
        let guard = self.events.pop_timeout(timeout)?;
        self.waiting.lock().remove(&guard.path);
        Ok(guard)
    }
}

/// Removes injected directives from a site configuration file, keeping the whole file first
/// as a pre-clean backup in `quarantine`; answers the backup's id. The fixes' own cleaning
/// (`remedy`), which the daemon passes in: the watcher never removes such a file whole.
pub trait InjectionCleaner: Send + Sync {
    fn clean(
        &self,
        quarantine: &quarantine::Quarantine,
        path: &Path,
        check: &str,
        account: Option<&str>,
    ) -> Result<String, String>;
}

/// Files the automatic response cleans rather than quarantines: per-directory
/// configuration whose other lines are the site's own.
pub fn is_site_config(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n == ".htaccess" || n == ".user.ini")
}

#[derive(Default)]
pub struct AnalyzerCounters {
    pub skipped_restored: AtomicU64,
    pub files_scanned: AtomicU64,
    pub matches: AtomicU64,
    pub quarantined: AtomicU64,
    pub quarantine_failures: AtomicU64,
    /// Site configuration files cleaned by the automatic response.
    pub cleaned: AtomicU64,
    pub scan_errors: AtomicU64,
    /// Files handed over by the reconcile walk.
    pub reconcile_files: AtomicU64,
}

pub struct Analyzer {
    pub signatures: Arc<SignatureSet>,
    pub engine: Arc<Engine>,
    pub store: Store,
    pub clock: SharedClock,
    pub quarantine: Arc<quarantine::Quarantine>,
    pub auto_quarantine: bool,
    pub component: Arc<Component>,
    pub counters: Arc<AnalyzerCounters>,
    pub restored: Arc<Restored>,
    owners: crate::hostfs::OwnerCache,
    reconcile: Option<ReconcileWorker>,
    /// Dropper candidates in their grace window (see [`crate::watch::dropper`]).
    droppers: Option<Droppers>,
    /// Archives and installers verified before extraction (see [`crate::watch::staged`]).
    staged: Option<StagedPackages>,
    /// PHP files go on to the taint analysis (`php_taint.requests`).
    taint: Option<BoundedQueue<PathBuf>>,
    /// Cleans site configuration files instead of quarantining them.
    cleaner: Option<Arc<dyn InjectionCleaner>>,
    /// Reconcile walk errors already added to the component's error count.
    walk_errors_seen: u64,
    log: LogLimiter,
}

impl Analyzer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        signatures: Arc<SignatureSet>,
        engine: Arc<Engine>,
        store: Store,
        clock: SharedClock,
        quarantine: Arc<quarantine::Quarantine>,
        auto_quarantine: bool,
        component: Arc<Component>,
        restored: Arc<Restored>,
    ) -> Analyzer {
        let clock_for_log = clock.clone();
        Analyzer {
            signatures,
            engine,
            store,
            clock,
            quarantine,
            auto_quarantine,
            component,
            counters: Arc::new(AnalyzerCounters::default()),
            restored,
            owners: crate::hostfs::OwnerCache::default(),
            reconcile: None,
            droppers: None,
            staged: None,
            taint: None,
            cleaner: None,
            walk_errors_seen: 0,
            log: LogLimiter::per_minute(clock_for_log),
        }
    }

    /// Cleans `.htaccess` and `.user.ini` injections with `cleaner` (never removes them).
    pub fn with_cleaner(mut self, cleaner: Arc<dyn InjectionCleaner>) -> Analyzer {
        self.cleaner = Some(cleaner);
        self
    }

    /// Walks the watcher's reconcile queue on this analyzer's thread.
    pub fn with_reconcile(mut self, worker: ReconcileWorker) -> Analyzer {
        self.reconcile = Some(worker);
        self
    }

    /// Tracks dropper candidates among the PHP files of live events.
    pub fn with_droppers(mut self, droppers: Droppers) -> Analyzer {
        self.droppers = Some(droppers);
        self
    }

    /// Verifies archives and installers of live events before they are extracted.
    pub fn with_staged_packages(mut self, staged: StagedPackages) -> Analyzer {
        self.staged = Some(staged);
        self
    }

    /// Hands PHP files on to the taint analysis queue.
    pub fn with_taint(mut self, queue: BoundedQueue<PathBuf>) -> Analyzer {
        self.taint = Some(queue);
        self
    }

    /// Offers a PHP file to the taint analysis; a full queue refuses it (a loss of its row).
    fn offer_taint(&self, path: &Path) {
        if let Some(q) = &self.taint {
            if crate::scan::taint::is_php_path(path) {
                let _ = q.try_push(path.to_path_buf());
            }
        }
    }

    /// Consumes the analyzer queue until it is closed or `stop` is set, walking the
    /// reconcile queue between live events.
    pub fn run(mut self, queue: AnalyzerQueue, stop: Arc<AtomicBool>) {
        while !stop.load(Ordering::SeqCst) {
            if let Some(d) = self.droppers.as_mut() {
                d.expire();
            }
            let reconciling = self.reconcile.as_ref().is_some_and(|w| w.has_work());
            let mut handled = 0usize;
            while handled < LIVE_BURST && !stop.load(Ordering::SeqCst) {
                let wait = if handled == 0 && !reconciling {
                    IDLE_WAIT
                } else {
                    Duration::ZERO
                };
                match queue.pop_timeout(wait) {
                    Ok(guard) => {
                        handled += 1;
                        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            self.handle(&guard)
                        }));
                        if result.is_err() {
                            // A recovered scanner panic is lost scan work.
                            log::error!("analyzer: scanning {} panicked", escape_path(&guard.path));
                            guard.lose();
                        } else {
                            guard.finish();
                        }
                    }
                    Err(PopError::Timeout) => break,
                    Err(PopError::Closed) => return,
                }
            }
            if reconciling && !stop.load(Ordering::SeqCst) {
                self.reconcile_batch();
            }
        }
    }

    /// One batch of the reconcile walk.
    fn reconcile_batch(&mut self) {
        let Some(mut worker) = self.reconcile.take() else {
            return;
        };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            worker.run_batch(RECONCILE_BATCH, RECONCILE_SLICE, &mut |path, dir, name| {
                self.counters
                    .reconcile_files
                    .fetch_add(1, Ordering::Relaxed);
                self.scan_at(path, dir, name);
            });
        }));
        if result.is_err() {
            log::error!("analyzer: the reconcile walk panicked; its current tree is lost");
            worker.abandon();
        }
        let errors = worker.queue().counters().errors.load(Ordering::Relaxed);
        if errors > self.walk_errors_seen {
            self.component
                .errors
                .fetch_add(errors - self.walk_errors_seen, Ordering::Relaxed);
            self.walk_errors_seen = errors;
        }
        self.reconcile = Some(worker);
    }

    /// Every kind of event (closed after writing, moved in, linked in) is a file to scan.
    fn handle(&mut self, ev: &FileEvent) {
        self.scan_path(&ev.path);
        self.dropper_event(&ev.path);
        self.staged_event(&ev.path);
    }

    /// Opens an archive or installer of a live event (never through a symlink) and submits
    /// what its verification found.
    fn staged_event(&mut self, path: &Path) {
        let Some(staged) = self.staged.as_ref() else {
            return;
        };
        if path.as_os_str().len() >= files::PATH_MAX_BYTES
            || !path
                .file_name()
                .is_some_and(|n| staged::is_package_name(n.as_encoded_bytes()))
        {
            return;
        }
        let Ok(file) = crate::sys::dir::open_regular_trusted(path, false) else {
            return;
        };
        let Ok(meta) = file.metadata() else {
            return;
        };
        let found = staged.verify(path, &file, &self.signatures);
        let owner = self.owner_name(meta.uid());
        for f in found {
            let f = match &owner {
                Some(o) => f.with_account(o.clone()),
                None => f,
            };
            if !self.engine.submit(f) {
                log::warn!(
                    "analyzer: staged-package finding for {} refused by a full ingest queue",
                    escape_path(path)
                );
            }
        }
    }

    /// Hands a PHP file of a live event to the dropper tracker (its first
    /// [`dropper::matcher::MAX_SCAN`] bytes, never through a symlink) and submits the
    /// findings it confirms.
    fn dropper_event(&mut self, path: &Path) {
        if self.droppers.is_none()
            || path.as_os_str().len() >= files::PATH_MAX_BYTES
            || !path
                .file_name()
                .is_some_and(|n| crate::hostfs::is_php_name(n.as_encoded_bytes()))
        {
            return;
        }
        let Ok(file) = crate::sys::dir::open_regular_trusted(path, false) else {
            return;
        };
        let Ok(meta) = file.metadata() else {
            return;
        };
        let mut content = Vec::new();
        if std::io::Read::read_to_end(
            &mut std::io::Read::take(&file, dropper::matcher::MAX_SCAN as u64),
            &mut content,
        )
        .is_err()
        {
            return;
        }
        let Some(d) = self.droppers.as_mut() else {
            return;
        };
        let confirmed = d.observe(path, meta.uid(), &content);
        for f in confirmed {
            let f = match self.owner_name(meta.uid()) {
                Some(o) => f.with_account(o),
                None => f,
            };
            if !self.engine.submit(f) {
                log::warn!(
                    "analyzer: dropper finding for {} refused by a full ingest queue",
                    escape_path(path)
                );
            }
        }
    }

    /// A file could not be read for a reason other than vanishing: counted as an error of
    /// the `files` component and logged (one line a minute).
    fn scan_error(&self, path: &Path, err: &std::io::Error) {
        self.counters.scan_errors.fetch_add(1, Ordering::Relaxed);
        self.component.errors.fetch_add(1, Ordering::Relaxed);
        crate::warn_limited!(
            self.log,
            "scan_error",
            "",
            "analyzer: cannot scan {}: {err}",
            crate::text::cut(&escape_path(path), 300)
        );
    }

    /// Scans `name` in the directory `dir`, known as `path` (from the reconcile walk).
    fn scan_at(&mut self, path: &Path, dir: BorrowedFd<'_>, name: &OsStr) {
        if !self.signatures.applies_to(path) {
            return;
        }
        match files::open_file_at(dir, name) {
            Ok(f) => self.scan_opened(path, f),
            Err(e) if files::vanished(&e) || e.raw_os_error() == Some(libc::ENXIO) => {}
            Err(e) => self.scan_error(path, &e),
        }
    }

    /// Scans an open file known as `path` (the caller checked that rules apply to it).
    fn scan_opened(&mut self, path: &Path, file: File) {
        let Ok(meta) = file.metadata() else {
            return;
        };
        if !meta.is_file() || meta.len() == 0 {
            return;
        }
        self.counters.files_scanned.fetch_add(1, Ordering::Relaxed);
        self.component.event(self.clock.now());
        match self.signatures.scan_open_file(path, &file) {
            Ok(matches) => self.report(path, meta.uid(), matches),
            Err(e) => self.scan_error(path, &e),
        }
    }

    fn owner_name(&mut self, uid: u32) -> Option<String> {
        self.owners.name(uid)
    }

    /// Scans one file; emits a finding per match; quarantines on a high-confidence match.
    /// Paths of 4,096 bytes or more are opened by steps from `/`.
    pub fn scan_path(&mut self, path: &Path) {
        if path.as_os_str().len() >= files::PATH_MAX_BYTES {
            if !self.signatures.applies_to(path) {
                return;
            }
            match files::open_file_long(path) {
                Ok(f) => self.scan_opened(path, f),
                Err(e) if files::vanished(&e) || e.raw_os_error() == Some(libc::ENXIO) => {}
                Err(e) => self.scan_error(path, &e),
            }
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        if !meta.is_file() || meta.len() == 0 {
            return;
        }
        if !self.signatures.applies_to(path) {
            return;
        }
        self.counters.files_scanned.fetch_add(1, Ordering::Relaxed);
        self.component.event(self.clock.now());
        let matches = match self.signatures.scan_file(path) {
            Ok(m) => m,
            Err(e) if files::vanished(&e) => return,
            Err(e) => {
                self.scan_error(path, &e);
                return;
            }
        };
        self.report(path, meta.uid(), matches);
    }

    /// Findings (and quarantine) for the matches of one file owned by `uid`.
    /// A file no high-confidence signature matched goes on to the taint analysis (one
    /// that such a signature matches is already a webshell finding, maybe quarantined; a
    /// medium one such as `php_in_uploads` says where a file is, not what it does).
    fn report(&mut self, path: &Path, uid: u32, matches: Vec<Match>) {
        if !matches.iter().any(Match::is_high_confidence) {
            self.offer_taint(path);
        }
        if matches.is_empty() {
            return;
        }
        if self.restored.is_trusted(path) {
            self.counters
                .skipped_restored
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        let owner = self.owner_name(uid);
        let now = self.clock.now();
        let mut quarantined_as: Option<String> = None;
        if self.auto_quarantine {
            if let Some(m) = matches.iter().find(|m| m.is_high_confidence()) {
                let check = m.to_finding(path, now).check;
                quarantined_as = if is_site_config(path) {
                    self.clean(path, &check, owner.as_deref())
                } else {
                    self.quarantine(path, &check, &m.name, owner.as_deref())
                };
            }
        }
        for m in &matches {
            self.counters.matches.fetch_add(1, Ordering::Relaxed);
            let mut f = m.to_finding(path, now);
            if let Some(o) = &owner {
                f = f.with_account(o.clone());
            }
            if let Some(id) = &quarantined_as {
                let done = if is_site_config(path) {
                    "injected lines removed, pre-clean backup"
                } else {
                    "quarantined as"
                };
                f.details = format!("{}; {done} {id}", f.details);
            }
            if !self.engine.submit(f) {
                log::warn!(
                    "analyzer: finding for {} refused by a full ingest queue",
                    escape_path(path)
                );
            }
        }
    }

    /// The automatic response for a site configuration file: its injected lines removed
    /// (the backup's id), or nothing at all when no cleaner is set or the cleaning refuses.
    fn clean(&self, path: &Path, check: &str, owner: Option<&str>) -> Option<String> {
        let cleaner = self.cleaner.as_ref()?;
        match cleaner.clean(&self.quarantine, path, check, owner) {
            Ok(id) => {
                self.counters.cleaned.fetch_add(1, Ordering::Relaxed);
                log::warn!(
                    "cleaned the injected lines of {} (pre-clean backup {id})",
                    escape_path(path)
                );
                Some(id)
            }
            Err(e) => {
                log::error!("automatic cleaning of {}: {e}", escape_path(path));
                self.counters
                    .quarantine_failures
                    .fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn quarantine(
        &self,
        path: &Path,
        check: &str,
        rule: &str,
        owner: Option<&str>,
    ) -> Option<String> {
        let reason = format!("signature {rule}");
        let cause = quarantine::control::Cause {
            check,
            reason: &reason,
            account: owner,
        };
        let id = match quarantine::control::quarantine_and_record(
            &self.store,
            &self.quarantine,
            &self.clock,
            path,
            &cause,
        ) {
            Ok((id, _)) => id,
            Err(e) => {
                log::error!(
                    "quarantine: cannot move {}: {e}",
                    crate::text::escape_path(path)
                );
                self.counters
                    .quarantine_failures
                    .fetch_add(1, Ordering::Relaxed);
                return None;
            }
        };
        self.counters.quarantined.fetch_add(1, Ordering::Relaxed);
        log::warn!(
            "quarantined {} as {id} ({rule})",
            crate::text::escape_path(path)
        );
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::queue::RowConfig;
    use crate::watch::files::EventKind;

    fn event(path: &str, kind: EventKind) -> FileEvent {
        FileEvent {
            path: PathBuf::from(path),
            kind,
            observed_at: 0,
        }
    }

    #[test]
    fn an_event_for_a_waiting_path_is_merged_until_the_scan_takes_it() {
        let clock: SharedClock = ManualClock::at_epoch_2026();
        let q = AnalyzerQueue::new(
            BoundedQueue::new(clock, RowConfig::new("files").capacity(2)).unwrap(),
        );
        let a = "/www/a.php";
        // Created with content while the watcher lagged, then closed after writing.
        assert_eq!(q.offer(event(a, EventKind::Linked)), Offered::Queued);
        assert_eq!(
            q.offer(event(a, EventKind::ClosedWrite)),
            Offered::Coalesced
        );
        assert_eq!(
            q.offer(event("/www/b.php", EventKind::ClosedWrite)),
            Offered::Queued
        );
        assert_eq!(q.events.len(), 2);

        // The scan takes the event before reading the file: a write after that is queued.
        let guard = q.pop_timeout(Duration::ZERO).unwrap();
        assert_eq!(guard.path, Path::new(a));
        guard.finish();
        assert_eq!(q.offer(event(a, EventKind::ClosedWrite)), Offered::Queued);

        // A full queue hands the event back and forgets the path, so it is offered again.
        let c = event("/www/c.php", EventKind::MovedIn);
        assert_eq!(q.offer(c.clone()), Offered::Refused(c.clone()));
        assert_eq!(q.offer(c.clone()), Offered::Refused(c));
        assert_eq!(q.events.health().dropped_total(), 2);
    }
}
