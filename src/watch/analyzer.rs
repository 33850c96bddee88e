//! `fanotify.analyzer`: files closed after writing are scanned against the content
//! signatures; matches become findings carrying path and account (the owner's user name).
//! With `auto_response.quarantine`, a high-confidence match moves the file into quarantine.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::components::Component;
use crate::findings::Engine;
use crate::queue::{BoundedQueue, PopError};
use crate::scan::quarantine;
use crate::scan::signatures::SignatureSet;
use crate::store::Store;
use crate::watch::files::{EventKind, FileEvent};

/// Files scanned at most when a directory must be rescanned (after a queue overflow).
const MAX_RESCAN_FILES: usize = 20_000;

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

#[derive(Default)]
pub struct AnalyzerCounters {
    pub skipped_restored: AtomicU64,
    pub files_scanned: AtomicU64,
    pub matches: AtomicU64,
    pub quarantined: AtomicU64,
    pub quarantine_failures: AtomicU64,
    pub scan_errors: AtomicU64,
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
    users: HashMap<u32, Option<String>>,
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
            users: HashMap::new(),
        }
    }

    /// Consumes the analyzer queue until it is closed or `stop` is set.
    pub fn run(mut self, queue: BoundedQueue<FileEvent>, stop: Arc<AtomicBool>) {
        while !stop.load(Ordering::SeqCst) {
            match queue.pop_timeout(Duration::from_millis(250)) {
                Ok(guard) => {
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        self.handle(&guard)
                    }));
                    if result.is_err() {
                        // A recovered scanner panic is lost scan work.
                        log::error!("analyzer: scanning {} panicked", guard.path.display());
                        guard.lose();
                    } else {
                        guard.finish();
                    }
                }
                Err(PopError::Timeout) => {}
                Err(PopError::Closed) => break,
            }
        }
    }

    fn handle(&mut self, ev: &FileEvent) {
        match ev.kind {
            EventKind::ClosedWrite | EventKind::MovedIn => self.scan_path(&ev.path),
            EventKind::DirectoryScan => {
                let mut n = 0usize;
                let mut stack = vec![ev.path.clone()];
                while let Some(dir) = stack.pop() {
                    let Ok(rd) = std::fs::read_dir(&dir) else {
                        continue;
                    };
                    for e in rd.flatten() {
                        let Ok(ft) = e.file_type() else { continue };
                        if ft.is_dir() {
                            stack.push(e.path());
                        } else if ft.is_file() {
                            n += 1;
                            if n > MAX_RESCAN_FILES {
                                log::warn!(
                                    "analyzer: rescan of {} stopped at {MAX_RESCAN_FILES} files",
                                    ev.path.display()
                                );
                                return;
                            }
                            self.scan_path(&e.path());
                        }
                    }
                }
            }
        }
    }

    fn owner_name(&mut self, uid: u32) -> Option<String> {
        self.users
            .entry(uid)
            .or_insert_with(|| {
                nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
                    .ok()
                    .flatten()
                    .map(|u| u.name)
            })
            .clone()
    }

    /// Scans one file; emits a finding per match; quarantines on a high-confidence match.
    pub fn scan_path(&mut self, path: &Path) {
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
            Err(e) => {
                self.counters.scan_errors.fetch_add(1, Ordering::Relaxed);
                log::debug!("analyzer: cannot scan {}: {e}", path.display());
                return;
            }
        };
        if matches.is_empty() {
            return;
        }
        if self.restored.is_trusted(path) {
            self.counters
                .skipped_restored
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        let owner = self.owner_name(meta.uid());
        let now = self.clock.now();
        let mut quarantined_as: Option<String> = None;
        if self.auto_quarantine {
            if let Some(m) = matches.iter().find(|m| m.is_high_confidence()) {
                quarantined_as = self.quarantine(
                    path,
                    &m.to_finding(path, now).check,
                    &m.name,
                    owner.as_deref(),
                );
            }
        }
        for m in &matches {
            self.counters.matches.fetch_add(1, Ordering::Relaxed);
            let mut f = m.to_finding(path, now);
            if let Some(o) = &owner {
                f = f.with_account(o.clone());
            }
            if let Some(id) = &quarantined_as {
                f.details = format!("{}; quarantined as {id}", f.details);
            }
            if !self.engine.submit(f) {
                log::warn!(
                    "analyzer: finding for {} refused by a full ingest queue",
                    path.display()
                );
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
        let id = crate::ids::random_hex(8);
        let record = match self.quarantine.quarantine(path, &id) {
            Ok(r) => r,
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
        let json = serde_json::to_string(&record).unwrap_or_default();
        let (idc, p, c, r, o, at) = (
            id.clone(),
            path.display().to_string(),
            check.to_string(),
            format!("signature {rule}"),
            owner.map(String::from),
            self.clock.now(),
        );
        let stored = self.store.write(move |conn| {
            crate::store::quarantine::insert(conn, &idc, &json, &p, &c, &r, o.as_deref(), at)
        });
        if let Err(e) = stored {
            // The file is safe in quarantine; its record is in the log so it can be restored.
            log::error!(
                "quarantine: {} moved as {id} but its record was not stored: {e}; record: {}",
                crate::text::escape_path(path),
                crate::text::escape_controls(&serde_json::to_string(&record).unwrap_or_default())
            );
        }
        self.counters.quarantined.fetch_add(1, Ordering::Relaxed);
        log::warn!(
            "quarantined {} as {id} ({rule})",
            crate::text::escape_path(path)
        );
        Some(id)
    }
}
