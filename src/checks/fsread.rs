//! Bounded reads of outside files, and text helpers for what goes into findings.

use std::fs::OpenOptions;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Why a file was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    NotFound,
    PermissionDenied,
    /// A directory, FIFO, device or socket.
    NotRegular,
    /// The last component is a symlink and following was not allowed.
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
    if e.raw_os_error() == Some(libc::ELOOP) {
        return ReadError::SymlinkRefused;
    }
    match e.kind() {
        ErrorKind::NotFound => ReadError::NotFound,
        ErrorKind::PermissionDenied => ReadError::PermissionDenied,
        k => ReadError::Io(k),
    }
}

/// Reads a regular file of at most `limit` bytes. Never blocks on a FIFO (opened
/// non-blocking, then refused as not regular); with `follow == false` a symlink at the last
/// component is refused (`O_NOFOLLOW`). Files reporting size 0 (procfs) are read up to the
/// limit.
pub fn read_bounded(path: &Path, limit: u64, follow: bool) -> Result<Vec<u8>, ReadError> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| map_err(&e))?;
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
