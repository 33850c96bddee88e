//! Files at daemon-owned paths: the configuration, the state directory (store, tokens,
//! parked findings, control socket, TLS files), `/proc`, and system logs named in the
//! configuration. Paths the operator or the daemon chose, never inside a tree users control:
//! those go through `crate::sys::dir` (web roots, home directories, mail spools).
//!
//! Raw path-taking calls (`File::open`, `OpenOptions::open`, `fs::read`, `create_dir_all`,
//! `remove_file`, ...) are refused by clippy everywhere (`clippy.toml`); the small functions
//! here are the one place that allows them for daemon-owned paths, each with its reason.
//! Find every use with `grep -rn 'fsutil::' src`.
//!
//! Guarantees of [`write_atomic`]: readers see the old or the new content, never a mix; the
//! temporary file is created `O_EXCL | O_NOFOLLOW` with `mode` (and `owner`) set through its
//! descriptor before it is renamed into place; the directory is synced.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use crate::sys::dir::{self, Dir};

/// Writes `data` to `path` atomically: a temporary file in the same directory is written,
/// synced, given `mode` (and `owner`, when set), renamed over `path`, and the directory is
/// synced. Readers see either the old or the new content, never a mix.
pub fn write_atomic(
    path: &Path,
    data: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> io::Result<()> {
    let parent = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let dir = Dir::open_daemon(parent)?;
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".{}.tmp", crate::ids::random_hex(6)));
    let result = (|| -> io::Result<()> {
        let mut f = dir.create_file(&tmp, mode)?;
        f.write_all(data)?;
        if let Some((uid, gid)) = owner {
            dir::set_owner(&f, uid, gid)?;
            // chown clears set-id bits; the mode is exact again.
            dir::set_mode(&f, mode)?;
        }
        f.sync_all()?;
        dir.rename_replace(&tmp, &dir, name)?;
        Ok(dir.sync()?)
    })();
    if result.is_err() {
        let _ = dir.unlink(&tmp);
    }
    result
}

/// Creates a daemon-owned directory (and parents, 0755) and sets its mode exactly.
pub fn ensure_dir(path: &Path, mode: u32) -> io::Result<()> {
    Dir::create_daemon(path, mode)
        .map(drop)
        .map_err(io::Error::from)
}

/// Opens a daemon-owned file for reading (a configuration file, a TLS file, a log named in
/// the configuration, a `/proc` file).
#[allow(
    clippy::disallowed_methods,
    reason = "daemon-owned path chosen by the operator or the daemon, not by a user"
)]
pub fn open_daemon_file(path: &Path) -> io::Result<File> {
    File::open(path)
}

/// Opens a daemon-owned file with explicit options (create with a mode, append, custom
/// flags such as `O_NONBLOCK`).
#[allow(
    clippy::disallowed_methods,
    reason = "daemon-owned path chosen by the operator or the daemon, not by a user"
)]
pub fn open_daemon_file_with(path: &Path, options: &OpenOptions) -> io::Result<File> {
    options.open(path)
}

/// Reads a whole daemon-owned file.
#[allow(
    clippy::disallowed_methods,
    reason = "daemon-owned path chosen by the operator or the daemon, not by a user"
)]
pub fn read_daemon_file(path: &Path) -> io::Result<Vec<u8>> {
    std::fs::read(path)
}

/// Reads a whole daemon-owned UTF-8 file (configuration, `/proc/self/status`).
#[allow(
    clippy::disallowed_methods,
    reason = "daemon-owned path chosen by the operator or the daemon, not by a user"
)]
pub fn read_daemon_string(path: &Path) -> io::Result<String> {
    std::fs::read_to_string(path)
}

/// Removes a daemon-owned file (a stale control socket, parked findings).
#[allow(
    clippy::disallowed_methods,
    reason = "daemon-owned path chosen by the operator or the daemon, not by a user"
)]
pub fn remove_daemon_file(path: &Path) -> io::Result<()> {
    std::fs::remove_file(path)
}

/// Sets the permission bits of a daemon-owned path that cannot be opened (a socket).
#[allow(
    clippy::disallowed_methods,
    reason = "daemon-owned path chosen by the operator or the daemon, not by a user"
)]
pub fn set_daemon_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn atomic_write_sets_mode_and_replaces() {
        let dir = std::env::temp_dir().join(format!("svc-fsutil-{}", std::process::id()));
        ensure_dir(&dir, 0o700).unwrap();
        let p = dir.join("f");
        write_atomic(&p, b"one", 0o600, None).unwrap();
        write_atomic(&p, b"two", 0o640, None).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o640);
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1, "no temp files left");
        if nix::unistd::Uid::effective().is_root() {
            write_atomic(&p, b"three", 0o2640, Some((1234, 2345))).unwrap();
            let m = fs::metadata(&p).unwrap();
            assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (1234, 2345, 0o2640));
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
