//! Substring search on short lines, built on `memchr`: no searcher set-up per call (the
//! standard library's `str::find(&str)` builds a two-way searcher each time, which costs
//! more than the search on a 100-byte line). All results are byte offsets of ASCII
//! needles, hence character boundaries; slicing uses `get`, never panics.

/// Byte of the needle used as anchor: the second when the first is a space (spaces are
/// common in log lines, the next byte is rarer).
fn anchor(n: &[u8]) -> usize {
    usize::from(n.len() > 1 && n.first() == Some(&b' '))
}

/// Offset of the first `needle` in `hay`.
pub(crate) fn find(hay: &str, needle: &str) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let k = anchor(n);
    let a = *n.get(k)?;
    let last = h.len().checked_sub(n.len())?;
    let window = h.get(k..=last + k)?;
    memchr::memchr_iter(a, window).find(|&i| h.get(i..i + n.len()) == Some(n))
}

/// Offset of the last `needle` in `hay`.
pub(crate) fn rfind(hay: &str, needle: &str) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let k = anchor(n);
    let a = *n.get(k)?;
    let last = h.len().checked_sub(n.len())?;
    let window = h.get(k..=last + k)?;
    memchr::memrchr_iter(a, window).find(|&i| h.get(i..i + n.len()) == Some(n))
}

pub(crate) fn contains(hay: &str, needle: &str) -> bool {
    find(hay, needle).is_some()
}

/// `(before, after)` around the first `needle`.
pub(crate) fn split_once<'a>(hay: &'a str, needle: &str) -> Option<(&'a str, &'a str)> {
    let i = find(hay, needle)?;
    Some((hay.get(..i)?, hay.get(i + needle.len()..)?))
}

/// Offset of the first ASCII byte `b`.
pub(crate) fn find_byte(hay: &str, b: u8) -> Option<usize> {
    memchr::memchr(b, hay.as_bytes())
}

/// `(before, after)` around the first ASCII byte `b`.
pub(crate) fn split_byte(hay: &str, b: u8) -> Option<(&str, &str)> {
    let i = find_byte(hay, b)?;
    Some((hay.get(..i)?, hay.get(i + 1..)?))
}

/// `(before, after)` around the last ASCII byte `b`.
pub(crate) fn rsplit_byte(hay: &str, b: u8) -> Option<(&str, &str)> {
    let i = memchr::memrchr(b, hay.as_bytes())?;
    Some((hay.get(..i)?, hay.get(i + 1..)?))
}

/// Offset of the first `needle` byte in a short slice, eight bytes at a time (SWAR). For
/// the few dozen bytes of a syslog host and tag this beats both a byte loop and a
/// vectorised search's call and set-up.
pub(crate) fn find_byte_short(hay: &[u8], needle: u8) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let rep = LO.wrapping_mul(u64::from(needle));
    let mut chunks = hay.chunks_exact(8);
    for (k, chunk) in chunks.by_ref().enumerate() {
        let word = u64::from_le_bytes(<[u8; 8]>::try_from(chunk).ok()?) ^ rep;
        // Lowest set bit marks the first zero byte exactly (borrows only run upwards).
        let zero = word.wrapping_sub(LO) & !word & HI;
        if zero != 0 {
            return Some(k * 8 + (zero.trailing_zeros() / 8) as usize);
        }
    }
    let rest = chunks.remainder();
    let base = hay.len() - rest.len();
    rest.iter().position(|&c| c == needle).map(|p| base + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_std_on_many_inputs() {
        let hays = [
            "",
            " ",
            "a",
            " from ",
            "x from y from z",
            "from",
            " fro",
            "a  from  b",
            "é from é",
            "port port port",
            " port",
            "): x): y",
            "ab",
            "aaa",
        ];
        let needles = [
            " from ", " port ", "): ", "a", "aa", " ", "from", "é", "xyz",
        ];
        for h in hays {
            for n in needles {
                assert_eq!(find(h, n), h.find(n), "find {h:?} {n:?}");
                assert_eq!(rfind(h, n), h.rfind(n), "rfind {h:?} {n:?}");
                assert_eq!(split_once(h, n), h.split_once(n));
            }
            assert_eq!(split_byte(h, b' '), h.split_once(' '));
            assert_eq!(rsplit_byte(h, b' '), h.rsplit_once(' '));
        }
        assert_eq!(find("abc", ""), None);
    }

    #[test]
    fn swar_search_agrees_with_position() {
        let mut seed = 99u64;
        for len in 0..40usize {
            for _ in 0..200 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        [b' ', b':', b'a', 0x80, 0xff, 0x00, b'['][(seed % 7) as usize]
                    })
                    .collect();
                for n in [b' ', b':', b'[', 0x80, 0x00, 0xff] {
                    assert_eq!(
                        find_byte_short(&bytes, n),
                        bytes.iter().position(|&c| c == n),
                        "{bytes:?} {n}"
                    );
                }
            }
        }
    }
}
