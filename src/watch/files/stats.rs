//! Counters the watcher thread updates and the snapshot `stats()` returns.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use super::Backend;

/// Live counters, shared between the watch thread and readers. All monotonic except the
/// two gauges (`watches`, `roots_attached`). Reading them never blocks the watcher.
#[derive(Debug, Default)]
pub struct WatchCounters {
    /// Kernel events read (fanotify: every event of the marked filesystems/mounts).
    pub events_read: AtomicU64,
    /// Events handed to the channel.
    pub events_emitted: AtomicU64,
    /// Events refused because the channel was full (or its receiver gone).
    pub dropped: AtomicU64,
    /// Events ignored: outside every attached root, or under an excluded directory.
    pub filtered: AtomicU64,
    /// fanotify events whose path could not be resolved (object already gone, stale
    /// handle, or a record the parser refused).
    pub unresolved: AtomicU64,
    /// Kernel queue overflows (`IN_Q_OVERFLOW` / `FAN_Q_OVERFLOW`).
    pub queue_overflows: AtomicU64,
    /// Gauge: inotify watches held, or fanotify marks placed.
    pub watches: AtomicU64,
    /// Watches refused because `max_watches` was reached.
    pub watch_limit_refused: AtomicU64,
    /// Watches/marks the kernel refused for its own limit (`ENOSPC`: max_user_watches,
    /// max_user_marks).
    pub watch_limit_errors: AtomicU64,
    /// Other watch/mark failures (permissions, unsupported filesystem, ...).
    pub watch_errors: AtomicU64,
    /// Trees handed to the reconcile walk (overflow, lost event, root attached, directory
    /// created or moved in, directory path too long to name).
    pub scans_requested: AtomicU64,
    /// Events whose directory path is too long for the kernel to name (4,096 bytes or
    /// more): the nearest ancestor it can name is walked instead.
    pub long_paths: AtomicU64,
    /// Paths that could neither be reported nor handed to the walk (logged, one line a
    /// minute; also counted as errors of the `files` component).
    pub path_errors: AtomicU64,
    /// Malformed fanotify buffers.
    pub parse_errors: AtomicU64,
    /// Gauge: configured roots currently attached.
    pub roots_attached: AtomicU64,
    /// Attempts to attach a root that failed (missing root, not a directory, ...).
    pub root_attach_failures: AtomicU64,
}

pub(crate) fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A point-in-time copy of [`WatchCounters`] plus the backend in use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WatchStats {
    pub backend: Backend,
    pub roots_total: u64,
    pub roots_attached: u64,
    pub events_read: u64,
    pub events_emitted: u64,
    pub dropped: u64,
    pub filtered: u64,
    pub unresolved: u64,
    pub queue_overflows: u64,
    pub watches: u64,
    pub watch_limit_refused: u64,
    pub watch_limit_errors: u64,
    pub watch_errors: u64,
    pub scans_requested: u64,
    pub long_paths: u64,
    pub path_errors: u64,
    pub parse_errors: u64,
    pub root_attach_failures: u64,
}

impl WatchCounters {
    /// Copies every counter (relaxed loads; fields may be mutually slightly stale).
    pub fn snapshot(&self, backend: Backend, roots_total: u64) -> WatchStats {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WatchStats {
            backend,
            roots_total,
            roots_attached: l(&self.roots_attached),
            events_read: l(&self.events_read),
            events_emitted: l(&self.events_emitted),
            dropped: l(&self.dropped),
            filtered: l(&self.filtered),
            unresolved: l(&self.unresolved),
            queue_overflows: l(&self.queue_overflows),
            watches: l(&self.watches),
            watch_limit_refused: l(&self.watch_limit_refused),
            watch_limit_errors: l(&self.watch_limit_errors),
            watch_errors: l(&self.watch_errors),
            scans_requested: l(&self.scans_requested),
            long_paths: l(&self.long_paths),
            path_errors: l(&self.path_errors),
            parse_errors: l(&self.parse_errors),
            root_attach_failures: l(&self.root_attach_failures),
        }
    }
}
