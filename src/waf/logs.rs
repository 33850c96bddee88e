//! Which files the WAF log collector reads: `logs.waf` (paths and glob patterns), or when
//! that is empty, the error and audit logs of the web servers found beneath `checks.root`
//! (`/` in production), as the access-log and mail-log detection look.
//!
//! Guarantees:
//! - A pattern's glob characters (`*`, `?`, `[...]`) are expanded in its last component
//!   only, sorted, at most [`MAX_FILES`] files in all (the rest are logged and left out);
//!   a path without glob characters is kept even when it does not exist yet (the tail
//!   attaches when it appears).
//! - Detection names a server's logs only when its configuration directory exists, and
//!   adds each `SecAuditLog` file named in the ModSecurity configurations it knows.

use std::path::{Path, PathBuf};

use crate::hostfs::glob::{fnmatch, has_magic};
use std::os::unix::ffi::OsStrExt;

/// Most files followed.
pub const MAX_FILES: usize = 256;

/// (configuration directory, logs) of the web servers svc knows.
const SERVERS: &[(&str, &[&str])] = &[
    (
        "/etc/apache2",
        &[
            "/var/log/apache2/error.log",
            "/var/log/apache2/modsec_audit.log",
        ],
    ),
    (
        "/etc/httpd",
        &[
            "/var/log/httpd/error_log",
            "/var/log/httpd/modsec_audit.log",
        ],
    ),
    (
        "/etc/nginx",
        &["/var/log/nginx/error.log", "/var/log/modsec_audit.log"],
    ),
    (
        "/usr/local/lsws",
        &[
            "/usr/local/lsws/logs/error.log",
            "/usr/local/lsws/logs/auditmodsec.log",
        ],
    ),
    (
        "/usr/local/apache/conf",
        &[
            "/usr/local/apache/logs/error_log",
            "/usr/local/apache/logs/modsec_audit.log",
        ],
    ),
];

/// ModSecurity configurations whose `SecAuditLog` is followed.
const MODSEC_CONFS: &[&str] = &[
    "/etc/modsecurity/modsecurity.conf",
    "/etc/nginx/modsec/modsecurity.conf",
    "/etc/nginx/modsecurity.conf",
    "/etc/httpd/conf.d/mod_security.conf",
    "/usr/local/apache/conf/modsec2.conf",
];

/// The files to follow for `patterns`, or those detected beneath `root` when there are none
/// (see the module documentation).
pub fn resolve(patterns: &[PathBuf], root: &Path) -> Vec<PathBuf> {
    let mut out = if patterns.is_empty() {
        detect(root)
    } else {
        let mut v = Vec::new();
        for p in patterns {
            expand(p, &mut v);
        }
        v
    };
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    if out.len() > MAX_FILES {
        log::warn!(
            "logs.waf: {} files match; following the first {MAX_FILES}",
            out.len()
        );
        out.truncate(MAX_FILES);
    }
    out
}

fn expand(p: &Path, out: &mut Vec<PathBuf>) {
    let name = p.file_name().map(|n| n.as_bytes()).unwrap_or(b"");
    let parent = p.parent().unwrap_or(Path::new("/"));
    if !has_magic(name) || has_magic(parent.as_os_str().as_bytes()) {
        out.push(p.to_path_buf());
        return;
    }
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    let mut found: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| fnmatch(name, e.file_name().as_bytes(), true))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .take(MAX_FILES + 1)
        .collect();
    found.sort();
    out.extend(found);
}

/// The logs of the servers found beneath `root` (`/` in production).
pub fn detect(root: &Path) -> Vec<PathBuf> {
    let under = |p: &str| root.join(p.trim_start_matches('/'));
    let mut out = Vec::new();
    for (dir, logs) in SERVERS {
        if under(dir).is_dir() {
            out.extend(logs.iter().map(|l| under(l)));
        }
    }
    for conf in MODSEC_CONFS {
        let Ok(text) = crate::fsutil::read_daemon_string(&under(conf)) else {
            continue;
        };
        for line in text.lines().take(100_000) {
            let mut words = line.split_whitespace();
            if words
                .next()
                .is_some_and(|w| w.eq_ignore_ascii_case("SecAuditLog"))
            {
                if let Some(v) = words.next() {
                    let v = v.trim_matches('"');
                    // `|program` pipes are not files.
                    if v.starts_with('/') {
                        out.push(under(v));
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_expand_in_the_last_component() {
        let d = crate::watch::tail::testutil::TempDir::new("waf-logs");
        for n in [
            "a-error.log",
            "b-error.log",
            ".hidden-error.log",
            "other.txt",
        ] {
            std::fs::write(d.path().join(n), "").unwrap();
        }
        let got = resolve(
            &[
                d.path().join("*-error.log"),
                d.path().join("missing.log"),
                d.path().join("a-error.log"),
            ],
            Path::new("/"),
        );
        assert_eq!(
            got,
            [
                d.path().join("a-error.log"),
                d.path().join("b-error.log"),
                d.path().join("missing.log"),
            ]
        );
    }

    #[test]
    fn detection_follows_servers_and_audit_logs() {
        let d = crate::watch::tail::testutil::TempDir::new("waf-logs");
        std::fs::create_dir_all(d.path().join("etc/apache2")).unwrap();
        std::fs::create_dir_all(d.path().join("etc/modsecurity")).unwrap();
        std::fs::write(
            d.path().join("etc/modsecurity/modsecurity.conf"),
            "SecRuleEngine On\nSecAuditLog /var/log/apache2/audit-custom.log\n",
        )
        .unwrap();
        let got = resolve(&[], d.path());
        assert!(got.contains(&d.path().join("var/log/apache2/error.log")));
        assert!(got.contains(&d.path().join("var/log/apache2/audit-custom.log")));
        assert!(!got
            .iter()
            .any(|p| p.starts_with(d.path().join("var/log/nginx"))));
    }
}
