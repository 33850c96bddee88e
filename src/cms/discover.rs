//! Finds CMS installations beneath the web roots: a web root itself, and directories one
//! and two levels below it (`/var/www/site`, `/home/u/public_html/blog`).
//!
//! Everything is opened through `sys::dir` relative to the web root: no symlink is followed
//! below it (a linked directory is not an installation here; its target is found where it
//! really lives, if that is under a web root). At most [`MAX_INSTALLATIONS`] are returned and
//! [`MAX_DIR_ENTRIES`] entries of one directory looked at; what the limits leave out is
//! counted in [`Discovery`].

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::version::{parse_drupal_version, parse_joomla_version, parse_wp_version};
use crate::sys::dir::{Dir, Kind};

/// Installations found per scan at most.
pub const MAX_INSTALLATIONS: usize = 10_000;
/// Entries of one directory looked at during discovery.
pub const MAX_DIR_ENTRIES: usize = 10_000;
/// Bytes of a version file read.
const VERSION_FILE_CAP: u64 = 64 * 1024;

/// The platform of an installation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Platform {
    WordPress,
    Joomla,
    Drupal,
}

impl Platform {
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::WordPress => "wordpress",
            Platform::Joomla => "joomla",
            Platform::Drupal => "drupal",
        }
    }

    pub fn parse(s: &str) -> Option<Platform> {
        match s {
            "wordpress" => Some(Platform::WordPress),
            "joomla" => Some(Platform::Joomla),
            "drupal" => Some(Platform::Drupal),
            _ => None,
        }
    }

    /// The name people know.
    pub fn label(self) -> &'static str {
        match self {
            Platform::WordPress => "WordPress",
            Platform::Joomla => "Joomla",
            Platform::Drupal => "Drupal",
        }
    }
}

/// One installation found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installation {
    /// Its directory (as reached from the web root).
    pub path: PathBuf,
    pub platform: Platform,
    /// The version its files name; `None` when unreadable or not a valid version.
    pub version: Option<String>,
    /// WordPress's `$wp_local_package` (default `en_US`); `None` elsewhere.
    pub locale: Option<String>,
    /// Owner uid of the directory.
    pub uid: u32,
}

/// What one discovery found.
#[derive(Debug, Default)]
pub struct Discovery {
    pub installations: Vec<Installation>,
    /// Something was left out by a limit (installations or directory entries).
    pub truncated: bool,
    /// Web roots or directories that could not be opened.
    pub unreadable: u64,
}

/// Reads the regular file `rel` beneath `dir` (no symlink), at most [`VERSION_FILE_CAP`].
pub(super) fn read_beneath(dir: &Dir, rel: &str, cap: u64) -> Option<Vec<u8>> {
    let f = dir.open_regular_beneath(Path::new(rel)).ok()?;
    let mut buf = Vec::new();
    f.take(cap).read_to_end(&mut buf).ok()?;
    Some(buf)
}

fn text_of(dir: &Dir, rel: &str) -> Option<String> {
    read_beneath(dir, rel, VERSION_FILE_CAP).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The installation in `dir`, if it holds one.
pub fn detect(dir: &Dir) -> Option<Installation> {
    let uid = dir.info().ok()?.uid;
    let exists = |rel: &str| dir.open_regular_beneath(Path::new(rel)).is_ok();
    let found = |platform, version: Option<String>, locale| Installation {
        path: dir.path().to_path_buf(),
        platform,
        version,
        locale,
        uid,
    };
    if exists("wp-includes/version.php") {
        let v = text_of(dir, "wp-includes/version.php").and_then(|t| parse_wp_version(&t));
        return Some(found(
            Platform::WordPress,
            v.as_ref().map(|v| v.version.clone()),
            v.map(|v| v.locale),
        ));
    }
    for rel in [
        "libraries/src/Version.php",
        "libraries/cms/version/version.php",
    ] {
        if exists(rel) {
            let v = text_of(dir, rel).and_then(|t| parse_joomla_version(&t));
            return Some(found(Platform::Joomla, v, None));
        }
    }
    for rel in ["core/lib/Drupal.php", "includes/bootstrap.inc"] {
        if exists(rel) && (rel.starts_with("core") || exists("modules/system/system.module")) {
            let v = text_of(dir, rel).and_then(|t| parse_drupal_version(&t));
            return Some(found(Platform::Drupal, v, None));
        }
    }
    None
}

/// Subdirectories of `dir` (no symlinks), at most [`MAX_DIR_ENTRIES`] entries looked at.
fn subdirs(dir: &Dir, d: &mut Discovery) -> Vec<Dir> {
    let Ok((entries, cut)) = dir.entries(MAX_DIR_ENTRIES) else {
        d.unreadable += 1;
        return Vec::new();
    };
    d.truncated |= cut;
    let mut names: Vec<_> = entries
        .into_iter()
        .filter(|e| matches!(e.kind, Some(Kind::Dir) | None))
        .map(|e| e.name)
        .collect();
    names.sort();
    names
        .iter()
        .filter(|n| !skip_dir(n))
        .filter_map(|n| dir.child(n).ok())
        .collect()
}

/// Directories that never hold an installation's root (a CMS's own trees).
fn skip_dir(name: &OsStr) -> bool {
    let n = name.as_encoded_bytes();
    n.starts_with(b".")
        || [
            &b"wp-admin"[..],
            b"wp-includes",
            b"wp-content",
            b"node_modules",
            b"vendor",
            b"cgi-bin",
        ]
        .contains(&n)
}

/// Installations under `roots` (already expanded), each root at depth 0 to 2.
pub fn discover(roots: &[PathBuf]) -> Discovery {
    let mut d = Discovery::default();
    let mut seen = std::collections::HashSet::new();
    for root in roots {
        let Ok(top) = Dir::walk_trusted(root) else {
            d.unreadable += 1;
            continue;
        };
        let mut level = vec![top];
        for depth in 0..3 {
            let mut next = Vec::new();
            for dir in level {
                if d.installations.len() >= MAX_INSTALLATIONS {
                    d.truncated = true;
                    return d;
                }
                if let Some(i) = detect(&dir) {
                    if seen.insert(i.path.clone()) {
                        d.installations.push(i);
                    }
                    // An installation's own subdirectories are its own.
                    continue;
                }
                if depth < 2 {
                    next.extend(subdirs(&dir, &mut d));
                }
            }
            level = next;
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::Fixture;

    #[test]
    fn finds_installations_without_following_symlinks() {
        let fx = Fixture::new();
        fx.write(
            "www/wp-includes/version.php",
            b"<?php\n$wp_version = '6.4.3';\n",
        );
        fx.write(
            "www/sub/blog/wp-includes/version.php",
            b"<?php\n$wp_version = '6.5';\n$wp_local_package = 'de_DE';\n",
        );
        fx.write(
            "www/j/libraries/src/Version.php",
            b"const MAJOR_VERSION = 5;\nconst MINOR_VERSION = 0;\nconst PATCH_VERSION = 1;\n",
        );
        fx.write("www/d/core/lib/Drupal.php", b"const VERSION = '10.2.0';\n");
        fx.write("www/a/b/c/wp-includes/version.php", b"$wp_version = '1';");
        fx.write("elsewhere/wp-includes/version.php", b"$wp_version = '6.0';");
        std::os::unix::fs::symlink(fx.path("elsewhere"), fx.path("www/linked")).unwrap();
        let found = || {
            let mut got: Vec<_> = discover(&[fx.path("www")])
                .installations
                .into_iter()
                .map(|i| {
                    let rel = i.path.strip_prefix(fx.path("www")).unwrap().to_path_buf();
                    (rel, i.platform, i.version, i.locale)
                })
                .collect();
            got.sort();
            got
        };
        let en = Some("en_US".to_string());
        assert_eq!(
            found(),
            [(
                PathBuf::from(""),
                Platform::WordPress,
                Some("6.4.3".into()),
                en.clone()
            )]
        );
        // The root is an installation: nothing below it is looked at.
        std::fs::remove_dir_all(fx.path("www/wp-includes")).unwrap();
        assert_eq!(
            found(),
            [
                (
                    PathBuf::from("d"),
                    Platform::Drupal,
                    Some("10.2.0".into()),
                    None
                ),
                (
                    PathBuf::from("j"),
                    Platform::Joomla,
                    Some("5.0.1".into()),
                    None
                ),
                (
                    PathBuf::from("sub/blog"),
                    Platform::WordPress,
                    Some("6.5".into()),
                    Some("de_DE".into())
                ),
            ]
        );
    }
}
