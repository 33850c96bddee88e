//! Site performance findings that have a fix (`/api/v1/perf/fix-*`), all under the web roots:
//! - `perf_error_log`: an `error_log` file of [`HUGE_ERROR_LOG`] bytes or more (a site
//!   logging on every request fills the disk and slows every write);
//! - `php_display_errors`: a site's own `.user.ini` or `php.ini` (in a web root or one level
//!   below) with `display_errors` on (errors with paths and queries shown to visitors);
//! - `perf_cms_cron`: a WordPress site (`wp-config.php` in a web root or one level below)
//!   without `DISABLE_WP_CRON`, so its scheduler runs inside visitors' page loads.
//!
//! WARNING findings; the message names the file. The account of `php_display_errors` and
//! `perf_cms_cron` is the site's ([`site_account`]), of `perf_error_log` the file's owner.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use super::context::CheckContext;
use super::sink::Sink;
use super::walk::{OwnerCache, Walker};
use crate::findings::{Finding, Severity};
use crate::hostfs::display_path;

pub const ERROR_LOG_CHECK: &str = "perf_error_log";
pub const DISPLAY_ERRORS_CHECK: &str = "php_display_errors";
pub const CMS_CRON_CHECK: &str = "perf_cms_cron";

/// Size from which an `error_log` is reported (100 MiB).
pub const HUGE_ERROR_LOG: u64 = 100 * 1024 * 1024;

/// Bytes of a site ini file or `wp-config.php` read at most.
const MAX_READ: u64 = 1024 * 1024;

/// Site ini files that set `display_errors` per directory.
const SITE_INIS: &[&str] = &[".user.ini", "php.ini"];

/// The account of a site: the owner of its web root; in a web root root owns (`/var/www`),
/// the owner of the site's directory directly below it, which only root could have made
/// there. Never the owner of a file inside the site: a user can hard-link anyone's file
/// into its site (issue 35).
pub fn site_account(root_owner: u32, site_dir_owner: u32) -> u32 {
    if root_owner != 0 {
        root_owner
    } else {
        site_dir_owner
    }
}

/// The web roots and their direct subdirectories (a site's document root or an account's),
/// each with the uid of its site's account ([`site_account`]).
fn site_dirs(ctx: &CheckContext) -> Vec<(PathBuf, u32)> {
    let mut out = Vec::new();
    for root in ctx.glob_all(&ctx.web_roots) {
        let Ok(root_meta) = std::fs::symlink_metadata(&root) else {
            continue;
        };
        out.push((root.clone(), root_meta.uid()));
        out.extend(ctx.glob(&root.join("*")).into_iter().filter_map(|p| {
            let m = std::fs::symlink_metadata(&p).ok().filter(|m| m.is_dir())?;
            let account = site_account(root_meta.uid(), m.uid());
            Some((p, account))
        }));
    }
    out
}

/// `perf_error_log`.
pub fn huge_error_logs(ctx: &CheckContext) -> Vec<Finding> {
    let mut sink = Sink::new(ctx, ERROR_LOG_CHECK);
    let mut walker = Walker::new(ctx);
    let mut owners = OwnerCache::default();
    for root in ctx.glob_all(&ctx.web_roots) {
        walker.walk(&root, &mut |path, meta| {
            if !meta.is_file()
                || meta.len() < HUGE_ERROR_LOG
                || path.file_name().is_none_or(|n| n != "error_log")
            {
                return;
            }
            let shown = display_path(path);
            let f = sink
                .finding(Severity::Warning, format!("huge error_log {shown}"))
                .with_details(format!(
                    "{} MiB; truncate it and fix what logs on every request",
                    meta.len() / (1024 * 1024)
                ))
                .with_path(shown);
            sink.push_owned(f, owners.name(meta.uid()));
        });
    }
    sink.finish(Some(&walker))
}

/// Whether an ini value turns `display_errors` on (PHP reads `On`, `1`, `yes`, `true`,
/// `stdout` and `stderr` as on).
pub fn display_errors_on(value: &str) -> bool {
    let v = value.trim().trim_matches(['"', '\'']).to_ascii_lowercase();
    matches!(
        v.as_str(),
        "on" | "1" | "yes" | "true" | "stdout" | "stderr"
    )
}

/// The 1-based lines of `text` that set `display_errors` on.
pub fn display_errors_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let (k, v) = l.split_once('=')?;
            let k = k.trim().to_ascii_lowercase();
            (k == "display_errors" && display_errors_on(v.split(';').next().unwrap_or(v)))
                .then_some(i + 1)
        })
        .collect()
}

/// `php_display_errors`.
pub fn site_display_errors(ctx: &CheckContext) -> Vec<Finding> {
    let mut sink = Sink::new(ctx, DISPLAY_ERRORS_CHECK);
    let mut owners = OwnerCache::default();
    for (dir, account) in site_dirs(ctx) {
        for name in SITE_INIS {
            let path = dir.join(name);
            let Ok(bytes) = crate::hostfs::read_bounded(&path, MAX_READ, false) else {
                continue;
            };
            let lines = display_errors_lines(&String::from_utf8_lossy(&bytes));
            if lines.is_empty() {
                continue;
            }
            let shown = display_path(&path);
            let f = sink
                .finding(
                    Severity::Warning,
                    format!("display_errors on in site PHP settings {shown}"),
                )
                .with_details(format!(
                    "line {}: errors, paths and queries are shown to visitors",
                    lines
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .with_path(shown);
            sink.push_owned(f, owners.name(account));
        }
    }
    sink.finish(None)
}

/// Whether a `wp-config.php` already defines `DISABLE_WP_CRON`.
pub fn defines_disable_wp_cron(text: &str) -> bool {
    text.lines()
        .map(str::trim_start)
        .filter(|l| !l.starts_with("//") && !l.starts_with('#'))
        .any(|l| l.contains("DISABLE_WP_CRON"))
}

/// `perf_cms_cron`.
pub fn cms_cron(ctx: &CheckContext) -> Vec<Finding> {
    let mut sink = Sink::new(ctx, CMS_CRON_CHECK);
    let mut owners = OwnerCache::default();
    for (dir, account) in site_dirs(ctx) {
        let path = dir.join("wp-config.php");
        let Ok(bytes) = crate::hostfs::read_bounded(&path, MAX_READ, false) else {
            continue;
        };
        if defines_disable_wp_cron(&String::from_utf8_lossy(&bytes)) {
            continue;
        }
        let shown = display_path(&path);
        let f = sink
            .finding(
                Severity::Warning,
                format!("WordPress scheduler runs on page loads: {shown}"),
            )
            .with_details(
                "DISABLE_WP_CRON is not set: wp-cron.php runs inside visitors' requests; a system cron is steadier",
            )
            .with_path(shown);
        sink.push_owned(f, owners.name(account));
    }
    sink.finish(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ini_and_wp_config_rules() {
        assert_eq!(
            display_errors_lines("display_errors = On\n; display_errors = On\ndisplay_errors=0\nDISPLAY_ERRORS = stderr ; dev"),
            [1, 4]
        );
        assert!(defines_disable_wp_cron(
            "<?php\ndefine( 'DISABLE_WP_CRON', true );"
        ));
        assert!(!defines_disable_wp_cron(
            "<?php\n// define('DISABLE_WP_CRON', true);"
        ));
    }
}
