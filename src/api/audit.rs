//! The action log: audit records of state-changing requests, written through the
//! `actionlog.writes` queue row.
//!
//! ```text
//! request --record (waits <= 250 ms for a slot)--> [actionlog.writes: 64] --> actionlog thread
//!     --> one store transaction per batch: INSERT the records, trim to the newest N
//! ```
//!
//! Guarantees:
//! - A request waits at most [`CALLER_WAIT`] for one of the [`SLOTS`] process-wide slots;
//!   a record that finds none is refused and counted once as a loss on the row (and in
//!   `svc_audit_dropped_total`), with one log line a minute saying how many.
//! - Records that the store could not commit are losses too; a commit whose outcome is
//!   unknown (the writer did not answer in time) marks the row `persistence_uncertain`.
//! - Stored text is bounded: `target` at most [`MAX_TARGET_CHARS`] characters, the actor at
//!   most [`MAX_ACTOR_CHARS`], the address at most 64.
//! - The table keeps the newest `webui.audit_max_entries` records (default
//!   [`DEFAULT_MAX_ENTRIES`]): the writer trims it in the same transaction as each batch.
//!   Ids are assigned in order and nothing else deletes audit rows, so "ids at or below the
//!   newest id minus N" are exactly the older rows; the trim deletes only what overflowed.
//! - [`AuditLog::shutdown`] refuses new records (not a loss), writes what waits, and returns
//!   once the writer has finished; the daemon calls it before closing the store.
//! - Requests that failed authentication (401, 429) are never recorded (see the router).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use jiff::Timestamp;
use parking_lot::Mutex;

use crate::clock::SharedClock;
use crate::lograte::LogLimiter;
use crate::queue::{
    BoundedQueue, LagBasis, PopError, RefuseReason, Registry, RowConfig, RowHandle, Uncertain,
};
use crate::store::audit::Row as Record;
use crate::store::{Store, StoreError};

/// Name of the queue row.
pub const ROW: &str = "actionlog.writes";
/// Process-wide write slots (records waiting for the writer).
pub const SLOTS: usize = 64;
/// How long a request waits for a slot before its record is refused.
pub const CALLER_WAIT: Duration = Duration::from_millis(250);
/// Longest stored `target`, in characters.
pub const MAX_TARGET_CHARS: usize = 256;
/// Longest stored actor name, in characters.
pub const MAX_ACTOR_CHARS: usize = 128;
/// Default of `webui.audit_max_entries`.
pub const DEFAULT_MAX_ENTRIES: u64 = crate::config::DEFAULT_AUDIT_MAX_ENTRIES;

/// One audit record.
pub struct Entry<'a> {
    pub at: Timestamp,
    pub actor: &'a str,
    pub via: &'a str,
    pub action: &'a str,
    pub target: &'a str,
    pub outcome: &'a str,
    pub remote_ip: &'a str,
}

fn bounded(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        None => s.to_string(),
        Some((end, _)) => s[..end].to_string(),
    }
}

impl Record {
    fn from_entry(e: &Entry<'_>) -> Record {
        Record {
            at_us: e.at.as_microsecond(),
            actor: bounded(e.actor, MAX_ACTOR_CHARS),
            via: bounded(e.via, 32),
            action: bounded(e.action, 64),
            target: bounded(e.target, MAX_TARGET_CHARS),
            outcome: bounded(e.outcome, 32),
            remote_ip: bounded(e.remote_ip, 64),
        }
    }
}

struct Shared {
    queue: BoundedQueue<Record>,
    store: Store,
    keep: u64,
    log: LogLimiter,
}

/// The action log. See the module documentation.
pub struct AuditLog {
    shared: Arc<Shared>,
    _row: Option<RowHandle>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl AuditLog {
    /// Registers the `actionlog.writes` row and starts the writer thread. `keep` is
    /// `webui.audit_max_entries`.
    pub fn start(
        store: Store,
        clock: SharedClock,
        registry: &Arc<Registry>,
        keep: u64,
    ) -> AuditLog {
        let queue = BoundedQueue::new(
            clock.clone(),
            RowConfig::new("records")
                .capacity(SLOTS as u64)
                .lag_basis(LagBasis::ConsumerProgress)
                .running_slots(1),
        )
        .expect("a fixed capacity of 64 is valid");
        let row = match registry.register(ROW, queue.health().clone()) {
            Ok(h) => Some(h),
            Err(e) => {
                log::error!(
                    "audit: {ROW} row not registered ({e}); audit writes continue unlisted"
                );
                None
            }
        };
        let shared = Arc::new(Shared {
            queue,
            store,
            keep: keep.max(1),
            log: LogLimiter::per_minute(clock),
        });
        let writer = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("actionlog".into())
                .spawn(move || writer_loop(&shared))
        };
        let writer = match writer {
            Ok(h) => Some(h),
            Err(e) => {
                log::error!("audit: cannot start the writer thread: {e}");
                shared
                    .queue
                    .health()
                    .set_flag(crate::queue::Flag::ConsumerStopped, true);
                None
            }
        };
        AuditLog {
            shared,
            _row: row,
            writer: Mutex::new(writer),
        }
    }

    /// Queues one record, waiting at most [`CALLER_WAIT`] for a slot. A refusal is one loss
    /// on the row (none during shutdown).
    pub fn record(&self, e: Entry<'_>) {
        let s = &self.shared;
        if let Err(refused) = s.queue.push_timeout(Record::from_entry(&e), CALLER_WAIT) {
            if refused.reason() == RefuseReason::Closed {
                let _ = refused.withdraw();
                return;
            }
            crate::warn_limited!(
                s.log,
                "audit_lost",
                "",
                "audit: record {} by {} not written: all {SLOTS} action-log slots stayed busy for {} ms",
                e.action,
                crate::text::Escaped(e.actor),
                CALLER_WAIT.as_millis()
            );
            // Dropping the refusal counts the loss.
            drop(refused);
        }
    }

    /// Records lost since start (refused or not committed).
    pub fn dropped(&self) -> u64 {
        self.shared.queue.health().dropped_total()
    }

    /// Refuses new records, writes the waiting ones and stops the writer. Idempotent.
    pub fn shutdown(&self) {
        self.shared.queue.close();
        if let Some(h) = self.writer.lock().take() {
            let _ = h.join();
        }
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn writer_loop(s: &Shared) {
    let q = &s.queue;
    loop {
        let first = match q.pop_timeout(Duration::from_millis(500)) {
            Ok(g) => g,
            Err(PopError::Timeout) => continue,
            Err(PopError::Closed) => return,
        };
        let mut running = Vec::with_capacity(SLOTS);
        let mut records = Vec::with_capacity(SLOTS);
        let (item, _, guard) = first.into_parts();
        records.push(item);
        running.push(guard);
        while records.len() < SLOTS {
            let Some(g) = q.try_pop() else { break };
            let (item, _, guard) = g.into_parts();
            records.push(item);
            running.push(guard);
        }
        let n = records.len();
        let keep = s.keep;
        match s
            .store
            .write(move |c| crate::store::audit::insert_and_trim(c, &records, keep))
        {
            Ok(()) => running.into_iter().for_each(|g| g.finish()),
            Err(StoreError::Timeout) => {
                // The batch may still commit: an unknown outcome, not a counted loss.
                q.health().note_uncertain(Uncertain::Persistence);
                running.into_iter().for_each(|g| g.cancel());
                crate::warn_limited!(
                    s.log,
                    "audit_uncertain",
                    "",
                    "audit: {n} records may not have been written: the store did not answer in time"
                );
            }
            Err(e) => {
                running.into_iter().for_each(|g| g.lose());
                crate::warn_limited!(
                    s.log,
                    "audit_failed",
                    "",
                    "audit: {n} records not written: {e}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn setup(tag: &str, keep: u64) -> (AuditLog, Store, Arc<Registry>, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("svc-audit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let registry = Registry::new();
        let log = AuditLog::start(store.clone(), ManualClock::at_epoch_2026(), &registry, keep);
        (log, store, registry, dir)
    }

    fn entry<'a>(target: &'a str) -> Entry<'a> {
        Entry {
            at: Timestamp::from_second(1_767_225_600).unwrap(),
            actor: "ops",
            via: "token",
            action: "suppression.delete",
            target,
            outcome: "ok",
            remote_ip: "192.0.2.1",
        }
    }

    fn targets(store: &Store) -> Vec<String> {
        store
            .read(|c| {
                let mut st = c.prepare("SELECT target FROM audit ORDER BY id")?;
                let rows = st.query_map([], |r| r.get(0))?;
                rows.collect()
            })
            .unwrap()
    }

    #[test]
    fn records_are_bounded_trimmed_and_flushed_at_shutdown() {
        let (log, store, registry, dir) = setup("trim", 5);
        assert!(registry.snapshot().contains_key(ROW));
        let long = "é".repeat(10_000);
        log.record(entry(&long));
        for i in 0..20 {
            log.record(entry(&i.to_string()));
        }
        log.shutdown();
        let t = targets(&store);
        assert_eq!(t, ["15", "16", "17", "18", "19"]);
        // Recording after shutdown is refused without a loss.
        log.record(entry("late"));
        assert_eq!(log.dropped(), 0);
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn long_targets_are_cut() {
        let (log, store, _registry, dir) = setup("cut", 100);
        log.record(entry(&"é".repeat(10_000)));
        log.shutdown();
        let t = targets(&store);
        assert_eq!(t[0].chars().count(), MAX_TARGET_CHARS);
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn failed_commits_are_losses() {
        let (log, store, registry, dir) = setup("lost", 100);
        store.close();
        log.record(entry("x"));
        log.shutdown();
        assert_eq!(log.dropped(), 1);
        assert_eq!(registry.snapshot()[ROW].dropped_total, 1);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
