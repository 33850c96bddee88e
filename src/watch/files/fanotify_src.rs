//! fanotify backend.
//!
//! * FID mode (preferred, Linux >= 5.9 with `CAP_DAC_READ_SEARCH`): a group initialised with
//!   `FAN_REPORT_DFID_NAME` and a *filesystem* mark (`FAN_MARK_FILESYSTEM`) per filesystem
//!   holding a root (plus filesystems mounted below a root), for `FAN_CLOSE_WRITE` and
//!   `FAN_MOVED_TO` (with `FAN_ONDIR`) and `FAN_CREATE` (a new name for an existing inode,
//!   e.g. a hard link, is reported when the file already has content). Events carry a
//!   directory file handle and a name;
//!   the directory is reopened with `open_by_handle_at` through a descriptor on the same
//!   filesystem (the root or mount point, opened per event and closed again: holding it
//!   would pin the mount and make `umount` fail with EBUSY) and its path read from
//!   `/proc/self/fd/N`. New directories need no extra
//!   marks. A directory moved into a root goes to the reconcile walk. When the directory's
//!   path is too long for the kernel to name (4,096 bytes or more), the walk takes its
//!   nearest ancestor the kernel can name (reached through `..`), which reaches the file by
//!   descriptors.
//! * Plain mode (older kernels): `FAN_CLOSE_WRITE` on mount marks (`FAN_MARK_MOUNT`); the
//!   event carries an open descriptor whose `/proc/self/fd/N` link is the path. Moves and
//!   links into a root are not reported in this mode, and a path too long to name is
//!   counted in `path_errors` and logged.
//!
//! Marks cover whole filesystems or mounts, so every event is filtered down to the
//! configured roots (and exclusions) by its resolved path.

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use nix::errno::Errno;
use nix::sys::fanotify::{EventFFlags, Fanotify, InitFlags, MarkFlags, MaskFlags};

use super::ctx::Ctx;
use super::fid;
use super::mounts::mounts_below;
use super::stats::inc;
use super::tree::identity;
use super::{EventKind, Source};
use crate::sys::{dirstream, fhandle};

/// Bytes per `read(2)` in FID mode.
const READ_BUF: usize = 64 * 1024;
/// Reads per wake-up before returning to the loop (keeps `stop()` responsive).
const MAX_READS_PER_WAKE: usize = 64;
/// Steps up through `..` at most when looking for an ancestor the kernel can name.
const MAX_UP_STEPS: usize = 4096;
/// Long directories remembered as outside every root.
const LONG_OUTSIDE_CACHE: usize = 256;

/// A marked directory: the root itself or a mount point below it. No descriptor is kept
/// open (it would pin the mount).
struct Anchor {
    path: PathBuf,
    fsid: [u8; 8],
    dev_ino: (u64, u64),
}

pub(crate) struct FanotifySource {
    group: Fanotify,
    fid: bool,
    /// Anchors per root (empty while detached); index 0 is the root itself.
    roots: Vec<Vec<Anchor>>,
    buf: Vec<u8>,
    /// (device, inode) of long directories known to lie outside every root.
    long_outside: std::collections::HashSet<(u64, u64)>,
}

/// Opens a directory for reading (`open_by_handle_at` refuses `O_PATH` mount descriptors).
fn open_dir(path: &Path) -> io::Result<File> {
    // A configured watch root (daemon-owned path).
    crate::fsutil::open_daemon_file_with(
        path,
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW),
    )
}

/// True when handles of `path`'s filesystem can be turned back into descriptors here
/// (`name_to_handle_at` supported and `open_by_handle_at` permitted).
fn handles_usable(path: &Path) -> io::Result<()> {
    let dir = open_dir(path)?;
    let h = fhandle::handle_of(dir.as_fd())?;
    fhandle::open_by_handle(
        dir.as_fd(),
        h.handle_type,
        &h.bytes,
        libc::O_PATH | libc::O_CLOEXEC,
    )
    .map(drop)
}

fn proc_fd_path(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

fn too_long(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENAMETOOLONG)
}

/// The path of the directory open as `dir` when the kernel cannot name it (4,096 bytes or
/// more): steps up through `..` until an ancestor can be named, and returns that ancestor.
fn nameable_ancestor(dir: BorrowedFd<'_>) -> io::Result<PathBuf> {
    let flags = libc::O_PATH | libc::O_DIRECTORY;
    let mut cur: OwnedFd = dirstream::openat(dir, OsStr::new(".."), flags)?;
    let mut below = identity(dir)?;
    for _ in 0..MAX_UP_STEPS {
        let here = identity(cur.as_fd())?;
        if here == below {
            break; // `/`: nothing above
        }
        match proc_fd_path(cur.as_fd()) {
            Ok(p) => return Ok(p),
            Err(e) if too_long(&e) => {}
            Err(e) => return Err(e),
        }
        below = here;
        cur = dirstream::openat(cur.as_fd(), OsStr::new(".."), flags)?;
    }
    Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG))
}

impl FanotifySource {
    /// Opens a group (FID mode when `want_fid` and supported, else plain) and attaches the
    /// roots that exist. Errors when fanotify is not permitted, or when an existing root
    /// cannot be marked (so an automatic choice can fall back to inotify).
    pub(crate) fn new(ctx: &mut Ctx, want_fid: bool) -> io::Result<FanotifySource> {
        let base = InitFlags::FAN_CLASS_NOTIF | InitFlags::FAN_CLOEXEC | InitFlags::FAN_NONBLOCK;
        let ev_flags = EventFFlags::O_RDONLY | EventFFlags::O_LARGEFILE | EventFFlags::O_CLOEXEC;
        let mut group = None;
        if want_fid {
            let probe = ctx
                .roots
                .iter()
                .filter_map(|r| std::fs::canonicalize(&r.configured).ok())
                .next()
                .unwrap_or_else(|| PathBuf::from("/"));
            match Fanotify::init(
                base | InitFlags::from_bits_retain(libc::FAN_REPORT_DFID_NAME),
                ev_flags,
            ) {
                Ok(g) => match handles_usable(&probe) {
                    Ok(()) => group = Some((g, true)),
                    Err(e) => log::info!(
                        "file watcher: fanotify FID mode unusable (file handles: {e}); \
                         using mount marks"
                    ),
                },
                Err(Errno::EINVAL) => {
                    log::info!("file watcher: kernel lacks FAN_REPORT_DFID_NAME; using mount marks")
                }
                Err(e) => return Err(e.into()),
            }
        }
        let (group, fid) = match group {
            Some(g) => g,
            None => (Fanotify::init(base, ev_flags)?, false),
        };
        let mut s = FanotifySource {
            group,
            fid,
            roots: (0..ctx.roots.len()).map(|_| Vec::new()).collect(),
            buf: vec![0; READ_BUF],
            long_outside: std::collections::HashSet::new(),
        };
        for i in 0..ctx.roots.len() {
            match s.attach(i, ctx) {
                Ok(()) => {}
                Err(e)
                    if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR))
                        || e.kind() == io::ErrorKind::InvalidInput =>
                {
                    ctx.attach_failed(i, &e)
                }
                Err(e) => return Err(e),
            }
        }
        Ok(s)
    }

    /// True in FID mode (moves and new directories are reported).
    pub(crate) fn fid_mode(&self) -> bool {
        self.fid
    }

    fn publish_count(&self, ctx: &Ctx) {
        let n: usize = self.roots.iter().map(Vec::len).sum();
        ctx.counters.watches.store(n as u64, Ordering::Relaxed);
    }

    /// Opens and marks `path`'s filesystem (FID) or mount (plain).
    fn anchor(&self, path: &Path, ctx: &Ctx) -> io::Result<Anchor> {
        let dir = open_dir(path)?;
        let meta = dir.metadata()?;
        let fsid = if self.fid {
            fhandle::fsid_of(&dir)?
        } else {
            [0; 8]
        };
        let (flags, mask) = if self.fid {
            (
                MarkFlags::FAN_MARK_ADD | MarkFlags::FAN_MARK_FILESYSTEM,
                MaskFlags::FAN_CLOSE_WRITE
                    | MaskFlags::FAN_MOVED_TO
                    | MaskFlags::FAN_CREATE
                    | MaskFlags::FAN_ONDIR,
            )
        } else {
            (
                MarkFlags::FAN_MARK_ADD | MarkFlags::FAN_MARK_MOUNT,
                MaskFlags::FAN_CLOSE_WRITE,
            )
        };
        if let Err(e) = self.group.mark(flags, mask, None, Some(path)) {
            if e == Errno::ENOSPC {
                inc(&ctx.counters.watch_limit_errors);
            } else {
                inc(&ctx.counters.watch_errors);
            }
            return Err(e.into());
        }
        Ok(Anchor {
            path: path.to_path_buf(),
            fsid,
            dev_ino: (meta.dev(), meta.ino()),
        })
    }

    /// Marks filesystems mounted below root `i` that have no anchor yet, and drops anchors
    /// whose mount point changed.
    fn refresh_submounts(&mut self, i: usize, root: &Path, ctx: &Ctx) {
        let Some(anchors) = self.roots.get_mut(i) else {
            return;
        };
        let mut k = 1;
        while k < anchors.len() {
            let same = anchors.get(k).is_some_and(|a| {
                std::fs::metadata(&a.path)
                    .map(|m| (m.dev(), m.ino()) == a.dev_ino)
                    .unwrap_or(false)
            });
            if same {
                k += 1;
            } else {
                anchors.remove(k);
            }
        }
        let known: Vec<PathBuf> = anchors.iter().map(|a| a.path.clone()).collect();
        let mut added = Vec::new();
        for m in mounts_below(root) {
            if known.contains(&m) || ctx.excluded.contains(&m) {
                continue;
            }
            match self.anchor(&m, ctx) {
                Ok(a) => added.push(a),
                Err(e) => log::debug!("file watcher: cannot mark mount {}: {e}", m.display()),
            }
        }
        if let Some(anchors) = self.roots.get_mut(i) {
            anchors.extend(added);
        }
    }

    fn attach(&mut self, i: usize, ctx: &mut Ctx) -> io::Result<()> {
        let configured = ctx
            .roots
            .get(i)
            .map(|r| r.configured.clone())
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let canonical = std::fs::canonicalize(&configured)?;
        if !std::fs::metadata(&canonical)?.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        if ctx.excluded.contains(&canonical) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "root lies inside an excluded directory",
            ));
        }
        let a = self.anchor(&canonical, ctx)?;
        if let Some(slot) = self.roots.get_mut(i) {
            *slot = vec![a];
        }
        self.refresh_submounts(i, &canonical, ctx);
        ctx.set_attached(i, canonical);
        self.publish_count(ctx);
        Ok(())
    }

    /// Opens (`O_PATH`) the directory a FID record names, through an anchor on its
    /// filesystem. `None` when no anchor can open it or the directory was removed.
    fn open_dir_of(&self, rec: &fid::DirRecord<'_>) -> Option<OwnedFd> {
        for a in self.roots.iter().flatten().filter(|a| a.fsid == rec.fsid) {
            // The anchor must still be the directory that was marked.
            let Ok(mount) = open_dir(&a.path) else {
                continue;
            };
            let same = mount
                .metadata()
                .map(|m| (m.dev(), m.ino()) == a.dev_ino)
                .unwrap_or(false);
            if !same {
                continue;
            }
            let Ok(fd) = fhandle::open_by_handle(
                mount.as_fd(),
                rec.handle_type,
                rec.handle,
                libc::O_PATH | libc::O_CLOEXEC,
            ) else {
                continue;
            };
            let removed = nix::sys::stat::fstat(fd.as_raw_fd())
                .map(|st| st.st_nlink == 0)
                .unwrap_or(true);
            return (!removed).then_some(fd);
        }
        None
    }

    /// A directory whose path the kernel cannot name: its nearest nameable ancestor goes to
    /// the reconcile walk, which reaches the file by descriptors. Directories found to lie
    /// outside every root are remembered (until a directory is moved or the roots are
    /// checked again), so deep trees elsewhere on the filesystem cost one walk up.
    fn long_dir(&mut self, dir: BorrowedFd<'_>, ctx: &Ctx) {
        let id = identity(dir).ok();
        if id.is_some_and(|id| self.long_outside.contains(&id)) {
            inc(&ctx.counters.filtered);
            return;
        }
        inc(&ctx.counters.long_paths);
        match nameable_ancestor(dir) {
            Ok(a) if ctx.wanted(&a) => ctx.request_scan(&a),
            Ok(_) => {
                inc(&ctx.counters.filtered);
                if let Some(id) = id {
                    if self.long_outside.len() >= LONG_OUTSIDE_CACHE {
                        self.long_outside.clear();
                    }
                    self.long_outside.insert(id);
                }
            }
            Err(e) => ctx.path_error("cannot name a directory of an event", Path::new(""), &e),
        }
    }

    fn handle_fid_event(&mut self, ev: &fid::RawEvent<'_>, ctx: &Ctx) {
        inc(&ctx.counters.events_read);
        if ev.fd >= 0 {
            // FID groups report FAN_NOFD; close anything else rather than leak it.
            let _ = nix::unistd::close(ev.fd);
        }
        if ev.mask & libc::FAN_Q_OVERFLOW != 0 {
            ctx.overflow();
            return;
        }
        let is_dir = ev.mask & libc::FAN_ONDIR != 0;
        if is_dir && ev.mask & libc::FAN_MOVED_TO == 0 {
            // Directories created empty: their files are reported by the filesystem mark.
            inc(&ctx.counters.filtered);
            return;
        }
        if is_dir {
            // A directory can enter a root this way: forget what was found outside.
            self.long_outside.clear();
        }
        let Some(rec) = ev.dir.as_ref() else {
            inc(&ctx.counters.unresolved);
            return;
        };
        if rec.name.contains(&b'/') || rec.name == b".." {
            inc(&ctx.counters.unresolved);
            return;
        }
        let Some(dir_fd) = self.open_dir_of(rec) else {
            inc(&ctx.counters.unresolved);
            return;
        };
        let named = !rec.name.is_empty() && rec.name != b".";
        let name = OsStr::from_bytes(rec.name);
        let closed = ev.mask & libc::FAN_CLOSE_WRITE != 0;
        let moved = ev.mask & libc::FAN_MOVED_TO != 0;
        if !is_dir && !closed && !moved {
            // FAN_CREATE alone: worth reporting only when the new name leads to a regular
            // file that already has content (a link). A file just created is empty and
            // its close-write follows.
            let linked = named
                && nix::sys::stat::fstatat(
                    Some(dir_fd.as_raw_fd()),
                    name,
                    nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_size > 0);
            if !linked {
                inc(&ctx.counters.filtered);
                return;
            }
        }
        let dir = match proc_fd_path(dir_fd.as_fd()) {
            Ok(d) => d,
            Err(e) if too_long(&e) => return self.long_dir(dir_fd.as_fd(), ctx),
            Err(_) => {
                inc(&ctx.counters.unresolved);
                return;
            }
        };
        let path = if named { dir.join(name) } else { dir };
        if is_dir {
            if ctx.wanted(&path) {
                ctx.request_scan(&path);
            } else {
                inc(&ctx.counters.filtered);
            }
        } else if closed {
            ctx.offer(path, EventKind::ClosedWrite);
        } else if moved {
            ctx.offer(path, EventKind::MovedIn);
        } else {
            ctx.offer(path, EventKind::Linked);
        }
    }

    fn read_fid(&mut self, ctx: &Ctx) {
        let mut buf = std::mem::take(&mut self.buf);
        for _ in 0..MAX_READS_PER_WAKE {
            match nix::unistd::read(self.group.as_fd().as_raw_fd(), &mut buf) {
                Ok(0) | Err(Errno::EAGAIN) => break,
                Ok(n) => {
                    for ev in fid::events(buf.get(..n).unwrap_or_default()) {
                        match ev {
                            Ok(ev) => self.handle_fid_event(&ev, ctx),
                            Err(e) => {
                                inc(&ctx.counters.parse_errors);
                                log::warn!("file watcher: {e}");
                            }
                        }
                    }
                }
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    log::warn!("file watcher: fanotify read failed: {e}");
                    break;
                }
            }
        }
        self.buf = buf;
    }

    fn read_plain(&mut self, ctx: &Ctx) {
        for _ in 0..MAX_READS_PER_WAKE {
            let events = match self.group.read_events() {
                Ok(evs) if evs.is_empty() => return,
                Ok(evs) => evs,
                Err(Errno::EAGAIN) => return,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    log::warn!("file watcher: fanotify read failed: {e}");
                    return;
                }
            };
            for ev in events {
                inc(&ctx.counters.events_read);
                if ev.mask().contains(MaskFlags::FAN_Q_OVERFLOW) {
                    ctx.overflow();
                    continue;
                }
                let Some(fd) = ev.fd() else {
                    inc(&ctx.counters.unresolved);
                    continue;
                };
                let gone = nix::sys::stat::fstat(fd.as_raw_fd())
                    .map(|st| st.st_nlink == 0)
                    .unwrap_or(true);
                match proc_fd_path(fd) {
                    Ok(path) if !gone => ctx.offer(path, EventKind::ClosedWrite),
                    Err(e) if too_long(&e) && !gone => {
                        inc(&ctx.counters.long_paths);
                        ctx.path_error(
                            "cannot name a file closed after writing (mount marks cannot \
                             reach its directory)",
                            Path::new(""),
                            &e,
                        );
                    }
                    _ => inc(&ctx.counters.unresolved),
                }
                // `ev` closes its descriptor when dropped.
            }
        }
    }
}

impl Source for FanotifySource {
    fn fd(&self) -> BorrowedFd<'_> {
        self.group.as_fd()
    }

    fn on_readable(&mut self, ctx: &mut Ctx) {
        if self.fid {
            self.read_fid(ctx);
        } else {
            self.read_plain(ctx);
        }
    }

    fn check_roots(&mut self, ctx: &mut Ctx) {
        self.long_outside.clear();
        for i in 0..ctx.roots.len() {
            if let Some(canonical) = ctx.roots.get(i).and_then(|r| r.canonical.clone()) {
                let want = self.roots.get(i).and_then(|a| a.first()).map(|a| a.dev_ino);
                let now = std::fs::metadata(&canonical)
                    .ok()
                    .map(|m| (m.dev(), m.ino()));
                if now.is_some() && now == want {
                    self.refresh_submounts(i, &canonical, ctx);
                    continue;
                }
                if let Some(a) = self.roots.get_mut(i) {
                    a.clear();
                }
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
    use crate::watch::files::fid::tests::build_event;
    use crate::watch::files::reconcile::Reconcile;
    use crate::watch::files::testutil::TestDir;
    use crate::watch::files::WatchOptions;
    use std::sync::Arc;

    #[test]
    fn synthetic_overflow_and_stale_handles() {
        let t = TestDir::new();
        let (tx, rx) = crossbeam_channel::bounded(16);
        let clock = ManualClock::at_epoch_2026();
        let opts = WatchOptions::new(tx, clock.clone());
        let r = Reconcile::new(clock, Vec::new());
        let mut ctx = Ctx::new(&[t.path().to_path_buf()], &opts, Arc::default(), r.clone());
        let mut s = match FanotifySource::new(&mut ctx, true) {
            Ok(s) if s.fid_mode() => s,
            Ok(_) => return eprintln!("skipping: fanotify FID mode unavailable"),
            Err(e) => return eprintln!("skipping: fanotify unavailable: {e}"),
        };
        let fsid = fhandle::fsid_of(File::open(t.path()).expect("open")).expect("fsid");
        let mut buf = build_event(libc::FAN_Q_OVERFLOW, None);
        buf.extend(build_event(
            libc::FAN_CLOSE_WRITE,
            Some((&fsid, 1, b"\xff\xff\xff\x7f\x00\x00\x00\x00", b"f")),
        ));
        buf.extend(build_event(
            libc::FAN_CLOSE_WRITE,
            Some((&fsid, 1, b"", b"../x")),
        ));
        for ev in fid::events(&buf) {
            s.handle_fid_event(&ev.expect("valid synthetic event"), &ctx);
        }
        // The overflow hands the root to the reconcile walk, not to the event channel.
        assert_eq!(r.pending_paths(), vec![t.path().to_path_buf()]);
        assert!(rx.try_recv().is_err());
        assert_eq!(ctx.counters.queue_overflows.load(Ordering::Relaxed), 1);
        assert_eq!(ctx.counters.unresolved.load(Ordering::Relaxed), 2);
    }

    /// A directory the kernel cannot name: the walk up finds the nearest ancestor it can.
    #[test]
    fn nameable_ancestor_of_a_long_directory() {
        let t = TestDir::new();
        let name = "a".repeat(250);
        let mut fd: OwnedFd = OwnedFd::from(File::open(t.path()).expect("open"));
        let mut depth = 0;
        let mut last_short = t.path().to_path_buf();
        let mut path = t.path().to_path_buf();
        while path.as_os_str().len() < 6000 {
            nix::sys::stat::mkdirat(
                Some(fd.as_raw_fd()),
                name.as_str(),
                nix::sys::stat::Mode::from_bits_truncate(0o755),
            )
            .expect("mkdirat");
            fd = dirstream::open_subdir(fd.as_fd(), OsStr::new(&name)).expect("openat");
            path.push(&name);
            if path.as_os_str().len() < 4096 {
                last_short = path.clone();
            }
            depth += 1;
        }
        assert!(depth > 16);
        assert!(too_long(&proc_fd_path(fd.as_fd()).expect_err("too long")));
        assert_eq!(nameable_ancestor(fd.as_fd()).expect("ancestor"), last_short);
    }
}
