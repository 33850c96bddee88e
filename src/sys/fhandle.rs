//! File handles (`name_to_handle_at(2)`, `open_by_handle_at(2)`) and filesystem ids, used to
//! turn fanotify FID records back into paths.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Largest handle the kernel produces (`MAX_HANDLE_SZ`).
pub const MAX_HANDLE_BYTES: usize = 128;

/// An opaque kernel file handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHandle {
    /// `handle_type` as the kernel reported it.
    pub handle_type: i32,
    /// `f_handle` bytes (at most [`MAX_HANDLE_BYTES`]).
    pub bytes: Vec<u8>,
}

/// Builds the `struct file_handle` image: `handle_bytes`, `handle_type`, then the bytes, in
/// u32 words so the buffer is suitably aligned for the C struct.
fn handle_words(handle_type: i32, bytes: &[u8], capacity: usize) -> io::Result<Vec<u32>> {
    if bytes.len() > MAX_HANDLE_BYTES || capacity > MAX_HANDLE_BYTES {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let len = u32::try_from(bytes.len().max(capacity))
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut raw = Vec::with_capacity(8 + MAX_HANDLE_BYTES);
    raw.extend_from_slice(&len.to_ne_bytes());
    raw.extend_from_slice(&handle_type.to_ne_bytes());
    raw.extend_from_slice(bytes);
    raw.resize(8 + MAX_HANDLE_BYTES, 0);
    Ok(raw
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Opens the object a handle names, through the filesystem that `mount` lives on.
/// Needs `CAP_DAC_READ_SEARCH`. `flags` are `open(2)` flags (e.g. `O_PATH | O_CLOEXEC`).
pub fn open_by_handle(
    mount: BorrowedFd<'_>,
    handle_type: i32,
    bytes: &[u8],
    flags: libc::c_int,
) -> io::Result<OwnedFd> {
    let mut words = handle_words(handle_type, bytes, 0)?;
    // SAFETY: `words` holds a complete `struct file_handle` (header plus MAX_HANDLE_SZ
    // bytes, u32-aligned) whose `handle_bytes` never exceeds the buffer; the kernel only
    // reads it. `mount` is a borrowed, open descriptor.
    let fd = unsafe {
        libc::open_by_handle_at(
            mount.as_raw_fd(),
            words.as_mut_ptr().cast::<libc::file_handle>(),
            flags,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The handle of the object `fd` refers to (`AT_EMPTY_PATH`).
pub fn handle_of(fd: BorrowedFd<'_>) -> io::Result<FileHandle> {
    let mut words = handle_words(0, &[], MAX_HANDLE_BYTES)?;
    let mut mount_id: libc::c_int = 0;
    let empty = CString::default();
    // SAFETY: `words` is a u32-aligned `struct file_handle` with `handle_bytes` set to the
    // MAX_HANDLE_SZ bytes that follow the header, so the kernel's writes stay inside it;
    // `empty` is a valid NUL-terminated string and `mount_id` a valid out-pointer.
    let rc = unsafe {
        libc::name_to_handle_at(
            fd.as_raw_fd(),
            empty.as_ptr(),
            words.as_mut_ptr().cast::<libc::file_handle>(),
            &mut mount_id,
            libc::AT_EMPTY_PATH,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let raw: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let len = raw
        .get(0..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_ne_bytes)
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n <= MAX_HANDLE_BYTES)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EOVERFLOW))?;
    let handle_type = raw
        .get(4..8)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(i32::from_ne_bytes)
        .unwrap_or(0);
    let bytes = raw.get(8..8 + len).unwrap_or_default().to_vec();
    Ok(FileHandle { handle_type, bytes })
}

/// The filesystem id (`statfs.f_fsid`) of the filesystem `fd` lives on, as the 8 bytes
/// fanotify reports in its FID records.
pub fn fsid_of<Fd: AsFd>(fd: Fd) -> io::Result<[u8; 8]> {
    let st = nix::sys::statfs::fstatfs(fd).map_err(io::Error::from)?;
    let id: libc::fsid_t = st.filesystem_id();
    // SAFETY: `fsid_t` is `#[repr(C)] struct { [c_int; 2] }`: 8 bytes of plain integers
    // (the size match is checked at compile time by `transmute`), any bit pattern valid.
    Ok(unsafe { std::mem::transmute::<libc::fsid_t, [u8; 8]>(id) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn handle_round_trip_reaches_the_same_directory() {
        let dir = std::env::current_dir().expect("cwd");
        let f = File::open(&dir).expect("open dir");
        let h = match handle_of(f.as_fd()) {
            Ok(h) => h,
            // Filesystems without export support cannot do this; nothing to test then.
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => return,
            Err(e) => panic!("name_to_handle_at: {e}"),
        };
        assert!(!h.bytes.is_empty());
        match open_by_handle(
            f.as_fd(),
            h.handle_type,
            &h.bytes,
            libc::O_PATH | libc::O_CLOEXEC,
        ) {
            Ok(fd) => {
                let a = File::from(fd).metadata().expect("meta");
                let b = f.metadata().expect("meta");
                assert_eq!((a.dev(), a.ino()), (b.dev(), b.ino()));
            }
            // Without CAP_DAC_READ_SEARCH the kernel refuses; that is the documented case.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
            Err(e) => panic!("open_by_handle_at: {e}"),
        }
        assert_eq!(fsid_of(&f).expect("fsid"), fsid_of(&f).expect("fsid"));
    }

    #[test]
    fn oversized_or_garbage_handles_are_errors_not_crashes() {
        let f = File::open("/").expect("open /");
        assert!(open_by_handle(f.as_fd(), 1, &[0u8; 200], libc::O_PATH).is_err());
        let mut seed = 0x9e37_79b9_u32;
        for n in 0..64usize {
            let bytes: Vec<u8> = (0..(n % 40))
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    seed as u8
                })
                .collect();
            // Any outcome but a crash is fine; most are ESTALE/EINVAL.
            let _ = open_by_handle(
                f.as_fd(),
                seed as i32,
                &bytes,
                libc::O_PATH | libc::O_CLOEXEC,
            );
        }
    }
}
