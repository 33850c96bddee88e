//! inotify backend: one watch per directory under each root, added at attach time and as
//! directories appear. A directory that appears (created or moved in) is walked right after
//! its watch is added, and then handed to the reconcile walk, because its files may have
//! been written before the watch existed. Directories are reached by descriptor and watched
//! through `/proc/self/fd/N`, so trees whose paths exceed `PATH_MAX` are watched too. A new
//! name for a file that already has content (`IN_CREATE` of a hard link) is reported as
//! `Linked`. On `IN_Q_OVERFLOW` every root is watched again (directories created meanwhile)
//! and handed to the reconcile walk.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};

use super::ctx::Ctx;
use super::stats::inc;
use super::tree::{self, Decision, Visitor, Walk};
use super::{EventKind, Source};

/// Bytes read from the inotify fd per `read(2)`.
const READ_BUF: usize = 64 * 1024;
/// Reads per wake-up before returning to the loop (keeps `stop()` responsive).
const MAX_READS_PER_WAKE: usize = 64;

fn dir_mask() -> WatchMask {
    fd_mask() | WatchMask::DONT_FOLLOW
}

/// For `/proc/self/fd/N` of a directory opened without following links: the magic link must
/// be followed to reach it.
fn fd_mask() -> WatchMask {
    WatchMask::CLOSE_WRITE
        | WatchMask::MOVED_TO
        | WatchMask::MOVED_FROM
        | WatchMask::CREATE
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
        | WatchMask::EXCL_UNLINK
}

struct Watch {
    wd: WatchDescriptor,
    path: PathBuf,
}

/// Per-root state: the root's own watch and identity (to notice replacement).
#[derive(Default, Clone, Copy)]
struct RootWatch {
    wd: Option<i32>,
    dev_ino: (u64, u64),
}

pub(crate) struct InotifySource {
    ino: Inotify,
    watches: Watches,
    by_wd: HashMap<i32, Watch>,
    by_path: HashMap<PathBuf, i32>,
    roots: Vec<RootWatch>,
    buf: Vec<u8>,
    limit_logged: bool,
}

/// What one raw event said, copied out of the read buffer.
struct Raw {
    wd: i32,
    mask: EventMask,
    name: Option<OsString>,
}

impl InotifySource {
    pub(crate) fn new(ctx: &mut Ctx) -> io::Result<InotifySource> {
        let ino = Inotify::init()?;
        let watches = ino.watches();
        let mut s = InotifySource {
            ino,
            watches,
            by_wd: HashMap::new(),
            by_path: HashMap::new(),
            roots: vec![RootWatch::default(); ctx.roots.len()],
            buf: vec![0; READ_BUF],
            limit_logged: false,
        };
        s.check_roots(ctx);
        Ok(s)
    }

    fn publish_count(&self, ctx: &Ctx) {
        ctx.counters
            .watches
            .store(self.by_wd.len() as u64, Ordering::Relaxed);
    }

    /// Adds (or refreshes) the watch on `dir`, through its descriptor `fd` when given (the
    /// directory actually opened, whatever the length of its path). `Decision::Skip` when
    /// the directory is excluded, gone, or refused by a limit.
    fn add_watch(&mut self, dir: &Path, fd: Option<BorrowedFd<'_>>, ctx: &Ctx) -> Decision {
        if ctx.excluded.contains(dir) {
            return Decision::Skip;
        }
        if !self.by_path.contains_key(dir) && self.by_wd.len() >= ctx.max_watches {
            inc(&ctx.counters.watch_limit_refused);
            if !self.limit_logged {
                self.limit_logged = true;
                log::warn!(
                    "file watcher: max_watches ({}) reached; {} and others are not watched",
                    ctx.max_watches,
                    crate::text::escape_path(dir)
                );
            }
            return Decision::Skip;
        }
        let added = match fd {
            Some(fd) => self.watches.add(
                PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())),
                fd_mask(),
            ),
            None => self.watches.add(dir, dir_mask()),
        };
        match added {
            Ok(wd) => {
                let id = wd.get_watch_descriptor_id();
                // The same inode under a new path (directory moved) keeps its descriptor.
                if let Some(old) = self.by_wd.get(&id) {
                    if old.path != dir {
                        let old_path = old.path.clone();
                        self.by_path.remove(&old_path);
                    }
                }
                // A different inode now lives at this path: forget the stale watch.
                if let Some(prev) = self.by_path.get(dir).copied() {
                    if prev != id {
                        if let Some(stale) = self.by_wd.remove(&prev) {
                            let _ = self.watches.remove(stale.wd);
                        }
                    }
                }
                self.by_path.insert(dir.to_path_buf(), id);
                self.by_wd.insert(
                    id,
                    Watch {
                        wd,
                        path: dir.to_path_buf(),
                    },
                );
                Decision::Descend
            }
            Err(e) => {
                match e.raw_os_error() {
                    Some(libc::ENOENT) | Some(libc::ENOTDIR) => {}
                    Some(libc::ENOSPC) => {
                        inc(&ctx.counters.watch_limit_errors);
                        if !self.limit_logged {
                            self.limit_logged = true;
                            log::warn!(
                                "file watcher: kernel inotify watch limit reached at {} \
                                 (raise fs.inotify.max_user_watches)",
                                crate::text::escape_path(dir)
                            );
                        }
                    }
                    _ => {
                        inc(&ctx.counters.watch_errors);
                        log::debug!(
                            "file watcher: cannot watch {}: {e}",
                            crate::text::escape_path(dir)
                        );
                    }
                }
                Decision::Skip
            }
        }
    }

    /// Watches every directory under `top` (reached by descriptor from its root). With
    /// `report`, `top` then goes to the reconcile walk: files already in it may have been
    /// written before its watch existed.
    fn add_tree(&mut self, top: &Path, ctx: &Ctx, report: bool) {
        let opened = match ctx.root_of(top) {
            Some(root) => tree::open_dir_beneath(&root, top),
            None => Err(io::Error::from_raw_os_error(libc::ENOENT)),
        };
        match opened {
            Ok(fd) => {
                let mut v = WatchTree { src: self, ctx };
                if let Some(mut w) = Walk::start(top.to_path_buf(), fd, &mut v) {
                    w.run(&mut v);
                }
            }
            Err(e) if tree::vanished(&e) => {}
            Err(e) => ctx.path_error("cannot watch", top, &e),
        }
        if report {
            ctx.request_scan(top);
        }
        self.publish_count(ctx);
    }

    /// `IN_CREATE` of a non-directory: reported when the new name leads to a regular file
    /// that already has content (a hard link, or a file linked in from `O_TMPFILE`). A file
    /// just created is empty; its close-write follows.
    fn created(&self, path: PathBuf, ctx: &Ctx) {
        if !ctx.wanted(&path) {
            inc(&ctx.counters.filtered);
            return;
        }
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() && m.len() > 0 => ctx.send(path, EventKind::Linked),
            // Too long to look at here: the analyzer opens it by steps and decides.
            Err(e) if e.raw_os_error() == Some(libc::ENAMETOOLONG) => {
                ctx.send(path, EventKind::Linked)
            }
            _ => inc(&ctx.counters.filtered),
        }
    }

    /// Removes every watch at or under `prefix`.
    fn remove_tree(&mut self, prefix: &Path, ctx: &mut Ctx) {
        let ids: Vec<i32> = self
            .by_wd
            .iter()
            .filter(|(_, w)| w.path.starts_with(prefix))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(w) = self.by_wd.remove(&id) {
                self.by_path.remove(&w.path);
                let _ = self.watches.remove(w.wd);
            }
        }
        self.after_removal(ctx);
    }

    /// Detaches roots whose own watch is gone.
    fn after_removal(&mut self, ctx: &mut Ctx) {
        for (i, r) in self.roots.iter_mut().enumerate() {
            if let Some(wd) = r.wd {
                if !self.by_wd.contains_key(&wd) {
                    r.wd = None;
                    ctx.set_detached(i);
                }
            }
        }
        self.publish_count(ctx);
    }

    fn attach(&mut self, i: usize, ctx: &mut Ctx) -> io::Result<()> {
        let configured = ctx
            .roots
            .get(i)
            .map(|r| r.configured.clone())
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let canonical = std::fs::canonicalize(&configured)?;
        let meta = std::fs::metadata(&canonical)?;
        if !meta.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        if ctx.excluded.contains(&canonical) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "root lies inside an excluded directory",
            ));
        }
        if self.add_watch(&canonical, None, ctx) == Decision::Skip {
            return Err(io::Error::other("watch on root refused"));
        }
        let wd = self.by_path.get(&canonical).copied();
        if let Some(r) = self.roots.get_mut(i) {
            r.wd = wd;
            r.dev_ino = (meta.dev(), meta.ino());
        }
        ctx.set_attached(i, canonical.clone());
        self.add_tree(&canonical, ctx, false);
        Ok(())
    }

    fn handle(&mut self, raw: Raw, ctx: &mut Ctx) {
        inc(&ctx.counters.events_read);
        if raw.mask.contains(EventMask::Q_OVERFLOW) {
            ctx.overflow();
            // Directories created during the overflow may lack watches.
            let roots: Vec<PathBuf> = ctx
                .roots
                .iter()
                .filter_map(|r| r.canonical.clone())
                .collect();
            for r in roots {
                self.add_tree(&r, ctx, false);
            }
            return;
        }
        if raw.mask.contains(EventMask::IGNORED) {
            if let Some(w) = self.by_wd.remove(&raw.wd) {
                self.by_path.remove(&w.path);
            }
            self.after_removal(ctx);
            return;
        }
        let Some(dir) = self.by_wd.get(&raw.wd).map(|w| w.path.clone()) else {
            return;
        };
        let Some(name) = raw.name else {
            // Events about the watched directory itself.
            if raw.mask.contains(EventMask::MOVE_SELF)
                && self.roots.iter().any(|r| r.wd == Some(raw.wd))
            {
                // The root was renamed away: its paths are no longer valid.
                self.remove_tree(&dir, ctx);
            }
            return;
        };
        let path = dir.join(name);
        let is_dir = raw.mask.contains(EventMask::ISDIR);
        if is_dir {
            if raw.mask.contains(EventMask::MOVED_FROM) {
                self.remove_tree(&path, ctx);
            } else if raw.mask.intersects(EventMask::CREATE | EventMask::MOVED_TO) {
                if ctx.excluded.contains(&path) {
                    inc(&ctx.counters.filtered);
                } else {
                    self.add_tree(&path, ctx, true);
                }
            }
            return;
        }
        if raw.mask.contains(EventMask::CLOSE_WRITE) {
            ctx.offer(path, EventKind::ClosedWrite);
        } else if raw.mask.contains(EventMask::MOVED_TO) {
            ctx.offer(path, EventKind::MovedIn);
        } else if raw.mask.contains(EventMask::CREATE) {
            self.created(path, ctx);
        }
    }
}

/// The synchronous walk that watches a tree.
struct WatchTree<'a> {
    src: &'a mut InotifySource,
    ctx: &'a Ctx,
}

impl Visitor for WatchTree<'_> {
    fn enter(&mut self, path: &Path, dir: BorrowedFd<'_>, _depth: usize) -> Decision {
        self.src.add_watch(path, Some(dir), self.ctx)
    }

    fn error(&mut self, path: &Path, err: &io::Error) {
        inc(&self.ctx.counters.watch_errors);
        log::debug!(
            "file watcher: cannot list {}: {err}",
            crate::text::escape_path(path)
        );
    }
}

impl Source for InotifySource {
    fn fd(&self) -> BorrowedFd<'_> {
        self.ino.as_fd()
    }

    fn on_readable(&mut self, ctx: &mut Ctx) {
        for _ in 0..MAX_READS_PER_WAKE {
            let raws: Vec<Raw> = match self.ino.read_events(&mut self.buf) {
                Ok(evs) => evs
                    .map(|e| Raw {
                        wd: e.wd.get_watch_descriptor_id(),
                        mask: e.mask,
                        name: e.name.map(|n| n.to_os_string()),
                    })
                    .collect(),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::warn!("file watcher: inotify read failed: {e}");
                    return;
                }
            };
            if raws.is_empty() {
                return;
            }
            // A creation whose close-write is in the same batch needs no report of its own:
            // the close-write scans the file as it ends up.
            let closing: std::collections::HashSet<(i32, OsString)> = raws
                .iter()
                .filter(|r| r.mask.contains(EventMask::CLOSE_WRITE))
                .filter_map(|r| r.name.clone().map(|n| (r.wd, n)))
                .collect();
            for mut raw in raws {
                if raw.mask.contains(EventMask::CREATE) && !raw.mask.contains(EventMask::ISDIR) {
                    if let Some(n) = &raw.name {
                        if closing.contains(&(raw.wd, n.clone())) {
                            raw.mask.remove(EventMask::CREATE);
                        }
                    }
                }
                self.handle(raw, ctx);
            }
        }
    }

    fn check_roots(&mut self, ctx: &mut Ctx) {
        for i in 0..ctx.roots.len() {
            if let Some(canonical) = ctx.roots.get(i).and_then(|r| r.canonical.clone()) {
                let want = self.roots.get(i).map(|r| r.dev_ino);
                let now = std::fs::metadata(&canonical)
                    .ok()
                    .map(|m| (m.dev(), m.ino()));
                if now.is_some() && now == want {
                    continue;
                }
                // Removed or replaced: drop its watches and attach afresh.
                if let Some(r) = self.roots.get_mut(i) {
                    r.wd = None;
                }
                self.remove_tree(&canonical, ctx);
                ctx.set_detached(i);
            }
            if let Err(e) = self.attach(i, ctx) {
                ctx.attach_failed(i, &e);
            }
        }
        self.publish_count(ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::watch::files::reconcile::Reconcile;
    use crate::watch::files::testutil::TestDir;
    use crate::watch::files::WatchOptions;
    use std::sync::Arc;

    #[test]
    fn overflow_requests_root_scans_and_rewatches_missed_directories() {
        let t = TestDir::new();
        let (tx, rx) = crossbeam_channel::bounded(16);
        let clock = ManualClock::at_epoch_2026();
        let opts = WatchOptions::new(tx, clock.clone());
        let r = Reconcile::new(clock, Vec::new());
        let mut ctx = Ctx::new(&[t.path().to_path_buf()], &opts, Arc::default(), r.clone());
        let mut s = InotifySource::new(&mut ctx).expect("inotify");
        assert_eq!(ctx.counters.watches.load(Ordering::Relaxed), 1);
        // Created while "overflowing": its IN_CREATE is never handled.
        std::fs::create_dir(t.path().join("missed")).expect("mkdir");
        s.handle(
            Raw {
                wd: -1,
                mask: EventMask::Q_OVERFLOW,
                name: None,
            },
            &mut ctx,
        );
        assert_eq!(r.pending_paths(), vec![t.path().to_path_buf()]);
        assert!(rx.try_recv().is_err());
        assert_eq!(ctx.counters.queue_overflows.load(Ordering::Relaxed), 1);
        assert_eq!(ctx.counters.watches.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn events_for_unknown_descriptors_are_ignored() {
        let t = TestDir::new();
        let (tx, rx) = crossbeam_channel::bounded(16);
        let clock = ManualClock::at_epoch_2026();
        let opts = WatchOptions::new(tx, clock.clone());
        let r = Reconcile::new(clock, Vec::new());
        let mut ctx = Ctx::new(&[t.path().to_path_buf()], &opts, Arc::default(), r);
        let mut s = InotifySource::new(&mut ctx).expect("inotify");
        s.handle(
            Raw {
                wd: 9_999,
                mask: EventMask::CLOSE_WRITE,
                name: Some("x".into()),
            },
            &mut ctx,
        );
        assert!(rx.try_recv().is_err());
    }
}
