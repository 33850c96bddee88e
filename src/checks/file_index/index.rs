//! Indexing one root: a walk through `sys::dir` (no symlink is followed, paths are raw
//! bytes) that hashes only files whose inode, size, mtime or ctime differ from the
//! baseline, and lists what is new or changed.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::hostfs::is_php_name;
use crate::store::file_index::IndexedFile;
use crate::sys::dir::{Dir, FileInfo, Kind};

/// Limits of one root's walk; what they refuse is counted in [`IndexStats`].
#[derive(Clone, Copy, Debug)]
pub struct IndexLimits {
    /// Directory entries looked at, at most.
    pub max_entries: usize,
    /// Directory depth below the root.
    pub max_depth: usize,
    /// Monotonic nanoseconds (of the caller's clock) after which the walk stops.
    pub deadline: Option<i64>,
}

/// What one walk did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Regular files indexed.
    pub files: u64,
    /// Files read and hashed (new or changed metadata).
    pub hashed: u64,
    /// Bytes read to hash.
    pub bytes_hashed: u64,
    /// Files whose metadata matched the baseline: not read, hash kept.
    pub unchanged: u64,
    /// Symlinks met (never followed).
    pub symlinks: u64,
    /// Files or directories that could not be read (vanished, permission, I/O).
    pub errors: u64,
    /// Directories not entered because of the depth limit.
    pub depth_refused: u64,
    /// The walk stopped at the entry limit or the deadline: files not seen stay as they were.
    pub incomplete: bool,
}

/// Why a file is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    New,
    /// The content differs from the baseline.
    Changed,
    /// Only the metadata differs (the content hashes the same): recorded, never reported.
    MetadataOnly,
}

/// A file new or changed since the baseline (its new record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub kind: ChangeKind,
    pub file: IndexedFile,
}

/// The result of indexing one root.
#[derive(Debug, Default)]
pub struct RootIndex {
    /// New or changed files, to write to the baseline (the same files as `changes`).
    pub changes: Vec<Change>,
    /// Baseline paths not seen by a complete walk (removed files).
    pub removed: Vec<Vec<u8>>,
    pub stats: IndexStats,
}

fn nanos((s, ns): (i64, i64)) -> i64 {
    s.saturating_mul(1_000_000_000).saturating_add(ns)
}

/// Whether the file's metadata says its content may differ from the record.
fn may_differ(rec: &IndexedFile, info: &FileInfo) -> bool {
    rec.size != i64::try_from(info.size).unwrap_or(i64::MAX)
        || rec.mtime_ns != nanos(info.mtime)
        || rec.ctime_ns != nanos(info.ctime)
        || rec.ino != info.ino as i64
        || rec.dev != info.dev as i64
}

fn record(path: Vec<u8>, info: &FileInfo, hash: Vec<u8>) -> IndexedFile {
    IndexedFile {
        path,
        size: i64::try_from(info.size).unwrap_or(i64::MAX),
        mode: i64::from(info.mode),
        uid: i64::from(info.uid),
        gid: i64::from(info.gid),
        mtime_ns: nanos(info.mtime),
        ctime_ns: nanos(info.ctime),
        dev: info.dev as i64,
        ino: info.ino as i64,
        hash,
    }
}

/// SHA-256 of everything `r` yields, read through `buf`; the byte count.
pub fn hash_reader(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<(Vec<u8>, u64)> {
    let mut h = Sha256::new();
    let mut n = 0u64;
    loop {
        match r.read(buf) {
            Ok(0) => break,
            Ok(k) => {
                h.update(&buf[..k]);
                n += k as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((h.finalize().to_vec(), n))
}

/// Indexes the tree below `root` against `baseline` (relative path -> record). `now`
/// reads the caller's monotonic clock for the deadline.
pub fn index_root(
    root: &Dir,
    baseline: &HashMap<Vec<u8>, IndexedFile>,
    limits: IndexLimits,
    now: &dyn Fn() -> i64,
) -> RootIndex {
    let mut out = RootIndex::default();
    let mut seen: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    let mut buf = vec![0u8; 128 * 1024];
    let mut left = limits.max_entries;
    // (directory, its path below the root, depth)
    let mut stack: Vec<(Dir, Vec<u8>, usize)> = match root.try_clone() {
        Ok(d) => vec![(d, Vec::new(), 0)],
        Err(_) => {
            out.stats.errors += 1;
            out.stats.incomplete = true;
            return out;
        }
    };
    'walk: while let Some((dir, rel, depth)) = stack.pop() {
        if limits.deadline.is_some_and(|d| now() >= d) {
            out.stats.incomplete = true;
            break;
        }
        let (entries, more) = match dir.entries(left) {
            Ok(e) => e,
            Err(_) => {
                out.stats.errors += 1;
                continue;
            }
        };
        left -= entries.len();
        if more {
            out.stats.incomplete = true;
        }
        for e in entries {
            let mut path = rel.clone();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(e.name.as_bytes());
            // d_type is only a hint: the decision is made on lstat.
            let info = match dir.lstat(&e.name) {
                Ok(Some(i)) => i,
                Ok(None) => continue,
                Err(_) => {
                    out.stats.errors += 1;
                    continue;
                }
            };
            match info.kind {
                Kind::Dir => {
                    if depth + 1 > limits.max_depth {
                        out.stats.depth_refused += 1;
                        continue;
                    }
                    match dir.child(&e.name) {
                        Ok(d) => stack.push((d, path, depth + 1)),
                        Err(_) => out.stats.errors += 1,
                    }
                }
                Kind::File => {
                    out.stats.files += 1;
                    if let Some((k, _)) = baseline.get_key_value(path.as_slice()) {
                        seen.insert(k.as_slice());
                    }
                    index_file(&dir, &e.name, path, &info, baseline, &mut buf, &mut out);
                }
                Kind::Symlink => out.stats.symlinks += 1,
                _ => {}
            }
            if limits.deadline.is_some_and(|d| now() >= d) {
                out.stats.incomplete = true;
                break 'walk;
            }
        }
        if more {
            break;
        }
    }
    if !out.stats.incomplete {
        out.removed = baseline
            .keys()
            .filter(|k| !seen.contains(k.as_slice()))
            .cloned()
            .collect();
        out.removed.sort();
    }
    out
}

/// Indexes one regular file: kept from the baseline when its metadata matches, hashed
/// otherwise.
fn index_file(
    dir: &Dir,
    name: &OsStr,
    path: Vec<u8>,
    info: &FileInfo,
    baseline: &HashMap<Vec<u8>, IndexedFile>,
    buf: &mut [u8],
    out: &mut RootIndex,
) {
    let prev = baseline.get(path.as_slice());
    if let Some(rec) = prev {
        if !may_differ(rec, info) {
            out.stats.unchanged += 1;
            return;
        }
    }
    let mut f = match dir.open_regular(name) {
        Ok(f) => f,
        Err(_) => {
            out.stats.errors += 1;
            return;
        }
    };
    let (hash, n) = match hash_reader(&mut f, buf) {
        Ok(h) => h,
        Err(_) => {
            out.stats.errors += 1;
            return;
        }
    };
    out.stats.hashed += 1;
    out.stats.bytes_hashed += n;
    // The metadata of the inode that was read (the name may have moved meanwhile).
    let info = FileInfo::of(&f).unwrap_or(*info);
    let kind = match prev {
        None => ChangeKind::New,
        Some(rec) if rec.hash != hash => ChangeKind::Changed,
        // Same content, new metadata (touched, chmod, copied back): recorded, not reported.
        Some(_) => ChangeKind::MetadataOnly,
    };
    out.changes.push(Change {
        kind,
        file: record(path, &info, hash),
    });
}

/// Whether `rel` (a path below a web root, raw bytes) lies where files rarely change:
/// WordPress core directories, PHP below `wp-content/uploads/`, `.htaccess` anywhere.
pub fn watched_place(rel: &[u8]) -> Option<Place> {
    let parts: Vec<&[u8]> = rel.split(|b| *b == b'/').collect();
    let name = parts.last().copied().unwrap_or_default();
    if name == b".htaccess" {
        return Some(Place::Htaccess);
    }
    let dirs = &parts[..parts.len().saturating_sub(1)];
    if dirs
        .iter()
        .any(|d| *d == b"wp-admin" || *d == b"wp-includes")
    {
        return Some(Place::Core);
    }
    let in_uploads = dirs
        .windows(2)
        .any(|w| w[0] == b"wp-content" && w[1] == b"uploads");
    if in_uploads && is_php_name(name) {
        return Some(Place::UploadsPhp);
    }
    None
}

/// Where a watched file lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Below `wp-admin/` or `wp-includes/`.
    Core,
    /// A PHP file below `wp-content/uploads/`.
    UploadsPhp,
    /// An `.htaccess` file.
    Htaccess,
}

impl Place {
    pub fn label(self) -> &'static str {
        match self {
            Place::Core => "WordPress core directory",
            Place::UploadsPhp => "PHP in uploads",
            Place::Htaccess => ".htaccess",
        }
    }
}

/// `root`'s path as bytes (the store's key).
pub fn root_key(root: &Path) -> Vec<u8> {
    root.as_os_str().as_bytes().to_vec()
}
