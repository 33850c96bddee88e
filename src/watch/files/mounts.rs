//! Mount points from `/proc/self/mountinfo`, so fanotify can also mark filesystems mounted
//! below a watched root (a filesystem mark covers one filesystem only).

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// Upper bound on mountinfo bytes read (a host with a huge mount table is truncated).
const MAX_MOUNTINFO_BYTES: u64 = 4 * 1024 * 1024;

/// Decodes the octal escapes (`\040` etc.) the kernel uses in mountinfo paths. `None` on a
/// malformed escape or a result that is not an absolute path.
fn unescape(field: &[u8]) -> Option<PathBuf> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while let Some(&b) = field.get(i) {
        if b == b'\\' {
            let digits = field.get(i + 1..i + 4)?;
            let mut v: u32 = 0;
            for d in digits {
                if !(b'0'..=b'7').contains(d) {
                    return None;
                }
                v = v * 8 + u32::from(d - b'0');
            }
            out.push(u8::try_from(v).ok()?);
            i += 4;
        } else {
            out.push(b);
            i += 1;
        }
    }
    if out.first() != Some(&b'/') || out.contains(&0) {
        return None;
    }
    Some(PathBuf::from(OsString::from_vec(out)))
}

/// Mount points listed in mountinfo text (field 5 of each line). Malformed lines are
/// skipped and counted in the second value.
pub(crate) fn parse_mount_points(text: &[u8]) -> (Vec<PathBuf>, u64) {
    let mut points = Vec::new();
    let mut malformed = 0u64;
    for line in text.split(|b| *b == b'\n') {
        if line.is_empty() {
            continue;
        }
        match line
            .split(|b| *b == b' ')
            .filter(|f| !f.is_empty())
            .nth(4)
            .and_then(unescape)
        {
            Some(p) => points.push(p),
            None => malformed += 1,
        }
    }
    (points, malformed)
}

/// Mount points strictly below `root` (read from `/proc/self/mountinfo`). Empty when the
/// file cannot be read.
pub(crate) fn mounts_below(root: &Path) -> Vec<PathBuf> {
    use std::io::Read;
    let mut buf = Vec::new();
    let read = crate::fsutil::open_daemon_file(Path::new("/proc/self/mountinfo"))
        .and_then(|f| f.take(MAX_MOUNTINFO_BYTES).read_to_end(&mut buf));
    if read.is_err() {
        return Vec::new();
    }
    let (points, _) = parse_mount_points(&buf);
    let mut below: Vec<PathBuf> = points
        .into_iter()
        .filter(|p| p != root && p.starts_with(root))
        .collect();
    below.sort();
    below.dedup();
    below
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mount_points_with_escapes() {
        let text = b"22 27 0:21 / /proc rw,relatime - proc proc rw\n\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n\
40 27 0:40 / /home/with\\040space rw - ext4 /dev/vdb rw\n\
garbage\n";
        let (points, bad) = parse_mount_points(text);
        assert_eq!(
            points,
            vec![
                PathBuf::from("/proc"),
                PathBuf::from("/"),
                PathBuf::from("/home/with space")
            ]
        );
        assert_eq!(bad, 1);
    }

    #[test]
    fn rejects_bad_escapes_and_relative_paths() {
        assert_eq!(unescape(b"/a\\09"), None);
        assert_eq!(unescape(b"/a\\0"), None);
        assert_eq!(unescape(b"/a\\777"), None);
        assert_eq!(unescape(b"rel"), None);
        assert_eq!(unescape(b"/a\\000"), None);
        assert_eq!(unescape(b"/a\\134b"), Some(PathBuf::from("/a\\b")));
    }

    #[test]
    fn garbage_never_panics() {
        let mut seed = 0x1234_5678_9abc_def1_u64;
        for _ in 0..5_000 {
            let len = (seed % 300) as usize;
            let buf: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    // Bias towards the bytes the parser cares about.
                    match seed % 6 {
                        0 => b' ',
                        1 => b'\\',
                        2 => b'/',
                        3 => b'\n',
                        4 => b'0' + (seed % 10) as u8,
                        _ => seed as u8,
                    }
                })
                .collect();
            let _ = parse_mount_points(&buf);
        }
    }

    #[test]
    fn this_host_has_a_root_mount() {
        let text = std::fs::read("/proc/self/mountinfo").expect("mountinfo");
        let (points, _) = parse_mount_points(&text);
        assert!(points.contains(&PathBuf::from("/")));
    }
}
