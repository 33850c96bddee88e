//! [`FileSource`]: follows one log file by path, like `tail -F`, driven by explicit
//! [`FileSource::poll`] calls (the caller decides when: on an inotify wakeup, or at the
//! safety-net interval).
//!
//! Guarantees:
//! - **Attach at end.** [`FileSource::new`]: if the file exists at the first poll (or
//!   [`FileSource::attach`]), its content is history and is skipped (also when it is
//!   unreadable at first and readable later). A file that appears later (absent at the first
//!   poll, or a rotation's replacement) is read from its start.
//! - **Resume.** [`FileSource::resume`] continues at a committed [`Checkpoint`]: on the same
//!   inode at its offset when the bytes before it still match the checkpoint's fingerprint;
//!   when the path names another file, the checkpoint's file is looked up among the rotated
//!   siblings (`auth.log.1`, `auth.log-20261123`, same inode) and read from the checkpoint
//!   to its end first, then any newer rotated siblings, then the path from its start. A
//!   fingerprint mismatch on the checkpoint's inode means the file was rewritten: it is read
//!   from its start.
//! - **Rotation by rename.** When the path names a new inode, the old descriptor is read to
//!   EOF first (a final unterminated line is yielded), then the replacement is read from its
//!   start in the same poll. While the path is missing, the old descriptor keeps being read
//!   (the writer may not have reopened yet).
//! - **Truncation.** When the open file becomes shorter than the read offset (copytruncate),
//!   or the bytes before the offset no longer match what was read there (truncated and
//!   refilled past the offset between two polls): if a rotated sibling holds the same bytes
//!   before the offset (the copy of a copytruncate), reading continues there at the same
//!   offset (lines written between the last read and the copy are not lost), then the file
//!   from its start; otherwise reading restarts at 0 and a held partial line is dropped and
//!   counted. The same copy is looked for at resume.
//! - **Absence is not an error.** A missing path is retried at each poll, silently.
//! - **Complete lines only.** A tail without `\n` is held until its newline arrives (except
//!   the last line of a rotated-away file, which is complete). A line longer than
//!   [`MAX_LINE_BYTES`] is discarded whole (never yielded cut, so a parser cannot be fed a
//!   truncated line) and counted in `overlong_lines` as soon as it is known to be too long.
//!   Invalid UTF-8 is replaced (U+FFFD). Empty lines are skipped. A trailing `\r` is removed.
//! - **Bounded work and memory.** One poll reads at most [`MAX_BYTES_PER_POLL`] in chunks of
//!   [`READ_CHUNK`]; `PollStats::more` says to poll again at once. Lines are handed out as
//!   slices of the read buffer (no allocation per line); a held partial line is at most
//!   [`MAX_LINE_BYTES`].
//! - **Checkpoints.** [`FileSource::checkpoint`] is the end of the last complete line handed
//!   out (or skipped as over-long), with the fingerprint of the bytes before it; it is valid
//!   whenever a file is open, including while an over-long line is being discarded.

use std::collections::VecDeque;
use std::fs::{self, File};
use std::io;
use std::ops::ControlFlow;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::checkpoint::{Checkpoint, Window, FINGERPRINT_BYTES};

/// Longest line yielded, in bytes (without the newline).
pub const MAX_LINE_BYTES: usize = 16 * 1024;
/// Most bytes one poll reads.
pub const MAX_BYTES_PER_POLL: u64 = 8 * 1024 * 1024;
/// Bytes read per `pread(2)`.
pub const READ_CHUNK: usize = 256 * 1024;
/// Rotated siblings examined when resuming across a rotation.
const MAX_SIBLINGS: usize = 64;

/// What one poll did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollStats {
    /// Lines yielded.
    pub lines: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Over-long lines found (discarded whole).
    pub overlong_lines: u64,
    /// A file was opened (first attach, appearance, rotation, resume).
    pub opened: bool,
    /// The path was renamed away and its replacement (or the next rotated file) opened.
    pub rotated: bool,
    /// The open file was truncated or rewritten; reading restarted at 0.
    pub truncated: bool,
    /// The path does not exist and no file is open.
    pub missing: bool,
    /// The per-poll byte budget was used up: poll again without waiting.
    pub more: bool,
}

/// Cumulative counters of a source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceTotals {
    pub lines: u64,
    pub bytes: u64,
    /// Over-long lines discarded.
    pub overlong_lines: u64,
    pub rotations: u64,
    /// Truncations and rewrites detected (shorter file or fingerprint mismatch).
    pub truncations: u64,
    /// Partial lines dropped by a truncation.
    pub partial_dropped: u64,
    /// Resumes that found the checkpoint's file under a rotated name.
    pub resumed_rotated: u64,
    /// Resumes whose checkpoint file could not be found (its unread tail is lost).
    pub resume_lost: u64,
}

/// Where the next open starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    /// At the end (the content is history).
    End,
    /// At byte 0.
    Beginning,
}

/// Follows one path. See the module documentation for the guarantees.
#[derive(Debug)]
pub struct FileSource {
    path: PathBuf,
    file: Option<File>,
    /// Path the open file was opened by (the live path or a rotated sibling).
    open_path: PathBuf,
    id: (u64, u64),
    /// Read offset in the open file.
    offset: u64,
    /// File size as of the last poll.
    size: u64,
    /// End of the last complete line (or discarded over-long line).
    line_end: u64,
    /// Where reading of the open file started.
    start_offset: u64,
    /// Last bytes read, ending at `offset` (truncation check).
    read_window: Window,
    /// Last bytes ending at `line_end` (checkpoint fingerprint).
    line_window: Window,
    partial: Vec<u8>,
    discarding: bool,
    /// Attached mid-line: drop up to the first newline without counting it.
    resync: bool,
    next_start: Start,
    /// A committed position to resume from at the first open.
    resume_at: Option<Checkpoint>,
    /// Rotated files to read whole after the open one, before the live path.
    backlog: VecDeque<PathBuf>,
    totals: SourceTotals,
    /// The read buffer, kept between polls only while more is waiting.
    buf: Vec<u8>,
}

impl FileSource {
    /// A source that skips the content present at its first poll.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::build(path.into(), Start::End)
    }

    /// A source that reads the file from its start (replays, benchmarks).
    pub fn from_start(path: impl Into<PathBuf>) -> Self {
        Self::build(path.into(), Start::Beginning)
    }

    /// A source that resumes at a committed position (see the module documentation).
    pub fn resume(path: impl Into<PathBuf>, at: Checkpoint) -> Self {
        let mut s = Self::build(path.into(), Start::Beginning);
        s.resume_at = Some(at);
        s
    }

    fn build(path: PathBuf, start: Start) -> Self {
        FileSource {
            open_path: path.clone(),
            path,
            file: None,
            id: (0, 0),
            offset: 0,
            size: 0,
            line_end: 0,
            start_offset: 0,
            read_window: Window::default(),
            line_window: Window::default(),
            partial: Vec::new(),
            discarding: false,
            resync: false,
            next_start: start,
            resume_at: None,
            backlog: VecDeque::new(),
            totals: SourceTotals::default(),
            buf: Vec::new(),
        }
    }

    /// Opens the file now (at its end for a new source), so that everything written after
    /// this call is read by later polls. Returns false when the file does not exist yet (it
    /// will then be read from its start once it appears).
    pub fn attach(&mut self) -> io::Result<bool> {
        if self.file.is_some() {
            return Ok(true);
        }
        let mut st = PollStats::default();
        let opened = self.open_first(&mut st)?;
        if !opened {
            self.next_start = Start::Beginning;
        }
        Ok(opened)
    }

    /// The position up to which every complete line has been handed out, with the
    /// fingerprint of the bytes before it. `None` while no file is open.
    pub fn checkpoint(&self) -> Option<Checkpoint> {
        self.file.as_ref()?;
        Some(Checkpoint::new(
            self.id.1,
            self.line_end,
            Some(self.line_window.fingerprint()),
        ))
    }

    /// Whether a file is open (the source is attached, whatever it is doing).
    pub fn is_open(&self) -> bool {
        self.file.is_some()
    }

    /// (device, inode) of the open file.
    pub fn identity(&self) -> Option<(u64, u64)> {
        self.file.as_ref().map(|_| self.id)
    }

    /// The followed path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of the open file not read yet, as of the last poll (reads memory only). A
    /// partial line at the end of the file has been read and is not counted.
    pub fn bytes_behind(&self) -> u64 {
        self.size.saturating_sub(self.offset)
    }

    /// Offset at which reading of the open file started (0 for a new or rotated file; the
    /// checkpoint's offset after a resume; its size after attaching at the end).
    pub fn start_offset(&self) -> u64 {
        self.start_offset
    }

    /// Read offset in the open file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Whether an over-long line is being discarded now.
    pub fn discarding(&self) -> bool {
        self.discarding && !self.resync
    }

    pub fn totals(&self) -> SourceTotals {
        self.totals
    }

    /// Appends the complete lines written since the last poll to `out`.
    pub fn poll(&mut self, out: &mut Vec<String>) -> io::Result<PollStats> {
        self.poll_with(&mut |line| {
            out.push(line.to_owned());
            ControlFlow::Continue(())
        })
    }

    /// Hands each complete line written since the last poll to `sink`, without allocating.
    /// When `sink` answers [`ControlFlow::Break`], the poll ends after that line (the
    /// checkpoint is right after it, `PollStats::more` is set) and the next poll continues
    /// with the following line: a caller can bound what it holds per poll.
    ///
    /// Errors are I/O errors other than "not found" (permission denied, a read error); the
    /// source stays usable and the next poll retries.
    pub fn poll_with(
        &mut self,
        sink: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> io::Result<PollStats> {
        let mut st = PollStats::default();
        if self.file.is_none() && !self.open_first(&mut st)? {
            // Created later: whatever it holds then was written after we started.
            self.next_start = Start::Beginning;
            st.missing = true;
            return Ok(st);
        }
        let mut budget = MAX_BYTES_PER_POLL;
        loop {
            let drained = self
                .check_truncation(&mut st)
                .and_then(|()| self.drain(sink, &mut st, &mut budget));
            if let Err(e) = drained {
                // Do not stay stuck on a descriptor that cannot be read once the path names
                // another file: the next poll opens the replacement from its start.
                if self.replaced().unwrap_or(false) {
                    self.close_for_rotation();
                }
                return Err(e);
            }
            if budget == 0 {
                st.more = true;
                return Ok(st);
            }
            if !self.replaced()? {
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
            if !self.open_next(&mut st)? {
                return Ok(st);
            }
        }
    }

    /// Whether the open file is no longer the one to read: the live path names another
    /// file (false while the path is missing), or the open file is a rotated sibling from a
    /// resume (finished at EOF).
    fn replaced(&self) -> io::Result<bool> {
        if self.open_path != self.path {
            return Ok(true);
        }
        match fs::metadata(&self.path) {
            Ok(md) => Ok((md.dev(), md.ino()) != self.id),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Forgets the open file; the next open reads from its start.
    fn close_for_rotation(&mut self) {
        self.file = None;
        self.offset = 0;
        self.size = 0;
        self.line_end = 0;
        self.read_window.clear();
        self.line_window.clear();
        self.partial.clear();
        self.discarding = false;
        self.resync = false;
        self.next_start = Start::Beginning;
        self.totals.rotations += 1;
    }

    /// Opens the next file after a rotation: a rotated sibling still to read, else the path.
    fn open_next(&mut self, st: &mut PollStats) -> io::Result<bool> {
        while let Some(p) = self.backlog.pop_front() {
            match crate::fsutil::open_daemon_file(&p) {
                Ok(f) => {
                    let md = f.metadata()?;
                    self.install(f, &md, p, 0, st);
                    return Ok(true);
                }
                Err(e) => log::debug!("rotated log {}: {e}", crate::text::escape_path(&p)),
            }
        }
        self.open_path_at(Start::Beginning, st)
    }

    /// The first open: at the end, at the start, or at the resume checkpoint.
    fn open_first(&mut self, st: &mut PollStats) -> io::Result<bool> {
        match self.resume_at.take() {
            Some(cp) => self.open_resume(cp, st),
            None => self.open_path_at(self.next_start, st),
        }
    }

    /// Opens the live path; `Ok(false)` when it does not exist.
    fn open_path_at(&mut self, start: Start, st: &mut PollStats) -> io::Result<bool> {
        let file = match crate::fsutil::open_daemon_file(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let md = file.metadata()?;
        let at = match start {
            Start::End => md.len(),
            Start::Beginning => 0,
        };
        self.install(file, &md, self.path.clone(), at, st);
        Ok(true)
    }

    /// Resume at `cp`: the live path if it is the checkpoint's file, else the rotated sibling
    /// that is, then the newer siblings; the live path from its start when neither matches.
    fn open_resume(&mut self, cp: Checkpoint, st: &mut PollStats) -> io::Result<bool> {
        let live = match crate::fsutil::open_daemon_file(&self.path) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                self.resume_at = Some(cp);
                return Err(e);
            }
        };
        if let Some(f) = live {
            let md = f.metadata()?;
            if md.ino() == cp.inode {
                if self.verify(&f, md.len(), &cp) {
                    self.install(f, &md, self.path.clone(), cp.offset, st);
                    return Ok(true);
                }
                self.totals.truncations += 1;
                st.truncated = true;
                // Rotated by copytruncate while down: the copy holds the bytes before the
                // checkpoint and the unread lines after it; read it first.
                if let Some(((copy, cmd, p), newer)) = self.find_copy(&cp) {
                    self.totals.resumed_rotated += 1;
                    self.backlog = newer.into();
                    log::info!(
                        "log {}: resuming in its copy {} at byte {}",
                        crate::text::escape_path(&self.path),
                        crate::text::escape_path(&p),
                        cp.offset
                    );
                    self.install(copy, &cmd, p, cp.offset, st);
                    return Ok(true);
                }
                self.install(f, &md, self.path.clone(), 0, st);
                return Ok(true);
            }
        }
        if let Some((found, newer)) = self.find_rotated(&cp) {
            let (f, md, p) = found;
            self.totals.resumed_rotated += 1;
            let at = if self.verify(&f, md.len(), &cp) {
                cp.offset
            } else {
                self.totals.truncations += 1;
                st.truncated = true;
                0
            };
            log::info!(
                "log {}: resuming in its rotated file {} at byte {at}",
                crate::text::escape_path(&self.path),
                crate::text::escape_path(&p)
            );
            self.backlog = newer.into();
            self.install(f, &md, p, at, st);
            return Ok(true);
        }
        if cp.offset > 0 {
            self.totals.resume_lost += 1;
            log::warn!(
                "log {}: the file of the last checkpoint (inode {}) is gone; reading the current file from its start",
                crate::text::escape_path(&self.path),
                cp.inode
            );
        }
        self.open_path_at(Start::Beginning, st)
    }

    /// Whether `file` (of length `len`) holds the bytes `cp` was taken after.
    fn verify(&self, file: &File, len: u64, cp: &Checkpoint) -> bool {
        if cp.offset > len {
            return false;
        }
        let Some(want) = cp.fingerprint else {
            return true;
        };
        match read_window_before(file, cp.offset) {
            Ok(w) => w.fingerprint() == want,
            Err(_) => false,
        }
    }

    /// The rotated sibling holding inode `cp.inode` (opened), and the siblings rotated after
    /// it, oldest first (by modification time).
    #[allow(clippy::type_complexity)]
    fn find_rotated(
        &self,
        cp: &Checkpoint,
    ) -> Option<((File, fs::Metadata, PathBuf), Vec<PathBuf>)> {
        let siblings = rotated_siblings(&self.path);
        let (found_path, found_md) = siblings.iter().find(|(_, md)| md.ino() == cp.inode)?;
        let file = crate::fsutil::open_daemon_file(found_path).ok()?;
        let md = file.metadata().ok()?;
        if md.ino() != found_md.ino() {
            return None;
        }
        let mtime = |m: &fs::Metadata| (m.mtime(), m.mtime_nsec());
        let mut newer: Vec<&(PathBuf, fs::Metadata)> = siblings
            .iter()
            .filter(|(p, m)| p != found_path && mtime(m) > mtime(found_md))
            .collect();
        newer.sort_by_key(|(_, m)| mtime(m));
        let newer = newer.into_iter().map(|(p, _)| p.clone()).collect();
        Some(((file, md, found_path.clone()), newer))
    }

    /// A rotated sibling that holds the bytes before `cp` (same fingerprint): the copy a
    /// copytruncate rotation made (opened), and the siblings rotated after it, oldest first.
    /// Needs the checkpoint's fingerprint.
    #[allow(clippy::type_complexity)]
    fn find_copy(&self, cp: &Checkpoint) -> Option<((File, fs::Metadata, PathBuf), Vec<PathBuf>)> {
        cp.fingerprint?;
        let mtime = |m: &fs::Metadata| (m.mtime(), m.mtime_nsec());
        let mut siblings = rotated_siblings(&self.path);
        // The newest copy first.
        siblings.sort_by_key(|(_, m)| std::cmp::Reverse(mtime(m)));
        let (i, found) = siblings.iter().enumerate().find_map(|(i, (p, _))| {
            let f = crate::fsutil::open_daemon_file(p).ok()?;
            let md = f.metadata().ok()?;
            self.verify(&f, md.len(), cp)
                .then(|| (i, (f, md, p.clone())))
        })?;
        // Siblings before it in this order are newer: read them oldest first.
        let newer = siblings
            .get(..i)
            .unwrap_or(&[])
            .iter()
            .rev()
            .map(|(p, _)| p.clone())
            .collect();
        Some((found, newer))
    }

    /// Makes `file` the open file, reading from `at`.
    fn install(
        &mut self,
        file: File,
        md: &fs::Metadata,
        opened_as: PathBuf,
        at: u64,
        st: &mut PollStats,
    ) {
        self.id = (md.dev(), md.ino());
        self.size = md.len();
        self.offset = at.min(md.len());
        self.line_end = self.offset;
        self.start_offset = self.offset;
        match read_window_before(&file, self.offset) {
            Ok(w) => self.read_window = w,
            Err(_) => self.read_window.clear(),
        }
        self.line_window = self.read_window.clone();
        self.partial.clear();
        // Starting after an unterminated line (attach at the end, or a checkpoint taken
        // while attached mid-line): skip its remainder.
        self.resync = self.offset > 0 && self.read_window.bytes().last() != Some(&b'\n');
        self.discarding = self.resync;
        self.file = Some(file);
        self.open_path = opened_as;
        self.next_start = Start::Beginning;
        st.opened = true;
    }

    /// Restarts at 0 when the file shrank below the offset or the bytes before the offset
    /// changed since they were read.
    fn check_truncation(&mut self, st: &mut PollStats) -> io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let len = file.metadata()?.len();
        let rewritten = len < self.offset
            || (len > self.offset
                && self.read_window.len() > 0
                && read_window_before(file, self.offset)
                    .map(|w| w.bytes() != self.read_window.bytes())
                    .unwrap_or(false));
        if rewritten && self.read_window.len() > 0 {
            // copytruncate: the copy holds what was read and what was written after it
            // before the truncation. Continue in the copy at the same offset (the held
            // partial line included), then the live file from its start.
            let cp = Checkpoint::new(self.id.1, self.offset, Some(self.read_window.fingerprint()));
            if let Some(((copy, md, p), newer)) = self.find_copy(&cp) {
                log::info!(
                    "log {}: truncated; reading the rest of its copy {} first",
                    crate::text::escape_path(&self.path),
                    crate::text::escape_path(&p)
                );
                self.id = (md.dev(), md.ino());
                self.size = md.len();
                self.file = Some(copy);
                self.open_path = p;
                self.backlog = newer.into();
                st.truncated = true;
                self.totals.truncations += 1;
                return Ok(());
            }
        }
        if rewritten {
            self.offset = 0;
            self.line_end = 0;
            self.start_offset = 0;
            self.read_window.clear();
            self.line_window.clear();
            if !self.partial.is_empty() || self.discarding() {
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
        sink: &mut dyn FnMut(&str) -> ControlFlow<()>,
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
        sink: &mut dyn FnMut(&str) -> ControlFlow<()>,
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
            let chunk = buf.get(..n).unwrap_or(&[]);
            let (used, paused) = self.split(chunk, sink, st);
            self.offset += used as u64;
            *budget = budget.saturating_sub(used as u64);
            st.bytes += used as u64;
            self.totals.bytes += used as u64;
            self.read_window.push(chunk.get(..used).unwrap_or(&[]));
            if paused {
                // The rest of the chunk (if any) is read again by the next poll.
                *budget = 0;
                break Ok(());
            }
            if n < want {
                // Short read: at EOF now (a regular file), no need for another call.
                break Ok(());
            }
        };
        self.size = self.size.max(self.offset);
        if *budget == 0 {
            // More is waiting: the next poll comes at once and reuses the buffer. A source
            // that reached its end gives it back, so idle logs (a daemon follows dozens of
            // per-domain access logs) hold no read buffer between writes.
            self.buf = buf;
        }
        result
    }

    /// Splits a chunk read at `self.offset` into lines, carrying the unterminated tail in
    /// `partial`; updates the line-end position and its fingerprint window. Returns how many
    /// bytes of the chunk were consumed and whether the sink paused (then the bytes after
    /// the paused line, if they hold another line, are left for the next poll).
    fn split(
        &mut self,
        chunk: &[u8],
        sink: &mut dyn FnMut(&str) -> ControlFlow<()>,
        st: &mut PollStats,
    ) -> (usize, bool) {
        let mut pos = 0usize;
        let mut last_end = None;
        let mut paused = false;
        while let Some(i) = chunk.get(pos..).and_then(|r| memchr::memchr(b'\n', r)) {
            let line = chunk.get(pos..pos + i).unwrap_or(&[]);
            pos += i + 1;
            last_end = Some(pos);
            let flow = if self.partial.is_empty() && !self.discarding {
                self.emit(line, sink, st)
            } else {
                self.append(line, st);
                let joined = std::mem::take(&mut self.partial);
                let flow = self.end_line(&joined, sink, st);
                self.partial = joined;
                self.partial.clear();
                flow
            };
            if flow.is_break() {
                paused = true;
                break;
            }
        }
        let Some(end) = last_end else {
            self.append(chunk, st);
            return (chunk.len(), false);
        };
        let lines = chunk.get(..end).unwrap_or(&[]);
        // The fingerprint window at the new line end: the bytes read before this chunk, then
        // the chunk up to that line end.
        if lines.len() < FINGERPRINT_BYTES {
            self.line_window.set(self.read_window.bytes());
        }
        self.line_window.push(lines);
        self.line_end = self.offset + end as u64;
        let tail = chunk.get(end..).unwrap_or(&[]);
        if paused && memchr::memchr(b'\n', tail).is_some() {
            return (end, true);
        }
        self.append(tail, st);
        (chunk.len(), paused)
    }

    fn append(&mut self, piece: &[u8], st: &mut PollStats) {
        if self.discarding {
            return;
        }
        if self.partial.len() + piece.len() > MAX_LINE_BYTES {
            self.discarding = true;
            self.partial.clear();
            self.count_overlong(st);
        } else {
            self.partial.extend_from_slice(piece);
        }
    }

    fn count_overlong(&mut self, st: &mut PollStats) {
        if !self.resync {
            st.overlong_lines += 1;
            self.totals.overlong_lines += 1;
        }
    }

    /// A newline arrived for the held line.
    fn end_line(
        &mut self,
        line: &[u8],
        sink: &mut dyn FnMut(&str) -> ControlFlow<()>,
        st: &mut PollStats,
    ) -> ControlFlow<()> {
        if self.discarding {
            self.discarding = false;
            self.resync = false;
            ControlFlow::Continue(())
        } else {
            self.emit(line, sink, st)
        }
    }

    fn emit(
        &mut self,
        line: &[u8],
        sink: &mut dyn FnMut(&str) -> ControlFlow<()>,
        st: &mut PollStats,
    ) -> ControlFlow<()> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return ControlFlow::Continue(());
        }
        if line.len() > MAX_LINE_BYTES {
            self.count_overlong(st);
            return ControlFlow::Continue(());
        }
        st.lines += 1;
        self.totals.lines += 1;
        match std::str::from_utf8(line) {
            Ok(s) => sink(s),
            Err(_) => sink(&String::from_utf8_lossy(line)),
        }
    }

    /// The old file of a rotation ended without a newline: its last line is complete.
    fn flush_partial(&mut self, sink: &mut dyn FnMut(&str) -> ControlFlow<()>, st: &mut PollStats) {
        let held = std::mem::take(&mut self.partial);
        if self.discarding {
            self.discarding = false;
            self.resync = false;
        } else if !held.is_empty() {
            // The file is finished: a pause request changes nothing here.
            let _ = self.emit(&held, sink, st);
        }
    }
}

/// Uncompressed regular files next to `path` named like its rotations (`auth.log.1`,
/// `auth.log-20261123`; not `.gz` and other compressed ones, not the live file), at most
/// [`MAX_SIBLINGS`].
fn rotated_siblings(path: &Path) -> Vec<(PathBuf, fs::Metadata)> {
    let mut out = Vec::new();
    let (Some(dir), Some(base)) = (path.parent(), path.file_name().and_then(|b| b.to_str())) else {
        return out;
    };
    let Ok(entries) = fs::read_dir(dir) else {
        return out;
    };
    let live_ino = fs::metadata(path).ok().map(|m| m.ino());
    for entry in entries.flatten().take(4096) {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(base)) else {
            continue;
        };
        if !(rest.starts_with('.') || rest.starts_with('-'))
            || [".gz", ".xz", ".bz2", ".zst", ".lz4", ".Z"]
                .iter()
                .any(|z| rest.ends_with(z))
        {
            continue;
        }
        let p = entry.path();
        let Ok(md) = fs::symlink_metadata(&p) else {
            continue;
        };
        if md.file_type().is_file() && Some(md.ino()) != live_ino {
            out.push((p, md));
            if out.len() >= MAX_SIBLINGS {
                break;
            }
        }
    }
    out
}

/// Opens the file `cp` was taken in, when it still holds the bytes before `cp` (its
/// fingerprint matches, or is unknown): the file at `path`, a rotated sibling with the
/// checkpoint's inode (rename rotation), or a sibling with the same bytes before the
/// checkpoint (the copy of a copytruncate rotation; needs the fingerprint).
pub(crate) fn open_checkpoint_file(path: &Path, cp: &Checkpoint) -> Option<File> {
    let holds = |f: &File| -> bool {
        let Ok(md) = f.metadata() else { return false };
        if cp.offset > md.len() {
            return false;
        }
        match cp.fingerprint {
            None => true,
            Some(want) => read_window_before(f, cp.offset)
                .map(|w| w.fingerprint() == want)
                .unwrap_or(false),
        }
    };
    let ino_of = |f: &File| f.metadata().map(|m| m.ino()).ok();
    if let Ok(f) = crate::fsutil::open_daemon_file(path) {
        if ino_of(&f) == Some(cp.inode) && holds(&f) {
            return Some(f);
        }
    }
    let siblings = rotated_siblings(path);
    if let Some((p, _)) = siblings.iter().find(|(_, md)| md.ino() == cp.inode) {
        if let Ok(f) = crate::fsutil::open_daemon_file(p) {
            if ino_of(&f) == Some(cp.inode) && holds(&f) {
                return Some(f);
            }
        }
    }
    cp.fingerprint?;
    siblings.iter().find_map(|(p, _)| {
        let f = crate::fsutil::open_daemon_file(p).ok()?;
        holds(&f).then_some(f)
    })
}

/// The up to [`FINGERPRINT_BYTES`] bytes of `file` before `offset`.
fn read_window_before(file: &File, offset: u64) -> io::Result<Window> {
    let n = offset.min(FINGERPRINT_BYTES as u64) as usize;
    let mut buf = [0u8; FINGERPRINT_BYTES];
    let dst = buf.get_mut(..n).unwrap_or(&mut []);
    file.read_exact_at(dst, offset - n as u64)?;
    let mut w = Window::default();
    w.set(dst);
    Ok(w)
}

#[cfg(test)]
mod tests;
