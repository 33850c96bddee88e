//! Zip, gzip and tar(.gz) attachments unpacked for scanning, within limits.
//!
//! Guarantees:
//! - An archive is recognised by its bytes (zip local header or end record, gzip magic, tar
//!   `ustar` magic), never by its name.
//! - Limits per top-level archive, members of nested archives included: total unpacked
//!   bytes ([`ArchiveLimits::max_bytes`]), number of members
//!   ([`ArchiveLimits::max_files`]), nesting ([`ArchiveLimits::max_depth`]) and
//!   compression ratio ([`ArchiveLimits::max_ratio`]: a member may inflate to at most
//!   `max_ratio` times its compressed size, or 1 MiB when that is more). Declared sizes are
//!   checked first, then every read is bounded by the same limits, so nothing is ever
//!   inflated past a limit whatever the headers claim: a zip bomb is refused after at most
//!   the allowed bytes and reported ([`Reason::ArchiveRatioLimit`]).
//! - Encrypted members are not decrypted (reported); damaged archives are scanned as far as
//!   they can be read (reported).
//! - Member names are sanitised base names ([`super::mime::sanitize_name`]).

use std::io::{self, Read};
use std::sync::Arc;

use super::mime::{sanitize_name, Reason};
use super::staging::{Spill, Staging};

pub use crate::config::mail::ArchiveLimits;

/// Below this many bytes a member is never a ratio bomb.
pub const RATIO_FLOOR: u64 = 1024 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Zip,
    Gzip,
    Tar,
}

/// The archive kind of content starting with `head` (at least 262 bytes for tar).
pub fn detect(head: &[u8]) -> Option<Kind> {
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        Some(Kind::Zip)
    } else if head.starts_with(&[0x1f, 0x8b]) {
        Some(Kind::Gzip)
    } else if head.get(257..262) == Some(b"ustar") {
        Some(Kind::Tar)
    } else {
        None
    }
}

/// The first bytes of a spill (for [`detect`]).
pub fn head(content: &Spill, len: u64) -> Vec<u8> {
    let mut h = vec![0u8; 512];
    let mut r = content.reader(len);
    let mut n = 0;
    while n < h.len() {
        match r.read(&mut h[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    h.truncate(n);
    h
}

/// One unpacked member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Sanitised base name of the member.
    pub name: Option<String>,
    /// Where it sits: sanitised names of the archives and the member, `/`-joined.
    pub path: String,
    pub size: u64,
}

/// What unpacking found.
#[derive(Debug, Default)]
pub struct Unpacked {
    pub members: usize,
    pub bytes: u64,
    pub refused: Vec<Reason>,
}

/// Unpacks archives for one top-level attachment.
pub struct Unpacker<'v> {
    limits: ArchiveLimits,
    staging: Option<Arc<Staging>>,
    mem_bytes: usize,
    visit: &'v mut dyn FnMut(&Member, &Spill),
    pub out: Unpacked,
    stop: bool,
}

/// Reads at most `limit` bytes and records whether more were there.
struct Bounded<R> {
    r: R,
    left: u64,
    over: bool,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            // One byte more tells whether the limit cut something.
            let mut one = [0u8; 1];
            if self.r.read(&mut one)? > 0 {
                self.over = true;
            }
            return Ok(0);
        }
        let want = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let n = self.r.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

impl<'v> Unpacker<'v> {
    pub fn new(
        limits: ArchiveLimits,
        staging: Option<Arc<Staging>>,
        mem_bytes: usize,
        visit: &'v mut dyn FnMut(&Member, &Spill),
    ) -> Unpacker<'v> {
        Unpacker {
            limits,
            staging,
            mem_bytes,
            visit,
            out: Unpacked::default(),
            stop: false,
        }
    }

    fn refuse(&mut self, r: Reason) {
        if !self.out.refused.contains(&r) {
            self.out.refused.push(r);
        }
    }

    fn room(&self) -> u64 {
        self.limits.max_bytes.saturating_sub(self.out.bytes)
    }

    /// Unpacks `content[..len]` of `kind`, found at `path` (sanitised), at nesting `depth`
    /// (1 for an attachment).
    pub fn unpack(&mut self, kind: Kind, content: &Spill, len: u64, path: &str, depth: usize) {
        if self.stop {
            return;
        }
        if depth > self.limits.max_depth {
            self.refuse(Reason::ArchiveDepthLimit);
            return;
        }
        let r = match kind {
            Kind::Zip => self.zip(content, len, path, depth),
            Kind::Gzip => self.gzip(content, len, path, depth),
            Kind::Tar => {
                let r = content.reader(len);
                self.tar(r, path, depth)
            }
        };
        if r.is_err() {
            self.refuse(Reason::ArchiveError);
        }
    }

    /// Reads one member into a spill within the limits; `compressed` is its compressed
    /// size when known (ratio rule). Returns the spill, or `None` when refused.
    fn member(&mut self, r: &mut dyn Read, compressed: Option<u64>) -> io::Result<Option<Spill>> {
        let ratio_cap =
            compressed.map(|c| c.saturating_mul(self.limits.max_ratio).max(RATIO_FLOOR));
        let room = self.room();
        let cap = ratio_cap.map_or(room, |c| c.min(room));
        let mut b = Bounded {
            r,
            left: cap,
            over: false,
        };
        let mut spill = Spill::new(self.mem_bytes, self.staging.clone());
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = b.read(&mut buf)?;
            if n == 0 {
                break;
            }
            if spill.write(&buf[..n]).is_err() {
                self.refuse(Reason::ArchiveError);
                return Ok(None);
            }
        }
        self.out.bytes += spill.len();
        if b.over {
            let why = if ratio_cap.is_some_and(|c| c <= room) {
                Reason::ArchiveRatioLimit
            } else {
                Reason::ArchiveSizeLimit
            };
            self.refuse(why);
            self.stop = true;
        }
        if spill.flush().is_err() {
            self.refuse(Reason::ArchiveError);
            return Ok(None);
        }
        Ok(Some(spill))
    }

    fn count_file(&mut self) -> bool {
        if self.out.members >= self.limits.max_files {
            self.refuse(Reason::ArchiveFileLimit);
            self.stop = true;
            return false;
        }
        self.out.members += 1;
        true
    }

    fn deliver(&mut self, name: Option<String>, spill: &Spill, path: &str, depth: usize) {
        let shown = name.clone().unwrap_or_else(|| "(member)".into());
        let m = Member {
            name,
            path: format!("{path}/{shown}"),
            size: spill.len(),
        };
        (self.visit)(&m, spill);
        if let Some(k) = detect(&head(spill, spill.len())) {
            self.unpack(k, spill, spill.len(), &m.path, depth + 1);
        }
    }

    fn zip(&mut self, content: &Spill, len: u64, path: &str, depth: usize) -> io::Result<()> {
        let mut z = zip::ZipArchive::new(content.reader(len)).map_err(io::Error::other)?;
        for i in 0..z.len() {
            if self.stop {
                break;
            }
            let mut f = match z.by_index(i) {
                Ok(f) => f,
                Err(zip::result::ZipError::UnsupportedArchive(m)) if m.contains("ncrypt") => {
                    self.refuse(Reason::ArchiveEncrypted);
                    continue;
                }
                Err(zip::result::ZipError::UnsupportedArchive(_)) => {
                    self.refuse(Reason::ArchiveError);
                    continue;
                }
                Err(e) => return Err(io::Error::other(e)),
            };
            if f.is_dir() {
                continue;
            }
            if f.encrypted() {
                self.refuse(Reason::ArchiveEncrypted);
                continue;
            }
            if !self.count_file() {
                break;
            }
            let name = sanitize_name(f.name());
            let compressed = f.compressed_size();
            let declared = f.size();
            // Declared sizes over a limit are refused before anything is inflated.
            if declared
                > compressed
                    .saturating_mul(self.limits.max_ratio)
                    .max(RATIO_FLOOR)
            {
                self.refuse(Reason::ArchiveRatioLimit);
                self.stop = true;
                break;
            }
            if declared > self.room() {
                self.refuse(Reason::ArchiveSizeLimit);
                self.stop = true;
                break;
            }
            let spill = match self.member(&mut f, Some(compressed)) {
                Ok(Some(s)) => s,
                Ok(None) => continue,
                Err(_) => {
                    // A damaged member: what was read is lost, later members are tried.
                    self.refuse(Reason::ArchiveError);
                    continue;
                }
            };
            drop(f);
            self.deliver(name, &spill, path, depth);
        }
        Ok(())
    }

    fn gzip(&mut self, content: &Spill, len: u64, path: &str, depth: usize) -> io::Result<()> {
        let mut gz = flate2::read::MultiGzDecoder::new(content.reader(len));
        let inner = match self.member(&mut gz, Some(len)) {
            Ok(Some(s)) => s,
            Ok(None) => return Ok(()),
            Err(e) => return Err(e),
        };
        if detect(&head(&inner, inner.len())) == Some(Kind::Tar) {
            // The tar stream's bytes were counted; members count again only as files.
            self.out.bytes = self.out.bytes.saturating_sub(inner.len());
            let r = inner.reader(inner.len());
            return self.tar(r, path, depth);
        }
        if !self.count_file() {
            return Ok(());
        }
        let base = path.rsplit('/').next().unwrap_or(path);
        let name = base
            .strip_suffix(".gz")
            .or_else(|| base.strip_suffix(".GZ"))
            .map(str::to_string);
        self.deliver(name, &inner, path, depth);
        Ok(())
    }

    fn tar(&mut self, r: impl Read, path: &str, depth: usize) -> io::Result<()> {
        let mut t = tar::Archive::new(r);
        for e in t.entries()? {
            if self.stop {
                break;
            }
            let mut e = e?;
            let kind = e.header().entry_type();
            if !(kind.is_file() || kind == tar::EntryType::Continuous) {
                continue;
            }
            if !self.count_file() {
                break;
            }
            let name = e.path_bytes().as_ref().pipe_name();
            let declared = e.header().size().unwrap_or(0);
            if declared > self.room() {
                self.refuse(Reason::ArchiveSizeLimit);
                self.stop = true;
                break;
            }
            let spill = match self.member(&mut e, None)? {
                Some(s) => s,
                None => continue,
            };
            self.deliver(name, &spill, path, depth);
        }
        Ok(())
    }
}

trait PipeName {
    fn pipe_name(&self) -> Option<String>;
}

impl PipeName for [u8] {
    fn pipe_name(&self) -> Option<String> {
        sanitize_name(&String::from_utf8_lossy(self))
    }
}

/// The unpacker as the file watcher's staged-package reader ([`crate::watch::staged`]):
/// the whole archive within `max_bytes` in memory, members visited with their path inside
/// it, the same limits and refusals as for attachments.
pub struct PackageUnpacker {
    pub limits: ArchiveLimits,
}

impl crate::watch::staged::PackageReader for PackageUnpacker {
    fn read(
        &self,
        file: &std::fs::File,
        name: &str,
        visit: &mut dyn FnMut(&str, &[u8]),
    ) -> crate::watch::staged::PackageOutcome {
        use crate::watch::staged::PackageOutcome;
        let refused = |r: Reason| PackageOutcome {
            recognised: true,
            members: 0,
            refused: vec![r.as_str()],
        };
        let data = match crate::watch::staged::read_limited(file, self.limits.max_bytes) {
            Ok(Some(d)) => d,
            Ok(None) => return refused(Reason::ArchiveSizeLimit),
            Err(_) => return refused(Reason::ArchiveError),
        };
        let Some(kind) = detect(&data[..data.len().min(512)]) else {
            return PackageOutcome::default();
        };
        let mut spill = Spill::new(usize::MAX, None);
        if spill.write(&data).is_err() || spill.flush().is_err() {
            return refused(Reason::ArchiveError);
        }
        drop(data);
        let mut v = |m: &Member, s: &Spill| {
            let mut bytes = Vec::new();
            if s.reader(s.len()).read_to_end(&mut bytes).is_ok() {
                visit(&m.path, &bytes);
            }
        };
        let shown = sanitize_name(name).unwrap_or_else(|| "(package)".into());
        let mut u = Unpacker::new(self.limits, None, usize::MAX, &mut v);
        u.unpack(kind, &spill, spill.len(), &shown, 1);
        PackageOutcome {
            recognised: true,
            members: u.out.members,
            refused: u.out.refused.iter().map(|r| r.as_str()).collect(),
        }
    }
}

/// A deflated zip of `files` (tests of the unpacker and of its users).
#[cfg(test)]
pub(crate) fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    use std::io::Write;
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opt = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (n, d) in files {
            z.start_file(*n, opt).unwrap();
            z.write_all(d).unwrap();
        }
        z.finish().unwrap();
    }
    buf.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn spill(b: &[u8]) -> Spill {
        let mut s = Spill::new(usize::MAX, None);
        s.write(b).unwrap();
        s
    }

    fn unpack_all(data: &[u8], limits: ArchiveLimits) -> (Vec<(Member, Vec<u8>)>, Unpacked) {
        let mut got = Vec::new();
        let mut visit = |m: &Member, s: &Spill| {
            let mut v = Vec::new();
            s.reader(s.len()).read_to_end(&mut v).unwrap();
            got.push((m.clone(), v));
        };
        let s = spill(data);
        let kind = detect(&head(&s, s.len())).expect("archive");
        let out = {
            let mut u = Unpacker::new(limits, None, usize::MAX, &mut visit);
            u.unpack(kind, &s, s.len(), "a.zip", 1);
            u.out
        };
        (got, out)
    }

    #[test]
    fn zip_members_and_nested_zip() {
        let inner = zip_of(&[("deep.txt", b"deep payload")]);
        let outer = zip_of(&[("dir/../x.txt", b"hello"), ("inner.zip", &inner)]);
        let (got, out) = unpack_all(&outer, ArchiveLimits::default());
        assert!(out.refused.is_empty(), "{:?}", out.refused);
        let names: Vec<_> = got.iter().map(|(m, _)| m.path.clone()).collect();
        assert_eq!(
            names,
            ["a.zip/x.txt", "a.zip/inner.zip", "a.zip/inner.zip/deep.txt"]
        );
        assert_eq!(got[2].1, b"deep payload");
    }

    #[test]
    fn zip_bomb_is_refused_without_inflating_past_the_limit() {
        let zeros = vec![0u8; 20 * 1024 * 1024];
        let bomb = zip_of(&[("zeros.bin", &zeros)]);
        assert!(bomb.len() < 100_000);
        let (got, out) = unpack_all(&bomb, ArchiveLimits::default());
        assert_eq!(out.refused, vec![Reason::ArchiveRatioLimit]);
        // Refused on its declared size: nothing inflated.
        assert!(got.is_empty());
        assert_eq!(out.bytes, 0);
    }

    #[test]
    fn tar_gz_members() {
        let mut tar_bytes = Vec::new();
        {
            let mut b = tar::Builder::new(&mut tar_bytes);
            let data = b"inside tar";
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, "a/b/evil.php", &data[..]).unwrap();
            b.finish().unwrap();
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar_bytes).unwrap();
        let tgz = gz.finish().unwrap();
        let (got, out) = unpack_all(&tgz, ArchiveLimits::default());
        assert!(out.refused.is_empty(), "{:?}", out.refused);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.name.as_deref(), Some("evil.php"));
        assert_eq!(got[0].1, b"inside tar");
    }

    #[test]
    fn gzip_bomb_stops_at_the_ratio_limit() {
        let zeros = vec![0u8; 30 * 1024 * 1024];
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&zeros).unwrap();
        let bomb = gz.finish().unwrap();
        let (_, out) = unpack_all(&bomb, ArchiveLimits::default());
        assert_eq!(out.refused, vec![Reason::ArchiveRatioLimit]);
        let cap = (bomb.len() as u64 * 100).max(RATIO_FLOOR);
        assert!(out.bytes <= cap, "{} > {cap}", out.bytes);
    }

    #[test]
    fn file_count_limit() {
        let files: Vec<(String, Vec<u8>)> =
            (0..10).map(|i| (format!("f{i}"), vec![b'x'; 10])).collect();
        let refs: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(n, d)| (n.as_str(), d.as_slice()))
            .collect();
        let z = zip_of(&refs);
        let lim = ArchiveLimits {
            max_files: 3,
            ..ArchiveLimits::default()
        };
        let (got, out) = unpack_all(&z, lim);
        assert_eq!(got.len(), 3);
        assert_eq!(out.refused, vec![Reason::ArchiveFileLimit]);
    }

    #[test]
    fn damaged_archives_never_panic() {
        let z = zip_of(&[("a", b"aaaaaaaaaaaaaaaaaaaaaaa"), ("b", b"bbbb")]);
        for cut in 0..z.len() {
            let mut d = z.clone();
            d.truncate(cut);
            d.extend_from_slice(b"PK\x05\x06");
            let s = spill(&d);
            let mut visit = |_: &Member, _: &Spill| {};
            let mut u = Unpacker::new(ArchiveLimits::default(), None, usize::MAX, &mut visit);
            u.unpack(Kind::Zip, &s, s.len(), "x", 1);
            let mut g = vec![0x1f, 0x8b];
            g.extend_from_slice(&z[..cut.min(z.len())]);
            let s = spill(&g);
            u.unpack(Kind::Gzip, &s, s.len(), "x", 1);
        }
    }
}
