//! [`CheckContext`]: every path a check reads, its limits and its counters.
//!
//! Checks never hard-code a system path: they read it from the context, so tests point them
//! at fixture trees. [`CheckContext::system`] gives the real layout; [`CheckContext::builder`]
//! starts from an empty context (nothing configured, nothing read) for tests, and
//! [`CheckContextBuilder::system_layout`] re-roots the whole real layout under a directory.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;

use crate::clock::SharedClock;
use crate::hostfs::{glob, read_bounded, reroot, rerooted, ReadError};

/// Limits every check enforces. What a limit refuses is counted in [`CheckCounters`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckLimits {
    /// Directory entries one check run may look at, over all its roots (default 200,000).
    pub max_walk_entries: usize,
    /// Directory depth below a root the walker descends to (default 64).
    pub max_walk_depth: usize,
    /// Largest config file (passwd, sshd_config, crontab, php.ini, mountinfo) read, in bytes.
    pub max_file_bytes: u64,
    /// Nesting depth of sshd `Include` (OpenSSH itself stops at 16).
    pub max_include_depth: usize,
    /// Files one sshd configuration may pull in through `Include`.
    pub max_included_files: usize,
    /// Paths one glob pattern may expand to.
    pub max_glob_matches: usize,
    /// Findings one check run may return (two summary findings may follow).
    pub max_findings_per_check: usize,
}

impl Default for CheckLimits {
    fn default() -> Self {
        CheckLimits {
            max_walk_entries: 200_000,
            max_walk_depth: 64,
            max_file_bytes: 4 * 1024 * 1024,
            max_include_depth: 16,
            max_included_files: 256,
            max_glob_matches: 4096,
            max_findings_per_check: 1000,
        }
    }
}

/// Cumulative counters shared by every clone of a context (since it was built).
#[derive(Debug, Default)]
pub struct CheckCounters {
    pub(crate) entries_walked: AtomicU64,
    pub(crate) walks_truncated: AtomicU64,
    pub(crate) depth_refused: AtomicU64,
    pub(crate) symlinks_skipped: AtomicU64,
    pub(crate) read_errors: AtomicU64,
    pub(crate) files_too_large: AtomicU64,
    pub(crate) includes_refused: AtomicU64,
    pub(crate) glob_matches_refused: AtomicU64,
    pub(crate) findings_refused: AtomicU64,
    pub(crate) unparsed_lines: AtomicU64,
    pub(crate) check_panics: AtomicU64,
}

/// A copy of [`CheckCounters`] at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CounterSnapshot {
    /// Directory entries looked at.
    pub entries_walked: u64,
    /// Check runs whose walk stopped at `max_walk_entries`.
    pub walks_truncated: u64,
    /// Directories not entered because of `max_walk_depth`.
    pub depth_refused: u64,
    /// Symbolic links not followed (inside walks, or roots not owned by root).
    pub symlinks_skipped: u64,
    /// Permission errors, vanished files, I/O errors, non-regular config files.
    pub read_errors: u64,
    /// Config files larger than `max_file_bytes`, not read.
    pub files_too_large: u64,
    /// sshd `Include`s refused by depth or file-count limits.
    pub includes_refused: u64,
    /// Glob results dropped by `max_glob_matches`.
    pub glob_matches_refused: u64,
    /// Findings dropped by `max_findings_per_check`.
    pub findings_refused: u64,
    /// Lines of outside files that did not parse (skipped).
    pub unparsed_lines: u64,
    /// Checks that panicked (caught by `run_all`).
    pub check_panics: u64,
}

impl CheckCounters {
    pub fn snapshot(&self) -> CounterSnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CounterSnapshot {
            entries_walked: g(&self.entries_walked),
            walks_truncated: g(&self.walks_truncated),
            depth_refused: g(&self.depth_refused),
            symlinks_skipped: g(&self.symlinks_skipped),
            read_errors: g(&self.read_errors),
            files_too_large: g(&self.files_too_large),
            includes_refused: g(&self.includes_refused),
            glob_matches_refused: g(&self.glob_matches_refused),
            findings_refused: g(&self.findings_refused),
            unparsed_lines: g(&self.unparsed_lines),
            check_panics: g(&self.check_panics),
        }
    }
}

/// Adds `n` to a counter.
pub(crate) fn count(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// Everything a check reads. `None` / empty list = not configured: the check reads nothing
/// for it. Paths in `web_roots`, `suid_search_roots` and `php_ini_paths` may hold glob
/// patterns (`*`, `?`, `[...]`), expanded at every run.
#[derive(Clone)]
pub struct CheckContext {
    /// `/etc/passwd`.
    pub passwd_path: Option<PathBuf>,
    /// `/etc/ssh/sshd_config`.
    pub sshd_config_path: Option<PathBuf>,
    /// Where relative sshd `Include` paths resolve (`/etc/ssh`); `None` = the directory of
    /// `sshd_config_path`.
    pub sshd_include_dir: Option<PathBuf>,
    /// Absolute sshd `Include` paths are read under this directory (`/` on a real host).
    pub sysroot: PathBuf,
    /// `/etc/crontab` (system format, with a user field).
    pub crontab_path: Option<PathBuf>,
    /// `/etc/cron.d`: every regular file directly inside, system format.
    pub cron_dirs: Vec<PathBuf>,
    /// `/var/spool/cron/crontabs`, `/var/spool/cron`: user crontabs named by their owner.
    pub user_crontab_dirs: Vec<PathBuf>,
    /// Web roots walked for world-writable PHP files.
    pub web_roots: Vec<PathBuf>,
    /// Roots walked for SUID/SGID files.
    pub suid_search_roots: Vec<PathBuf>,
    /// SUID/SGID files under these directories are expected.
    pub suid_allowed_dirs: Vec<PathBuf>,
    /// php.ini files (globs allowed); a sibling `conf.d/` or `php.d/` is read after each.
    pub php_ini_paths: Vec<PathBuf>,
    /// `/proc/self/mountinfo`.
    pub mountinfo_path: Option<PathBuf>,
    /// Mount points whose nodev/nosuid/noexec the audit checks (as written in mountinfo).
    pub audited_mount_points: Vec<String>,
    /// Shared temp dirs: world-writable is fine only with the sticky bit.
    pub sticky_dirs: Vec<PathBuf>,
    /// System dirs that must not be world-writable at all.
    pub system_dirs: Vec<PathBuf>,
    pub clock: SharedClock,
    pub limits: CheckLimits,
    counters: Arc<CheckCounters>,
}

const SYS_WEB_ROOTS: &[&str] = &[
    "/var/www",
    "/home/*/public_html",
    "/home/*/domains/*/public_html",
];
const SYS_SUID_ROOTS: &[&str] = &["/tmp", "/var/tmp", "/dev/shm", "/home", "/var/www"];
const SYS_SUID_ALLOWED: &[&str] = &[
    "/usr/bin",
    "/usr/sbin",
    "/bin",
    "/sbin",
    "/usr/lib",
    "/usr/lib64",
    "/usr/libexec",
    "/snap",
];
const SYS_PHP_INI: &[&str] = &[
    "/etc/php.ini",
    "/etc/php/*/fpm/php.ini",
    "/etc/php/*/apache2/php.ini",
    "/etc/php/*/cgi/php.ini",
    "/etc/php/*/litespeed/php.ini",
    "/opt/cpanel/ea-php*/root/etc/php.ini",
    "/opt/alt/php*/etc/php.ini",
    "/usr/local/lib/php.ini",
    "/usr/local/php*/lib/php.ini",
    "/usr/local/etc/php/php.ini",
];
const SYS_STICKY: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];
const SYS_SYSTEM_DIRS: &[&str] = &[
    "/etc",
    "/usr",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/local/bin",
    "/bin",
    "/sbin",
    "/var",
    "/var/log",
];

impl CheckContext {
    /// The real host layout with default limits.
    pub fn system(clock: SharedClock) -> CheckContext {
        CheckContext::builder(clock)
            .system_layout(Path::new("/"))
            .build()
    }

    /// An empty context (nothing configured); see [`CheckContextBuilder`].
    pub fn builder(clock: SharedClock) -> CheckContextBuilder {
        CheckContextBuilder {
            ctx: CheckContext {
                passwd_path: None,
                sshd_config_path: None,
                sshd_include_dir: None,
                sysroot: PathBuf::from("/"),
                crontab_path: None,
                cron_dirs: Vec::new(),
                user_crontab_dirs: Vec::new(),
                web_roots: Vec::new(),
                suid_search_roots: Vec::new(),
                suid_allowed_dirs: Vec::new(),
                php_ini_paths: Vec::new(),
                mountinfo_path: None,
                audited_mount_points: Vec::new(),
                sticky_dirs: Vec::new(),
                system_dirs: Vec::new(),
                clock,
                limits: CheckLimits::default(),
                counters: Arc::new(CheckCounters::default()),
            },
        }
    }

    /// Counters shared by all clones of this context.
    pub fn counters(&self) -> &CheckCounters {
        &self.counters
    }

    /// Directory relative sshd `Include`s resolve against.
    pub fn sshd_include_base(&self) -> PathBuf {
        match (&self.sshd_include_dir, &self.sshd_config_path) {
            (Some(d), _) => d.clone(),
            (None, Some(p)) => p.parent().map(Path::to_path_buf).unwrap_or_default(),
            (None, None) => PathBuf::from("/etc/ssh"),
        }
    }

    /// Reads a config file within `max_file_bytes`, counting every failure except a missing
    /// file. `follow` = follow a symlink at the last component.
    pub(crate) fn read_config(&self, path: &Path, follow: bool) -> Result<Vec<u8>, ReadError> {
        let r = read_bounded(path, self.limits.max_file_bytes, follow);
        match &r {
            Err(ReadError::NotFound) | Ok(_) => {}
            Err(ReadError::TooLarge { .. }) => count(&self.counters.files_too_large, 1),
            Err(ReadError::SymlinkRefused) => count(&self.counters.symlinks_skipped, 1),
            Err(_) => count(&self.counters.read_errors, 1),
        }
        r
    }

    /// Expands a glob pattern within `max_glob_matches` (see [`glob::expand`]); dropped
    /// matches are counted.
    pub fn glob(&self, pattern: &Path) -> Vec<PathBuf> {
        let (paths, refused) = glob::expand(pattern, self.limits.max_glob_matches);
        count(&self.counters.glob_matches_refused, refused);
        paths
    }

    /// Expands each pattern (plain paths are kept when they exist), de-duplicated, in order;
    /// dropped matches are counted.
    pub fn glob_all(&self, patterns: &[PathBuf]) -> Vec<PathBuf> {
        let (paths, refused) = glob::expand_all(patterns, self.limits.max_glob_matches);
        count(&self.counters.glob_matches_refused, refused);
        paths
    }
}

/// Builds a [`CheckContext`]. Starts empty; list setters replace the whole list.
pub struct CheckContextBuilder {
    ctx: CheckContext,
}

impl CheckContextBuilder {
    /// Sets every path to the real host layout re-rooted under `root` (`/` = the host
    /// itself); `sysroot` becomes `root`. Mount points stay as mountinfo spells them.
    pub fn system_layout(mut self, root: &Path) -> Self {
        let r = |p: &str| reroot(root, Path::new(p));
        let c = &mut self.ctx;
        c.passwd_path = Some(r("/etc/passwd"));
        c.sshd_config_path = Some(r("/etc/ssh/sshd_config"));
        c.sshd_include_dir = Some(r("/etc/ssh"));
        c.sysroot = root.to_path_buf();
        c.crontab_path = Some(r("/etc/crontab"));
        c.cron_dirs = vec![r("/etc/cron.d")];
        c.user_crontab_dirs = vec![r("/var/spool/cron/crontabs"), r("/var/spool/cron")];
        c.web_roots = rerooted(root, SYS_WEB_ROOTS);
        c.suid_search_roots = rerooted(root, SYS_SUID_ROOTS);
        c.suid_allowed_dirs = rerooted(root, SYS_SUID_ALLOWED);
        c.php_ini_paths = rerooted(root, SYS_PHP_INI);
        c.mountinfo_path = Some(r("/proc/self/mountinfo"));
        c.audited_mount_points = vec!["/tmp".to_string(), "/dev/shm".to_string()];
        c.sticky_dirs = rerooted(root, SYS_STICKY);
        c.system_dirs = rerooted(root, SYS_SYSTEM_DIRS);
        self
    }

    pub fn passwd(mut self, p: impl Into<PathBuf>) -> Self {
        self.ctx.passwd_path = Some(p.into());
        self
    }

    pub fn sshd_config(mut self, p: impl Into<PathBuf>) -> Self {
        self.ctx.sshd_config_path = Some(p.into());
        self
    }

    pub fn sshd_include_dir(mut self, p: impl Into<PathBuf>) -> Self {
        self.ctx.sshd_include_dir = Some(p.into());
        self
    }

    pub fn sysroot(mut self, p: impl Into<PathBuf>) -> Self {
        self.ctx.sysroot = p.into();
        self
    }

    pub fn crontab(mut self, p: impl Into<PathBuf>) -> Self {
        self.ctx.crontab_path = Some(p.into());
        self
    }

    pub fn cron_dirs<I: IntoIterator<Item = PathBuf>>(mut self, v: I) -> Self {
        self.ctx.cron_dirs = v.into_iter().collect();
        self
    }

    pub fn user_crontab_dirs<I: IntoIterator<Item = PathBuf>>(mut self, v: I) -> Self {
        self.ctx.user_crontab_dirs = v.into_iter().collect();
        self
    }

    pub fn web_roots<I: IntoIterator<Item = PathBuf>>(mut self, v: I) -> Self {
        self.ctx.web_roots = v.into_iter().collect();
        self
    }

    pub fn suid_search_roots<I: IntoIterator<Item = PathBuf>>(mut self, v: I) -> Self {
        self.ctx.suid_search_roots = v.into_iter().collect();
        self
    }

    pub fn suid_allowed_dirs<I: IntoIterator<Item = PathBuf>>(mut self, v: I) -> Self {
        self.ctx.suid_allowed_dirs = v.into_iter().collect();
        self
    }

    pub fn php_ini_paths<I: IntoIterator<Item = PathBuf>>(mut self, v: I) -> Self {
        self.ctx.php_ini_paths = v.into_iter().collect();
        self
    }

    pub fn mountinfo(mut self, p: impl Into<PathBuf>) -> Self {
        self.ctx.mountinfo_path = Some(p.into());
        self
    }

    pub fn audited_mount_points<I: IntoIterator<Item = String>>(mut self, v: I) -> Self {
        self.ctx.audited_mount_points = v.into_iter().collect();
        self
    }

    pub fn sticky_dirs<I: IntoIterator<Item = PathBuf>>(mut self, v: I) -> Self {
        self.ctx.sticky_dirs = v.into_iter().collect();
        self
    }

    pub fn system_dirs<I: IntoIterator<Item = PathBuf>>(mut self, v: I) -> Self {
        self.ctx.system_dirs = v.into_iter().collect();
        self
    }

    pub fn limits(mut self, limits: CheckLimits) -> Self {
        self.ctx.limits = limits;
        self
    }

    pub fn build(self) -> CheckContext {
        self.ctx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn system_context_has_real_paths_and_builder_starts_empty() {
        let sys = CheckContext::system(ManualClock::at_epoch_2026());
        assert_eq!(sys.passwd_path, Some(PathBuf::from("/etc/passwd")));
        assert_eq!(sys.sshd_include_base(), PathBuf::from("/etc/ssh"));
        assert!(sys
            .web_roots
            .contains(&PathBuf::from("/home/*/public_html")));
        assert_eq!(sys.limits.max_walk_entries, 200_000);
        let empty = CheckContext::builder(ManualClock::at_epoch_2026()).build();
        assert!(empty.passwd_path.is_none() && empty.web_roots.is_empty());
        let c = CheckContext::builder(ManualClock::at_epoch_2026())
            .sshd_config("/a/b/sshd_config")
            .build();
        assert_eq!(c.sshd_include_base(), PathBuf::from("/a/b"));
    }

    #[test]
    fn globs_past_the_limit_are_counted() {
        let fx = crate::checks::testutil::Fixture::new();
        for u in ["alice", "bob", "carol"] {
            fx.write(&format!("home/{u}/x"), b"");
        }
        let mut small = crate::checks::testutil::test_ctx();
        small.limits.max_glob_matches = 1;
        assert_eq!(small.glob(&fx.path("home/*")).len(), 1);
        assert_eq!(small.glob_all(&[fx.path("home/*")]).len(), 1);
        assert_eq!(small.counters().snapshot().glob_matches_refused, 4);
    }
}
