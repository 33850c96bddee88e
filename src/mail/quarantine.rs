//! Mail quarantine: infected messages leave the MTA's spool into
//! `mail.quarantine_path/<id>/` and can be put back (release) or deleted.
//!
//! Guarantees:
//! - **Metadata first.** The store row with every spool file's place, owner, group, mode,
//!   size and mtime (state `quarantining` or `releasing`) is committed before any file
//!   moves; the final state is committed after the last one.
//! - **Moves keep the file.** Each file is moved with `sys::dir::move_file`: a rename on
//!   one filesystem, otherwise copy + `fsync` + owner, group, mode and times of the source +
//!   rename into place + unlink of the source, with both directories synced. Nothing is
//!   ever replaced; nothing beneath the spool root follows a symlink.
//! - **Order.** Quarantine moves the header (`-H`) first, so the MTA stops seeing the
//!   message at once, then the journal, message log and body; release restores the body
//!   (`-D`) and the others first and publishes the header last. While moving an Exim
//!   message the daemon holds a lock on `-D` that conflicts with Exim's delivery lock, so
//!   no delivery runs meanwhile (a message being delivered is retried later).
//! - **Optional files.** The journal and the message log are taken when present; a
//!   missing message log, or its whole directory (Exim with `message_logs = false`), is
//!   normal: the message is quarantined by its `-H` and `-D` files and released without
//!   one. A message log put back whose directory is gone gets it made again.
//! - **Failures.** A failed quarantine moves back what it moved; when that fails too, the
//!   remaining quarantine files are kept, the row becomes `partial` and names the paths in
//!   both places. A failed release or delete keeps the row (`partial`) and names the
//!   affected paths. Both locations are inspected before any retry.
//! - **Crash safety.** [`MailQuarantine::recover`] (at start, and again by the watcher
//!   while something is left) finishes every operation a crash interrupted, in its own
//!   direction, looking at both locations file by file: a file in both places (a
//!   cross-filesystem copy whose source was not yet unlinked) keeps the copy that was
//!   renamed into place; interrupted copies (`.svc-move-*.part`) are removed. After a
//!   SIGKILL at any step each message is therefore fully in the spool or fully in
//!   quarantine.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use nix::unistd::Uid;
use serde::{Deserialize, Serialize};

use super::mime::{Incomplete, Interp};
use super::spool::Mta;
use crate::clock::SharedClock;
use crate::store::mail as sql;
use crate::store::Store;
use crate::sys::dir::{self, Dir, Kind};
use crate::text::escape_path;

/// One engine's verdict on one part, with the engine's own rating.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// `clamd` or `signatures`.
    pub engine: String,
    /// Signature or rule name as the engine reported it.
    pub signature: String,
    /// The engine's own rating: clamd's `FOUND`; the signature rule's confidence.
    pub rating: String,
    /// MIME position of the part.
    pub part: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Archive member path (sanitised names), when found inside an archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpretation: Option<Interp>,
}

/// One extracted part as the quarantine entry lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartEntry {
    pub part: String,
    pub content_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpretation: Option<Interp>,
}

/// What the entry says about the message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    #[serde(default)]
    pub message_id: Option<String>,
    pub sender: String,
    pub recipients: Vec<String>,
    #[serde(default)]
    pub subject: Option<String>,
    pub verdicts: Vec<Verdict>,
    pub parts: Vec<PartEntry>,
    #[serde(default)]
    pub incomplete: Vec<Incomplete>,
    pub size: u64,
}

/// One spool file of a quarantined message, as it was in the spool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpoolFile {
    /// `H`, `D`, `J`, `msglog` (Exim) or `queue` (Postfix).
    pub role: String,
    /// Directory relative to the spool root (`input/r`).
    pub dir: String,
    pub name: String,
    /// Name inside the entry directory.
    pub stored: String,
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
    pub size: u64,
    pub mtime_sec: i64,
    pub mtime_nsec: i64,
}

/// A file of a message to quarantine: (role, directory relative to the spool, name,
/// required).
#[derive(Clone, Debug)]
pub struct Candidate {
    pub role: &'static str,
    pub dir: String,
    pub name: String,
    pub required: bool,
}

/// An entry as the API lists it.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    pub id: String,
    pub state: String,
    pub mta: String,
    pub queue_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    pub sender: String,
    pub recipients: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(serialize_with = "crate::timefmt::ser")]
    pub quarantined_at: jiff::Timestamp,
    pub verdicts: Vec<Verdict>,
    pub parts: Vec<PartEntry>,
    pub incomplete: Vec<Incomplete>,
    pub size: u64,
    pub files: Vec<SpoolFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why an operation failed.
#[derive(Debug)]
pub enum QError {
    NotFound,
    /// The entry is not in a state that allows the operation.
    State(String),
    /// The MTA is working on the message (its `-D` lock is held); retried later.
    Locked,
    /// A file the operation needs is missing.
    Missing(String),
    /// A name the release would write already exists in the spool.
    Conflict(Vec<String>),
    Store(String),
    /// A move failed; `paths` are the files affected, in both locations.
    Storage {
        error: String,
        paths: Vec<String>,
    },
}

impl std::fmt::Display for QError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QError::NotFound => f.write_str("no such quarantine entry"),
            QError::State(s) => write!(f, "the entry is {s}"),
            QError::Locked => f.write_str("the MTA is delivering the message"),
            QError::Missing(p) => write!(f, "{p} is missing"),
            QError::Conflict(p) => write!(f, "refusing to replace {}", p.join(", ")),
            QError::Store(e) => write!(f, "store: {e}"),
            QError::Storage { error, paths } => {
                write!(f, "{error} (affected: {})", paths.join(", "))
            }
        }
    }
}

impl QError {
    pub fn paths(&self) -> Vec<String> {
        match self {
            QError::Storage { paths, .. } | QError::Conflict(paths) => paths.clone(),
            _ => Vec::new(),
        }
    }
}

type Hook = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// Debug builds only: with `SVC_TEST_MAIL_PAUSE=<base>`, quarantine and release write
/// `<base>.<op>.reached` after the first file moved and wait (at most 30 s) for
/// `<base>.<op>.go`, so a test can kill the daemon in the middle. Compiled out of release
/// builds.
#[cfg(debug_assertions)]
fn env_pause_hook() -> Option<Hook> {
    let base = std::env::var_os("SVC_TEST_MAIL_PAUSE")?;
    Some(std::sync::Arc::new(move |op: &str| {
        let mut reached = base.clone();
        reached.push(format!(".{op}.reached"));
        let mut go = base.clone();
        go.push(format!(".{op}.go"));
        let (reached, go) = (PathBuf::from(reached), PathBuf::from(go));
        if crate::fsutil::write_atomic(&reached, b"", 0o600, None).is_err() {
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

#[cfg(not(debug_assertions))]
fn env_pause_hook() -> Option<Hook> {
    None
}

/// The mail quarantine directory and its store rows.
pub struct MailQuarantine {
    dir: PathBuf,
    store: Store,
    clock: SharedClock,
    pause: Option<Hook>,
}

/// Mode of a message-log directory a release makes again (Exim's `MSGLOG_DIRECTORY_MODE`).
const MSGLOG_DIR_MODE: u32 = 0o750;

const Q_QUARANTINING: &str = "quarantining";
const Q_QUARANTINED: &str = "quarantined";
const Q_RELEASING: &str = "releasing";
const Q_RELEASED: &str = "released";
const Q_DELETING: &str = "deleting";
const Q_DELETED: &str = "deleted";
const Q_PARTIAL: &str = "partial";
const Q_FAILED: &str = "failed";

/// States listed by the API (messages held, or needing attention).
pub const LISTED: &[&str] = &[
    Q_QUARANTINED,
    Q_PARTIAL,
    Q_QUARANTINING,
    Q_RELEASING,
    Q_DELETING,
];

fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Takes a lock on an open Exim `-D` file that conflicts with Exim's delivery lock
/// (open-file-description lock: closing another descriptor of the file in this process
/// does not drop it).
pub fn lock_data_file(f: &File) -> Result<(), QError> {
    let lk = libc::flock {
        l_type: libc::F_RDLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    match nix::fcntl::fcntl(f.as_raw_fd(), nix::fcntl::FcntlArg::F_OFD_SETLK(&lk)) {
        Ok(_) => Ok(()),
        Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EACCES) => Err(QError::Locked),
        Err(e) => Err(QError::Storage {
            error: format!("cannot lock the data file: {e}"),
            paths: Vec::new(),
        }),
    }
}

fn store_err(e: crate::store::StoreError) -> QError {
    QError::Store(e.to_string())
}

/// Where each file of a record is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Spool,
    Quarantine,
    Both,
    Neither,
}

impl MailQuarantine {
    pub fn new(dir: PathBuf, store: Store, clock: SharedClock) -> MailQuarantine {
        MailQuarantine {
            dir,
            store,
            clock,
            pause: env_pause_hook(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn qdir(&self) -> Result<Dir, QError> {
        let d = Dir::create_daemon(&self.dir, 0o700).map_err(|e| QError::Storage {
            error: e.to_string(),
            paths: vec![escape_path(&self.dir).into_owned()],
        })?;
        let info = d.info().map_err(|e| QError::Storage {
            error: e.to_string(),
            paths: vec![escape_path(&self.dir).into_owned()],
        })?;
        if info.uid != Uid::effective().as_raw() {
            return Err(QError::Storage {
                error: format!("owned by uid {}, not by the daemon", info.uid),
                paths: vec![escape_path(&self.dir).into_owned()],
            });
        }
        Ok(d)
    }

    fn now(&self) -> jiff::Timestamp {
        self.clock.now()
    }

    fn set_state(
        &self,
        id: &str,
        from: &[&'static str],
        to: &'static str,
        error: Option<String>,
    ) -> Result<bool, QError> {
        let (id, from, now) = (id.to_string(), from.to_vec(), self.now());
        self.store
            .write(move |c| sql::set_state(c, &id, &from, to, error.as_deref(), now))
            .map_err(store_err)
    }

    fn pause(&self, op: &str) {
        if let Some(h) = &self.pause {
            h(op);
        }
    }

    /// Quarantines the message whose files are `files` (in quarantine order, the header
    /// first) under `spool_root`. `lock` is the message's open `-D` file for Exim (locked
    /// here). Returns the entry id.
    pub fn quarantine(
        &self,
        spool_root: &Path,
        mta: Mta,
        queue_id: &str,
        files: &[Candidate],
        lock: Option<&File>,
        meta: &Meta,
    ) -> Result<String, QError> {
        if let Some(f) = lock {
            lock_data_file(f)?;
        }
        let root = Dir::walk_trusted(spool_root).map_err(|e| QError::Storage {
            error: e.to_string(),
            paths: vec![escape_path(spool_root).into_owned()],
        })?;
        let mut recs = Vec::new();
        for c in files {
            let d = match root.open_beneath(Path::new(&c.dir)) {
                Ok(d) => d,
                // No directory, no file: Exim with `message_logs = false` keeps no
                // `msglog/` directory at all.
                Err(dir::Error::NotFound { .. }) if !c.required => continue,
                Err(e) => {
                    return Err(QError::Storage {
                        error: e.to_string(),
                        paths: vec![format!("{}/{}", escape_path(spool_root), c.dir)],
                    })
                }
            };
            let shown = format!("{}/{}/{}", escape_path(spool_root), c.dir, c.name);
            match d.lstat(OsStr::new(&c.name)) {
                Ok(Some(i)) if i.kind == Kind::File => recs.push(SpoolFile {
                    role: c.role.to_string(),
                    dir: c.dir.clone(),
                    name: c.name.clone(),
                    stored: c.role.to_string(),
                    uid: i.uid,
                    gid: i.gid,
                    mode: i.mode,
                    size: i.size,
                    mtime_sec: i.mtime.0,
                    mtime_nsec: i.mtime.1,
                }),
                Ok(_) if !c.required => {}
                Ok(_) => return Err(QError::Missing(shown)),
                Err(e) => {
                    return Err(QError::Storage {
                        error: e.to_string(),
                        paths: vec![shown],
                    })
                }
            }
        }
        let q = self.qdir()?;
        let id = crate::ids::random_hex(8);
        let now = self.now().as_microsecond();
        let row = sql::Row {
            id: id.clone(),
            state: Q_QUARANTINING.into(),
            mta: mta.as_str().into(),
            queue_id: queue_id.into(),
            spool_path: spool_root.to_string_lossy().into_owned(),
            meta: serde_json::to_string(meta).unwrap_or_else(|_| "{}".into()),
            files: serde_json::to_string(&recs).unwrap_or_else(|_| "[]".into()),
            quarantined_at: now,
            updated: now,
            error: None,
        };
        self.store
            .write(move |c| sql::insert(c, &row))
            .map_err(store_err)?;
        let entry = match q.mkdir(OsStr::new(&id), 0o700, None).and_then(|e| {
            q.sync()?;
            Ok(e)
        }) {
            Ok(e) => e,
            Err(e) => {
                let _ = self.set_state(&id, &[Q_QUARANTINING], Q_FAILED, Some(e.to_string()));
                return Err(QError::Storage {
                    error: e.to_string(),
                    paths: vec![escape_path(&self.dir.join(&id)).into_owned()],
                });
            }
        };
        let mut moved: Vec<&SpoolFile> = Vec::new();
        for (i, f) in recs.iter().enumerate() {
            let r = root.open_beneath(Path::new(&f.dir)).and_then(|d| {
                dir::move_file(&d, OsStr::new(&f.name), &entry, OsStr::new(&f.stored), None)
            });
            match r {
                Ok(_) => moved.push(f),
                Err(e) => {
                    return Err(self.roll_back(
                        &id,
                        spool_root,
                        &root,
                        &entry,
                        &moved,
                        &e.to_string(),
                    ));
                }
            }
            if i == 0 {
                self.pause("quarantine");
            }
        }
        if let Err(e) = entry.sync() {
            log::warn!("mail quarantine: {e}");
        }
        self.set_state(&id, &[Q_QUARANTINING], Q_QUARANTINED, None)?;
        Ok(id)
    }

    fn roll_back(
        &self,
        id: &str,
        spool_root: &Path,
        root: &Dir,
        entry: &Dir,
        moved: &[&SpoolFile],
        error: &str,
    ) -> QError {
        let mut left = Vec::new();
        for f in moved.iter().rev() {
            let back = root.open_beneath(Path::new(&f.dir)).and_then(|d| {
                dir::move_file(entry, OsStr::new(&f.stored), &d, OsStr::new(&f.name), None)
            });
            if let Err(e) = back {
                log::error!("mail quarantine {id}: cannot move {} back: {e}", f.name);
                left.push(f);
            }
        }
        if left.is_empty() {
            if let Ok(q) = self.qdir() {
                q.rmdir(OsStr::new(id)).ok();
                q.sync().ok();
            }
            let _ = self.set_state(id, &[Q_QUARANTINING], Q_FAILED, Some(error.to_string()));
            QError::Storage {
                error: format!("quarantine failed and was undone: {error}"),
                paths: moved
                    .iter()
                    .map(|f| format!("{}/{}/{}", escape_path(spool_root), f.dir, f.name))
                    .collect(),
            }
        } else {
            let mut paths = Vec::new();
            for f in &left {
                paths.push(escape_path(&self.dir.join(id).join(&f.stored)).into_owned());
            }
            let msg = format!(
                "quarantine failed ({error}) and could not be undone; kept in quarantine: {}",
                paths.join(", ")
            );
            let _ = self.set_state(id, &[Q_QUARANTINING], Q_PARTIAL, Some(msg.clone()));
            QError::Storage { error: msg, paths }
        }
    }

    fn load(&self, id: &str) -> Result<(sql::Row, Vec<SpoolFile>), QError> {
        if !valid_id(id) {
            return Err(QError::NotFound);
        }
        let id2 = id.to_string();
        let row = self
            .store
            .read(move |c| sql::get(c, &id2))
            .map_err(store_err)?
            .ok_or(QError::NotFound)?;
        let files: Vec<SpoolFile> = serde_json::from_str(&row.files)
            .map_err(|e| QError::Store(format!("unreadable file list: {e}")))?;
        Ok((row, files))
    }

    fn place(&self, root: &Dir, entry: Option<&Dir>, f: &SpoolFile) -> Place {
        let in_spool = root
            .open_beneath(Path::new(&f.dir))
            .ok()
            .and_then(|d| d.lstat(OsStr::new(&f.name)).ok().flatten())
            .is_some();
        let in_q = entry
            .and_then(|e| e.lstat(OsStr::new(&f.stored)).ok().flatten())
            .is_some();
        match (in_spool, in_q) {
            (true, true) => Place::Both,
            (true, false) => Place::Spool,
            (false, true) => Place::Quarantine,
            (false, false) => Place::Neither,
        }
    }

    /// Puts a quarantined message back into its spool: body first, header last.
    pub fn release(&self, id: &str) -> Result<String, QError> {
        let (row, files) = self.load(id)?;
        if !self.set_state(id, &[Q_QUARANTINED, Q_PARTIAL], Q_RELEASING, None)? {
            return Err(QError::State(row.state));
        }
        match self.finish_release(&row, &files, true) {
            Ok(()) => Ok(row.queue_id),
            Err(e) => {
                let _ = self.set_state(id, &[Q_RELEASING], Q_PARTIAL, Some(e.to_string()));
                Err(e)
            }
        }
    }

    fn spool_root(row: &sql::Row) -> Result<Dir, QError> {
        Dir::walk_trusted(Path::new(&row.spool_path)).map_err(|e| QError::Storage {
            error: e.to_string(),
            paths: vec![crate::text::escape_controls(&row.spool_path).into_owned()],
        })
    }

    fn finish_release(
        &self,
        row: &sql::Row,
        files: &[SpoolFile],
        fresh: bool,
    ) -> Result<(), QError> {
        let root = Self::spool_root(row)?;
        let q = self.qdir()?;
        let entry = q.child(OsStr::new(&row.id)).ok();
        if fresh {
            let conflicts: Vec<String> = files
                .iter()
                .filter(|f| self.place(&root, entry.as_ref(), f) == Place::Both)
                .map(|f| {
                    format!(
                        "{}/{}/{}",
                        crate::text::escape_controls(&row.spool_path),
                        f.dir,
                        f.name
                    )
                })
                .collect();
            if !conflicts.is_empty() {
                return Err(QError::Conflict(conflicts));
            }
        }
        let mut first = true;
        for f in files.iter().rev() {
            let shown_spool = format!(
                "{}/{}/{}",
                crate::text::escape_controls(&row.spool_path),
                f.dir,
                f.name
            );
            let shown_q = escape_path(&self.dir.join(&row.id).join(&f.stored)).into_owned();
            let place = self.place(&root, entry.as_ref(), f);
            let d = match Self::release_dir(&root, f, place) {
                Ok(Some(d)) => d,
                Ok(None) => continue,
                Err(e) => {
                    return Err(QError::Storage {
                        error: e.to_string(),
                        paths: vec![shown_spool.clone()],
                    })
                }
            };
            clean_parts(&d);
            match (place, entry.as_ref()) {
                (Place::Quarantine, Some(e)) => {
                    dir::move_file(e, OsStr::new(&f.stored), &d, OsStr::new(&f.name), None)
                        .map_err(|err| QError::Storage {
                            error: err.to_string(),
                            paths: vec![shown_q.clone(), shown_spool.clone()],
                        })?;
                    if first {
                        first = false;
                        self.pause("release");
                    }
                }
                (Place::Both, Some(e)) if !fresh => {
                    // The copy renamed into the spool is complete; the source was not yet
                    // unlinked.
                    e.unlink(OsStr::new(&f.stored))
                        .map_err(|err| QError::Storage {
                            error: err.to_string(),
                            paths: vec![shown_q.clone()],
                        })?;
                }
                (Place::Spool, _) => {}
                (Place::Neither, _) if f.role == "J" || f.role == "msglog" => {}
                _ => {
                    return Err(QError::Storage {
                        error: format!("{} is in neither place", f.role),
                        paths: vec![shown_q, shown_spool],
                    })
                }
            }
        }
        if let Some(e) = entry {
            clean_parts(&e);
            drop(e);
            q.rmdir(OsStr::new(&row.id)).map_err(|e| QError::Storage {
                error: e.to_string(),
                paths: vec![escape_path(&self.dir.join(&row.id)).into_owned()],
            })?;
            let _ = q.sync();
        }
        self.set_state(&row.id, &[Q_RELEASING], Q_RELEASED, None)?;
        Ok(())
    }

    /// The spool directory a release writes `f` into. A message log whose directory is
    /// gone (Exim makes them as it needs them; an operator may have turned message logs
    /// off and removed them) gets it made again beneath the spool root, as Exim makes it:
    /// mode 0750, owned as the log file. `None`: nothing to put back there (a message log
    /// in neither place, as a spool without message logs has none).
    fn release_dir(root: &Dir, f: &SpoolFile, place: Place) -> dir::Result<Option<Dir>> {
        match root.open_beneath(Path::new(&f.dir)) {
            Ok(d) => Ok(Some(d)),
            Err(dir::Error::NotFound { .. }) if f.role == "msglog" => match place {
                Place::Quarantine => {
                    let create = dir::Create {
                        mode: MSGLOG_DIR_MODE,
                        owner: Some((f.uid, f.gid)),
                    };
                    let made =
                        dir::Descent::new(root.try_clone()?, Path::new(&f.dir), Some(create))?;
                    Ok(Some(made.dir().try_clone()?))
                }
                _ => Ok(None),
            },
            Err(e) => Err(e),
        }
    }

    /// Deletes a quarantined message for good.
    pub fn delete(&self, id: &str) -> Result<(), QError> {
        let (row, files) = self.load(id)?;
        if !self.set_state(id, &[Q_QUARANTINED, Q_PARTIAL, Q_FAILED], Q_DELETING, None)? {
            return Err(QError::State(row.state));
        }
        self.finish_delete(&row, &files).inspect_err(|e| {
            let _ = self.set_state(id, &[Q_DELETING], Q_PARTIAL, Some(e.to_string()));
        })
    }

    fn finish_delete(&self, row: &sql::Row, files: &[SpoolFile]) -> Result<(), QError> {
        let q = self.qdir()?;
        if let Ok(e) = q.child(OsStr::new(&row.id)) {
            for f in files {
                match e.unlink(OsStr::new(&f.stored)) {
                    Ok(()) | Err(dir::Error::NotFound { .. }) => {}
                    Err(err) => {
                        return Err(QError::Storage {
                            error: err.to_string(),
                            paths: vec![
                                escape_path(&self.dir.join(&row.id).join(&f.stored)).into_owned()
                            ],
                        })
                    }
                }
            }
            clean_parts(&e);
            let _ = e.sync();
            drop(e);
            q.rmdir(OsStr::new(&row.id)).map_err(|e| QError::Storage {
                error: e.to_string(),
                paths: vec![escape_path(&self.dir.join(&row.id)).into_owned()],
            })?;
            let _ = q.sync();
        }
        self.set_state(&row.id, &[Q_DELETING], Q_DELETED, None)?;
        Ok(())
    }

    /// Finishes operations a crash interrupted (see the module docs). Returns how many
    /// entries are still unfinished (a locked message, a storage failure).
    pub fn recover(&self) -> usize {
        let rows = match self
            .store
            .read(|c| sql::list(c, &[Q_QUARANTINING, Q_RELEASING, Q_DELETING], 0, 10_000))
        {
            Ok((rows, _)) => rows,
            Err(e) => {
                log::warn!("mail quarantine recovery: {e}");
                return 1;
            }
        };
        let mut left = 0;
        for row in rows {
            let files: Vec<SpoolFile> = match serde_json::from_str(&row.files) {
                Ok(f) => f,
                Err(_) => continue,
            };
            let r = match row.state.as_str() {
                Q_QUARANTINING => self.finish_quarantine(&row, &files),
                Q_RELEASING => self.finish_release(&row, &files, false),
                _ => self.finish_delete(&row, &files),
            };
            match r {
                Ok(()) => log::info!(
                    "mail quarantine {}: finished an interrupted {} of {}",
                    row.id,
                    row.state,
                    crate::text::for_log(&row.queue_id, 64)
                ),
                Err(QError::Locked) => left += 1,
                Err(e) => {
                    left += 1;
                    log::error!(
                        "mail quarantine {}: recovery of {} failed: {e}",
                        row.id,
                        row.state
                    );
                }
            }
        }
        left
    }

    fn finish_quarantine(&self, row: &sql::Row, files: &[SpoolFile]) -> Result<(), QError> {
        let root = Self::spool_root(row)?;
        let q = self.qdir()?;
        let entry = match q.child(OsStr::new(&row.id)) {
            Ok(e) => e,
            Err(_) => {
                let e = q
                    .mkdir(OsStr::new(&row.id), 0o700, None)
                    .map_err(|e| QError::Storage {
                        error: e.to_string(),
                        paths: vec![escape_path(&self.dir.join(&row.id)).into_owned()],
                    })?;
                let _ = q.sync();
                e
            }
        };
        clean_parts(&entry);
        // The data file's lock first, when it is still in the spool.
        let _lock = match files.iter().find(|f| f.role == "D") {
            Some(f) if self.place(&root, Some(&entry), f) == Place::Spool => {
                let d = root.open_beneath(Path::new(&f.dir)).ok();
                match d.and_then(|d| d.open_regular(OsStr::new(&f.name)).ok()) {
                    Some(file) => {
                        lock_data_file(&file)?;
                        Some(file)
                    }
                    None => None,
                }
            }
            _ => None,
        };
        for f in files {
            let shown_spool = format!(
                "{}/{}/{}",
                crate::text::escape_controls(&row.spool_path),
                f.dir,
                f.name
            );
            let shown_q = escape_path(&self.dir.join(&row.id).join(&f.stored)).into_owned();
            match self.place(&root, Some(&entry), f) {
                Place::Spool => {
                    let d = root
                        .open_beneath(Path::new(&f.dir))
                        .map_err(|e| QError::Storage {
                            error: e.to_string(),
                            paths: vec![shown_spool.clone()],
                        })?;
                    dir::move_file(&d, OsStr::new(&f.name), &entry, OsStr::new(&f.stored), None)
                        .map_err(|e| QError::Storage {
                            error: e.to_string(),
                            paths: vec![shown_spool.clone(), shown_q.clone()],
                        })?;
                }
                Place::Both => {
                    // The copy renamed into quarantine is complete; the spool name is the
                    // source a crash did not unlink.
                    let d = root
                        .open_beneath(Path::new(&f.dir))
                        .map_err(|e| QError::Storage {
                            error: e.to_string(),
                            paths: vec![shown_spool.clone()],
                        })?;
                    d.unlink(OsStr::new(&f.name)).map_err(|e| QError::Storage {
                        error: e.to_string(),
                        paths: vec![shown_spool.clone()],
                    })?;
                    let _ = d.sync();
                }
                Place::Quarantine => {}
                Place::Neither if f.role == "J" || f.role == "msglog" => {}
                Place::Neither => {
                    return Err(QError::Storage {
                        error: format!("{} is in neither place", f.role),
                        paths: vec![shown_spool, shown_q],
                    })
                }
            }
        }
        let _ = entry.sync();
        self.set_state(&row.id, &[Q_QUARANTINING], Q_QUARANTINED, None)?;
        Ok(())
    }

    /// Entries in the listed states, newest first, and their total.
    pub fn list(&self, offset: u64, limit: u64) -> Result<(Vec<Entry>, u64), QError> {
        let (rows, total) = self
            .store
            .read(move |c| sql::list(c, LISTED, offset, limit))
            .map_err(store_err)?;
        Ok((rows.into_iter().map(entry_of).collect(), total))
    }

    pub fn get(&self, id: &str) -> Result<Entry, QError> {
        self.load(id).map(|(r, _)| entry_of(r))
    }

    /// Queue ids released in the last week (the scanner does not quarantine them again).
    pub fn released_queue_ids(&self) -> Vec<String> {
        let since = self.now() - jiff::SignedDuration::from_hours(24 * 7);
        self.store
            .read(move |c| sql::queue_ids(c, Q_RELEASED, since))
            .unwrap_or_default()
    }
}

fn entry_of(r: sql::Row) -> Entry {
    let meta: Meta = serde_json::from_str(&r.meta).unwrap_or_default();
    let files: Vec<SpoolFile> = serde_json::from_str(&r.files).unwrap_or_default();
    Entry {
        id: r.id,
        state: r.state,
        mta: r.mta,
        queue_id: r.queue_id,
        message_id: meta.message_id,
        sender: meta.sender,
        recipients: meta.recipients,
        subject: meta.subject,
        quarantined_at: jiff::Timestamp::from_microsecond(r.quarantined_at)
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH),
        verdicts: meta.verdicts,
        parts: meta.parts,
        incomplete: meta.incomplete,
        size: meta.size,
        files,
        error: r.error,
    }
}

/// Removes interrupted cross-filesystem copies (`.svc-move-*.part`) in `d`.
fn clean_parts(d: &Dir) {
    if let Ok((entries, _)) = d.entries(100_000) {
        for e in entries {
            let n = e.name.to_string_lossy();
            if n.starts_with(".svc-move-") && n.ends_with(".part") {
                let _ = d.unlink(&e.name);
            }
        }
    }
}

#[cfg(test)]
mod tests;
