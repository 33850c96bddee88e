//! Handing back the pages of the daemon's own code that only start-up used.
//!
//! Nearly all of idle RSS is the executable's code and read-only data: the kernel maps code
//! in blocks around each fault (fault-around, and whole large page-cache folios on recent
//! kernels), and start-up (configuration, TLS key generation, store migrations, rule
//! compilation, every subsystem's first run) touches code spread over the whole binary. Most of
//! it never runs again. [`release_startup_code`] asks the kernel (`MADV_PAGEOUT`) to reclaim
//! those clean, file-backed pages once start-up is over; code that still runs faults back in
//! as it is used (from the page cache, or from disk if the page was dropped), so only what
//! the running daemon uses stays resident.
//!
//! Only mappings of the executable that are not writable are touched (code, read-only data
//! and relocation-protected data); the heap, stacks and other libraries are left alone. The
//! kernel skips pages another process also maps. On kernels without `MADV_PAGEOUT` (before
//! 5.4) the call fails and nothing changes.

use std::io;
use std::path::Path;

/// One mapping of `/proc/self/maps` worth paging out: start address and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub start: usize,
    pub len: usize,
}

/// The read-only mappings of the file `exe` in a `/proc/<pid>/maps` text. Lines that do not
/// parse are skipped. A replaced executable is shown as `<path> (deleted)` and still counts.
pub fn exe_read_only_ranges(maps: &str, exe: &Path) -> Vec<Range> {
    let exe = exe.as_os_str().as_encoded_bytes();
    let mut out = Vec::new();
    for line in maps.lines() {
        // "start-end perms offset dev inode   path"
        let mut fields = line.splitn(6, ' ');
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
            continue;
        };
        let Some(path) = fields.nth(3).map(str::trim_start) else {
            continue;
        };
        let path = path.strip_suffix(" (deleted)").unwrap_or(path);
        if path.as_bytes() != exe
            || !perms.starts_with('r')
            || perms.as_bytes().get(1) != Some(&b'-')
        {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) else {
            continue;
        };
        if b > a {
            out.push(Range {
                start: a,
                len: b - a,
            });
        }
    }
    out
}

/// Asks the kernel to reclaim the resident pages of the executable's read-only mappings,
/// found in `maps` (the text of `/proc/self/maps`, read by the caller: `sys` reads no file
/// of its own). Returns the bytes of address space advised (not all of it was resident).
/// Call once, after start-up: the code that keeps running comes back on its first use.
pub fn release_startup_code(maps: &str) -> io::Result<usize> {
    let exe = std::fs::read_link("/proc/self/exe")?;
    let mut advised = 0;
    for r in exe_read_only_ranges(maps, &exe) {
        advise_pageout(r)?;
        advised += r.len;
    }
    Ok(advised)
}

#[cfg(target_os = "linux")]
fn advise_pageout(r: Range) -> io::Result<()> {
    // SAFETY: the range is a whole mapping of this process read from /proc/self/maps (page
    // aligned). MADV_PAGEOUT only reclaims pages; the mapping, its contents and its
    // protection stay as they are, and a later access faults the page back in, so no Rust
    // reference into it is invalidated.
    let rc = unsafe { libc::madvise(r.start as *mut libc::c_void, r.len, libc::MADV_PAGEOUT) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_pageout(_r: Range) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c8a00000-55d0c8d03000 r--p 00000000 fe:00 5644321                    /usr/sbin/svc
55d0c8d03000-55d0c976c000 r-xp 00302000 fe:00 5644321                    /usr/sbin/svc
55d0c976c000-55d0c97b2000 r--p 00d6b000 fe:00 5644321                    /usr/sbin/svc
55d0c97b2000-55d0c97b6000 rw-p 00db0000 fe:00 5644321                    /usr/sbin/svc
55d0c97b6000-55d0c97b9000 rw-p 00000000 00:00 0 
55d0ca000000-55d0ca1b4000 rw-p 00000000 00:00 0                          [heap]
7f1c2a000000-7f1c2a156000 r-xp 00026000 fe:00 326279                     /usr/lib/x86_64-linux-gnu/libc.so.6
7f1c2b000000-7f1c2b001000 r-xp 00000000 fe:00 9999                       /usr/sbin/svc-other
7f1c2c000000-7f1c2c010000 r-xp 00000000 fe:00 7777                       /opt/new svc (deleted)
garbage line
";

    #[test]
    fn only_the_executables_read_only_mappings_are_chosen() {
        let got = exe_read_only_ranges(MAPS, Path::new("/usr/sbin/svc"));
        assert_eq!(
            got,
            vec![
                Range {
                    start: 0x55d0c8a00000,
                    len: 0x303000
                },
                Range {
                    start: 0x55d0c8d03000,
                    len: 0xa69000
                },
                Range {
                    start: 0x55d0c976c000,
                    len: 0x46000
                },
            ]
        );
        // A path with a space, replaced on disk since it was started.
        let deleted = exe_read_only_ranges(MAPS, Path::new("/opt/new svc"));
        assert_eq!(deleted.len(), 1);
        assert!(exe_read_only_ranges(MAPS, Path::new("/usr/sbin/sv")).is_empty());
    }

    /// Resident KiB of this process's mappings of its own executable.
    fn exe_resident_kib() -> u64 {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_str().unwrap();
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut mine = false;
        let mut kib = 0;
        for line in smaps.lines() {
            if line.starts_with(|c: char| c.is_ascii_hexdigit()) && line.contains('-') {
                mine = line.trim_end().ends_with(exe);
            } else if let Some(v) = line.strip_prefix("Rss:") {
                if mine {
                    kib += v.trim().trim_end_matches(" kB").parse::<u64>().unwrap_or(0);
                }
            }
        }
        kib
    }

    #[test]
    fn paging_out_this_process_keeps_its_code_running() {
        let before = exe_resident_kib();
        let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
        let advised = release_startup_code(&maps).expect("MADV_PAGEOUT on this test binary");
        let after = exe_resident_kib();
        assert!(
            advised > 0,
            "the test binary's code was not found in its maps"
        );
        // The test binary's code was resident (it is running) and most of it is handed
        // back; what this thread runs next faults back in.
        assert!(
            after < before,
            "resident code did not fall: {before} KiB before, {after} KiB after"
        );
        // Code and read-only data fault back in on use.
        let v: Vec<u64> = (0..1000).collect();
        assert_eq!(v.iter().sum::<u64>(), 499_500);
        assert_eq!(
            format!("{:?}", Range { start: 1, len: 2 }),
            "Range { start: 1, len: 2 }"
        );
    }
}
