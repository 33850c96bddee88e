//! The in-memory ledger of a durable outbound spool: the ids of its rows in the store
//! (oldest first: ids only grow), the lane (destination) of each and when it was admitted,
//! and the row in delivery per lane. It mirrors depth and waiting age into the spool's
//! health row, so health reads never touch the store, and holds each lane's wake-up
//! channel.
//!
//! The webhook spool (`panel.spool`, one lane), the abuse report spool
//! (`abuse_reporting.spool`, one lane per destination) and the fleet alert spool
//! (`fleet.spool`, one lane) keep their own SQL and share this.
//!
//! - Rows found when the ids are (re)loaded are aged from that moment ("first
//!   observation"); a reload keeps the admission instant of ids already known.
//! - A row in delivery is `running`, not waiting, and is never an overflow victim; a row
//!   back to waiting after a failed attempt keeps its age, so a destination that cannot be
//!   reached degrades the row once its oldest row is older than the lag budget.
//! - A write whose outcome is unknown (timeout) reports `persistence_uncertain` and asks for
//!   a reload before the next delivery ([`SpoolLedger::resync_due`]); any other failed write
//!   sets `spool_io`, which the next successful write clears.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};
use parking_lot::Mutex;

use super::{Admitted, Flag, QueueHealth, Uncertain};

struct State {
    /// Id -> (lane, admission instant), oldest first.
    ids: BTreeMap<i64, (usize, Admitted)>,
    /// The row in delivery per lane, or 0.
    in_flight: Vec<i64>,
}

/// See the module documentation.
pub struct SpoolLedger {
    health: Arc<QueueHealth>,
    state: Mutex<State>,
    resync: AtomicBool,
    wakes: Vec<(Sender<()>, Receiver<()>)>,
}

impl SpoolLedger {
    /// An empty ledger of `lanes` lanes (at least one) publishing into `health`.
    pub fn new(health: Arc<QueueHealth>, lanes: usize) -> SpoolLedger {
        let lanes = lanes.max(1);
        SpoolLedger {
            health,
            state: Mutex::new(State {
                ids: BTreeMap::new(),
                in_flight: vec![0; lanes],
            }),
            resync: AtomicBool::new(false),
            wakes: (0..lanes).map(|_| bounded(1)).collect(),
        }
    }

    /// The spool's health row.
    pub fn health(&self) -> &Arc<QueueHealth> {
        &self.health
    }

    /// Replaces the ids with `rows` (id, lane) read from the store and wakes every lane;
    /// returns how many there are.
    pub fn reload(&self, rows: impl IntoIterator<Item = (i64, usize)>) -> usize {
        let stamp = self.health.stamp();
        let mut st = self.state.lock();
        let ids: BTreeMap<i64, (usize, Admitted)> = rows
            .into_iter()
            .map(|(id, lane)| {
                let at = st.ids.get(&id).map_or(stamp, |(_, at)| *at);
                (id, (lane, at))
            })
            .collect();
        st.ids = ids;
        let n = st.ids.len();
        self.publish(&st);
        drop(st);
        self.wake_all();
        n
    }

    /// Records a committed admission made at `stamp`: `inserted` (id, lane) rows added,
    /// `evicted` ids removed; wakes the lanes of the new rows and clears `spool_io`.
    pub fn admitted(&self, inserted: &[(i64, usize)], evicted: &[i64], stamp: Admitted) {
        let mut st = self.state.lock();
        for id in evicted {
            st.ids.remove(id);
        }
        for (id, lane) in inserted {
            st.ids.insert(*id, (*lane, stamp));
        }
        self.publish(&st);
        drop(st);
        self.health.set_flag(Flag::SpoolIo, false);
        for (_, lane) in inserted {
            self.wake(*lane);
        }
    }

    /// Notes a failed store call: a write that `timed_out` (its outcome is unknown) reports
    /// `persistence_uncertain`, asks for a reload and wakes every lane; any other failure
    /// (a read, or a write that failed) sets `spool_io`.
    pub fn store_failed(&self, timed_out: bool) {
        if timed_out {
            self.health.note_uncertain(Uncertain::Persistence);
            self.request_resync();
            self.wake_all();
        } else {
            self.health.set_flag(Flag::SpoolIo, true);
        }
    }

    /// Rows in the spool (waiting and in delivery).
    pub fn len(&self) -> usize {
        self.state.lock().ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows of lane `lane`.
    pub fn len_of(&self, lane: usize) -> usize {
        let st = self.state.lock();
        st.ids.values().filter(|(l, _)| *l == lane).count()
    }

    /// The rows in delivery (never overflow victims).
    pub fn in_flight(&self) -> Vec<i64> {
        let st = self.state.lock();
        st.in_flight.iter().copied().filter(|id| *id != 0).collect()
    }

    /// The ids to remove so that `incoming` more rows fit in `capacity`: the oldest rows
    /// not in delivery.
    pub fn overflow_victims(&self, incoming: usize, capacity: usize) -> Vec<i64> {
        let st = self.state.lock();
        let over = (st.ids.len() + incoming).saturating_sub(capacity);
        st.ids
            .keys()
            .copied()
            .filter(|id| !st.in_flight.contains(id))
            .take(over)
            .collect()
    }

    /// Marks `id` as lane `lane`'s row in delivery; false (nothing marked) when the ledger
    /// no longer holds it (evicted since it was read).
    pub fn start(&self, lane: usize, id: i64) -> bool {
        let mut st = self.state.lock();
        if !st.ids.contains_key(&id) {
            return false;
        }
        if let Some(slot) = st.in_flight.get_mut(lane) {
            *slot = id;
        }
        self.publish(&st);
        true
    }

    /// Puts lane `lane`'s row in delivery back to waiting (it keeps its age).
    pub fn release(&self, lane: usize) {
        let mut st = self.state.lock();
        if let Some(slot) = st.in_flight.get_mut(lane) {
            *slot = 0;
        }
        self.publish(&st);
    }

    /// Ends lane `lane`'s delivery after removing `id` from the store: `removed` tells
    /// whether the removal committed (the row is forgotten and progress noted) or failed
    /// (`spool_io`; the row stays).
    pub fn finish(&self, lane: usize, id: i64, removed: bool) {
        let mut st = self.state.lock();
        if let Some(slot) = st.in_flight.get_mut(lane) {
            *slot = 0;
        }
        if removed {
            st.ids.remove(&id);
        }
        self.publish(&st);
        drop(st);
        self.health.set_flag(Flag::SpoolIo, !removed);
        if removed {
            self.health.note_progress();
        }
    }

    /// Asks for a reload of the ids before the next delivery.
    pub fn request_resync(&self) {
        self.resync.store(true, Ordering::Release);
    }

    /// True once after [`SpoolLedger::request_resync`]: the caller reloads now (and asks
    /// again if that fails).
    pub fn resync_due(&self) -> bool {
        self.resync.swap(false, Ordering::AcqRel)
    }

    /// Wakes lane `lane`'s sender.
    pub fn wake(&self, lane: usize) {
        if let Some((tx, _)) = self.wakes.get(lane) {
            let _ = tx.try_send(());
        }
    }

    /// Wakes every lane's sender.
    pub fn wake_all(&self) {
        for (tx, _) in &self.wakes {
            let _ = tx.try_send(());
        }
    }

    /// Lane `lane`'s wake-up receiver.
    pub fn waker(&self, lane: usize) -> Option<Receiver<()>> {
        self.wakes.get(lane).map(|(_, rx)| rx.clone())
    }

    /// Waits up to `d` for lane `lane` to be woken.
    pub fn wait(&self, lane: usize, d: Duration) {
        if let Some((_, rx)) = self.wakes.get(lane) {
            let _ = rx.recv_timeout(d);
        }
    }

    /// Mirrors depth and age into the row (rows in delivery are running, not waiting).
    fn publish(&self, st: &State) {
        let busy = |id: &i64| *id != 0 && st.in_flight.contains(id);
        let running = st.ids.keys().filter(|id| busy(id)).count();
        let oldest = st
            .ids
            .iter()
            .find(|(id, _)| !busy(id))
            .map(|(_, (_, at))| *at);
        self.health.set_waiting((st.ids.len() - running) as u64);
        self.health.set_oldest_waiting(oldest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::queue::{Registry, RowConfig, RowHandle};

    fn ledger(lanes: usize) -> (SpoolLedger, Arc<Registry>, RowHandle) {
        let clock = ManualClock::at_epoch_2026();
        let health = QueueHealth::new(clock, RowConfig::new("rows").capacity(3));
        let reg = Registry::new();
        let handle = reg.register("t.spool", health.clone()).unwrap();
        (SpoolLedger::new(health, lanes), reg, handle)
    }

    fn waiting(reg: &Registry) -> Option<u64> {
        reg.snapshot()["t.spool"].waiting
    }

    #[test]
    fn rows_in_delivery_run_keep_no_age_and_are_never_victims() {
        let (l, reg, _h) = ledger(2);
        let stamp = l.health().stamp();
        l.admitted(&[(1, 0), (2, 1), (3, 0)], &[], stamp);
        assert_eq!((l.len(), l.len_of(0), l.len_of(1)), (3, 2, 1));
        assert!(l.start(0, 1));
        assert_eq!(l.in_flight(), vec![1]);
        assert_eq!(l.overflow_victims(2, 3), vec![2, 3], "1 is in delivery");
        assert_eq!(waiting(&reg), Some(2));
        l.release(0);
        assert_eq!(waiting(&reg), Some(3));
        assert!(l.start(1, 2));
        l.finish(1, 2, true);
        assert_eq!((l.len(), l.in_flight()), (2, vec![]));
        assert!(!l.start(1, 2), "a forgotten row cannot be started");
    }

    #[test]
    fn a_reload_keeps_known_ages_and_a_timeout_asks_for_one() {
        let (l, reg, _h) = ledger(1);
        assert_eq!(l.reload([(5, 0), (6, 0)]), 2);
        l.store_failed(true);
        assert!(l.resync_due());
        assert!(!l.resync_due(), "once");
        l.store_failed(false);
        assert!(l.health().flag(Flag::SpoolIo));
        l.admitted(&[(7, 0)], &[5], l.health().stamp());
        assert!(!l.health().flag(Flag::SpoolIo));
        assert_eq!(l.reload([(6, 0), (7, 0)]), 2);
        assert_eq!(waiting(&reg), Some(2));
    }
}
