//! State shared by both backends on the watch thread: roots, exclusions, the emitter.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_channel::{Sender, TrySendError};

use super::stats::{inc, WatchCounters};
use super::{EventKind, FileEvent};
use crate::clock::SharedClock;

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
    pub max_scan_files: usize,
    tx: Sender<FileEvent>,
    clock: SharedClock,
    disconnected_logged: std::cell::Cell<bool>,
}

impl Ctx {
    pub(crate) fn new(
        roots: &[PathBuf],
        opts: &super::WatchOptions,
        counters: Arc<WatchCounters>,
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
            max_scan_files: opts.max_scan_files,
            tx: opts.events.clone(),
            clock: opts.clock.clone(),
            disconnected_logged: std::cell::Cell::new(false),
        }
    }

    pub(crate) fn now(&self) -> i64 {
        self.clock.monotonic_nanos()
    }

    /// Sends one event without blocking; a full channel (or a gone receiver) counts a drop.
    pub(crate) fn send(&self, path: PathBuf, kind: EventKind) {
        let ev = FileEvent {
            path,
            kind,
            observed_at: self.now(),
        };
        match self.tx.try_send(ev) {
            Ok(()) => inc(&self.counters.events_emitted),
            Err(TrySendError::Full(_)) => inc(&self.counters.dropped),
            Err(TrySendError::Disconnected(_)) => {
                inc(&self.counters.dropped);
                if !self.disconnected_logged.replace(true) {
                    log::warn!("file watcher: event receiver is gone; events are dropped");
                }
            }
        }
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

    /// A kernel queue overflow: counts it and asks the caller to rescan every attached root.
    pub(crate) fn overflow(&self) {
        inc(&self.counters.queue_overflows);
        log::warn!("file watcher: kernel event queue overflowed; requesting root rescans");
        let roots: Vec<PathBuf> = self
            .roots
            .iter()
            .filter_map(|r| r.canonical.clone())
            .collect();
        for r in roots {
            self.send(r, EventKind::DirectoryScan);
        }
    }

    /// Marks root `i` attached at `canonical`; sends a `DirectoryScan` if it had been
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
        if scan {
            self.send(canonical, EventKind::DirectoryScan);
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
        let mut opts = WatchOptions::new(tx, ManualClock::at_epoch_2026());
        opts.excluded_dirs = vec![PathBuf::from("/srv/www/state")];
        let c = Ctx::new(&[PathBuf::from("/srv/www")], &opts, Arc::default());
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
    fn full_channel_counts_drops_and_reattach_requests_a_scan() {
        let (mut c, rx) = ctx(1);
        c.set_attached(0, PathBuf::from("/srv/www"));
        c.offer(PathBuf::from("/srv/www/a"), EventKind::ClosedWrite);
        c.offer(PathBuf::from("/srv/www/b"), EventKind::ClosedWrite);
        assert_eq!(c.counters.dropped.load(Ordering::Relaxed), 1);
        let ev = rx.try_recv().expect("first event");
        assert_eq!(ev.path, PathBuf::from("/srv/www/a"));
        assert_eq!(ev.observed_at, 1_000_000_000);
        c.set_detached(0);
        assert_eq!(c.counters.roots_attached.load(Ordering::Relaxed), 0);
        c.set_attached(0, PathBuf::from("/srv/www"));
        let ev = rx.try_recv().expect("scan");
        assert_eq!(ev.kind, EventKind::DirectoryScan);
        c.overflow();
        assert_eq!(
            rx.try_recv().expect("overflow scan").kind,
            EventKind::DirectoryScan
        );
        assert_eq!(c.counters.queue_overflows.load(Ordering::Relaxed), 1);
    }
}
