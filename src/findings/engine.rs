//! The ingest dispatcher: collectors submit findings into `findings.ingest`; one dispatcher
//! thread commits each batch to the store (history, active set, source checkpoints), then
//! updates the in-memory active set and notifies listeners.
//!
//! Guarantees:
//! - What the active set, the API and listeners show has been committed to the store or
//!   parked in `state.pending` first, so it survives a SIGKILL.
//! - When the store refuses a batch, its findings are parked (newest 10,000, file written
//!   atomically) and replayed at the next start; failures to write the file raise `state_io`.
//! - The startup hold: `findings.ingest` holds (ages pause, losses count) until parked
//!   findings from the previous run are replayed.
//! - Suppressed findings (see [`super::suppress`]) are written to history but never merged
//!   into the active set nor passed to listeners. Which findings of a batch are suppressed
//!   is decided once, under the dispatch lock, so a rule created meanwhile either applies to
//!   the whole batch or removes what the batch added ([`Engine::apply_suppressions`]).

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use super::active::ActiveSet;
use super::pending::{PendingFile, MAX_PARKED};
use super::suppress::Suppressions;
use super::Finding;
use crate::clock::SharedClock;
use crate::queue::{BoundedQueue, LagBasis, PopError, QueueHealth, Registry, RowConfig, RowHandle};
use crate::store::{self, Store};

/// Capacity of `findings.ingest`.
pub const INGEST_CAPACITY: usize = 16_384;
/// Items committed in one store transaction at most. Listeners get a batch's findings in one
/// burst after its commit; half of an event-stream subscriber's 64-finding buffer keeps a
/// burst within what a subscriber that keeps up can take (a backlog is committed in several
/// smaller transactions instead of one large one).
const BATCH: usize = crate::events::BUFFER_PER_SUBSCRIBER / 2;
/// Event findings (not from scheduled checks) leave the active set after this much quiet.
pub const EVENT_FINDING_TTL: Duration = Duration::from_secs(24 * 3600);

/// What collectors submit.
#[derive(Debug, Clone)]
pub enum Ingest {
    /// Boxed so the preallocated channel slots stay small (idle memory).
    Finding(Box<Finding>),
    /// A scheduled check finished: its active findings whose message is not listed are
    /// resolved (removed from the active set).
    CheckCompleted {
        check: String,
        messages: Vec<String>,
    },
    /// A log source position: every line before it is represented by the items submitted
    /// before this one. Committed with them, so a restart resumes here.
    Checkpoint {
        source: String,
        inode: u64,
        offset: u64,
    },
}

/// Counts over one version of the active set.
#[derive(Debug)]
pub struct ActiveSummary {
    pub version: u64,
    /// (critical, high, warning).
    pub counts: (u64, u64, u64),
    /// Active findings without an account, per check.
    pub unattributed: std::collections::BTreeMap<String, u64>,
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
}

pub struct Engine {
    clock: SharedClock,
    store: Store,
    queue: BoundedQueue<Ingest>,
    _ingest_row: RowHandle,
    pending_row: RowHandle,
    pending_file: PendingFile,
    parked: Mutex<Vec<Finding>>,
    active: RwLock<ActiveSet>,
    listeners: RwLock<Vec<Listener>>,
    summary: Mutex<Option<Arc<ActiveSummary>>>,
    scheduled_checks: RwLock<HashSet<String>>,
    suppressor: RwLock<Option<Arc<Suppressions>>>,
    /// Held while a batch is committed and applied, and while suppressions are applied.
    dispatch_lock: Mutex<()>,
    pub counters: Counters,
    /// Items admitted and not yet dispatched (for [`Engine::flush`]).
    in_flight: AtomicU64,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Engine {
    /// Builds the engine (ingest held) and loads the active set. Call [`Engine::start`] once
    /// collectors are wired to begin dispatching.
    pub fn new(
        clock: SharedClock,
        store: Store,
        registry: &Arc<Registry>,
        state: &Path,
    ) -> Result<Arc<Engine>, String> {
        let queue = BoundedQueue::new(
            clock.clone(),
            RowConfig::new("findings")
                .capacity(INGEST_CAPACITY as u64)
                .running_slots(1),
        )
        .map_err(|e| format!("findings.ingest: {e:?}"))?;
        queue.health().hold();
        let ingest_row = registry
            .register("findings.ingest", queue.health().clone())
            .map_err(|e| format!("findings.ingest: {e:?}"))?;
        let pending_health = QueueHealth::new(
            clock.clone(),
            RowConfig::new("findings")
                .capacity(MAX_PARKED as u64)
                .lag_basis(LagBasis::DeferredCheckpoint),
        );
        let pending_row = registry
            .register("state.pending", pending_health)
            .map_err(|e| format!("state.pending: {e:?}"))?;
        let active = store
            .read(store::findings::load_active)
            .map_err(|e| format!("loading active findings: {e}"))?;
        Ok(Arc::new(Engine {
            clock,
            store,
            queue,
            _ingest_row: ingest_row,
            pending_row,
            pending_file: PendingFile::new(state),
            parked: Mutex::new(Vec::new()),
            active: RwLock::new(ActiveSet::load(active)),
            listeners: RwLock::new(Vec::new()),
            summary: Mutex::new(None),
            scheduled_checks: RwLock::new(HashSet::new()),
            suppressor: RwLock::new(None),
            dispatch_lock: Mutex::new(()),
            counters: Counters::default(),
            in_flight: AtomicU64::new(0),
            thread: Mutex::new(None),
        }))
    }

    /// Replays parked findings, releases the startup hold and starts the dispatcher thread.
    pub fn start(self: &Arc<Self>) -> Result<(), String> {
        self.replay_parked();
        self.queue.health().release();
        let me = self.clone();
        let t = std::thread::Builder::new()
            .name("findings-dispatch".into())
            .spawn(move || me.run())
            .map_err(|e| e.to_string())?;
        *self.thread.lock() = Some(t);
        Ok(())
    }

    /// Names checks whose findings are resolved by [`Ingest::CheckCompleted`] rather than
    /// expiring after [`EVENT_FINDING_TTL`].
    pub fn register_scheduled_checks(&self, names: impl IntoIterator<Item = &'static str>) {
        self.scheduled_checks
            .write()
            .extend(names.into_iter().map(String::from));
    }

    /// Installs the suppression rules consulted for every dispatched finding, and removes
    /// the active findings they already match.
    pub fn set_suppressor(&self, s: Arc<Suppressions>) -> Result<usize, crate::store::StoreError> {
        *self.suppressor.write() = Some(s);
        self.apply_suppressions()
    }

    pub fn suppressor(&self) -> Option<Arc<Suppressions>> {
        self.suppressor.read().clone()
    }

    /// Removes the active findings a suppression in force matches: from the store first,
    /// then from memory. Returns how many were removed.
    pub fn apply_suppressions(&self) -> Result<usize, crate::store::StoreError> {
        let Some(s) = self.suppressor() else {
            return Ok(0);
        };
        let _dispatch = self.dispatch_lock.lock();
        let keys: Vec<(String, String)> = self
            .active
            .read()
            .iter()
            .filter(|f| s.is_suppressed(f))
            .map(|f| (f.check.clone(), f.message.clone()))
            .collect();
        if keys.is_empty() {
            return Ok(0);
        }
        let gone = keys.clone();
        self.store
            .write(move |c| store::findings::delete_active(c, &gone))?;
        Ok(self.active.write().remove(&keys))
    }

    /// Which items of `batch` a suppression keeps out of the active set.
    fn suppressed_mask(&self, batch: &[Ingest]) -> Vec<bool> {
        let s = self.suppressor();
        let s = s.as_deref().filter(|s| s.any_in_force());
        batch
            .iter()
            .map(|item| match (item, s) {
                (Ingest::Finding(f), Some(s)) => s.is_suppressed(f),
                _ => false,
            })
            .collect()
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
        let ok = self.queue.try_push(item).is_ok();
        if !ok {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
        ok
    }

    /// Waits up to `timeout` for `item` to be admitted (used by scan jobs, which must not
    /// lose a completion marker to a momentarily full queue).
    pub fn submit_wait(&self, item: Ingest, timeout: Duration) -> bool {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let ok = self.queue.push_timeout(item, timeout).is_ok();
        if !ok {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
        ok
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

    /// The active set, sorted by severity then newest.
    pub fn active(&self) -> Vec<Finding> {
        self.active.read().sorted()
    }

    pub fn active_version(&self) -> u64 {
        self.active.read().version()
    }

    pub fn active_len(&self) -> usize {
        self.active.read().len()
    }

    /// (version, number of findings) of the active set, read together under one lock
    /// without copying the set: cheap enough to poll every second.
    pub fn version_and_len(&self) -> (u64, usize) {
        let a = self.active.read();
        (a.version(), a.len())
    }

    /// (critical, high, warning) counts of the active set.
    pub fn severity_counts(&self) -> (u64, u64, u64) {
        self.active_summary().counts
    }

    /// Counts over the active set, recomputed only when the set changed since the last call
    /// (status is polled far more often than findings change).
    pub fn active_summary(&self) -> Arc<ActiveSummary> {
        let active = self.active.read();
        let version = active.version();
        let mut cache = self.summary.lock();
        if let Some(s) = cache.as_ref().filter(|s| s.version == version) {
            return s.clone();
        }
        let mut unattributed = std::collections::BTreeMap::new();
        for f in active.iter().filter(|f| f.account.is_none()) {
            *unattributed.entry(f.check.clone()).or_insert(0u64) += 1;
        }
        let s = Arc::new(ActiveSummary {
            version,
            counts: active.severity_counts(),
            unattributed,
        });
        *cache = Some(s.clone());
        s
    }

    /// Merges into the active set since start.
    pub fn merges(&self) -> u64 {
        self.active.read().merges
    }

    /// Runs `f` with read access to the active set.
    pub fn with_active<R>(&self, f: impl FnOnce(&ActiveSet) -> R) -> R {
        f(&self.active.read())
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
    }

    fn replay_parked(&self) {
        let health = self.pending_row.health();
        let parked = match self.pending_file.read() {
            Ok(p) => p,
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
        let _dispatch = self.dispatch_lock.lock();
        let mask = self.suppressed_mask(&batch);
        if self.commit(&batch, &mask).is_ok() {
            if let Err(e) = self.pending_file.remove() {
                log::warn!("state.pending: replayed but cannot remove the file: {e}");
            }
            self.counters
                .replayed
                .fetch_add(n as u64, Ordering::Relaxed);
            health.state_read_ok(0);
            log::info!("replayed {n} parked findings into the store");
            self.apply(&batch, &mask);
        } else {
            // Still parked: keep them for the next start; show them in memory too.
            let findings: Vec<Finding> = batch
                .into_iter()
                .filter_map(|i| match i {
                    Ingest::Finding(f) => Some(*f),
                    _ => None,
                })
                .collect();
            health.set_waiting(findings.len() as u64);
            *self.parked.lock() = findings;
        }
    }

    fn run(&self) {
        let mut batch: Vec<Ingest> = Vec::with_capacity(BATCH);
        let mut last_expiry = self.clock.monotonic_nanos();
        loop {
            match self.queue.pop_timeout(Duration::from_millis(500)) {
                Ok(first) => {
                    let running = self.queue.health().start_running();
                    batch.push(first.finish());
                    while batch.len() < BATCH {
                        match self.queue.try_pop() {
                            Some(g) => batch.push(g.finish()),
                            None => break,
                        }
                    }
                    self.dispatch(&mut batch);
                    running.finish();
                }
                Err(PopError::Timeout) => {}
                Err(PopError::Closed) => break,
            }
            let now = self.clock.monotonic_nanos();
            if now - last_expiry > 60_000_000_000 {
                last_expiry = now;
                self.expire_quiet_events();
            }
        }
        // Closed: drain whatever remains (not a loss).
        let rest = self.queue.drain();
        if !rest.is_empty() {
            let mut rest = rest;
            self.dispatch(&mut rest);
        }
    }

    fn expire_quiet_events(&self) {
        let ttl = jiff::SignedDuration::try_from(EVENT_FINDING_TTL).unwrap_or_default();
        let cutoff = self
            .clock
            .now()
            .checked_sub(ttl)
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let scheduled = self.scheduled_checks.read().clone();
        let gone = self
            .active
            .write()
            .expire(cutoff, |c| !scheduled.contains(c));
        if !gone.is_empty() {
            let _ = self
                .store
                .write_detached(move |c| store::findings::delete_active(c, &gone));
        }
    }

    /// Commits and applies one batch. On store failure the findings are parked.
    fn dispatch(&self, batch: &mut Vec<Ingest>) {
        self.counters.batches.fetch_add(1, Ordering::Relaxed);
        let dispatch = self.dispatch_lock.lock();
        let mask = self.suppressed_mask(batch);
        match self.commit(batch, &mask) {
            Ok(()) => {}
            Err(e) => {
                log::error!("findings: store refused a batch ({e}); parking its findings");
                self.park(batch);
            }
        }
        self.apply(batch, &mask);
        drop(dispatch);
        self.in_flight
            .fetch_sub(batch.len() as u64, Ordering::SeqCst);
        batch.clear();
    }

    /// Writes history, merged active rows, resolutions and checkpoints in one transaction.
    fn commit(
        &self,
        batch: &[Ingest],
        suppressed: &[bool],
    ) -> Result<(), crate::store::StoreError> {
        // Compute the merged active rows on a copy so memory changes only after commit.
        let (merged, resolved) = {
            let active = self.active.read();
            let mut merged: std::collections::HashMap<(String, String), Finding> =
                std::collections::HashMap::new();
            let mut resolved: Vec<(String, String)> = Vec::new();
            for (i, item) in batch.iter().enumerate() {
                match item {
                    Ingest::Finding(_) if suppressed.get(i).copied().unwrap_or(false) => {}
                    Ingest::Finding(f) => {
                        let key = (f.check.clone(), f.message.clone());
                        let base = merged
                            .get(&key)
                            .cloned()
                            .or_else(|| active.get(&f.check, &f.message).cloned());
                        let next = match base {
                            Some(mut e) => {
                                super::active::merge_into(&mut e, f);
                                e
                            }
                            None => (**f).clone(),
                        };
                        merged.insert(key, next);
                    }
                    Ingest::CheckCompleted { check, messages } => {
                        for f in active
                            .iter()
                            .filter(|f| &f.check == check && !messages.contains(&f.message))
                        {
                            resolved.push((f.check.clone(), f.message.clone()));
                        }
                        merged.retain(|(c, m), _| c != check || messages.contains(m));
                    }
                    Ingest::Checkpoint { .. } => {}
                }
            }
            (merged.into_values().collect::<Vec<_>>(), resolved)
        };
        let history: Vec<Finding> = batch
            .iter()
            .filter_map(|i| match i {
                Ingest::Finding(f) => Some((**f).clone()),
                _ => None,
            })
            .collect();
        let checkpoints: Vec<(String, u64, u64)> = batch
            .iter()
            .filter_map(|i| match i {
                Ingest::Checkpoint {
                    source,
                    inode,
                    offset,
                } => Some((source.clone(), *inode, *offset)),
                _ => None,
            })
            .collect();
        let now = self.clock.now();
        self.store.write(move |c| {
            let h: Vec<&Finding> = history.iter().collect();
            store::findings::insert_history(c, &h)?;
            let m: Vec<&Finding> = merged.iter().collect();
            store::findings::upsert_active(c, &m)?;
            store::findings::delete_active(c, &resolved)?;
            for (source, inode, offset) in &checkpoints {
                store::findings::save_checkpoint(c, source, *inode, *offset, now)?;
            }
            Ok(())
        })
    }

    fn park(&self, batch: &[Ingest]) {
        let health = self.pending_row.health();
        let mut parked = self.parked.lock();
        for item in batch {
            if let Ingest::Finding(f) = item {
                parked.push((**f).clone());
                self.counters.parked.fetch_add(1, Ordering::Relaxed);
            }
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
        match self.pending_file.write(&parked) {
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

    fn apply(&self, batch: &[Ingest], suppressed: &[bool]) {
        let mut dispatched: Vec<Finding> = Vec::new();
        let mut kept_out = 0u64;
        {
            let mut active = self.active.write();
            for (i, item) in batch.iter().enumerate() {
                match item {
                    Ingest::Finding(_) if suppressed.get(i).copied().unwrap_or(false) => {
                        kept_out += 1;
                    }
                    Ingest::Finding(f) => dispatched.push(active.merge(f)),
                    Ingest::CheckCompleted { check, messages } => {
                        active.resolve_check(check, messages);
                    }
                    Ingest::Checkpoint { .. } => {}
                }
            }
        }
        self.counters
            .dispatched
            .fetch_add(dispatched.len() as u64, Ordering::Relaxed);
        self.counters
            .suppressed
            .fetch_add(kept_out, Ordering::Relaxed);
        let listeners = self.listeners.read();
        for f in &dispatched {
            for l in listeners.iter() {
                l(f);
            }
        }
    }
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
        e.submit_item(Ingest::CheckCompleted {
            check: "uid0_account".into(),
            messages: vec![],
        });
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
        e.submit_item(Ingest::CheckCompleted {
            check: "uid0_account".into(),
            messages: vec!["extra uid 0: toor".into(), "extra uid 0: evil".into()],
        });
        assert!(e.flush(Duration::from_secs(5)));
        assert_eq!(e.active_len(), 2);
        e.submit(mk("extra uid 0: toor"));
        e.submit_item(Ingest::CheckCompleted {
            check: "uid0_account".into(),
            messages: vec!["extra uid 0: toor".into()],
        });
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
}
