//! Bounded reads of outside files, and text helpers for what goes into findings.

use std::io::{ErrorKind, Read};
use std::path::Path;

use crate::sys::dir;

/// Why a file was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    NotFound,
    PermissionDenied,
    /// A directory, FIFO, device or socket.
    NotRegular,
    /// A symlink was not followed: the last component (unless following was allowed and
    /// root or the daemon owns the link), or a directory on the way owned by a user.
    SymlinkRefused,
    TooLarge {
        limit: u64,
    },
    Io(ErrorKind),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::NotFound => f.write_str("not found"),
            ReadError::PermissionDenied => f.write_str("permission denied"),
            ReadError::NotRegular => f.write_str("not a regular file"),
            ReadError::SymlinkRefused => f.write_str("symlink not followed"),
            ReadError::TooLarge { limit } => write!(f, "larger than {limit} bytes"),
            ReadError::Io(k) => write!(f, "I/O error: {k}"),
        }
    }
}

fn map_err(e: &std::io::Error) -> ReadError {
    match e.kind() {
        ErrorKind::NotFound => ReadError::NotFound,
        ErrorKind::PermissionDenied => ReadError::PermissionDenied,
        k => ReadError::Io(k),
    }
}

fn map_dir_err(e: dir::Error) -> ReadError {
    match e {
        dir::Error::NotFound { .. } => ReadError::NotFound,
        dir::Error::Symlink { .. } | dir::Error::UntrustedSymlink { .. } => {
            ReadError::SymlinkRefused
        }
        dir::Error::NotRegular { .. } => ReadError::NotRegular,
        dir::Error::NotDirectory { .. } => ReadError::Io(ErrorKind::NotADirectory),
        e => map_err(&e.into()),
    }
}

/// Reads a regular file of at most `limit` bytes, through `sys::dir`: the directories on
/// the way are reached from `/` without following a symlink a user owns (root's and the
/// daemon's are followed, e.g. `/home -> /data/home`); the last component is a symlink only
/// with `follow == true`, and then only one root or the daemon owns. FIFOs, devices and
/// sockets are refused without being opened (never blocks). Files reporting size 0 (procfs)
/// are read up to the limit.
pub fn read_bounded(path: &Path, limit: u64, follow: bool) -> Result<Vec<u8>, ReadError> {
    let file = dir::open_regular_trusted(path, follow).map_err(map_dir_err)?;
    let meta = file.metadata().map_err(|e| map_err(&e))?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular);
    }
    if meta.len() > limit {
        return Err(ReadError::TooLarge { limit });
    }
    let cap = usize::try_from(meta.len().min(limit)).unwrap_or(0);
    let mut buf = Vec::with_capacity(cap);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| map_err(&e))?;
    if buf.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    Ok(buf)
}

/// Text for a finding: control characters become `?`, at most `max_chars` characters
/// (an ellipsis marks a cut).
pub fn sanitize(s: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max_chars.saturating_mul(4)));
    for (n, c) in s.chars().enumerate() {
        if n >= max_chars {
            out.push('…');
            break;
        }
        out.push(if c.is_control() { '?' } else { c });
    }
    out
}

/// A path for a finding (lossy UTF-8, sanitized, at most 1024 characters).
pub fn display_path(p: &Path) -> String {
    sanitize(&p.to_string_lossy(), 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::Fixture;

    #[test]
    fn reads_small_files_and_refuses_large_ones() {
        let fx = Fixture::new();
        let p = fx.write("a", b"hello");
        assert_eq!(read_bounded(&p, 5, false).unwrap(), b"hello");
        assert_eq!(
            read_bounded(&p, 4, false),
            Err(ReadError::TooLarge { limit: 4 })
        );
        assert_eq!(
            read_bounded(&fx.path("missing"), 4, true),
            Err(ReadError::NotFound)
        );
        assert_eq!(read_bounded(&fx.root, 4, true), Err(ReadError::NotRegular));
    }

    #[test]
    fn symlinks_are_refused_unless_following() {
        let fx = Fixture::new();
        let p = fx.write("target", b"x");
        let l = fx.symlink(&p, "link");
        assert_eq!(read_bounded(&l, 10, false), Err(ReadError::SymlinkRefused));
        assert_eq!(read_bounded(&l, 10, true).unwrap(), b"x");
    }

    /// Issue 9: a symlink a user owns is refused in the middle of the path too.
    #[test]
    fn user_symlinks_are_refused_as_intermediate_components() {
        if !nix::unistd::Uid::effective().is_root() {
            eprintln!("user_symlinks_are_refused_as_intermediate_components: needs root");
            return;
        }
        let fx = Fixture::new();
        let p = fx.write("elsewhere/secret", b"x");
        let l = fx.symlink(p.parent().unwrap(), "home/u/public_html");
        nix::unistd::fchownat(
            None,
            &l,
            Some(nix::unistd::Uid::from_raw(1234)),
            Some(nix::unistd::Gid::from_raw(1234)),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .unwrap();
        for follow in [false, true] {
            assert_eq!(
                read_bounded(&l.join("secret"), 10, follow),
                Err(ReadError::SymlinkRefused)
            );
        }
        // Root's own symlinks on the way are followed.
        let r = fx.symlink(p.parent().unwrap(), "rootlink");
        assert_eq!(read_bounded(&r.join("secret"), 10, false).unwrap(), b"x");
    }

    #[test]
    fn fifo_is_refused_without_blocking() {
        let fx = Fixture::new();
        let p = fx.path("fifo");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert_eq!(read_bounded(&p, 10, false), Err(ReadError::NotRegular));
    }

    #[test]
    fn sanitize_replaces_controls_and_cuts() {
        assert_eq!(sanitize("a\nb\x1bc", 10), "a?b?c");
        assert_eq!(sanitize("abcdef", 3), "abc…");
    }
}
