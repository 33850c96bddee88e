//! Droppers: a PHP file that writes PHP files, confirmed by a new PHP file of the same
//! account within the grace window.
//!
//! The analyzer hands every PHP file it is told about (closed after writing, moved or linked
//! in) to [`Droppers::observe`] with its owner and content:
//! 1. A PHP file of owner U, other than the candidate itself, seen while a candidate of U is
//!    in its grace window ([`GRACE`], 45 s on the injected clock) confirms that candidate:
//!    finding `php_dropper` (HIGH) naming the dropper and the dropped file, the candidate's
//!    held finding is released. A candidate stays in its window after a confirmation, so
//!    each further file it drops is reported too (one finding per dropped file).
//! 2. A file whose content writes PHP files ([`matcher::find_candidate`]) becomes a
//!    candidate: one unit on `fanotify.dropper` (the candidate) and one on
//!    `fanotify.dropper_findings` (its finding, held until confirmed). The same path while
//!    its window runs is not admitted again.
//! 3. [`Droppers::expire`] (called by the analyzer between events) ends windows: the
//!    candidate completes; a finding still held is withdrawn (dropped unconfirmed: counted in
//!    [`DropperCounters::unconfirmed`], not a loss, no demand is left).
//! 4. With 16,384 candidates waiting, the oldest is evicted to admit a new one: a loss on
//!    both rows when its finding is still held, on `fanotify.dropper` otherwise.
//!
//! Both rows have a 45-second lag grace: a unit in its window is not lag.

pub mod matcher;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::findings::{Finding, Severity};
use crate::queue::{QueueHealth, Registry, RowConfig, RowError, RowHandle, Ticket};
use crate::text::escape_path;

pub const CHECK: &str = "php_dropper";
pub const CANDIDATES_ROW: &str = "fanotify.dropper";
pub const FINDINGS_ROW: &str = "fanotify.dropper_findings";
/// Waiting slots of each row.
pub const CAPACITY: usize = 16_384;
/// How long a candidate waits for a dropped file.
pub const GRACE: Duration = Duration::from_secs(45);

/// What the tracker did, cumulative.
#[derive(Debug, Default)]
pub struct DropperCounters {
    pub candidates: AtomicU64,
    pub confirmed: AtomicU64,
    /// Held findings withdrawn at the end of their window without a dropped file.
    pub unconfirmed: AtomicU64,
    /// Candidates evicted by a full table (losses).
    pub evicted: AtomicU64,
}

struct Candidate {
    path: PathBuf,
    uid: u32,
    function: &'static str,
    line: usize,
    /// Monotonic nanoseconds of the injected clock when admitted.
    since: i64,
    ticket: Ticket,
    held: Option<Ticket>,
}

/// The candidates in their grace window, oldest first. Owned by the analyzer thread.
pub struct Droppers {
    clock: SharedClock,
    live: VecDeque<Candidate>,
    /// Paths of `live`, and how many of its candidates each owner has (lookups stay O(1)
    /// for the files that confirm nothing).
    paths: HashSet<PathBuf>,
    per_uid: HashMap<u32, usize>,
    candidates: Arc<QueueHealth>,
    held: Arc<QueueHealth>,
    _rows: [RowHandle; 2],
    pub counters: Arc<DropperCounters>,
}

fn row(clock: &SharedClock, unit: &'static str) -> Arc<QueueHealth> {
    let mut cfg = RowConfig::new(unit).capacity(CAPACITY as u64);
    cfg.lag_grace = GRACE;
    QueueHealth::new(clock.clone(), cfg)
}

impl Droppers {
    /// Registers `fanotify.dropper` and `fanotify.dropper_findings`.
    pub fn start(clock: SharedClock, registry: &Arc<Registry>) -> Result<Droppers, RowError> {
        let candidates = row(&clock, "files");
        let held = row(&clock, "findings");
        let rows = [
            registry
                .register(CANDIDATES_ROW, candidates.clone())
                .map_err(RowError::at(CANDIDATES_ROW))?,
            registry
                .register(FINDINGS_ROW, held.clone())
                .map_err(RowError::at(FINDINGS_ROW))?,
        ];
        Ok(Droppers {
            clock,
            live: VecDeque::new(),
            paths: HashSet::new(),
            per_uid: HashMap::new(),
            candidates,
            held,
            _rows: rows,
            counters: Arc::default(),
        })
    }

    /// Candidates in their window.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// A PHP file `path` of owner `uid` with `content` (its first bytes) was written, moved
    /// or linked in. Returns the findings it confirms.
    pub fn observe(&mut self, path: &Path, uid: u32, content: &[u8]) -> Vec<Finding> {
        self.expire();
        let now = self.clock.monotonic_nanos();
        let at = self.clock.now();
        let mut out = Vec::new();
        let mine = self.per_uid.get(&uid).copied().unwrap_or(0) > 0;
        for c in self.live.iter_mut().filter(|_| mine) {
            if c.uid != uid || c.path == path {
                continue;
            }
            if let Some(t) = c.held.take() {
                t.finish();
            }
            self.counters.confirmed.fetch_add(1, Ordering::Relaxed);
            let secs = now.saturating_sub(c.since) as f64 / 1e9;
            out.push(
                Finding::new(
                    CHECK,
                    Severity::High,
                    format!(
                        "PHP dropper {} wrote {}",
                        escape_path(&c.path),
                        escape_path(path)
                    ),
                    at,
                )
                .with_details(format!(
                    "{}() writing a PHP file at line {}; {} appeared {secs:.1} s later, same owner (uid {uid})",
                    c.function,
                    c.line,
                    escape_path(path)
                ))
                .with_path(c.path.to_string_lossy().into_owned()),
            );
        }
        if !out.is_empty() {
            self.set_oldest();
        }
        if self.paths.contains(path) {
            return out;
        }
        if let Some(m) = matcher::find_candidate(content) {
            self.admit(path, uid, m);
        }
        out
    }

    fn admit(&mut self, path: &Path, uid: u32, m: matcher::Candidate) {
        if self.live.len() >= CAPACITY {
            if let Some(old) = self.pop_front() {
                self.counters.evicted.fetch_add(1, Ordering::Relaxed);
                old.ticket.lose();
                if let Some(t) = old.held {
                    t.lose();
                }
            }
        }
        self.counters.candidates.fetch_add(1, Ordering::Relaxed);
        self.paths.insert(path.to_path_buf());
        *self.per_uid.entry(uid).or_default() += 1;
        self.live.push_back(Candidate {
            path: path.to_path_buf(),
            uid,
            function: m.function,
            line: m.line,
            since: self.clock.monotonic_nanos(),
            ticket: self.candidates.admit(),
            held: Some(self.held.admit()),
        });
        self.set_oldest();
    }

    /// Ends the windows that are over.
    pub fn expire(&mut self) {
        let now = self.clock.monotonic_nanos();
        let grace = GRACE.as_nanos() as i64;
        let mut ended = false;
        while self
            .live
            .front()
            .is_some_and(|c| now.saturating_sub(c.since) >= grace)
        {
            let Some(c) = self.pop_front() else {
                break;
            };
            ended = true;
            c.ticket.finish();
            if let Some(t) = c.held {
                self.counters.unconfirmed.fetch_add(1, Ordering::Relaxed);
                t.withdraw();
            }
        }
        if ended {
            self.set_oldest();
        }
    }

    /// Removes the oldest candidate from `live` and its indexes.
    fn pop_front(&mut self) -> Option<Candidate> {
        let c = self.live.pop_front()?;
        self.paths.remove(&c.path);
        if let Some(n) = self.per_uid.get_mut(&c.uid) {
            *n -= 1;
            if *n == 0 {
                self.per_uid.remove(&c.uid);
            }
        }
        Some(c)
    }

    /// The head's admission instant, for both rows' waiting age.
    fn set_oldest(&self) {
        self.candidates
            .set_oldest_waiting(self.live.front().map(|c| c.ticket.admitted()));
        self.held.set_oldest_waiting(
            self.live
                .iter()
                .find_map(|c| c.held.as_ref().map(Ticket::admitted)),
        );
    }
}

#[cfg(test)]
mod tests;
