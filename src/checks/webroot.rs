//! `world_writable_php`: PHP files under the web roots that anyone on the host can modify.
//!
//! PHP files are names ending in `.php`, `.phtml`, `.php3`–`.php8` or `.phar` (any letter
//! case). Severity: HIGH when the file holds site configuration (wp-config.php and the
//! like: database credentials, loaded on every request) or its directory is world-writable
//! without the sticky bit (anyone can also replace it); WARNING otherwise. The account is
//! the file owner's user name.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::context::CheckContext;
use super::sink::Sink;
use super::walk::{OwnerCache, Walker};
use crate::findings::{Finding, Severity};
use crate::hostfs::display_path;

pub const CHECK: &str = "world_writable_php";

const CONFIG_NAMES: &[&str] = &[
    "wp-config.php",
    "configuration.php",
    "config.php",
    "config.inc.php",
    "settings.php",
    "localsettings.php",
    "env.php",
    "parameters.php",
];

/// True for names PHP handlers execute.
pub fn is_php(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| crate::hostfs::is_php_name(n.as_encoded_bytes()))
}

fn is_config(path: &Path) -> bool {
    path.file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .is_some_and(|n| CONFIG_NAMES.contains(&n.as_str()))
}

fn dir_replaceable(path: &Path) -> bool {
    path.parent()
        .and_then(|d| fs::symlink_metadata(d).ok())
        .is_some_and(|m| {
            let mode = m.permissions().mode();
            m.is_dir() && mode & 0o002 != 0 && mode & 0o1000 == 0
        })
}

/// One finding per world-writable PHP file (message names the file).
pub fn world_writable_php(ctx: &CheckContext) -> Vec<Finding> {
    let mut sink = Sink::new(ctx, CHECK);
    let mut walker = Walker::new(ctx);
    let mut owners = OwnerCache::default();
    for root in ctx.glob_all(&ctx.web_roots) {
        walker.walk(&root, &mut |path, meta| {
            let mode = meta.mode();
            if !meta.is_file() || mode & 0o002 == 0 || !is_php(path) {
                return;
            }
            let config = is_config(path);
            let replaceable = dir_replaceable(path);
            let severity = if config || replaceable {
                Severity::High
            } else {
                Severity::Warning
            };
            let owner = owners.name(meta.uid());
            let mut why = Vec::new();
            if config {
                why.push("holds site configuration");
            }
            if replaceable {
                why.push("its directory is world-writable without the sticky bit");
            }
            let shown = display_path(path);
            let f = sink
                .finding(severity, format!("world-writable PHP file {shown}"))
                .with_details(format!(
                    "mode {:04o}, owner uid {}{}{}; any local user can change code the web server runs",
                    mode & 0o7777,
                    meta.uid(),
                    owner.as_deref().map(|o| format!(" ({o})")).unwrap_or_default(),
                    if why.is_empty() {
                        String::new()
                    } else {
                        format!("; {}", why.join(", "))
                    }
                ))
                .with_path(shown);
            sink.push_owned(f, owner);
        });
    }
    sink.finish(Some(&walker))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::context::CheckLimits;
    use crate::checks::sink::{FINDINGS_LIMIT_MESSAGE, TRUNCATED_MESSAGE};
    use crate::checks::testutil::Fixture;

    #[test]
    fn php_names() {
        assert!(is_php(Path::new("/a/index.PHP")));
        assert!(is_php(Path::new("/a/x.phtml")));
        assert!(!is_php(Path::new("/a/x.php.txt")));
        assert!(!is_php(Path::new("/a/php")));
    }

    #[test]
    fn finds_world_writable_php_under_web_roots() {
        let fx = Fixture::new();
        fx.write_mode("var/www/html/index.php", b"<?php", 0o666);
        fx.write_mode("var/www/html/ok.php", b"<?php", 0o644);
        fx.write_mode("var/www/html/readme.txt", b"", 0o666);
        fx.write_mode("home/alice/public_html/wp-config.php", b"<?php", 0o666);
        fx.write_mode("home/bob/public_html/up/shell.php", b"<?php", 0o777);
        fx.mkdir("home/bob/public_html/up", 0o777);
        fx.write_mode("home/carol/private/x.php", b"<?php", 0o666);
        fx.symlink(&fx.path("home/carol/private"), "var/www/html/linked");
        let ctx = fx.ctx();
        let f = world_writable_php(&ctx);
        assert_eq!(f.len(), 3, "{f:#?}");
        let by = |s: &str| f.iter().find(|f| f.message.ends_with(s)).unwrap();
        let idx = by("html/index.php");
        assert_eq!(idx.severity, Severity::Warning);
        assert_eq!(idx.account.as_deref(), Some("root"));
        assert!(idx.details.starts_with("mode 0666"));
        assert_eq!(by("wp-config.php").severity, Severity::High);
        assert_eq!(by("up/shell.php").severity, Severity::High);
        assert!(by("up/shell.php").details.contains("sticky"));
        assert!(idx.message.starts_with("world-writable PHP file "));
    }

    #[test]
    fn clean_tree_and_missing_roots_yield_nothing() {
        let fx = Fixture::new();
        assert!(world_writable_php(&fx.ctx()).is_empty());
        fx.write_mode("var/www/a.php", b"", 0o644);
        assert!(world_writable_php(&fx.ctx()).is_empty());
    }

    #[test]
    fn limits_are_reported() {
        let fx = Fixture::new();
        for i in 0..5 {
            fx.write_mode(&format!("var/www/{i}.php"), b"", 0o666);
        }
        let mut ctx = fx.ctx();
        ctx.limits = CheckLimits {
            max_findings_per_check: 2,
            ..CheckLimits::default()
        };
        let f = world_writable_php(&ctx);
        assert_eq!(f.len(), 3);
        assert_eq!(f[2].message, FINDINGS_LIMIT_MESSAGE);
        assert_eq!(ctx.counters().snapshot().findings_refused, 3);

        ctx.limits = CheckLimits {
            max_walk_entries: 3,
            ..CheckLimits::default()
        };
        let f = world_writable_php(&ctx);
        let last = f.last().unwrap();
        assert_eq!(last.message, TRUNCATED_MESSAGE);
        assert_eq!(last.severity, Severity::Warning);
        assert_eq!(ctx.counters().snapshot().walks_truncated, 1);
    }
}
