//! Parser for fanotify event buffers read from a group initialised with
//! `FAN_REPORT_DFID_NAME`: fixed metadata followed by info records. The buffer comes from
//! the kernel but is treated as outside input: every length is checked, nothing panics, and
//! malformed input yields a [`FidParseError`].

use std::fmt;

/// `sizeof(struct fanotify_event_metadata)`.
pub const METADATA_LEN: usize = 24;
/// The metadata version this parser understands (`FANOTIFY_METADATA_VERSION`).
pub const METADATA_VERSION: u8 = 3;

const INFO_TYPE_FID: u8 = 1;
const INFO_TYPE_DFID_NAME: u8 = 2;
const INFO_TYPE_DFID: u8 = 3;

/// Why a buffer could not be parsed further. Parsing stops at the first error because the
/// stream cannot be resynchronised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FidParseError {
    /// Fewer bytes than an event header, or than the event's declared length.
    Truncated,
    /// Metadata version other than [`METADATA_VERSION`].
    Version(u8),
    /// `event_len` / `metadata_len` inconsistent.
    BadEventLength,
    /// An info record whose length or contents are inconsistent.
    BadRecord,
}

impl fmt::Display for FidParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FidParseError::Truncated => write!(f, "truncated fanotify event"),
            FidParseError::Version(v) => write!(f, "unsupported fanotify metadata version {v}"),
            FidParseError::BadEventLength => write!(f, "inconsistent fanotify event length"),
            FidParseError::BadRecord => write!(f, "malformed fanotify info record"),
        }
    }
}

impl std::error::Error for FidParseError {}

/// The directory file handle (and entry name) an event refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirRecord<'a> {
    /// Filesystem id, as `statfs.f_fsid` bytes.
    pub fsid: [u8; 8],
    /// Kernel handle type.
    pub handle_type: i32,
    /// Handle bytes.
    pub handle: &'a [u8],
    /// Entry name inside the directory, without the NUL; empty when the record had none.
    pub name: &'a [u8],
}

/// One parsed event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEvent<'a> {
    pub mask: u64,
    /// Event fd; `FAN_NOFD` (-1) in FID mode. A non-negative value must be closed.
    pub fd: i32,
    pub pid: i32,
    /// The directory record (DFID_NAME preferred over DFID / FID), if any.
    pub dir: Option<DirRecord<'a>>,
}

/// Iterator over the events in a buffer. Yields `Err` once and then stops on bad input.
pub struct Events<'a> {
    rest: &'a [u8],
    failed: bool,
}

/// Parses a buffer returned by `read(2)` on a FID-mode fanotify group.
pub fn events(buf: &[u8]) -> Events<'_> {
    Events {
        rest: buf,
        failed: false,
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_ne_bytes(<[u8; 2]>::try_from(s).ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes(<[u8; 4]>::try_from(s).ok()?))
}

fn i32_at(b: &[u8], at: usize) -> Option<i32> {
    u32_at(b, at).map(|v| i32::from_ne_bytes(v.to_ne_bytes()))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(8)?)?;
    Some(u64::from_ne_bytes(<[u8; 8]>::try_from(s).ok()?))
}

/// Parses the body of a FID-type record (after the 4-byte header).
fn parse_fid_body(body: &[u8], with_name: bool) -> Result<DirRecord<'_>, FidParseError> {
    let fsid: [u8; 8] = body
        .get(0..8)
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .ok_or(FidParseError::BadRecord)?;
    let hlen = u32_at(body, 8)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(FidParseError::BadRecord)?;
    let handle_type = i32_at(body, 12).ok_or(FidParseError::BadRecord)?;
    let end = 16usize.checked_add(hlen).ok_or(FidParseError::BadRecord)?;
    let handle = body.get(16..end).ok_or(FidParseError::BadRecord)?;
    let name = if with_name {
        let tail = body.get(end..).unwrap_or_default();
        let nul = memchr::memchr(0, tail).ok_or(FidParseError::BadRecord)?;
        tail.get(..nul).unwrap_or_default()
    } else {
        &[][..]
    };
    Ok(DirRecord {
        fsid,
        handle_type,
        handle,
        name,
    })
}

fn parse_event(ev: &[u8]) -> Result<RawEvent<'_>, FidParseError> {
    let vers = *ev.get(4).ok_or(FidParseError::Truncated)?;
    if vers != METADATA_VERSION {
        return Err(FidParseError::Version(vers));
    }
    let meta_len = u16_at(ev, 6)
        .map(usize::from)
        .ok_or(FidParseError::Truncated)?;
    if meta_len < METADATA_LEN || meta_len > ev.len() {
        return Err(FidParseError::BadEventLength);
    }
    let mask = u64_at(ev, 8).ok_or(FidParseError::Truncated)?;
    let fd = i32_at(ev, 16).ok_or(FidParseError::Truncated)?;
    let pid = i32_at(ev, 20).ok_or(FidParseError::Truncated)?;
    let mut infos = ev.get(meta_len..).unwrap_or_default();
    let mut dir: Option<(u8, DirRecord<'_>)> = None;
    while !infos.is_empty() {
        let info_type = *infos.first().ok_or(FidParseError::BadRecord)?;
        let len = u16_at(infos, 2)
            .map(usize::from)
            .ok_or(FidParseError::BadRecord)?;
        if len < 4 {
            return Err(FidParseError::BadRecord);
        }
        let record = infos.get(..len).ok_or(FidParseError::BadRecord)?;
        let body = record.get(4..).unwrap_or_default();
        let rank = match info_type {
            INFO_TYPE_DFID_NAME => Some(3),
            INFO_TYPE_DFID => Some(2),
            INFO_TYPE_FID => Some(1),
            _ => None,
        };
        if let Some(rank) = rank {
            let rec = parse_fid_body(body, info_type == INFO_TYPE_DFID_NAME)?;
            if dir.as_ref().is_none_or(|(r, _)| *r < rank) {
                dir = Some((rank, rec));
            }
        }
        infos = infos.get(len..).unwrap_or_default();
    }
    Ok(RawEvent {
        mask,
        fd,
        pid,
        dir: dir.map(|(_, d)| d),
    })
}

impl<'a> Iterator for Events<'a> {
    type Item = Result<RawEvent<'a>, FidParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let result = (|| {
            let event_len = u32_at(self.rest, 0)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(FidParseError::Truncated)?;
            if event_len < METADATA_LEN {
                return Err(FidParseError::BadEventLength);
            }
            let ev = self.rest.get(..event_len).ok_or(FidParseError::Truncated)?;
            let parsed = parse_event(ev)?;
            Ok((parsed, event_len))
        })();
        match result {
            Ok((ev, len)) => {
                self.rest = self.rest.get(len..).unwrap_or_default();
                Some(Ok(ev))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// (fsid, handle type, handle bytes, name) of a synthetic DFID_NAME record.
    pub(crate) type SynthDir<'a> = (&'a [u8; 8], i32, &'a [u8], &'a [u8]);

    /// Builds one event the way the kernel lays it out.
    pub(crate) fn build_event(mask: u64, dir: Option<SynthDir<'_>>) -> Vec<u8> {
        let mut infos = Vec::new();
        if let Some((fsid, htype, handle, name)) = dir {
            let mut body = Vec::new();
            body.extend_from_slice(fsid);
            body.extend_from_slice(&(handle.len() as u32).to_ne_bytes());
            body.extend_from_slice(&htype.to_ne_bytes());
            body.extend_from_slice(handle);
            body.extend_from_slice(name);
            body.push(0);
            while (body.len() + 4) % 4 != 0 {
                body.push(0);
            }
            infos.push(INFO_TYPE_DFID_NAME);
            infos.push(0);
            infos.extend_from_slice(&((body.len() + 4) as u16).to_ne_bytes());
            infos.extend_from_slice(&body);
        }
        let mut ev = Vec::new();
        ev.extend_from_slice(&((METADATA_LEN + infos.len()) as u32).to_ne_bytes());
        ev.push(METADATA_VERSION);
        ev.push(0);
        ev.extend_from_slice(&(METADATA_LEN as u16).to_ne_bytes());
        ev.extend_from_slice(&mask.to_ne_bytes());
        ev.extend_from_slice(&(-1i32).to_ne_bytes());
        ev.extend_from_slice(&1234i32.to_ne_bytes());
        ev.extend_from_slice(&infos);
        ev
    }

    #[test]
    fn parses_dfid_name_events() {
        let fsid = [1, 2, 3, 4, 5, 6, 7, 8];
        let mut buf = build_event(
            0x08,
            Some((&fsid, 1, b"\xaa\xbb\xcc\xdd\x01\x02\x03\x04", b"a.php")),
        );
        buf.extend(build_event(0x4000, None));
        let evs: Vec<_> = events(&buf).collect();
        assert_eq!(evs.len(), 2);
        let first = evs[0].clone().expect("first");
        assert_eq!(first.mask, 0x08);
        assert_eq!(first.fd, -1);
        assert_eq!(first.pid, 1234);
        let d = first.dir.expect("dir");
        assert_eq!(d.fsid, fsid);
        assert_eq!(d.handle_type, 1);
        assert_eq!(d.handle.len(), 8);
        assert_eq!(d.name, b"a.php");
        let second = evs[1].clone().expect("second");
        assert_eq!(second.mask, 0x4000);
        assert!(second.dir.is_none());
    }

    #[test]
    fn truncation_and_bad_lengths_are_errors() {
        let buf = build_event(0x08, Some((&[0; 8], 1, b"12345678", b"x")));
        for cut in 1..buf.len() {
            let got: Vec<_> = events(&buf[..cut]).collect();
            assert_eq!(got.len(), 1, "cut {cut}");
            assert!(got[0].is_err(), "cut {cut}");
        }
        let mut bad = buf.clone();
        bad[4] = 9;
        assert_eq!(events(&bad).next(), Some(Err(FidParseError::Version(9))));
        let mut zero = buf.clone();
        zero[0..4].copy_from_slice(&0u32.to_ne_bytes());
        assert_eq!(
            events(&zero).next(),
            Some(Err(FidParseError::BadEventLength))
        );
        assert_eq!(events(&zero).count(), 1);
    }

    #[test]
    fn garbage_never_panics() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let valid = build_event(0x80, Some((&[9; 8], 2, b"handle!!", b"name")));
        for round in 0..20_000 {
            let len = (next() % 200) as usize;
            let mut buf: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if round % 2 == 0 {
                // Mutate a valid event so parsing gets deeper.
                buf = valid.clone();
                for _ in 0..(next() % 4 + 1) {
                    let i = (next() as usize) % buf.len();
                    buf[i] = next() as u8;
                }
                buf.truncate((next() as usize) % (buf.len() + 1));
            }
            for ev in events(&buf) {
                let _ = ev;
            }
        }
    }
}
