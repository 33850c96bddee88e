//! The performance fixes (`/api/v1/perf/fix-*`): an emptied `error_log`, `display_errors`
//! off in a site's ini file, and WordPress's scheduler moved from page loads to the
//! account's crontab.

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;

use super::clean::{clean_file, Place};
use super::{changed, open_in_root, open_sole, shown, unchanged_since, FixError, Fixer};
use crate::checks::perf;
use crate::findings::Finding;
use crate::sys::dir::{self, Dir};

/// The line a WordPress fix adds to `wp-config.php`.
pub const DISABLE_WP_CRON_LINE: &str =
    "define( 'DISABLE_WP_CRON', true ); // svc: wp-cron.php runs from the account's crontab\n";

fn failed(path: &Path) -> impl Fn(std::io::Error) -> FixError + '_ {
    move |error| FixError::Failed {
        path: shown(path),
        error,
    }
}

fn dir_failed(path: &Path) -> impl Fn(dir::Error) -> FixError + '_ {
    move |e| FixError::Failed {
        path: shown(path),
        error: std::io::Error::new(e.kind(), e.to_string()),
    }
}

impl Fixer {
    /// The longest web root holding `path`.
    pub(super) fn web_root_of(&self, path: &Path) -> Result<std::path::PathBuf, FixError> {
        super::longest_root(self.web_roots(), path)
    }

    /// Empties a huge `error_log`: an empty file with its owner and mode takes its name (a
    /// writer that still holds the old one loses nothing it has not written).
    pub(super) fn truncate_error_log(
        &self,
        f: &Finding,
        path: &Path,
    ) -> Result<super::Fixed, FixError> {
        let (parent, _file, info) = open_sole(&self.web_roots(), path, None)?;
        unchanged_since(f, path, &info)?;
        if info.size < perf::HUGE_ERROR_LOG {
            return Err(changed(path, "no longer huge"));
        }
        let name = path.file_name().unwrap_or_default();
        let tmp = OsString::from(format!(".svc-empty-{}", crate::ids::random_hex(8)));
        let empty = parent.create_file(&tmp, 0o600).map_err(dir_failed(path))?;
        let made = dir::set_owner(&empty, info.uid, info.gid)
            .and_then(|()| dir::set_mode(&empty, info.mode))
            .and_then(|()| empty.sync_all());
        if let Err(e) = made.map_err(failed(path)).and_then(|()| {
            // Still the file that was checked: nothing else is replaced.
            let now = parent.lstat(name).map_err(dir_failed(path))?;
            match now {
                Some(n) if n.dev == info.dev && n.ino == info.ino => Ok(()),
                _ => Err(changed(path, "replaced while being emptied")),
            }
        }) {
            let _ = parent.unlink(&tmp);
            return Err(e);
        }
        if let Err(e) = parent.rename_replace(&tmp, &parent, name) {
            let _ = parent.unlink(&tmp);
            return Err(dir_failed(path)(e));
        }
        let _ = parent.sync();
        Ok(super::Fixed {
            action: super::FixAction::TruncateErrorLog,
            path: shown(path),
            previous_mode: None,
            quarantine_id: None,
            removed_lines: Vec::new(),
            backup_key: None,
        })
    }

    /// Sets `display_errors = Off` on the lines that turn it on (the file is kept first as
    /// a pre-clean backup).
    pub(super) fn display_errors_off(
        &self,
        f: &Finding,
        path: &Path,
    ) -> Result<super::Fixed, FixError> {
        let root = self.web_root_of(path)?;
        self.clean(f, path, (&root, None), |bytes| {
            let text = String::from_utf8_lossy(bytes);
            let lines = perf::display_errors_lines(&text);
            let mut out = String::with_capacity(text.len());
            for (i, l) in text.split_inclusive('\n').enumerate() {
                if lines.contains(&(i + 1)) {
                    out.push_str("display_errors = Off");
                    if l.ends_with('\n') {
                        out.push('\n');
                    }
                } else {
                    out.push_str(l);
                }
            }
            (out.into_bytes(), lines)
        })
    }

    /// Defines `DISABLE_WP_CRON` in `wp-config.php` (kept first as a pre-clean backup) and
    /// adds a line running the site's `wp-cron.php` every 15 minutes to the crontab of the
    /// site's account (created with mode 0600 when the account has none).
    ///
    /// The account is the site's ([`perf::site_account`]: the owner of the web root, or of
    /// the site's directory in a web root root owns), never the owner of `wp-config.php`,
    /// which a user can hard-link from anywhere; it must be a login account
    /// (`UID_MIN..=UID_MAX`, with a name), and `wp-config.php` must be its file alone. All of
    /// it is checked before anything changes.
    pub(super) fn cms_cron(&self, f: &Finding, path: &Path) -> Result<super::Fixed, FixError> {
        let root = self.web_root_of(path)?;
        let (root_uid, site_dir, _, _) = open_in_root(std::slice::from_ref(&root), path)?;
        let site_uid = dir::FileInfo::of(&site_dir).map_err(failed(path))?.uid;
        let uid = perf::site_account(root_uid, site_uid);
        let user = crate::checks::accounts::login_uid_range(&self.ctx)
            .contains(&uid)
            .then(|| nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)))
            .and_then(|u| u.ok().flatten())
            .filter(|u| crate::checks::cron::is_crontab_name(&u.name))
            .ok_or_else(|| FixError::NotAccount {
                path: shown(path),
                uid,
            })?;
        let site = path.parent().unwrap_or(Path::new("/"));
        let line = cron_line(site).ok_or_else(|| FixError::CronUnsafe { path: shown(path) })?;
        let spool = self
            .ctx
            .user_crontab_dirs
            .iter()
            .find(|d| Dir::walk_trusted(d).is_ok())
            .cloned()
            .ok_or_else(|| FixError::BadPath {
                path: shown(path),
                why: "no user crontab directory on this host",
            })?;
        let mut fixed = self.clean(f, path, (&root, Some(uid)), |bytes| {
            let text = String::from_utf8_lossy(bytes);
            if perf::defines_disable_wp_cron(&text) {
                return (bytes.to_vec(), Vec::new());
            }
            // Before the "stop editing" comment or the settings include, else at the end.
            let at = text
                .lines()
                .position(|l| l.contains("stop editing") || l.contains("wp-settings.php"));
            let mut out = String::with_capacity(text.len() + DISABLE_WP_CRON_LINE.len());
            let mut added = 0;
            for (i, l) in text.split_inclusive('\n').enumerate() {
                if Some(i) == at {
                    out.push_str(DISABLE_WP_CRON_LINE);
                    added = i + 1;
                }
                out.push_str(l);
            }
            if at.is_none() {
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str(DISABLE_WP_CRON_LINE);
                added = text.lines().count() + 1;
            }
            (out.into_bytes(), vec![added])
        })?;
        let owner = (uid, user.gid.as_raw());
        self.add_cron_line(f, &spool, &user.name, owner, &line)?;
        fixed.action = super::FixAction::DisableCmsCron;
        Ok(fixed)
    }

    /// Appends `line` to the account's crontab in `spool` unless it is there; a new crontab
    /// gets the owner `owner` and mode 0600, an existing one must be that account's alone.
    fn add_cron_line(
        &self,
        f: &Finding,
        spool: &Path,
        account: &str,
        owner: (u32, u32),
        line: &str,
    ) -> Result<(), FixError> {
        let tab = spool.join(account);
        let dir = Dir::walk_trusted(spool).map_err(dir_failed(&tab))?;
        match dir.lstat(account.as_ref()).map_err(dir_failed(&tab))? {
            None => {
                let mut file = dir
                    .create_file(account.as_ref(), 0o600)
                    .map_err(dir_failed(&tab))?;
                file.write_all(line.as_bytes())
                    .and_then(|()| dir::set_owner(&file, owner.0, owner.1))
                    .and_then(|()| dir::set_mode(&file, 0o600))
                    .and_then(|()| file.sync_all())
                    .map_err(failed(&tab))?;
                let _ = dir.sync();
                Ok(())
            }
            Some(_) => {
                let q = (self.quarantine)().ok_or(FixError::Unavailable)?;
                let at = Place {
                    store: &self.store,
                    clock: &self.clock,
                    quarantine_dir: q.quarantine.dir(),
                    root: spool,
                    account: Some(owner.0),
                };
                // The crontab is not the finding's file: it only must not be newer than now.
                let mut probe = f.clone();
                probe.last_seen = self.clock.now();
                match clean_file(&at, &probe, &tab, |bytes| {
                    if String::from_utf8_lossy(bytes).contains(line.trim_end()) {
                        return (bytes.to_vec(), Vec::new());
                    }
                    let mut out = bytes.to_vec();
                    if !out.is_empty() && !out.ends_with(b"\n") {
                        out.push(b'\n');
                    }
                    out.extend_from_slice(line.as_bytes());
                    (out, vec![bytes.split(|b| *b == b'\n').count()])
                }) {
                    Ok(_) => Ok(()),
                    // Already there.
                    Err(FixError::Changed { .. }) => Ok(()),
                    Err(e) => Err(e),
                }
            }
        }
    }
}

/// The crontab line running `wp-cron.php` in `site` every 15 minutes, or `None` when the path
/// cannot be carried safely: cron turns an unescaped `%` into a newline and treats `\\`
/// specially, a control character could end the line, and bytes that are not UTF-8 would be
/// written as another path. The path is single-quoted for the shell (`'` as `'\\''`), so
/// `$(...)`, backticks and `;` stay text.
pub fn cron_line(site: &Path) -> Option<String> {
    let text = site.to_str()?;
    if text
        .chars()
        .any(|c| c == '%' || c == '\\' || c.is_control())
    {
        return None;
    }
    Some(format!(
        "*/15 * * * * cd '{}' && php -q wp-cron.php >/dev/null 2>&1\n",
        text.replace('\'', "'\\''")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cron_lines_quote_the_path_and_refuse_what_cron_or_a_line_would_change() {
        assert_eq!(
            cron_line(Path::new("/home/u/public_html/s1")).as_deref(),
            Some(
                "*/15 * * * * cd '/home/u/public_html/s1' && php -q wp-cron.php >/dev/null 2>&1\n"
            )
        );
        let l = cron_line(Path::new("/home/u/a'b;$(id)`id`")).unwrap();
        assert!(l.contains("cd '/home/u/a'\\''b;$(id)`id`' &&"), "{l}");
        for bad in [
            "/home/u/50%",
            "/home/u/a\nb",
            "/home/u/a\\b",
            "/home/u/a\rb",
        ] {
            assert_eq!(cron_line(Path::new(bad)), None, "{bad:?}");
        }
        use std::os::unix::ffi::OsStrExt;
        let not_utf8 = std::ffi::OsStr::from_bytes(b"/home/u/\xff");
        assert_eq!(cron_line(Path::new(not_utf8)), None);
    }
}
