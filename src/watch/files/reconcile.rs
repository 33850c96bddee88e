//! `fanotify.reconcile`: directory trees that must be walked again because some of their
//! changes may not have been reported (a kernel queue overflow, an event the analyzer could
//! not take, a root that (re)attached, a directory created or moved in, a directory whose
//! path is too long to name). The walk runs to the end, in batches, on the analyzer's thread
//! between live events, and hands every regular file to the analyzer through its directory's
//! descriptor, so no path length and no symbolic link stops it.
//!
//! # Directory tasks
//!
//! A task is one directory tree. The queue row counts *directory tasks*: the pending trees
//! plus the directories on the branch the walk is listing now (each a task begun and not yet
//! complete). The rules:
//!
//! * Each directory counts at most once. A request for a directory already pending, or below
//!   one, is coalesced. A pending directory below a new request is absorbed by it (the older
//!   admission stamp is kept). A request for a directory on the branch being listed marks
//!   that level to be listed once more when its listing ends, instead of adding a task. A
//!   pending directory the walk enters is absorbed by the walk. A level marked to be listed
//!   again covers every request below it, and a level below it is not listed again itself.
//! * Vanished directories and files complete their task: a tree that cannot be opened any
//!   more, or a branch removed under the walk, ends quietly.
//! * At most [`RECONCILE_CAPACITY`] (1,024) tasks wait. The walk never needs more than one
//!   task per level of the branch it is on, so breadth costs nothing. New requests widen to
//!   their root (replacing every pending task under it) once the pending tasks leave less
//!   than [`WALK_RESERVE`] levels to the walk; a request that finds no room even then is a
//!   loss, and so is a level deeper than the room left (its subtree is not walked). Both are
//!   counted on the row and logged (one line a minute).
//!
//! The row is a gauge: `waiting` as above, `running` 1 while a batch runs, losses as above,
//! oldest waiting age from the oldest pending task or the task being walked (admission
//! stamps survive coalescing), `consumer_progress` lag.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Serialize;

use super::ctx::Excluded;
use super::stats::inc;
use super::tree::{self, Decision, LevelEnd, Visitor, Walk};
use crate::clock::SharedClock;
use crate::lograte::LogLimiter;
use crate::queue::{Admitted, QueueHealth, RowConfig};
use crate::text::escape_path;

/// Waiting directory tasks at most (pending trees plus levels of the branch being walked).
pub const RECONCILE_CAPACITY: usize = 1024;
/// Levels kept for the walk: requests widen to their root before pending tasks take them.
pub const WALK_RESERVE: usize = 64;
/// Entries read per walk step between checks of the batch budget.
const STEP: usize = 64;

/// What became of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    /// A new pending task.
    Queued,
    /// Already covered by a pending task or by the branch being walked.
    Coalesced,
    /// Widened to the whole root (the queue was near its capacity).
    Widened,
    /// No room even for the root: counted as a loss.
    Refused,
    /// Not under an attached root.
    Ignored,
}

/// Counters of the reconcile queue and its walks (monotonic).
#[derive(Debug, Default)]
pub struct ReconcileCounters {
    pub requested: AtomicU64,
    pub coalesced: AtomicU64,
    pub widened: AtomicU64,
    /// Requests refused for lack of room (losses).
    pub refused: AtomicU64,
    /// Levels not entered for lack of room (losses).
    pub depth_refused: AtomicU64,
    /// Trees walked to the end.
    pub tasks_done: AtomicU64,
    pub dirs_walked: AtomicU64,
    pub files_seen: AtomicU64,
    /// Failures other than vanished entries (unreadable directories, descriptor limits).
    pub errors: AtomicU64,
    /// Directories not entered because they were already on the branch (mount loops).
    pub loops: AtomicU64,
}

/// A copy of [`ReconcileCounters`] plus the queue's current shape.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReconcileStats {
    pub pending: u64,
    pub depth: u64,
    pub requested: u64,
    pub coalesced: u64,
    pub widened: u64,
    pub refused: u64,
    pub depth_refused: u64,
    pub tasks_done: u64,
    pub dirs_walked: u64,
    pub files_seen: u64,
    pub errors: u64,
    pub loops: u64,
}

struct Pending {
    root: PathBuf,
    admitted: Admitted,
}

struct Level {
    path: PathBuf,
    again: bool,
}

#[derive(Default)]
struct Shared {
    /// Attached roots (canonical).
    roots: Vec<PathBuf>,
    pending: BTreeMap<PathBuf, Pending>,
    /// The branch being walked, top first.
    stack: Vec<Level>,
    /// Admission of the task being walked.
    current: Option<Admitted>,
}

impl Shared {
    fn tasks(&self) -> usize {
        self.pending.len() + self.stack.len()
    }

    fn root_of(&self, dir: &Path) -> Option<PathBuf> {
        self.roots
            .iter()
            .filter(|r| dir.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
            .cloned()
    }

    /// The level of the branch that is `dir`, if any.
    fn level_mut(&mut self, dir: &Path) -> Option<&mut Level> {
        let top = self.stack.first()?;
        let rel = dir.strip_prefix(&top.path).ok()?;
        let k = rel.components().count();
        self.stack.get_mut(k).filter(|l| l.path == dir)
    }

    fn covered(&self, dir: &Path) -> bool {
        dir.ancestors().any(|a| self.pending.contains_key(a))
    }

    /// Removes pending tasks at or below `dir`; returns the oldest stamp among them and `s`.
    fn absorb(&mut self, dir: &Path, mut stamp: Admitted) -> Admitted {
        let below: Vec<PathBuf> = self
            .pending
            .range(dir.to_path_buf()..)
            .take_while(|(k, _)| k.starts_with(dir))
            .map(|(k, _)| k.clone())
            .collect();
        for k in below {
            if let Some(p) = self.pending.remove(&k) {
                stamp = stamp.older(p.admitted);
            }
        }
        stamp
    }
}

/// The reconcile queue, shared by the watcher (requests) and the analyzer (the walk).
pub struct Reconcile {
    shared: Mutex<Shared>,
    health: Arc<QueueHealth>,
    counters: ReconcileCounters,
    excluded_dirs: Vec<PathBuf>,
    log: LogLimiter,
}

impl std::fmt::Debug for Reconcile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconcile")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Reconcile {
    /// An empty queue whose row runs on `clock`; `excluded_dirs` are never walked.
    pub fn new(clock: SharedClock, excluded_dirs: Vec<PathBuf>) -> Arc<Reconcile> {
        let row = RowConfig::new("directory_tasks")
            .capacity(RECONCILE_CAPACITY as u64)
            .running_slots(1);
        Arc::new(Reconcile {
            shared: Mutex::new(Shared::default()),
            health: QueueHealth::new(clock.clone(), row),
            counters: ReconcileCounters::default(),
            excluded_dirs,
            log: LogLimiter::per_minute(clock),
        })
    }

    /// The `fanotify.reconcile` row.
    pub fn health(&self) -> &Arc<QueueHealth> {
        &self.health
    }

    /// Live counters.
    pub fn counters(&self) -> &ReconcileCounters {
        &self.counters
    }

    /// A snapshot of the counters and the queue's shape (takes the queue's short lock).
    pub fn stats(&self) -> ReconcileStats {
        let (pending, depth) = {
            let s = self.shared.lock();
            (s.pending.len() as u64, s.stack.len() as u64)
        };
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ReconcileStats {
            pending,
            depth,
            requested: l(&c.requested),
            coalesced: l(&c.coalesced),
            widened: l(&c.widened),
            refused: l(&c.refused),
            depth_refused: l(&c.depth_refused),
            tasks_done: l(&c.tasks_done),
            dirs_walked: l(&c.dirs_walked),
            files_seen: l(&c.files_seen),
            errors: l(&c.errors),
            loops: l(&c.loops),
        }
    }

    /// Pending trees, oldest first (diagnostics and tests).
    pub fn pending_paths(&self) -> Vec<PathBuf> {
        let s = self.shared.lock();
        let mut v: Vec<(Admitted, PathBuf)> = s
            .pending
            .iter()
            .map(|(k, p)| (p.admitted, k.clone()))
            .collect();
        v.sort();
        v.into_iter().map(|(_, p)| p).collect()
    }

    /// True while a tree is pending or being walked.
    pub fn has_work(&self) -> bool {
        let s = self.shared.lock();
        !s.pending.is_empty() || !s.stack.is_empty() || s.current.is_some()
    }

    /// Sets the attached roots (requests outside them are ignored).
    pub fn set_roots(&self, roots: Vec<PathBuf>) {
        self.shared.lock().roots = roots;
    }

    fn publish(&self, s: &Shared) {
        self.health.set_waiting(s.tasks() as u64);
        let oldest = s
            .pending
            .values()
            .map(|p| p.admitted)
            .chain(s.current)
            .min();
        self.health.set_oldest_waiting(oldest);
    }

    fn publish_depth(&self, s: &Shared) {
        self.health.set_waiting(s.tasks() as u64);
    }

    /// Asks for the tree at `dir` to be walked. Never blocks on the walk.
    pub fn request(&self, dir: &Path) -> Requested {
        inc(&self.counters.requested);
        let mut s = self.shared.lock();
        let Some(root) = s.root_of(dir) else {
            return Requested::Ignored;
        };
        // A level of the branch marked to be listed again covers everything below it.
        if s.stack.iter().any(|l| l.again && dir.starts_with(&l.path)) {
            inc(&self.counters.coalesced);
            return Requested::Coalesced;
        }
        if let Some(level) = s.level_mut(dir) {
            level.again = true;
            inc(&self.counters.coalesced);
            return Requested::Coalesced;
        }
        if s.covered(dir) {
            inc(&self.counters.coalesced);
            return Requested::Coalesced;
        }
        let stamp = s.absorb(dir, self.health.stamp());
        if s.tasks() < RECONCILE_CAPACITY - WALK_RESERVE {
            s.pending.insert(
                dir.to_path_buf(),
                Pending {
                    root,
                    admitted: stamp,
                },
            );
            self.publish(&s);
            return Requested::Queued;
        }
        // Near capacity: the whole root replaces every pending task under it.
        inc(&self.counters.widened);
        let stamp = s.absorb(&root, stamp);
        if let Some(level) = s.level_mut(&root) {
            level.again = true;
            self.publish(&s);
            return Requested::Widened;
        }
        if s.covered(&root) {
            self.publish(&s);
            return Requested::Widened;
        }
        if s.tasks() < RECONCILE_CAPACITY {
            s.pending.insert(
                root.clone(),
                Pending {
                    root,
                    admitted: stamp,
                },
            );
            self.publish(&s);
            return Requested::Widened;
        }
        inc(&self.counters.refused);
        self.health.record_loss();
        self.publish(&s);
        drop(s);
        crate::warn_limited!(
            self.log,
            "reconcile_full",
            "",
            "file watcher: reconcile queue full ({RECONCILE_CAPACITY} directory tasks); {} is not walked again",
            escape_path(dir)
        );
        Requested::Refused
    }

    /// Asks for the directory holding the file `path` to be walked (an event about it was
    /// lost).
    pub fn request_parent(&self, path: &Path) -> Requested {
        match path.parent() {
            Some(dir) => self.request(dir),
            None => Requested::Ignored,
        }
    }

    /// The consumer side. Create one, on the thread that scans.
    pub fn worker(self: &Arc<Self>) -> ReconcileWorker {
        ReconcileWorker {
            shared: self.clone(),
            walk: None,
            excluded: Excluded::new(&self.excluded_dirs),
        }
    }
}

/// Walks the pending trees, a batch at a time. Holds the walk's descriptors.
pub struct ReconcileWorker {
    shared: Arc<Reconcile>,
    walk: Option<Walk>,
    excluded: Excluded,
}

impl std::fmt::Debug for ReconcileWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReconcileWorker")
            .field("walk", &self.walk)
            .finish_non_exhaustive()
    }
}

struct TaskVisitor<'a> {
    r: &'a Reconcile,
    excluded: &'a Excluded,
    on_file: &'a mut dyn FnMut(&Path, BorrowedFd<'_>, &OsStr),
}

impl Visitor for TaskVisitor<'_> {
    fn enter(&mut self, path: &Path, _dir: BorrowedFd<'_>, depth: usize) -> Decision {
        if self.excluded.contains(path) {
            return Decision::Skip;
        }
        let mut s = self.r.shared.lock();
        if depth > 0 && s.tasks() >= RECONCILE_CAPACITY {
            inc(&self.r.counters.depth_refused);
            self.r.health.record_loss();
            drop(s);
            crate::warn_limited!(
                self.r.log,
                "reconcile_depth",
                "",
                "file watcher: reconcile queue full ({RECONCILE_CAPACITY} directory tasks); {} is not walked",
                escape_path(path)
            );
            return Decision::Skip;
        }
        let absorbed = s.pending.remove(path).is_some();
        s.stack.push(Level {
            path: path.to_path_buf(),
            again: false,
        });
        if absorbed {
            inc(&self.r.counters.coalesced);
            self.r.publish(&s);
        } else {
            self.r.publish_depth(&s);
        }
        inc(&self.r.counters.dirs_walked);
        Decision::Descend
    }

    fn file(&mut self, path: &Path, dir: BorrowedFd<'_>, name: &OsStr) {
        inc(&self.r.counters.files_seen);
        (self.on_file)(path, dir, name);
    }

    fn leave(&mut self, _depth: usize, forced: bool) -> LevelEnd {
        let mut s = self.r.shared.lock();
        if !forced {
            let n = s.stack.len();
            // An ancestor listed again re-enters this directory anyway.
            let ancestor_again = s
                .stack
                .get(..n.saturating_sub(1))
                .is_some_and(|up| up.iter().any(|l| l.again));
            if let Some(l) = s.stack.last_mut() {
                if l.again {
                    l.again = false;
                    if !ancestor_again {
                        return LevelEnd::Again;
                    }
                }
            }
        }
        s.stack.pop();
        self.r.publish_depth(&s);
        LevelEnd::Pop
    }

    fn error(&mut self, path: &Path, err: &std::io::Error) {
        inc(&self.r.counters.errors);
        crate::warn_limited!(
            self.r.log,
            "reconcile_error",
            "",
            "file watcher: reconcile cannot read {}: {err}",
            escape_path(path)
        );
    }
}

impl ReconcileWorker {
    /// The queue this worker serves.
    pub fn queue(&self) -> &Arc<Reconcile> {
        &self.shared
    }

    /// True while a tree is pending or being walked.
    pub fn has_work(&self) -> bool {
        self.walk.is_some() || self.shared.has_work()
    }

    /// Gives up the tree being walked (after a panic in a callback): its descriptors are
    /// closed, its levels leave the row, and it counts as one loss.
    pub fn abandon(&mut self) {
        self.walk = None;
        self.shared.health.record_loss();
        self.complete(0);
    }

    /// Walks for at most `max_entries` directory entries or `max_time`, whichever comes
    /// first, handing each regular file to `on_file` (path, its directory's descriptor, its
    /// name). Returns true while work remains.
    pub fn run_batch(
        &mut self,
        max_entries: usize,
        max_time: Duration,
        on_file: &mut dyn FnMut(&Path, BorrowedFd<'_>, &OsStr),
    ) -> bool {
        let r = self.shared.clone();
        let running = r.health.start_running();
        let started = Instant::now();
        let mut used = 0usize;
        while used < max_entries && started.elapsed() < max_time {
            if self.walk.is_none() && !self.begin_next(on_file) {
                break;
            }
            let Some(walk) = self.walk.as_mut() else {
                continue;
            };
            let mut v = TaskVisitor {
                r: &r,
                excluded: &self.excluded,
                on_file: &mut *on_file,
            };
            let before = walk.stats.entries;
            let done = walk.step(STEP.min(max_entries - used).max(1), &mut v);
            let read = usize::try_from(walk.stats.entries - before).unwrap_or(usize::MAX);
            used = used.saturating_add(read.max(1));
            if done {
                let loops = walk.stats.loops;
                self.walk = None;
                self.complete(loops);
            }
        }
        running.finish();
        self.has_work()
    }

    /// Takes the oldest pending tree and opens it. False when nothing is pending.
    fn begin_next(&mut self, on_file: &mut dyn FnMut(&Path, BorrowedFd<'_>, &OsStr)) -> bool {
        let r = self.shared.clone();
        let (dir, root) = {
            let mut s = r.shared.lock();
            let Some(dir) = s
                .pending
                .iter()
                .min_by_key(|(_, p)| p.admitted)
                .map(|(k, _)| k.clone())
            else {
                return false;
            };
            let Some(p) = s.pending.remove(&dir) else {
                return false;
            };
            s.current = Some(p.admitted);
            r.publish(&s);
            (dir, p.root)
        };
        self.excluded.refresh();
        let fd = match tree::open_dir_beneath(&root, &dir) {
            Ok(fd) => fd,
            Err(e) => {
                // A vanished tree completes its task.
                if !tree::vanished(&e) {
                    inc(&r.counters.errors);
                    crate::warn_limited!(
                        r.log,
                        "reconcile_error",
                        "",
                        "file watcher: reconcile cannot open {}: {e}",
                        escape_path(&dir)
                    );
                }
                self.complete(0);
                return true;
            }
        };
        let mut v = TaskVisitor {
            r: &r,
            excluded: &self.excluded,
            on_file,
        };
        match Walk::start(dir, fd, &mut v) {
            Some(w) => self.walk = Some(w),
            None => self.complete(0),
        }
        true
    }

    fn complete(&mut self, loops: u64) {
        let r = &self.shared;
        r.counters.loops.fetch_add(loops, Ordering::Relaxed);
        inc(&r.counters.tasks_done);
        let mut s = r.shared.lock();
        s.current = None;
        // A walk cut short leaves no levels behind.
        s.stack.clear();
        r.publish(&s);
        r.health.note_progress();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::watch::files::testutil::TestDir;
    use std::collections::BTreeSet;
    use std::fs;

    fn queue(root: &Path) -> Arc<Reconcile> {
        let r = Reconcile::new(ManualClock::at_epoch_2026(), Vec::new());
        r.set_roots(vec![root.to_path_buf()]);
        r
    }

    /// Runs the worker to the end in small batches; returns the files seen.
    fn drain(w: &mut ReconcileWorker, batch: usize) -> BTreeSet<PathBuf> {
        let mut files = BTreeSet::new();
        let mut rounds = 0;
        while w.run_batch(batch, Duration::from_secs(60), &mut |p, dir, name| {
            let f = tree::open_file_at(dir, name).expect("open by descriptor");
            assert!(f.metadata().expect("meta").is_file());
            files.insert(p.to_path_buf());
        }) {
            rounds += 1;
            assert!(rounds < 100_000, "no end");
        }
        files
    }

    fn waiting(r: &Reconcile) -> u64 {
        r.health().snapshot().waiting.unwrap_or(u64::MAX)
    }

    #[test]
    fn requests_coalesce_absorb_and_ignore_outside_paths() {
        let t = TestDir::new();
        let root = t.path();
        let r = queue(root);
        assert_eq!(r.request(Path::new("/elsewhere")), Requested::Ignored);
        assert_eq!(r.request(&root.join("a/b")), Requested::Queued);
        assert_eq!(r.request(&root.join("a/b/c")), Requested::Coalesced);
        assert_eq!(r.request(&root.join("a/b")), Requested::Coalesced);
        assert_eq!(r.request(&root.join("a/bb")), Requested::Queued);
        assert_eq!(waiting(&r), 2);
        // `a` absorbs both.
        assert_eq!(r.request(&root.join("a")), Requested::Queued);
        assert_eq!(r.pending_paths(), vec![root.join("a")]);
        assert_eq!(waiting(&r), 1);
        let s = r.stats();
        assert_eq!((s.requested, s.coalesced, s.pending), (6, 2, 1));
    }

    #[test]
    fn the_walk_reaches_every_file_in_batches_and_empties_the_row() {
        let t = TestDir::new();
        let root = t.path();
        let mut expect = BTreeSet::new();
        for d in 0..20 {
            let dir = root.join(format!("d{d}/sub"));
            fs::create_dir_all(&dir).expect("mkdir");
            for f in 0..30 {
                let p = dir.join(format!("f{f}.php"));
                fs::write(&p, b"<?php").expect("write");
                expect.insert(p);
            }
        }
        let r = queue(root);
        let mut w = r.worker();
        assert!(!w.has_work());
        r.request(root);
        assert!(w.has_work());
        let files = drain(&mut w, 7);
        assert_eq!(files, expect);
        assert!(!w.has_work());
        let snap = r.health().snapshot();
        assert_eq!(snap.waiting, Some(0));
        assert_eq!(snap.dropped_total, 0);
        assert_eq!(snap.depth_unit, "directory_tasks");
        assert_eq!(snap.capacity, Some(RECONCILE_CAPACITY as u64));
        let s = r.stats();
        assert_eq!((s.tasks_done, s.dirs_walked, s.files_seen), (1, 41, 600));
    }

    #[test]
    fn a_request_for_a_directory_on_the_branch_lists_it_again_without_a_second_task() {
        let t = TestDir::new();
        let root = t.path();
        fs::create_dir_all(root.join("a/b")).expect("mkdir");
        fs::write(root.join("a/b/one.php"), b"x").expect("write");
        let r = queue(root);
        let mut w = r.worker();
        r.request(root);
        // Enter the tree down to `a/b`.
        let mut seen = Vec::new();
        while r.stats().depth < 3 {
            w.run_batch(1, Duration::from_secs(60), &mut |p, _, _| {
                seen.push(p.to_path_buf())
            });
        }
        let before = waiting(&r);
        assert_eq!(r.request(&root.join("a")), Requested::Coalesced);
        assert_eq!(waiting(&r), before, "counted once");
        // A file written where the walk already passed is found by the second listing.
        fs::write(root.join("a/late.php"), b"x").expect("write");
        let files = drain(&mut w, 1);
        assert!(files.contains(&root.join("a/late.php")), "{files:?}");
        assert_eq!(r.stats().tasks_done, 1);
    }

    #[test]
    fn a_level_listed_again_covers_everything_below_it() {
        let t = TestDir::new();
        let root = t.path();
        fs::create_dir_all(root.join("a/b")).expect("mkdir");
        for i in 0..3 {
            fs::write(root.join(format!("a/b/f{i}.php")), b"x").expect("write");
        }
        let r = queue(root);
        let mut w = r.worker();
        r.request(root);
        while r.stats().depth < 3 {
            w.run_batch(1, Duration::from_secs(60), &mut |_, _, _| {});
        }
        assert_eq!(r.request(root), Requested::Coalesced);
        assert_eq!(r.request(&root.join("a/b")), Requested::Coalesced);
        assert_eq!(r.request(&root.join("a/other")), Requested::Coalesced);
        assert!(r.pending_paths().is_empty());
        // `a/b` finishes its first pass, then the root is listed again once: `a/b` is
        // entered twice in all, not three times.
        let mut seen = 0;
        while w.run_batch(1, Duration::from_secs(60), &mut |p, _, _| {
            if p.ends_with("f0.php") {
                seen += 1;
            }
        }) {}
        assert!(seen <= 2, "{seen}");
        // root, a, b; then a and b again under the root listed again.
        assert_eq!(r.stats().dirs_walked, 5);
    }

    #[test]
    fn a_pending_directory_the_walk_enters_is_absorbed() {
        let t = TestDir::new();
        let root = t.path();
        fs::create_dir_all(root.join("x/y")).expect("mkdir");
        let r = queue(root);
        let mut w = r.worker();
        r.request(root);
        w.run_batch(1, Duration::from_secs(60), &mut |_, _, _| {});
        // The walk is in `root`; `x/y` waits as its own task until the walk enters it.
        assert_eq!(r.request(&root.join("x/y")), Requested::Queued);
        drain(&mut w, 1);
        let s = r.stats();
        assert_eq!(s.tasks_done, 1, "{s:?}");
        assert_eq!(s.pending, 0);
    }

    #[test]
    fn vanished_trees_complete_their_task() {
        let t = TestDir::new();
        let root = t.path();
        fs::create_dir_all(root.join("gone")).expect("mkdir");
        let r = queue(root);
        let mut w = r.worker();
        r.request(&root.join("gone"));
        fs::remove_dir(root.join("gone")).expect("rmdir");
        assert!(drain(&mut w, 10).is_empty());
        let s = r.stats();
        assert_eq!((s.tasks_done, s.errors), (1, 0));
        assert_eq!(r.health().snapshot().dropped_total, 0);
    }

    #[test]
    fn near_capacity_requests_widen_to_the_root_and_never_exceed_it() {
        let t = TestDir::new();
        let root = t.path();
        let r = queue(root);
        let mut widened = 0;
        for i in 0..5_000 {
            match r.request(&root.join(format!("dir{i}"))) {
                Requested::Widened => widened += 1,
                Requested::Queued | Requested::Coalesced => {}
                other => panic!("{other:?}"),
            }
            assert!(waiting(&r) <= RECONCILE_CAPACITY as u64);
        }
        assert!(widened >= 1);
        // Everything collapsed into the root, then later requests are covered by it.
        assert_eq!(r.pending_paths(), vec![root.to_path_buf()]);
        assert_eq!(r.health().snapshot().dropped_total, 0);
    }

    #[test]
    fn excluded_directories_are_not_walked() {
        let t = TestDir::new();
        let root = t.path();
        fs::create_dir_all(root.join("state/q")).expect("mkdir");
        fs::write(root.join("state/q/x.php"), b"x").expect("write");
        fs::write(root.join("y.php"), b"x").expect("write");
        let r = Reconcile::new(ManualClock::at_epoch_2026(), vec![root.join("state")]);
        r.set_roots(vec![root.to_path_buf()]);
        let mut w = r.worker();
        r.request(root);
        assert_eq!(
            drain(&mut w, 100),
            [root.join("y.php")].into_iter().collect()
        );
    }
}
