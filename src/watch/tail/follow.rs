//! [`Follower`]: the loop every log collector runs. It follows a set of files
//! ([`FileSource`]), wakes on inotify ([`Waker`]), hands each complete line to the
//! collector's [`LineHandler`], submits the findings to the findings engine and then the
//! files' checkpoints, and publishes the `<name>.file_source` row and the watcher row.
//!
//! Guarantees:
//! - **Latency.** A line appended to a followed file is read as soon as inotify reports the
//!   write (no polling delay); polling remains as a safety net every [`SAFETY_NET_POLL`]
//!   (every [`super::wake::FALLBACK_POLL`] when inotify is unavailable).
//! - **Checkpoints after their findings.** After each poll of a file, the findings of its
//!   lines are submitted first, then the file's position ([`Keys::position`]; without
//!   findings before it, at most every [`POSITION_EVERY`], and at stop), so a restart
//!   resumes after the last line whose findings were submitted before the position: the
//!   dispatcher commits items in order. At most [`GROUP_FINDINGS`] findings are held
//!   before they and a position are submitted together (a burst of findings is committed in
//!   small groups, each followed by its position).
//! - **Replay.** Each file also has a replay position ([`Keys::replay`]): the oldest position
//!   read within the collector's detection window on the current inode. At start, the lines
//!   between it and the position are fed to [`LineHandler::replay`] (no findings), so a
//!   restart neither loses a half-counted window nor dispatches its findings again.
//! - **Fingerprints.** The position's [`Checkpoint::fingerprint`] is saved under
//!   [`Keys::fingerprint`] (the hash as the "inode", the offset it belongs to as the offset);
//!   a resume whose bytes no longer match reads the file from its start.
//! - **Backpressure, not loss.** A burst is read no faster than the engine dispatches it:
//!   while more than [`MAX_IN_FLIGHT`] findings of this follower wait in the engine, the
//!   follower waits (up to [`SUBMIT_WAIT`] per group), so the backlog stays in the file
//!   (the row's depth, in bytes) instead of memory. Submissions also wait up to
//!   [`SUBMIT_WAIT`] for room in `findings.ingest`; a finding still refused after that is a
//!   loss counted on `findings.ingest` (and logged, once a minute).
//! - **The row** (`<name>.file_source`, `depth_unit` bytes, `capacity_unavailable`,
//!   `lag_basis` `consumer_progress`): `waiting` is the bytes of the open files not read
//!   yet; a partial line at the end of a file has been read and is not waiting, so it never
//!   looks like a stalled consumer. Progress is noted whenever bytes are read; `source_io`
//!   while a file cannot be read.
//! - **The watcher row** (a [`Component`]): attached while any file is open (whatever it is
//!   doing, including discarding an over-long line); `events_total` counts lines read; the
//!   counters `overlong_lines_total`, `truncations_total`, `rotations_total`,
//!   `resumed_rotated_total` and `resume_lost_total` (a restart whose checkpoint file could
//!   not be found: its unread tail is lost) are published with it.

use std::collections::VecDeque;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::components::Component;
use crate::findings::{Engine, Finding, Ingest};
use crate::lograte::LogLimiter;
use crate::queue::{Flag, QueueHealth};
use crate::store::Store;

use super::checkpoint::Checkpoint;
use super::source::{FileSource, PollStats, MAX_LINE_BYTES};
use super::wake::{WakeHandle, Waker};

/// Safety-net poll interval while inotify works.
pub const SAFETY_NET_POLL: Duration = Duration::from_secs(2);
/// Positions without findings before them are submitted at most this often per file (a
/// restart re-reads at most this much of lines that produced no finding); a position that
/// follows findings is submitted at once.
pub const POSITION_EVERY: Duration = Duration::from_millis(250);
/// Granularity of the replay bookkeeping: one remembered read position per file per this
/// interval (bounds its memory to window / interval entries).
const READS_EVERY_NS: i64 = 250_000_000;
/// Findings held before they are submitted with a position.
pub const GROUP_FINDINGS: usize = 16;
/// How long a submission waits for room in `findings.ingest`.
pub const SUBMIT_WAIT: Duration = Duration::from_secs(2);
/// Findings of this follower submitted and not yet dispatched, at most (estimated from the
/// engine's counters): a burst is read no faster than the engine commits it, so the
/// backlog stays in the file (bytes) rather than in memory (findings). Room for a few
/// commits' worth: the start of a burst from new addresses makes findings faster than the
/// store commits them, and with 512 the reader waited there instead of reading on into the
/// quieter lines behind them (about 1 MB of findings at most).
pub const MAX_IN_FLIGHT: u64 = 2_048;
/// A file found after the start ([`Follower::add_file`]) up to this size is read from its
/// start; a larger one from its end.
pub const NEW_FILE_FROM_START: u64 = 1024 * 1024;
/// Largest replay at start (bytes); a longer window is replayed from its last part.
pub const MAX_REPLAY_BYTES: u64 = 64 * 1024 * 1024;

/// What a log collector plugs into the [`Follower`].
pub trait LineHandler {
    /// One complete line; findings go to `emit`.
    fn line(&mut self, line: &str, emit: &mut dyn FnMut(Finding));
    /// A line already processed before a restart (detection state only, no findings).
    fn replay(&mut self, line: &str);
    /// Called after every round (periodic expiry of state).
    fn maintain(&mut self) {}
    /// The lines handed next (to [`Self::line`] or [`Self::replay`]) come from the file
    /// followed at `path`, until the next call. For handlers whose reading of a line
    /// depends on its file (the access log's layout).
    fn file(&mut self, _path: &Path) {}
}

/// Checkpoint keys of one followed file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    /// `<prefix>:<path>`: (inode, end of the last line whose findings were submitted).
    pub position: String,
    /// `<prefix>-replay:<path>`: (inode, oldest offset read within the detection window).
    pub replay: String,
    /// `<prefix>-fp:<path>`: (fingerprint, the position offset it belongs to).
    pub fingerprint: String,
}

impl Keys {
    pub fn new(prefix: &str, path: &Path) -> Keys {
        let p = path.display();
        Keys {
            position: format!("{prefix}:{p}"),
            replay: format!("{prefix}-replay:{p}"),
            fingerprint: format!("{prefix}-fp:{p}"),
        }
    }

    /// The committed position with its fingerprint (when the fingerprint belongs to it),
    /// and the replay offset (when on the same inode and not after the position).
    pub fn load(&self, store: &Store) -> (Option<Checkpoint>, Option<u64>) {
        let load = |key: &str| {
            store
                .read(|conn| crate::store::findings::load_checkpoint(conn, key))
                .unwrap_or(None)
        };
        let Some((inode, offset)) = load(&self.position) else {
            return (None, None);
        };
        let fp = load(&self.fingerprint)
            .filter(|&(_, off)| off == offset)
            .map(|(h, _)| h);
        let replay = load(&self.replay)
            .filter(|&(ino, from)| ino == inode && from <= offset)
            .map(|(_, from)| from);
        (Some(Checkpoint::new(inode, offset, fp)), replay)
    }
}

/// Counters of a follower, published on its watcher row.
struct Counters {
    overlong: Arc<AtomicU64>,
    truncations: Arc<AtomicU64>,
    rotations: Arc<AtomicU64>,
    resumed_rotated: Arc<AtomicU64>,
    resume_lost: Arc<AtomicU64>,
}

struct Followed {
    keys: Keys,
    source: FileSource,
    /// Position last submitted.
    submitted: Option<Checkpoint>,
    /// When the position was last submitted (monotonic nanos).
    submitted_at: i64,
    /// Replay offset last submitted.
    submitted_replay: Option<(u64, u64)>,
    /// (monotonic nanos, inode, offset) at the start of recent polls, for the replay key.
    reads: VecDeque<(i64, u64, u64)>,
    last_error: Option<io::ErrorKind>,
    reported: PollTotals,
}

impl Followed {
    /// `source` attached (a failure is logged; the polls retry), at the committed
    /// `position` of `keys`.
    fn attached(
        name: &str,
        keys: Keys,
        mut source: FileSource,
        position: Option<Checkpoint>,
    ) -> Followed {
        if let Err(e) = source.attach() {
            log::warn!("{name} {}: {e}", crate::text::escape_path(source.path()));
        }
        Followed {
            keys,
            source,
            submitted: position,
            submitted_at: i64::MIN,
            submitted_replay: None,
            reads: VecDeque::new(),
            last_error: None,
            reported: PollTotals::default(),
        }
    }
}

/// Totals already published for one file.
#[derive(Default, Clone, Copy)]
struct PollTotals {
    overlong_lines: u64,
    truncations: u64,
    rotations: u64,
    resumed_rotated: u64,
    resume_lost: u64,
}

/// Follows a set of files for one collector. See the module documentation.
pub struct Follower<H: LineHandler> {
    name: &'static str,
    files: Vec<Followed>,
    handler: H,
    waker: Waker,
    engine: Arc<Engine>,
    row: Arc<QueueHealth>,
    component: Arc<Component>,
    counters: Counters,
    clock: SharedClock,
    window_nanos: i64,
    pending: Vec<Finding>,
    limiter: LogLimiter,
    /// Findings submitted by this follower since it started.
    submitted: u64,
    /// The engine's dispatched + suppressed count when this follower started.
    done_base: u64,
}

impl<H: LineHandler> Follower<H> {
    /// Prepares to follow `paths`: loads each file's checkpoint from `store`, replays the
    /// open detection window into `handler`, and attaches every file (at its end without a
    /// checkpoint), so that lines written from now on are read whenever [`Follower::run`]
    /// starts. `prefix` names the checkpoint keys (`auth` for `auth:/var/log/auth.log`);
    /// `window` is the handler's detection window (how far back the replay key reaches).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: &'static str,
        prefix: &str,
        paths: &[PathBuf],
        window: Duration,
        mut handler: H,
        store: &Store,
        engine: Arc<Engine>,
        row: Arc<QueueHealth>,
        component: Arc<Component>,
        clock: SharedClock,
    ) -> io::Result<Self> {
        let mut files = Vec::with_capacity(paths.len());
        for path in paths {
            let keys = Keys::new(prefix, path);
            let (position, replay) = keys.load(store);
            let source = match position {
                Some(cp) => {
                    if let Some(from) = replay {
                        let n = replay_range(path, &cp, from, &mut handler);
                        if n > 0 {
                            log::info!(
                                "{name} {}: replayed {n} lines of the open detection window",
                                crate::text::escape_path(path)
                            );
                        }
                    }
                    FileSource::resume(path, cp)
                }
                None => FileSource::new(path),
            };
            // Attached before the daemon reports itself started: lines written from now on
            // are read, whenever the thread first polls.
            files.push(Followed::attached(name, keys, source, position));
        }
        let mut waker = Waker::new(paths)?;
        for (i, f) in files.iter().enumerate() {
            waker.arm(i, f.source.identity());
        }
        if let Some(why) = waker.degraded() {
            log::warn!("{name}: {why}");
        }
        let counters = Counters {
            overlong: component.counter("overlong_lines_total"),
            truncations: component.counter("truncations_total"),
            rotations: component.counter("rotations_total"),
            resumed_rotated: component.counter("resumed_rotated_total"),
            resume_lost: component.counter("resume_lost_total"),
        };
        component
            .attached
            .store(files.iter().any(|f| f.source.is_open()), Ordering::Relaxed);
        Ok(Follower {
            name,
            files,
            handler,
            waker,
            row,
            component,
            counters,
            window_nanos: i64::try_from(window.as_nanos()).unwrap_or(i64::MAX),
            limiter: LogLimiter::per_minute(clock.clone()),
            clock,
            pending: Vec::with_capacity(GROUP_FINDINGS),
            submitted: 0,
            done_base: engine.done(),
            engine,
        })
    }

    /// Follows one more file from now on (a glob pattern matched a file that appeared after
    /// the start): at its committed checkpoint when it has one; otherwise from its start
    /// when it holds at most [`NEW_FILE_FROM_START`] bytes (a new log: its first lines were
    /// written before it was found), else at its end (history). Its lines were never
    /// counted, so nothing is replayed. Does nothing for a path already followed.
    pub fn add_file(&mut self, prefix: &str, path: &Path, store: &Store) {
        if self.files.iter().any(|f| f.source.path() == path) {
            return;
        }
        let keys = Keys::new(prefix, path);
        let (position, _) = keys.load(store);
        let source = match position {
            Some(cp) => FileSource::resume(path, cp),
            None => {
                let small = std::fs::metadata(path).is_ok_and(|m| m.len() <= NEW_FILE_FROM_START);
                if small {
                    FileSource::from_start(path)
                } else {
                    FileSource::new(path)
                }
            }
        };
        let followed = Followed::attached(self.name, keys, source, position);
        self.waker.add(path);
        let i = self.files.len();
        self.waker.arm(i, followed.source.identity());
        self.files.push(followed);
    }

    /// The followed paths, in order.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|f| f.source.path())
    }

    /// Wakes the running follower (for example after setting its stop flag).
    pub fn wake_handle(&self) -> WakeHandle {
        self.waker.handle()
    }

    /// The collector's name in log lines (`auth log`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The engine this follower submits to.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// Runs rounds until `stop`, waiting for inotify (or the safety net) between them.
    pub fn run(self, stop: &AtomicBool) -> H {
        self.run_with(stop, Duration::MAX, |_| {})
    }

    /// [`Follower::run`], calling `tick` between rounds about every `every` (within
    /// [`SAFETY_NET_POLL`]), for example to follow files a glob pattern matches later.
    pub fn run_with(
        mut self,
        stop: &AtomicBool,
        every: Duration,
        mut tick: impl FnMut(&mut Self),
    ) -> H {
        let mut last_tick = std::time::Instant::now();
        while !stop.load(Ordering::Acquire) {
            if last_tick.elapsed() >= every {
                last_tick = std::time::Instant::now();
                tick(&mut self);
            }
            if self.round() {
                continue;
            }
            // A moved position not submitted yet is submitted by the round after
            // POSITION_EVERY, whether or not the file changes meanwhile.
            let timeout = if self.position_pending() {
                POSITION_EVERY
            } else {
                SAFETY_NET_POLL
            };
            if let Err(e) = self.waker.wait(timeout) {
                log::warn!("{}: waiting for changes failed: {e}", self.name);
                std::thread::sleep(super::wake::FALLBACK_POLL);
            }
        }
        self.flush_positions();
        self.handler
    }

    /// One round over every file. Returns true when a file has more to read now.
    pub fn round(&mut self) -> bool {
        let mut more = false;
        let mut io_error = false;
        let mut read_bytes = 0u64;
        let mut lines = 0u64;
        let now = self.clock.monotonic_nanos();
        for i in 0..self.files.len() {
            let (st, failed) = self.poll_file(i, now);
            more |= st.more;
            io_error |= failed;
            read_bytes += st.bytes;
            lines += st.lines;
        }
        self.handler.maintain();
        let mut behind = 0u64;
        let mut attached = false;
        for (i, f) in self.files.iter().enumerate() {
            behind = behind.saturating_add(f.source.bytes_behind());
            attached |= f.source.is_open();
            self.waker.arm(i, f.source.identity());
        }
        if read_bytes > 0 {
            self.row.note_progress();
        }
        self.row.set_waiting(behind);
        self.row.set_flag(Flag::SourceIo, io_error);
        self.component.attached.store(attached, Ordering::Relaxed);
        self.component.events_at(lines, self.clock.now());
        more
    }

    /// Polls file `i` once, submits its findings and then its position.
    fn poll_file(&mut self, i: usize, now: i64) -> (PollStats, bool) {
        let Some(f) = self.files.get_mut(i) else {
            return (PollStats::default(), false);
        };
        if let Some(cp) = f.source.checkpoint() {
            // Keep one position per interval: the older one, so the replay start is never
            // later than the oldest line read within the window.
            if f.reads.back().is_none_or(|&(t, ino, _)| {
                ino != cp.inode || now.saturating_sub(t) >= READS_EVERY_NS
            }) {
                f.reads.push_back((now, cp.inode, cp.offset));
            }
        }
        let handler = &mut self.handler;
        handler.file(f.source.path());
        let pending = &mut self.pending;
        let polled = f.source.poll_with(&mut |line| {
            handler.line(line, &mut |finding| pending.push(finding));
            if pending.len() >= GROUP_FINDINGS {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        let had_findings = !self.pending.is_empty();
        self.submit_pending();
        let Some(f) = self.files.get_mut(i) else {
            return (PollStats::default(), false);
        };
        let mut failed = false;
        let st = match polled {
            Ok(st) => {
                if f.last_error.take().is_some() {
                    log::info!(
                        "{} {}: readable again",
                        self.name,
                        crate::text::escape_path(f.source.path())
                    );
                }
                st
            }
            Err(e) => {
                failed = true;
                self.component.errors.fetch_add(1, Ordering::Relaxed);
                if f.last_error != Some(e.kind()) {
                    log::warn!(
                        "{} {}: {e}",
                        self.name,
                        crate::text::escape_path(f.source.path())
                    );
                    f.last_error = Some(e.kind());
                }
                PollStats::default()
            }
        };
        if st.overlong_lines > 0 {
            let path = f.source.path().display().to_string();
            crate::warn_limited!(
                self.limiter,
                "overlong_line",
                &path,
                "{} {}: skipped {} line(s) longer than {MAX_LINE_BYTES} bytes",
                self.name,
                crate::text::escape_controls(&path),
                st.overlong_lines
            );
        }
        if st.truncated {
            // Earlier offsets in this inode describe content that is gone.
            f.reads.clear();
            log::info!(
                "{} {}: truncated or rewritten; reading it from its start",
                self.name,
                crate::text::escape_path(f.source.path())
            );
        }
        // Counters from the source's totals (they also cover what happened when the source
        // attached or resumed, outside any poll).
        let t = f.source.totals();
        let r = &mut f.reported;
        for (now, before, counter) in [
            (
                t.overlong_lines,
                &mut r.overlong_lines,
                &self.counters.overlong,
            ),
            (
                t.truncations,
                &mut r.truncations,
                &self.counters.truncations,
            ),
            (t.rotations, &mut r.rotations, &self.counters.rotations),
            (
                t.resumed_rotated,
                &mut r.resumed_rotated,
                &self.counters.resumed_rotated,
            ),
            (
                t.resume_lost,
                &mut r.resume_lost,
                &self.counters.resume_lost,
            ),
        ] {
            if now > *before {
                counter.fetch_add(now - *before, Ordering::Relaxed);
                *before = now;
            }
        }
        if let Some(cp) = f.source.checkpoint() {
            // A file opened during this poll (rotation, appearance): its lines are within
            // the window from where its reading started.
            if !f.reads.iter().any(|&(_, ino, _)| ino == cp.inode) {
                f.reads.push_back((now, cp.inode, f.source.start_offset()));
            }
        }
        self.submit_checkpoint(i, now, had_findings);
        (st, failed)
    }

    /// Submits the held findings, waiting for room (the log is the buffer).
    fn submit_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.pace();
        self.submitted += self.pending.len() as u64;
        for finding in self.pending.drain(..) {
            let item = Ingest::Finding(Box::new(finding));
            if !self.engine.submit_wait(item, SUBMIT_WAIT) {
                crate::warn_limited!(
                    self.limiter,
                    "ingest_refused",
                    self.name,
                    "{}: a finding was refused by findings.ingest (counted there)",
                    self.name
                );
            }
        }
    }

    /// Waits (up to [`SUBMIT_WAIT`]) while more than [`MAX_IN_FLIGHT`] of this follower's
    /// findings are not dispatched yet. The estimate counts every source's dispatches, so it
    /// errs on the side of waiting less, never of blocking.
    fn pace(&self) {
        let done = self.engine.done().saturating_sub(self.done_base);
        if self.submitted.saturating_sub(done) <= MAX_IN_FLIGHT {
            return;
        }
        // Over the limit: let the engine work off half before going on. The engine wakes
        // us after each finished batch, so no time is slept while there is room.
        let target = (self.done_base + self.submitted).saturating_sub(MAX_IN_FLIGHT / 2);
        self.engine
            .wait_done(target, std::time::Instant::now() + SUBMIT_WAIT);
    }

    /// Submits file `i`'s replay position, fingerprint and position when the position moved:
    /// at once after findings (`urgent`), otherwise at most every [`POSITION_EVERY`].
    fn submit_checkpoint(&mut self, i: usize, now: i64, urgent: bool) {
        let window = self.window_nanos;
        let every = i64::try_from(POSITION_EVERY.as_nanos()).unwrap_or(i64::MAX);
        let Some(f) = self.files.get_mut(i) else {
            return;
        };
        let Some(cp) = f.source.checkpoint() else {
            return;
        };
        if f.submitted == Some(cp) {
            return;
        }
        if !urgent && now.saturating_sub(f.submitted_at) < every {
            return;
        }
        // Oldest position read within the window, on the current inode.
        while f
            .reads
            .front()
            .is_some_and(|&(t, ino, _)| ino != cp.inode || now - t > window)
        {
            f.reads.pop_front();
        }
        let from = f
            .reads
            .front()
            .map(|&(_, _, o)| o)
            .unwrap_or(cp.offset)
            .min(cp.offset);
        let mut ok = true;
        if f.submitted_replay != Some((cp.inode, from)) {
            ok &= self.engine.submit_wait(
                Ingest::checkpoint(f.keys.replay.clone(), cp.inode, from),
                SUBMIT_WAIT,
            );
            if ok {
                f.submitted_replay = Some((cp.inode, from));
            }
        }
        if let Some(h) = cp.fingerprint {
            ok &= self.engine.submit_wait(
                Ingest::checkpoint(f.keys.fingerprint.clone(), h, cp.offset),
                SUBMIT_WAIT,
            );
        }
        ok &= self.engine.submit_wait(
            Ingest::checkpoint(f.keys.position.clone(), cp.inode, cp.offset),
            SUBMIT_WAIT,
        );
        if ok {
            f.submitted = Some(cp);
            f.submitted_at = now;
        }
    }

    /// Whether a file's position moved and is not submitted yet.
    fn position_pending(&self) -> bool {
        self.files.iter().any(|f| {
            f.source
                .checkpoint()
                .is_some_and(|cp| f.submitted != Some(cp))
        })
    }

    /// Submits every moved position now (at stop).
    fn flush_positions(&mut self) {
        let now = self.clock.monotonic_nanos();
        for i in 0..self.files.len() {
            self.submit_checkpoint(i, now, true);
        }
    }
}

/// Feeds the lines between `from` and the checkpoint `cp` of the file `cp` was taken in
/// (the file at `path`, or a rotated sibling of it) to `handler.replay`, unless that file
/// no longer holds the bytes before `cp` (rewritten: nothing to rebuild from). Returns the
/// number of lines replayed. Reads in bounded chunks; at most [`MAX_REPLAY_BYTES`] (the last
/// part of a longer range, from its first line start).
fn replay_range<H: LineHandler>(path: &Path, cp: &Checkpoint, from: u64, handler: &mut H) -> usize {
    let Some(mut file) = super::source::open_checkpoint_file(path, cp) else {
        return 0;
    };
    let to = cp.offset;
    if from >= to {
        return 0;
    }
    handler.file(path);
    let mut from = from;
    let mut skip_first = false;
    if to - from > MAX_REPLAY_BYTES {
        from = to - MAX_REPLAY_BYTES;
        skip_first = true;
    }
    if file.seek(SeekFrom::Start(from)).is_err() {
        return 0;
    }
    let mut left = to - from;
    let mut buf = vec![0u8; 256 * 1024];
    let mut partial: Vec<u8> = Vec::new();
    let mut too_long = false;
    let mut n = 0;
    while left > 0 {
        let want = usize::try_from(left).unwrap_or(buf.len()).min(buf.len());
        let Some(dst) = buf.get_mut(..want) else {
            break;
        };
        let got = match file.read(dst) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        left -= got as u64;
        let mut chunk = buf.get(..got).unwrap_or(&[]);
        while let Some(i) = memchr::memchr(b'\n', chunk) {
            let piece = chunk.get(..i).unwrap_or(&[]);
            chunk = chunk.get(i + 1..).unwrap_or(&[]);
            too_long |= partial.len() + piece.len() > MAX_LINE_BYTES;
            if !(too_long || skip_first || partial.is_empty() && piece.is_empty()) {
                let line: &[u8] = if partial.is_empty() {
                    piece
                } else {
                    partial.extend_from_slice(piece);
                    &partial
                };
                handler.replay(&String::from_utf8_lossy(line));
                n += 1;
            }
            skip_first = false;
            too_long = false;
            partial.clear();
        }
        if too_long || partial.len() + chunk.len() > MAX_LINE_BYTES {
            too_long = true;
            partial.clear();
        } else {
            partial.extend_from_slice(chunk);
        }
    }
    n
}
