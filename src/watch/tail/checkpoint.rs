//! Positions in a followed file, with a fingerprint of the bytes before them.
//!
//! A [`Checkpoint`] names a file by inode and a byte offset in it (always the end of a
//! complete line), plus a fingerprint of up to [`FINGERPRINT_BYTES`] bytes before the
//! offset. The fingerprint tells "the same file, grown" from "the same inode, rewritten":
//! a log truncated and refilled past the offset keeps its inode and its size, but not the
//! bytes before the offset.
//!
//! The fingerprint is FNV-1a (64 bits) over the bytes and their length: stable across builds
//! and releases (it is persisted), cheap for 256 bytes, and not a security boundary (whoever
//! can rewrite a log can also write the lines it would hide).

/// Bytes before a checkpoint that its fingerprint covers (fewer near the start of a file).
pub const FINGERPRINT_BYTES: usize = 256;

/// A position in a followed file: every line before `offset` has been handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Checkpoint {
    pub inode: u64,
    pub offset: u64,
    /// [`fingerprint`] of the bytes before `offset`; `None` when unknown (a position saved
    /// before fingerprints existed), in which case the position is trusted as it is.
    pub fingerprint: Option<u64>,
}

impl Checkpoint {
    pub fn new(inode: u64, offset: u64, fingerprint: Option<u64>) -> Self {
        Checkpoint {
            inode,
            offset,
            fingerprint,
        }
    }
}

/// FNV-1a over `bytes`, then over their length (so a prefix never equals the whole).
pub fn fingerprint(bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes
        .iter()
        .chain((bytes.len() as u64).to_le_bytes().iter())
    {
        h ^= u64::from(*b);
        h = h.wrapping_mul(PRIME);
    }
    h
}

/// The last [`FINGERPRINT_BYTES`] bytes of a stream, kept as it is read.
#[derive(Clone, Debug, Default)]
pub(crate) struct Window {
    bytes: Vec<u8>,
}

impl Window {
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
    }

    pub(crate) fn set(&mut self, bytes: &[u8]) {
        self.bytes.clear();
        self.push(bytes);
    }

    /// Appends `more`, keeping the last [`FINGERPRINT_BYTES`].
    pub(crate) fn push(&mut self, more: &[u8]) {
        if more.len() >= FINGERPRINT_BYTES {
            self.bytes.clear();
            self.bytes
                .extend_from_slice(more.get(more.len() - FINGERPRINT_BYTES..).unwrap_or(&[]));
            return;
        }
        let keep = FINGERPRINT_BYTES - more.len();
        if self.bytes.len() > keep {
            self.bytes.drain(..self.bytes.len() - keep);
        }
        self.bytes.extend_from_slice(more);
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    pub(crate) fn fingerprint(&self) -> u64 {
        fingerprint(&self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_stable_and_length_sensitive() {
        // Persisted: the value for a given input must never change.
        assert_eq!(fingerprint(b""), fingerprint(&[]));
        assert_ne!(fingerprint(b"a"), fingerprint(b"a\0"));
        assert_ne!(fingerprint(b"line one\n"), fingerprint(b"line two\n"));
        assert_eq!(fingerprint(b"abc"), 0xe5f4_9faf_dcdf_1048);
    }

    #[test]
    fn window_keeps_the_last_bytes() {
        let mut w = Window::default();
        w.push(b"hello ");
        w.push(b"world");
        assert_eq!(w.bytes(), b"hello world");
        let big: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        w.push(&big);
        assert_eq!(w.bytes(), &big[1000 - FINGERPRINT_BYTES..]);
        w.push(b"xy");
        assert_eq!(w.len(), FINGERPRINT_BYTES);
        assert_eq!(&w.bytes()[FINGERPRINT_BYTES - 2..], b"xy");
        assert_eq!(
            &w.bytes()[..FINGERPRINT_BYTES - 2],
            &big[1000 - FINGERPRINT_BYTES + 2..]
        );
    }
}
