//! Directories by descriptor, never by path: `openat(2)` of one name relative to a directory
//! descriptor, and directory streams read with `getdents64(2)`.
//!
//! Each entry carries the kernel's position cookie (`d_off`, the position just after the
//! entry), so a listing can be closed and resumed later from a new descriptor of the same
//! directory with [`DirStream::seek`] (ext4, xfs, btrfs and tmpfs keep these cookies stable
//! across opens). Paths longer than `PATH_MAX` never reach a system call: callers step from
//! descriptor to descriptor.
//!
//! Guarantees: names passed in are single components (no `/`, no NUL, not empty) or the call
//! fails with `EINVAL` before any system call; every descriptor is `O_CLOEXEC`; the kernel's
//! buffer is parsed with every length checked, and a malformed record ends the stream with
//! `EIO` rather than a panic or an out-of-bounds read; `.` and `..` are never returned.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// Bytes read per `getdents64` call.
const BUF_BYTES: usize = 32 * 1024;
/// Offset of `d_name` in `struct linux_dirent64` (after d_ino, d_off, d_reclen, d_type).
const NAME_AT: usize = 19;

/// `name` as a C string when it is one path component (`..` allowed, for walking up).
fn component(name: &OsStr) -> io::Result<CString> {
    let b = name.as_bytes();
    if b.is_empty() || b.contains(&b'/') || b == b"." {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Opens `name` relative to the directory `dir` with `flags` (`O_CLOEXEC` is always added).
/// `name` must be one component; pass `O_NOFOLLOW` to refuse a final symlink (`ELOOP`).
pub fn openat(dir: BorrowedFd<'_>, name: &OsStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = component(name)?;
    // SAFETY: `dir` is an open descriptor borrowed for the call and `c` a NUL-terminated
    // string that outlives it; the kernel only reads both. The mode argument is ignored
    // without O_CREAT/O_TMPFILE, which callers of this read-only helper never pass.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags | libc::O_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Type of an entry as `d_type` reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    File,
    Symlink,
    /// FIFO, socket, device.
    Other,
    /// The filesystem does not report types (`DT_UNKNOWN`): ask `fstatat`.
    Unknown,
}

impl EntryKind {
    fn from_d_type(t: u8) -> EntryKind {
        match t {
            libc::DT_DIR => EntryKind::Dir,
            libc::DT_REG => EntryKind::File,
            libc::DT_LNK => EntryKind::Symlink,
            libc::DT_UNKNOWN => EntryKind::Unknown,
            _ => EntryKind::Other,
        }
    }
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u64,
    /// Position cookie just after this entry (pass to [`DirStream::seek`] to resume).
    pub next: i64,
    pub kind: EntryKind,
    pub name: OsString,
}

/// A `getdents64` record whose lengths or name are inconsistent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadRecord;

impl std::fmt::Display for BadRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("malformed directory entry record")
    }
}

impl std::error::Error for BadRecord {}

/// One record parsed from a `getdents64` buffer: the entry (or `None` for `.`/`..`) and the
/// record length. `Err` when the record is malformed.
pub fn parse_record(buf: &[u8]) -> Result<(Option<DirEntry>, usize), BadRecord> {
    let u64_at = |at: usize| -> Option<u64> {
        let s = buf.get(at..at.checked_add(8)?)?;
        Some(u64::from_ne_bytes(<[u8; 8]>::try_from(s).ok()?))
    };
    let ino = u64_at(0).ok_or(BadRecord)?;
    let next = u64_at(8)
        .map(|v| i64::from_ne_bytes(v.to_ne_bytes()))
        .ok_or(BadRecord)?;
    let reclen = buf
        .get(16..18)
        .and_then(|s| <[u8; 2]>::try_from(s).ok())
        .map(|b| usize::from(u16::from_ne_bytes(b)))
        .ok_or(BadRecord)?;
    let d_type = *buf.get(18).ok_or(BadRecord)?;
    if reclen <= NAME_AT {
        return Err(BadRecord);
    }
    let name_area = buf.get(NAME_AT..reclen).ok_or(BadRecord)?;
    let nul = memchr::memchr(0, name_area).ok_or(BadRecord)?;
    let name = name_area.get(..nul).ok_or(BadRecord)?;
    if name.is_empty() || name.contains(&b'/') {
        return Err(BadRecord);
    }
    if name == b"." || name == b".." {
        return Ok((None, reclen));
    }
    Ok((
        Some(DirEntry {
            ino,
            next,
            kind: EntryKind::from_d_type(d_type),
            name: OsString::from_vec(name.to_vec()),
        }),
        reclen,
    ))
}

/// A directory listing read with `getdents64`. Holds one descriptor and a 32 KiB buffer.
pub struct DirStream {
    fd: OwnedFd,
    /// u64 words so the kernel's records are naturally aligned.
    buf: Vec<u64>,
    pos: usize,
    len: usize,
    eof: bool,
}

impl std::fmt::Debug for DirStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirStream")
            .field("fd", &self.fd.as_raw_fd())
            .finish_non_exhaustive()
    }
}

impl DirStream {
    /// A stream over the directory open as `fd` (opened for reading with `O_DIRECTORY`),
    /// from its current position.
    pub fn new(fd: OwnedFd) -> DirStream {
        DirStream {
            fd,
            buf: vec![0; BUF_BYTES / 8],
            pos: 0,
            len: 0,
            eof: false,
        }
    }

    /// The directory's descriptor (for `openat`/`fstatat` of its entries).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: a `[u64]` of `n` elements is `8 * n` initialised bytes at the same address
        // with no stricter alignment for `u8`; the borrow of `self` keeps it alive and
        // unaliased by writers for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<u8>(), self.buf.len() * 8) }
    }

    fn fill(&mut self) -> io::Result<()> {
        let cap = self.buf.len() * 8;
        // SAFETY: the buffer is `cap` writable bytes owned by `self` and not borrowed
        // elsewhere during the call; the kernel writes at most `cap` bytes into it and
        // returns how many. The descriptor is open for the whole call.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                self.fd.as_raw_fd(),
                self.buf.as_mut_ptr().cast::<u8>(),
                cap,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = usize::try_from(n).map_err(|_| io::Error::from_raw_os_error(libc::EIO))?;
        self.pos = 0;
        self.len = n.min(cap);
        self.eof = n == 0;
        Ok(())
    }

    /// The next entry, `Ok(None)` at the end. `.` and `..` are skipped. A malformed kernel
    /// record ends the stream with `EIO`.
    pub fn next_entry(&mut self) -> io::Result<Option<DirEntry>> {
        loop {
            if self.pos >= self.len {
                if self.eof {
                    return Ok(None);
                }
                self.fill()?;
                if self.eof {
                    return Ok(None);
                }
            }
            let parsed = self
                .bytes()
                .get(self.pos..self.len)
                .ok_or(BadRecord)
                .and_then(parse_record);
            match parsed {
                Ok((entry, reclen)) => {
                    self.pos = self.pos.saturating_add(reclen);
                    if let Some(e) = entry {
                        return Ok(Some(e));
                    }
                }
                Err(BadRecord) => {
                    self.eof = true;
                    self.len = 0;
                    return Err(io::Error::from_raw_os_error(libc::EIO));
                }
            }
        }
    }

    /// Moves to the position `cookie` (0 = the start, or an entry's [`DirEntry::next`]).
    pub fn seek(&mut self, cookie: i64) -> io::Result<()> {
        nix::unistd::lseek(self.fd.as_raw_fd(), cookie, nix::unistd::Whence::SeekSet)
            .map_err(io::Error::from)?;
        self.pos = 0;
        self.len = 0;
        self.eof = false;
        Ok(())
    }
}

/// Opens the directory `name` below `dir` for listing, never following a symlink.
pub fn open_subdir(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    openat(
        dir,
        name,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_NONBLOCK,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::fs::File;

    fn record(ino: u64, off: i64, t: u8, name: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&ino.to_ne_bytes());
        r.extend_from_slice(&off.to_ne_bytes());
        let len = (NAME_AT + name.len() + 1).div_ceil(8) * 8;
        r.extend_from_slice(&(len as u16).to_ne_bytes());
        r.push(t);
        r.extend_from_slice(name);
        r.resize(len, 0);
        r
    }

    #[test]
    fn parses_records_and_skips_dots() {
        let mut buf = record(5, 10, libc::DT_DIR, b".");
        buf.extend(record(7, 20, libc::DT_REG, b"a.php"));
        let (e, n) = parse_record(&buf).expect("dot");
        assert!(e.is_none());
        let (e, _) = parse_record(&buf[n..]).expect("file");
        let e = e.expect("entry");
        assert_eq!((e.ino, e.next, e.kind), (7, 20, EntryKind::File));
        assert_eq!(e.name, OsString::from("a.php"));
    }

    #[test]
    fn malformed_records_are_errors_not_panics() {
        let good = record(7, 20, libc::DT_REG, b"name");
        for cut in 0..good.len() {
            let _ = parse_record(&good[..cut]);
        }
        let mut no_nul = good.clone();
        for b in no_nul.iter_mut().skip(NAME_AT) {
            *b = b'x';
        }
        assert!(parse_record(&no_nul).is_err());
        let mut short = good.clone();
        short[16..18].copy_from_slice(&5u16.to_ne_bytes());
        assert!(parse_record(&short).is_err());
        let mut slash = record(1, 2, libc::DT_REG, b"a/b");
        assert!(parse_record(&slash).is_err());
        slash.truncate(3);
        assert!(parse_record(&slash).is_err());
        let mut seed = 0x5851_f42d_4c95_7f2d_u64;
        for _ in 0..20_000 {
            let len = (seed % 64) as usize;
            let buf: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            let _ = parse_record(&buf);
        }
    }

    #[test]
    fn lists_a_directory_and_resumes_from_a_cookie_on_a_new_descriptor() {
        let dir = std::env::temp_dir().join(format!("svc-dirstream-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("mkdir");
        for i in 0..300 {
            std::fs::write(dir.join(format!("file-{i:03}-{}", "x".repeat(40))), b"x")
                .expect("write");
        }
        std::fs::create_dir(dir.join("sub")).expect("mkdir");
        let open = || OwnedFd::from(File::open(&dir).expect("open"));
        let mut s = DirStream::new(open());
        let mut first = BTreeSet::new();
        let mut cookie = 0;
        for _ in 0..120 {
            let e = s.next_entry().expect("read").expect("entry");
            cookie = e.next;
            first.insert(e.name);
        }
        // A new descriptor resumes exactly after the 120th entry.
        let mut t = DirStream::new(open());
        t.seek(cookie).expect("seek");
        let mut rest = BTreeSet::new();
        while let Some(e) = t.next_entry().expect("read") {
            if e.name == "sub" {
                assert_eq!(e.kind, EntryKind::Dir);
            }
            assert!(!first.contains(&e.name), "{:?} listed twice", e.name);
            rest.insert(e.name);
        }
        assert_eq!(first.len() + rest.len(), 301);
        let sub = open_subdir(t.fd(), OsStr::new("sub")).expect("openat");
        assert!(File::from(sub).metadata().expect("meta").is_dir());
        assert!(openat(t.fd(), OsStr::new("a/b"), libc::O_RDONLY).is_err());
        assert!(openat(t.fd(), OsStr::new(""), libc::O_RDONLY).is_err());
        assert!(openat(t.fd(), OsStr::new(".."), libc::O_RDONLY).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
