//! The quarantine's control-socket commands (`svc quarantine list`, `svc quarantine restore
//! ID`), served from the daemon's command table with the handles in [`QuarantineControl`].
//! A restore loads the entry from the store, puts the file back through
//! [`Quarantine::restore`] and records the restore.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::clock::SharedClock;
use crate::store::{Store, StoreError};
use crate::text::escape_controls;

use super::{Quarantine, QuarantineRecord};

/// A restore that happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoredEntry {
    pub id: String,
    /// As stored with the entry (lossy UTF-8 of the original path).
    pub original_path: String,
}

/// Why a restore did not happen. Messages escape control and bidirectional characters of
/// ids and paths.
#[derive(Debug)]
pub enum RestoreError {
    NoEntry(String),
    AlreadyRestored(String),
    Store(StoreError),
    UnreadableRecord {
        id: String,
        error: serde_json::Error,
    },
    /// The file system refused (the message names the path and, for a swapped directory,
    /// the component).
    Failed {
        original_path: String,
        error: io::Error,
    },
}

impl fmt::Display for RestoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestoreError::NoEntry(id) => {
                write!(f, "no quarantine entry \"{}\"", escape_controls(id))
            }
            RestoreError::AlreadyRestored(id) => {
                write!(f, "{} was already restored", escape_controls(id))
            }
            RestoreError::Store(e) => write!(f, "cannot read quarantine: {e}"),
            RestoreError::UnreadableRecord { id, error } => write!(
                f,
                "quarantine record {} is unreadable: {error}",
                escape_controls(id)
            ),
            // io errors from the quarantine already escape the paths they name.
            RestoreError::Failed {
                original_path,
                error,
            } => write!(
                f,
                "cannot restore {}: {error}",
                escape_controls(original_path)
            ),
        }
    }
}

impl std::error::Error for RestoreError {}

/// Where restored content is trusted: the file watcher leaves that exact content at that
/// path alone (`watch::analyzer::Restored`).
pub trait TrustRestored {
    /// Trust `sha256` at `path` (called before the file reappears).
    fn trust(&self, path: PathBuf, sha256: String);
    /// Withdraw that trust again (the restore failed).
    fn forget(&self, path: &Path, sha256: &str);
}

/// The stored entry `id`.
fn load_entry(store: &Store, id: &str) -> Result<crate::store::quarantine::Entry, RestoreError> {
    match store.read(|c| crate::store::quarantine::get(c, id)) {
        Ok(Some(e)) => Ok(e),
        Ok(None) => Err(RestoreError::NoEntry(id.to_string())),
        Err(e) => Err(RestoreError::Store(e)),
    }
}

/// The mechanics record of `entry`.
fn record_of(entry: &crate::store::quarantine::Entry) -> Result<QuarantineRecord, RestoreError> {
    serde_json::from_value(entry.record.clone()).map_err(|error| RestoreError::UnreadableRecord {
        id: entry.id.clone(),
        error,
    })
}

/// Restores the quarantine entry `id`: the content is trusted at its path before the file
/// reappears (and the trust withdrawn if the restore fails), then the file is put back and
/// the entry marked restored at `clock.now()`. A failure to record the restore is logged
/// (the file is back either way).
pub fn restore_entry(
    store: &Store,
    quarantine: &Quarantine,
    clock: &SharedClock,
    id: &str,
    trusted: &dyn TrustRestored,
) -> Result<RestoredEntry, RestoreError> {
    let entry = load_entry(store, id)?;
    if entry.restored_at.is_some() {
        return Err(RestoreError::AlreadyRestored(id.to_string()));
    }
    let record = record_of(&entry)?;
    let path = record.original_path_buf().ok();
    if let Some(p) = &path {
        trusted.trust(p.clone(), record.sha256.clone());
    }
    if let Err(error) = quarantine.restore(&record) {
        if let Some(p) = &path {
            trusted.forget(p, &record.sha256);
        }
        return Err(RestoreError::Failed {
            original_path: entry.original_path.clone(),
            error,
        });
    }
    let now = clock.now();
    let idc = id.to_string();
    if let Err(e) = store.write(move |c| crate::store::quarantine::mark_restored(c, &idc, now)) {
        log::warn!(
            "restored {} but could not record it: {e}",
            escape_controls(id)
        );
    }
    log::info!(
        "restored {} from quarantine ({})",
        escape_controls(&entry.original_path),
        escape_controls(id)
    );
    Ok(RestoredEntry {
        id: id.to_string(),
        original_path: entry.original_path,
    })
}

/// Why a record is kept: the check that found the file and the cause (`signature RULE`, `fix
/// through the API`), with the account owning it.
pub struct Cause<'a> {
    pub check: &'a str,
    pub reason: &'a str,
    pub account: Option<&'a str>,
}

/// Moves the file at `path` into the quarantine under a fresh id and stores its entry;
/// returns the id and the record. When the entry cannot be stored the file stays safe in quarantine and its
/// record is logged so it can be restored by hand.
pub fn quarantine_and_record(
    store: &Store,
    quarantine: &Quarantine,
    clock: &SharedClock,
    path: &Path,
    cause: &Cause<'_>,
) -> io::Result<(String, QuarantineRecord)> {
    let id = crate::ids::random_hex(8);
    let record = quarantine.quarantine(path, &id)?;
    let json = serde_json::to_string(&record).unwrap_or_default();
    let (idc, p, c, r, o, at) = (
        id.clone(),
        path.display().to_string(),
        cause.check.to_string(),
        cause.reason.to_string(),
        cause.account.map(String::from),
        clock.now(),
    );
    let stored = store.write(move |conn| {
        crate::store::quarantine::insert(conn, &idc, &json, &p, &c, &r, o.as_deref(), at)
    });
    if let Err(e) = stored {
        log::error!(
            "quarantine: {} moved as {id} but its record was not stored: {e}; record: {}",
            crate::text::escape_path(path),
            escape_controls(&serde_json::to_string(&record).unwrap_or_default())
        );
    }
    Ok((id, record))
}

/// Deletes the quarantine entry `id` for good: the quarantined copy (none is left once
/// restored), then the entry.
pub fn delete_entry(store: &Store, quarantine: &Quarantine, id: &str) -> Result<(), RestoreError> {
    let entry = load_entry(store, id)?;
    if entry.restored_at.is_none() {
        let record = record_of(&entry)?;
        match quarantine.purge(&record) {
            Ok(()) => {}
            // Already gone from the directory: the entry is all that is left.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(RestoreError::Failed {
                    original_path: entry.original_path,
                    error,
                })
            }
        }
    }
    let idc = id.to_string();
    store
        .write(move |c| crate::store::quarantine::delete(c, &idc))
        .map_err(RestoreError::Store)?;
    log::info!(
        "deleted quarantine entry {} ({})",
        escape_controls(id),
        escape_controls(&entry.original_path)
    );
    Ok(())
}

/// What the quarantine commands need: explicit handles (the file watcher supplies the
/// quarantine on its current roots and where restored content is trusted).
#[derive(Clone)]
pub struct QuarantineControl {
    pub store: Store,
    pub quarantine: Arc<Quarantine>,
    pub restored: Arc<dyn TrustRestored + Send + Sync>,
    pub clock: SharedClock,
}

/// Control-socket commands `quarantine.list` and `quarantine.restore {id}`; `None` for any
/// other command. JSON fields keep the exact stored text (JSON escapes it); composed `error`
/// messages escape control and bidirectional characters.
pub fn command(h: &QuarantineControl, cmd: &str, args: &Value) -> Option<Value> {
    match cmd {
        "quarantine.list" => Some(list(h)),
        "quarantine.restore" => {
            let id = args.get("id").and_then(Value::as_str).unwrap_or("");
            Some(restore(h, id))
        }
        _ => None,
    }
}

/// `quarantine.list`: every entry, restored ones included.
pub fn list(h: &QuarantineControl) -> Value {
    match h.store.read(crate::store::quarantine::list) {
        Ok(items) => json!({ "items": items, "total": items.len() }),
        Err(e) => json!({ "error": format!("cannot read quarantine: {e}") }),
    }
}

/// `quarantine.restore`: puts a quarantined file back exactly (path, owner, mode, mtime)
/// beneath its watched root and records it (see [`restore_entry`]).
pub fn restore(h: &QuarantineControl, id: &str) -> Value {
    match restore_entry(&h.store, &h.quarantine, &h.clock, id, h.restored.as_ref()) {
        Ok(r) => json!({ "ok": true, "id": r.id, "original_path": r.original_path }),
        Err(e) => {
            log::warn!("quarantine: {e}");
            json!({ "error": e.to_string() })
        }
    }
}
