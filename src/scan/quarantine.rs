//! Quarantine: move a file out of reach and put it back exactly, never outside its watched
//! root. [`Quarantine`] is the handle (quarantine directory + watched roots); the control
//! command `quarantine.restore` goes through [`restore_entry`] (store, handle, clock).
//!
//! Guarantees:
//! - Files are only quarantined and restored beneath a watched root (`files.watch`). The root
//!   itself is reached from `/` following only symlinks owned by root or the daemon
//!   (`sys::dir::Dir::walk_trusted`); **beneath it, no symlink is ever followed**
//!   (`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` or one `O_NOFOLLOW | O_DIRECTORY`
//!   component at a time). A refusal names the component (`.../www/s2 is a symlink`).
//! - The quarantine directory is created 0700 and must be owned by the daemon's user; the
//!   quarantined copy is `<qdir>/<id>`, mode 0600, owned by the daemon (root), so it can be
//!   neither executed nor served, and keeps its original mtime/atime.
//! - The file is moved with `rename` (no replace), or across filesystems by copy + fsync +
//!   rename into place + unlink of the original; a file that changes while being copied is not
//!   quarantined (the original stays). Only regular files are moved: a symlink, FIFO or device
//!   at the path is refused without being opened.
//! - Only the site's own file is moved (issue 35): one with other hard links, or owned by
//!   someone other than the owner of its root (any owner when root owns the root), is refused
//!   on its opened descriptor before the move (`PermissionDenied` carrying a
//!   `sys::dir::Refusal`), so the lock-down to 0600 never reaches another name's inode.
//! - [`Quarantine::restore`] puts back content (verified by SHA-256), owner, mode and
//!   mtime/atime at the original path, never replacing anything that now exists there
//!   (`AlreadyExists`), and recreates missing parent directories beneath the root (0755,
//!   owned by the file's owner) — never outside it. After the file is in place, every
//!   component from the root down is checked again: if one was swapped meanwhile (a directory
//!   replaced by a symlink or moved away), the file goes back into quarantine, the directories
//!   made are removed, and the restore fails naming the component.
//! - Persisting the [`QuarantineRecord`] is the caller's job. Extended attributes and ACLs are
//!   not kept.

pub mod control;

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::unistd::Uid;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::sys::dir::{self, Attrs, Create, Descent, Dir, FileInfo, Kind};
use crate::text::escape_path;

pub use control::{restore_entry, QuarantineControl, RestoreError, RestoredEntry, TrustRestored};

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
    /// Length in bytes of the watched root at the start of the exact original path: restore
    /// resolves the rest beneath that root. Absent in records written before it existed; the
    /// configured roots then decide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_len: Option<usize>,
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

    /// The watched root recorded with the file, when there is one.
    pub fn recorded_root(&self) -> io::Result<Option<PathBuf>> {
        let Some(n) = self.root_len else {
            return Ok(None);
        };
        let path = self.original_path_buf()?;
        let bytes = path.as_os_str().as_bytes();
        match (bytes.get(..n), bytes.get(n)) {
            (Some(root), Some(b'/')) if root.first() == Some(&b'/') => {
                Ok(Some(PathBuf::from(OsStr::from_bytes(root))))
            }
            _ => Err(invalid_data(
                "root_len does not end a directory of the path",
            )),
        }
    }

    fn attrs(&self) -> Attrs {
        Attrs {
            uid: self.uid,
            gid: self.gid,
            mode: self.mode,
            atime: (self.atime_sec, self.atime_nsec),
            mtime: (self.mtime_sec, self.mtime_nsec),
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

fn invalid_input(m: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, m.into())
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
        Err(invalid_input(format!(
            "invalid quarantine id {:?}",
            crate::text::escape_controls(id)
        )))
    }
}

fn is_root() -> bool {
    Uid::effective().is_root()
}

/// Checks that the open quarantine directory is a directory owned by the daemon.
fn check_qdir(dir: Dir) -> io::Result<Dir> {
    let info = dir.info()?;
    if info.kind != Kind::Dir {
        return Err(invalid_input(format!(
            "quarantine dir {} is not a directory",
            escape_path(dir.path())
        )));
    }
    if info.uid != Uid::effective().as_raw() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "quarantine dir {} is owned by uid {}, not by the daemon",
                escape_path(dir.path()),
                info.uid
            ),
        ));
    }
    Ok(dir)
}

/// Makes a quarantined inode unusable: owner = daemon (root), mode 0600. Without root, a
/// file owned by someone else keeps its owner (the 0700 directory still guards it).
fn lock_down(f: &File) -> io::Result<()> {
    let tolerate = |r: io::Result<()>| match r {
        Err(e) if e.raw_os_error() == Some(Errno::EPERM as i32) && !is_root() => Ok(()),
        r => r,
    };
    tolerate(dir::set_owner(
        f,
        Uid::effective().as_raw(),
        nix::unistd::Gid::effective().as_raw(),
    ))?;
    tolerate(dir::set_mode(f, 0o600))
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

/// The parent (relative, possibly empty) and final name of a relative path.
fn split_rel(rel: &Path) -> io::Result<(&Path, &OsStr)> {
    match (rel.parent(), rel.file_name()) {
        (Some(p), Some(n)) => Ok((p, n)),
        _ => Err(invalid_input(format!(
            "{} has no file name",
            escape_path(rel)
        ))),
    }
}

/// Absolute, and without `.`/`..` components.
fn check_abs(path: &Path) -> io::Result<()> {
    let mut comps = path.components();
    if comps.next() != Some(Component::RootDir) {
        return Err(invalid_input(format!(
            "not an absolute path: {}",
            escape_path(path)
        )));
    }
    if !comps.all(|c| matches!(c, Component::Normal(_))) {
        return Err(invalid_input(format!(
            "path has . or .. components: {}",
            escape_path(path)
        )));
    }
    Ok(())
}

/// Opens the quarantined copy of `record` in `qdir` for reading (a regular file, never
/// through a symlink). For previews; does not check the content.
pub fn open_stored(qdir: &Path, record: &QuarantineRecord) -> io::Result<File> {
    validate_id(&record.stored_name).map_err(|_| invalid_data("invalid stored_name in record"))?;
    let q = check_qdir(Dir::open_daemon(qdir)?)?;
    Ok(q.open_regular(OsStr::new(&record.stored_name))?)
}

type Hook = std::sync::Arc<dyn Fn() + Send + Sync>;

/// The quarantine: its directory and the watched roots files may be taken from and put
/// back into. Cheap to share (`Arc`).
pub struct Quarantine {
    dir: PathBuf,
    roots: Vec<PathBuf>,
    /// Runs in `restore` after the file is in place and before the check of the path
    /// (tests swap a directory there). Never present in release builds.
    #[cfg(any(test, debug_assertions))]
    after_move: Option<Hook>,
    #[cfg(not(any(test, debug_assertions)))]
    _no_hook: std::marker::PhantomData<Hook>,
}

/// Debug builds only (integration tests run them): with `SVC_TEST_RESTORE_PAUSE=<base>` in
/// the daemon's environment, a restore writes `<base>.reached` once the file is in place and
/// waits (at most 30 s) for `<base>.go` before checking the path again, so a test can swap a
/// directory in exactly that window. Compiled out of release builds.
#[cfg(debug_assertions)]
fn env_pause_hook() -> Option<Hook> {
    let base = PathBuf::from(std::env::var_os("SVC_TEST_RESTORE_PAUSE")?);
    Some(std::sync::Arc::new(move || {
        let reached = base.with_extension("reached");
        let go = base.with_extension("go");
        if let Err(e) = crate::fsutil::write_atomic(&reached, b"", 0o600, None) {
            log::warn!("SVC_TEST_RESTORE_PAUSE: {e}");
            return;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !go.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = crate::fsutil::remove_daemon_file(&go);
        let _ = crate::fsutil::remove_daemon_file(&reached);
    }))
}

impl std::fmt::Debug for Quarantine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quarantine")
            .field("dir", &self.dir)
            .field("roots", &self.roots)
            .finish()
    }
}

impl Quarantine {
    /// A quarantine in `dir` (created on first use) for files beneath `roots`.
    pub fn new(dir: PathBuf, roots: Vec<PathBuf>) -> Quarantine {
        Quarantine {
            dir,
            roots,
            #[cfg(all(test, not(debug_assertions)))]
            after_move: None,
            #[cfg(debug_assertions)]
            after_move: env_pause_hook(),
            #[cfg(not(any(test, debug_assertions)))]
            _no_hook: std::marker::PhantomData,
        }
    }

    #[cfg(test)]
    pub(crate) fn with_after_move_hook(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.after_move = Some(std::sync::Arc::new(hook));
        self
    }

    /// The quarantine directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The watched roots.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The longest watched root strictly containing the absolute `path`, and the rest. A
    /// root matches as configured or as resolved by the trusted-symlink rule (the file
    /// watcher reports resolved paths: `/home -> /data/home` makes a configured
    /// `/home/u/www` report `/data/home/u/www/x.php`). The root returned is spelled as at the
    /// start of `path` (exact bytes).
    fn root_of(&self, path: &Path) -> Option<(PathBuf, PathBuf)> {
        let mut best: Option<(usize, PathBuf)> = None;
        let mut consider = |form: &Path| {
            let Ok(rel) = path.strip_prefix(form) else {
                return false;
            };
            if rel.as_os_str().is_empty() {
                return false;
            }
            let n = form.components().count();
            if best.as_ref().is_none_or(|(m, _)| n > *m) {
                best = Some((n, rel.to_path_buf()));
            }
            true
        };
        for r in &self.roots {
            if !consider(r) {
                if let Ok(d) = Dir::walk_trusted(r) {
                    consider(d.path());
                }
            }
        }
        best.map(|(n, rel)| (path.components().take(n).collect(), rel))
    }

    fn not_beneath(&self, path: &Path) -> io::Error {
        invalid_input(format!(
            "{} is not beneath a watched root ({})",
            escape_path(path),
            if self.roots.is_empty() {
                "files.watch is empty".to_string()
            } else {
                self.roots
                    .iter()
                    .map(|r| escape_path(r).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ))
    }

    /// Creates the quarantine directory if needed, forces mode 0700 and checks it is a real
    /// directory owned by the daemon.
    fn prepare_dir(&self) -> io::Result<Dir> {
        check_qdir(Dir::create_daemon(&self.dir, 0o700)?)
    }

    fn open_dir(&self) -> io::Result<Dir> {
        check_qdir(Dir::open_daemon(&self.dir)?)
    }

    /// Moves the regular file at absolute `path` (beneath a watched root) into the
    /// quarantine as `<dir>/<id>` and returns what is needed to restore it. See the module
    /// docs for the guarantees.
    pub fn quarantine(&self, path: &Path, id: &str) -> io::Result<QuarantineRecord> {
        validate_id(id)?;
        check_abs(path)?;
        let (root, rel) = self.root_of(path).ok_or_else(|| self.not_beneath(path))?;
        let (rel_parent, name) = split_rel(&rel)?;
        let q = self.prepare_dir()?;
        let stored = OsString::from(id);
        if q.lstat(&stored)?.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("quarantine id {id} is already in use"),
            ));
        }
        let root_dir = Dir::walk_trusted(&root)?;
        // The site's files only: one link, the owner of the root (dir::SoleOwner).
        let sole = dir::SoleOwner::of_root(FileInfo::of(&root_dir)?.uid);
        let parent = root_dir.open_beneath(rel_parent)?;
        let st = parent.lstat(name)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no such file: {}", escape_path(path)),
            )
        })?;
        if st.kind != Kind::File {
            return Err(invalid_input(format!(
                "{} is a {}, not a regular file (symlinks are not followed)",
                escape_path(path),
                st.kind.name()
            )));
        }
        let mut moved = dir::move_sole_file(
            &parent,
            name,
            &q,
            &stored,
            Some((st.dev, st.ino)),
            Some(sole),
        )?;
        if let Err(e) = lock_down(&moved.file) {
            // The file is out of reach in the 0700 directory; keep its record all the same.
            log::error!(
                "quarantine: {} moved as {id} but not locked down: {e}",
                escape_path(path)
            );
        }
        let sha256 = sha256_of(&mut moved.file)?;
        let bytes = path.as_os_str().as_bytes();
        let original_path_hex = match std::str::from_utf8(bytes) {
            Ok(_) => None,
            Err(_) => Some(hex::encode(bytes)),
        };
        let b = moved.before;
        Ok(QuarantineRecord {
            id: id.to_string(),
            original_path: path.to_string_lossy().into_owned(),
            original_path_hex,
            root_len: Some(root.as_os_str().len()),
            stored_name: id.to_string(),
            uid: b.uid,
            gid: b.gid,
            mode: b.mode,
            size: b.size,
            mtime_sec: b.mtime.0,
            mtime_nsec: b.mtime.1,
            atime_sec: b.atime.0,
            atime_nsec: b.atime.1,
            sha256,
            method: match moved.method {
                dir::MoveMethod::Rename => MoveMethod::Rename,
                dir::MoveMethod::Copy => MoveMethod::Copy,
            },
        })
    }

    /// The watched root a record restores beneath, and the path relative to it.
    fn restore_target(&self, r: &QuarantineRecord, path: &Path) -> io::Result<(PathBuf, PathBuf)> {
        check_abs(path)?;
        match r.recorded_root()? {
            Some(root) => {
                let rel = path
                    .strip_prefix(&root)
                    .map_err(|_| invalid_data("the recorded root is not a prefix of the path"))?;
                Ok((root.clone(), rel.to_path_buf()))
            }
            None => self.root_of(path).ok_or_else(|| self.not_beneath(path)),
        }
    }

    /// Puts a quarantined file back at its original path with its owner, mode and times,
    /// beneath its watched root. Refuses with `AlreadyExists` if anything now exists at that
    /// path, with `InvalidData` if the quarantined copy does not match the record's SHA-256,
    /// with `PermissionDenied` naming the component when a directory on the way is now a
    /// symlink; the copy then stays in quarantine (see the module docs).
    pub fn restore(&self, record: &QuarantineRecord) -> io::Result<()> {
        validate_record(record)?;
        let path = record.original_path_buf()?;
        let shown = escape_path(&path).into_owned();
        let (root, rel) = self.restore_target(record, &path)?;
        let (rel_parent, name) = split_rel(&rel)?;
        let q = self.open_dir()?;
        let stored = OsString::from(&record.stored_name);
        let mut f = q.open_regular(&stored)?;
        if sha256_of(&mut f)? != record.sha256.to_ascii_lowercase() {
            return Err(invalid_data(format!(
                "quarantined copy {} does not match its record (sha256)",
                escape_path(&q.path().join(&stored))
            )));
        }
        let refuse = |e: dir::Error| {
            io::Error::new(
                e.kind(),
                format!("refusing to restore {shown}: {e}; the file stays in quarantine"),
            )
        };
        let root_dir = Dir::walk_trusted(&root).map_err(refuse)?;
        let root_info = root_dir.info().map_err(refuse)?;
        let create = Create {
            mode: 0o755,
            owner: Some((record.uid, record.gid)),
        };
        let descent = Descent::new(root_dir, rel_parent, Some(create)).map_err(refuse)?;
        let exists = || {
            io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("refusing to restore: {shown} exists"),
            )
        };
        // A directory that now belongs to someone else than the file's owner (or root) is
        // not where the file was taken from: its new owner could read or swap it.
        match descent.dir().info() {
            Ok(p) if p.uid != 0 && p.uid != record.uid => {
                descent.remove_created();
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "refusing to restore {shown}: its directory is now owned by uid {}, not by the file's owner (uid {}) or root; the file stays in quarantine",
                        p.uid, record.uid
                    ),
                ));
            }
            Ok(_) => {}
            Err(e) => {
                descent.remove_created();
                return Err(refuse(e));
            }
        }
        match descent.dir().lstat(name) {
            Ok(None) => {}
            Ok(Some(_)) => {
                descent.remove_created();
                return Err(exists());
            }
            Err(e) => {
                descent.remove_created();
                return Err(refuse(e));
            }
        }
        // Owner, mode and times first, while the copy is still in the 0700 directory.
        let copy = FileInfo::of(&f)?;
        if let Err(e) = dir::set_attrs(&f, &record.attrs()) {
            descent.remove_created();
            return Err(e);
        }
        let moved =
            match dir::move_file(&q, &stored, descent.dir(), name, Some((copy.dev, copy.ino))) {
                Ok(m) => m,
                Err(e) => {
                    let _ = lock_down(&f);
                    descent.remove_created();
                    return Err(match e {
                        dir::Error::Exists { .. } => exists(),
                        e => refuse(e),
                    });
                }
            };
        #[cfg(any(test, debug_assertions))]
        if let Some(hook) = &self.after_move {
            hook();
        }
        // Every component from the root down must still be the directory used: otherwise the
        // file may now sit outside the root (a directory moved away, a symlink in its place).
        let check = descent.verify().and_then(|()| {
            let again = Dir::walk_trusted(&root)?.info()?;
            if again.same_inode(&root_info) {
                Ok(())
            } else {
                Err(dir::Error::Changed {
                    path: root.clone(),
                    what: "was replaced",
                })
            }
        });
        if let Err(e) = check {
            let placed = FileInfo::of(&moved.file)?;
            let back = dir::move_file(
                descent.dir(),
                name,
                &q,
                &stored,
                Some((placed.dev, placed.ino)),
            );
            let undone = match back {
                Ok(b) => {
                    let _ = lock_down(&b.file);
                    descent.remove_created();
                    "the file was put back into quarantine".to_string()
                }
                Err(be) => {
                    // Typically the file was moved on meanwhile (by the same user, or by the
                    // file watcher quarantining it again where it saw it appear).
                    log::error!(
                        "quarantine: restoring {shown} was interrupted by a swapped directory and the file could not be taken back: {be}"
                    );
                    format!("the file could not be taken back into quarantine ({be})")
                }
            };
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("refusing to restore {shown}: {e} during the restore; {undone}"),
            ));
        }
        Ok(())
    }

    /// Deletes a quarantined copy for good.
    pub fn purge(&self, record: &QuarantineRecord) -> io::Result<()> {
        validate_id(&record.stored_name)
            .map_err(|_| invalid_data("invalid stored_name in record"))?;
        let q = self.open_dir()?;
        q.unlink(OsStr::new(&record.stored_name))?;
        Ok(q.sync()?)
    }

    /// Opens the quarantined copy of `record` for reading (see [`open_stored`]).
    pub fn open_stored(&self, record: &QuarantineRecord) -> io::Result<File> {
        open_stored(&self.dir, record)
    }
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

#[cfg(test)]
mod tests;
