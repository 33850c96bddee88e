//! The durable webhook queue: row `panel.spool`, table `webhook_spool`.
//!
//! Guarantees:
//! - [`Spool::push`] returns true only after the notification is committed to the store: a
//!   notification accepted before a crash or restart is delivered after it.
//! - At most [`CAPACITY`] records per state directory (one store). A push into a full spool
//!   first removes the oldest waiting record (never the one in delivery): one loss each.
//! - Depth and waiting age come from an in-memory list of record ids (8 bytes and a stamp per
//!   record, loaded at start), so health reads never touch the store. Records found at start
//!   are aged from that moment ("first observation").
//! - A store failure on push is one loss (the notification is not spooled) and sets
//!   `spool_io`; a failed removal sets `spool_io` too. The next successful spool write
//!   clears it. A push whose commit outcome is unknown (timeout) reports
//!   `persistence_uncertain` and re-reads the list of ids on the next idle turn.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::clock::SharedClock;
use crate::queue::{QueueHealth, Registry, RowConfig, RowHandle, SpoolLedger};
use crate::store::spool::SpoolRecord;
use crate::store::{Store, StoreError};

/// Name of the health row.
pub const ROW: &str = "panel.spool";
/// Records per state directory (spec: 100,000).
pub const CAPACITY: usize = 100_000;

/// The durable queue: one ledger lane.
pub struct Spool {
    store: Store,
    clock: SharedClock,
    ledger: SpoolLedger,
    _row: RowHandle,
    capacity: usize,
    /// Serializes pushes so overflow picks consistent victims.
    push_lock: Mutex<()>,
    logs: crate::lograte::LogLimiter,
}

impl Spool {
    /// Registers `panel.spool` and loads the ids of spooled records.
    pub fn open(
        store: Store,
        clock: SharedClock,
        registry: &Arc<Registry>,
        capacity: usize,
    ) -> Result<Spool, super::AlertsError> {
        let health = QueueHealth::new(
            clock.clone(),
            RowConfig::new("records")
                .capacity(capacity as u64)
                .running_slots(1),
        );
        let row = registry
            .register(ROW, health.clone())
            .map_err(crate::queue::RowError::at(ROW))
            .map_err(super::AlertsError::Queue)?;
        let logs = crate::lograte::LogLimiter::new(clock.clone(), Duration::from_secs(60), 8);
        let spool = Spool {
            logs,
            store,
            clock,
            ledger: SpoolLedger::new(health, 1),
            _row: row,
            capacity: capacity.max(1),
            push_lock: Mutex::new(()),
        };
        let n = spool.load_ids().map_err(super::AlertsError::Spool)?;
        if n > 0 {
            log::info!("{ROW}: {n} notification(s) waiting from before the restart");
        }
        Ok(spool)
    }

    fn load_ids(&self) -> Result<usize, StoreError> {
        let ids = self.store.read(crate::store::spool::ids)?;
        Ok(self.ledger.reload(ids.into_iter().map(|id| (id, 0))))
    }

    /// The row's health (shared with the worker's running guard).
    pub fn health(&self) -> &Arc<QueueHealth> {
        self.ledger.health()
    }

    /// Records in the spool (waiting and in delivery).
    pub fn len(&self) -> usize {
        self.ledger.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ledger.is_empty()
    }

    /// Spools one notification; true once it is committed. Overflow removes the oldest
    /// waiting records first (one loss each).
    pub fn push(&self, describe: &str, body: &[u8]) -> bool {
        let _order = self.push_lock.lock();
        let victims = self.ledger.overflow_victims(1, self.capacity);
        let stamp = self.health().stamp();
        let created = self.clock.now().as_microsecond();
        let (d, b, v) = (describe.to_string(), body.to_vec(), victims.clone());
        let result = self
            .store
            .write(move |c| crate::store::spool::push(c, created, &d, &b, &v));
        match result {
            Ok((id, evicted)) => {
                self.ledger.admitted(&[(id, 0)], &victims, stamp);
                if evicted > 0 {
                    self.health().record_losses(evicted as u64);
                    crate::warn_limited!(
                        self.logs,
                        "spool_full",
                        "",
                        "{ROW}: full ({} records): the oldest notification(s) dropped for new ones",
                        self.capacity
                    );
                }
                true
            }
            Err(StoreError::Timeout) => {
                // Maybe committed: it is delivered if it was; the ids are re-read.
                self.ledger.store_failed(true);
                crate::warn_limited!(
                    self.logs,
                    "spool_timeout",
                    "",
                    "{ROW}: spooling {describe} timed out; it may not be delivered"
                );
                false
            }
            Err(e) => {
                self.ledger.store_failed(false);
                self.health().record_loss();
                crate::warn_limited!(
                    self.logs,
                    "spool_error",
                    "",
                    "{ROW}: cannot spool {describe}: {e}"
                );
                false
            }
        }
    }

    /// The oldest record (the next to deliver). An empty spool is answered from memory.
    pub fn head(&self) -> Result<Option<SpoolRecord>, StoreError> {
        if self.ledger.resync_due() {
            if let Err(e) = self.load_ids() {
                self.ledger.request_resync();
                return Err(e);
            }
        }
        if self.ledger.is_empty() {
            return Ok(None);
        }
        let r = self.store.read(crate::store::spool::head);
        if r.is_err() {
            self.ledger.store_failed(false);
        }
        r
    }

    /// Marks `id` as in delivery (`0`: none); it leaves `waiting` and is never evicted.
    pub fn set_in_flight(&self, id: i64) {
        if id == 0 {
            self.ledger.release(0);
        } else {
            self.ledger.start(0, id);
        }
    }

    /// Removes a delivered or given-up record. Until that succeeds the record stays in
    /// delivery (the worker retries the removal, never the delivery).
    pub fn remove(&self, id: i64) -> Result<(), StoreError> {
        let r = self
            .store
            .write(move |c| crate::store::spool::remove(c, id));
        match r {
            Ok(_) => {
                self.ledger.finish(0, id, true);
                Ok(())
            }
            Err(e) => {
                self.ledger.store_failed(false);
                Err(e)
            }
        }
    }

    /// Waits up to `d` for a push (or [`Spool::wake`]).
    pub fn wait(&self, d: Duration) {
        self.ledger.wait(0, d);
    }

    /// Wakes a waiting worker.
    pub fn wake(&self) {
        self.ledger.wake(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::queue::{Condition, Row};

    fn setup(
        tag: &str,
        capacity: usize,
    ) -> (
        Spool,
        Store,
        Arc<Registry>,
        Arc<ManualClock>,
        std::path::PathBuf,
    ) {
        let dir = std::env::temp_dir().join(format!("svc-spool-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let clock = ManualClock::at_epoch_2026();
        let reg = Registry::new();
        let s = Spool::open(store.clone(), clock.clone(), &reg, capacity).unwrap();
        (s, store, reg, clock, dir)
    }

    fn row(reg: &Registry) -> Row {
        reg.snapshot()[ROW].clone()
    }

    #[test]
    fn full_spool_drops_the_oldest_waiting_never_the_one_in_delivery() {
        let (s, store, reg, clock, dir) = setup("full", 3);
        for i in 0..3 {
            assert!(s.push(&format!("n{i}"), format!("{{\"n\":{i}}}").as_bytes()));
            clock.advance_secs(1);
        }
        let r = row(&reg);
        assert_eq!(
            (r.waiting, r.capacity, r.dropped_total),
            (Some(3), Some(3), 0)
        );
        assert_eq!(r.depth_unit, "records");
        assert_eq!(r.oldest_waiting_age_seconds, Some(3.0));
        let head = s.head().unwrap().unwrap();
        assert_eq!(head.describe, "n0");
        s.set_in_flight(head.id);
        assert!(s.push("n3", b"{}"));
        let r = row(&reg);
        assert_eq!(
            (r.waiting, r.dropped_total),
            (Some(2), 1),
            "n1 dropped, n0 kept"
        );
        s.remove(head.id).unwrap();
        s.set_in_flight(0);
        assert_eq!(s.head().unwrap().unwrap().describe, "n2");
        assert_eq!(s.len(), 2);
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn records_survive_a_reopen_and_a_failed_push_is_one_loss_with_spool_io() {
        let (s, store, _reg, _clock, dir) = setup("reopen", 10);
        assert!(s.push("a", b"{\"a\":1}"));
        assert!(s.push("b", b"{\"b\":1}"));
        drop(s);
        let reg = Registry::new();
        let again = Spool::open(store.clone(), ManualClock::at_epoch_2026(), &reg, 10).unwrap();
        assert_eq!(again.len(), 2);
        assert_eq!(again.head().unwrap().unwrap().body, b"{\"a\":1}");
        store
            .write(|c| c.execute_batch("ALTER TABLE webhook_spool RENAME TO gone"))
            .unwrap();
        assert!(!again.push("c", b"{}"));
        let r = row(&reg);
        assert_eq!(r.dropped_total, 1);
        assert!(r.conditions.contains(&Condition::SpoolIo), "{r:?}");
        store
            .write(|c| c.execute_batch("ALTER TABLE gone RENAME TO webhook_spool"))
            .unwrap();
        assert!(again.push("c", b"{}"));
        assert!(row(&reg).conditions.is_empty());
        assert_eq!(again.len(), 3);
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
