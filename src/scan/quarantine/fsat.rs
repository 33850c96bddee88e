//! Directory-relative file operations for a root daemon working inside user-owned trees.
//!
//! Paths are walked one component at a time from `/` with `O_NOFOLLOW`, so a symlink that a
//! user plants in the middle of a path (for example `public_html -> /etc`) is refused instead of
//! followed. Symlinks owned by root or by the daemon's own user are trusted and followed (hosts
//! often have `/home -> /data/home`). Files are then opened, renamed and unlinked relative to
//! the opened directory. Without `unsafe`, opening relative to a directory handle goes through
//! `/proc/self/fd/<dir>/<name>`, which resolves to that directory itself; `/proc` must be
//! mounted.

use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{renameat2, AtFlags, RenameFlags};
use nix::sys::stat::{fstatat, mkdirat, FileStat, Mode, SFlag};
use nix::unistd::{fchown, unlinkat, Gid, Uid, UnlinkatFlags};

/// An open directory (`O_DIRECTORY`), the base of `*at` operations.
#[derive(Debug)]
pub(crate) struct Dir {
    file: File,
    path: PathBuf,
}

/// Whether a symlink owned by `uid` may be followed.
fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == Uid::effective().as_raw()
}

fn errno(e: Errno) -> io::Error {
    io::Error::from(e)
}

/// Splits an absolute path without `.`/`..` into its directory and final name.
pub(crate) fn split_abs(path: &Path) -> io::Result<(PathBuf, OsString)> {
    let mut comps = path.components();
    if comps.next() != Some(Component::RootDir) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not an absolute path: {}", path.display()),
        ));
    }
    if !comps.clone().all(|c| matches!(c, Component::Normal(_))) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("path has . or .. components: {}", path.display()),
        ));
    }
    match (path.parent(), path.file_name()) {
        (Some(p), Some(n)) => Ok((p.to_path_buf(), n.to_os_string())),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("path has no file name: {}", path.display()),
        )),
    }
}

impl Dir {
    /// Opens a directory the daemon controls (e.g. the quarantine directory) by its full
    /// path; the final component must not be a symlink.
    pub(crate) fn open_trusted(path: &Path) -> io::Result<Dir> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(path)?;
        Ok(Dir {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Walks the absolute directory `path` from `/` without following untrusted symlinks.
    /// With `create = Some((uid, gid))`, missing directories are created (mode 0755, owned by
    /// `uid:gid`).
    pub(crate) fn walk(path: &Path, create: Option<(u32, u32)>) -> io::Result<Dir> {
        let mut comps = path.components();
        if comps.next() != Some(Component::RootDir) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not an absolute path: {}", path.display()),
            ));
        }
        let mut dir = Dir::open_trusted(Path::new("/"))?;
        for c in comps {
            let Component::Normal(name) = c else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("path has . or .. components: {}", path.display()),
                ));
            };
            dir = dir.child(name, create)?;
        }
        Ok(dir)
    }

    fn child(&self, name: &OsStr, create: Option<(u32, u32)>) -> io::Result<Dir> {
        let path = self.path.join(name);
        match self.open_dir(name, false) {
            Ok(file) => Ok(Dir { file, path }),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)) => {
                let st = self.lstat(name)?.ok_or(e)?;
                if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFLNK {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("not a directory: {}", path.display()),
                    ));
                }
                if !trusted_owner(st.st_uid) {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!(
                            "refusing to follow symlink {} owned by uid {}",
                            path.display(),
                            st.st_uid
                        ),
                    ));
                }
                Ok(Dir {
                    file: self.open_dir(name, true)?,
                    path,
                })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let Some((uid, gid)) = create else {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("no such directory: {}", path.display()),
                    ));
                };
                match mkdirat(Some(self.fd()), name, Mode::from_bits_truncate(0o755)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(errno(e)),
                }
                let file = self.open_dir(name, false)?;
                fchown(
                    file.as_raw_fd(),
                    Some(Uid::from_raw(uid)),
                    Some(Gid::from_raw(gid)),
                )
                .map_err(errno)?;
                Ok(Dir { file, path })
            }
            Err(e) => Err(e),
        }
    }

    fn via_proc(&self, name: &OsStr) -> io::Result<PathBuf> {
        if name.is_empty() || name.as_bytes().contains(&b'/') || name == ".." || name == "." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a single path component",
            ));
        }
        Ok(PathBuf::from(format!("/proc/self/fd/{}", self.fd())).join(name))
    }

    fn open_dir(&self, name: &OsStr, follow: bool) -> io::Result<File> {
        let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | nofollow)
            .open(self.via_proc(name)?)
    }

    /// Opens `name` in this directory, never following a symlink. `create` makes a new file
    /// (`O_EXCL`) with `mode`.
    pub(crate) fn open_file(&self, name: &OsStr, create: Option<u32>) -> io::Result<File> {
        let mut o = OpenOptions::new();
        match create {
            Some(mode) => {
                o.write(true).create_new(true).mode(mode);
                o.custom_flags(libc::O_NOFOLLOW);
            }
            None => {
                o.read(true);
                o.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
            }
        }
        o.open(self.via_proc(name)?)
    }

    /// `lstat` of `name`; `None` when it does not exist.
    pub(crate) fn lstat(&self, name: &OsStr) -> io::Result<Option<FileStat>> {
        match fstatat(Some(self.fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(st)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(errno(e)),
        }
    }

    /// Renames `name` to `to/to_name`, failing with `AlreadyExists` instead of replacing.
    pub(crate) fn rename_noreplace(
        &self,
        name: &OsStr,
        to: &Dir,
        to_name: &OsStr,
    ) -> io::Result<()> {
        renameat2(
            Some(self.fd()),
            name,
            Some(to.fd()),
            to_name,
            RenameFlags::RENAME_NOREPLACE,
        )
        .map_err(errno)
    }

    pub(crate) fn unlink(&self, name: &OsStr) -> io::Result<()> {
        unlinkat(Some(self.fd()), name, UnlinkatFlags::NoRemoveDir).map_err(errno)
    }

    /// Makes renames and unlinks in this directory durable.
    pub(crate) fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    pub(crate) fn fd(&self) -> i32 {
        self.file.as_raw_fd()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_abs_refuses_relative_and_dotdot() {
        assert!(split_abs(Path::new("a/b")).is_err());
        assert!(split_abs(Path::new("/a/../b")).is_err());
        assert!(split_abs(Path::new("/")).is_err());
        let (d, n) = split_abs(Path::new("/a/b.php")).unwrap();
        assert_eq!(
            (d.as_path(), n.as_os_str()),
            (Path::new("/a"), OsStr::new("b.php"))
        );
    }

    #[test]
    fn walk_opens_real_dirs() {
        let d = Dir::walk(Path::new("/usr/share"), None).unwrap();
        assert_eq!(d.path(), Path::new("/usr/share"));
        assert!(d
            .lstat(OsStr::new("definitely-missing-xyz"))
            .unwrap()
            .is_none());
        assert!(d.via_proc(OsStr::new("..")).is_err());
    }
}
