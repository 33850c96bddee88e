//! Which files the access-log collector follows: `logs.access` (absolute paths and glob
//! patterns), or when that is empty, the access logs of the web servers and hosting panels
//! found on this host ([`DETECTED`]).
//!
//! Guarantees:
//! - Glob characters (`*`, `?`, `[...]`) work in any component (`/var/www/vhosts/system/*/
//!   logs/access_log`); matches are sorted; a leading `.` is matched only literally.
//! - A glob match is a regular file and not obviously something else: compressed
//!   (`.gz`, `.bz2`, `.xz`, `.zst`, `.zip`), an error log (`error` in the name), a cPanel
//!   bytes or FTP log (`-bytes_log`, `.bytes`, `-ftp_log`). A path without glob characters
//!   is kept even when it does not exist yet (the tail attaches when it appears).
//! - At most [`MAX_FILES`] files; the rest are left out and counted ([`Resolved::refused`]).

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::hostfs::glob::{fnmatch, has_magic};

/// Most files followed at once.
pub const MAX_FILES: usize = 512;
/// Directory entries read per pattern level at most (a hostile tree cannot stall a scan).
const MAX_DIR_ENTRIES: usize = 100_000;

/// (marker directory, patterns) of the web servers and panels svc knows: when the marker
/// exists, the patterns are followed.
pub const DETECTED: &[(&str, &[&str])] = &[
    (
        "/etc/apache2",
        &[
            "/var/log/apache2/access.log",
            "/var/log/apache2/other_vhosts_access.log",
        ],
    ),
    (
        "/etc/httpd",
        &["/var/log/httpd/access_log", "/var/log/httpd/ssl_access_log"],
    ),
    ("/etc/nginx", &["/var/log/nginx/access.log"]),
    ("/usr/local/lsws", &["/usr/local/lsws/logs/access.log"]),
    // cPanel (EasyApache 4) per-domain logs.
    ("/usr/local/cpanel", &["/var/log/apache2/domlogs/*"]),
    // Plesk per-domain logs.
    (
        "/usr/local/psa",
        &[
            "/var/www/vhosts/system/*/logs/access_log",
            "/var/www/vhosts/system/*/logs/access_ssl_log",
        ],
    ),
    // DirectAdmin per-domain logs.
    ("/usr/local/directadmin", &["/var/log/httpd/domains/*.log"]),
];

/// The expansion of a set of patterns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    pub files: Vec<PathBuf>,
    /// Matches left out by [`MAX_FILES`].
    pub refused: u64,
    /// Whether a pattern has glob characters (worth expanding again later).
    pub has_globs: bool,
}

/// The patterns to expand: `configured` when not empty, else the detected ones below
/// `root` (`/` in production).
pub fn patterns(configured: &[PathBuf], root: &Path) -> Vec<PathBuf> {
    if !configured.is_empty() {
        return configured.to_vec();
    }
    let under = |p: &str| root.join(p.trim_start_matches('/'));
    let mut out = Vec::new();
    for (marker, pats) in DETECTED {
        if under(marker).is_dir() {
            out.extend(pats.iter().map(|p| under(p)));
        }
    }
    out
}

/// Expands `patterns` (see the module documentation), without duplicates, in order.
pub fn resolve(patterns: &[PathBuf]) -> Resolved {
    let mut r = Resolved::default();
    let mut seen = std::collections::HashSet::new();
    for p in patterns {
        let found = if has_magic(p.as_os_str().as_bytes()) {
            r.has_globs = true;
            expand(p)
        } else {
            vec![p.clone()]
        };
        for f in found {
            if !seen.insert(f.clone()) {
                continue;
            }
            if r.files.len() >= MAX_FILES {
                r.refused += 1;
                continue;
            }
            r.files.push(f);
        }
    }
    r
}

/// Whether a glob match looks like an access log (see the module documentation).
pub fn plausible(name: &[u8]) -> bool {
    const SUFFIXES: &[&[u8]] = &[
        b".gz",
        b".bz2",
        b".xz",
        b".zst",
        b".zip",
        b"-bytes_log",
        b".bytes",
        b"-ftp_log",
    ];
    !SUFFIXES.iter().any(|s| name.ends_with(s))
        && !name.windows(5).any(|w| w.eq_ignore_ascii_case(b"error"))
}

fn expand(pattern: &Path) -> Vec<PathBuf> {
    let comps: Vec<Component<'_>> = pattern.components().collect();
    let mut cands: Vec<PathBuf> = vec![PathBuf::new()];
    for (i, comp) in comps.iter().enumerate() {
        let last = i + 1 == comps.len();
        match comp {
            Component::Normal(pat) if has_magic(pat.as_bytes()) => {
                let mut next = Vec::new();
                for dir in &cands {
                    let Ok(rd) = std::fs::read_dir(dir) else {
                        continue;
                    };
                    let mut names: Vec<_> = rd
                        .take(MAX_DIR_ENTRIES)
                        .filter_map(Result::ok)
                        .filter(|e| fnmatch(pat.as_bytes(), e.file_name().as_bytes(), true))
                        .filter(|e| {
                            !last
                                || (e.file_type().is_ok_and(|t| t.is_file())
                                    && plausible(e.file_name().as_bytes()))
                        })
                        .map(|e| e.file_name())
                        .collect();
                    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
                    next.extend(names.into_iter().map(|n| dir.join(n)));
                    if next.len() > MAX_FILES * 4 {
                        break;
                    }
                }
                cands = next;
            }
            other => cands.iter_mut().for_each(|c| c.push(other.as_os_str())),
        }
        if cands.is_empty() {
            break;
        }
    }
    if comps
        .last()
        .is_some_and(|c| !has_magic(c.as_os_str().as_bytes()))
    {
        // A fixed last component below a glob directory: only the ones that exist.
        cands.retain(|p| p.is_file());
    }
    cands
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::tail::testutil::TempDir;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"").unwrap();
    }

    #[test]
    fn globs_in_any_component_with_implausible_names_left_out() {
        let d = TempDir::new("access-logs");
        let b = d.path();
        for n in [
            "a.com",
            "b.com",
            "b.com-ssl_log",
            "b.com-bytes_log",
            "x.gz",
            "ftp.a.com-ftp_log",
        ] {
            touch(&b.join("domlogs").join(n));
        }
        for dom in ["one.test", "two.test"] {
            touch(&b.join("vhosts").join(dom).join("logs/access_log"));
            touch(&b.join("vhosts").join(dom).join("logs/error_log"));
        }
        std::fs::create_dir_all(b.join("vhosts/empty.test/logs")).unwrap();
        let r = resolve(&[
            b.join("domlogs/*"),
            b.join("vhosts/*/logs/access_log"),
            b.join("vhosts/*/logs/*error*"),
            b.join("fixed/not-yet.log"),
            b.join("domlogs/a.com"),
        ]);
        let names: Vec<String> = r
            .files
            .iter()
            .map(|p| p.strip_prefix(b).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "domlogs/a.com",
                "domlogs/b.com",
                "domlogs/b.com-ssl_log",
                "vhosts/one.test/logs/access_log",
                "vhosts/two.test/logs/access_log",
                "fixed/not-yet.log",
            ]
        );
        assert!(r.has_globs);
        assert_eq!(r.refused, 0);
    }

    #[test]
    fn detection_follows_the_servers_found() {
        let d = TempDir::new("access-detect");
        std::fs::create_dir_all(d.path().join("etc/nginx")).unwrap();
        std::fs::create_dir_all(d.path().join("usr/local/psa")).unwrap();
        let p = patterns(&[], d.path());
        assert_eq!(
            p,
            [
                d.path().join("var/log/nginx/access.log"),
                d.path().join("var/www/vhosts/system/*/logs/access_log"),
                d.path().join("var/www/vhosts/system/*/logs/access_ssl_log"),
            ]
        );
        let configured = [PathBuf::from("/srv/a.log")];
        assert_eq!(patterns(&configured, d.path()), configured);
    }

    #[test]
    fn the_file_cap_is_counted() {
        let d = TempDir::new("access-cap");
        for i in 0..(MAX_FILES + 3) {
            touch(&d.path().join(format!("l{i:04}.log")));
        }
        let r = resolve(&[d.path().join("*.log")]);
        assert_eq!(r.files.len(), MAX_FILES);
        assert_eq!(r.refused, 3);
    }
}
