//! `file_index_changed`: the file-index baseline of the web roots, a deep-scan task
//! ([`ScanTask`]).
//!
//! Every deep or full scan walks each web root (through `sys::dir`: no symlink followed,
//! paths kept as raw bytes) and keeps, per root, a baseline in the store: path, size, mode,
//! owner, mtime, ctime, inode and SHA-256 of the content. Only files whose inode, size,
//! mtime or ctime differ from the baseline are read (ctime cannot be set back by a file's
//! owner, so `touch -r` does not hide a change). Files new or changed since the baseline in
//! places that rarely change ([`index::watched_place`]: WordPress core directories, PHP
//! below `wp-content/uploads/`, `.htaccess` anywhere) are findings, one per file; then the
//! baseline takes the new state. The first scan of a root only builds its baseline.
//!
//! A change is reported by the scan that first sees it and stays active until the next
//! deep scan completes (history keeps it); see docs/decisions.md.
//!
//! Rows: `checks.file_index.waiting` (scans waiting for the single baseline slot) and
//! `checks.file_index.active` (the scan holding it: capacity 1, phase budgets 1 minute for
//! setup, persistence and cleanup, 15 minutes for the walk, which also stops there).

pub mod index;

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use self::index::{index_root, root_key, watched_place, ChangeKind, IndexLimits, IndexStats};
use super::context::CheckContext;
use super::jobs::ScanTask;
use super::sink::Sink;
use super::walk::OwnerCache;
use crate::clock::SharedClock;
use crate::findings::{Finding, Severity};
use crate::queue::{
    LagBasis, Phase, PhaseBudgets, QueueHealth, Registry, RowConfig, RowError, RowHandle,
};
use crate::store::file_index::{self as sql, BaselineUpdate, IndexedFile};
use crate::store::Store;
use crate::sys::dir::Dir;

pub const CHECK: &str = "file_index_changed";
pub const WAITING_ROW: &str = "checks.file_index.waiting";
pub const ACTIVE_ROW: &str = "checks.file_index.active";
/// The walk of one scan stops after this long (the rest of the roots keep their baseline).
pub const EXECUTION_DEADLINE: Duration = Duration::from_secs(15 * 60);
/// Directory entries one scan looks at, over all roots.
pub const MAX_ENTRIES: usize = 2_000_000;
/// Baseline records loaded per root at most (a larger root is indexed partly).
pub const MAX_BASELINE: usize = 2_000_000;

/// What the last scan did (for the log and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    pub roots: u64,
    pub index: IndexStats,
    pub reported: u64,
}

/// The baseline task (one per daemon).
pub struct FileIndex {
    store: Store,
    clock: SharedClock,
    slot: Mutex<()>,
    waiting: Arc<QueueHealth>,
    active: Arc<QueueHealth>,
    _rows: [RowHandle; 2],
    last: Mutex<Option<RunStats>>,
}

fn add(a: &mut IndexStats, b: &IndexStats) {
    a.files += b.files;
    a.hashed += b.hashed;
    a.bytes_hashed += b.bytes_hashed;
    a.unchanged += b.unchanged;
    a.symlinks += b.symlinks;
    a.errors += b.errors;
    a.depth_refused += b.depth_refused;
    a.incomplete |= b.incomplete;
}

impl FileIndex {
    /// Registers the two rows.
    pub fn start(
        store: Store,
        clock: SharedClock,
        registry: &Arc<Registry>,
    ) -> Result<Arc<FileIndex>, RowError> {
        let waiting = QueueHealth::new(clock.clone(), RowConfig::new("scans"));
        let minute = Duration::from_secs(60);
        let mut active = RowConfig::new("scans")
            .capacity(1)
            .running_slots(1)
            .lag_basis(LagBasis::OperationProgress);
        active.phase_budgets = PhaseBudgets::uniform(minute)
            .with(Phase::Processing, EXECUTION_DEADLINE)
            .with(Phase::Setup, minute)
            .with(Phase::ResultHandling, minute)
            .with(Phase::Cleanup, minute);
        let active = QueueHealth::new(clock.clone(), active);
        let rows = [
            registry
                .register(WAITING_ROW, waiting.clone())
                .map_err(RowError::at(WAITING_ROW))?,
            registry
                .register(ACTIVE_ROW, active.clone())
                .map_err(RowError::at(ACTIVE_ROW))?,
        ];
        Ok(Arc::new(FileIndex {
            store,
            clock,
            slot: Mutex::new(()),
            waiting,
            active,
            _rows: rows,
            last: Mutex::new(None),
        }))
    }

    /// What the last completed scan did.
    pub fn last_run(&self) -> Option<RunStats> {
        *self.last.lock()
    }

    /// One scan of every web root: the findings, or `None` when the baseline could not be
    /// read or written (the check is then not completed: earlier findings stay).
    pub fn scan(&self, ctx: &CheckContext, stop: &AtomicBool) -> Option<Vec<Finding>> {
        let ticket = self.waiting.admit();
        let _slot = self.slot.lock();
        ticket.finish();
        let running = self.active.start_running_in(Phase::Setup);
        let started = self.clock.monotonic_nanos();
        let deadline = started.saturating_add(EXECUTION_DEADLINE.as_nanos() as i64);
        let clock = self.clock.clone();
        let now = move || {
            if stop.load(Ordering::SeqCst) {
                i64::MAX
            } else {
                clock.monotonic_nanos()
            }
        };
        let mut sink = Sink::new(ctx, CHECK);
        let mut owners = OwnerCache::default();
        let mut stats = RunStats::default();
        let mut left = MAX_ENTRIES;
        let mut failed = false;
        for root in ctx.glob_all(&ctx.web_roots) {
            if now() >= deadline || left == 0 {
                stats.index.incomplete = true;
                break;
            }
            running.set_phase(Phase::Setup);
            let dir = match Dir::walk_trusted(&root) {
                Ok(d) => d,
                Err(e) => {
                    log::warn!("file index: cannot open {e}");
                    stats.index.errors += 1;
                    continue;
                }
            };
            let key = root_key(&root);
            let k = key.clone();
            let loaded = self.store.read(|c| {
                let has = sql::has_baseline(c, &k)?;
                let files = sql::load(c, &k, MAX_BASELINE)?;
                Ok((has, files))
            });
            let (has_baseline, files) = match loaded {
                Ok(x) => x,
                Err(e) => {
                    log::error!("file index: cannot read the baseline: {e}");
                    failed = true;
                    break;
                }
            };
            let baseline: HashMap<Vec<u8>, IndexedFile> =
                files.into_iter().map(|f| (f.path.clone(), f)).collect();
            running.set_phase(Phase::Processing);
            let limits = IndexLimits {
                max_entries: left,
                max_depth: ctx.limits.max_walk_depth,
                deadline: Some(deadline),
            };
            let idx = index_root(&dir, &baseline, limits, &now);
            left = left.saturating_sub(idx.stats.files as usize);
            stats.roots += 1;
            add(&mut stats.index, &idx.stats);
            if has_baseline {
                for ch in &idx.changes {
                    let what = match ch.kind {
                        ChangeKind::New => "new",
                        ChangeKind::Changed => "changed",
                        ChangeKind::MetadataOnly => continue,
                    };
                    let Some(place) = watched_place(&ch.file.path) else {
                        continue;
                    };
                    let rel = std::ffi::OsStr::from_bytes(&ch.file.path);
                    let full = root.join(rel);
                    let shown = crate::hostfs::display_path(&full);
                    let severity = match place {
                        index::Place::Htaccess => Severity::Warning,
                        _ => Severity::High,
                    };
                    let f = sink
                        .finding(
                            severity,
                            format!(
                                "file {what} since the baseline ({}): {shown}",
                                place.label()
                            ),
                        )
                        .with_details(format!(
                            "{} bytes, mode {:04o}, uid {}, sha256 {}",
                            ch.file.size,
                            ch.file.mode,
                            ch.file.uid,
                            hex::encode(&ch.file.hash)
                        ))
                        .with_path(full.to_string_lossy().into_owned());
                    stats.reported += 1;
                    sink.push_owned(f, owners.name(ch.file.uid as u32));
                }
            }
            running.set_phase(Phase::ResultHandling);
            let new = idx
                .changes
                .iter()
                .filter(|c| c.kind == ChangeKind::New)
                .count();
            let update = BaselineUpdate {
                files: (baseline.len() + new).saturating_sub(idx.removed.len()) as i64,
                upserts: idx.changes.into_iter().map(|c| c.file).collect(),
                removed: idx.removed,
                built: self.clock.now().as_microsecond(),
            };
            if let Err(e) = self.store.write(move |c| sql::apply(c, &key, &update)) {
                log::error!("file index: cannot write the baseline: {e}");
                self.active
                    .note_uncertain(crate::queue::Uncertain::Persistence);
                failed = true;
                break;
            }
        }
        running.set_phase(Phase::Cleanup);
        let s = stats.index;
        log::info!(
            "file index: {} roots, {} files, {} hashed ({} bytes), {} unchanged not read, {} reported{}",
            stats.roots,
            s.files,
            s.hashed,
            s.bytes_hashed,
            s.unchanged,
            stats.reported,
            if s.incomplete { ", incomplete" } else { "" }
        );
        *self.last.lock() = Some(stats);
        running.finish();
        if failed {
            return None;
        }
        Some(sink.finish(None))
    }
}

impl ScanTask for FileIndex {
    fn checks(&self) -> &'static [&'static str] {
        &[CHECK]
    }

    fn run(&self, ctx: &CheckContext, stop: &AtomicBool) -> Vec<(&'static str, Vec<Finding>)> {
        match self.scan(ctx, stop) {
            Some(f) => vec![(CHECK, f)],
            None => Vec::new(),
        }
    }

    fn reconfigure(&self, _cfg: &crate::config::Config) {}
}

#[cfg(test)]
mod tests;
