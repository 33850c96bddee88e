//! What a root-run action may act on inside a tree users control (issue 35): a regular file
//! whose only name is the one in the site, owned by the site's account.
//!
//! A user may hard-link any file it can write (with `fs.protected_hardlinks=0`, any file):
//! the inode behind a name in a site can be root's `php.ini` or crontab. A chmod, a move into
//! the quarantine (which sets the inode to 0600) or an edit of such a name acts on root's
//! file. So every fix, quarantine, cleaning and backup checks the descriptor it opened
//! (`fstat` after the no-symlink open) with [`SoleOwner::check`] and then acts only through
//! that descriptor. Refusals are counted per reason ([`refusals`], exported in `/metrics`).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use super::FileInfo;

/// Why an inode is not the site's alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The file has other names (hard links) somewhere on its filesystem.
    HardLinked { links: u64 },
    /// The file's owner is not the site's account.
    ForeignOwner { uid: u32, account: u32 },
}

impl Refusal {
    /// The machine-readable reason (`reason` in an API refusal, a metric label).
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::HardLinked { .. } => "hard_linked",
            Refusal::ForeignOwner { .. } => "foreign_owner",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::HardLinked { links } => write!(
                f,
                "the file has {links} hard links: another name may be another owner's file"
            ),
            Refusal::ForeignOwner { uid, account } => write!(
                f,
                "the file is owned by uid {uid}, not by the site's account (uid {account})"
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// The owner a site's files must have: the account of the site (the owner of its root). A
/// tree root owns (`/var/www` on a plain server, `/home` as a watched root) has no account
/// to guard against, so any owner is accepted there; the link count is always checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoleOwner {
    account: Option<u32>,
}

impl SoleOwner {
    /// Files of the tree whose root directory `root_owner` owns.
    pub fn of_root(root_owner: u32) -> SoleOwner {
        SoleOwner {
            account: (root_owner != 0).then_some(root_owner),
        }
    }

    /// Files that must be owned by `uid` (a crontab of that account).
    pub fn account(uid: u32) -> SoleOwner {
        SoleOwner { account: Some(uid) }
    }

    /// Only the link count is checked (the file's owner is checked by the caller).
    pub fn any_owner() -> SoleOwner {
        SoleOwner { account: None }
    }

    /// Accepts a regular file with one link and the expected owner; a refusal is counted.
    pub fn check(&self, info: &FileInfo) -> Result<(), Refusal> {
        let refusal = if info.kind == super::Kind::File && info.nlink > 1 {
            Some(Refusal::HardLinked { links: info.nlink })
        } else {
            self.account
                .filter(|&a| a != info.uid)
                .map(|account| Refusal::ForeignOwner {
                    uid: info.uid,
                    account,
                })
        };
        match refusal {
            None => Ok(()),
            Some(r) => {
                let c = match r {
                    Refusal::HardLinked { .. } => &HARD_LINKED,
                    Refusal::ForeignOwner { .. } => &FOREIGN_OWNER,
                };
                c.fetch_add(1, Ordering::Relaxed);
                Err(r)
            }
        }
    }
}

// Process-wide counts of refusals (as `http::logfilter`'s): every guarded action of every
// subsystem adds to them, and `/metrics` reads them.
static HARD_LINKED: AtomicU64 = AtomicU64::new(0);
static FOREIGN_OWNER: AtomicU64 = AtomicU64::new(0);

/// Refusals since start, per reason.
pub fn refusals() -> [(&'static str, u64); 2] {
    [
        ("hard_linked", HARD_LINKED.load(Ordering::Relaxed)),
        ("foreign_owner", FOREIGN_OWNER.load(Ordering::Relaxed)),
    ]
}

/// The refusal an `io::Error` carries, if it came from a guard.
pub fn refusal_of(e: &std::io::Error) -> Option<Refusal> {
    let inner = e.get_ref()?;
    if let Some(r) = inner.downcast_ref::<Refusal>() {
        return Some(*r);
    }
    match inner.downcast_ref::<super::Error>() {
        Some(super::Error::Refused { refusal, .. }) => Some(*refusal),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::dir::Kind;

    fn info(uid: u32, nlink: u64) -> FileInfo {
        FileInfo {
            kind: Kind::File,
            dev: 1,
            ino: 2,
            uid,
            gid: uid,
            mode: 0o644,
            size: 1,
            nlink,
            atime: (0, 0),
            mtime: (0, 0),
            ctime: (0, 0),
        }
    }

    #[test]
    fn links_and_owners() {
        let site = SoleOwner::of_root(1000);
        assert_eq!(site.check(&info(1000, 1)), Ok(()));
        assert_eq!(
            site.check(&info(1000, 2)),
            Err(Refusal::HardLinked { links: 2 })
        );
        assert_eq!(
            site.check(&info(0, 1)).map_err(|r| r.reason()),
            Err("foreign_owner")
        );
        let rooted = SoleOwner::of_root(0);
        assert_eq!(rooted.check(&info(33, 1)), Ok(()));
        assert_eq!(
            rooted.check(&info(0, 3)).map_err(|r| r.reason()),
            Err("hard_linked")
        );
        let e: std::io::Error = super::super::Error::Refused {
            path: "/x".into(),
            refusal: Refusal::HardLinked { links: 2 },
        }
        .into();
        assert_eq!(refusal_of(&e), Some(Refusal::HardLinked { links: 2 }));
    }
}
