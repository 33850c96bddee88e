//! A line-aware chunk reader: hands out the body in pieces of at most one line, without
//! ever holding a whole line (a base64 body without line breaks may be tens of megabytes
//! on one line). At the start of a line it looks ahead far enough to tell a boundary
//! delimiter, which is never longer than [`MAX_DELIMITER_LINE`].

use std::io::{self, Read};

/// Longest line that may be a boundary delimiter (boundaries are at most 70 characters;
/// the rest is room for `--` and transport padding).
pub const MAX_DELIMITER_LINE: usize = 1024;
const BUF: usize = 64 * 1024;

/// One piece of input: part of one line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    start: usize,
    end: usize,
    /// The piece begins a line.
    pub starts_line: bool,
    /// The piece ends with `\n`.
    pub ends_line: bool,
}

pub struct LineSrc<'r> {
    r: &'r mut dyn Read,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    eof: bool,
    at_line_start: bool,
    /// Bytes handed out so far.
    pub consumed: u64,
}

impl<'r> LineSrc<'r> {
    pub fn new(r: &'r mut dyn Read) -> LineSrc<'r> {
        LineSrc {
            r,
            buf: vec![0u8; BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
            at_line_start: true,
            consumed: 0,
        }
    }

    fn fill_at_least(&mut self, n: usize) -> io::Result<()> {
        if self.end - self.start >= n || self.eof {
            return Ok(());
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        while self.end - self.start < n && !self.eof && self.end < self.buf.len() {
            match self.r.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The next piece, or `None` at the end of input.
    pub fn next_piece(&mut self) -> io::Result<Option<Piece>> {
        let want = if self.at_line_start {
            MAX_DELIMITER_LINE
        } else {
            1
        };
        self.fill_at_least(want)?;
        if self.start == self.end {
            self.fill_at_least(1)?;
            if self.start == self.end {
                return Ok(None);
            }
        }
        let avail = &self.buf[self.start..self.end];
        let (len, ends_line) = match memchr::memchr(b'\n', avail) {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        let p = Piece {
            start: self.start,
            end: self.start + len,
            starts_line: self.at_line_start,
            ends_line,
        };
        self.start += len;
        self.consumed += len as u64;
        self.at_line_start = ends_line;
        Ok(Some(p))
    }

    /// The bytes of a piece just returned (valid until the next call).
    pub fn bytes(&self, p: &Piece) -> &[u8] {
        self.buf.get(p.start..p.end).unwrap_or(&[])
    }

    /// Whether a piece that starts a line holds the whole line (needed to test it as a
    /// delimiter).
    pub fn whole_line(p: &Piece) -> bool {
        p.starts_line && p.ends_line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_lines_and_long_lines_are_split() {
        let mut data: Vec<u8> = b"ab\r\n--x\n".to_vec();
        data.extend(std::iter::repeat_n(b'A', 200_000));
        data.extend_from_slice(b"\nend");
        let mut r = data.as_slice();
        let mut src = LineSrc::new(&mut r);
        let mut got = Vec::new();
        let mut lines = 0;
        while let Some(p) = src.next_piece().unwrap() {
            assert!(src.bytes(&p).len() <= BUF);
            if p.starts_line {
                lines += 1;
            }
            got.extend_from_slice(src.bytes(&p));
        }
        assert_eq!(got, data);
        assert_eq!(lines, 4);
    }
}
