//! Reading mailbox password entries: Dovecot passwd-files (`user[@domain]:password:...`)
//! and panel shadow files (`/home/<account>/etc/<domain>/shadow` on cPanel,
//! `/etc/virtual/<domain>/passwd` on DirectAdmin: `local:password:...`).
//!
//! Guarantees:
//! - Files are opened through `sys::dir` (no symlink a user owns is followed, FIFOs and
//!   devices are refused unopened), at most [`MAX_FILE_BYTES`] each, at most
//!   [`MAX_MAILBOXES`] entries in all; what a limit refuses is counted in [`ReadStats`].
//! - A stored value is kept only in the returned [`Entry`], whose `Debug` never prints it;
//!   read errors name the file and the error kind, never file content.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::hostfs::{read_bounded, ReadError};

/// Largest password file read.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Longest line looked at; longer lines are skipped.
pub const MAX_LINE_BYTES: usize = 8 * 1024;
/// Mailboxes read per audit, at most.
pub const MAX_MAILBOXES: usize = 100_000;

/// One mailbox's entry.
pub struct Entry {
    /// `local@domain`, or the user as written when no domain is known.
    pub mailbox: String,
    /// The owning account when the file's location says it (cPanel `/home/<account>/`).
    pub account: Option<String>,
    /// The stored password field, as written.
    pub stored: Vec<u8>,
    /// The file it came from.
    pub file: PathBuf,
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("mailbox", &self.mailbox)
            .field("account", &self.account)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

/// What reading the files met.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReadStats {
    pub files: u64,
    /// Files that could not be read: (path, reason). A missing file is not listed.
    pub unreadable: Vec<(PathBuf, String)>,
    /// Lines skipped: over-long, not `user:password`, or not UTF-8 in the user field.
    pub skipped_lines: u64,
    /// Entries beyond [`MAX_MAILBOXES`].
    pub over_limit: u64,
}

/// Where the mailbox's domain and account come from, by the file's location.
fn location(path: &Path) -> (Option<String>, Option<String>) {
    let comps: Vec<&str> = path
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect();
    let n = comps.len();
    let get = |i: usize| comps.get(i).map(|s| s.to_string());
    // .../home/<account>/etc/<domain>/shadow (cPanel)
    if n >= 5
        && comps.get(n - 1) == Some(&"shadow")
        && comps.get(n - 3) == Some(&"etc")
        && comps.get(n - 5) == Some(&"home")
    {
        return (get(n - 2), get(n - 4));
    }
    // .../virtual/<domain>/passwd (DirectAdmin)
    if n >= 3 && comps.get(n - 1) == Some(&"passwd") && comps.get(n - 3) == Some(&"virtual") {
        return (get(n - 2), None);
    }
    // Any other file inside a directory named like a domain.
    let parent = if n >= 2 { get(n - 2) } else { None };
    (
        parent.filter(|p| p.contains('.') && !p.starts_with('.')),
        None,
    )
}

/// Parses one file's content into entries.
pub fn parse_file(path: &Path, bytes: &[u8], out: &mut Vec<Entry>, stats: &mut ReadStats) {
    let (domain, account) = location(path);
    for line in bytes.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() || line.first() == Some(&b'#') {
            continue;
        }
        if line.len() > MAX_LINE_BYTES {
            stats.skipped_lines += 1;
            continue;
        }
        let mut fields = line.splitn(3, |&b| b == b':');
        let user = fields.next().unwrap_or(&[]);
        let Some(stored) = fields.next() else {
            stats.skipped_lines += 1;
            continue;
        };
        let Ok(user) = std::str::from_utf8(user) else {
            stats.skipped_lines += 1;
            continue;
        };
        let user = user.trim();
        if user.is_empty() || user.chars().any(char::is_control) {
            stats.skipped_lines += 1;
            continue;
        }
        if out.len() >= MAX_MAILBOXES {
            stats.over_limit += 1;
            continue;
        }
        let mailbox = match (&domain, user.contains('@')) {
            (Some(d), false) => format!("{user}@{d}"),
            _ => user.to_string(),
        };
        out.push(Entry {
            mailbox,
            account: account.clone(),
            stored: stored.to_vec(),
            file: path.to_path_buf(),
        });
    }
}

/// Reads every file in `paths` (already expanded). A mailbox listed twice keeps its first
/// entry.
pub fn read_all(paths: &[PathBuf]) -> (Vec<Entry>, ReadStats) {
    let mut out = Vec::new();
    let mut stats = ReadStats::default();
    for p in paths {
        match read_bounded(p, MAX_FILE_BYTES, false) {
            Ok(bytes) => {
                stats.files += 1;
                parse_file(p, &bytes, &mut out, &mut stats);
            }
            Err(ReadError::NotFound) => {}
            Err(e) => stats.unreadable.push((p.clone(), e.to_string())),
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|e| seen.insert(e.mailbox.clone()));
    (out, stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dovecot_and_panel_layouts() {
        let mut out = Vec::new();
        let mut st = ReadStats::default();
        parse_file(
            Path::new("/etc/dovecot/users"),
            b"# comment\nuser@example.com:{PLAIN}x:1000:1000::/home/u::\nbare:{SHA}abc\nbroken-line\n\n",
            &mut out,
            &mut st,
        );
        parse_file(
            Path::new("/home/acct1/etc/example.org/shadow"),
            b"info:$6$s$h:19000::::::\n",
            &mut out,
            &mut st,
        );
        parse_file(
            Path::new("/etc/virtual/example.net/passwd"),
            b"sales:$1$s$h\n",
            &mut out,
            &mut st,
        );
        let names: Vec<_> = out.iter().map(|e| e.mailbox.as_str()).collect();
        assert_eq!(
            names,
            [
                "user@example.com",
                "bare",
                "info@example.org",
                "sales@example.net"
            ]
        );
        assert_eq!(out[2].account.as_deref(), Some("acct1"));
        assert_eq!(out[0].stored, b"{PLAIN}x");
        assert_eq!(st.skipped_lines, 1);
        let shown = format!("{:?}", out[0]);
        assert!(!shown.contains("{PLAIN}x"), "{shown}");
    }
}
