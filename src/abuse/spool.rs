//! The durable report spool: row `abuse_reporting.spool`, table `abuse_spool`.
//!
//! Guarantees:
//! - [`Spool::admit`] spools a report once per destination, with only the categories not
//!   sent to that destination within its dedup window (`dedup_window_hours`); the dedup
//!   marks are in the store, so they hold across restarts. A report whose every category
//!   was sent within the window is not spooled (counted as deduplicated, not a loss).
//! - At most `spool_limit` rows over every destination. Admission beyond it removes the
//!   oldest rows first, never one in delivery: one loss each.
//! - Depth and waiting age come from an in-memory list of ids (loaded at start), so health
//!   reads never touch the store. Rows found at start are aged from that moment ("first
//!   observation"). A row in delivery is `running`, not waiting; a row waiting for its
//!   next attempt after a failure is waiting and keeps its age, so a destination that
//!   cannot be reached degrades the row after two minutes (`observed_lag`).
//! - A store failure on admission is one loss (on the ingress row, which owns the report)
//!   and sets `spool_io`; an unknown commit outcome (timeout) reports
//!   `persistence_uncertain` and re-reads the ids at the next turn.
//! - Rows of a destination no longer configured are removed at start: one loss each.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;
use parking_lot::Mutex;

use crate::clock::SharedClock;
use crate::queue::{LagBasis, QueueHealth, Registry, RowConfig, RowHandle, SpoolLedger};
use crate::store::abuse::{NewReport, SpoolRow};
use crate::store::{Store, StoreError};

/// Name of the health row.
pub const ROW: &str = "abuse_reporting.spool";
/// Age of the oldest waiting report that degrades the row.
pub const LAG_BUDGET: Duration = Duration::from_secs(120);

/// Counters (atomics, since start).
#[derive(Default, Debug)]
pub struct Counters {
    /// Rows spooled (one per report and destination).
    pub spooled: AtomicU64,
    /// Report-destination pairs not spooled: every category sent within the window.
    pub deduplicated: AtomicU64,
    /// Rows delivered (2xx).
    pub delivered: AtomicU64,
    /// Rows the destination refused for good (removed, counted as loss).
    pub rejected: AtomicU64,
    /// Rows removed to stay within capacity.
    pub evicted: AtomicU64,
    /// Failed delivery attempts (the row stays).
    pub failed_attempts: AtomicU64,
}

/// Outcome of [`Spool::admit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Committed (possibly fully deduplicated).
    Stored,
    /// Maybe committed (timeout): not a loss, the total becomes a lower bound.
    Uncertain,
    /// Not stored.
    Failed,
}

/// The durable spool: one ledger lane per destination.
pub struct Spool {
    store: Store,
    clock: SharedClock,
    ledger: SpoolLedger,
    _row: RowHandle,
    capacity: usize,
    /// (name, dedup window in microseconds) per destination.
    dests: Vec<(String, i64)>,
    push_lock: Mutex<()>,
    pub counters: Counters,
    logs: crate::lograte::LogLimiter,
}

impl Spool {
    /// Registers the row and loads the ids of spooled rows. `dests`: (name, dedup window).
    pub fn open(
        store: Store,
        clock: SharedClock,
        registry: &Arc<Registry>,
        capacity: usize,
        dests: Vec<(String, Duration)>,
    ) -> Result<Spool, super::ReportError> {
        let capacity = capacity.max(1);
        let mut config = RowConfig::new("reports")
            .capacity(capacity as u64)
            .lag_basis(LagBasis::ObservedAge)
            .running_slots(dests.len().max(1));
        config.lag_budget = LAG_BUDGET;
        let health = QueueHealth::new(clock.clone(), config);
        let row = registry
            .register(ROW, health.clone())
            .map_err(crate::queue::RowError::at(ROW))
            .map_err(super::ReportError::Queue)?;
        let logs = crate::lograte::LogLimiter::new(clock.clone(), Duration::from_secs(60), 8);
        let spool = Spool {
            store,
            clock,
            ledger: SpoolLedger::new(health, dests.len()),
            _row: row,
            capacity,
            dests: dests
                .into_iter()
                .map(|(name, w)| (name, i64::try_from(w.as_micros()).unwrap_or(i64::MAX)))
                .collect(),
            push_lock: Mutex::new(()),
            counters: Counters::default(),
            logs,
        };
        let (n, orphans) = spool.load_ids().map_err(super::ReportError::Spool)?;
        if !orphans.is_empty() {
            let k = orphans.len();
            spool
                .store
                .write(move |c| crate::store::abuse::remove(c, &orphans))
                .map_err(super::ReportError::Spool)?;
            spool.health().record_losses(k as u64);
            log::warn!("{ROW}: {k} report(s) for destinations no longer configured dropped");
        }
        if n > 0 {
            log::info!("{ROW}: {n} report(s) waiting from before the restart");
        }
        Ok(spool)
    }

    /// Re-reads the ids; returns how many belong to a destination and the ids of rows that
    /// belong to none.
    fn load_ids(&self) -> Result<(usize, Vec<i64>), StoreError> {
        let rows = self.store.read(crate::store::abuse::ids)?;
        let mut known = Vec::with_capacity(rows.len());
        let mut orphans = Vec::new();
        for (id, dest) in rows {
            match self.dests.iter().position(|(d, _)| *d == dest) {
                Some(lane) => known.push((id, lane)),
                None => orphans.push(id),
            }
        }
        Ok((self.ledger.reload(known), orphans))
    }

    /// The row's health.
    pub fn health(&self) -> &Arc<QueueHealth> {
        self.ledger.health()
    }

    /// Destinations, in configuration order.
    pub fn destinations(&self) -> usize {
        self.dests.len()
    }

    /// Rows in the spool (waiting and in delivery).
    pub fn len(&self) -> usize {
        self.ledger.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ledger.is_empty()
    }

    /// Rows of destination `dest`.
    pub fn len_of(&self, dest: usize) -> usize {
        self.ledger.len_of(dest)
    }

    /// Spools `r` for every destination (dedup per destination, overflow drops the oldest).
    pub fn admit(&self, r: NewReport) -> Admit {
        let _order = self.push_lock.lock();
        let (held, keep) = (self.ledger.len(), self.ledger.in_flight());
        let stamp = self.health().stamp();
        let now = self.clock.now().as_microsecond();
        let (dests, capacity) = (self.dests.clone(), self.capacity);
        let result = self
            .store
            .write(move |c| crate::store::abuse::admit(c, &dests, &r, now, held, capacity, &keep));
        match result {
            Ok(a) => {
                self.ledger.admitted(&a.inserted, &a.evicted, stamp);
                let c = &self.counters;
                c.spooled
                    .fetch_add(a.inserted.len() as u64, Ordering::Relaxed);
                c.deduplicated
                    .fetch_add(a.deduplicated as u64, Ordering::Relaxed);
                if !a.evicted.is_empty() {
                    c.evicted
                        .fetch_add(a.evicted.len() as u64, Ordering::Relaxed);
                    self.health().record_losses(a.evicted.len() as u64);
                    crate::warn_limited!(
                        self.logs,
                        "spool_full",
                        "",
                        "{ROW}: full ({} reports): the oldest report(s) dropped for new ones",
                        self.capacity
                    );
                }
                Admit::Stored
            }
            Err(StoreError::Timeout) => {
                self.ledger.store_failed(true);
                crate::warn_limited!(
                    self.logs,
                    "spool_timeout",
                    "",
                    "{ROW}: spooling a report timed out; it may not be sent"
                );
                Admit::Uncertain
            }
            Err(e) => {
                self.ledger.store_failed(false);
                crate::warn_limited!(
                    self.logs,
                    "spool_error",
                    "",
                    "{ROW}: cannot spool a report: {e}"
                );
                Admit::Failed
            }
        }
    }

    /// The oldest row of destination `dest`, marked in delivery (`running`). An empty
    /// destination is answered from memory.
    pub fn take(&self, dest: usize) -> Result<Option<SpoolRow>, StoreError> {
        // Admissions pick overflow victims under this lock: the row read here is marked in
        // delivery before any of them can choose it.
        let _order = self.push_lock.lock();
        if self.ledger.resync_due() {
            if let Err(e) = self.load_ids() {
                self.ledger.request_resync();
                return Err(e);
            }
        }
        let Some((name, _)) = self.dests.get(dest) else {
            return Ok(None);
        };
        if self.ledger.len_of(dest) == 0 {
            return Ok(None);
        }
        let name = name.clone();
        let r = self
            .store
            .read(move |c| crate::store::abuse::head(c, &name));
        match r {
            // Not started when it was evicted between the read and now.
            Ok(Some(row)) => Ok(self.ledger.start(dest, row.id).then_some(row)),
            Ok(None) => {
                // The memory list is ahead of the store (a resync is due).
                self.ledger.request_resync();
                Ok(None)
            }
            Err(e) => {
                self.ledger.store_failed(false);
                Err(e)
            }
        }
    }

    /// Puts destination `dest`'s row in delivery back to waiting (it keeps its age).
    pub fn release(&self, dest: usize) {
        self.ledger.release(dest);
    }

    /// Removes destination `dest`'s row `id` (delivered or rejected) and ends its delivery.
    pub fn remove(&self, dest: usize, id: i64) -> Result<(), StoreError> {
        let r = self
            .store
            .write(move |c| crate::store::abuse::remove(c, &[id]));
        self.ledger.finish(dest, id, r.is_ok());
        r.map(|_| ())
    }

    /// Forgets dedup marks no window covers any more.
    pub fn prune(&self) {
        let now = self.clock.now().as_microsecond();
        let dests = self.dests.clone();
        let _ = self.store.write_detached(move |c| {
            crate::store::abuse::prune_reported(c, &dests, now).map(|_| ())
        });
    }

    /// Wakes destination `dest`'s sender.
    pub fn wake(&self, dest: usize) {
        self.ledger.wake(dest);
    }

    /// The wake-up receiver of destination `dest`.
    pub(crate) fn waker(&self, dest: usize) -> Option<Receiver<()>> {
        self.ledger.waker(dest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::queue::{Condition, Row, Status};

    fn report(ip: &str, cats: &[&str]) -> NewReport {
        NewReport {
            ip: ip.into(),
            categories: cats.iter().map(|s| s.to_string()).collect(),
            comment: "c".into(),
            at: 0,
        }
    }

    fn row(reg: &Registry) -> Row {
        reg.snapshot()[ROW].clone()
    }

    #[test]
    fn dedup_survives_a_reopen_overflow_counts_and_lag_degrades_after_two_minutes() {
        let dir = std::env::temp_dir().join(format!("svc-abuse-spool-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let clock = ManualClock::at_epoch_2026();
        let dests = vec![
            ("a".to_string(), Duration::from_secs(3600)),
            ("b".to_string(), Duration::from_secs(3600)),
        ];
        let reg = Registry::new();
        let s = Spool::open(store.clone(), clock.clone(), &reg, 4, dests.clone()).unwrap();
        assert_eq!(
            s.admit(report("192.0.2.1", &["brute_force"])),
            Admit::Stored
        );
        assert_eq!(s.len(), 2);
        let r = row(&reg);
        assert_eq!((r.waiting, r.capacity), (Some(2), Some(4)));
        assert_eq!(r.depth_unit, "reports");
        // In delivery: running, not waiting.
        let head = s.take(0).unwrap().unwrap();
        assert_eq!(head.ip, "192.0.2.1");
        assert_eq!(row(&reg).waiting, Some(1));
        s.release(0);
        clock.advance_secs(121);
        let r = row(&reg);
        assert!(r.conditions.contains(&Condition::ObservedLag), "{r:?}");
        assert_eq!(r.status, Status::Degraded);
        drop(s);
        // Reopened: the rows wait again (aged from now), dedup marks hold.
        let reg = Registry::new();
        let s = Spool::open(store.clone(), clock.clone(), &reg, 4, dests.clone()).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(row(&reg).status, Status::Ok);
        assert_eq!(
            s.admit(report("192.0.2.1", &["brute_force"])),
            Admit::Stored
        );
        assert_eq!(s.counters.deduplicated.load(Ordering::Relaxed), 2);
        assert_eq!(s.len(), 2);
        // Overflow: 2 + 2 new + 2 new = 6 > 4: the two oldest go, except one in delivery.
        let head = s.take(1).unwrap().unwrap();
        assert_eq!(s.admit(report("192.0.2.2", &["ssh"])), Admit::Stored);
        assert_eq!(s.admit(report("192.0.2.3", &["ssh"])), Admit::Stored);
        assert_eq!(s.len(), 4);
        assert_eq!(row(&reg).dropped_total, 2);
        s.remove(1, head.id).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s.len_of(1), 2);
        // 192.0.2.2's row for a was the oldest not in delivery: evicted.
        assert_eq!(s.take(0).unwrap().unwrap().ip, "192.0.2.3");
        drop(s);
        // A destination removed from the configuration: its rows are dropped as losses.
        let reg = Registry::new();
        let s = Spool::open(store.clone(), clock, &reg, 4, dests[..1].to_vec()).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(row(&reg).dropped_total, 2);
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
