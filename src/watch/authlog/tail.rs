//! Follows a log file by path, like `tail -F`, driven by explicit [`Tailer::poll`] calls.
//!
//! Guarantees:
//! - **Attach at end.** If the file exists at the first poll, its content is history and is
//!   skipped (also when it is unreadable at first and readable later). A file that appears
//!   later (absent at the first poll, or a rotation's
//!   replacement) is read from its start.
//! - **Rotation by rename.** When the path names a new inode, the old descriptor is read to
//!   EOF first (a final unterminated line is yielded), then the replacement is read from
//!   its start in the same poll. While the path is missing, the old descriptor keeps being
//!   read (the writer may not have reopened yet).
//! - **copytruncate.** When the open file becomes shorter than the offset, reading restarts
//!   at 0 (a partial line from before is dropped). Known limit: if the writer refills the
//!   file past the old offset between two polls, the refilled start is not seen.
//! - **Absence is not an error.** A missing path is retried at each poll, silently.
//! - **Complete lines only.** A tail without `\n` is held until its newline arrives. A line
//!   longer than [`MAX_LINE_BYTES`] is discarded whole (never yielded cut, so a parser cannot
//!   be fed a truncated line) and counted in `truncated_lines`. Invalid UTF-8 is replaced
//!   (U+FFFD). Empty lines are skipped. A trailing `\r` is removed.
//! - **Bounded work.** One poll reads at most [`MAX_BYTES_PER_POLL`]; `PollStats::more` says
//!   to poll again at once; [`Tailer::bytes_behind`] says how far behind it is.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Longest line yielded, in bytes (without the newline).
pub const MAX_LINE_BYTES: usize = 16 * 1024;
/// Most bytes one poll reads.
pub const MAX_BYTES_PER_POLL: u64 = 8 * 1024 * 1024;
const READ_CHUNK: usize = 64 * 1024;

/// What one poll did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollStats {
    /// Lines yielded.
    pub lines: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Over-long lines discarded.
    pub truncated_lines: u64,
    /// A file was opened at the path (first attach, appearance, or rotation).
    pub opened: bool,
    /// The path was renamed away and its replacement opened.
    pub rotated: bool,
    /// The open file shrank below the offset (copytruncate); reading restarted at 0.
    pub truncated: bool,
    /// The path does not exist and no file is open.
    pub missing: bool,
    /// The per-poll byte budget was used up: poll again without waiting.
    pub more: bool,
}

/// Cumulative counters of a tailer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TailerTotals {
    pub lines: u64,
    pub bytes: u64,
    pub truncated_lines: u64,
    pub rotations: u64,
    pub truncations: u64,
    /// Partial lines dropped by a copytruncate.
    pub partial_dropped: u64,
}

/// Follows one path. See the module documentation for the guarantees.
#[derive(Debug)]
pub struct Tailer {
    path: PathBuf,
    file: Option<File>,
    id: (u64, u64),
    offset: u64,
    size: u64,
    partial: Vec<u8>,
    discarding: bool,
    /// Attached mid-line: drop up to the first newline without counting it.
    resync: bool,
    /// The next open skips existing content: true until the path was seen missing or a
    /// file was opened (an unreadable file that becomes readable is still history).
    attach_at_end: bool,
    /// A committed position (inode, offset) to resume from at the first open.
    resume_at: Option<(u64, u64)>,
    totals: TailerTotals,
    buf: Vec<u8>,
}

impl Tailer {
    /// A tailer that skips the content present at its first poll.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::build(path.into(), true)
    }

    /// A tailer that reads the file from its start (replays, benchmarks).
    pub fn from_start(path: impl Into<PathBuf>) -> Self {
        Self::build(path.into(), false)
    }

    fn build(path: PathBuf, start_at_end: bool) -> Self {
        Tailer {
            path,
            file: None,
            id: (0, 0),
            offset: 0,
            size: 0,
            partial: Vec::new(),
            discarding: false,
            resync: false,
            attach_at_end: start_at_end,
            resume_at: None,
            totals: TailerTotals::default(),
            buf: Vec::new(),
        }
    }

    /// A tailer that resumes at a committed position: when the path still names inode
    /// `inode` and the file is at least `offset` bytes long, reading starts at `offset`;
    /// otherwise the file at the path is a replacement and is read from its start.
    pub fn resume(path: impl Into<PathBuf>, inode: u64, offset: u64) -> Self {
        let mut t = Self::build(path.into(), false);
        t.resume_at = Some((inode, offset));
        t
    }

    /// Opens the file now (at its end for a new tailer), so that everything written after
    /// this call is read by later polls. Returns false when the file does not exist yet
    /// (it will then be read from its start once it appears).
    pub fn attach(&mut self) -> io::Result<bool> {
        if self.file.is_some() {
            return Ok(true);
        }
        let mut st = PollStats::default();
        let opened = self.open(self.attach_at_end, &mut st)?;
        if !opened {
            self.attach_at_end = false;
        }
        Ok(opened)
    }

    /// The position up to which every complete line has been handed out: (inode, offset
    /// of the end of the last complete line). `None` while no file is open.
    pub fn checkpoint(&self) -> Option<(u64, u64)> {
        self.file.as_ref()?;
        if self.discarding {
            return None;
        }
        Some((
            self.id.1,
            self.offset.saturating_sub(self.partial.len() as u64),
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of the open file not read yet, as of the last poll (reads memory only).
    pub fn bytes_behind(&self) -> u64 {
        self.size.saturating_sub(self.offset)
    }

    /// Read offset in the open file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    pub fn totals(&self) -> TailerTotals {
        self.totals
    }

    /// Appends the complete lines written since the last poll to `out`.
    ///
    /// Errors are I/O errors other than "not found" (permission denied, a read error); the
    /// tailer stays usable and the next poll retries.
    pub fn poll(&mut self, out: &mut Vec<String>) -> io::Result<PollStats> {
        self.poll_with(&mut |line| out.push(line.to_owned()))
    }

    /// Like [`Tailer::poll`], but hands each line to `sink` without allocating it.
    pub fn poll_with(&mut self, sink: &mut dyn FnMut(&str)) -> io::Result<PollStats> {
        let mut st = PollStats::default();
        if self.file.is_none() && !self.open(self.attach_at_end, &mut st)? {
            // Created later: whatever it holds then was written after we started.
            self.attach_at_end = false;
            st.missing = true;
            return Ok(st);
        }
        let mut budget = MAX_BYTES_PER_POLL;
        let drained = self
            .check_truncation(&mut st)
            .and_then(|()| self.drain(sink, &mut st, &mut budget));
        if let Err(e) = drained {
            // Do not stay stuck on a descriptor that cannot be read once the path names
            // another file: the next poll opens the replacement from its start.
            if self.path_replaced().unwrap_or(false) {
                self.close_for_rotation();
            }
            return Err(e);
        }
        if budget == 0 {
            st.more = true;
            return Ok(st);
        }
        if !self.path_replaced()? {
            return Ok(st);
        }
        // Rotation: finish the old file (writes since the last read), then switch.
        self.drain(sink, &mut st, &mut budget)?;
        if budget == 0 {
            st.more = true;
            return Ok(st);
        }
        self.flush_partial(sink, &mut st);
        self.close_for_rotation();
        st.rotated = true;
        if self.open(false, &mut st)? {
            self.drain(sink, &mut st, &mut budget)?;
            st.more = budget == 0;
        }
        Ok(st)
    }

    /// Whether the path now names another file than the open one (false while missing).
    fn path_replaced(&self) -> io::Result<bool> {
        match fs::metadata(&self.path) {
            Ok(md) => Ok((md.dev(), md.ino()) != self.id),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Forgets the open file; the next open reads the path from its start.
    fn close_for_rotation(&mut self) {
        self.file = None;
        self.offset = 0;
        self.size = 0;
        self.partial.clear();
        self.discarding = false;
        self.resync = false;
        self.attach_at_end = false;
        self.totals.rotations += 1;
    }

    /// Opens the path; `Ok(false)` when it does not exist.
    fn open(&mut self, at_end: bool, st: &mut PollStats) -> io::Result<bool> {
        // A log named in the configuration (daemon-owned path).
        let file = match crate::fsutil::open_daemon_file(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let md = file.metadata()?;
        self.id = (md.dev(), md.ino());
        self.size = md.len();
        self.offset = if at_end { md.len() } else { 0 };
        if let Some((ino, off)) = self.resume_at.take() {
            if ino == md.ino() && off <= md.len() {
                self.offset = off;
            }
        }
        self.partial.clear();
        // Attaching after an unterminated line: skip its remainder.
        let mut last = [0u8; 1];
        self.resync = at_end
            && md.len() > 0
            && file.read_at(&mut last, md.len() - 1).ok() == Some(1)
            && last != [b'\n'];
        self.discarding = self.resync;
        self.file = Some(file);
        self.attach_at_end = false;
        st.opened = true;
        Ok(true)
    }

    fn check_truncation(&mut self, st: &mut PollStats) -> io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let len = file.metadata()?.len();
        if len < self.offset {
            self.offset = 0;
            if !self.partial.is_empty() || self.discarding {
                self.totals.partial_dropped += 1;
            }
            self.partial.clear();
            self.discarding = false;
            self.resync = false;
            st.truncated = true;
            self.totals.truncations += 1;
        }
        self.size = len;
        Ok(())
    }

    /// Reads from the offset to EOF or until the budget is spent.
    fn drain(
        &mut self,
        sink: &mut dyn FnMut(&str),
        st: &mut PollStats,
        budget: &mut u64,
    ) -> io::Result<()> {
        let Some(file) = self.file.take() else {
            return Ok(());
        };
        let result = self.drain_file(&file, sink, st, budget);
        self.file = Some(file);
        result
    }

    fn drain_file(
        &mut self,
        file: &File,
        sink: &mut dyn FnMut(&str),
        st: &mut PollStats,
        budget: &mut u64,
    ) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(READ_CHUNK, 0);
        let result = loop {
            if *budget == 0 {
                break Ok(());
            }
            let want = usize::try_from(*budget)
                .unwrap_or(READ_CHUNK)
                .min(READ_CHUNK);
            let Some(dst) = buf.get_mut(..want) else {
                break Ok(());
            };
            let n = match file.read_at(dst, self.offset) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break Err(e),
            };
            self.offset += n as u64;
            *budget = budget.saturating_sub(n as u64);
            st.bytes += n as u64;
            self.totals.bytes += n as u64;
            if let Some(chunk) = buf.get(..n) {
                self.split(chunk, sink, st);
            }
        };
        self.size = self.size.max(self.offset);
        self.buf = buf;
        result
    }

    /// Splits a chunk into lines, carrying the unterminated tail in `partial`.
    fn split(&mut self, mut chunk: &[u8], sink: &mut dyn FnMut(&str), st: &mut PollStats) {
        while let Some(i) = memchr::memchr(b'\n', chunk) {
            let line = chunk.get(..i).unwrap_or(&[]);
            chunk = chunk.get(i + 1..).unwrap_or(&[]);
            if self.partial.is_empty() && !self.discarding {
                self.emit(line, sink, st);
            } else {
                self.append(line);
                let joined = std::mem::take(&mut self.partial);
                self.end_line(&joined, sink, st);
                self.partial = joined;
                self.partial.clear();
            }
        }
        self.append(chunk);
    }

    fn append(&mut self, piece: &[u8]) {
        if self.discarding {
            return;
        }
        if self.partial.len() + piece.len() > MAX_LINE_BYTES {
            self.discarding = true;
            self.partial.clear();
        } else {
            self.partial.extend_from_slice(piece);
        }
    }

    /// A newline arrived for the held line.
    fn end_line(&mut self, line: &[u8], sink: &mut dyn FnMut(&str), st: &mut PollStats) {
        if self.resync {
            self.resync = false;
            self.discarding = false;
        } else if self.discarding {
            self.discarding = false;
            st.truncated_lines += 1;
            self.totals.truncated_lines += 1;
        } else {
            self.emit(line, sink, st);
        }
    }

    fn emit(&mut self, line: &[u8], sink: &mut dyn FnMut(&str), st: &mut PollStats) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return;
        }
        if line.len() > MAX_LINE_BYTES {
            st.truncated_lines += 1;
            self.totals.truncated_lines += 1;
            return;
        }
        match std::str::from_utf8(line) {
            Ok(s) => sink(s),
            Err(_) => sink(&String::from_utf8_lossy(line)),
        }
        st.lines += 1;
        self.totals.lines += 1;
    }

    /// The old file of a rotation ended without a newline: its last line is complete.
    fn flush_partial(&mut self, sink: &mut dyn FnMut(&str), st: &mut PollStats) {
        let held = std::mem::take(&mut self.partial);
        if self.resync {
            self.resync = false;
            self.discarding = false;
        } else if self.discarding {
            self.discarding = false;
            st.truncated_lines += 1;
            self.totals.truncated_lines += 1;
        } else if !held.is_empty() {
            self.emit(&held, sink, st);
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod resume_tests {
    use super::*;

    #[test]
    fn resumes_at_a_checkpoint_and_reads_replacements_from_the_start() {
        let dir = std::env::temp_dir().join(format!("svc-tail-resume-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("auth.log");
        fs::write(&p, "one\ntwo\npart").unwrap();
        let mut t = Tailer::from_start(&p);
        let mut out = Vec::new();
        t.poll(&mut out).unwrap();
        assert_eq!(out, ["one", "two"]);
        let (ino, off) = t.checkpoint().unwrap();
        assert_eq!(off, 8, "the partial line is not past the checkpoint");
        // Same file, more lines: resume continues after the last complete line.
        fs::write(&p, "one\ntwo\npartial\nthree\n").unwrap();
        let mut r = Tailer::resume(&p, ino, off);
        let mut out = Vec::new();
        r.poll(&mut out).unwrap();
        assert_eq!(out, ["partial", "three"]);
        // A different inode at the path: read from its start.
        fs::remove_file(&p).unwrap();
        fs::write(&p, "fresh\n").unwrap();
        let mut r = Tailer::resume(&p, ino, off);
        let mut out = Vec::new();
        r.poll(&mut out).unwrap();
        assert_eq!(out, ["fresh"]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
