//! State shared by both backends on the watch thread: roots, exclusions, the emitter, and
//! the reconcile queue that takes every tree whose changes may have gone unreported.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_channel::{Sender, TrySendError};

use super::reconcile::{Reconcile, Requested};
use super::stats::{inc, WatchCounters};
use super::{EventKind, FileEvent};
use crate::clock::SharedClock;
use crate::lograte::LogLimiter;
use crate::text::escape_path;

/// One configured root and whether it is attached.
#[derive(Debug, Clone)]
pub(crate) struct RootSlot {
    /// As configured.
    pub configured: PathBuf,
    /// Canonical path while attached (reported paths start with it).
    pub canonical: Option<PathBuf>,
    /// Send a `DirectoryScan` when it next attaches (it was missing or detached, so files
    /// may have appeared unseen).
    pub scan_on_attach: bool,
    /// Failure already logged since the last attach (keeps retries quiet).
    pub failure_logged: bool,
}

/// Directories whose contents never produce events (the daemon's own state dir).
#[derive(Debug, Clone)]
pub(crate) struct Excluded {
    entries: Vec<(PathBuf, Option<PathBuf>)>,
}

impl Excluded {
    pub(crate) fn new(dirs: &[PathBuf]) -> Excluded {
        let mut e = Excluded {
            entries: dirs.iter().map(|d| (d.clone(), None)).collect(),
        };
        e.refresh();
        e
    }

    /// Re-resolves the canonical form of each excluded directory (it may appear later or
    /// be reached through a symlink).
    pub(crate) fn refresh(&mut self) {
        for (configured, canonical) in &mut self.entries {
            *canonical = std::fs::canonicalize(configured.as_path()).ok();
        }
    }

    /// True when `path` is an excluded directory or lies under one.
    pub(crate) fn contains(&self, path: &Path) -> bool {
        self.entries.iter().any(|(configured, canonical)| {
            path.starts_with(configured) || canonical.as_ref().is_some_and(|c| path.starts_with(c))
        })
    }
}

/// Everything a backend needs to turn kernel events into [`FileEvent`]s.
pub(crate) struct Ctx {
    pub roots: Vec<RootSlot>,
    pub excluded: Excluded,
    pub counters: Arc<WatchCounters>,
    pub max_watches: usize,
    /// Trees to walk again (shared with the analyzer, which walks them).
    pub reconcile: Arc<Reconcile>,
    /// One line a minute per kind for what files under the roots can cause.
    pub log: LogLimiter,
    tx: Sender<FileEvent>,
    clock: SharedClock,
    disconnected_logged: std::cell::Cell<bool>,
}

impl Ctx {
    pub(crate) fn new(
        roots: &[PathBuf],
        opts: &super::WatchOptions,
        counters: Arc<WatchCounters>,
        reconcile: Arc<Reconcile>,
    ) -> Ctx {
        Ctx {
            roots: roots
                .iter()
                .map(|r| RootSlot {
                    configured: r.clone(),
                    canonical: None,
                    scan_on_attach: false,
                    failure_logged: false,
                })
                .collect(),
            excluded: Excluded::new(&opts.excluded_dirs),
            counters,
            max_watches: opts.max_watches,
            reconcile,
            log: LogLimiter::per_minute(opts.clock.clone()),
            tx: opts.events.clone(),
            clock: opts.clock.clone(),
            disconnected_logged: std::cell::Cell::new(false),
        }
    }

    pub(crate) fn now(&self) -> i64 {
        self.clock.monotonic_nanos()
    }

    /// Sends one event without blocking. A full channel (or a gone receiver) counts a drop
    /// and hands the file's directory to the reconcile walk, so the change is not lost.
    pub(crate) fn send(&self, path: PathBuf, kind: EventKind) {
        let ev = FileEvent {
            path,
            kind,
            observed_at: self.now(),
        };
        match self.tx.try_send(ev) {
            Ok(()) => inc(&self.counters.events_emitted),
            Err(TrySendError::Full(ev)) => {
                inc(&self.counters.dropped);
                self.request_parent(&ev.path);
            }
            Err(TrySendError::Disconnected(_)) => {
                inc(&self.counters.dropped);
                if !self.disconnected_logged.replace(true) {
                    log::warn!("file watcher: event receiver is gone; events are dropped");
                }
            }
        }
    }

    /// Asks for the tree at `dir` to be walked again (it must lie under an attached root and
    /// outside the exclusions; otherwise it is counted as filtered).
    pub(crate) fn request_scan(&self, dir: &Path) {
        if self.excluded.contains(dir) {
            inc(&self.counters.filtered);
            return;
        }
        match self.reconcile.request(dir) {
            Requested::Ignored => inc(&self.counters.filtered),
            _ => inc(&self.counters.scans_requested),
        }
    }

    /// Asks for the directory of the file `path` to be walked again.
    pub(crate) fn request_parent(&self, path: &Path) {
        if let Some(dir) = path.parent() {
            self.request_scan(dir);
        }
    }

    /// The attached root `path` lies under (the innermost one).
    pub(crate) fn root_of(&self, path: &Path) -> Option<PathBuf> {
        self.roots
            .iter()
            .filter_map(|r| r.canonical.as_ref())
            .filter(|c| path.starts_with(c))
            .max_by_key(|c| c.as_os_str().len())
            .cloned()
    }

    /// A path the watcher could neither report nor hand to the walk: counted in
    /// `path_errors` and logged (one line a minute).
    pub(crate) fn path_error(&self, what: &str, path: &Path, err: &std::io::Error) {
        inc(&self.counters.path_errors);
        let shown = if path.as_os_str().is_empty() {
            String::new()
        } else {
            format!(" {}", crate::text::cut(&escape_path(path), 300))
        };
        crate::warn_limited!(
            self.log,
            "path_error",
            "",
            "file watcher: {what}{shown}: {err}"
        );
    }

    /// True when `path` is under an attached root and not excluded.
    pub(crate) fn wanted(&self, path: &Path) -> bool {
        !self.excluded.contains(path)
            && self
                .roots
                .iter()
                .any(|r| r.canonical.as_ref().is_some_and(|c| path.starts_with(c)))
    }

    /// Sends `path` if wanted, otherwise counts it as filtered.
    pub(crate) fn offer(&self, path: PathBuf, kind: EventKind) {
        if self.wanted(&path) {
            self.send(path, kind);
        } else {
            inc(&self.counters.filtered);
        }
    }

    /// A kernel queue overflow: counts it and hands every attached root to the reconcile
    /// walk (changes during the overflow were not reported).
    pub(crate) fn overflow(&self) {
        inc(&self.counters.queue_overflows);
        crate::warn_limited!(
            self.log,
            "overflow",
            "",
            "file watcher: kernel event queue overflowed; walking the roots again"
        );
        let roots: Vec<PathBuf> = self
            .roots
            .iter()
            .filter_map(|r| r.canonical.clone())
            .collect();
        for r in roots {
            self.request_scan(&r);
        }
    }

    fn publish_roots(&self) {
        self.reconcile.set_roots(
            self.roots
                .iter()
                .filter_map(|r| r.canonical.clone())
                .collect(),
        );
    }

    /// Marks root `i` attached at `canonical`; hands it to the reconcile walk if it had been
    /// missing or detached before.
    pub(crate) fn set_attached(&mut self, i: usize, canonical: PathBuf) {
        let Some(slot) = self.roots.get_mut(i) else {
            return;
        };
        if slot.canonical.is_none() {
            self.counters.roots_attached.fetch_add(1, Ordering::Relaxed);
        }
        let scan = slot.scan_on_attach;
        slot.scan_on_attach = false;
        slot.failure_logged = false;
        slot.canonical = Some(canonical.clone());
        log::info!(
            "file watcher: attached root {} ({})",
            slot.configured.display(),
            canonical.display()
        );
        self.publish_roots();
        if scan {
            self.request_scan(&canonical);
        }
    }

    /// Marks root `i` detached (removed, replaced or unmounted); it is retried later.
    pub(crate) fn set_detached(&mut self, i: usize) {
        let Some(slot) = self.roots.get_mut(i) else {
            return;
        };
        if slot.canonical.take().is_some() {
            self.counters.roots_attached.fetch_sub(1, Ordering::Relaxed);
            log::warn!(
                "file watcher: root {} went away; retrying",
                slot.configured.display()
            );
        }
        slot.scan_on_attach = true;
        self.publish_roots();
    }

    /// Records a failed attach of root `i` (logged once until it attaches).
    pub(crate) fn attach_failed(&mut self, i: usize, err: &std::io::Error) {
        inc(&self.counters.root_attach_failures);
        if let Some(slot) = self.roots.get_mut(i) {
            slot.scan_on_attach = true;
            if !slot.failure_logged {
                slot.failure_logged = true;
                log::warn!(
                    "file watcher: cannot attach root {}: {err}; retrying",
                    slot.configured.display()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::watch::files::WatchOptions;

    fn ctx(cap: usize) -> (Ctx, crossbeam_channel::Receiver<FileEvent>) {
        let (tx, rx) = crossbeam_channel::bounded(cap);
        let clock = ManualClock::at_epoch_2026();
        let mut opts = WatchOptions::new(tx, clock.clone());
        opts.excluded_dirs = vec![PathBuf::from("/srv/www/state")];
        let r = Reconcile::new(clock, opts.excluded_dirs.clone());
        let c = Ctx::new(&[PathBuf::from("/srv/www")], &opts, Arc::default(), r);
        (c, rx)
    }

    #[test]
    fn filtering_respects_roots_and_exclusions() {
        let (mut c, rx) = ctx(8);
        assert!(!c.wanted(Path::new("/srv/www/a")), "not attached yet");
        c.set_attached(0, PathBuf::from("/srv/www"));
        assert!(c.wanted(Path::new("/srv/www/a")));
        assert!(!c.wanted(Path::new("/srv/wwwx/a")));
        assert!(!c.wanted(Path::new("/srv/www/state/db")));
        assert!(!c.wanted(Path::new("/srv/www/state")));
        c.offer(PathBuf::from("/etc/passwd"), EventKind::ClosedWrite);
        assert_eq!(c.counters.filtered.load(Ordering::Relaxed), 1);
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn full_channel_hands_the_directory_to_the_walk_and_reattach_requests_a_scan() {
        let (mut c, rx) = ctx(1);
        c.set_attached(0, PathBuf::from("/srv/www"));
        c.offer(PathBuf::from("/srv/www/a"), EventKind::ClosedWrite);
        c.offer(PathBuf::from("/srv/www/sub/b"), EventKind::ClosedWrite);
        assert_eq!(c.counters.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(
            c.reconcile.pending_paths(),
            vec![PathBuf::from("/srv/www/sub")]
        );
        let ev = rx.try_recv().expect("first event");
        assert_eq!(ev.path, PathBuf::from("/srv/www/a"));
        assert_eq!(ev.observed_at, 1_000_000_000);
        c.set_detached(0);
        assert_eq!(c.counters.roots_attached.load(Ordering::Relaxed), 0);
        // Detached: requests under it are not taken.
        c.request_scan(Path::new("/srv/www/x"));
        assert_eq!(c.counters.filtered.load(Ordering::Relaxed), 1);
        c.set_attached(0, PathBuf::from("/srv/www"));
        assert_eq!(c.reconcile.pending_paths(), vec![PathBuf::from("/srv/www")]);
        c.overflow();
        assert_eq!(c.reconcile.pending_paths(), vec![PathBuf::from("/srv/www")]);
        assert_eq!(c.counters.queue_overflows.load(Ordering::Relaxed), 1);
        assert!(
            rx.try_recv().is_err(),
            "nothing goes through the event channel"
        );
    }
}
