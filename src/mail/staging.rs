//! Staging of extracted parts: `{state_path}/emailav-tmp` and the [`Spill`] buffers that
//! hold one decoded part, an interpretation of it or an archive member.
//!
//! Guarantees:
//! - The staging directory must be a real directory (not a symlink) owned by the daemon's
//!   user with mode exactly 0700. [`Staging::prepare`] creates it so at start and refuses an
//!   existing one that is not (nothing is changed, the error names the owner or mode);
//!   [`Staging::verify`] checks the same again, and that the name still is the directory
//!   held open, before each message is scanned.
//! - Staged files are created `O_EXCL | O_NOFOLLOW`, mode 0600, and unlinked at once: they
//!   live only as long as the scan holds them, and a crash leaves nothing behind. Leftover
//!   names (a crash between create and unlink) are removed at start.
//! - A [`Spill`] keeps up to its memory threshold in memory and moves to a staged file past
//!   it, so a message of any size is scanned in bounded memory.

use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::unistd::Uid;

use crate::sys::dir::{Dir, FileInfo, Kind};
use crate::text::escape_path;

/// Name of the staging directory under `state_path`.
pub const DIR_NAME: &str = "emailav-tmp";
/// Prefix of staged file names.
const PREFIX: &str = "part-";

/// Why the staging directory was refused.
#[derive(Debug)]
pub enum StagingError {
    Io(crate::sys::dir::Error),
    /// Not a directory (or a symlink).
    NotDirectory(PathBuf),
    Owner {
        path: PathBuf,
        uid: u32,
    },
    Mode {
        path: PathBuf,
        mode: u32,
    },
    /// The name no longer is the directory opened at start.
    Replaced(PathBuf),
}

impl fmt::Display for StagingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StagingError::Io(e) => write!(f, "staging directory: {e}"),
            StagingError::NotDirectory(p) => {
                write!(f, "staging directory {} is not a directory", escape_path(p))
            }
            StagingError::Owner { path, uid } => write!(
                f,
                "staging directory {} is owned by uid {uid}, not by the daemon",
                escape_path(path)
            ),
            StagingError::Mode { path, mode } => write!(
                f,
                "staging directory {} has mode {mode:04o}, not 0700",
                escape_path(path)
            ),
            StagingError::Replaced(p) => write!(
                f,
                "staging directory {} was replaced since start",
                escape_path(p)
            ),
        }
    }
}

impl std::error::Error for StagingError {}

impl From<crate::sys::dir::Error> for StagingError {
    fn from(e: crate::sys::dir::Error) -> Self {
        StagingError::Io(e)
    }
}

/// The staging directory, held open.
pub struct Staging {
    path: PathBuf,
    dir: Dir,
    info: FileInfo,
}

impl fmt::Debug for Staging {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Staging").field("path", &self.path).finish()
    }
}

fn check(path: &Path, info: &FileInfo) -> Result<(), StagingError> {
    if info.kind != Kind::Dir {
        return Err(StagingError::NotDirectory(path.to_path_buf()));
    }
    if info.uid != Uid::effective().as_raw() {
        return Err(StagingError::Owner {
            path: path.to_path_buf(),
            uid: info.uid,
        });
    }
    if info.mode != 0o700 {
        return Err(StagingError::Mode {
            path: path.to_path_buf(),
            mode: info.mode,
        });
    }
    Ok(())
}

impl Staging {
    /// `{state_path}/emailav-tmp`: created 0700 when missing, refused when it exists but is
    /// not a daemon-owned 0700 directory. Leftover staged files are removed.
    pub fn prepare(state_path: &Path) -> Result<Staging, StagingError> {
        let parent = Dir::open_daemon(state_path)?;
        let name = OsString::from(DIR_NAME);
        let path = state_path.join(DIR_NAME);
        let dir = match parent.lstat(&name)? {
            None => parent.mkdir(&name, 0o700, None)?,
            Some(info) => {
                check(&path, &info)?;
                parent.child(&name)?
            }
        };
        let info = dir.info()?;
        check(&path, &info)?;
        let me = Staging { path, dir, info };
        me.clean();
        Ok(me)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes staged files a crash left behind.
    fn clean(&self) {
        let Ok((entries, _)) = self.dir.entries(100_000) else {
            return;
        };
        for e in entries {
            if e.name.to_string_lossy().starts_with(PREFIX) {
                let _ = self.dir.unlink(&e.name);
            }
        }
    }

    /// Checks the directory again: same inode under its name, daemon-owned, mode 0700.
    pub fn verify(&self) -> Result<(), StagingError> {
        let parent_path = self.path.parent().unwrap_or(Path::new("/"));
        let parent = Dir::open_daemon(parent_path)?;
        let now = parent
            .lstat(&OsString::from(DIR_NAME))?
            .ok_or_else(|| StagingError::Replaced(self.path.clone()))?;
        check(&self.path, &now)?;
        if !now.same_inode(&self.info) {
            return Err(StagingError::Replaced(self.path.clone()));
        }
        let held = self.dir.info()?;
        check(&self.path, &held)
    }

    /// A new staged file, already unlinked (it disappears when closed).
    pub fn temp_file(&self) -> io::Result<File> {
        let name = OsString::from(format!("{PREFIX}{}", crate::ids::random_hex(8)));
        let f = self.dir.create_file(&name, 0o600)?;
        self.dir.unlink(&name)?;
        Ok(f)
    }
}

/// Why a [`Spill`] refused bytes.
#[derive(Debug)]
pub enum SpillError {
    /// Over the memory threshold without a staging directory.
    NoStaging,
    Io(io::Error),
}

impl fmt::Display for SpillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpillError::NoStaging => f.write_str("part larger than memory and no staging"),
            SpillError::Io(e) => write!(f, "staging write failed: {e}"),
        }
    }
}

/// One decoded part: in memory up to a threshold, then in a staged file.
pub struct Spill {
    mem: Vec<u8>,
    file: Option<File>,
    len: u64,
    mem_limit: usize,
    staging: Option<Arc<Staging>>,
    /// Buffered bytes not yet written to `file`.
    pending: Vec<u8>,
}

const FILE_BUFFER: usize = 256 * 1024;

impl Spill {
    pub fn new(mem_limit: usize, staging: Option<Arc<Staging>>) -> Spill {
        Spill {
            mem: Vec::new(),
            file: None,
            len: 0,
            mem_limit,
            staging,
            pending: Vec::new(),
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the content is in memory (then [`Self::bytes`] has all of it).
    pub fn in_memory(&self) -> bool {
        self.file.is_none()
    }

    /// The content when in memory.
    pub fn bytes(&self) -> Option<&[u8]> {
        self.file.is_none().then_some(self.mem.as_slice())
    }

    /// The staged file, when the content moved to one (flushed).
    pub fn file(&self) -> Option<&File> {
        self.file.as_ref()
    }

    pub fn write(&mut self, b: &[u8]) -> Result<(), SpillError> {
        if b.is_empty() {
            return Ok(());
        }
        if self.file.is_none() && self.mem.len() + b.len() > self.mem_limit {
            let staging = self.staging.as_ref().ok_or(SpillError::NoStaging)?;
            let mut f = staging.temp_file().map_err(SpillError::Io)?;
            f.write_all(&self.mem).map_err(SpillError::Io)?;
            self.mem = Vec::new();
            self.file = Some(f);
            self.pending.reserve(FILE_BUFFER);
        }
        if let Some(f) = self.file.as_mut() {
            if self.pending.len() + b.len() > FILE_BUFFER {
                f.write_all(&self.pending).map_err(SpillError::Io)?;
                self.pending.clear();
                if b.len() >= FILE_BUFFER {
                    f.write_all(b).map_err(SpillError::Io)?;
                } else {
                    self.pending.extend_from_slice(b);
                }
            } else {
                self.pending.extend_from_slice(b);
            }
        } else {
            self.mem.extend_from_slice(b);
        }
        self.len += b.len() as u64;
        Ok(())
    }

    /// Writes buffered bytes to the staged file (call before reading).
    pub fn flush(&mut self) -> Result<(), SpillError> {
        if let Some(f) = self.file.as_mut() {
            if !self.pending.is_empty() {
                f.write_all(&self.pending).map_err(SpillError::Io)?;
                self.pending.clear();
            }
        }
        self.pending.shrink_to_fit();
        Ok(())
    }

    /// Copies the first `n` bytes of `other` (flushed) into this spill.
    pub fn copy_prefix(&mut self, other: &Spill, n: u64) -> Result<(), SpillError> {
        let mut r = other.reader(n);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let k = r.read(&mut buf).map_err(SpillError::Io)?;
            if k == 0 {
                return Ok(());
            }
            self.write(buf.get(..k).unwrap_or(&[]))?;
        }
    }

    /// A reader over the first `len` bytes (at most the whole content; flush first).
    pub fn reader(&self, len: u64) -> SpillReader<'_> {
        SpillReader {
            spill: self,
            pos: 0,
            end: len.min(self.len),
        }
    }
}

/// Reads a [`Spill`] (or a prefix of it) with positioned reads; seekable.
pub struct SpillReader<'a> {
    spill: &'a Spill,
    pos: u64,
    end: u64,
}

impl Read for SpillReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.end.saturating_sub(self.pos);
        if left == 0 || buf.is_empty() {
            return Ok(0);
        }
        let want = buf.len().min(left as usize);
        let n = match &self.spill.file {
            Some(f) => f.read_at(&mut buf[..want], self.pos)?,
            None => {
                let start = self.pos as usize;
                let src = self
                    .spill
                    .mem
                    .get(start..start + want)
                    .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
                buf[..want].copy_from_slice(src);
                want
            }
        };
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for SpillReader<'_> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let p = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.end.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        match p {
            Some(p) => {
                self.pos = p;
                Ok(p)
            }
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek before the start",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::testdir::TempDir;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn staging_is_created_private_and_refused_when_not() {
        let t = TempDir::new("staging");
        let s = Staging::prepare(t.path()).unwrap();
        let meta = std::fs::metadata(t.path().join(DIR_NAME)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
        s.verify().unwrap();
        std::fs::set_permissions(
            t.path().join(DIR_NAME),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert!(matches!(s.verify(), Err(StagingError::Mode { .. })));
        assert!(matches!(
            Staging::prepare(t.path()),
            Err(StagingError::Mode { .. })
        ));
        std::fs::set_permissions(
            t.path().join(DIR_NAME),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        s.verify().unwrap();
        // Swapped for a symlink to another private directory: refused.
        std::fs::rename(t.path().join(DIR_NAME), t.path().join("old")).unwrap();
        std::fs::create_dir(t.path().join("other")).unwrap();
        std::fs::set_permissions(
            t.path().join("other"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        std::os::unix::fs::symlink(t.path().join("other"), t.path().join(DIR_NAME)).unwrap();
        assert!(s.verify().is_err());
        assert!(Staging::prepare(t.path()).is_err());
    }

    #[test]
    fn spill_moves_to_an_unlinked_staged_file_and_reads_back() {
        let t = TempDir::new("spill");
        let s = Arc::new(Staging::prepare(t.path()).unwrap());
        let mut sp = Spill::new(10, Some(s.clone()));
        sp.write(b"hello").unwrap();
        assert!(sp.in_memory());
        sp.write(b" world, more than ten").unwrap();
        assert!(!sp.in_memory());
        sp.flush().unwrap();
        let mut out = String::new();
        sp.reader(u64::MAX).read_to_string(&mut out).unwrap();
        assert_eq!(out, "hello world, more than ten");
        let mut pre = String::new();
        sp.reader(5).read_to_string(&mut pre).unwrap();
        assert_eq!(pre, "hello");
        assert_eq!(
            std::fs::read_dir(s.path()).unwrap().count(),
            0,
            "staged files are unlinked"
        );
        let mut no = Spill::new(4, None);
        assert!(matches!(no.write(b"12345"), Err(SpillError::NoStaging)));
    }
}
