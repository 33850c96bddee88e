//! Compares one WordPress installation with its version's official checksums: core files
//! missing, modified (MD5 differs, or replaced by a symlink or special file), and PHP files
//! in the core directories (`wp-admin/`, `wp-includes/`) that the version does not ship.
//! `wp-content/` is skipped, as WordPress's own verification does (themes, plugins,
//! uploads and translations live there).
//!
//! Files are opened beneath the installation's directory through `sys::dir` (no symlink
//! followed); a walk of the core directories looks at [`MAX_CORE_ENTRIES`] entries at
//! most. Stops early when `over_budget` says so.

use std::ffi::OsStr;
use std::io::Read;
use std::path::Path;

use md5::{Digest, Md5};

use super::checksums::Checksums;
use crate::sys::dir::{Dir, Error as DirError, Kind};

/// Entries of the core directories walked per installation at most.
pub const MAX_CORE_ENTRIES: usize = 50_000;
/// The directories where an extra PHP file is unexpected.
pub const CORE_DIRS: &[&str] = &["wp-admin", "wp-includes"];

/// What one comparison found. Lists are sorted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CoreReport {
    pub missing: Vec<String>,
    pub modified: Vec<String>,
    pub unexpected: Vec<String>,
    /// Core files compared.
    pub checked: usize,
    /// Core files that exist but could not be read (permissions, I/O).
    pub unreadable: usize,
    /// The walk of the core directories stopped at its entry limit.
    pub truncated: bool,
    /// The budget ran out before every file was compared.
    pub stopped: bool,
}

impl CoreReport {
    /// Whether anything differs from the official files.
    pub fn differs(&self) -> bool {
        !(self.missing.is_empty() && self.modified.is_empty() && self.unexpected.is_empty())
    }
}

/// MD5 of the regular file `rel` beneath `dir`, as lower-case hex.
fn md5_of(dir: &Dir, rel: &str) -> Result<String, DirError> {
    let mut f = dir.open_regular_beneath(Path::new(rel))?;
    let mut h = Md5::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf).map_err(|source| DirError::Io {
            op: "read",
            path: dir.path().join(rel),
            source,
        })?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// Compares the installation in `dir` with `sums`.
pub fn compare(dir: &Dir, sums: &Checksums, over_budget: &dyn Fn() -> bool) -> CoreReport {
    let mut r = CoreReport::default();
    for (rel, want) in &sums.files {
        if rel.starts_with("wp-content/") {
            continue;
        }
        if r.checked % 64 == 0 && over_budget() {
            r.stopped = true;
            return r;
        }
        r.checked += 1;
        match md5_of(dir, rel) {
            Ok(got) if &got == want => {}
            Ok(_) => r.modified.push(rel.clone()),
            Err(DirError::NotFound { .. }) => r.missing.push(rel.clone()),
            // A core file replaced by a link or a special file is not the official file.
            Err(DirError::Symlink { .. } | DirError::NotRegular { .. }) => {
                r.modified.push(rel.clone())
            }
            // A core directory replaced by a file or link: the files below it are missing.
            Err(DirError::NotDirectory { .. }) => r.missing.push(rel.clone()),
            Err(_) => r.unreadable += 1,
        }
    }
    let mut seen = 0usize;
    for top in CORE_DIRS {
        if let Ok(d) = dir.child(OsStr::new(top)) {
            walk_php(&d, top, sums, &mut r, &mut seen);
        }
    }
    r.unexpected.sort();
    r
}

/// Adds the `.php` files beneath `d` (relative path `rel`) that `sums` does not list.
fn walk_php(d: &Dir, rel: &str, sums: &Checksums, r: &mut CoreReport, seen: &mut usize) {
    let left = MAX_CORE_ENTRIES.saturating_sub(*seen);
    let Ok((entries, cut)) = d.entries(left) else {
        return;
    };
    *seen += entries.len();
    r.truncated |= cut || *seen >= MAX_CORE_ENTRIES;
    let mut entries = entries;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for e in entries {
        let Some(name) = e.name.to_str() else {
            // A name that is not UTF-8 is never a core file.
            if e.name.as_encoded_bytes().ends_with(b".php") {
                r.unexpected
                    .push(format!("{rel}/{}", e.name.to_string_lossy()));
            }
            continue;
        };
        let path = format!("{rel}/{name}");
        let kind = match e.kind {
            Some(k) => k,
            None => match d.lstat(&e.name) {
                Ok(Some(i)) => i.kind,
                _ => continue,
            },
        };
        match kind {
            Kind::Dir => {
                if let Ok(sub) = d.child(&e.name) {
                    walk_php(&sub, &path, sums, r, seen);
                }
            }
            _ if name.to_ascii_lowercase().ends_with(".php") && !sums.files.contains_key(&path) => {
                r.unexpected.push(path)
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::Fixture;

    fn md5hex(b: &[u8]) -> String {
        hex::encode(Md5::digest(b))
    }

    #[test]
    fn reports_missing_modified_and_unexpected_php() {
        let fx = Fixture::new();
        let mut sums = Checksums::default();
        for (rel, body) in [
            ("index.php", &b"<?php // index"[..]),
            ("wp-includes/version.php", b"<?php $wp_version = '6.4.3';"),
            ("wp-admin/about.php", b"<?php // about"),
            ("wp-admin/gone.php", b"<?php // gone"),
            ("wp-content/index.php", b"<?php // silence"),
        ] {
            sums.files.insert(rel.to_string(), md5hex(body));
            if rel != "wp-admin/gone.php" && rel != "wp-content/index.php" {
                fx.write(&format!("wp/{rel}"), body);
            }
        }
        fx.write("wp/wp-includes/shell.php", b"<?php eval($_POST[1]);");
        fx.write("wp/wp-includes/css/x.css", b"");
        fx.write("wp/wp-content/uploads/ok.php", b"<?php");
        let dir = Dir::walk_trusted(&fx.path("wp")).unwrap();
        let r = compare(&dir, &sums, &|| false);
        assert!(!r.differs() || r.missing == ["wp-admin/gone.php"]);
        assert_eq!(r.missing, ["wp-admin/gone.php"]);
        assert!(r.modified.is_empty());
        assert_eq!(r.unexpected, ["wp-includes/shell.php"]);
        assert_eq!(r.checked, 4);
        fx.write("wp/index.php", b"<?php // injected");
        std::fs::remove_file(fx.path("wp/wp-admin/about.php")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", fx.path("wp/wp-admin/about.php")).unwrap();
        let r = compare(&dir, &sums, &|| false);
        assert_eq!(r.modified, ["index.php", "wp-admin/about.php"]);
        let r = compare(&dir, &sums, &|| true);
        assert!(r.stopped);
    }
}
