//! Scan windows: the whole file when small, otherwise a head and a tail window, so payloads
//! appended to large files are still seen without reading the middle.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Size limits of one scan. See [`ScanLimits::default`] for the defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanLimits {
    /// Files up to this size are scanned whole (default 1 MiB).
    pub whole_file_max: u64,
    /// Larger files: bytes scanned from the start (default 256 KiB).
    pub head_window: usize,
    /// Larger files: bytes scanned from the end (default 256 KiB).
    pub tail_window: usize,
    /// Matches kept per file; the rest are counted as dropped (default 32).
    pub max_matches_per_file: usize,
    /// Longest excerpt in a match, in characters (default 96).
    pub excerpt_max: usize,
}

impl Default for ScanLimits {
    fn default() -> Self {
        ScanLimits {
            whole_file_max: 1024 * 1024,
            head_window: 256 * 1024,
            tail_window: 256 * 1024,
            max_matches_per_file: 32,
            excerpt_max: 96,
        }
    }
}

impl ScanLimits {
    /// Makes the limits consistent: `whole_file_max >= head_window + tail_window` (raised if
    /// needed) so the head and tail windows of a large file never overlap; at least one match
    /// and a 16-character excerpt.
    pub fn normalized(mut self) -> Self {
        let both = (self.head_window as u64).saturating_add(self.tail_window as u64);
        if self.whole_file_max < both {
            self.whole_file_max = both;
        }
        self.max_matches_per_file = self.max_matches_per_file.max(1);
        self.excerpt_max = self.excerpt_max.max(16);
        self
    }
}

/// The bytes of one file that will be scanned.
pub(crate) struct Windows {
    /// `(absolute offset, bytes)`; one entry for small files, two for large ones.
    pub parts: Vec<(u64, Vec<u8>)>,
    /// Bytes of the file that were not read (the middle of a large file).
    pub skipped: u64,
}

/// Windows of an in-memory buffer (borrowed).
pub(crate) fn slice_windows<'a>(
    data: &'a [u8],
    limits: &ScanLimits,
) -> (Vec<(u64, &'a [u8])>, u64) {
    let len = data.len();
    if len as u64 <= limits.whole_file_max {
        return (vec![(0, data)], 0);
    }
    let head = limits.head_window.min(len);
    let tail = limits.tail_window.min(len - head);
    let tail_start = len - tail;
    let mut parts = vec![(0u64, data.get(..head).unwrap_or(&[]))];
    if tail > 0 {
        parts.push((tail_start as u64, data.get(tail_start..).unwrap_or(&[])));
    }
    (parts, (tail_start - head) as u64)
}

/// Reads the windows of an open regular file of (stat) size `size` with positioned reads. A
/// file that changes while being read yields what could be read (never more than `size`).
pub(crate) fn read_windows(file: &File, size: u64, limits: &ScanLimits) -> io::Result<Windows> {
    if size <= limits.whole_file_max {
        let buf = read_at_most(file, 0, usize::try_from(size).unwrap_or(0))?;
        return Ok(Windows {
            parts: vec![(0, buf)],
            skipped: 0,
        });
    }
    let head = read_at_most(file, 0, limits.head_window)?;
    let tail_len = (limits.tail_window as u64).min(size.saturating_sub(head.len() as u64));
    let tail_start = size - tail_len;
    let tail = read_at_most(file, tail_start, usize::try_from(tail_len).unwrap_or(0))?;
    let skipped = tail_start.saturating_sub(head.len() as u64);
    let mut parts = vec![(0, head)];
    if !tail.is_empty() {
        parts.push((tail_start, tail));
    }
    Ok(Windows { parts, skipped })
}

fn read_at_most(file: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut filled = 0usize;
    while filled < len {
        let Some(dst) = buf.get_mut(filled..) else {
            break;
        };
        match file.read_at(dst, offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_buffers_are_one_window_large_ones_two() {
        let l = ScanLimits {
            whole_file_max: 10,
            head_window: 4,
            tail_window: 3,
            ..ScanLimits::default()
        }
        .normalized();
        let (p, skipped) = slice_windows(b"0123456789", &l);
        assert_eq!((p.len(), skipped), (1, 0));
        let (p, skipped) = slice_windows(b"0123456789abcdef", &l);
        assert_eq!(p, vec![(0, &b"0123"[..]), (13, &b"def"[..])]);
        assert_eq!(skipped, 9);
    }

    #[test]
    fn normalized_keeps_windows_apart() {
        let l = ScanLimits {
            whole_file_max: 1,
            head_window: 4,
            tail_window: 3,
            max_matches_per_file: 0,
            excerpt_max: 0,
        }
        .normalized();
        assert_eq!(l.whole_file_max, 7);
        assert_eq!(l.max_matches_per_file, 1);
    }
}
