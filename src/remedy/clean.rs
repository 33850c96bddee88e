//! Removing lines from a file in place, with the whole file kept first as a "pre-clean
//! backup" quarantine entry (listed by `GET /api/v1/quarantine`).
//!
//! Only a file that is the site's alone is cleaned (one link, the site's owner, checked on
//! the opened descriptor: `sys::dir::SoleOwner`); the edit is a new file renamed into
//! place, so no other name of an inode ever sees it.
//!
//! The cleaned text is written to a new file beside the original (same owner and mode,
//! synced), the original is moved into the quarantine (the backup: its entry keeps the
//! path, owner, mode and times), then the new file takes its name (no replace: if anything
//! appeared there meanwhile, nothing is overwritten). If the file moved into the quarantine
//! is not the one read (its SHA-256 differs), it is put back and the fix refused.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::{changed, open_sole, shown, unchanged_since, FixError};
use crate::clock::SharedClock;
use crate::findings::Finding;
use crate::scan::quarantine::control::{quarantine_and_record, Cause};
use crate::scan::quarantine::Quarantine;
use crate::store::Store;
use crate::sys::dir;

/// Largest file a fix cleans.
pub const MAX_CLEAN_BYTES: u64 = 1024 * 1024;

/// Reason of the backup entries.
pub const PRE_CLEAN_BACKUP: &str = "pre-clean backup";

/// A cleaned file: its backup entry and the removed line numbers.
pub struct Cleaned {
    pub backup_id: String,
    pub removed_lines: Vec<usize>,
}

/// Where a cleaning happens and is kept.
pub struct Place<'a> {
    pub store: &'a Store,
    pub clock: &'a SharedClock,
    /// The quarantine directory (the backup goes there).
    pub quarantine_dir: &'a Path,
    /// The root the file lies beneath (nothing above it is followed or touched).
    pub root: &'a Path,
    /// The uid that must own the file; `None`: the owner of `root` (any owner when root
    /// owns it). The file must have no other hard link either way.
    pub account: Option<u32>,
}

/// The text of a file of `size` bytes a cleaning reads: at most [`MAX_CLEAN_BYTES`] + 1
/// (callers refuse larger files first; the extra byte shows one that grew meanwhile).
pub fn read_bounded(file: &std::fs::File, size: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(size.min(MAX_CLEAN_BYTES) as usize);
    file.take(MAX_CLEAN_BYTES + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Cleans `path` with `edit` (the new content and the removed line numbers); refuses with
/// [`FixError::Changed`] when the file is not the one detected or nothing is left to
/// remove.
pub fn clean_file(
    at: &Place<'_>,
    f: &Finding,
    path: &Path,
    edit: impl FnOnce(&[u8]) -> (Vec<u8>, Vec<usize>),
) -> Result<Cleaned, FixError> {
    let failed = |error: std::io::Error| FixError::Failed {
        path: shown(path),
        error,
    };
    let (parent, file, info) = open_sole(&[at.root.to_path_buf()], path, at.account)?;
    unchanged_since(f, path, &info)?;
    if info.size > MAX_CLEAN_BYTES {
        return Err(FixError::BadPath {
            path: shown(path),
            why: "the file is too large to clean (over 1 MiB)",
        });
    }
    let bytes = read_bounded(&file, info.size).map_err(failed)?;
    let (cleaned, removed) = edit(&bytes);
    if removed.is_empty() {
        return Err(changed(path, "no line to remove any more"));
    }
    let name = path.file_name().unwrap_or_default();
    let tmp = OsString::from(format!(".svc-clean-{}", crate::ids::random_hex(8)));
    let mut new = parent
        .create_file(&tmp, 0o600)
        .map_err(|e| failed(std::io::Error::new(e.kind(), e.to_string())))?;
    let written = new
        .write_all(&cleaned)
        .and_then(|()| dir::set_owner(&new, info.uid, info.gid))
        .and_then(|()| dir::set_mode(&new, info.mode))
        .and_then(|()| new.sync_all());
    let drop_tmp = || {
        let _ = parent.unlink(&tmp);
    };
    if let Err(e) = written {
        drop_tmp();
        return Err(failed(e));
    }
    let quarantine = Quarantine::new(at.quarantine_dir.to_path_buf(), vec![at.root.to_path_buf()]);
    let cause = Cause {
        check: &f.check,
        reason: PRE_CLEAN_BACKUP,
        account: f.account.as_deref(),
    };
    let (backup_id, record) =
        match quarantine_and_record(at.store, &quarantine, at.clock, path, &cause) {
            Ok(r) => r,
            Err(e) => {
                drop_tmp();
                return Err(match e.kind() {
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::InvalidInput => {
                        changed(path, &e.to_string())
                    }
                    _ => FixError::of_io(path, e),
                });
            }
        };
    if record.sha256 != hex::encode(Sha256::digest(&bytes)) {
        // Replaced between the read and the move: put it back, change nothing.
        drop_tmp();
        let back = quarantine.restore(&record);
        let id = backup_id.clone();
        let now = at.clock.now();
        let _ = at
            .store
            .write(move |c| crate::store::quarantine::mark_restored(c, &id, now));
        if let Err(e) = back {
            log::error!("fix: {} changed while cleaned and could not be put back: {e}; it is quarantine entry {backup_id}", shown(path));
        }
        return Err(changed(path, "modified while it was being cleaned"));
    }
    if let Err(e) = parent.rename_noreplace(&tmp, &parent, name) {
        drop_tmp();
        log::error!(
            "fix: {} is in quarantine as {backup_id} but its cleaned copy could not take its place: {e}",
            shown(path)
        );
        return Err(failed(std::io::Error::new(
            e.kind(),
            format!("{e}; the original is quarantine entry {backup_id}"),
        )));
    }
    let _ = parent.sync();
    Ok(Cleaned {
        backup_id,
        removed_lines: removed,
    })
}

/// The automatic response's cleaning of `.htaccess` and `.user.ini` injections (the file
/// watcher calls it through `watch::analyzer::InjectionCleaner`): the fix's own edit
/// ([`super::htaccess::without_injections`]) and guarantees, beneath the watched root of
/// `path`, with the backup in the watcher's quarantine.
pub struct AutoClean {
    pub store: Store,
    pub clock: SharedClock,
}

impl crate::watch::analyzer::InjectionCleaner for AutoClean {
    fn clean(
        &self,
        quarantine: &Quarantine,
        path: &Path,
        check: &str,
        account: Option<&str>,
    ) -> Result<String, String> {
        let root =
            super::longest_root(quarantine.roots().to_vec(), path).map_err(|e| e.to_string())?;
        let at = Place {
            store: &self.store,
            clock: &self.clock,
            quarantine_dir: quarantine.dir(),
            root: &root,
            account: None,
        };
        // Just scanned: the content the cleaning reads is what it edits (the backup's SHA-256
        // is checked against it), so no age test applies.
        let mut probe = Finding::new(
            check,
            crate::findings::Severity::High,
            "automatic response",
            jiff::Timestamp::MAX,
        );
        probe.account = account.map(str::to_string);
        clean_file(&at, &probe, path, super::htaccess::without_injections)
            .map(|done| done.backup_id)
            .map_err(|e| e.to_string())
    }
}
