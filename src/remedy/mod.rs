//! Fixes of findings (issue 27): what a fix of a finding does ([`plan`]), applying it
//! ([`Fixer::apply`]) and whether the finding's condition still holds
//! ([`Fixer::still_holds`]).
//!
//! Every fix acts on the file the finding names, beneath a web root (`checks.web_roots`) or a
//! watched root (`files.watch`), through [`crate::sys::dir`]: no symlink is followed on the
//! way or at the file, nothing outside the root is reached. Before changing anything a fix
//! checks that the file is the one detected: still a regular file, not modified after the
//! finding was last seen, and still in the condition reported; otherwise it refuses with
//! [`FixError::Changed`] and changes nothing (re-verify first).
//!
//! Fixes:
//! - `world_writable_php`: mode 0644 (owner kept; the previous mode is reported).
//! - signature findings (`webshell`, `dropper`, `phishing`, `obfuscated_php`,
//!   `php_in_uploads`, `malicious_js`, `executable_in_uploads`): the file moves into the
//!   quarantine, restorable with `POST /api/v1/quarantine-restore`.

pub mod clean;
pub mod htaccess;
pub mod perf;
pub mod sitedb;

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::checks::CheckContext;
use crate::clock::SharedClock;
use crate::findings::Finding;
use crate::scan::quarantine::control::{quarantine_and_record, Cause, QuarantineControl};
use crate::store::Store;
use crate::sys::dir::{self, Dir, FileInfo, Kind, Refusal, SoleOwner};

/// Mode a writable PHP file gets.
pub const PHP_FIX_MODE: u32 = 0o644;

/// Signature categories whose file a fix moves into the quarantine.
pub const QUARANTINE_CHECKS: &[&str] = &[
    "webshell",
    "dropper",
    "phishing",
    "phishing_page",
    "obfuscated_php",
    "php_in_uploads",
    "malicious_js",
    "executable_in_uploads",
    "php_dropper",
    "staged_package_malware",
];

/// What a fix does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FixAction {
    /// Mode [`PHP_FIX_MODE`], owner kept.
    Chmod,
    /// Move into the quarantine (restorable).
    Quarantine,
    /// Remove the crontab lines of the reported threat (crontab kept as a backup entry).
    RemoveCronLines,
    /// Remove the injected directives (file kept as a pre-clean backup entry).
    CleanHtaccess,
    /// Empty a huge `error_log` (owner and mode kept).
    TruncateErrorLog,
    /// `display_errors = Off` in the site's ini file (kept as a pre-clean backup entry).
    DisplayErrorsOff,
    /// `DISABLE_WP_CRON` in `wp-config.php` and `wp-cron.php` in the account's crontab.
    DisableCmsCron,
    /// Clean an injected WordPress option (kept first in the database-object backups).
    CleanDbOption,
    /// Remove injected scripts and foreign iframes from a post (kept first in the
    /// database-object backups).
    CleanDbPost,
    /// Drop an injected trigger (its `SHOW CREATE` kept first in the database-object
    /// backups, restorable).
    DropDbTrigger,
    /// Drop an injected event (kept first like a trigger).
    DropDbEvent,
    /// Drop an injected procedure or function (kept first like a trigger).
    DropDbRoutine,
}

impl FixAction {
    /// What the fix will do, for people.
    pub fn description(self) -> &'static str {
        match self {
            FixAction::Chmod => {
                "Set the file's mode to 0644 (owner kept), so only its owner can change it."
            }
            FixAction::Quarantine => {
                "Move the file into the quarantine (restorable with quarantine-restore)."
            }
            FixAction::RemoveCronLines => "Remove the crontab lines of the reported kind only; the whole crontab is kept first as a pre-clean backup in the quarantine.",
            FixAction::CleanHtaccess => "Remove the injected directives only (PHP prepend/append files, PHP handlers for static files); the whole file is kept first as a pre-clean backup in the quarantine.",
            FixAction::TruncateErrorLog => "Empty the error_log (an empty file with the same owner and mode takes its place).",
            FixAction::DisplayErrorsOff => "Set display_errors = Off in the site's PHP settings file; the file is kept first as a pre-clean backup in the quarantine.",
            FixAction::CleanDbOption => "Put the site's own URL back into siteurl/home, or remove the injected scripts and foreign iframes from the widget option; the old value is kept first in the database-object backups (db-object-backups).",
            FixAction::CleanDbPost => "Remove the injected scripts and foreign iframes from the post's content; the old content is kept first in the database-object backups (db-object-backups).",
            FixAction::DropDbTrigger => "Drop the trigger; its exact CREATE statement is kept first in the database-object backups (db-object-backups) and can be put back with db-object-backups/restore.",
            FixAction::DropDbEvent => "Drop the event; its exact CREATE statement is kept first in the database-object backups (db-object-backups) and can be put back with db-object-backups/restore.",
            FixAction::DropDbRoutine => "Drop the procedure or function; its exact CREATE statement is kept first in the database-object backups (db-object-backups) and can be put back with db-object-backups/restore.",
            FixAction::DisableCmsCron => "Define DISABLE_WP_CRON in wp-config.php (kept first as a pre-clean backup) and run wp-cron.php from the site owner's crontab every 15 minutes.",
        }
    }
}

/// The fix of a finding of `check`, if it has one.
pub fn plan(check: &str) -> Option<FixAction> {
    match check {
        crate::checks::webroot::CHECK => Some(FixAction::Chmod),
        crate::checks::cron::CHECK => Some(FixAction::RemoveCronLines),
        "htaccess_injection" => Some(FixAction::CleanHtaccess),
        crate::checks::perf::ERROR_LOG_CHECK => Some(FixAction::TruncateErrorLog),
        crate::checks::perf::DISPLAY_ERRORS_CHECK => Some(FixAction::DisplayErrorsOff),
        crate::checks::perf::CMS_CRON_CHECK => Some(FixAction::DisableCmsCron),
        crate::checks::sitedb::OPTION_CHECK => Some(FixAction::CleanDbOption),
        crate::checks::sitedb::POST_CHECK => Some(FixAction::CleanDbPost),
        crate::checks::sitedb::TRIGGER_CHECK => Some(FixAction::DropDbTrigger),
        crate::checks::sitedb::EVENT_CHECK => Some(FixAction::DropDbEvent),
        crate::checks::sitedb::ROUTINE_CHECK => Some(FixAction::DropDbRoutine),
        c if QUARANTINE_CHECKS.contains(&c) => Some(FixAction::Quarantine),
        _ => None,
    }
}

/// Why a fix was not applied. Nothing was changed for any of them but [`FixError::Failed`]
/// after the change began (then the message says what).
#[derive(Debug)]
pub enum FixError {
    /// The finding's check has no fix.
    NoFix { check: String },
    /// The finding names no file.
    NoPath,
    /// The finding's path is not absolute, has `.` or `..` components, or lies beneath no
    /// root a fix may act in.
    BadPath { path: String, why: &'static str },
    /// The file is not the one detected (gone, replaced by a symlink or another kind,
    /// modified, or no longer in the reported condition).
    Changed { path: String, what: String },
    /// The quarantine is not available right now (the file watcher is restarting).
    Unavailable,
    /// The file is not the site's alone: it has other hard links, or its owner is not the
    /// site's account (nothing was changed).
    Refused { path: String, refusal: Refusal },
    /// The site's account is root, a system account or has no name: no crontab line is
    /// written for it.
    NotAccount { path: String, uid: u32 },
    /// The site's path cannot be written into a crontab line as it is (`%`, `\\`, control
    /// characters, bytes that are not UTF-8).
    CronUnsafe { path: String },
    /// The file system refused.
    Failed { path: String, error: std::io::Error },
    /// The site's database could not be read or written.
    Database {
        path: String,
        error: crate::store::sitedb::SiteDbError,
    },
}

impl FixError {
    /// The HTTP status of the refusal.
    pub fn status(&self) -> u16 {
        match self {
            FixError::NoFix { .. } | FixError::NoPath | FixError::BadPath { .. } => 400,
            FixError::Changed { .. } | FixError::Refused { .. } | FixError::NotAccount { .. } => {
                409
            }
            FixError::CronUnsafe { .. } => 400,
            FixError::Unavailable => 503,
            FixError::Failed { .. } | FixError::Database { .. } => 500,
        }
    }
}

impl FixError {
    /// The machine-readable reason of a refusal to act on a file that is not the site's
    /// alone (`reason` in the answer).
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            FixError::Refused { refusal, .. } => Some(refusal.reason()),
            FixError::NotAccount { .. } => Some("system_account"),
            _ => None,
        }
    }

    /// A file-system error, or the refusal it carries.
    fn of_io(path: &Path, error: std::io::Error) -> FixError {
        match dir::refusal_of(&error) {
            Some(refusal) => FixError::Refused {
                path: shown(path),
                refusal,
            },
            None => FixError::Failed {
                path: shown(path),
                error,
            },
        }
    }
}

impl std::fmt::Display for FixError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::text::escape_controls as esc;
        match self {
            FixError::NoFix { check } => write!(
                f,
                "findings of {} have no automatic fix; see the finding's fix text",
                esc(check)
            ),
            FixError::NoPath => write!(f, "the finding names no file to fix"),
            FixError::BadPath { path, why } => write!(f, "cannot fix {}: {why}", esc(path)),
            FixError::Changed { path, what } => write!(
                f,
                "{} changed since detection ({what}); verify the finding first",
                esc(path)
            ),
            FixError::Unavailable => {
                write!(
                    f,
                    "the quarantine is restarting (configuration reload); try again"
                )
            }
            FixError::Refused { path, refusal } => {
                write!(f, "refusing to fix {}: {refusal}", esc(path))
            }
            FixError::NotAccount { path, uid } => write!(
                f,
                "refusing to fix {}: the site's account (uid {uid}) is root, a system account or has no name; no crontab of it is changed",
                esc(path)
            ),
            FixError::CronUnsafe { path } => write!(
                f,
                "cannot fix {}: the site's path holds %, a backslash, a control character or bytes that are not UTF-8, which a crontab line cannot carry",
                esc(path)
            ),
            FixError::Failed { path, error } => write!(f, "fixing {} failed: {error}", esc(path)),
            FixError::Database { path, error } => {
                write!(f, "fixing the database of {} failed: {error}", esc(path))
            }
        }
    }
}

impl std::error::Error for FixError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FixError::Failed { error, .. } => Some(error),
            FixError::Database { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// A fix that was applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Fixed {
    pub action: FixAction,
    pub path: String,
    /// For a chmod: the mode before (octal text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_mode: Option<String>,
    /// For a quarantine: the entry's id; for a cleaning: the pre-clean backup's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantine_id: Option<String>,
    /// For a cleaning: the 1-based numbers of the removed lines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed_lines: Vec<usize>,
    /// For a database cleaning: the key of the database-object backup.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup_key: Option<String>,
}

/// The quarantine handles as they are now (`None` while the file watcher restarts).
pub type QuarantineSource = Arc<dyn Fn() -> Option<QuarantineControl> + Send + Sync>;

/// Applies fixes: the web roots of the checks, the quarantine of the file watcher.
pub struct Fixer {
    ctx: CheckContext,
    quarantine: QuarantineSource,
    store: Store,
    clock: SharedClock,
}

impl Fixer {
    pub fn new(
        ctx: CheckContext,
        quarantine: QuarantineSource,
        store: Store,
        clock: SharedClock,
    ) -> Fixer {
        Fixer {
            ctx,
            quarantine,
            store,
            clock,
        }
    }

    /// Applies the fix of `f`; see the module docs for what is checked first.
    pub fn apply(&self, f: &Finding) -> Result<Fixed, FixError> {
        let action = plan(&f.check).ok_or_else(|| FixError::NoFix {
            check: f.check.clone(),
        })?;
        let path = finding_path(f)?;
        match action {
            FixAction::Chmod => self.chmod(f, &path),
            FixAction::Quarantine => self.quarantine(f, &path),
            FixAction::RemoveCronLines => self.clean_cron(f, &path),
            FixAction::CleanHtaccess => self.clean_htaccess(f, &path),
            FixAction::TruncateErrorLog => self.truncate_error_log(f, &path),
            FixAction::DisplayErrorsOff => self.display_errors_off(f, &path),
            FixAction::DisableCmsCron => self.cms_cron(f, &path),
            FixAction::CleanDbOption => self.clean_db_option(f, &path),
            FixAction::CleanDbPost => self.clean_db_post(f, &path),
            FixAction::DropDbTrigger | FixAction::DropDbEvent | FixAction::DropDbRoutine => {
                self.drop_db_object(f, &path, action)
            }
        }
    }

    fn clean_cron(&self, f: &Finding, path: &Path) -> Result<Fixed, FixError> {
        use crate::checks::cron;
        let threat = cron::CronThreat::of_message(&f.message).ok_or_else(|| FixError::NoFix {
            check: f.check.clone(),
        })?;
        let (root, format) = cron::source_of(&self.ctx, path).ok_or_else(|| FixError::BadPath {
            path: shown(path),
            why: "not a crontab the checks read",
        })?;
        self.clean(f, path, (&root, None), |b| {
            cron::without_threat(b, format, threat)
        })
    }

    fn clean_htaccess(&self, f: &Finding, path: &Path) -> Result<Fixed, FixError> {
        let root = self.htaccess_root(path)?;
        self.clean(f, path, (&root, None), htaccess::without_injections)
    }

    /// The root an `.htaccess` lies beneath: a web root, or a watched root (the file
    /// watcher reports them).
    fn htaccess_root(&self, path: &Path) -> Result<PathBuf, FixError> {
        let mut roots = self.web_roots();
        if let Some(q) = (self.quarantine)() {
            roots.extend(q.quarantine.roots().iter().cloned());
        }
        longest_root(roots, path)
    }

    /// Cleans `path` beneath `root` with `edit` ([`clean::clean_file`]); the file must be
    /// owned by `account` (`None`: the owner of `root`).
    pub(crate) fn clean(
        &self,
        f: &Finding,
        path: &Path,
        (root, account): (&Path, Option<u32>),
        edit: impl FnOnce(&[u8]) -> (Vec<u8>, Vec<usize>),
    ) -> Result<Fixed, FixError> {
        let q = (self.quarantine)().ok_or(FixError::Unavailable)?;
        let at = clean::Place {
            store: &self.store,
            clock: &self.clock,
            quarantine_dir: q.quarantine.dir(),
            root,
            account,
        };
        let done = clean::clean_file(&at, f, path, edit)?;
        Ok(Fixed {
            action: plan(&f.check).unwrap_or(FixAction::CleanHtaccess),
            path: shown(path),
            previous_mode: None,
            quarantine_id: Some(done.backup_id),
            removed_lines: done.removed_lines,
            backup_key: None,
        })
    }

    /// Whether the condition `f` reports still holds on disk (`None`: this finding cannot
    /// be re-checked here).
    pub fn still_holds(&self, f: &Finding) -> Option<bool> {
        let action = plan(&f.check)?;
        let path = finding_path(f).ok()?;
        let roots = match action {
            FixAction::Quarantine => {
                let mut roots = (self.quarantine)()?.quarantine.roots().to_vec();
                roots.extend(self.web_roots());
                roots
            }
            FixAction::Chmod | FixAction::TruncateErrorLog => self.web_roots(),
            _ => return self.cleaning_still_needed(f, action, &path),
        };
        Some(match open_beneath(&roots, &path) {
            Ok((_, _, info)) => match action {
                FixAction::Chmod => info.mode & 0o002 != 0,
                FixAction::TruncateErrorLog => info.size >= crate::checks::perf::HUGE_ERROR_LOG,
                _ => true,
            },
            Err(_) => false,
        })
    }

    /// Whether a cleaning fix would still find something to change in the file: the same
    /// edit the fix applies, run on the file's text (read beneath its root, no symlink
    /// followed). A file that is gone no longer holds the condition; a file too large to
    /// clean, or a finding whose kind cannot be read back, cannot be re-checked (`None`).
    fn cleaning_still_needed(&self, f: &Finding, action: FixAction, path: &Path) -> Option<bool> {
        use crate::checks::{cron, perf};
        let (root, cron_format) = match action {
            FixAction::RemoveCronLines => {
                let (root, format) = cron::source_of(&self.ctx, path)?;
                (root, Some(format))
            }
            FixAction::CleanHtaccess => (self.htaccess_root(path).ok()?, None),
            _ => (self.web_root_of(path).ok()?, None),
        };
        let Ok((_, file, info)) = open_beneath(&[root], path) else {
            return Some(false);
        };
        if info.size > clean::MAX_CLEAN_BYTES {
            return None;
        }
        let bytes = clean::read_bounded(&file, info.size).ok()?;
        let text = || String::from_utf8_lossy(&bytes).into_owned();
        Some(match action {
            FixAction::RemoveCronLines => {
                let threat = cron::CronThreat::of_message(&f.message)?;
                !cron::without_threat(&bytes, cron_format?, threat)
                    .1
                    .is_empty()
            }
            FixAction::CleanHtaccess => !htaccess::without_injections(&bytes).1.is_empty(),
            FixAction::DisplayErrorsOff => !perf::display_errors_lines(&text()).is_empty(),
            FixAction::DisableCmsCron => !perf::defines_disable_wp_cron(&text()),
            _ => return None,
        })
    }

    pub(crate) fn web_roots(&self) -> Vec<PathBuf> {
        self.ctx.glob_all(&self.ctx.web_roots)
    }

    fn chmod(&self, f: &Finding, path: &Path) -> Result<Fixed, FixError> {
        let (_dir, file, info) = open_sole(&self.web_roots(), path, None)?;
        unchanged_since(f, path, &info)?;
        if info.mode & 0o002 == 0 {
            return Err(changed(path, "no longer writable by others"));
        }
        dir::set_mode(&file, PHP_FIX_MODE).map_err(|error| FixError::Failed {
            path: shown(path),
            error,
        })?;
        Ok(Fixed {
            action: FixAction::Chmod,
            path: shown(path),
            previous_mode: Some(format!("{:04o}", info.mode)),
            quarantine_id: None,
            removed_lines: Vec::new(),
            backup_key: None,
        })
    }

    fn quarantine(&self, f: &Finding, path: &Path) -> Result<Fixed, FixError> {
        let q = (self.quarantine)().ok_or(FixError::Unavailable)?;
        // The watched roots and the web roots (scheduled checks find files in the latter);
        // each record keeps its root, so the watcher's quarantine restores it.
        let mut roots = q.quarantine.roots().to_vec();
        roots.extend(self.web_roots());
        let (_dir, _file, info) = open_sole(&roots, path, None)?;
        unchanged_since(f, path, &info)?;
        let cause = Cause {
            check: &f.check,
            reason: "fix through the API",
            account: f.account.as_deref(),
        };
        let quarantine =
            crate::scan::quarantine::Quarantine::new(q.quarantine.dir().to_path_buf(), roots);
        // The quarantine opens the file again without following links and moves it only if
        // it is still a regular file (a swap in between is refused there).
        let (id, _) = quarantine_and_record(&self.store, &quarantine, &self.clock, path, &cause)
            .map_err(|error| match error.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::InvalidInput => {
                    changed(path, &error.to_string())
                }
                _ => FixError::of_io(path, error),
            })?;
        Ok(Fixed {
            action: FixAction::Quarantine,
            path: shown(path),
            previous_mode: None,
            quarantine_id: Some(id),
            removed_lines: Vec::new(),
            backup_key: None,
        })
    }
}

fn shown(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn changed(path: &Path, what: &str) -> FixError {
    FixError::Changed {
        path: shown(path),
        what: what.to_string(),
    }
}

/// The longest of `roots` strictly containing `path`.
fn longest_root(roots: Vec<PathBuf>, path: &Path) -> Result<PathBuf, FixError> {
    roots
        .into_iter()
        .filter(|r| {
            path.strip_prefix(r)
                .is_ok_and(|rel| !rel.as_os_str().is_empty())
        })
        .max_by_key(|r| r.components().count())
        .ok_or_else(|| FixError::BadPath {
            path: shown(path),
            why: "not beneath a root fixes may act in",
        })
}

/// The finding's path: absolute, only normal components (no `.`, `..`).
fn finding_path(f: &Finding) -> Result<PathBuf, FixError> {
    let p = f.path.as_deref().ok_or(FixError::NoPath)?;
    let path = PathBuf::from(p);
    let bad = |why| FixError::BadPath {
        path: p.to_string(),
        why,
    };
    if !path.is_absolute() {
        return Err(bad("not an absolute path"));
    }
    // Checked on the text: `Path::components` drops inner `.` components.
    if p.split('/').any(|seg| seg == "." || seg == "..")
        || path
            .components()
            .any(|c| !matches!(c, Component::RootDir | Component::Normal(_)))
    {
        return Err(bad("the path has . or .. components"));
    }
    if p.ends_with('/') {
        return Err(bad("not a file name"));
    }
    Ok(path)
}

/// Opens the regular file `path` beneath the longest of `roots` containing it, following
/// no symlink beneath the root: (its directory, the file, its status).
fn open_beneath(
    roots: &[PathBuf],
    path: &Path,
) -> Result<(Dir, std::fs::File, FileInfo), FixError> {
    open_in_root(roots, path).map(|(_, d, file, info)| (d, file, info))
}

/// [`open_beneath`], with the owner of the root first.
fn open_in_root(
    roots: &[PathBuf],
    path: &Path,
) -> Result<(u32, Dir, std::fs::File, FileInfo), FixError> {
    let (root, rel) = roots
        .iter()
        .filter_map(|r| Some((r, path.strip_prefix(r).ok()?)))
        .filter(|(_, rel)| !rel.as_os_str().is_empty())
        .max_by_key(|(r, _)| r.components().count())
        .ok_or_else(|| FixError::BadPath {
            path: shown(path),
            why: "not beneath a root fixes may act in",
        })?;
    let name: &OsStr = rel.file_name().ok_or_else(|| FixError::BadPath {
        path: shown(path),
        why: "not a file name",
    })?;
    let parent = rel.parent().unwrap_or(Path::new(""));
    let gone = |e: dir::Error| match e {
        dir::Error::Io { ref source, .. } if source.kind() != std::io::ErrorKind::NotFound => {
            FixError::Failed {
                path: shown(path),
                error: std::io::Error::new(source.kind(), e.to_string()),
            }
        }
        e => changed(path, &e.to_string()),
    };
    let failed = |error| FixError::Failed {
        path: shown(path),
        error,
    };
    let top = Dir::walk_trusted(root).map_err(gone)?;
    let root_uid = FileInfo::of(&top).map_err(failed)?.uid;
    let d = top.open_beneath(parent).map_err(gone)?;
    let file = d.open_regular(name).map_err(gone)?;
    let info = FileInfo::of(&file).map_err(failed)?;
    if info.kind != Kind::File {
        return Err(changed(path, "not a regular file"));
    }
    Ok((root_uid, d, file, info))
}

/// [`open_beneath`] for a fix that changes the file: the opened descriptor must be the
/// site's alone (one link; owned by `account`, or else by the owner of the root it lies
/// beneath: [`SoleOwner`]), checked on that descriptor, which the fix then acts through.
fn open_sole(
    roots: &[PathBuf],
    path: &Path,
    account: Option<u32>,
) -> Result<(Dir, std::fs::File, FileInfo), FixError> {
    let (root_uid, d, file, info) = open_in_root(roots, path)?;
    let sole = match account {
        Some(uid) => SoleOwner::account(uid),
        None => SoleOwner::of_root(root_uid),
    };
    sole.check(&info).map_err(|refusal| FixError::Refused {
        path: shown(path),
        refusal,
    })?;
    Ok((d, file, info))
}

/// Refuses a file modified after the finding was last seen.
fn unchanged_since(f: &Finding, path: &Path, info: &FileInfo) -> Result<(), FixError> {
    let mtime = jiff::Timestamp::new(info.mtime.0, info.mtime.1 as i32).ok();
    if mtime.is_some_and(|m| m > f.last_seen) {
        return Err(changed(path, "modified after it was last seen"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Severity;

    fn finding(check: &str, path: &str) -> Finding {
        Finding::new(check, Severity::High, "m", jiff::Timestamp::now()).with_path(path)
    }

    #[test]
    fn plans_and_path_rules() {
        assert_eq!(plan("world_writable_php"), Some(FixAction::Chmod));
        assert_eq!(plan("webshell"), Some(FixAction::Quarantine));
        assert_eq!(plan("uid0_account"), None);
        assert!(finding_path(&finding("webshell", "/var/www/a.php")).is_ok());
        for bad in [
            "var/www/a.php",
            "/var/www/../etc/passwd",
            "/var/./a.php",
            "/var/www/",
        ] {
            let e = finding_path(&finding("webshell", bad)).unwrap_err();
            assert_eq!(e.status(), 400, "{bad}: {e}");
        }
        let none = Finding::new("webshell", Severity::High, "m", jiff::Timestamp::now());
        assert_eq!(finding_path(&none).unwrap_err().status(), 400);
    }

    /// verify-finding on cleanings: the fix's own edit run on the file decides; a file
    /// cleaned by hand or gone no longer holds; one over the cleaning limit or a finding
    /// with no file cannot be re-checked here.
    #[test]
    fn cleanings_are_rechecked_with_the_fixs_own_edit() {
        use crate::clock::ManualClock;
        use crate::watch::tail::testutil::TempDir;
        let dir = TempDir::new("remedy-verify");
        let www = dir.path().join("www");
        std::fs::create_dir_all(www.join("site")).unwrap();
        let clock: SharedClock = ManualClock::at_epoch_2026();
        let ctx = CheckContext::builder(clock.clone())
            .web_roots([www.clone()])
            .build();
        let store = Store::open(&dir.path().join("svc.db")).unwrap();
        let fixer = Fixer::new(ctx, Arc::new(|| None), store, clock);
        let holds = |check: &str, file: &str, text: &str| {
            let path = www.join("site").join(file);
            std::fs::write(&path, text).unwrap();
            fixer.still_holds(&finding(check, &path.display().to_string()))
        };
        let ht = "RewriteEngine On\nphp_value auto_prepend_file /tmp/.cache.php\n";
        assert_eq!(holds("htaccess_injection", ".htaccess", ht), Some(true));
        let clean = "RewriteEngine On\n";
        assert_eq!(holds("htaccess_injection", ".htaccess", clean), Some(false));
        let ini = "display_errors = On\n";
        assert_eq!(holds("php_display_errors", ".user.ini", ini), Some(true));
        let ini = "display_errors = Off\n";
        assert_eq!(holds("php_display_errors", ".user.ini", ini), Some(false));
        let wp = "<?php\n$table_prefix = 'wp_';\n";
        assert_eq!(holds("perf_cms_cron", "wp-config.php", wp), Some(true));
        let wp = "<?php\ndefine('DISABLE_WP_CRON', true);\n";
        assert_eq!(holds("perf_cms_cron", "wp-config.php", wp), Some(false));
        let big = "#".repeat(clean::MAX_CLEAN_BYTES as usize + 1);
        assert_eq!(holds("htaccess_injection", ".htaccess", &big), None);
        let gone = www.join("site/none/.user.ini").display().to_string();
        assert_eq!(
            fixer.still_holds(&finding("php_display_errors", &gone)),
            Some(false)
        );
        let no_file = Finding::new(
            "php_display_errors",
            Severity::High,
            "m",
            jiff::Timestamp::now(),
        );
        assert_eq!(fixer.still_holds(&no_file), None);
    }
}
