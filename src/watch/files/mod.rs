//! File watcher: reports files under the configured roots that were closed after being
//! written, moved into the tree or linked into it, and hands to the reconcile walk every
//! tree whose changes may have gone unreported, so the content analyzer sees every file.
//!
//! Guarantees:
//! * One named thread (`svc-filewatch`) reads kernel events and delivers [`FileEvent`]s
//!   with `try_send`; it never blocks on the channel. A refused event is counted in
//!   [`WatchCounters::dropped`] and its directory is handed to the reconcile walk.
//! * Delivery is at least once per observed change; duplicates are possible (e.g. a file
//!   found by the walk and then closed again).
//! * Paths are canonical (symlinks in the configured roots are resolved) and lie under an
//!   attached root, never under an excluded directory. Paths may be longer than `PATH_MAX`;
//!   consumers open them by steps ([`open_file_long`]).
//! * Trees whose changes may have gone unreported go to the [`Reconcile`] queue (row
//!   `fanotify.reconcile`), never through the bounded event channel: a kernel queue
//!   overflow (every attached root), a root that (re)appears after being missing, a
//!   directory created or moved in, an event the channel refused, and a directory whose path
//!   is too long for the kernel to name (its nearest nameable ancestor). The analyzer walks
//!   them to the end ([`ReconcileWorker`]).
//! * Every limit refuses visibly: `max_watches`, the kernel's own watch/mark limits and the
//!   reconcile capacity are counted in [`WatchStats`] or on the row.
//! * [`FileWatcher::stop`] (also run on drop) wakes the thread through a pipe and joins it.
//!
//! Backends: fanotify when the process may use it (see `fanotify_src`), inotify otherwise
//! or when [`BackendChoice::Inotify`] is configured.

mod ctx;
mod fanotify_src;
mod fid;
mod inotify_src;
mod mounts;
mod reconcile;
mod runner;
mod stats;
mod tree;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod testutil;

use std::fmt;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;
use serde::Serialize;

use crate::clock::SharedClock;

pub use reconcile::{
    Reconcile, ReconcileCounters, ReconcileStats, ReconcileWorker, Requested, RECONCILE_CAPACITY,
};
pub use stats::{WatchCounters, WatchStats};
pub use tree::{open_file_at, open_file_long, vanished, PATH_MAX_BYTES};

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A file opened for writing was closed.
    ClosedWrite,
    /// A file was renamed into the tree.
    MovedIn,
    /// A new name appeared for a file that already has content without a close-write in
    /// the tree: a hard link (`ln /elsewhere/x.php www/x.php`), a file linked in from an
    /// anonymous `O_TMPFILE`, or a file created and written but still open.
    Linked,
}

/// One event for the analyzer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEvent {
    pub path: PathBuf,
    pub kind: EventKind,
    /// Monotonic nanoseconds from the injected clock when the watcher handled the event.
    pub observed_at: i64,
}

/// Backend actually in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    Fanotify,
    Inotify,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Fanotify => "fanotify",
            Backend::Inotify => "inotify",
        })
    }
}

/// Which backend to use (config `files.backend`: "auto", "fanotify", "inotify").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BackendChoice {
    /// fanotify when permitted and every existing root can be marked; else inotify.
    #[default]
    Auto,
    /// fanotify or fail to start.
    Fanotify,
    /// inotify only.
    Inotify,
}

/// A backend name that is not one of "auto", "fanotify", "inotify".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadBackendName(pub String);

impl fmt::Display for BadBackendName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: String = self.0.chars().take(40).collect();
        write!(
            f,
            "unknown file watcher backend {shown:?} (expected auto, fanotify or inotify)"
        )
    }
}

impl std::error::Error for BadBackendName {}

impl FromStr for BackendChoice {
    type Err = BadBackendName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendChoice::Auto),
            "fanotify" => Ok(BackendChoice::Fanotify),
            "inotify" => Ok(BackendChoice::Inotify),
            _ => Err(BadBackendName(s.to_string())),
        }
    }
}

/// Watcher settings. Build with [`WatchOptions::new`] and adjust fields.
#[derive(Clone)]
pub struct WatchOptions {
    /// Where events go (bounded; a full channel drops and counts).
    pub events: Sender<FileEvent>,
    /// Source of `observed_at` and of the root retry schedule.
    pub clock: SharedClock,
    pub backend: BackendChoice,
    /// Use fanotify's FID mode (moves and new directories reported) when available.
    /// `false` forces plain mount marks (close-write only). Default `true`.
    pub fanotify_fid: bool,
    /// Directories never reported nor watched (the daemon's state dir belongs here).
    pub excluded_dirs: Vec<PathBuf>,
    /// Upper bound on inotify watches. Default 100,000.
    pub max_watches: usize,
    /// How often missing roots are retried and attached roots re-verified (clock time).
    /// Default 5 s.
    pub retry_interval: Duration,
    /// Longest the thread sleeps between clock checks when no event arrives. Default 250 ms.
    pub poll_interval: Duration,
}

impl WatchOptions {
    /// Defaults as documented on each field.
    pub fn new(events: Sender<FileEvent>, clock: SharedClock) -> WatchOptions {
        WatchOptions {
            events,
            clock,
            backend: BackendChoice::Auto,
            fanotify_fid: true,
            excluded_dirs: Vec::new(),
            max_watches: 100_000,
            retry_interval: Duration::from_secs(5),
            poll_interval: Duration::from_millis(250),
        }
    }
}

/// A kernel event source driven by the watch thread.
trait Source: Send {
    /// Descriptor that becomes readable when events are pending.
    fn fd(&self) -> BorrowedFd<'_>;
    /// Reads and handles pending events (bounded work per call).
    fn on_readable(&mut self, ctx: &mut ctx::Ctx);
    /// Attaches missing roots and re-verifies attached ones.
    fn check_roots(&mut self, ctx: &mut ctx::Ctx);
}

/// Flags the caller sets for the thread.
#[derive(Debug, Default)]
struct Control {
    stop: AtomicBool,
    rescan: AtomicBool,
}

/// A running file watcher. Dropping it stops it.
pub struct FileWatcher {
    backend: Backend,
    description: &'static str,
    roots_total: u64,
    counters: Arc<WatchCounters>,
    reconcile: Arc<Reconcile>,
    control: Arc<Control>,
    wake: OwnedFd,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for FileWatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileWatcher")
            .field("backend", &self.backend)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl FileWatcher {
    /// Chooses a backend, attaches the roots that exist (before returning, so changes made
    /// after `start` returns are seen), and starts the watch thread. Missing roots are
    /// retried every `retry_interval`. Errors: fanotify forced but unusable, inotify
    /// unavailable, or the thread/pipe could not be created.
    pub fn start(roots: Vec<PathBuf>, opts: WatchOptions) -> io::Result<FileWatcher> {
        let counters = Arc::new(WatchCounters::default());
        let reconcile = Reconcile::new(opts.clock.clone(), opts.excluded_dirs.clone());
        let (source, ctx, backend, description) =
            runner::select(&roots, &opts, &counters, &reconcile)?;
        log::info!(
            "file watcher: using {description} for {} root(s)",
            roots.len()
        );
        let (wake_r, wake_w) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        let control = Arc::new(Control::default());
        let thread = {
            let control = control.clone();
            let retry = opts.retry_interval;
            let poll = opts.poll_interval;
            std::thread::Builder::new()
                .name("svc-filewatch".into())
                .spawn(move || runner::run(source, ctx, control, wake_r, poll, retry))?
        };
        Ok(FileWatcher {
            backend,
            description,
            roots_total: roots.len() as u64,
            counters,
            reconcile,
            control,
            wake: wake_w,
            thread: Some(thread),
        })
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Human-readable backend and mode, e.g. "fanotify (filesystem marks, FID)".
    pub fn description(&self) -> &'static str {
        self.description
    }

    /// Live counters (for health rows; `dropped` is the channel-full count).
    pub fn counters(&self) -> Arc<WatchCounters> {
        self.counters.clone()
    }

    /// The reconcile queue: its row (`fanotify.reconcile`) and the worker that walks it.
    pub fn reconcile(&self) -> Arc<Reconcile> {
        self.reconcile.clone()
    }

    /// A snapshot of the counters. Reads atomics only.
    pub fn stats(&self) -> WatchStats {
        self.counters.snapshot(self.backend, self.roots_total)
    }

    /// Asks the thread to retry missing roots and re-verify attached ones now, instead of
    /// at the next `retry_interval`. Returns at once.
    pub fn rescan_roots(&self) {
        self.control.rescan.store(true, Ordering::SeqCst);
        self.wake();
    }

    fn wake(&self) {
        // A full pipe already wakes the thread; nothing else can fail usefully here.
        let _ = nix::unistd::write(&self.wake, b"w");
    }

    /// Stops the thread and waits for it. Idempotent.
    pub fn stop(&mut self) {
        self.control.stop.store(true, Ordering::SeqCst);
        self.wake();
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                log::error!("file watcher: thread panicked");
            }
        }
    }
}

impl Drop for FileWatcher {
    fn drop(&mut self) {
        self.stop();
    }
}
