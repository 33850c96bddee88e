//! Incident snapshots: an ordered writer keeps `incident_snapshots` in step with memory, and
//! the daemon restores them at start, so incidents survive a restart.
//!
//! ```text
//! observe / contain --mark--> waiting --(writer takes all)--> active --store commit--> done
//! repeat, evict ----mark----> deferred --(joins the next batch, or the flush at shutdown)--^
//! ```
//!
//! Rows (spec "Protection queue health rows"):
//!
//! | Row | depth_unit | Measures |
//! |---|---|---|
//! | `incident.persist.waiting` | `records` | Incident keys whose stored snapshot is out of date, waiting for the writer (capacity [`MAX_INCIDENTS`], `consumer_progress`). |
//! | `incident.persist.active` | `operations` | The writer while it commits a batch (capacity 1, `operation_progress`): a commit stuck past the one-minute phase budget is `processing_lag`. |
//! | `incident.persist.deferred` | `records` | Coalesced bookkeeping: repeats that only advance an incident's count and last activity, and removals of evicted incidents; written with the next batch (the next change of any incident) or the flush at shutdown (capacity [`MAX_DEFERRED`], `deferred_checkpoint`: age never degrades). |
//!
//! Guarantees:
//! - Ordered: one writer thread; each batch writes the state of its keys as they are in
//!   memory when the batch is taken, so a later state of a key is never overwritten by an
//!   earlier one.
//! - Coalesced: a key marked again while it waits stays one record and keeps its first
//!   admission instant (its waiting age is retained).
//! - Nothing is lost silently: a failed commit keeps every record of the batch (with its
//!   admission instant) for the next attempt and reports `state_io` (or
//!   `persistence_uncertain` when the outcome is unknown) until a commit succeeds; pauses
//!   between attempts grow from 1 s to 30 s. Deferred records over [`MAX_DEFERRED`] drop the
//!   oldest, counted as a loss.
//! - A change of what an incident is (a new incident, severity, checks, accounts,
//!   containment) is written promptly; a crash can lose only deferred bookkeeping (counts
//!   and last activity of repeats since the last batch). A clean stop flushes everything.
//! - Marking runs under the incidents lock and never waits for the store.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};
use jiff::Timestamp;

use super::names::{Names, Set};
use super::{IncKey, Incident, Incidents, KeyKind, MAX_INCIDENTS};
use crate::findings::Severity;
use crate::queue::{
    Admitted, LagBasis, QueueHealth, Registry, RowConfig, RowHandle, RunningGuard, Uncertain,
};
use crate::store::incidents::{IncidentRow, SnapshotOp};
use crate::store::{Store, StoreError};

/// Row names.
pub const ROW_WAITING: &str = "incident.persist.waiting";
pub const ROW_ACTIVE: &str = "incident.persist.active";
pub const ROW_DEFERRED: &str = "incident.persist.deferred";
/// Deferred bookkeeping records kept at most.
pub const MAX_DEFERRED: usize = 10_000;
/// Longest pause between attempts after failed commits.
const MAX_PAUSE: Duration = Duration::from_secs(30);

/// Why persistence could not start.
#[derive(Debug)]
pub enum PersistError {
    /// A row name is taken (a second persistent instance).
    Row(crate::queue::RowError),
    /// The writer thread could not start.
    Thread(std::io::Error),
}

impl std::fmt::Display for PersistError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PersistError::Row(e) => write!(f, "incident persistence row: {e}"),
            PersistError::Thread(e) => write!(f, "incident writer thread: {e}"),
        }
    }
}

impl std::error::Error for PersistError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PersistError::Row(e) => Some(e),
            PersistError::Thread(e) => Some(e),
        }
    }
}

/// Snapshot records written per store transaction at most. A burst from thousands of
/// addresses is written in several rounds, so the rows of one round (and the statement
/// journal of its transaction) stay small instead of growing with the burst.
pub const MAX_BATCH: usize = 1_024;

/// Records of one kind, each key once, ordered by admission instant (oldest first).
#[derive(Default)]
struct Ordered {
    seq: u64,
    by_age: BTreeMap<(Admitted, u64), IncKey>,
    at: HashMap<IncKey, (Admitted, u64)>,
}

impl Ordered {
    fn len(&self) -> usize {
        self.at.len()
    }

    fn contains(&self, key: &IncKey) -> bool {
        self.at.contains_key(key)
    }

    fn oldest(&self) -> Option<Admitted> {
        self.by_age.first_key_value().map(|((a, _), _)| *a)
    }

    /// Inserts `key`, or keeps one record with the older admission instant.
    fn insert(&mut self, key: &IncKey, stamp: Admitted) {
        if let Some(at) = self.at.get_mut(key) {
            let (old, seq) = *at;
            if stamp < old {
                *at = (stamp, seq);
                if let Some(k) = self.by_age.remove(&(old, seq)) {
                    self.by_age.insert((stamp, seq), k);
                }
            }
            return;
        }
        self.seq += 1;
        self.by_age.insert((stamp, self.seq), key.clone());
        self.at.insert(key.clone(), (stamp, self.seq));
    }

    fn remove(&mut self, key: &IncKey) -> Option<Admitted> {
        let (stamp, seq) = self.at.remove(key)?;
        self.by_age.remove(&(stamp, seq));
        Some(stamp)
    }

    fn pop_oldest(&mut self) -> Option<IncKey> {
        let (_, key) = self.by_age.pop_first()?;
        self.at.remove(&key);
        Some(key)
    }

    /// Takes the `max` oldest records.
    fn take(&mut self, max: usize) -> Vec<(IncKey, Admitted)> {
        let mut out = Vec::with_capacity(self.len().min(max));
        while out.len() < max {
            let Some(((a, _), k)) = self.by_age.pop_first() else {
                break;
            };
            self.at.remove(&k);
            out.push((k, a));
        }
        out
    }
}

/// Keys whose stored snapshot is out of date, each once.
#[derive(Default)]
pub(super) struct Pending {
    waiting: Ordered,
    deferred: Ordered,
}

/// Records a batch took, to put back when its commit fails.
#[derive(Default)]
pub(super) struct Taken {
    waiting: Vec<(IncKey, Admitted)>,
    deferred: Vec<(IncKey, Admitted)>,
}

impl Pending {
    /// The snapshot of `key` must be written: one waiting record (coalesced, keeping the
    /// older admission instant). A deferred record of the key joins it.
    pub(super) fn mark_waiting(&mut self, key: &IncKey, stamp: Admitted) {
        let stamp = match self.deferred.remove(key) {
            Some(s) => s.older(stamp),
            None => stamp,
        };
        self.waiting.insert(key, stamp);
    }

    /// Deferred bookkeeping for `key`: a repeat that only counts, or (`demote`) its removal
    /// after an eviction, which also takes over a waiting record of the key. A key that is
    /// waiting otherwise stays waiting. Returns true when the deferred set overflowed and
    /// dropped its oldest record.
    pub(super) fn mark_deferred(&mut self, key: &IncKey, stamp: Admitted, demote: bool) -> bool {
        let stamp = if self.waiting.contains(key) {
            if !demote {
                return false;
            }
            self.waiting.remove(key).map_or(stamp, |s| s.older(stamp))
        } else {
            stamp
        };
        self.deferred.insert(key, stamp);
        if self.deferred.len() > MAX_DEFERRED {
            self.deferred.pop_oldest();
            return true;
        }
        false
    }

    /// Takes at most `max` records, the waiting ones first (oldest first), then, with
    /// `with_deferred`, deferred ones in the room left.
    fn take(&mut self, with_deferred: bool, max: usize) -> Taken {
        let waiting = self.waiting.take(max);
        let room = max - waiting.len();
        Taken {
            waiting,
            deferred: if with_deferred {
                self.deferred.take(room)
            } else {
                Vec::new()
            },
        }
    }

    /// Puts back what a failed batch took (records marked meanwhile keep their place and
    /// the older admission instant).
    fn put_back(&mut self, t: Taken) {
        for (k, s) in t.waiting {
            self.mark_waiting(&k, s);
        }
        for (k, s) in t.deferred {
            self.mark_deferred(&k, s, false);
        }
    }

    pub(super) fn waiting_len(&self) -> usize {
        self.waiting.len()
    }

    pub(super) fn deferred_len(&self) -> usize {
        self.deferred.len()
    }
}

/// The writer's rows, store and thread.
pub(super) struct Persist {
    store: Store,
    waiting: Arc<QueueHealth>,
    active: Arc<QueueHealth>,
    deferred: Arc<QueueHealth>,
    _rows: Vec<RowHandle>,
    wake_tx: Sender<()>,
    wake_rx: Receiver<()>,
    stop: std::sync::atomic::AtomicBool,
    thread: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
    logs: crate::lograte::LogLimiter,
}

impl Persist {
    pub(super) fn new(
        clock: crate::clock::SharedClock,
        store: Store,
        registry: &Arc<Registry>,
    ) -> Result<Persist, PersistError> {
        let waiting = QueueHealth::new(
            clock.clone(),
            RowConfig::new("records").capacity(MAX_INCIDENTS as u64),
        );
        let active = QueueHealth::new(
            clock.clone(),
            RowConfig::new("operations")
                .capacity(1)
                .lag_basis(LagBasis::OperationProgress)
                .running_slots(1),
        );
        let logs = crate::lograte::LogLimiter::new(clock.clone(), Duration::from_secs(60), 4);
        let deferred = QueueHealth::new(
            clock,
            RowConfig::new("records")
                .capacity(MAX_DEFERRED as u64)
                .lag_basis(LagBasis::DeferredCheckpoint),
        );
        let mut rows = Vec::new();
        for (name, h) in [
            (ROW_WAITING, &waiting),
            (ROW_ACTIVE, &active),
            (ROW_DEFERRED, &deferred),
        ] {
            rows.push(
                registry
                    .register(name, h.clone())
                    .map_err(crate::queue::RowError::at(name))
                    .map_err(PersistError::Row)?,
            );
        }
        let (wake_tx, wake_rx) = bounded(1);
        Ok(Persist {
            store,
            waiting,
            active,
            deferred,
            _rows: rows,
            wake_tx,
            wake_rx,
            stop: std::sync::atomic::AtomicBool::new(false),
            thread: parking_lot::Mutex::new(None),
            logs,
        })
    }

    pub(super) fn stamp(&self) -> Admitted {
        self.waiting.stamp()
    }

    /// Mirrors the pending sets into the rows (atomics only).
    pub(super) fn publish(&self, p: &Pending) {
        self.waiting.set_waiting(p.waiting.len() as u64);
        self.waiting.set_oldest_waiting(p.waiting.oldest());
        self.deferred.set_waiting(p.deferred.len() as u64);
        self.deferred.set_oldest_waiting(p.deferred.oldest());
    }

    pub(super) fn record_deferred_overflow(&self) {
        self.deferred.record_loss();
    }

    pub(super) fn wake(&self) {
        let _ = self.wake_tx.try_send(());
    }
}

/// One batch taken by the writer: what it writes and what it took.
pub struct Batch<'a> {
    ops: Vec<SnapshotOp>,
    next_id: u64,
    taken: Taken,
    running: RunningGuard<'a>,
}

impl Batch<'_> {
    /// Records in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// What one write round did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Nothing was due.
    Idle,
    /// This many records were committed.
    Written(usize),
    /// The commit failed; the records are kept for the next attempt.
    Failed,
}

fn kind_str(k: KeyKind) -> &'static str {
    match k {
        KeyKind::Ip => "ip",
        KeyKind::Account => "account",
        KeyKind::Host => "host",
    }
}

fn kind_of(s: &str) -> Option<KeyKind> {
    match s {
        "ip" => Some(KeyKind::Ip),
        "account" => Some(KeyKind::Account),
        "host" => Some(KeyKind::Host),
        _ => None,
    }
}

fn to_row(key: &IncKey, i: &Incident) -> IncidentRow {
    IncidentRow {
        kind: kind_str(key.kind()).to_string(),
        key: key.to_string(),
        id: i.id,
        severity: i.severity.level(),
        first_seen: i.first_seen.as_microsecond(),
        last_seen: i.last_seen.as_microsecond(),
        count: i.count,
        checks: i.names.to_vec(Set::Checks),
        accounts: i.names.to_vec(Set::Accounts),
        contained: i.contained,
    }
}

/// Why a stored snapshot row cannot be read back.
#[derive(Debug)]
enum RowProblem {
    UnknownKind,
    NotAnAddress,
    BadSeverity,
    Time(jiff::Error),
}

/// An unreadable snapshot row: `ip "x": not an address`.
#[derive(Debug)]
struct RowError {
    kind: String,
    key: String,
    problem: RowProblem,
}

impl std::fmt::Display for RowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?}: ", self.kind, self.key)?;
        match &self.problem {
            RowProblem::UnknownKind => f.write_str("unknown kind"),
            RowProblem::NotAnAddress => f.write_str("not an address"),
            RowProblem::BadSeverity => f.write_str("bad severity"),
            RowProblem::Time(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RowError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.problem {
            RowProblem::Time(e) => Some(e),
            _ => None,
        }
    }
}

fn from_row(r: IncidentRow) -> Result<(IncKey, Incident), RowError> {
    let fail = |problem| RowError {
        kind: r.kind.clone(),
        key: r.key.clone(),
        problem,
    };
    let kind = kind_of(&r.kind).ok_or_else(|| fail(RowProblem::UnknownKind))?;
    let key = match kind {
        KeyKind::Ip => IncKey::Ip(r.key.parse().map_err(|_| fail(RowProblem::NotAnAddress))?),
        KeyKind::Account => IncKey::Account(r.key.as_str().into()),
        KeyKind::Host => IncKey::Host(r.key.as_str().into()),
    };
    let ts = |m: i64| Timestamp::from_microsecond(m).map_err(|e| fail(RowProblem::Time(e)));
    let inc = Incident {
        id: r.id,
        severity: Severity::from_level(r.severity).ok_or_else(|| fail(RowProblem::BadSeverity))?,
        first_seen: ts(r.first_seen)?,
        last_seen: ts(r.last_seen)?,
        count: r.count,
        names: Names::from_lists(r.checks, r.accounts),
        contained: r.contained,
    };
    Ok((key, inc))
}

/// Pause after `failures` failed commits in a row: 1, 2, 4, ... 30 s.
fn pause(failures: u32) -> Duration {
    let shift = failures.saturating_sub(1).min(5);
    Duration::from_secs(1u64 << shift).min(MAX_PAUSE)
}

impl Incidents {
    /// Restores stored incidents into memory (start-up, before any finding is observed).
    /// Unreadable rows are logged and removed; over [`MAX_INCIDENTS`] the newest activity
    /// is kept. Returns how many incidents were restored.
    pub(super) fn restore(&self) -> usize {
        let Some(p) = &self.persist else { return 0 };
        let (rows, stored_next) = match p.store.read(crate::store::incidents::load) {
            Ok(v) => v,
            Err(e) => {
                log::error!("incidents: cannot read stored snapshots: {e}");
                p.waiting.state_io_error();
                return 0;
            }
        };
        // Rows to remove: unreadable ones, and ones whose address is not written the way
        // svc writes it (the incident is written again under its address's usual text).
        let mut bad = Vec::new();
        let mut list = Vec::new();
        let mut rewrite = HashSet::new();
        for r in rows {
            let parsed = match r {
                Ok(row) => {
                    let stored = (row.kind.clone(), row.key.clone());
                    match from_row(row) {
                        Ok((key, inc)) => {
                            if matches!(key, IncKey::Ip(_)) && key.to_string() != stored.1 {
                                log::info!(
                                    "incidents: stored snapshot {} {:?} rewritten as {key}",
                                    stored.0,
                                    stored.1
                                );
                                bad.push(stored);
                                rewrite.insert(key.clone());
                            }
                            Ok((key, inc))
                        }
                        Err(e) => Err((e.to_string(), stored)),
                    }
                }
                Err(b) => Err((b.to_string(), (b.kind, b.key))),
            };
            match parsed {
                Ok(i) => list.push(i),
                Err((e, key)) => {
                    log::warn!("incidents: stored snapshot unreadable, removed: {e}");
                    bad.push(key);
                }
            }
        }
        if !bad.is_empty() {
            let r = p.store.write(move |c| {
                for (kind, key) in &bad {
                    crate::store::incidents::delete_snapshot(c, kind, key)?;
                }
                Ok(())
            });
            if let Err(e) = r {
                log::warn!("incidents: cannot remove unreadable snapshots: {e}");
            }
        }
        list.sort_by(|(_, a), (_, b)| b.last_seen.cmp(&a.last_seen).then(b.id.cmp(&a.id)));
        let stamp = p.stamp();
        let mut g = self.inner.lock();
        let max_id = list.iter().map(|(_, i)| i.id).max().unwrap_or(0);
        g.next_id = g.next_id.max(stored_next).max(max_id);
        let mut n = 0;
        for (key, inc) in list {
            if g.by_key.contains_key(&key) {
                // Two rows of one address (one in another text): the newest activity wins.
                continue;
            }
            if n >= MAX_INCIDENTS {
                g.pending.mark_deferred(&key, stamp, true);
                continue;
            }
            if rewrite.contains(&key) {
                g.pending.mark_waiting(&key, stamp);
            }
            g.by_key.insert(key, inc);
            n += 1;
        }
        p.publish(&g.pending);
        n
    }

    /// Takes up to [`MAX_BATCH`] waiting records (and deferred ones in the room left when
    /// any is waiting, or when `flush`), snapshotting their state under the lock. `None`
    /// when nothing is due.
    pub fn take_batch(&self, flush: bool) -> Option<Batch<'_>> {
        let p = self.persist.as_ref()?;
        let mut g = self.inner.lock();
        let due = g.pending.waiting_len() > 0 || (flush && g.pending.deferred_len() > 0);
        if !due {
            return None;
        }
        let taken = g.pending.take(true, MAX_BATCH);
        let ops = taken
            .waiting
            .iter()
            .chain(taken.deferred.iter())
            .map(|(k, _)| match g.by_key.get(k) {
                Some(i) => SnapshotOp::Upsert(to_row(k, i)),
                None => SnapshotOp::Delete {
                    kind: kind_str(k.kind()).to_string(),
                    key: k.to_string(),
                },
            })
            .collect();
        let next_id = g.next_id;
        p.publish(&g.pending);
        drop(g);
        Some(Batch {
            ops,
            next_id,
            taken,
            running: p.active.start_running(),
        })
    }

    /// Commits a batch. On failure its records go back to waiting (or deferred) with their
    /// admission instants.
    pub fn commit_batch(&self, b: Batch<'_>) -> WriteOutcome {
        let Some(p) = &self.persist else {
            return WriteOutcome::Idle;
        };
        let Batch {
            ops,
            next_id,
            taken,
            running,
        } = b;
        let n = ops.len();
        let result = p
            .store
            .write(move |c| crate::store::incidents::apply(c, &ops, next_id));
        match result {
            Ok(()) => {
                running.finish();
                p.waiting.note_progress();
                p.waiting.state_io_ok();
                WriteOutcome::Written(n)
            }
            Err(e) => {
                // The records are kept (no loss): the next attempt rewrites them, and a
                // snapshot write is idempotent.
                running.defer();
                match e {
                    StoreError::Timeout => p.waiting.note_uncertain(Uncertain::Persistence),
                    _ => p.waiting.state_io_error(),
                }
                crate::warn_limited!(
                    p.logs,
                    "incident_persist",
                    "",
                    "incidents: {n} snapshot record(s) not written: {e}; kept for the next attempt"
                );
                let mut g = self.inner.lock();
                g.pending.put_back(taken);
                p.publish(&g.pending);
                WriteOutcome::Failed
            }
        }
    }

    /// One write round: take what is due and commit it.
    pub fn write_pending(&self, flush: bool) -> WriteOutcome {
        match self.take_batch(flush) {
            Some(b) => self.commit_batch(b),
            None => WriteOutcome::Idle,
        }
    }

    /// Starts the ordered writer thread (persistent instances only).
    pub fn start_writer(self: &Arc<Self>) -> Result<(), PersistError> {
        let Some(p) = &self.persist else {
            return Ok(());
        };
        let me = Arc::clone(self);
        let t = std::thread::Builder::new()
            .name("incident-writer".into())
            .spawn(move || me.writer_loop())
            .map_err(PersistError::Thread)?;
        *p.thread.lock() = Some(t);
        Ok(())
    }

    fn writer_loop(&self) {
        let Some(p) = &self.persist else { return };
        let mut failures = 0u32;
        let mut more = false;
        let beat = crate::queue::heartbeat::Beat::register("incident-writer", self.clock.clone());
        while !p.stop.load(Ordering::SeqCst) {
            beat.beat();
            if failures == 0 && !more {
                let _ = p.wake_rx.recv_timeout(Duration::from_secs(1));
            } else {
                // Wakes do not shorten the pause after a failure.
                let until = Instant::now() + pause(failures);
                while !p.stop.load(Ordering::SeqCst) {
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    let _ = p.wake_rx.recv_timeout(left);
                }
            }
            if p.stop.load(Ordering::SeqCst) {
                break;
            }
            match self.write_pending(false) {
                WriteOutcome::Failed => failures = failures.saturating_add(1),
                _ => failures = 0,
            }
            // A round that left records waiting (more than one batch was due) is
            // followed by the next at once.
            more = failures == 0 && self.inner.lock().pending.waiting_len() > 0;
        }
    }

    /// Stops the writer after a final flush (deferred bookkeeping included). Call after the
    /// last finding was observed.
    pub fn shutdown(&self) {
        let Some(p) = &self.persist else { return };
        p.stop.store(true, Ordering::SeqCst);
        p.wake();
        if let Some(t) = p.thread.lock().take() {
            let _ = t.join();
        }
        let mut flushed = 0;
        loop {
            match self.write_pending(true) {
                WriteOutcome::Failed => {
                    log::error!(
                        "incidents: final snapshot flush failed; the last changes are lost"
                    );
                    break;
                }
                WriteOutcome::Written(n) => flushed += n,
                WriteOutcome::Idle => break,
            }
        }
        if flushed > 0 {
            log::debug!("incidents: flushed {flushed} snapshot record(s)");
        }
    }
}

#[cfg(test)]
mod tests;
