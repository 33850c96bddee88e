//! Directory walks by descriptor: a stack of directory cursors that advances in bounded
//! steps, can be resumed later, and reaches paths of any length.
//!
//! Guarantees:
//! * Never follows a symbolic link: every directory is opened relative to its parent's
//!   descriptor with `O_NOFOLLOW | O_DIRECTORY`; a name swapped for a link or a file is left
//!   out. No path is ever handed to a system call, so paths of 4,096 bytes and more are
//!   walked like any other.
//! * Memory and descriptors are bounded by depth, never by breadth: one cursor (descriptor,
//!   name, identity, position cookie) per level of the current branch. At most
//!   [`OPEN_LEVELS`] levels keep their descriptor; deeper branches close the shallowest ones
//!   (the top stays open) and reopen them on the way back, through `..` of the child or from
//!   the nearest open ancestor by name, checking device and inode at each step, then resume
//!   at the saved cookie.
//! * A directory already on the current branch (a bind-mount loop) is not entered again.
//! * Vanished or replaced entries are races, not errors: they end that part of the walk
//!   quietly. Other failures are passed to [`Visitor::error`] and the walk goes on.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use crate::sys::dirstream::{self, DirStream, EntryKind};

/// Levels of the current branch that keep their descriptor open (the top level always does).
pub(crate) const OPEN_LEVELS: usize = 16;

/// Paths this long cannot be passed to a system call (`PATH_MAX` counts the NUL).
pub const PATH_MAX_BYTES: usize = 4096;

/// True when `path` is too long for a system call and must be reached step by step.
#[cfg(test)]
pub(crate) fn is_long(path: &Path) -> bool {
    path.as_os_str().len() >= PATH_MAX_BYTES
}

/// True for errors that mean the entry is gone or was replaced (a race, not a fault).
pub fn vanished(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ELOOP) | Some(libc::ESTALE)
    )
}

/// (device, inode) of an open object.
pub(crate) fn identity(fd: BorrowedFd<'_>) -> io::Result<(u64, u64)> {
    let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(io::Error::from)?;
    #[allow(clippy::unnecessary_cast)]
    Ok((st.st_dev as u64, st.st_ino as u64))
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

/// Opens the directory `dir`, which lies at or below `base`: `base` by path (it must be a
/// trusted, canonical directory such as a watched root or `/`), then each component below it
/// relative to its parent without following symbolic links. Works for paths of any length.
pub(crate) fn open_dir_beneath(base: &Path, dir: &Path) -> io::Result<OwnedFd> {
    let rel = dir
        .strip_prefix(base)
        .map_err(|_| invalid("directory is not below the base"))?;
    // The base is trusted (a watched root or `/`): reached from `/` following only symlinks
    // root or the daemon owns.
    let mut fd = crate::sys::dir::Dir::walk_trusted(base)
        .map_err(io::Error::from)?
        .as_fd()
        .try_clone_to_owned()?;
    for c in rel.components() {
        let Component::Normal(name) = c else {
            return Err(invalid("path has . or .. components"));
        };
        fd = dirstream::open_subdir(fd.as_fd(), name)?;
    }
    Ok(fd)
}

/// Opens `name` in `dir` for reading its content: never follows a symbolic link, never
/// blocks on a FIFO, leaves the access time alone where permitted.
pub fn open_file_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<File> {
    let base = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    match dirstream::openat(dir, name, base | libc::O_NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            dirstream::openat(dir, name, base).map(File::from)
        }
        r => r.map(File::from),
    }
}

/// Opens the file at absolute `path` by steps from `/` (for paths too long for `open(2)`).
/// Every component is reached without following a symbolic link.
pub fn open_file_long(path: &Path) -> io::Result<File> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(invalid("path has no file name"));
    };
    let dir = open_dir_beneath(Path::new("/"), parent)?;
    open_file_at(dir.as_fd(), name)
}

/// What to do with a directory the walk reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// List it.
    Descend,
    /// Leave it and everything below it out.
    Skip,
}

/// What to do when the listing of a directory ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LevelEnd {
    /// It is complete: go back to its parent.
    Pop,
    /// List it once more from the start (its subdirectories are entered again).
    Again,
}

/// Callbacks of a walk.
pub(crate) trait Visitor {
    /// A directory is about to be listed at `depth` (the top is 0).
    fn enter(&mut self, path: &Path, dir: BorrowedFd<'_>, depth: usize) -> Decision;
    /// A regular file `name` in the directory `dir`, known as `path`.
    fn file(&mut self, _path: &Path, _dir: BorrowedFd<'_>, _name: &OsStr) {}
    /// The listing at `depth` ended; `forced` when it ended early (vanished, unreadable), in
    /// which case the answer is ignored and the level is left.
    fn leave(&mut self, _depth: usize, _forced: bool) -> LevelEnd {
        LevelEnd::Pop
    }
    /// A failure other than a vanished entry.
    fn error(&mut self, _path: &Path, _err: &io::Error) {}
}

/// Counters of one walk.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WalkStats {
    /// Directories entered (the top included).
    pub dirs: u64,
    /// Regular files reported.
    pub files: u64,
    /// Directory entries read (`.` and `..` excluded).
    pub entries: u64,
    /// Directories not entered because they already were on the branch (mount loops).
    pub loops: u64,
    /// Levels reopened after the descriptor window closed them.
    pub reopened: u64,
    /// Failures reported to the visitor.
    pub errors: u64,
}

struct Level {
    stream: Option<DirStream>,
    /// Name in the parent (empty for the top).
    name: OsString,
    id: (u64, u64),
    /// Position just after the last entry taken.
    cookie: i64,
}

/// A walk in progress. See the module documentation.
pub(crate) struct Walk {
    stack: Vec<Level>,
    /// Path of the deepest level.
    path: PathBuf,
    open: usize,
    pub stats: WalkStats,
}

impl std::fmt::Debug for Walk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Walk")
            .field("depth", &self.stack.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Walk {
    /// Starts a walk of the directory open as `fd`, known as `path`. `None` when the
    /// visitor skips it or it cannot be identified (then nothing was entered).
    pub(crate) fn start<V: Visitor + ?Sized>(
        path: PathBuf,
        fd: OwnedFd,
        v: &mut V,
    ) -> Option<Walk> {
        let id = identity(fd.as_fd()).ok()?;
        if v.enter(&path, fd.as_fd(), 0) == Decision::Skip {
            return None;
        }
        Some(Walk {
            stack: vec![Level {
                stream: Some(DirStream::new(fd)),
                name: OsString::new(),
                id,
                cookie: 0,
            }],
            path,
            open: 1,
            stats: WalkStats {
                dirs: 1,
                ..WalkStats::default()
            },
        })
    }

    /// Levels on the current branch (0 when the walk is complete).
    #[cfg(test)]
    pub(crate) fn depth(&self) -> usize {
        self.stack.len()
    }

    /// Descriptors the walk holds open now.
    #[cfg(test)]
    pub(crate) fn open_descriptors(&self) -> usize {
        self.open
    }

    /// Runs the walk to its end.
    pub(crate) fn run<V: Visitor + ?Sized>(&mut self, v: &mut V) {
        while !self.step(usize::MAX, v) {}
    }

    /// Reads at most `budget` entries. True when the walk is complete.
    pub(crate) fn step<V: Visitor + ?Sized>(&mut self, budget: usize, v: &mut V) -> bool {
        let mut used = 0usize;
        while used < budget {
            let Some(top) = self.stack.len().checked_sub(1) else {
                return true;
            };
            let has_stream = self.stack.get(top).is_some_and(|l| l.stream.is_some());
            if !has_stream {
                self.reopen(top, v);
                continue;
            }
            let next = match self.stack.get_mut(top).and_then(|l| l.stream.as_mut()) {
                Some(s) => s.next_entry(),
                None => continue,
            };
            match next {
                Ok(None) => self.end_level(v, false),
                Err(e) => {
                    if !vanished(&e) {
                        self.stats.errors += 1;
                        v.error(&self.path, &e);
                    }
                    self.end_level(v, true);
                }
                Ok(Some(ent)) => {
                    used += 1;
                    self.stats.entries += 1;
                    if let Some(l) = self.stack.get_mut(top) {
                        l.cookie = ent.next;
                    }
                    let kind = match ent.kind {
                        EntryKind::Unknown => self.stat_kind(top, &ent.name),
                        k => k,
                    };
                    match kind {
                        EntryKind::Dir => self.descend(top, ent.name, v),
                        EntryKind::File => {
                            self.stats.files += 1;
                            let p = self.path.join(&ent.name);
                            if let Some(fd) = self.fd_of(top) {
                                v.file(&p, fd, &ent.name);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        self.stack.is_empty()
    }

    fn fd_of(&self, level: usize) -> Option<BorrowedFd<'_>> {
        self.stack
            .get(level)
            .and_then(|l| l.stream.as_ref())
            .map(DirStream::fd)
    }

    fn stat_kind(&self, level: usize, name: &OsStr) -> EntryKind {
        let Some(fd) = self.fd_of(level) else {
            return EntryKind::Other;
        };
        match nix::sys::stat::fstatat(
            Some(fd.as_raw_fd()),
            name,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => match st.st_mode & libc::S_IFMT {
                libc::S_IFDIR => EntryKind::Dir,
                libc::S_IFREG => EntryKind::File,
                libc::S_IFLNK => EntryKind::Symlink,
                _ => EntryKind::Other,
            },
            Err(_) => EntryKind::Other,
        }
    }

    fn descend<V: Visitor + ?Sized>(&mut self, level: usize, name: OsString, v: &mut V) {
        let opened = match self.fd_of(level) {
            Some(fd) => dirstream::open_subdir(fd, &name),
            None => return,
        };
        let fd = match opened {
            Ok(fd) => fd,
            Err(e) if vanished(&e) => return,
            Err(e) => {
                self.stats.errors += 1;
                v.error(&self.path.join(&name), &e);
                return;
            }
        };
        let id = match identity(fd.as_fd()) {
            Ok(id) => id,
            Err(e) => {
                self.stats.errors += 1;
                v.error(&self.path.join(&name), &e);
                return;
            }
        };
        if self.stack.iter().any(|l| l.id == id) {
            self.stats.loops += 1;
            return;
        }
        self.path.push(&name);
        if v.enter(&self.path, fd.as_fd(), self.stack.len()) == Decision::Skip {
            self.path.pop();
            return;
        }
        self.stats.dirs += 1;
        self.stack.push(Level {
            stream: Some(DirStream::new(fd)),
            name,
            id,
            cookie: 0,
        });
        self.open += 1;
        self.trim();
    }

    /// Closes the shallowest open levels (never the top, never the deepest) beyond the
    /// descriptor window.
    fn trim(&mut self) {
        let last = self.stack.len().saturating_sub(1);
        let mut i = 1;
        while self.open > OPEN_LEVELS && i < last {
            if let Some(l) = self.stack.get_mut(i) {
                if l.stream.take().is_some() {
                    self.open -= 1;
                }
            }
            i += 1;
        }
    }

    /// The listing of the deepest level ended.
    fn end_level<V: Visitor + ?Sized>(&mut self, v: &mut V, forced: bool) {
        let depth = self.stack.len().saturating_sub(1);
        if v.leave(depth, forced) == LevelEnd::Again && !forced {
            if let Some(l) = self.stack.get_mut(depth) {
                if let Some(s) = l.stream.as_mut() {
                    if s.seek(0).is_ok() {
                        l.cookie = 0;
                        return;
                    }
                }
            }
            // Could not rewind: the visitor kept the level, so tell it the level ends.
            let _ = v.leave(depth, true);
        }
        self.pop_level();
    }

    fn pop_level(&mut self) {
        let Some(child) = self.stack.pop() else {
            return;
        };
        if !self.stack.is_empty() {
            self.path.pop();
        }
        // The parent may have been closed by the window: reopen it through the child's `..`
        // while the child is still open, if it is still the same directory.
        if let (Some(parent), Some(cs)) = (self.stack.last_mut(), child.stream.as_ref()) {
            if parent.stream.is_none() {
                let up = dirstream::openat(
                    cs.fd(),
                    OsStr::new(".."),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK,
                );
                if let Ok(fd) = up {
                    if identity(fd.as_fd()).ok() == Some(parent.id) {
                        let mut s = DirStream::new(fd);
                        if s.seek(parent.cookie).is_ok() {
                            parent.stream = Some(s);
                            self.open += 1;
                            self.stats.reopened += 1;
                        }
                    }
                }
            }
        }
        if child.stream.is_some() {
            self.open -= 1;
        }
    }

    /// Reopens the closed deepest level `top` from its nearest open ancestor, by name, each
    /// step checked against the identity recorded when it was first entered. Levels that
    /// vanished or were replaced end (forced).
    fn reopen<V: Visitor + ?Sized>(&mut self, top: usize, v: &mut V) {
        let Some(from) = (0..top)
            .rev()
            .find(|&i| self.stack.get(i).is_some_and(|l| l.stream.is_some()))
        else {
            // The top level is never closed; nothing to reopen from.
            while !self.stack.is_empty() {
                let _ = v.leave(self.stack.len() - 1, true);
                self.pop_level();
            }
            return;
        };
        for k in from + 1..=top {
            let opened = match (self.fd_of(k - 1), self.stack.get(k)) {
                (Some(parent), Some(l)) => dirstream::open_subdir(parent, &l.name),
                _ => Err(io::Error::from_raw_os_error(libc::ENOENT)),
            };
            let ok = opened.ok().and_then(|fd| {
                let l = self.stack.get(k)?;
                if identity(fd.as_fd()).ok()? != l.id {
                    return None;
                }
                let mut s = DirStream::new(fd);
                s.seek(l.cookie).ok()?;
                Some(s)
            });
            match (ok, self.stack.get_mut(k)) {
                (Some(s), Some(l)) => {
                    l.stream = Some(s);
                    self.open += 1;
                    self.stats.reopened += 1;
                }
                _ => {
                    // Levels k..=top are gone or were replaced: they end here.
                    while self.stack.len() > k {
                        let _ = v.leave(self.stack.len() - 1, true);
                        self.pop_level();
                    }
                    self.trim();
                    return;
                }
            }
        }
        self.trim();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::files::testutil::TestDir;
    use std::collections::BTreeSet;
    use std::fs;

    #[derive(Default)]
    struct Collect {
        dirs: Vec<(PathBuf, usize)>,
        files: BTreeSet<PathBuf>,
        skip: Option<PathBuf>,
        again_once: Option<PathBuf>,
        stack: Vec<PathBuf>,
        errors: usize,
    }

    impl Visitor for Collect {
        fn enter(&mut self, path: &Path, _dir: BorrowedFd<'_>, depth: usize) -> Decision {
            if self.skip.as_deref() == Some(path) {
                return Decision::Skip;
            }
            assert_eq!(self.stack.len(), depth, "depth of {path:?}");
            self.stack.push(path.to_path_buf());
            self.dirs.push((path.to_path_buf(), depth));
            Decision::Descend
        }
        fn file(&mut self, path: &Path, dir: BorrowedFd<'_>, name: &OsStr) {
            // The descriptor is the file's directory.
            let f = open_file_at(dir, name).expect("open relative");
            assert!(f.metadata().expect("meta").is_file());
            self.files.insert(path.to_path_buf());
        }
        fn leave(&mut self, depth: usize, forced: bool) -> LevelEnd {
            assert_eq!(self.stack.len(), depth + 1);
            if !forced && self.again_once.as_deref() == self.stack.last().map(|p| p.as_path()) {
                self.again_once = None;
                return LevelEnd::Again;
            }
            self.stack.pop();
            LevelEnd::Pop
        }
        fn error(&mut self, _path: &Path, _err: &io::Error) {
            self.errors += 1;
        }
    }

    fn walk_all(top: &Path, v: &mut Collect, budget: usize) -> WalkStats {
        let fd = open_dir_beneath(top, top).expect("open top");
        let mut w = Walk::start(top.to_path_buf(), fd, v).expect("started");
        let mut rounds = 0;
        while !w.step(budget, v) {
            rounds += 1;
            assert!(w.open_descriptors() <= OPEN_LEVELS);
            assert!(rounds < 1_000_000);
        }
        assert_eq!(w.depth(), 0);
        assert_eq!(w.open_descriptors(), 0);
        w.stats
    }

    #[test]
    fn walks_everything_in_small_steps_and_ignores_symlinks() {
        let t = TestDir::new();
        fs::create_dir_all(t.path().join("a/b")).expect("mkdir");
        fs::write(t.path().join("a/b/f.php"), b"x").expect("write");
        fs::write(t.path().join("top"), b"x").expect("write");
        std::os::unix::fs::symlink("/etc", t.path().join("link")).expect("symlink");
        std::os::unix::fs::symlink("/etc/passwd", t.path().join("a/flink")).expect("symlink");
        let mut v = Collect::default();
        let s = walk_all(t.path(), &mut v, 1);
        let dirs: BTreeSet<_> = v.dirs.iter().map(|(p, _)| p.clone()).collect();
        assert_eq!(
            dirs,
            [
                t.path().to_path_buf(),
                t.path().join("a"),
                t.path().join("a/b")
            ]
            .into_iter()
            .collect()
        );
        assert_eq!(
            v.files,
            [t.path().join("a/b/f.php"), t.path().join("top")]
                .into_iter()
                .collect()
        );
        assert_eq!((s.dirs, s.files, s.errors), (3, 2, 0));
    }

    #[test]
    fn skip_prunes_and_again_lists_a_level_once_more() {
        let t = TestDir::new();
        fs::create_dir_all(t.path().join("skip/deep")).expect("mkdir");
        fs::write(t.path().join("skip/deep/f"), b"x").expect("write");
        fs::create_dir_all(t.path().join("keep/sub")).expect("mkdir");
        fs::write(t.path().join("keep/sub/g"), b"x").expect("write");
        let mut v = Collect {
            skip: Some(t.path().join("skip")),
            again_once: Some(t.path().join("keep")),
            ..Collect::default()
        };
        walk_all(t.path(), &mut v, 3);
        assert_eq!(v.files, [t.path().join("keep/sub/g")].into_iter().collect());
        // `keep/sub` was entered in both passes over `keep`.
        let subs = v
            .dirs
            .iter()
            .filter(|(p, _)| *p == t.path().join("keep/sub"))
            .count();
        assert_eq!(subs, 2);
    }

    /// A branch deeper than the descriptor window, with a path far beyond PATH_MAX and wide
    /// levels, is walked completely with at most OPEN_LEVELS descriptors.
    #[test]
    fn deep_long_branches_reopen_closed_levels_and_resume_where_they_were() {
        let t = TestDir::new();
        let name = "d".repeat(200);
        let mut fd = open_dir_beneath(t.path(), t.path()).expect("top");
        let mut expect = BTreeSet::new();
        let mut path = t.path().to_path_buf();
        for level in 0..40 {
            // Siblings after the deep branch must still be found once the branch is done.
            for i in 0..5 {
                let f = format!("f{level}-{i}.php");
                let file = dirstream::openat(
                    fd.as_fd(),
                    OsStr::new(&f),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
                );
                drop(file.expect("create file"));
                expect.insert(path.join(&f));
            }
            nix::sys::stat::mkdirat(
                Some(fd.as_raw_fd()),
                name.as_str(),
                nix::sys::stat::Mode::from_bits_truncate(0o755),
            )
            .expect("mkdirat");
            fd = dirstream::open_subdir(fd.as_fd(), OsStr::new(&name)).expect("step");
            path.push(&name);
        }
        assert!(is_long(&path), "{} bytes", path.as_os_str().len());
        let mut v = Collect::default();
        let s = walk_all(t.path(), &mut v, 2);
        assert_eq!(v.files, expect);
        assert_eq!(s.dirs, 41);
        assert!(s.reopened > 0, "{s:?}");
        assert_eq!(s.errors, 0);
        // Opening one of those files by its long path works by steps from `/`.
        let deepest = expect
            .iter()
            .max_by_key(|p| p.as_os_str().len())
            .expect("one");
        assert!(is_long(deepest));
        assert!(open_file_long(deepest).is_ok());
        // Clean up by descriptor: remove_dir_all cannot take such paths everywhere.
        drop(fd);
    }

    #[test]
    fn a_closed_level_that_vanished_ends_quietly() {
        let t = TestDir::new();
        let name = "n".repeat(100);
        let mut p = t.path().join("x");
        fs::create_dir(&p).expect("mkdir");
        for _ in 0..(OPEN_LEVELS + 4) {
            p.push(&name);
            fs::create_dir(&p).expect("mkdir");
        }
        fs::write(t.path().join("x/late.php"), b"x").expect("write");
        fs::write(t.path().join("kept.php"), b"x").expect("write");
        let mut v = Collect::default();
        let fd = open_dir_beneath(t.path(), t.path()).expect("top");
        let mut w = Walk::start(t.path().to_path_buf(), fd, &mut v).expect("start");
        // Down to the deepest level (its ancestors' descriptors are closed by now), then
        // remove the whole branch: neither `..` nor the names lead back to it.
        while w.depth() < OPEN_LEVELS + 6 {
            assert!(!w.step(1, &mut v));
        }
        fs::remove_dir_all(t.path().join("x")).expect("rm");
        w.run(&mut v);
        assert_eq!(w.depth(), 0);
        assert_eq!(v.errors, 0, "vanished directories are not errors");
        assert!(v.stack.is_empty(), "every entered level was left");
        assert!(!v.files.contains(&t.path().join("x/late.php")));
    }
}
