//! The host's files as the daemon reads them: bounded reads that refuse users' symlinks
//! ([`read`]), shell-style globs ([`glob`]) and re-rooting a system path under a test tree
//! ([`reroot`]).
//!
//! A leaf module: checks, waf, mail, watch and api all read host files, so this imports no
//! subsystem (only `sys`), and any of them may import it.

pub mod glob;
pub mod read;

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

pub use read::{display_path, read_bounded, sanitize, ReadError};

/// `root` joined with absolute `p` (`reroot("/x", "/etc/passwd")` = `/x/etc/passwd`).
pub fn reroot(root: &Path, p: &Path) -> PathBuf {
    let mut out = root.to_path_buf();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => out.push(".."),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Each path of `list` re-rooted under `root`.
pub fn rerooted(root: &Path, list: &[&str]) -> Vec<PathBuf> {
    list.iter().map(|p| reroot(root, Path::new(p))).collect()
}

/// What a PHP extension is: the one table behind every "is this PHP" question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhpExt {
    /// PHP source a web server runs when requested (handlers of Debian, cPanel, Plesk and
    /// LiteSpeed between them).
    Runs,
    /// A phar: runs, but is an archive, not source text.
    Archive,
    /// PHP source loaded by `include` (`.inc`) or shown as text (`.phps`), not run alone.
    Included,
}

/// Every extension svc treats as PHP, lower case.
pub const PHP_EXTENSIONS: &[(&str, PhpExt)] = &[
    ("php", PhpExt::Runs),
    ("php3", PhpExt::Runs),
    ("php4", PhpExt::Runs),
    ("php5", PhpExt::Runs),
    ("php7", PhpExt::Runs),
    ("php8", PhpExt::Runs),
    ("phtml", PhpExt::Runs),
    ("pht", PhpExt::Runs),
    ("phar", PhpExt::Archive),
    ("inc", PhpExt::Included),
    ("phps", PhpExt::Included),
];

/// The PHP kind of a file name's extension, in any case.
pub fn php_extension(name: &[u8]) -> Option<PhpExt> {
    let dot = name.iter().rposition(|b| *b == b'.')?;
    let ext = &name[dot + 1..];
    PHP_EXTENSIONS
        .iter()
        .find(|(e, _)| ext.eq_ignore_ascii_case(e.as_bytes()))
        .map(|(_, k)| *k)
}

/// A name a web server runs as PHP (`.php`, `.php3`-`.php8`, `.phtml`, `.pht`, `.phar`).
pub fn is_php_name(name: &[u8]) -> bool {
    matches!(php_extension(name), Some(PhpExt::Runs | PhpExt::Archive))
}

/// A name holding PHP source text: what runs, and what is included (`.inc`, `.phps`); not
/// phars.
pub fn is_php_source_name(name: &[u8]) -> bool {
    matches!(php_extension(name), Some(PhpExt::Runs | PhpExt::Included))
}

/// uid -> user name lookups (via NSS), cached for one check run (at most 4096 uids kept).
#[derive(Default)]
pub struct OwnerCache {
    names: HashMap<u32, Option<String>>,
}

impl OwnerCache {
    pub fn name(&mut self, uid: u32) -> Option<String> {
        if let Some(n) = self.names.get(&uid) {
            return n.clone();
        }
        let n = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten()
            .map(|u| u.name);
        if self.names.len() < 4096 {
            self.names.insert(uid, n.clone());
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reroot_joins_absolute_paths_under_root() {
        assert_eq!(
            reroot(Path::new("/x/y"), Path::new("/etc/passwd")),
            PathBuf::from("/x/y/etc/passwd")
        );
        assert_eq!(
            reroot(Path::new("/"), Path::new("/etc/ssh")),
            PathBuf::from("/etc/ssh")
        );
    }
}
