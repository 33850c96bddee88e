//! Native phar archives: a PHP stub ending in `__HALT_COMPILER();` (optionally `?>` and a
//! line break), a manifest (little-endian: manifest length, file count, API version, flags,
//! alias, metadata, then per file its name, sizes, time, CRC, flags and metadata), then the
//! members' bytes in manifest order.
//!
//! Uncompressed members are handed to the visitor (and the stub, as `{name}/(stub)`);
//! compressed ones (zlib, bzip2) are refused (`phar_compressed`). Never panics; every length
//! is checked against the bytes present and [`MAX_BYTES`] / [`MAX_FILES`] (the defaults of
//! the mail archive limits); what they refuse is reported.

use std::fs::File;

use super::PackageOutcome;

pub const MAX_BYTES: u64 = 32 * 1024 * 1024;
pub const MAX_FILES: usize = 1000;
const HALT: &[u8] = b"__HALT_COMPILER();";
const COMPRESSED: u32 = 0x0000_F000;

/// Whether `head` (the file's first bytes) holds a native phar stub.
pub fn is_native_phar(head: &[u8]) -> bool {
    memchr::memmem::find(head, HALT).is_some()
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.b.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    fn u32(&mut self) -> Option<u32> {
        let s = self.take(4)?;
        Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
}

struct Entry<'a> {
    name: &'a [u8],
    compressed_size: u32,
    flags: u32,
}

/// Offset of the manifest in `data`.
fn manifest_start(data: &[u8]) -> Option<usize> {
    let mut at = memchr::memmem::find(data, HALT)? + HALT.len();
    for tail in [&b" ?>"[..], b"?>"] {
        if data.get(at..).is_some_and(|r| r.starts_with(tail)) {
            at += tail.len();
            break;
        }
    }
    for nl in [&b"\r\n"[..], b"\n"] {
        if data.get(at..).is_some_and(|r| r.starts_with(nl)) {
            at += nl.len();
            break;
        }
    }
    Some(at)
}

/// Parses `data` (a whole phar) and visits its stub and uncompressed members.
pub fn read_bytes(data: &[u8], name: &str, visit: &mut dyn FnMut(&str, &[u8])) -> PackageOutcome {
    let mut out = PackageOutcome {
        recognised: true,
        ..PackageOutcome::default()
    };
    let refuse = |out: &mut PackageOutcome, r: &'static str| {
        if !out.refused.contains(&r) {
            out.refused.push(r);
        }
    };
    let Some(start) = manifest_start(data) else {
        out.recognised = false;
        return out;
    };
    visit(&format!("{name}/(stub)"), &data[..start]);
    let mut c = Cursor {
        b: data,
        pos: start,
    };
    let parsed = (|| {
        let len = c.u32()? as usize;
        let body_start = c.pos.checked_add(len)?;
        if body_start > data.len() {
            return None;
        }
        let count = c.u32()? as usize;
        c.take(2)?; // API version
        c.take(4)?; // global flags
        let alias = c.u32()? as usize;
        c.take(alias)?;
        let meta = c.u32()? as usize;
        c.take(meta)?;
        let mut entries = Vec::new();
        for _ in 0..count {
            if entries.len() >= MAX_FILES {
                return Some((entries, body_start, true));
            }
            let n = c.u32()? as usize;
            let ename = c.take(n)?;
            c.u32()?; // uncompressed size
            c.u32()?; // time
            let compressed_size = c.u32()?;
            c.u32()?; // CRC32
            let flags = c.u32()?;
            let m = c.u32()? as usize;
            c.take(m)?;
            entries.push(Entry {
                name: ename,
                compressed_size,
                flags,
            });
        }
        Some((entries, body_start, false))
    })();
    let Some((entries, body_start, over)) = parsed else {
        refuse(&mut out, "archive_error");
        return out;
    };
    if over {
        refuse(&mut out, "archive_file_limit");
    }
    let mut pos = body_start;
    let mut total = 0u64;
    for e in entries {
        let size = e.compressed_size as usize;
        let Some(bytes) = pos.checked_add(size).and_then(|end| data.get(pos..end)) else {
            refuse(&mut out, "archive_error");
            break;
        };
        pos += size;
        total += size as u64;
        if total > MAX_BYTES {
            refuse(&mut out, "archive_size_limit");
            break;
        }
        out.members += 1;
        if e.flags & COMPRESSED != 0 {
            refuse(&mut out, "phar_compressed");
            continue;
        }
        let member = String::from_utf8_lossy(e.name);
        visit(&format!("{name}/{member}"), bytes);
    }
    out
}

/// Reads a phar file within [`MAX_BYTES`] (plus its stub) and parses it.
pub fn read(file: &File, name: &str, visit: &mut dyn FnMut(&str, &[u8])) -> PackageOutcome {
    match super::read_limited(file, MAX_BYTES + 1024 * 1024) {
        Ok(Some(data)) => read_bytes(&data, name, visit),
        Ok(None) => PackageOutcome {
            recognised: true,
            members: 0,
            refused: vec!["archive_size_limit"],
        },
        Err(_) => PackageOutcome {
            recognised: true,
            members: 0,
            refused: vec!["archive_error"],
        },
    }
}

/// A phar of `members` (name, content, compressed flag), for tests and fuzzing seeds.
pub fn build(stub: &[u8], members: &[(&str, &[u8], bool)]) -> Vec<u8> {
    let mut manifest = Vec::new();
    manifest.extend_from_slice(&(members.len() as u32).to_le_bytes());
    manifest.extend_from_slice(&0x1100u16.to_le_bytes());
    manifest.extend_from_slice(&0x0001_0000u32.to_le_bytes());
    manifest.extend_from_slice(&0u32.to_le_bytes()); // alias
    manifest.extend_from_slice(&0u32.to_le_bytes()); // metadata
    for (n, body, compressed) in members {
        manifest.extend_from_slice(&(n.len() as u32).to_le_bytes());
        manifest.extend_from_slice(n.as_bytes());
        manifest.extend_from_slice(&(body.len() as u32).to_le_bytes());
        manifest.extend_from_slice(&0u32.to_le_bytes());
        manifest.extend_from_slice(&(body.len() as u32).to_le_bytes());
        manifest.extend_from_slice(&0u32.to_le_bytes());
        let flags: u32 = if *compressed { 0x1000 } else { 0 } | 0o644;
        manifest.extend_from_slice(&flags.to_le_bytes());
        manifest.extend_from_slice(&0u32.to_le_bytes());
    }
    let mut out = stub.to_vec();
    out.extend_from_slice(&(manifest.len() as u32).to_le_bytes());
    out.extend_from_slice(&manifest);
    for (_, body, _) in members {
        out.extend_from_slice(body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STUB: &[u8] = b"<?php Phar::mapPhar(); __HALT_COMPILER(); ?>\r\n";

    fn members(data: &[u8]) -> (Vec<String>, PackageOutcome) {
        let mut got = Vec::new();
        let out = read_bytes(data, "p.phar", &mut |n, _| got.push(n.to_string()));
        (got, out)
    }

    #[test]
    fn uncompressed_members_are_visited_and_compressed_ones_refused() {
        let p = build(
            STUB,
            &[("a.php", b"<?php echo 1;", false), ("b.php", b"xx", true)],
        );
        let (got, out) = members(&p);
        assert_eq!(got, ["p.phar/(stub)", "p.phar/a.php"]);
        assert_eq!(out.refused, ["phar_compressed"]);
        assert_eq!(out.members, 2);
    }

    #[test]
    fn truncated_and_hostile_phars_are_refused_without_panic() {
        let p = build(STUB, &[("a.php", b"<?php echo 1;", false)]);
        for cut in 0..p.len() {
            let _ = members(&p[..cut]);
        }
        let (_, out) = members(&p[..p.len() - 3]);
        assert_eq!(out.refused, ["archive_error"]);
        let mut huge = STUB.to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(members(&huge).1.refused, ["archive_error"]);
        assert!(!members(b"<?php echo 1;").1.recognised);
        let mut g = STUB.to_vec();
        g.extend(crate::checks::testutil::garbage(3, 4096));
        let _ = members(&g);
    }
}
