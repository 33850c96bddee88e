//! `sys::dir`: the one way the daemon opens, reads, creates, moves and chowns inside trees
//! that users control (web roots, home directories, mail spools). Outside this module, raw
//! path-taking calls (`File::open`, `OpenOptions::open`, `create_dir_all`, `rename`, ...) are
//! refused by clippy (`clippy.toml`); daemon-owned paths go through `fsutil` (which builds
//! on this module; `sys` does not import it).
//!
//! Guarantees:
//! - Everything happens relative to an open directory ([`Dir`]). A name is one path
//!   component: never empty, `.`, `..` or containing `/`.
//! - **Beneath a directory nothing follows a symlink.** A relative path is resolved with
//!   `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where the kernel has it (Linux 5.6+),
//!   otherwise one component at a time with `openat(O_NOFOLLOW | O_DIRECTORY)`. A refusal
//!   names the component ([`Error::Symlink`], [`Error::NotDirectory`]).
//! - **A base directory** is reached either by a path the daemon or the operator chose
//!   ([`Dir::open_daemon`]: state directory, quarantine directory) or from `/` with
//!   [`Dir::walk_trusted`], which follows a symlink only when root or the daemon's own user
//!   owns it (hosts often have `/home -> /data/home`), resolving its target by the same rule
//!   (at most 40 links). [`open_regular_trusted`] opens a file at an absolute path that way
//!   (the content scan, the checks' reads): one `openat2(RESOLVE_NO_SYMLINKS)` when the path
//!   has no symlink at all, the component walk otherwise.
//! - **A file is read only when it is a regular file**: it is first opened with `O_PATH |
//!   O_NOFOLLOW` (no device is opened, no FIFO is waited on), checked with `fstat`, then
//!   reopened for reading through `/proc/self/fd` (the same inode, whatever happened to the
//!   name meanwhile). Without `/proc` the name is opened `O_NONBLOCK | O_NOFOLLOW` and must be
//!   the inode checked.
//! - **Creation** uses `O_CREAT | O_EXCL | O_NOFOLLOW` and `mkdirat`; owner and mode are set
//!   through the new descriptor (`fchown`, `fchmod`), never by path.
//! - **Moves** ([`move_file`]) never replace: `renameat2(RENAME_NOREPLACE)`, or across
//!   filesystems copy + `fsync` + owner, mode and times of the source + rename into place +
//!   unlink of the source; a source that changes while copied is left in place
//!   ([`Error::Changed`]).
//! - **Descents** ([`Descent`]) hold every directory of a path open, can create the missing
//!   ones (with an owner) and can check afterwards that every component still names the
//!   directory that was used, so a caller can undo work a swapped directory would have sent
//!   elsewhere.
//! - Paths in error messages are escaped with `crate::text::escape_path` (no control or
//!   bidirectional characters reach a terminal or a log line).

#![allow(
    clippy::disallowed_methods,
    reason = "sys::dir implements the safe file operations; the raw calls it wraps live here"
)]

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, RenameFlags, ResolveFlag};
use nix::sys::stat::{FileStat, Mode};
use nix::sys::time::TimeSpec;
use nix::unistd::{Gid, Uid, UnlinkatFlags};

use crate::text::escape_path;

mod sole;
pub use sole::{refusal_of, refusals, Refusal, SoleOwner};

/// Symlinks followed at most by [`Dir::walk_trusted`] (the kernel's own limit).
pub const MAX_LINKS: usize = 40;

/// Why an operation was refused or failed. Paths are shown escaped.
#[derive(Debug)]
pub enum Error {
    /// A component is a symlink; nothing beneath a base directory follows one.
    Symlink {
        path: PathBuf,
    },
    /// A symlink on the way to a base directory is owned by a user who is neither root nor
    /// the daemon.
    UntrustedSymlink {
        path: PathBuf,
        uid: u32,
    },
    /// A component that must be a directory is something else.
    NotDirectory {
        path: PathBuf,
    },
    /// A file that must be a regular file is a FIFO, device, socket, directory or symlink.
    NotRegular {
        path: PathBuf,
        kind: Kind,
    },
    NotFound {
        path: PathBuf,
    },
    /// The target of a creation or a move exists (nothing is ever replaced).
    Exists {
        path: PathBuf,
    },
    /// Not a usable path (absolute where a relative one is needed, `..`, empty, ...).
    InvalidPath {
        path: PathBuf,
        why: &'static str,
    },
    /// Something changed under the operation: a component was replaced, a file was modified
    /// while copied. `what` says what was seen.
    Changed {
        path: PathBuf,
        what: &'static str,
    },
    /// More than [`MAX_LINKS`] symlinks on the way to a base directory.
    TooManyLinks {
        path: PathBuf,
    },
    /// The file is not the site's alone (other hard links, another owner): see [`sole`].
    Refused {
        path: PathBuf,
        refusal: Refusal,
    },
    /// Any other system error, with the operation that failed.
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

impl Error {
    /// The closest `io::ErrorKind`.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            Error::Symlink { .. } | Error::UntrustedSymlink { .. } => {
                io::ErrorKind::PermissionDenied
            }
            Error::NotDirectory { .. } | Error::NotRegular { .. } | Error::InvalidPath { .. } => {
                io::ErrorKind::InvalidInput
            }
            Error::NotFound { .. } => io::ErrorKind::NotFound,
            Error::Refused { .. } => io::ErrorKind::PermissionDenied,
            Error::Exists { .. } => io::ErrorKind::AlreadyExists,
            Error::Changed { .. } | Error::TooManyLinks { .. } => io::ErrorKind::Other,
            Error::Io { source, .. } => source.kind(),
        }
    }

    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Error::Symlink { path }
            | Error::UntrustedSymlink { path, .. }
            | Error::NotDirectory { path }
            | Error::NotRegular { path, .. }
            | Error::NotFound { path }
            | Error::Exists { path }
            | Error::InvalidPath { path, .. }
            | Error::Changed { path, .. }
            | Error::TooManyLinks { path }
            | Error::Refused { path, .. }
            | Error::Io { path, .. } => path,
        }
    }

    /// The system error number, for [`Error::Io`].
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    fn io(op: &'static str, path: PathBuf, e: Errno) -> Error {
        match e {
            Errno::ENOENT => Error::NotFound { path },
            Errno::EEXIST => Error::Exists { path },
            e => Error::Io {
                op,
                path,
                source: io::Error::from(e),
            },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = escape_path(self.path());
        match self {
            Error::Symlink { .. } => write!(f, "{p} is a symlink (not followed)"),
            Error::UntrustedSymlink { uid, .. } => write!(
                f,
                "{p} is a symlink owned by uid {uid} (only root's and the daemon's symlinks are followed)"
            ),
            Error::NotDirectory { .. } => write!(f, "{p} is not a directory"),
            Error::NotRegular { kind, .. } => {
                write!(f, "{p} is a {}, not a regular file", kind.name())
            }
            Error::NotFound { .. } => write!(f, "{p} does not exist"),
            Error::Exists { .. } => write!(f, "{p} already exists"),
            Error::InvalidPath { why, .. } => write!(f, "{p}: {why}"),
            Error::Changed { what, .. } => write!(f, "{p} {what}"),
            Error::TooManyLinks { .. } => {
                write!(f, "{p}: more than {MAX_LINKS} symlinks to follow")
            }
            Error::Refused { refusal, .. } => write!(f, "{p}: {refusal}"),
            Error::Io { op, source, .. } => write!(f, "cannot {op} {p}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        io::Error::new(e.kind(), e)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// The type of a file, from its mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    Unknown,
}

impl Kind {
    fn from_mode(mode: u32) -> Kind {
        match mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            libc::S_IFIFO => Kind::Fifo,
            libc::S_IFSOCK => Kind::Socket,
            libc::S_IFCHR => Kind::CharDevice,
            libc::S_IFBLK => Kind::BlockDevice,
            _ => Kind::Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::File => "regular file",
            Kind::Dir => "directory",
            Kind::Symlink => "symlink",
            Kind::Fifo => "FIFO",
            Kind::Socket => "socket",
            Kind::CharDevice => "character device",
            Kind::BlockDevice => "block device",
            Kind::Unknown => "file of unknown type",
        }
    }
}

/// What `stat` says about a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileInfo {
    pub kind: Kind,
    pub dev: u64,
    pub ino: u64,
    pub uid: u32,
    pub gid: u32,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub size: u64,
    pub nlink: u64,
    /// (seconds, nanoseconds)
    pub atime: (i64, i64),
    pub mtime: (i64, i64),
    /// Inode change time (seconds, nanoseconds): moves on every write, chmod or chown, and
    /// cannot be set back by the file's owner.
    pub ctime: (i64, i64),
}

impl FileInfo {
    fn from_stat(st: &FileStat) -> FileInfo {
        FileInfo {
            kind: Kind::from_mode(st.st_mode),
            dev: st.st_dev,
            ino: st.st_ino,
            uid: st.st_uid,
            gid: st.st_gid,
            mode: st.st_mode & 0o7777,
            size: u64::try_from(st.st_size).unwrap_or(0),
            nlink: st.st_nlink,
            atime: (st.st_atime, st.st_atime_nsec),
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
        }
    }

    /// `fstat` of an open file or directory.
    pub fn of(fd: &impl AsFd) -> io::Result<FileInfo> {
        nix::sys::stat::fstat(fd.as_fd().as_raw_fd())
            .map(|st| FileInfo::from_stat(&st))
            .map_err(io::Error::from)
    }

    /// Same device and inode.
    pub fn same_inode(&self, other: &FileInfo) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino)
    }
}

/// Owner, permission bits and times to give a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attrs {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
    pub atime: (i64, i64),
    pub mtime: (i64, i64),
}

impl Attrs {
    pub fn of(info: &FileInfo) -> Attrs {
        Attrs {
            uid: info.uid,
            gid: info.gid,
            mode: info.mode,
            atime: info.atime,
            mtime: info.mtime,
        }
    }
}

/// Gives an open file `a`'s owner, mode and times (owner first: `chown` clears set-id bits,
/// which the mode then restores).
pub fn set_attrs(f: &impl AsFd, a: &Attrs) -> io::Result<()> {
    set_owner(f, a.uid, a.gid)?;
    set_mode(f, a.mode)?;
    set_times(f, a.atime, a.mtime)
}

/// `fchown` of an open file.
pub fn set_owner(f: &impl AsFd, uid: u32, gid: u32) -> io::Result<()> {
    nix::unistd::fchown(
        f.as_fd().as_raw_fd(),
        Some(Uid::from_raw(uid)),
        Some(Gid::from_raw(gid)),
    )
    .map_err(io::Error::from)
}

/// `fchmod` of an open file (exact bits, whatever the umask).
pub fn set_mode(f: &impl AsFd, mode: u32) -> io::Result<()> {
    nix::sys::stat::fchmod(
        f.as_fd().as_raw_fd(),
        Mode::from_bits_truncate(mode & 0o7777),
    )
    .map_err(io::Error::from)
}

/// `futimens` of an open file: (seconds, nanoseconds) for access and modification.
pub fn set_times(f: &impl AsFd, atime: (i64, i64), mtime: (i64, i64)) -> io::Result<()> {
    nix::sys::stat::futimens(
        f.as_fd().as_raw_fd(),
        &TimeSpec::new(atime.0, atime.1),
        &TimeSpec::new(mtime.0, mtime.1),
    )
    .map_err(io::Error::from)
}

fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful open call of this module and is not
    // owned by anything else; the OwnedFd becomes its only owner and closes it once.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Whether a symlink owned by `uid` may be followed on the way to a base directory.
fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == Uid::effective().as_raw()
}

/// A single path component, or an error.
fn check_name<'a>(dir: &Path, name: &'a OsStr) -> Result<&'a OsStr> {
    let b = name.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') || b.contains(&0) {
        return Err(Error::InvalidPath {
            path: dir.join(name),
            why: "not a single path component",
        });
    }
    Ok(name)
}

/// The components of a relative path without `.`/`..` (empty for `""` or `"."`).
fn rel_names(rel: &Path) -> Result<Vec<&OsStr>> {
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => {
                return Err(Error::InvalidPath {
                    path: rel.to_path_buf(),
                    why: "not a relative path without `..`",
                })
            }
        }
    }
    Ok(out)
}

// 0: not tried yet, 1: available, 2: missing (ENOSYS).
static OPENAT2: AtomicU8 = AtomicU8::new(0);

#[cfg(test)]
thread_local! {
    static NO_OPENAT2: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Makes this thread resolve component by component, as on kernels without `openat2`.
#[cfg(test)]
pub(crate) fn disable_openat2_on_this_thread(off: bool) {
    NO_OPENAT2.with(|c| c.set(off));
}

/// `openat2` relative to `dir` (`None`: the current directory, for absolute paths), or
/// `None` when the kernel does not have it.
fn openat2(
    dir: Option<BorrowedFd<'_>>,
    path: &Path,
    flags: OFlag,
    resolve: ResolveFlag,
) -> Option<std::result::Result<OwnedFd, Errno>> {
    #[cfg(test)]
    if NO_OPENAT2.with(|c| c.get()) {
        return None;
    }
    if OPENAT2.load(Ordering::Relaxed) == 2 {
        return None;
    }
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .resolve(resolve);
    let dirfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    match nix::fcntl::openat2(dirfd, path, how) {
        Err(Errno::ENOSYS) => {
            OPENAT2.store(2, Ordering::Relaxed);
            None
        }
        r => {
            OPENAT2.store(1, Ordering::Relaxed);
            Some(r.map(owned))
        }
    }
}

fn openat(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    flags: OFlag,
    mode: u32,
) -> std::result::Result<OwnedFd, Errno> {
    nix::fcntl::openat(
        Some(dir.as_raw_fd()),
        name,
        flags | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(mode),
    )
    .map(owned)
}

const DIR_FLAGS: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW);
const NO_LINKS: ResolveFlag = ResolveFlag::RESOLVE_BENEATH
    .union(ResolveFlag::RESOLVE_NO_SYMLINKS)
    .union(ResolveFlag::RESOLVE_NO_MAGICLINKS);

/// Reopens an `O_PATH` descriptor of a regular file for reading, through `/proc/self/fd`;
/// `None` when `/proc` is not mounted.
fn reopen_for_read(pfd: &OwnedFd) -> Option<std::result::Result<File, Errno>> {
    let proc = format!("/proc/self/fd/{}", pfd.as_raw_fd());
    let base = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
    let open = |flags| nix::fcntl::open(proc.as_str(), flags, Mode::empty()).map(owned);
    let r = match open(base | OFlag::O_NOATIME) {
        Err(Errno::EPERM) => open(base),
        r => r,
    };
    match r {
        Err(Errno::ENOENT) if !Path::new("/proc/self/fd").exists() => None,
        r => Some(r.map(File::from)),
    }
}

/// An open directory (`O_DIRECTORY`), the base of every operation. `path` is how it was
/// reached, for messages.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A directory entry: its name and, when the filesystem reports it, its type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: OsString,
    pub kind: Option<Kind>,
}

impl Dir {
    /// A directory at a path the daemon or the operator chose (the state directory, the
    /// quarantine directory, a configured directory of rule files). The path is resolved
    /// like any path (symlinks followed): never use it for a path a user can influence.
    pub fn open_daemon(path: &Path) -> Result<Dir> {
        let fd = nix::fcntl::open(
            path,
            DIR_FLAGS.difference(OFlag::O_NOFOLLOW) | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::ENOTDIR => Error::NotDirectory {
                path: path.to_path_buf(),
            },
            e => Error::io("open", path.to_path_buf(), e),
        })?;
        Ok(Dir {
            fd: owned(fd),
            path: path.to_path_buf(),
        })
    }

    /// Creates the daemon-owned directory `path` and its missing parents (parents 0755, the
    /// directory itself `mode`, exactly), or opens it when it exists; either way its mode
    /// becomes `mode`. Like [`Dir::open_daemon`], for paths the daemon or operator chose.
    pub fn create_daemon(path: &Path, mode: u32) -> Result<Dir> {
        let dir = match Dir::open_daemon(path) {
            Ok(d) => d,
            Err(Error::NotFound { .. }) => {
                let (parent, name) = match (path.parent(), path.file_name()) {
                    (Some(p), Some(n)) => (p, n),
                    _ => {
                        return Err(Error::InvalidPath {
                            path: path.to_path_buf(),
                            why: "cannot create this directory",
                        })
                    }
                };
                let parent = if parent.as_os_str().is_empty() {
                    Dir::open_daemon(Path::new("."))?
                } else {
                    Dir::create_daemon_parent(parent)?
                };
                match parent.mkdir(name, mode, None) {
                    Ok(d) => d,
                    Err(Error::Exists { .. }) => Dir::open_daemon(path)?,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        set_mode(&dir, mode).map_err(|source| Error::Io {
            op: "chmod",
            path: path.to_path_buf(),
            source,
        })?;
        Ok(dir)
    }

    fn create_daemon_parent(path: &Path) -> Result<Dir> {
        match Dir::open_daemon(path) {
            Err(Error::NotFound { .. }) => {}
            r => return r,
        }
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Dir::open_daemon(path);
        };
        let parent = if parent.as_os_str().is_empty() {
            Dir::open_daemon(Path::new("."))?
        } else {
            Dir::create_daemon_parent(parent)?
        };
        match parent.mkdir(name, 0o755, None) {
            Err(Error::Exists { .. }) => Dir::open_daemon(path),
            r => r,
        }
    }

    /// Opens the absolute directory `path` from `/`, one component at a time, following a
    /// symlink only when root or the daemon's user owns it (its target is resolved by the
    /// same rule). Use it to reach a configured root (a web root, a spool) that may sit below
    /// user-owned directories.
    pub fn walk_trusted(path: &Path) -> Result<Dir> {
        resolve_trusted(path, false).map(|(dir, _)| dir)
    }

    /// The path this directory was reached by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A second handle on the same directory.
    pub fn try_clone(&self) -> Result<Dir> {
        Ok(Dir {
            fd: self.fd.try_clone().map_err(|source| Error::Io {
                op: "duplicate",
                path: self.path.clone(),
                source,
            })?,
            path: self.path.clone(),
        })
    }

    /// `fstat` of this directory.
    pub fn info(&self) -> Result<FileInfo> {
        FileInfo::of(&self.fd).map_err(|source| Error::Io {
            op: "stat",
            path: self.path.clone(),
            source,
        })
    }

    /// `lstat` of `name` in this directory; `None` when it does not exist.
    pub fn lstat(&self, name: &OsStr) -> Result<Option<FileInfo>> {
        check_name(&self.path, name)?;
        match nix::sys::stat::fstatat(
            Some(self.fd.as_raw_fd()),
            name,
            AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => Ok(Some(FileInfo::from_stat(&st))),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(Error::io("stat", self.path.join(name), e)),
        }
    }

    /// Why opening `name` as a directory failed with `e`, naming the component.
    fn explain_dir(&self, name: &OsStr, e: Errno) -> Error {
        let path = self.path.join(name);
        match e {
            Errno::ELOOP | Errno::ENOTDIR | Errno::EXDEV => match self.lstat(name) {
                Ok(Some(i)) if i.kind == Kind::Symlink => Error::Symlink { path },
                Ok(Some(i)) if i.kind != Kind::Dir => Error::NotDirectory { path },
                // A directory again by now: the name was swapped while being opened.
                Ok(Some(_)) => Error::Changed {
                    path,
                    what: "was swapped while being opened (a symlink or a file a moment before)",
                },
                _ => Error::io("open", path, e),
            },
            e => Error::io("open", path, e),
        }
    }

    /// Opens the subdirectory `name`, refusing a symlink.
    pub fn child(&self, name: &OsStr) -> Result<Dir> {
        check_name(&self.path, name)?;
        let r = match openat2(Some(self.as_fd()), Path::new(name), DIR_FLAGS, NO_LINKS) {
            Some(r) => r,
            None => openat(self.as_fd(), name, DIR_FLAGS, 0),
        };
        match r {
            Ok(fd) => Ok(Dir {
                fd,
                path: self.path.join(name),
            }),
            Err(e) => Err(self.explain_dir(name, e)),
        }
    }

    /// Opens the directory `rel` beneath this one without following any symlink and without
    /// leaving this directory. `""` opens this directory again.
    pub fn open_beneath(&self, rel: &Path) -> Result<Dir> {
        let names = rel_names(rel)?;
        let Some((first, rest)) = names.split_first() else {
            return self.try_clone();
        };
        if !rest.is_empty() {
            if let Some(Ok(fd)) = openat2(Some(self.as_fd()), rel, DIR_FLAGS, NO_LINKS) {
                return Ok(Dir {
                    fd,
                    path: self.path.join(rel),
                });
            }
        }
        // One component at a time: without openat2, or to name the component it refused.
        let mut cur = self.child(first)?;
        for n in rest {
            cur = cur.child(n)?;
        }
        Ok(cur)
    }

    /// Opens the regular file `name` for reading (see the module guarantees): a symlink,
    /// FIFO, device, socket or directory is refused with [`Error::NotRegular`] without being
    /// opened.
    pub fn open_regular(&self, name: &OsStr) -> Result<File> {
        check_name(&self.path, name)?;
        let path = self.path.join(name);
        let pfd = openat(self.as_fd(), name, OFlag::O_PATH | OFlag::O_NOFOLLOW, 0)
            .map_err(|e| Error::io("open", path.clone(), e))?;
        regular_from_opath(pfd, path, Some((self, name)))
    }

    /// Opens the regular file `rel` beneath this directory for reading: no component is a
    /// symlink and the file is checked as in [`Dir::open_regular`].
    pub fn open_regular_beneath(&self, rel: &Path) -> Result<File> {
        let names = rel_names(rel)?;
        let Some((name, parents)) = names.split_last() else {
            return Err(Error::InvalidPath {
                path: self.path.join(rel),
                why: "no file name",
            });
        };
        if !parents.is_empty() {
            let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW;
            if let Some(Ok(pfd)) = openat2(Some(self.as_fd()), rel, flags, NO_LINKS) {
                if let Some(r) = try_regular_from_opath(&pfd, &self.path.join(rel)) {
                    return r;
                }
            }
        }
        let parent: PathBuf = parents.iter().collect();
        self.open_beneath(&parent)?.open_regular(name)
    }

    /// Creates the new file `name` (`O_EXCL`, never through a symlink), open for reading and
    /// writing, with exactly `mode`.
    pub fn create_file(&self, name: &OsStr, mode: u32) -> Result<File> {
        check_name(&self.path, name)?;
        let path = self.path.join(name);
        let fd = openat(
            self.as_fd(),
            name,
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW,
            mode & 0o7777,
        )
        .map_err(|e| Error::io("create", path.clone(), e))?;
        let f = File::from(fd);
        set_mode(&f, mode).map_err(|source| Error::Io {
            op: "chmod",
            path,
            source,
        })?;
        Ok(f)
    }

    /// Creates the directory `name` with exactly `mode` (and `owner`, set through the new
    /// descriptor) and opens it.
    pub fn mkdir(&self, name: &OsStr, mode: u32, owner: Option<(u32, u32)>) -> Result<Dir> {
        check_name(&self.path, name)?;
        let path = self.path.join(name);
        nix::sys::stat::mkdirat(
            Some(self.fd.as_raw_fd()),
            name,
            Mode::from_bits_truncate(mode & 0o7777),
        )
        .map_err(|e| Error::io("create directory", path.clone(), e))?;
        let dir = self.child(name)?;
        let io = |op, source| Error::Io {
            op,
            path: path.clone(),
            source,
        };
        if let Some((uid, gid)) = owner {
            set_owner(&dir, uid, gid).map_err(|e| io("chown", e))?;
        }
        set_mode(&dir, mode).map_err(|e| io("chmod", e))?;
        Ok(dir)
    }

    /// Renames `name` to `to/to_name`; fails with [`Error::Exists`] instead of replacing.
    pub fn rename_noreplace(&self, name: &OsStr, to: &Dir, to_name: &OsStr) -> Result<()> {
        self.rename(name, to, to_name, RenameFlags::RENAME_NOREPLACE)
    }

    /// Renames `name` to `to/to_name`, replacing what is there (for atomic replacement of a
    /// file the daemon owns).
    pub fn rename_replace(&self, name: &OsStr, to: &Dir, to_name: &OsStr) -> Result<()> {
        self.rename(name, to, to_name, RenameFlags::empty())
    }

    fn rename(&self, name: &OsStr, to: &Dir, to_name: &OsStr, flags: RenameFlags) -> Result<()> {
        check_name(&self.path, name)?;
        check_name(&to.path, to_name)?;
        nix::fcntl::renameat2(
            Some(self.fd.as_raw_fd()),
            name,
            Some(to.fd.as_raw_fd()),
            to_name,
            flags,
        )
        .map_err(|e| match e {
            Errno::EEXIST => Error::Exists {
                path: to.path.join(to_name),
            },
            e => Error::io("rename", self.path.join(name), e),
        })
    }

    /// Removes the non-directory `name`.
    pub fn unlink(&self, name: &OsStr) -> Result<()> {
        check_name(&self.path, name)?;
        nix::unistd::unlinkat(Some(self.fd.as_raw_fd()), name, UnlinkatFlags::NoRemoveDir)
            .map_err(|e| Error::io("remove", self.path.join(name), e))
    }

    /// Removes the empty directory `name`.
    pub fn rmdir(&self, name: &OsStr) -> Result<()> {
        check_name(&self.path, name)?;
        nix::unistd::unlinkat(Some(self.fd.as_raw_fd()), name, UnlinkatFlags::RemoveDir)
            .map_err(|e| Error::io("remove directory", self.path.join(name), e))
    }

    /// Makes creations, renames and removals in this directory durable (`fsync`).
    pub fn sync(&self) -> Result<()> {
        nix::unistd::fsync(self.fd.as_raw_fd()).map_err(|e| Error::io("sync", self.path.clone(), e))
    }

    /// The entries of this directory (without `.` and `..`), in the order the filesystem
    /// returns them, at most `limit`; the flag is true when entries were left out.
    pub fn entries(&self, limit: usize) -> Result<(Vec<Entry>, bool)> {
        let io = |e| Error::io("read directory", self.path.clone(), e);
        // A fresh descriptor of the same directory: its own read position.
        let fd = openat(self.as_fd(), OsStr::new("."), DIR_FLAGS, 0).map_err(io)?;
        let mut d = nix::dir::Dir::from(fd).map_err(io)?;
        let mut out = Vec::new();
        for e in d.iter() {
            let e = e.map_err(io)?;
            let name = e.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if out.len() >= limit {
                return Ok((out, true));
            }
            let kind = e.file_type().map(|t| match t {
                nix::dir::Type::File => Kind::File,
                nix::dir::Type::Directory => Kind::Dir,
                nix::dir::Type::Symlink => Kind::Symlink,
                nix::dir::Type::Fifo => Kind::Fifo,
                nix::dir::Type::Socket => Kind::Socket,
                nix::dir::Type::CharacterDevice => Kind::CharDevice,
                nix::dir::Type::BlockDevice => Kind::BlockDevice,
            });
            out.push(Entry {
                name: OsStr::from_bytes(name).to_os_string(),
                kind,
            });
        }
        Ok((out, false))
    }
}

/// Checks that an `O_PATH` descriptor is a regular file and reopens it for reading. With
/// `fallback` (the directory and name it was opened by), works without `/proc` too.
fn regular_from_opath(
    pfd: OwnedFd,
    path: PathBuf,
    fallback: Option<(&Dir, &OsStr)>,
) -> Result<File> {
    if let Some(r) = try_regular_from_opath(&pfd, &path) {
        return r;
    }
    let Some((dir, name)) = fallback else {
        return Err(Error::Io {
            op: "reopen",
            path,
            source: io::Error::new(io::ErrorKind::NotFound, "/proc is not mounted"),
        });
    };
    // No /proc: open the name itself (never blocking, never a controlling terminal) and
    // check it is the inode that was checked.
    let before = FileInfo::of(&pfd).map_err(|source| Error::Io {
        op: "stat",
        path: path.clone(),
        source,
    })?;
    let fd = openat(
        dir.as_fd(),
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY,
        0,
    )
    .map_err(|e| Error::io("open", path.clone(), e))?;
    let f = File::from(fd);
    let now = FileInfo::of(&f).map_err(|source| Error::Io {
        op: "stat",
        path: path.clone(),
        source,
    })?;
    if !now.same_inode(&before) {
        return Err(Error::Changed {
            path,
            what: "was replaced while being opened",
        });
    }
    Ok(f)
}

/// `None` when `/proc` is missing (the caller falls back); otherwise the opened file or why
/// it was refused.
fn try_regular_from_opath(pfd: &OwnedFd, path: &Path) -> Option<Result<File>> {
    let info = match FileInfo::of(pfd) {
        Ok(i) => i,
        Err(source) => {
            return Some(Err(Error::Io {
                op: "stat",
                path: path.to_path_buf(),
                source,
            }))
        }
    };
    if info.kind != Kind::File {
        return Some(Err(Error::NotRegular {
            path: path.to_path_buf(),
            kind: info.kind,
        }));
    }
    reopen_for_read(pfd).map(|r| r.map_err(|e| Error::io("open", path.to_path_buf(), e)))
}

/// Resolves the absolute `path` from `/` by the trusted-symlink rule of
/// [`Dir::walk_trusted`]. Returns the directory reached and, with `split_last`, the last
/// component unresolved (`None` when the path is `/`).
fn resolve_trusted(path: &Path, split_last: bool) -> Result<(Dir, Option<OsString>)> {
    let invalid = |why| Error::InvalidPath {
        path: path.to_path_buf(),
        why,
    };
    let mut comps = path.components();
    if comps.next() != Some(Component::RootDir) {
        return Err(invalid("not an absolute path"));
    }
    let mut todo: std::collections::VecDeque<OsString> = std::collections::VecDeque::new();
    for c in comps {
        match c {
            Component::Normal(n) => todo.push_back(n.to_os_string()),
            Component::CurDir => {}
            _ => return Err(invalid("path has `..` components")),
        }
    }
    let root = || Dir::open_daemon(Path::new("/"));
    let mut stack: Vec<Dir> = vec![root()?];
    let mut links = 0usize;
    while let Some(name) = todo.pop_front() {
        match name.as_bytes() {
            b"." => continue,
            b".." => {
                if stack.len() > 1 {
                    stack.pop();
                }
                continue;
            }
            _ => {}
        }
        let cur = stack
            .last()
            .ok_or_else(|| invalid("empty resolution stack"))?;
        if split_last && todo.is_empty() {
            // The last component, whatever it is: the caller decides how to open it.
            let dir = stack
                .pop()
                .ok_or_else(|| invalid("empty resolution stack"))?;
            return Ok((dir, Some(name)));
        }
        let next = match cur.child(&name) {
            Ok(d) => d,
            Err(Error::Symlink { path: link }) => {
                let info = cur
                    .lstat(&name)?
                    .ok_or(Error::NotFound { path: link.clone() })?;
                if !trusted_owner(info.uid) {
                    return Err(Error::UntrustedSymlink {
                        path: link,
                        uid: info.uid,
                    });
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(Error::TooManyLinks {
                        path: path.to_path_buf(),
                    });
                }
                let target = nix::fcntl::readlinkat(Some(cur.fd.as_raw_fd()), name.as_os_str())
                    .map_err(|e| Error::io("read link", link.clone(), e))?;
                let target = PathBuf::from(target);
                let mut prefix = Vec::new();
                for c in target.components() {
                    match c {
                        Component::RootDir => {
                            stack.truncate(1);
                            prefix.clear();
                        }
                        Component::Normal(n) => prefix.push(n.to_os_string()),
                        Component::ParentDir => prefix.push(OsString::from("..")),
                        Component::CurDir | Component::Prefix(_) => {}
                    }
                }
                for n in prefix.into_iter().rev() {
                    todo.push_front(n);
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        stack.push(next);
    }
    let dir = stack
        .pop()
        .ok_or_else(|| invalid("empty resolution stack"))?;
    Ok((dir, None))
}

/// Opens the regular file at the absolute `path` for reading, reaching its directory from
/// `/` by the trusted-symlink rule ([`Dir::walk_trusted`]). The last component is never a
/// symlink unless `follow_last` is set and root or the daemon owns the link. FIFOs, devices,
/// sockets and directories are refused without being opened ([`Error::NotRegular`]).
/// Relative paths are taken from the current directory.
pub fn open_regular_trusted(path: &Path, follow_last: bool) -> Result<File> {
    let abs;
    let path = if path.is_absolute() {
        path
    } else {
        let cwd = std::env::current_dir().map_err(|source| Error::Io {
            op: "resolve",
            path: path.to_path_buf(),
            source,
        })?;
        abs = cwd.join(path);
        abs.as_path()
    };
    // Fast path: no symlink anywhere on the way (the common case), one system call.
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW;
    if let Some(Ok(pfd)) = openat2(None, path, flags, ResolveFlag::RESOLVE_NO_SYMLINKS) {
        // With O_PATH | O_NOFOLLOW a symlink at the end is returned itself: the slow path
        // decides about it.
        let last_is_link = FileInfo::of(&pfd).is_ok_and(|i| i.kind == Kind::Symlink);
        if !last_is_link {
            if let Some(r) = try_regular_from_opath(&pfd, path) {
                return r;
            }
        }
    }
    let mut target = path.to_path_buf();
    for _ in 0..=MAX_LINKS {
        let (dir, name) = resolve_trusted(&target, true)?;
        let Some(name) = name else {
            return Err(Error::NotRegular {
                path: target,
                kind: Kind::Dir,
            });
        };
        match dir.lstat(&name)? {
            Some(i) if i.kind == Kind::Symlink => {
                let link = dir.path.join(&name);
                if !follow_last {
                    return Err(Error::Symlink { path: link });
                }
                if !trusted_owner(i.uid) {
                    return Err(Error::UntrustedSymlink {
                        path: link,
                        uid: i.uid,
                    });
                }
                let t = nix::fcntl::readlinkat(Some(dir.fd.as_raw_fd()), name.as_os_str())
                    .map_err(|e| Error::io("read link", link.clone(), e))?;
                target = dir.path.join(t);
                // `..` in a link target is resolved lexically against the link's directory,
                // which was reached by the trusted rule.
                target = lexical(&target);
            }
            _ => return dir.open_regular(&name),
        }
    }
    Err(Error::TooManyLinks {
        path: path.to_path_buf(),
    })
}

/// `path` with `.` and `..` removed lexically (`/a/b/../c` = `/a/c`).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// How [`move_file`] moved a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoveMethod {
    /// Same filesystem: the inode itself was renamed.
    Rename,
    /// Across filesystems: copied, synced, given the source's owner, mode and times, renamed
    /// into place; the source was then unlinked.
    Copy,
}

/// The outcome of [`move_file`].
#[derive(Debug)]
pub struct Moved {
    pub method: MoveMethod,
    /// The source as it was before the move.
    pub before: FileInfo,
    /// The moved file, open (for reading; the copy also for writing). Its owner and mode can
    /// be changed through it.
    pub file: File,
}

/// Moves the regular file `from/name` to `to/to_name`, never replacing anything there,
/// keeping owner, mode and times (see the module guarantees). With `expect` (device, inode),
/// `name` must still be that file. Works within one directory, across directories and across
/// filesystems.
pub fn move_file(
    from: &Dir,
    name: &OsStr,
    to: &Dir,
    to_name: &OsStr,
    expect: Option<(u64, u64)>,
) -> Result<Moved> {
    move_sole_file(from, name, to, to_name, expect, None)
}

/// [`move_file`]; with `sole`, the opened file must pass it (checked on the descriptor
/// before the move: [`Error::Refused`]).
pub fn move_sole_file(
    from: &Dir,
    name: &OsStr,
    to: &Dir,
    to_name: &OsStr,
    expect: Option<(u64, u64)>,
    sole: Option<SoleOwner>,
) -> Result<Moved> {
    let src_path = from.path.join(name);
    let src = from.open_regular(name)?;
    let before = FileInfo::of(&src).map_err(|source| Error::Io {
        op: "stat",
        path: src_path.clone(),
        source,
    })?;
    if expect.is_some_and(|e| e != (before.dev, before.ino)) {
        return Err(Error::Changed {
            path: src_path,
            what: "was replaced by another file",
        });
    }
    if let Some(Err(refusal)) = sole.map(|s| s.check(&before)) {
        return Err(Error::Refused {
            path: src_path,
            refusal,
        });
    }
    match from.rename_noreplace(name, to, to_name) {
        Ok(()) => {
            // The name may have been swapped between the open and the rename: what was
            // moved must be the file checked, else it goes back (a regular file only: a
            // symlink or directory put at `to_name` meanwhile is never carried into `from`).
            let moved = to.lstat(to_name)?;
            if moved.is_none_or(|m| !m.same_inode(&before)) {
                if moved.is_some_and(|m| m.kind == Kind::File) {
                    let _ = to.rename_noreplace(to_name, from, name);
                }
                return Err(Error::Changed {
                    path: src_path,
                    what: "was replaced while being moved",
                });
            }
            // Durability of both directory entries; the move itself has happened, so a
            // failure here is reported in the log, not as a failed move.
            for d in [to, from] {
                if let Err(e) = d.sync() {
                    log::warn!("{e}");
                }
            }
            Ok(Moved {
                method: MoveMethod::Rename,
                before,
                file: src,
            })
        }
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            copy_across(from, name, src, before, to, to_name)
        }
        Err(e) => Err(e),
    }
}

fn copy_across(
    from: &Dir,
    name: &OsStr,
    mut src: File,
    before: FileInfo,
    to: &Dir,
    to_name: &OsStr,
) -> Result<Moved> {
    let src_path = from.path.join(name);
    if to.lstat(to_name)?.is_some() {
        return Err(Error::Exists {
            path: to.path.join(to_name),
        });
    }
    let tmp = OsString::from(format!(".svc-move-{}.part", crate::ids::random_hex(8)));
    let tmp_path = to.path.join(&tmp);
    let mut dst = to.create_file(&tmp, 0o600)?;
    let result = (|| -> Result<()> {
        let io = |op, path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { op, path, source }
        };
        io::copy(&mut src, &mut dst).map_err(io("copy", &src_path))?;
        dst.sync_all().map_err(io("sync", &tmp_path))?;
        let after = FileInfo::of(&src).map_err(io("stat", &src_path))?;
        if (after.size, after.mtime) != (before.size, before.mtime) {
            return Err(Error::Changed {
                path: src_path.clone(),
                what: "changed while being copied",
            });
        }
        set_attrs(&dst, &Attrs::of(&before))
            .map_err(io("set owner, mode and times of", &tmp_path))?;
        to.rename_noreplace(&tmp, to, to_name)?;
        to.sync()
    })();
    if let Err(e) = result {
        let _ = to.unlink(&tmp);
        return Err(e);
    }
    // Unlink the source only if the name still is the file copied.
    let still = from.lstat(name)?;
    if still.is_none_or(|s| !s.same_inode(&before)) {
        let _ = to.unlink(to_name);
        let _ = to.sync();
        return Err(Error::Changed {
            path: src_path,
            what: "was replaced while being copied",
        });
    }
    if let Err(e) = from.unlink(name) {
        let _ = to.unlink(to_name);
        let _ = to.sync();
        return Err(e);
    }
    from.sync()?;
    Ok(Moved {
        method: MoveMethod::Copy,
        before,
        file: dst,
    })
}

/// How [`Descent::new`] creates missing directories.
#[derive(Clone, Copy, Debug)]
pub struct Create {
    pub mode: u32,
    pub owner: Option<(u32, u32)>,
}

struct Step {
    name: OsString,
    dir: Dir,
    info: FileInfo,
    created: bool,
}

/// A directory reached from a base through named components, every one held open and
/// remembered (device, inode), so that [`Descent::verify`] can tell afterwards whether a
/// component was swapped, and [`Descent::remove_created`] can undo the directories made.
pub struct Descent {
    root: Dir,
    steps: Vec<Step>,
}

impl Descent {
    /// Descends `rel` beneath `root`, never following a symlink; with `create`, missing
    /// directories are made (never anywhere but beneath `root`). On failure, directories
    /// made so far are removed again.
    pub fn new(root: Dir, rel: &Path, create: Option<Create>) -> Result<Descent> {
        let names = rel_names(rel)?;
        let mut d = Descent {
            root,
            steps: Vec::with_capacity(names.len()),
        };
        for name in names {
            let cur = d.dir();
            let (dir, created) = match (cur.child(name), create) {
                (Ok(dir), _) => (dir, false),
                (Err(Error::NotFound { .. }), Some(c)) => match cur.mkdir(name, c.mode, c.owner) {
                    Ok(dir) => (dir, true),
                    Err(Error::Exists { .. }) => match cur.child(name) {
                        Ok(dir) => (dir, false),
                        Err(e) => {
                            d.remove_created();
                            return Err(e);
                        }
                    },
                    Err(e) => {
                        d.remove_created();
                        return Err(e);
                    }
                },
                (Err(e), _) => {
                    d.remove_created();
                    return Err(e);
                }
            };
            let info = match dir.info() {
                Ok(i) => i,
                Err(e) => {
                    d.remove_created();
                    return Err(e);
                }
            };
            d.steps.push(Step {
                name: name.to_os_string(),
                dir,
                info,
                created,
            });
        }
        Ok(d)
    }

    /// The base directory.
    pub fn root(&self) -> &Dir {
        &self.root
    }

    /// The directory reached (the base for an empty path).
    pub fn dir(&self) -> &Dir {
        self.steps.last().map_or(&self.root, |s| &s.dir)
    }

    /// Checks that every component, from the base down, still names the directory that was
    /// opened; the first one that does not is named in [`Error::Changed`].
    pub fn verify(&self) -> Result<()> {
        let mut parent = &self.root;
        for s in &self.steps {
            let path = s.dir.path.clone();
            match parent.lstat(&s.name)? {
                None => {
                    return Err(Error::Changed {
                        path,
                        what: "was removed or renamed",
                    })
                }
                Some(i) if i.kind == Kind::Symlink => {
                    return Err(Error::Changed {
                        path,
                        what: "was replaced by a symlink",
                    })
                }
                Some(i) if !i.same_inode(&s.info) => {
                    return Err(Error::Changed {
                        path,
                        what: "was replaced by another directory or file",
                    })
                }
                Some(_) => {}
            }
            parent = &s.dir;
        }
        Ok(())
    }

    /// Removes the directories this descent created, deepest first, while they are empty
    /// (through the held parent descriptors: wherever a swap moved them).
    pub fn remove_created(&self) {
        let mut parent = &self.root;
        let mut made: Vec<(&Dir, &Step)> = Vec::new();
        for s in &self.steps {
            if s.created {
                made.push((parent, s));
            }
            parent = &s.dir;
        }
        for (p, s) in made.into_iter().rev() {
            if p.lstat(&s.name)
                .ok()
                .flatten()
                .is_some_and(|i| i.same_inode(&s.info))
            {
                let _ = p.rmdir(&s.name);
            }
        }
    }

    /// Paths of the directories this descent created.
    pub fn created(&self) -> Vec<&Path> {
        self.steps
            .iter()
            .filter(|s| s.created)
            .map(|s| s.dir.path.as_path())
            .collect()
    }
}

#[cfg(test)]
mod tests;
