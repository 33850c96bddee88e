//! The ingest dispatcher: collectors submit findings into `findings.ingest`; one dispatcher
//! thread applies each batch to its active set, commits the batch to the store (history,
//! active rows, source checkpoints) in one transaction, then publishes a new snapshot of the
//! active set and notifies listeners.
//!
//! Guarantees:
//! - What the API and listeners show has been committed to the store or parked in
//!   `state.pending` first, so it survives a SIGKILL: the dispatcher changes its own copy of
//!   the active set, but a snapshot of it is published only after the batch's commit.
//! - When the store refuses a batch, its findings are parked (newest 10,000, file written
//!   atomically) and replayed at the next start; failures to write the file raise `state_io`.
//!   The batch's source checkpoints are parked with them (the newest per source, until a
//!   later batch commits a newer one) and committed when the next engine is built, before
//!   any collector loads its position: lines behind parked findings are not read again.
//! - The startup hold: `findings.ingest` holds (ages pause, losses count) until parked
//!   findings from the previous run are replayed.
//! - Readers never hold a lock the dispatcher needs for longer than copying an `Arc`: the
//!   published [`Snapshot`] is swapped in under a lock held for the swap, and readers copy
//!   the pointer and walk the snapshot without any lock (see [`super::active`]).
//! - The active set is bounded (`findings.max_active`, [`DEFAULT_MAX_ACTIVE`]): beyond it the
//!   least recently dispatched event findings leave it first (they stay in history), each
//!   counted as a loss on `findings.ingest` ([`super::active::ActiveSet::evict_over`]).
//! - Suppressed findings (see [`super::suppress`]) are written to history but never merged
//!   into the active set nor passed to listeners. Which findings of a batch are suppressed is
//!   decided once per batch from the rules in force, through an index (no scan of the rules).
//!   A new rule's effect on the active set ([`Engine::apply_suppressions`]) is found by the
//!   caller on a snapshot, after a barrier that guarantees every later batch sees the rule;
//!   the dispatcher then only removes the keys it is handed that a rule still matches.
//! - The dispatcher (and the store's writer) run at a raised priority ([`crate::sys::priority::INGEST_NICE`]) where
//!   the daemon may raise it, so API work that keeps the CPU busy does not starve ingest.
//! - Batches hold at most [`BATCH`] items. Under light load a batch is whatever arrived during
//!   the previous commit, so listeners get small bursts; under heavy load larger batches
//!   amortise the transaction. While one batch commits, the dispatcher prepares the next and
//!   queues its commit behind it (commits keep their order); the snapshot after each batch is
//!   published, and its listeners called, only once that batch's own commit is done.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, Sender};
use parking_lot::{Condvar, Mutex, RwLock};

use super::active::{ActiveSet, Removed, Snapshot};
use super::pending::{ParkedCheckpoint, PendingFile, MAX_PARKED};
use super::suppress::{self as suppress, Matcher, Suppressions};
use super::Finding;
use crate::clock::SharedClock;
use crate::queue::{
    BoundedQueue, LagBasis, PopError, QueueHealth, Registry, RowConfig, RowError, RowHandle,
    RunningGuard,
};
use crate::store::suppressions::Suppression;
use crate::store::{self, Store, StoreError};

/// Capacity of `findings.ingest`.
pub const INGEST_CAPACITY: usize = 16_384;
/// Items dispatched (and committed in one store transaction) at most per batch.
pub const BATCH: usize = 512;
/// Event findings (not from scheduled checks) leave the active set after this much quiet.
pub const EVENT_FINDING_TTL: Duration = Duration::from_secs(24 * 3600);
/// Default of `findings.max_active`.
pub const DEFAULT_MAX_ACTIVE: usize = 50_000;
/// How long a caller of [`Engine::apply_suppressions`] waits for the dispatcher.
const CONTROL_WAIT: Duration = Duration::from_secs(30);

/// What collectors submit. Every variant is one box, so the 16,384 preallocated slots of
/// `findings.ingest` take 16 bytes each (idle memory).
#[derive(Debug, Clone)]
pub enum Ingest {
    Finding(Box<Finding>),
    /// A scheduled check finished: its active findings whose message is not listed are
    /// resolved (removed from the active set).
    CheckCompleted(Box<CompletedCheck>),
    /// A log source position: every line before it is represented by the items submitted
    /// before this one. Committed with them, so a restart resumes here.
    Checkpoint(Box<SourcePosition>),
}

/// See [`Ingest::CheckCompleted`].
#[derive(Debug, Clone)]
pub struct CompletedCheck {
    pub check: String,
    /// Messages of the findings the check still reports.
    pub messages: Vec<String>,
}

/// See [`Ingest::Checkpoint`].
#[derive(Debug, Clone)]
pub struct SourcePosition {
    pub source: String,
    pub inode: u64,
    pub offset: u64,
}

impl Ingest {
    /// [`Ingest::CheckCompleted`].
    pub fn check_completed(check: impl Into<String>, messages: Vec<String>) -> Ingest {
        Ingest::CheckCompleted(Box::new(CompletedCheck {
            check: check.into(),
            messages,
        }))
    }

    /// [`Ingest::Checkpoint`].
    pub fn checkpoint(source: impl Into<String>, inode: u64, offset: u64) -> Ingest {
        Ingest::Checkpoint(Box::new(SourcePosition {
            source: source.into(),
            inode,
            offset,
        }))
    }
}

/// Requests the dispatcher serves between batches, ahead of waiting findings.
enum Control {
    /// Answers with the published snapshot once every batch the dispatcher had begun is
    /// committed and published (every later batch reads the suppression rules afresh).
    Barrier(Sender<Arc<Snapshot>>),
    /// Removes the given keys that a suppression in force still matches (store first).
    Remove {
        keys: Vec<(String, String)>,
        reply: Sender<Result<usize, StoreError>>,
    },
    /// Resolves the given keys (a fix removed the cause, a dismissal, a re-check that no
    /// longer sees it), store first.
    Resolve {
        keys: Vec<(String, String)>,
        reply: Sender<Result<usize, StoreError>>,
    },
    /// Removes what these rules match, each naming a message: one lookup per rule in the
    /// dispatcher's own set (no scan), store first.
    Apply {
        rules: Vec<Suppression>,
        reply: Sender<Result<usize, StoreError>>,
    },
}

/// What the ingest queue carries.
enum Item {
    Ingest(Ingest),
    /// Wakes an idle dispatcher: a control waits on its own channel.
    Wake,
}

/// Why [`Engine::apply_suppressions`] could not finish.
#[derive(Debug)]
pub enum ApplyError {
    /// The store refused or failed the removal.
    Store(StoreError),
    /// The dispatcher's queue stayed full.
    Busy,
    /// The dispatcher did not answer in time.
    Timeout,
    /// The engine is stopping.
    Stopped,
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApplyError::Store(e) => write!(f, "{e}"),
            ApplyError::Busy => f.write_str("the findings dispatcher's queue is full"),
            ApplyError::Timeout => f.write_str("the findings dispatcher did not answer in time"),
            ApplyError::Stopped => f.write_str("the findings dispatcher is stopping"),
        }
    }
}

impl std::error::Error for ApplyError {}

impl From<StoreError> for ApplyError {
    fn from(e: StoreError) -> Self {
        ApplyError::Store(e)
    }
}

/// Counts over one version of the active set.
#[derive(Debug)]
pub struct ActiveSummary {
    pub version: u64,
    /// (critical, high, warning).
    pub counts: (u64, u64, u64),
    /// Active findings without an account, per check.
    pub unattributed: BTreeMap<String, u64>,
}

/// How long a [`Listing`] may be served at most after the active set changed.
pub const LISTING_MAX_AGE: Duration = Duration::from_secs(1);

/// The active set of one snapshot in listing order (severity, then newest), shared by the
/// paged routes: sorting 100,000 findings per request would let API readers eat the CPU
/// the dispatcher needs. While findings arrive, a listing is reused for ten times what its
/// sort cost (at most [`LISTING_MAX_AGE`]): small sets are always current, a page of a
/// large one may show the set as it was a fraction of a second ago, never anything
/// uncommitted. (`fields=version`, status and the counts read the live snapshot.)
pub struct Listing {
    snapshot: Arc<Snapshot>,
    items: Vec<Arc<Finding>>,
    /// Monotonic instant (the engine's clock) it was built at.
    built: i64,
    /// Nanoseconds the sort took (real time: a cost, not a time rule).
    cost: i64,
}

impl Listing {
    fn new(snapshot: Arc<Snapshot>, built: i64) -> Listing {
        let t = std::time::Instant::now();
        let mut items: Vec<Arc<Finding>> = snapshot.iter_arc().cloned().collect();
        items.sort_unstable_by(|a, b| super::active::listing_order(a, b));
        Listing {
            snapshot,
            items,
            built,
            cost: i64::try_from(t.elapsed().as_nanos()).unwrap_or(i64::MAX),
        }
    }

    /// The snapshot it lists (its version, counts).
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    pub fn version(&self) -> u64 {
        self.snapshot.version()
    }

    /// Every finding, in order.
    pub fn items(&self) -> &[Arc<Finding>] {
        &self.items
    }

    /// The findings `[offset, offset + limit)`.
    pub fn page(&self, offset: usize, limit: usize) -> &[Arc<Finding>] {
        let start = offset.min(self.items.len());
        let end = offset.saturating_add(limit).min(self.items.len());
        &self.items[start..end]
    }
}

/// Called after each dispatched finding is committed (active-set entry after merge).
pub type Listener = Box<dyn Fn(&Finding) + Send + Sync>;

#[derive(Default)]
pub struct Counters {
    pub dispatched: AtomicU64,
    pub parked: AtomicU64,
    pub replayed: AtomicU64,
    pub batches: AtomicU64,
    /// Findings kept out of the active set by a suppression (still in history).
    pub suppressed: AtomicU64,
    /// Findings that left the active set because it was full (still in history).
    pub evicted: AtomicU64,
}

/// The dispatcher's own state.
struct State {
    active: ActiveSet,
    /// Evictions not yet reported in a log line, and when the last line was written.
    evicted_unlogged: u64,
    last_evict_log: Option<i64>,
    /// Keys of expired findings whose removal from the store was refused (queue full):
    /// submitted again with the next expiry round (bounded by the active set's size).
    expired_unwritten: Vec<Arc<Finding>>,
}

/// Committing one batch failed or succeeded; what to do with its findings on failure.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Park them (a live batch).
    Live,
    /// They are already parked (replay at start): keep the file.
    Replay,
}

/// Row of the parked state's callers and operations (see [`Engine::lock_parked`]).
pub const PENDING_OPS_ROW: &str = "state.pending_operations";

pub struct Engine {
    clock: SharedClock,
    store: Store,
    queue: BoundedQueue<Item>,
    /// Controls, served between batches (see [`Control`]).
    controls: (Sender<Control>, crossbeam_channel::Receiver<Control>),
    _ingest_row: RowHandle,
    pending_row: RowHandle,
    /// `state.pending_operations`: callers of the parked state waiting for its lock, and the
    /// persistence (parking, rewriting the file) or replay operations running on it.
    pending_ops: RowHandle,
    pending_file: PendingFile,
    parked: Mutex<Vec<Finding>>,
    /// Newest refused checkpoint per source, not yet superseded by a committed one.
    parked_checkpoints: Mutex<BTreeMap<String, (u64, u64)>>,
    /// Held by the dispatcher while it works on a batch (and by start-up and shutdown).
    state: Mutex<State>,
    /// What readers see; swapped after each commit.
    published: RwLock<Arc<Snapshot>>,
    listeners: RwLock<Vec<Listener>>,
    summary: Mutex<Option<Arc<ActiveSummary>>>,
    scheduled_checks: RwLock<HashSet<String>>,
    suppressor: RwLock<Option<Arc<Suppressions>>>,
    max_active: AtomicUsize,
    /// The dispatcher thread runs (controls go through the queue).
    running: AtomicBool,
    /// Newest suppression rule id whose matches were removed from the active set.
    applied_rules: AtomicI64,
    /// The latest [`Listing`] and the lock its builders take (API threads only).
    listing: Mutex<Option<Arc<Listing>>>,
    listing_build: Mutex<()>,
    pub counters: Counters,
    /// Items admitted and not yet dispatched (for [`Engine::flush`]).
    in_flight: AtomicU64,
    /// Notified after each finished batch (see [`Engine::wait_done`]).
    done_signal: (Mutex<()>, Condvar),
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Why the engine could not be built or started.
#[derive(Debug)]
pub enum EngineError {
    /// A queue row could not be built or registered.
    Queue(crate::queue::RowError),
    /// The active findings could not be loaded.
    Load(StoreError),
    /// The dispatcher thread could not be started.
    Spawn(std::io::Error),
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::Queue(e) => write!(f, "{e}"),
            EngineError::Load(e) => write!(f, "loading active findings: {e}"),
            EngineError::Spawn(e) => write!(f, "cannot start the dispatcher thread: {e}"),
        }
    }
}

impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EngineError::Queue(e) => Some(e),
            EngineError::Load(e) => Some(e),
            EngineError::Spawn(e) => Some(e),
        }
    }
}

impl Engine {
    /// Builds the engine (ingest held) and loads the active set. Call [`Engine::start`] once
    /// collectors are wired to begin dispatching.
    pub fn new(
        clock: SharedClock,
        store: Store,
        registry: &Arc<Registry>,
        state: &Path,
    ) -> Result<Arc<Engine>, EngineError> {
        let queue = BoundedQueue::new(
            clock.clone(),
            RowConfig::new("findings")
                .capacity(INGEST_CAPACITY as u64)
                .running_slots(1),
        )
        .map_err(RowError::at("findings.ingest"))
        .map_err(EngineError::Queue)?;
        queue.health().hold();
        let ingest_row = registry
            .register("findings.ingest", queue.health().clone())
            .map_err(RowError::at("findings.ingest"))
            .map_err(EngineError::Queue)?;
        let pending_health = QueueHealth::new(
            clock.clone(),
            RowConfig::new("findings")
                .capacity(MAX_PARKED as u64)
                .lag_basis(LagBasis::DeferredCheckpoint),
        );
        let pending_row = registry
            .register("state.pending", pending_health)
            .map_err(RowError::at("state.pending"))
            .map_err(EngineError::Queue)?;
        let pending_ops = registry
            .register(
                PENDING_OPS_ROW,
                QueueHealth::new(
                    clock.clone(),
                    RowConfig::new("operations").lag_basis(LagBasis::OperationProgress),
                ),
            )
            .map_err(RowError::at(PENDING_OPS_ROW))
            .map_err(EngineError::Queue)?;
        let loaded = store
            .read(store::findings::load_active)
            .map_err(EngineError::Load)?;
        let active = ActiveSet::load(loaded);
        let published = Arc::new(active.snapshot());
        let pending_file = PendingFile::new(state);
        let parked_checkpoints = commit_parked_checkpoints(&store, &pending_file, clock.now());
        Ok(Arc::new(Engine {
            clock,
            store,
            queue,
            controls: crossbeam_channel::unbounded(),
            _ingest_row: ingest_row,
            pending_row,
            pending_ops,
            pending_file,
            parked: Mutex::new(Vec::new()),
            parked_checkpoints: Mutex::new(parked_checkpoints),
            state: Mutex::new(State {
                active,
                evicted_unlogged: 0,
                last_evict_log: None,
                expired_unwritten: Vec::new(),
            }),
            published: RwLock::new(published),
            listeners: RwLock::new(Vec::new()),
            summary: Mutex::new(None),
            scheduled_checks: RwLock::new(HashSet::new()),
            suppressor: RwLock::new(None),
            max_active: AtomicUsize::new(DEFAULT_MAX_ACTIVE),
            running: AtomicBool::new(false),
            applied_rules: AtomicI64::new(i64::MIN),
            listing: Mutex::new(None),
            listing_build: Mutex::new(()),
            counters: Counters::default(),
            in_flight: AtomicU64::new(0),
            done_signal: (Mutex::new(()), Condvar::new()),
            thread: Mutex::new(None),
        }))
    }

    /// Sets the bound of the active set (`findings.max_active`). Before [`start`], the loaded
    /// set is trimmed to it at start; later (a reload), the next dispatched batch trims it.
    ///
    /// [`start`]: Engine::start
    pub fn set_max_active(&self, max: usize) {
        self.max_active.store(max.max(1), Ordering::Relaxed);
    }

    /// The bound of the active set.
    pub fn max_active(&self) -> usize {
        self.max_active.load(Ordering::Relaxed)
    }

    /// Classifies the loaded findings, trims the set to its bound, replays parked findings,
    /// releases the startup hold and starts the dispatcher thread.
    pub fn start(self: &Arc<Self>) -> Result<(), EngineError> {
        {
            let mut st = self.state.lock();
            let scheduled = self.scheduled_checks.read().clone();
            st.active.classify(|c| !scheduled.contains(c));
            let over = st.active.evict_over(self.max_active());
            if !over.findings.is_empty() {
                let n = over.findings.len();
                let keys = over.findings;
                if let Err(e) = self
                    .store
                    .write(move |c| store::findings::delete_active_keys(c, key_pairs(&keys)))
                {
                    log::warn!("findings: cannot remove evicted active rows from the store: {e}");
                }
                self.count_evicted(&mut st, n as u64);
            }
            self.replay_parked(&mut st);
            self.publish(&st);
        }
        self.queue.health().release();
        self.running.store(true, Ordering::SeqCst);
        let me = self.clone();
        let t = std::thread::Builder::new()
            .name("findings-dispatch".into())
            .spawn(move || me.run())
            .map_err(EngineError::Spawn)?;
        *self.thread.lock() = Some(t);
        Ok(())
    }

    /// Names checks whose findings are resolved by [`Ingest::CheckCompleted`] rather than
    /// expiring after [`EVENT_FINDING_TTL`] (condition findings; see [`super::active`]).
    pub fn register_scheduled_checks(&self, names: impl IntoIterator<Item = &'static str>) {
        self.scheduled_checks
            .write()
            .extend(names.into_iter().map(String::from));
    }

    /// Installs the suppression rules consulted for every dispatched finding, and removes
    /// the active findings they already match.
    pub fn set_suppressor(&self, s: Arc<Suppressions>) -> Result<usize, ApplyError> {
        *self.suppressor.write() = Some(s);
        self.apply_suppressions()
    }

    pub fn suppressor(&self) -> Option<Arc<Suppressions>> {
        self.suppressor.read().clone()
    }

    /// Removes the active findings a suppression in force matches: from the store first,
    /// then from the active set. Returns how many were removed.
    ///
    /// Call it after a rule was added. The caller waits for the dispatcher twice, holding no
    /// lock: a barrier (every batch the dispatcher had begun is committed and published;
    /// every later batch reads the new rules), then the removal of the keys it found on the
    /// snapshot the barrier answered. The dispatcher serves both between batches, ahead of
    /// waiting findings, and removes only keys a rule in force still matches.
    pub fn apply_suppressions(&self) -> Result<usize, ApplyError> {
        let Some(s) = self.suppressor() else {
            return Ok(0);
        };
        // Rules applied before stay applied (dispatches are filtered as they arrive); only
        // rules created since are looked for.
        let after = self.applied_rules.load(Ordering::SeqCst);
        let rules: Vec<Suppression> = s.rules().iter().filter(|r| r.id > after).cloned().collect();
        let Some(newest) = rules.iter().map(|r| r.id).max() else {
            return Ok(0);
        };
        let now = s.now();
        let n = if !self.running.load(Ordering::SeqCst) {
            // Before start (or after shutdown) nobody else touches the state.
            let mut st = self.state.lock();
            let keys = matched_keys(&st.active.snapshot(), &rules, now);
            let n = self.remove_keys(&mut st, keys)?;
            self.publish(&st);
            n
        } else if rules.iter().all(|r| r.message.is_some()) {
            // The usual rule ("this finding"): one round trip, looked up by key.
            let (tx, rx) = bounded(1);
            self.control(Control::Apply { rules, reply: tx })?;
            match rx.recv_timeout(CONTROL_WAIT) {
                Ok(r) => r?,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    return Err(ApplyError::Timeout)
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    return Err(ApplyError::Stopped)
                }
            }
        } else {
            let (tx, rx) = bounded(1);
            self.control(Control::Barrier(tx))?;
            let snap = rx.recv_timeout(CONTROL_WAIT).map_err(|e| match e {
                crossbeam_channel::RecvTimeoutError::Timeout => ApplyError::Timeout,
                crossbeam_channel::RecvTimeoutError::Disconnected => ApplyError::Stopped,
            })?;
            let keys = matched_keys(&snap, &rules, now);
            drop(snap);
            if keys.is_empty() {
                0
            } else {
                let (tx, rx) = bounded(1);
                self.control(Control::Remove { keys, reply: tx })?;
                match rx.recv_timeout(CONTROL_WAIT) {
                    Ok(r) => r?,
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                        return Err(ApplyError::Timeout)
                    }
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                        return Err(ApplyError::Stopped)
                    }
                }
            }
        };
        self.applied_rules.fetch_max(newest, Ordering::SeqCst);
        Ok(n)
    }

    /// Resolves the active findings keyed `keys` (check, message): they leave the active
    /// set and the store, as a completed check's absent findings do. Returns how many were
    /// active. A finding detected again later is a new occurrence.
    pub fn resolve(&self, keys: Vec<(String, String)>) -> Result<usize, ApplyError> {
        if keys.is_empty() {
            return Ok(0);
        }
        if !self.running.load(Ordering::SeqCst) {
            let mut st = self.state.lock();
            let n = self.remove_keys(&mut st, keys)?;
            self.publish(&st);
            return Ok(n);
        }
        let (tx, rx) = bounded(1);
        self.control(Control::Resolve { keys, reply: tx })?;
        match rx.recv_timeout(CONTROL_WAIT) {
            Ok(r) => Ok(r?),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => Err(ApplyError::Timeout),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(ApplyError::Stopped),
        }
    }

    fn control(&self, c: Control) -> Result<(), ApplyError> {
        if self.queue.is_closed() {
            return Err(ApplyError::Stopped);
        }
        self.controls.0.send(c).map_err(|_| ApplyError::Stopped)?;
        // Wake the dispatcher if it waits for findings; when the queue is full it is busy and
        // looks at the controls after its current batch anyway (the wake is not a finding:
        // withdrawn, never a loss).
        if let Err(r) = self.queue.try_push(Item::Wake) {
            r.withdraw();
        }
        Ok(())
    }

    pub fn subscribe(&self, l: Listener) {
        self.listeners.write().push(l);
    }

    /// Submits a finding; false when refused (the loss is counted on `findings.ingest`).
    pub fn submit(&self, f: Finding) -> bool {
        self.submit_item(Ingest::Finding(Box::new(f)))
    }

    pub fn submit_item(&self, item: Ingest) -> bool {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let ok = self.queue.try_push(Item::Ingest(item)).is_ok();
        if !ok {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
        ok
    }

    /// Waits up to `timeout` for `item` to be admitted (used by scan jobs, which must not
    /// lose a completion marker to a momentarily full queue).
    pub fn submit_wait(&self, item: Ingest, timeout: Duration) -> bool {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let ok = self.queue.push_timeout(Item::Ingest(item), timeout).is_ok();
        if !ok {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
        ok
    }

    /// Findings the engine has finished with: dispatched into the active set, or kept out
    /// by a suppression (after their batch's commit).
    pub fn done(&self) -> u64 {
        self.counters.dispatched.load(Ordering::Acquire)
            + self.counters.suppressed.load(Ordering::Acquire)
    }

    /// Waits until [`Engine::done`] reaches `target` or `deadline` passes; true when it
    /// did. Woken by each finished batch (no polling), so a collector pacing itself
    /// against the dispatcher goes on as soon as there is room.
    pub fn wait_done(&self, target: u64, deadline: std::time::Instant) -> bool {
        let mut guard = self.done_signal.0.lock();
        loop {
            if self.done() >= target {
                return true;
            }
            if self
                .done_signal
                .1
                .wait_until(&mut guard, deadline)
                .timed_out()
            {
                return self.done() >= target;
            }
        }
    }

    /// Waits until everything submitted before this call is dispatched (or `timeout`).
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if self.in_flight.load(Ordering::SeqCst) == 0 {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// The published snapshot of the active set (copies an `Arc` under a lock held for the
    /// copy only).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.published.read().clone()
    }

    /// The active set in listing order, for the paged routes (see [`Listing`]). Never
    /// touches a lock the dispatcher takes; at most one caller sorts at a time, the others
    /// are served the previous listing meanwhile.
    pub fn listing(&self) -> Arc<Listing> {
        let max_age = i64::try_from(LISTING_MAX_AGE.as_nanos()).unwrap_or(i64::MAX);
        let fresh = |l: &Listing, current: u64| {
            // Sorting may take a tenth of the time at most: a listing that cost `c` to
            // build is reused for up to 10 c (and never beyond LISTING_MAX_AGE), so small
            // sets are always current and large ones are re-sorted a few times a second.
            let window = max_age.min(l.cost.saturating_mul(10));
            l.version() == current || self.clock.monotonic_nanos().saturating_sub(l.built) < window
        };
        let current = self.snapshot().version();
        let cached = self.listing.lock().clone();
        if let Some(l) = cached.as_ref().filter(|l| fresh(l, current)) {
            return l.clone();
        }
        // Someone is sorting already: serve the previous listing meanwhile.
        let _build = match (self.listing_build.try_lock(), cached) {
            (Some(g), _) => g,
            (None, Some(l)) => return l,
            (None, None) => self.listing_build.lock(),
        };
        let snap = self.snapshot();
        if let Some(l) = self
            .listing
            .lock()
            .clone()
            .filter(|l| l.version() == snap.version())
        {
            return l;
        }
        let l = Arc::new(Listing::new(snap, self.clock.monotonic_nanos()));
        *self.listing.lock() = Some(l.clone());
        l
    }

    /// The active set, sorted by severity then newest (copies every entry: small sets and
    /// tests only; routes page through [`Engine::listing`]).
    pub fn active(&self) -> Vec<Finding> {
        self.snapshot().sorted()
    }

    pub fn active_version(&self) -> u64 {
        self.snapshot().version()
    }

    pub fn active_len(&self) -> usize {
        self.snapshot().len()
    }

    /// (version, number of findings) of the active set, from one snapshot.
    pub fn version_and_len(&self) -> (u64, usize) {
        let s = self.snapshot();
        (s.version(), s.len())
    }

    /// (critical, high, warning) counts of the active set.
    pub fn severity_counts(&self) -> (u64, u64, u64) {
        self.snapshot().severity_counts()
    }

    /// Counts over the active set, rebuilt only when the set changed since the last call.
    pub fn active_summary(&self) -> Arc<ActiveSummary> {
        let snap = self.snapshot();
        let mut cache = self.summary.lock();
        if let Some(s) = cache.as_ref().filter(|s| s.version == snap.version()) {
            return s.clone();
        }
        let unattributed = snap
            .counts()
            .by_check
            .iter()
            .filter(|(_, c)| c.unattributed > 0)
            .map(|(k, c)| (k.clone(), c.unattributed))
            .collect();
        let s = Arc::new(ActiveSummary {
            version: snap.version(),
            counts: snap.severity_counts(),
            unattributed,
        });
        *cache = Some(s.clone());
        s
    }

    /// Merges into the active set since start.
    pub fn merges(&self) -> u64 {
        self.snapshot().merges()
    }

    /// Runs `f` on the published snapshot of the active set (no lock is held while it runs).
    pub fn with_active<R>(&self, f: impl FnOnce(&Snapshot) -> R) -> R {
        f(&self.snapshot())
    }

    pub fn parked_len(&self) -> usize {
        self.parked.lock().len()
    }

    /// Stops dispatching after draining what is queued (a drain is not a loss).
    pub fn shutdown(&self) {
        self.queue.close();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
        self.running.store(false, Ordering::SeqCst);
        // Controls sent while the dispatcher stopped: their callers hear "stopped".
        while self.controls.1.try_recv().is_ok() {}
    }

    fn publish(&self, st: &State) {
        let snap = Arc::new(st.active.snapshot());
        *self.published.write() = snap;
    }

    fn count_evicted(&self, st: &mut State, n: u64) {
        if n == 0 {
            return;
        }
        self.queue.health().record_losses(n);
        self.counters.evicted.fetch_add(n, Ordering::Relaxed);
        st.evicted_unlogged += n;
        let now = self.clock.monotonic_nanos();
        if st
            .last_evict_log
            .is_none_or(|t| now.saturating_sub(t) >= 60_000_000_000)
        {
            log::warn!(
                "findings: the active set is full ({} findings, findings.max_active); {} least recently seen findings left it (kept in history, counted as losses on findings.ingest)",
                self.max_active(),
                st.evicted_unlogged
            );
            st.evicted_unlogged = 0;
            st.last_evict_log = Some(now);
        }
    }

    /// Takes the parked state's lock as one caller of `state.pending_operations`: waiting
    /// while the lock is held elsewhere, then running until both guards are dropped.
    fn lock_parked(&self) -> (parking_lot::MutexGuard<'_, Vec<Finding>>, RunningGuard<'_>) {
        let ops = self.pending_ops.health();
        let ticket = ops.admit();
        let parked = self.parked.lock();
        ticket.finish();
        (parked, ops.start_running())
    }

    fn replay_parked(&self, st: &mut State) {
        let _op = self.pending_ops.health().start_running();
        let health = self.pending_row.health();
        let parked = match self.pending_file.read() {
            Ok(p) => p.findings,
            Err(e) => {
                log::error!("state.pending: cannot read parked findings: {e}");
                health.state_unreadable();
                return;
            }
        };
        if parked.is_empty() {
            return;
        }
        let n = parked.len();
        let batch: Vec<Ingest> = parked
            .into_iter()
            .map(|f| Ingest::Finding(Box::new(f)))
            .collect();
        // One transaction: the file is removed only when all of it is committed.
        let mut batch = batch;
        self.process(st, &mut batch, Mode::Replay);
        if self.parked.lock().is_empty() {
            let left = self.parked_checkpoint_list();
            let done = if left.is_empty() {
                self.pending_file.remove()
            } else {
                self.pending_file.write(&[], &left)
            };
            if let Err(e) = done {
                log::warn!("state.pending: replayed but cannot remove the file: {e}");
            }
            self.counters
                .replayed
                .fetch_add(n as u64, Ordering::Relaxed);
            health.state_read_ok(0);
            log::info!("replayed {n} parked findings into the store");
        }
    }

    fn run(&self) {
        crate::sys::priority::raise_priority("findings dispatcher");
        let mut batch: Vec<Ingest> = Vec::with_capacity(BATCH);
        let mut last_expiry = self.clock.monotonic_nanos();
        // The batch whose commit is under way while the next one is prepared.
        let mut pending: Option<InFlight> = None;
        // `running` on `findings.ingest`: one while a batch is prepared or its commit is
        // under way (a commit stuck on the store shows as a running operation that ages),
        // restarted after each finished commit so its age is that of the oldest unfinished
        // batch.
        let mut busy: Option<crate::queue::RunningGuard<'_>> = None;
        let beat = crate::queue::heartbeat::Beat::register("findings-dispatch", self.clock.clone());
        loop {
            beat.beat();
            if !self.controls.1.is_empty() {
                let mut st = self.state.lock();
                if let Some(p) = pending.take() {
                    self.finish(&mut st, p);
                }
                while let Ok(c) = self.controls.1.try_recv() {
                    self.serve(&mut st, c);
                }
            }
            if pending.is_none() {
                if let Some(b) = busy.take() {
                    b.finish();
                }
            }
            let first = if pending.is_some() {
                // Something commits: take what is waiting now, else finish that commit.
                match self.queue.try_pop() {
                    Some(g) => Ok(g),
                    None => {
                        if let Some(p) = pending.take() {
                            self.finish(&mut self.state.lock(), p);
                        }
                        continue;
                    }
                }
            } else {
                self.queue.pop_timeout(Duration::from_millis(500))
            };
            match first {
                Ok(first) => {
                    if busy.is_none() {
                        busy = Some(self.queue.health().start_running());
                    }
                    if let Item::Ingest(i) = first.finish() {
                        batch.push(i);
                    }
                    while batch.len() < BATCH {
                        match self.queue.try_pop() {
                            Some(g) => {
                                if let Item::Ingest(i) = g.finish() {
                                    batch.push(i);
                                }
                            }
                            None => break,
                        }
                    }
                    if !batch.is_empty() {
                        let mut st = self.state.lock();
                        let next = self.prepare(&mut st, &mut batch, Mode::Live);
                        if let Some(p) = pending.take() {
                            self.finish(&mut st, p);
                            if let Some(b) = busy.take() {
                                b.finish();
                            }
                            busy = Some(self.queue.health().start_running());
                        }
                        pending = Some(next);
                    }
                }
                Err(PopError::Timeout) => {}
                Err(PopError::Closed) => break,
            }
            let now = self.clock.monotonic_nanos();
            if now - last_expiry > 60_000_000_000 {
                last_expiry = now;
                if let Some(p) = pending.take() {
                    self.finish(&mut self.state.lock(), p);
                }
                self.expire_quiet_events();
            }
        }
        // Closed: drain whatever remains (not a loss).
        let mut st = self.state.lock();
        if let Some(p) = pending.take() {
            self.finish(&mut st, p);
        }
        if let Some(b) = busy.take() {
            b.finish();
        }
        let mut rest = Vec::new();
        for item in self.queue.drain() {
            if let Item::Ingest(i) = item {
                rest.push(i);
            }
        }
        // Controls still waiting are dropped: their callers hear "stopped".
        while self.controls.1.try_recv().is_ok() {}
        while !rest.is_empty() {
            let mut chunk: Vec<Ingest> = rest.drain(..rest.len().min(BATCH)).collect();
            self.process(&mut st, &mut chunk, Mode::Live);
        }
    }

    fn serve(&self, st: &mut State, c: Control) {
        match c {
            Control::Barrier(reply) => {
                let _ = reply.send(self.snapshot());
            }
            Control::Apply { rules, reply } => {
                let now = self.clock.now();
                let keys: Vec<(String, String)> = rules
                    .iter()
                    .filter(|r| suppress::in_force(r, now))
                    .filter_map(|r| {
                        let f = st.active.get(&r.check, r.message.as_deref()?)?;
                        suppress::matches_fields(r, f).then(|| (f.check.clone(), f.message.clone()))
                    })
                    .collect();
                self.serve(st, Control::Remove { keys, reply });
            }
            Control::Resolve { keys, reply } => {
                let r = self.remove_keys(st, keys);
                if matches!(r, Ok(n) if n > 0) {
                    self.publish(st);
                }
                let _ = reply.send(r);
            }
            Control::Remove { keys, reply } => {
                let m = self.suppressor().map(|s| (s.matcher(), s.now()));
                let keys: Vec<(String, String)> = match m {
                    Some((m, now)) => keys
                        .into_iter()
                        .filter(|(c, msg)| {
                            st.active
                                .get(c, msg)
                                .is_some_and(|f| m.is_suppressed(f, now))
                        })
                        .collect(),
                    None => Vec::new(),
                };
                let r = self.remove_keys(st, keys);
                if matches!(r, Ok(n) if n > 0) {
                    self.publish(st);
                }
                let _ = reply.send(r);
            }
        }
    }

    /// Deletes `keys` from the store, then from the active set. Returns how many left.
    fn remove_keys(
        &self,
        st: &mut State,
        keys: Vec<(String, String)>,
    ) -> Result<usize, StoreError> {
        if keys.is_empty() {
            return Ok(0);
        }
        let keys = Arc::new(keys);
        let k2 = keys.clone();
        self.store.write(move |c| {
            store::findings::delete_active_keys(c, k2.iter().map(|(a, b)| (a.as_str(), b.as_str())))
        })?;
        let removed = st
            .active
            .remove(keys.iter().map(|(a, b)| (a.as_str(), b.as_str())));
        Ok(removed.findings.len())
    }

    fn expire_quiet_events(&self) {
        let ttl = jiff::SignedDuration::try_from(EVENT_FINDING_TTL).unwrap_or_default();
        let cutoff = self
            .clock
            .now()
            .checked_sub(ttl)
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let mut st = self.state.lock();
        let gone = st.active.expire(cutoff);
        let expired_now = !gone.findings.is_empty();
        // A retried key whose finding came back meanwhile has a live row again: keep it.
        let mut keys = std::mem::take(&mut st.expired_unwritten);
        keys.retain(|k| st.active.get(&k.check, &k.message).is_none());
        keys.extend(gone.findings);
        if !keys.is_empty() {
            // Detached: the dispatcher never waits for the store here. A failed delete is
            // logged and counted by the writer; a refused one is retried next round.
            let retry = keys.clone();
            if let Err(e) = self
                .store
                .write_detached(move |c| store::findings::delete_active_keys(c, key_pairs(&keys)))
            {
                log::warn!(
                    "findings: removing {} expired finding(s) from the store: {e}; retrying in a minute",
                    retry.len()
                );
                st.expired_unwritten = retry;
            }
        }
        if expired_now {
            self.publish(&st);
        }
    }

    /// Applies one batch to the dispatcher's active set, commits it (history, changed and
    /// removed active rows, checkpoints) in one transaction, then publishes the new snapshot
    /// and calls the listeners. On store failure the batch's findings are parked first
    /// (replayed batches stay in their file).
    fn process(&self, st: &mut State, batch: &mut Vec<Ingest>, mode: Mode) {
        let f = self.prepare(st, batch, mode);
        self.finish(st, f);
    }

    /// The first half of [`process`](Self::process): applies the batch to the dispatcher's
    /// own set (nobody sees it yet), takes the snapshot to publish after the commit, and
    /// queues the commit.
    fn prepare(&self, st: &mut State, batch: &mut Vec<Ingest>, mode: Mode) -> InFlight {
        self.counters.batches.fetch_add(1, Ordering::Relaxed);
        let items = batch.len() as u64;
        let now = self.clock.now();
        let matcher: Option<Arc<Matcher>> = self
            .suppressor()
            .map(|s| s.matcher())
            .filter(|m| m.any_in_force(now));
        let max_active = self.max_active();
        let scheduled = self.scheduled_checks.read();
        let mut history: Vec<Arc<Finding>> = Vec::with_capacity(batch.len());
        let mut dispatched: Vec<Arc<Finding>> = Vec::with_capacity(batch.len());
        let mut changes: Vec<Change> = Vec::new();
        let mut checkpoints: Vec<(String, u64, u64)> = Vec::new();
        let mut kept_out = 0u64;
        for item in batch.drain(..) {
            match item {
                Ingest::Finding(mut f) => {
                    f.shrink_to_fit();
                    let f: Arc<Finding> = Arc::from(f);
                    history.push(f.clone());
                    if matcher.as_ref().is_some_and(|m| m.is_suppressed(&f, now)) {
                        kept_out += 1;
                        continue;
                    }
                    let event = !scheduled.contains(f.check.as_str());
                    let (merged, _) = st.active.merge(f, event);
                    changes.push(Change::Upsert(merged.clone()));
                    dispatched.push(merged);
                }
                Ingest::CheckCompleted(done) => {
                    let gone = st.active.resolve_check(&done.check, &done.messages);
                    changes.extend(gone.findings.into_iter().map(Change::Delete));
                }
                Ingest::Checkpoint(pos) => {
                    let SourcePosition {
                        source,
                        inode,
                        offset,
                    } = *pos;
                    // Within one transaction only the last position of a source survives:
                    // the earlier ones of this batch are dropped before the commit (a
                    // collector submits one after every small group of findings).
                    match checkpoints.iter_mut().find(|(s, _, _)| *s == source) {
                        Some(cp) => {
                            cp.1 = inode;
                            cp.2 = offset;
                        }
                        None => checkpoints.push((source, inode, offset)),
                    }
                }
            }
        }
        drop(scheduled);
        let evicted: Removed = st.active.evict_over(max_active);
        let n_evicted = evicted.findings.len() as u64;
        changes.extend(evicted.findings.into_iter().map(Change::Delete));
        self.count_evicted(st, n_evicted);
        let (upserts, deletes) = final_changes(changes);
        let history2 = history.clone();
        let batch_checkpoints = checkpoints.clone();
        let commit = self.store.write_pending(move |c| {
            let h: Vec<&Finding> = history2.iter().map(|f| &**f).collect();
            store::findings::insert_history(c, &h)?;
            let m: Vec<&Finding> = upserts.iter().map(|f| &**f).collect();
            store::findings::upsert_active(c, &m)?;
            store::findings::delete_active_keys(c, key_pairs(&deletes))?;
            for (source, inode, offset) in &checkpoints {
                store::findings::save_checkpoint(c, source, *inode, *offset, now)?;
            }
            Ok(())
        });
        InFlight {
            commit,
            history,
            dispatched,
            snapshot: Arc::new(st.active.snapshot()),
            checkpoints: batch_checkpoints,
            kept_out,
            items,
            mode,
        }
    }

    /// The second half of [`process`](Self::process): waits for the commit (parks the
    /// findings when it failed), publishes the snapshot taken after the batch, and calls the
    /// listeners.
    fn finish(&self, _st: &mut State, f: InFlight) {
        let result = f.commit.and_then(|p| p.wait());
        if let Err(e) = result {
            match f.mode {
                Mode::Live => {
                    log::error!("findings: store refused a batch ({e}); parking its findings");
                    self.park(&f.history, &f.checkpoints);
                }
                Mode::Replay => {
                    log::error!("state.pending: replay refused by the store ({e}); kept parked");
                    let health = self.pending_row.health();
                    let (mut parked, _op) = self.lock_parked();
                    parked.extend(f.history.iter().map(|f| (**f).clone()));
                    health.set_waiting(parked.len() as u64);
                }
            }
        } else if !f.checkpoints.is_empty() {
            self.supersede_parked_checkpoints(&f.checkpoints);
        }
        *self.published.write() = f.snapshot;
        self.counters
            .dispatched
            .fetch_add(f.dispatched.len() as u64, Ordering::Release);
        self.counters
            .suppressed
            .fetch_add(f.kept_out, Ordering::Release);
        // Taking the lock orders this notification after a waiter's check of the counters
        // (no lost wakeup).
        drop(self.done_signal.0.lock());
        self.done_signal.1.notify_all();
        let listeners = self.listeners.read();
        if !listeners.is_empty() {
            for d in &f.dispatched {
                for l in listeners.iter() {
                    l(d);
                }
            }
        }
        drop(listeners);
        if f.mode == Mode::Live {
            self.in_flight.fetch_sub(f.items, Ordering::SeqCst);
        }
    }

    fn parked_checkpoint_list(&self) -> Vec<ParkedCheckpoint> {
        self.parked_checkpoints
            .lock()
            .iter()
            .map(|(source, &(inode, offset))| ParkedCheckpoint {
                source: source.clone(),
                inode,
                offset,
            })
            .collect()
    }

    /// A batch committed positions of these sources: parked ones of the same sources are
    /// older (commits keep their order) and must never be committed over them.
    fn supersede_parked_checkpoints(&self, committed: &[(String, u64, u64)]) {
        let changed = {
            let mut cps = self.parked_checkpoints.lock();
            if cps.is_empty() {
                return;
            }
            let before = cps.len();
            for (source, _, _) in committed {
                cps.remove(source);
            }
            cps.len() != before
        };
        if changed {
            let (parked, _op) = self.lock_parked();
            let left = self.parked_checkpoint_list();
            let done = if parked.is_empty() && left.is_empty() {
                self.pending_file.remove()
            } else {
                self.pending_file.write(&parked, &left)
            };
            if let Err(e) = done {
                log::error!(
                    "state.pending: cannot write {}: {e}",
                    self.pending_file.path().display()
                );
                self.pending_row.health().state_io_error();
            }
        }
    }

    fn park(&self, batch: &[Arc<Finding>], checkpoints: &[(String, u64, u64)]) {
        let health = self.pending_row.health();
        {
            let mut cps = self.parked_checkpoints.lock();
            for (source, inode, offset) in checkpoints {
                cps.insert(source.clone(), (*inode, *offset));
            }
        }
        let (mut parked, _op) = self.lock_parked();
        for f in batch {
            parked.push((**f).clone());
            self.counters.parked.fetch_add(1, Ordering::Relaxed);
        }
        if parked.len() > MAX_PARKED {
            let over = parked.len() - MAX_PARKED;
            parked.drain(..over);
            health.record_losses(over as u64);
        }
        health.set_waiting(parked.len() as u64);
        if parked.len() == 1 || health.snapshot().oldest_waiting_age_seconds.is_none() {
            health.set_oldest_waiting(Some(health.stamp()));
        }
        match self
            .pending_file
            .write(&parked, &self.parked_checkpoint_list())
        {
            Ok(()) => health.state_io_ok(),
            Err(e) => {
                log::error!(
                    "state.pending: cannot write {}: {e}",
                    self.pending_file.path().display()
                );
                health.state_io_error();
            }
        }
    }
}

/// A batch applied to the dispatcher's set whose commit is under way.
struct InFlight {
    commit: Result<crate::store::PendingWrite<()>, StoreError>,
    history: Vec<Arc<Finding>>,
    /// The batch's source checkpoints (parked with its findings when the commit fails).
    checkpoints: Vec<(String, u64, u64)>,
    /// Active-set entries after the merge, for the listeners.
    dispatched: Vec<Arc<Finding>>,
    /// The set after this batch, published once it is committed.
    snapshot: Arc<Snapshot>,
    kept_out: u64,
    items: u64,
    mode: Mode,
}

/// Commits the checkpoints parked by the previous process (see the module documentation)
/// and rewrites the file without them. Returns those the store still refused: they stay
/// parked (and in the file) for the next attempt.
fn commit_parked_checkpoints(
    store: &Store,
    file: &PendingFile,
    now: jiff::Timestamp,
) -> BTreeMap<String, (u64, u64)> {
    let contents = match file.read() {
        Ok(c) => c,
        // Reported by the replay at start (`state.pending` unreadable).
        Err(_) => return BTreeMap::new(),
    };
    if contents.checkpoints.is_empty() {
        return BTreeMap::new();
    }
    let cps = contents.checkpoints.clone();
    let n = cps.len();
    let committed = store.write(move |c| {
        for cp in &cps {
            store::findings::save_checkpoint(c, &cp.source, cp.inode, cp.offset, now)?;
        }
        Ok(())
    });
    match committed {
        Ok(()) => {
            log::info!("state.pending: committed {n} parked log position(s)");
            let rewritten = if contents.findings.is_empty() {
                file.remove()
            } else {
                file.write(&contents.findings, &[])
            };
            if let Err(e) = rewritten {
                // Left in the file: committed again next time, which is harmless only while
                // no newer position exists; say so loudly.
                log::error!(
                    "state.pending: cannot rewrite {}: {e}",
                    file.path().display()
                );
            }
            BTreeMap::new()
        }
        Err(e) => {
            log::error!("state.pending: parked log positions refused by the store ({e}); kept");
            contents
                .checkpoints
                .into_iter()
                .map(|cp| (cp.source, (cp.inode, cp.offset)))
                .collect()
        }
    }
}

/// The keys of `snap` one of `rules` (in force at `now`) matches. A rule naming a message is
/// one lookup; the others are tried only on findings of their own check.
fn matched_keys(
    snap: &Snapshot,
    rules: &[Suppression],
    now: jiff::Timestamp,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut scan: Vec<Suppression> = Vec::new();
    for r in rules.iter().filter(|r| suppress::in_force(r, now)) {
        match &r.message {
            Some(m) => {
                if let Some(f) = snap.get(&r.check, m) {
                    if suppress::matches_fields(r, f) {
                        out.push((f.check.clone(), f.message.clone()));
                    }
                }
            }
            None => scan.push(r.clone()),
        }
    }
    if !scan.is_empty() {
        let checks: Vec<&str> = scan.iter().map(|r| r.check.as_str()).collect();
        let m = Matcher::new(&scan);
        out.extend(
            snap.iter()
                .filter(|f| checks.contains(&f.check.as_str()) && m.is_suppressed(f, now))
                .map(|f| (f.check.clone(), f.message.clone())),
        );
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// A change of one active row within a batch.
enum Change {
    Upsert(Arc<Finding>),
    Delete(Arc<Finding>),
}

/// The last change of each key, as (rows to write, keys to delete).
fn final_changes(changes: Vec<Change>) -> (Vec<Arc<Finding>>, Vec<Arc<Finding>>) {
    let mut last: HashMap<(&str, &str), usize> = HashMap::with_capacity(changes.len());
    for (i, c) in changes.iter().enumerate() {
        let k = match c {
            Change::Upsert(f) | Change::Delete(f) => (f.check.as_str(), f.message.as_str()),
        };
        last.insert(k, i);
    }
    let mut keep: Vec<usize> = last.into_values().collect();
    keep.sort_unstable();
    let mut upserts = Vec::new();
    let mut deletes = Vec::new();
    let mut it = keep.into_iter().peekable();
    for (i, c) in changes.into_iter().enumerate() {
        if it.peek() != Some(&i) {
            continue;
        }
        it.next();
        match c {
            Change::Upsert(f) => upserts.push(f),
            Change::Delete(k) => deletes.push(k),
        }
    }
    (upserts, deletes)
}

/// The (check, message) keys of `findings`.
fn key_pairs(findings: &[Arc<Finding>]) -> impl Iterator<Item = (&str, &str)> {
    findings
        .iter()
        .map(|f| (f.check.as_str(), f.message.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::findings::Severity;

    fn setup(tag: &str) -> (Arc<Engine>, Store, Arc<Registry>, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("svc-engine-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let reg = Registry::new();
        let clock = ManualClock::at_epoch_2026();
        let e = Engine::new(clock, store.clone(), &reg, &dir).unwrap();
        (e, store, reg, dir)
    }

    fn f(msg: &str) -> Finding {
        Finding::new(
            "ssh_bruteforce",
            Severity::High,
            msg,
            jiff::Timestamp::from_second(1_767_225_600).unwrap(),
        )
    }

    #[test]
    fn an_ingest_item_is_one_box() {
        // 16,384 preallocated slots of findings.ingest hold one each.
        assert_eq!(std::mem::size_of::<Ingest>(), 16);
    }

    #[test]
    fn hold_then_dispatch_commits_before_showing() {
        let (e, store, reg, dir) = setup("dispatch");
        assert!(e.submit(f("a")));
        assert!(e.submit(f("a")));
        assert!(reg.snapshot()["findings.ingest"].waiting == Some(2));
        assert_eq!(e.active_len(), 0, "held: nothing dispatched yet");
        e.start().unwrap();
        assert!(e.flush(Duration::from_secs(5)));
        let active = e.active();
        assert_eq!(active.len(), 1);
        assert_eq!(active[0].count, 2);
        let n = store.read(store::findings::history_count).unwrap();
        assert_eq!(n, 2);
        e.shutdown();
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn wait_done_wakes_when_batches_finish_and_times_out_otherwise() {
        let (e, store, _reg, dir) = setup("wait-done");
        let soon = || std::time::Instant::now() + Duration::from_millis(50);
        assert!(e.wait_done(0, soon()), "nothing to wait for");
        assert!(!e.wait_done(1, soon()), "nothing dispatched yet (held)");
        for i in 0..3 {
            assert!(e.submit(f(&format!("m{i}"))));
        }
        let waiter = {
            let e = e.clone();
            std::thread::spawn(move || {
                e.wait_done(3, std::time::Instant::now() + Duration::from_secs(30))
            })
        };
        e.start().unwrap();
        assert!(waiter.join().unwrap());
        assert_eq!(e.done(), 3);
        e.shutdown();
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn positions_of_one_batch_commit_the_last_per_source() {
        let (e, store, _reg, dir) = setup("cp-last");
        for (source, offset) in [
            ("auth:/l", 10),
            ("auth-fp:/l", 1),
            ("auth:/l", 20),
            ("auth:/l", 30),
        ] {
            assert!(e.submit_item(Ingest::checkpoint(source, 7, offset)));
        }
        // Held until start: all four are dispatched in one batch.
        e.start().unwrap();
        assert!(e.flush(Duration::from_secs(5)));
        let load = |k: &str| {
            store
                .read(|c| store::findings::load_checkpoint(c, k))
                .unwrap()
        };
        assert_eq!(load("auth:/l"), Some((7, 30)));
        assert_eq!(load("auth-fp:/l"), Some((7, 1)));
        e.shutdown();
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn pending_operations_row_counts_lock_callers_and_running_operations() {
        let (e, store, reg, dir) = setup("pending-ops");
        let row = |reg: &Registry| reg.snapshot()[PENDING_OPS_ROW].clone();
        assert_eq!((row(&reg).waiting, row(&reg).running), (Some(0), 0));
        assert!(row(&reg).capacity_unavailable);
        store.close();
        let held = e.parked.lock();
        let e2 = e.clone();
        let t = std::thread::spawn(move || e2.park(&[Arc::new(f("x"))], &[]));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while row(&reg).waiting != Some(1) {
            assert!(std::time::Instant::now() < deadline, "caller never waited");
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(held);
        t.join().unwrap();
        let r = row(&reg);
        assert_eq!((r.waiting, r.running, r.dropped_total), (Some(0), 0, 0));
        assert_eq!(reg.snapshot()["state.pending"].waiting, Some(1));
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn store_failure_parks_and_next_start_replays() {
        let (e, store, reg, dir) = setup("park");
        e.start().unwrap();
        store.close(); // every write now fails
        assert!(e.submit(f("parked")));
        assert!(e.flush(Duration::from_secs(5)));
        assert_eq!(e.parked_len(), 1);
        assert_eq!(reg.snapshot()["state.pending"].waiting, Some(1));
        assert!(dir.join("pending-findings.json").exists());
        assert_eq!(e.active_len(), 1, "still visible");
        e.shutdown();
        drop(e);
        drop(reg);
        // Next start: replayed into history and the file is gone.
        let store2 = Store::open(&dir.join("svc.db")).unwrap();
        let reg2 = Registry::new();
        let e2 = Engine::new(ManualClock::at_epoch_2026(), store2.clone(), &reg2, &dir).unwrap();
        e2.start().unwrap();
        assert_eq!(store2.read(store::findings::history_count).unwrap(), 1);
        assert!(!dir.join("pending-findings.json").exists());
        assert_eq!(e2.active_len(), 1);
        e2.shutdown();
        store2.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn refused_checkpoints_are_parked_and_committed_before_collectors_load_them() {
        let (e, store, reg, dir) = setup("park-cp");
        e.start().unwrap();
        store.close(); // every write now fails
        assert!(e.submit(f("parked")));
        assert!(e.submit_item(Ingest::checkpoint("auth:/var/log/auth.log", 7, 4096)));
        assert!(e.flush(Duration::from_secs(5)));
        assert_eq!(e.parked_checkpoint_list().len(), 1);
        e.shutdown();
        drop(e);
        drop(reg);
        // Building the next engine commits the position (collectors load it after this)
        // and keeps the findings parked for the replay at start.
        let store2 = Store::open(&dir.join("svc.db")).unwrap();
        let reg2 = Registry::new();
        let e2 = Engine::new(ManualClock::at_epoch_2026(), store2.clone(), &reg2, &dir).unwrap();
        let cp = store2
            .read(|c| store::findings::load_checkpoint(c, "auth:/var/log/auth.log"))
            .unwrap();
        assert_eq!(cp, Some((7, 4096)));
        assert_eq!(store2.read(store::findings::history_count).unwrap(), 0);
        e2.start().unwrap();
        assert_eq!(store2.read(store::findings::history_count).unwrap(), 1);
        assert!(!dir.join("pending-findings.json").exists());
        e2.shutdown();
        store2.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_committed_position_supersedes_a_parked_one() {
        let (e, store, _reg, dir) = setup("park-supersede");
        e.park(&[], &[("auth:/a".into(), 1, 10), ("auth:/b".into(), 2, 20)]);
        e.supersede_parked_checkpoints(&[("auth:/a".into(), 1, 30)]);
        let left = e.parked_checkpoint_list();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].source, "auth:/b");
        let file = PendingFile::new(&dir).read().unwrap();
        assert_eq!(file.checkpoints, left, "the file follows");
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn active_summary_follows_every_change() {
        let (e, store, _reg, dir) = setup("summary");
        e.start().unwrap();
        assert_eq!(e.active_summary().counts, (0, 0, 0));
        e.submit(f("a"));
        assert!(e.flush(Duration::from_secs(5)));
        let s1 = e.active_summary();
        assert_eq!(s1.counts, (0, 1, 0));
        assert_eq!(s1.unattributed.get("ssh_bruteforce"), Some(&1));
        assert!(
            Arc::ptr_eq(&s1, &e.active_summary()),
            "unchanged set: cached"
        );
        let mk = |m: &str| {
            Finding::new(
                "uid0_account",
                Severity::Critical,
                m,
                jiff::Timestamp::from_second(5).unwrap(),
            )
            .with_account("toor")
        };
        e.submit(mk("extra uid 0: toor"));
        assert!(e.flush(Duration::from_secs(5)));
        assert_eq!(e.active_summary().counts, (1, 1, 0));
        assert_eq!(e.active_summary().unattributed.get("uid0_account"), None);
        e.submit_item(Ingest::check_completed("uid0_account", vec![]));
        assert!(e.flush(Duration::from_secs(5)));
        assert_eq!(e.active_summary().counts, (0, 1, 0), "resolution is seen");
        e.shutdown();
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn check_completion_resolves_missing_messages() {
        let (e, store, _reg, dir) = setup("resolve");
        e.start().unwrap();
        let mk = |m: &str| {
            Finding::new(
                "uid0_account",
                Severity::Critical,
                m,
                jiff::Timestamp::from_second(5).unwrap(),
            )
        };
        e.submit(mk("extra uid 0: toor"));
        e.submit(mk("extra uid 0: evil"));
        e.submit_item(Ingest::check_completed(
            "uid0_account",
            vec!["extra uid 0: toor".into(), "extra uid 0: evil".into()],
        ));
        assert!(e.flush(Duration::from_secs(5)));
        assert_eq!(e.active_len(), 2);
        e.submit(mk("extra uid 0: toor"));
        e.submit_item(Ingest::check_completed(
            "uid0_account",
            vec!["extra uid 0: toor".into()],
        ));
        assert!(e.flush(Duration::from_secs(5)));
        assert_eq!(e.active_len(), 1);
        let stored = store.read(store::findings::load_active).unwrap();
        assert_eq!(stored.len(), 1);
        e.shutdown();
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn suppressed_findings_reach_history_but_not_the_active_set() {
        use crate::findings::suppress::Suppressions;
        use crate::store::suppressions::NewSuppression;
        let (e, store, _reg, dir) = setup("suppress");
        e.start().unwrap();
        let listened = Arc::new(AtomicU64::new(0));
        let l2 = listened.clone();
        e.subscribe(Box::new(move |_| {
            l2.fetch_add(1, Ordering::SeqCst);
        }));
        e.submit(f("keep").with_ip("192.0.2.1".parse().unwrap()));
        e.submit(f("quiet").with_ip("192.0.2.2".parse().unwrap()));
        assert!(e.flush(Duration::from_secs(5)));
        assert_eq!(e.active_len(), 2);
        let (v0, n0) = e.version_and_len();
        assert_eq!(n0, 2);
        let s = Suppressions::load(store.clone(), ManualClock::at_epoch_2026()).unwrap();
        assert_eq!(e.set_suppressor(s.clone()).unwrap(), 0);
        s.create(
            NewSuppression {
                check: "ssh_bruteforce".into(),
                ip: Some("192.0.2.2".into()),
                reason: "scanner we run".into(),
                ..NewSuppression::default()
            },
            "test",
        )
        .unwrap();
        // Creating a rule removes what it matches, from memory and the store.
        assert_eq!(e.apply_suppressions().unwrap(), 1);
        let (v1, n1) = e.version_and_len();
        assert_eq!(n1, 1);
        assert!(v1 > v0);
        assert_eq!(store.read(store::findings::load_active).unwrap().len(), 1);
        // A new dispatch of the suppressed finding is history only.
        e.submit(f("quiet").with_ip("192.0.2.2".parse().unwrap()));
        assert!(e.flush(Duration::from_secs(5)));
        assert_eq!(e.active_len(), 1);
        assert_eq!(e.active()[0].message, "keep");
        assert_eq!(store.read(store::findings::history_count).unwrap(), 3);
        assert_eq!(e.counters.suppressed.load(Ordering::Relaxed), 1);
        assert_eq!(
            listened.load(Ordering::SeqCst),
            2,
            "suppressed: no listener call"
        );
        e.shutdown();
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn refused_findings_count_as_losses_even_while_held() {
        let (e, store, reg, dir) = setup("loss");
        for i in 0..(INGEST_CAPACITY + 3) {
            e.submit(f(&format!("m{i}")));
        }
        let row = &reg.snapshot()["findings.ingest"];
        assert_eq!(row.dropped_total, 3);
        e.start().unwrap();
        assert!(e.flush(Duration::from_secs(30)));
        e.shutdown();
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_active_set_is_bounded_and_evictions_are_losses() {
        let (e, store, reg, dir) = setup("bound");
        e.register_scheduled_checks(["uid0_account"]);
        e.set_max_active(10);
        e.start().unwrap();
        let cond = Finding::new(
            "uid0_account",
            Severity::Critical,
            "extra uid 0: toor",
            jiff::Timestamp::from_second(5).unwrap(),
        );
        e.submit(cond);
        assert!(e.flush(Duration::from_secs(5)));
        for i in 0..25 {
            e.submit(f(&format!("m{i}")));
            // One batch each, so the order of recency is the order of submission.
            assert!(e.flush(Duration::from_secs(5)));
        }
        let snap = e.snapshot();
        assert_eq!(snap.len(), 10);
        assert!(snap.get("uid0_account", "extra uid 0: toor").is_some());
        assert!(snap.get("ssh_bruteforce", "m24").is_some());
        assert!(snap.get("ssh_bruteforce", "m15").is_none());
        assert_eq!(snap.counts().by_check["ssh_bruteforce"].total(), 9);
        assert_eq!(reg.snapshot()["findings.ingest"].dropped_total, 16);
        assert_eq!(e.counters.evicted.load(Ordering::Relaxed), 16);
        assert_eq!(store.read(store::findings::load_active).unwrap().len(), 10);
        assert_eq!(store.read(store::findings::history_count).unwrap(), 26);
        e.shutdown();
        drop(e);
        // A lower bound at the next start trims the loaded set the same way.
        let reg2 = Registry::new();
        let e2 = Engine::new(ManualClock::at_epoch_2026(), store.clone(), &reg2, &dir).unwrap();
        e2.register_scheduled_checks(["uid0_account"]);
        e2.set_max_active(3);
        e2.start().unwrap();
        let snap = e2.snapshot();
        assert_eq!(snap.len(), 3);
        assert!(snap.get("uid0_account", "extra uid 0: toor").is_some());
        assert_eq!(reg2.snapshot()["findings.ingest"].dropped_total, 7);
        assert_eq!(store.read(store::findings::load_active).unwrap().len(), 3);
        e2.shutdown();
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_snapshot_is_a_stable_view_published_after_commit() {
        let (e, store, _reg, dir) = setup("snapshot");
        e.start().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        {
            let (seen, e2, store2) = (seen.clone(), Arc::downgrade(&e), store.clone());
            e.subscribe(Box::new(move |f: &Finding| {
                // Listeners run after the commit and after the snapshot is published.
                let stored = store2
                    .read(store::findings::load_active)
                    .unwrap()
                    .into_iter()
                    .any(|s| s.message == f.message);
                let shown = e2
                    .upgrade()
                    .is_some_and(|e| e.snapshot().get(&f.check, &f.message).is_some());
                seen.lock().push((stored, shown));
            }));
        }
        e.submit(f("a"));
        assert!(e.flush(Duration::from_secs(5)));
        let old = e.snapshot();
        let v = old.version();
        for i in 0..100 {
            e.submit(f(&format!("b{i}")));
        }
        e.submit(f("a"));
        assert!(e.flush(Duration::from_secs(5)));
        // The old snapshot is unchanged; the new one has everything.
        assert_eq!((old.version(), old.len()), (v, 1));
        assert_eq!(old.get("ssh_bruteforce", "a").unwrap().count, 1);
        let new = e.snapshot();
        assert_eq!(new.len(), 101);
        assert_eq!(new.get("ssh_bruteforce", "a").unwrap().count, 2);
        assert!(new.version() > v);
        assert!(seen.lock().iter().all(|&(stored, shown)| stored && shown));
        assert_eq!(seen.lock().len(), 102);
        e.shutdown();
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_rule_created_during_ingest_loses_nothing_and_leaves_nothing_behind() {
        use crate::findings::suppress::Suppressions;
        use crate::store::suppressions::NewSuppression;
        let (e, store, reg, dir) = setup("suppress-live");
        let s = Suppressions::load(store.clone(), ManualClock::at_epoch_2026()).unwrap();
        e.set_suppressor(s.clone()).unwrap();
        e.start().unwrap();
        let mk =
            |i: usize| f(&format!("m{i}")).with_ip(format!("192.0.2.{}", i % 4).parse().unwrap());
        let e2 = e.clone();
        let feeder = std::thread::spawn(move || {
            for i in 0..20_000 {
                assert!(e2.submit_wait(Ingest::Finding(Box::new(mk(i))), Duration::from_secs(30)));
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        s.create(
            NewSuppression {
                check: "ssh_bruteforce".into(),
                ip: Some("192.0.2.1".into()),
                reason: "scanner we run".into(),
                ..NewSuppression::default()
            },
            "test",
        )
        .unwrap();
        e.apply_suppressions().unwrap();
        feeder.join().unwrap();
        assert!(e.flush(Duration::from_secs(30)));
        let snap = e.snapshot();
        let ip1: std::net::IpAddr = "192.0.2.1".parse().unwrap();
        assert!(
            snap.iter().all(|f| f.ip != Some(ip1)),
            "nothing suppressed is active"
        );
        assert_eq!(snap.len(), 15_000);
        assert_eq!(store.read(store::findings::history_count).unwrap(), 20_000);
        assert_eq!(
            store.read(store::findings::load_active).unwrap().len(),
            15_000
        );
        assert_eq!(reg.snapshot()["findings.ingest"].dropped_total, 0);
        e.shutdown();
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn listings_are_shared_briefly() {
        use crate::findings::suppress::Suppressions;
        use crate::store::suppressions::NewSuppression;
        let dir = std::env::temp_dir().join(format!("svc-engine-listing-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let reg = Registry::new();
        let clock = ManualClock::at_epoch_2026();
        let e = Engine::new(clock.clone(), store.clone(), &reg, &dir).unwrap();
        let s = Suppressions::load(store.clone(), clock.clone()).unwrap();
        e.set_suppressor(s.clone()).unwrap();
        e.start().unwrap();
        for m in ["a", "b"] {
            e.submit(f(m));
        }
        assert!(e.flush(Duration::from_secs(5)));
        let l1 = e.listing();
        assert_eq!(l1.items().len(), 2);
        assert!(Arc::ptr_eq(&l1, &e.listing()), "unchanged set: shared");
        // Ingest moves on: the listing may be reused for a moment, then it is rebuilt.
        e.submit(f("c"));
        assert!(e.flush(Duration::from_secs(5)));
        assert!(Arc::ptr_eq(&l1, &e.listing()));
        clock.advance_secs(1);
        let l2 = e.listing();
        assert_eq!(l2.items().len(), 3);
        assert_eq!(l2.version(), e.snapshot().version());
        // A removal through the API is seen once the listing is rebuilt.
        s.create(
            NewSuppression {
                check: "ssh_bruteforce".into(),
                message: Some("a".into()),
                reason: "r".into(),
                ..NewSuppression::default()
            },
            "test",
        )
        .unwrap();
        assert_eq!(e.apply_suppressions().unwrap(), 1);
        assert_eq!(e.snapshot().len(), 2, "the snapshot at once");
        clock.advance_secs(1);
        let l3 = e.listing();
        assert_eq!(l3.items().len(), 2);
        assert!(l3.items().iter().all(|f| f.message != "a"));
        assert_eq!(l3.page(1, 10).len(), 1);
        assert!(l3.page(5, 10).is_empty());
        e.shutdown();
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
