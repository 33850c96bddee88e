//! Quarantine file mechanics: move a file out of reach and put it back exactly.
//!
//! Guarantees:
//! - The quarantine directory is created 0700 and must be owned by the daemon's user; the
//!   quarantined copy is `<qdir>/<id>`, mode 0600, owned by the daemon (root), so it can be
//!   neither executed nor served, and keeps its original mtime/atime.
//! - The file is moved with `rename` (no replace), or across filesystems by copy + fsync +
//!   rename into place + unlink of the original; a file that changes while being copied is not
//!   quarantined (error `Interrupted`; the original stays).
//! - Paths are absolute and walked without following user-owned symlinks (see `fsat`); a
//!   symlink itself is never quarantined or restored through.
//! - [`restore`] puts back content (verified by SHA-256), owner, mode and mtime/atime at the
//!   original path, never replacing anything that now exists there (`AlreadyExists`), and
//!   recreates missing parent directories (0755, owned by the file's owner).
//! - Persisting the [`QuarantineRecord`] is the caller's job. Extended attributes and ACLs are
//!   not kept.

mod fsat;

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::stat::{fchmod, futimens, Mode};
use nix::sys::time::TimeSpec;
use nix::unistd::{fchown, Gid, Uid};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use fsat::Dir;

/// How the file got into quarantine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MoveMethod {
    /// Same filesystem: the inode itself was moved.
    Rename,
    /// Across filesystems: copied, synced, original unlinked.
    Copy,
}

/// What is needed to put a quarantined file back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantineRecord {
    pub id: String,
    /// Original path (lossy UTF-8 for display).
    pub original_path: String,
    /// Exact original path bytes in hex, present only when the path is not valid UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_path_hex: Option<String>,
    /// File name inside the quarantine directory.
    pub stored_name: String,
    pub uid: u32,
    pub gid: u32,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub size: u64,
    pub mtime_sec: i64,
    pub mtime_nsec: i64,
    pub atime_sec: i64,
    pub atime_nsec: i64,
    /// SHA-256 of the content, lower-case hex.
    pub sha256: String,
    pub method: MoveMethod,
}

impl QuarantineRecord {
    /// The exact original path (decoding `original_path_hex` when present).
    pub fn original_path_buf(&self) -> io::Result<PathBuf> {
        match &self.original_path_hex {
            None => Ok(PathBuf::from(&self.original_path)),
            Some(h) => hex::decode(h)
                .map(|b| PathBuf::from(OsString::from_vec(b)))
                .map_err(|_| invalid_data("original_path_hex is not valid hex")),
        }
    }
}

/// Where the quarantined copy of `record` lives.
pub fn quarantined_path(record: &QuarantineRecord, qdir: &Path) -> PathBuf {
    qdir.join(&record.stored_name)
}

fn invalid_data(m: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m.into())
}

fn errno(e: Errno) -> io::Error {
    io::Error::from(e)
}

/// Ids are 1-128 characters of `A-Z a-z 0-9 . _ -`, not starting with `.`.
fn validate_id(id: &str) -> io::Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && !id.ends_with(".part")
        && id
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid quarantine id {id:?}"),
        ))
    }
}

fn is_root() -> bool {
    Uid::effective().is_root()
}

/// Creates `qdir` if needed, forces mode 0700 and checks it is a real directory owned by us.
fn prepare_qdir(qdir: &Path) -> io::Result<Dir> {
    std::fs::create_dir_all(qdir)?;
    let meta = std::fs::symlink_metadata(qdir)?;
    if !meta.file_type().is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("quarantine dir {} is not a directory", qdir.display()),
        ));
    }
    if meta.uid() != Uid::effective().as_raw() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "quarantine dir {} is owned by uid {}, not by the daemon",
                qdir.display(),
                meta.uid()
            ),
        ));
    }
    let dir = Dir::open_trusted(qdir)?;
    fchmod(dir.fd(), Mode::from_bits_truncate(0o700)).map_err(errno)?;
    Ok(dir)
}

/// Makes a quarantined inode unusable: owner = daemon (root), mode 0600. Without root, a
/// file owned by someone else keeps its owner (the 0700 directory still guards it).
fn lock_down(f: &File) -> io::Result<()> {
    let fd = f.as_raw_fd();
    match fchown(fd, Some(Uid::effective()), Some(Gid::effective())) {
        Ok(()) => {}
        Err(Errno::EPERM) if !is_root() => {}
        Err(e) => return Err(errno(e)),
    }
    match fchmod(fd, Mode::from_bits_truncate(0o600)) {
        Ok(()) => Ok(()),
        Err(Errno::EPERM) if !is_root() => Ok(()),
        Err(e) => Err(errno(e)),
    }
}

fn sha256_of(f: &mut File) -> io::Result<String> {
    f.seek(SeekFrom::Start(0))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => h.update(buf.get(..n).unwrap_or(&[])),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    f.seek(SeekFrom::Start(0))?;
    Ok(hex::encode(h.finalize()))
}

fn set_times(f: &File, atime: (i64, i64), mtime: (i64, i64)) -> io::Result<()> {
    futimens(
        f.as_raw_fd(),
        &TimeSpec::new(atime.0, atime.1),
        &TimeSpec::new(mtime.0, mtime.1),
    )
    .map_err(errno)
}

fn same_content_state(a: &Metadata, b: &Metadata) -> bool {
    a.len() == b.len() && a.mtime() == b.mtime() && a.mtime_nsec() == b.mtime_nsec()
}

/// Moves the regular file at absolute `path` into `qdir` as `<qdir>/<id>` and returns what is
/// needed to restore it. See the module docs for the guarantees.
pub fn quarantine_file(path: &Path, qdir: &Path, id: &str) -> io::Result<QuarantineRecord> {
    quarantine_impl(path, qdir, id, false)
}

fn quarantine_impl(
    path: &Path,
    qdir: &Path,
    id: &str,
    force_copy: bool,
) -> io::Result<QuarantineRecord> {
    validate_id(id)?;
    let (parent_path, name) = fsat::split_abs(path)?;
    let q = prepare_qdir(qdir)?;
    let stored = OsString::from(id);
    let part = OsString::from(format!("{id}.part"));
    if q.lstat(&stored)?.is_some() || q.lstat(&part)?.is_some() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("quarantine id {id} is already in use"),
        ));
    }
    let parent = Dir::walk(&parent_path, None)?;
    let st = parent.lstat(&name)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no such file: {}", path.display()),
        )
    })?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "not a regular file (symlinks are not followed): {}",
                path.display()
            ),
        ));
    }
    let renamed = if force_copy {
        false
    } else {
        match parent.rename_noreplace(&name, &q, &stored) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => false,
            Err(e) => return Err(e),
        }
    };
    let (mut f, meta, method) = if renamed {
        let f = q.open_file(&stored, None)?;
        // Metadata of the inode actually moved, taken before reading (atime).
        let meta = f.metadata()?;
        lock_down(&f)?;
        q.sync()?;
        parent.sync()?;
        (f, meta, MoveMethod::Rename)
    } else {
        let meta = copy_out(&parent, &name, &q, &part, &stored, (st.st_dev, st.st_ino))?;
        (q.open_file(&stored, None)?, meta, MoveMethod::Copy)
    };
    let sha256 = sha256_of(&mut f)?;
    let bytes = path.as_os_str().as_bytes();
    let original_path_hex = match std::str::from_utf8(bytes) {
        Ok(_) => None,
        Err(_) => Some(hex::encode(bytes)),
    };
    Ok(QuarantineRecord {
        id: id.to_string(),
        original_path: path.to_string_lossy().into_owned(),
        original_path_hex,
        stored_name: id.to_string(),
        uid: meta.uid(),
        gid: meta.gid(),
        mode: meta.mode() & 0o7777,
        size: meta.len(),
        mtime_sec: meta.mtime(),
        mtime_nsec: meta.mtime_nsec(),
        atime_sec: meta.atime(),
        atime_nsec: meta.atime_nsec(),
        sha256,
        method,
    })
}

/// Copies `parent/name` to `q/stored` (via `q/part`), then unlinks the original. Returns the
/// original's metadata as it was before the copy.
fn copy_out(
    parent: &Dir,
    name: &OsStr,
    q: &Dir,
    part: &OsStr,
    stored: &OsStr,
    expect: (u64, u64),
) -> io::Result<Metadata> {
    let mut src = parent.open_file(name, None)?;
    let m0 = src.metadata()?;
    if !m0.file_type().is_file() || (m0.dev(), m0.ino()) != expect {
        return Err(io::Error::new(
            io::ErrorKind::Interrupted,
            format!(
                "{} changed during quarantine",
                parent.path().join(name).display()
            ),
        ));
    }
    let mut dst = q.open_file(part, Some(0o600))?;
    let result = (|| -> io::Result<()> {
        io::copy(&mut src, &mut dst)?;
        dst.sync_all()?;
        let m1 = src.metadata()?;
        if !same_content_state(&m0, &m1) {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                format!(
                    "{} changed while being copied into quarantine",
                    parent.path().join(name).display()
                ),
            ));
        }
        lock_down(&dst)?;
        set_times(
            &dst,
            (m0.atime(), m0.atime_nsec()),
            (m0.mtime(), m0.mtime_nsec()),
        )?;
        q.rename_noreplace(part, q, stored)?;
        q.sync()
    })();
    if let Err(e) = result {
        let _ = q.unlink(part);
        return Err(e);
    }
    if let Err(e) = parent.unlink(name) {
        let _ = q.unlink(stored);
        let _ = q.sync();
        return Err(e);
    }
    parent.sync()?;
    Ok(m0)
}

fn validate_record(r: &QuarantineRecord) -> io::Result<()> {
    validate_id(&r.stored_name).map_err(|_| invalid_data("invalid stored_name in record"))?;
    if r.mode & !0o7777 != 0 {
        return Err(invalid_data("invalid mode in record"));
    }
    if r.sha256.len() != 64 || !r.sha256.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(invalid_data("invalid sha256 in record"));
    }
    for ns in [r.mtime_nsec, r.atime_nsec] {
        if !(0..1_000_000_000).contains(&ns) {
            return Err(invalid_data("invalid nanoseconds in record"));
        }
    }
    Ok(())
}

/// Puts a quarantined file back at its original path with its owner, mode and times. Refuses
/// with `AlreadyExists` if anything now exists at that path, with `InvalidData` if the
/// quarantined copy does not match the record's SHA-256; the copy then stays in quarantine.
pub fn restore(record: &QuarantineRecord, qdir: &Path) -> io::Result<()> {
    validate_record(record)?;
    let path = record.original_path_buf()?;
    let (parent_path, name) = fsat::split_abs(&path)?;
    let q = Dir::open_trusted(qdir)?;
    let stored = OsString::from(&record.stored_name);
    let parent = Dir::walk(&parent_path, Some((record.uid, record.gid)))?;
    let exists = || {
        io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("refusing to restore: {} exists", path.display()),
        )
    };
    if parent.lstat(&name)?.is_some() {
        return Err(exists());
    }
    let mut f = q.open_file(&stored, None)?;
    if !f.metadata()?.file_type().is_file() {
        return Err(invalid_data("quarantined copy is not a regular file"));
    }
    if sha256_of(&mut f)? != record.sha256.to_ascii_lowercase() {
        return Err(invalid_data(format!(
            "quarantined copy {} does not match its record (sha256)",
            q.path().join(&stored).display()
        )));
    }
    let atime = (record.atime_sec, record.atime_nsec);
    let mtime = (record.mtime_sec, record.mtime_nsec);
    apply_owner_mode_times(&f, record, atime, mtime)?;
    match q.rename_noreplace(&stored, &parent, &name) {
        Ok(()) => {
            parent.sync()?;
            q.sync()
        }
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            let r = copy_in(&mut f, &parent, &name, record, atime, mtime);
            if r.is_err() {
                let _ = lock_down(&f);
                return r;
            }
            q.unlink(&stored)?;
            q.sync()
        }
        Err(e) => {
            let _ = lock_down(&f);
            if e.raw_os_error() == Some(libc::EEXIST) {
                Err(exists())
            } else {
                Err(e)
            }
        }
    }
}

fn apply_owner_mode_times(
    f: &File,
    r: &QuarantineRecord,
    atime: (i64, i64),
    mtime: (i64, i64),
) -> io::Result<()> {
    let fd = f.as_raw_fd();
    // Owner first: chown clears set-id bits, which the mode then restores.
    fchown(fd, Some(Uid::from_raw(r.uid)), Some(Gid::from_raw(r.gid))).map_err(errno)?;
    f.set_permissions(std::fs::Permissions::from_mode(r.mode))?;
    set_times(f, atime, mtime)
}

fn copy_in(
    src: &mut File,
    parent: &Dir,
    name: &OsStr,
    r: &QuarantineRecord,
    atime: (i64, i64),
    mtime: (i64, i64),
) -> io::Result<()> {
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".svc-restore-{}", r.stored_name));
    let mut dst = parent.open_file(&tmp, Some(0o600))?;
    let result = (|| -> io::Result<()> {
        src.seek(SeekFrom::Start(0))?;
        io::copy(src, &mut dst)?;
        dst.sync_all()?;
        apply_owner_mode_times(&dst, r, atime, mtime)?;
        match parent.rename_noreplace(&tmp, parent, name) {
            Ok(()) => parent.sync(),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "refusing to restore: {} exists",
                    parent.path().join(name).display()
                ),
            )),
            Err(e) => Err(e),
        }
    })();
    if result.is_err() {
        let _ = parent.unlink(&tmp);
    }
    result
}

/// Deletes a quarantined copy for good.
pub fn purge(record: &QuarantineRecord, qdir: &Path) -> io::Result<()> {
    validate_id(&record.stored_name).map_err(|_| invalid_data("invalid stored_name in record"))?;
    let q = Dir::open_trusted(qdir)?;
    q.unlink(OsStr::new(&record.stored_name))?;
    q.sync()
}

#[cfg(test)]
mod tests;
