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

/// PHP by its extension, as web servers map it (`.php`, `.php3`-`.php8`, `.phtml`, `.phar`),
/// in any case.
pub fn is_php_name(name: &[u8]) -> bool {
    let Some(dot) = name.iter().rposition(|b| *b == b'.') else {
        return false;
    };
    let ext = name[dot + 1..].to_ascii_lowercase();
    matches!(
        ext.as_slice(),
        b"php" | b"php3" | b"php4" | b"php5" | b"php7" | b"php8" | b"phtml" | b"phar"
    )
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
