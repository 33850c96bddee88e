//! The watcher side: automatic blocks become LAPI alerts.
//!
//! ```text
//! auto-block that took effect --BlockSink, never waits--> [fleet.ingress] (10,000)
//!   --writer "fleet-ingress"--> dedup + SQLite spool [fleet.spool]
//!   --sender "fleet-send"--> POST /v1/alerts (JWT from /v1/watchers/login)
//! ```
//!
//! Guarantees:
//! - Only blocks the firewall made are pushed (dry runs, operator blocks and exemptions are
//!   not; blocks the bouncer made for the LAPI never pass through automatic blocking, so
//!   nothing the fleet decided is pushed back: no loop).
//! - An address and scenario is spooled once per decision: a second block of the pair
//!   before the first decision ends is deduplicated (the marks are in the store, so this
//!   holds across restarts).
//! - At most [`SPOOL_CAPACITY`] alerts wait; admission beyond it drops the oldest (never
//!   the one in delivery): one loss each.
//! - At least once: a row leaves the spool after a 2xx answer, or a final refusal (400,
//!   422: counted as loss). Failures retry with back-off (1 s doubling to 60 s); a 401
//!   logs in again at once. Rows left at shutdown are sent after the restart.
//! - The password and the token are never logged; error texts never contain them.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;
use parking_lot::Mutex;

use crate::clock::SharedClock;
use crate::queue::{LagBasis, QueueHealth, Registry, RowConfig, RowHandle, SpoolLedger};
use crate::store::fleet::SpoolRow;
use crate::store::Store;
use crate::threat::autoblock::{Confirmed, Trigger};

/// Name of the ingress row.
pub const INGRESS_ROW: &str = "fleet.ingress";
/// Name of the spool row.
pub const SPOOL_ROW: &str = "fleet.spool";
/// Blocks waiting for the spool writer at most.
pub const INGRESS_CAPACITY: u64 = 10_000;
/// Alerts waiting for the LAPI at most.
pub const SPOOL_CAPACITY: usize = 10_000;
/// First retry delay after a failed push.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Longest retry delay.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Age of the oldest waiting alert that degrades the spool row.
pub const LAG_BUDGET: Duration = Duration::from_secs(120);
/// Block length assumed when a confirmed block has none (permanent blocks).
pub const PERMANENT_DECISION: Duration = Duration::from_secs(365 * 24 * 3600);

/// One block to push.
#[derive(Debug, Clone)]
pub struct Pending {
    pub ip: IpAddr,
    pub scenario: String,
    pub events: u64,
    pub reason: String,
    /// Microseconds since the epoch.
    pub at: i64,
    pub duration: Duration,
}

/// The scenario of a confirmed block: `svc/<check>` (`svc/ssh_bruteforce`), from its
/// trigger, else from its reason (`auto: ssh_bruteforce (score 57)`), else
/// `svc/threat_score`.
pub fn scenario_of(c: &Confirmed) -> String {
    let check = match &c.trigger {
        Some(Trigger::Finding(n)) | Some(Trigger::Challenge(n)) => Some(n.as_str()),
        _ => None,
    }
    .or_else(|| {
        c.reason
            .strip_prefix("auto: ")
            .and_then(|r| r.split([' ', '(', ',', ';']).next())
    })
    .filter(|n| {
        !n.is_empty()
            && n.len() <= 64
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    })
    .unwrap_or("threat_score");
    format!("svc/{check}")
}

impl Pending {
    /// The block as an alert to push; `now` stands in for a block with no expiry time.
    pub fn of_block(c: &Confirmed) -> Pending {
        let duration = match c.expires {
            Some(e) => Duration::from_micros(e.saturating_sub(c.at).max(1_000_000) as u64),
            None => PERMANENT_DECISION,
        };
        Pending {
            ip: c.ip.to_canonical(),
            scenario: scenario_of(c),
            events: c.counts.iter().sum::<u64>().max(1),
            reason: c.reason.clone(),
            at: c.at,
            duration,
        }
    }
}

/// Outcome of [`Spool::admit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Stored,
    /// The pair was pushed within its decision.
    Deduplicated,
    /// Maybe committed (timeout).
    Uncertain,
    Failed,
}

/// Spool counters (atomics, since start).
#[derive(Default, Debug)]
pub struct SpoolCounters {
    pub spooled: AtomicU64,
    pub deduplicated: AtomicU64,
    pub sent: AtomicU64,
    pub rejected: AtomicU64,
    pub evicted: AtomicU64,
    pub failed_attempts: AtomicU64,
    pub logins: AtomicU64,
    pub login_failures: AtomicU64,
}

/// The durable alert spool (row `fleet.spool`, table `fleet_spool`): one ledger lane.
pub struct Spool {
    store: Store,
    clock: SharedClock,
    ledger: SpoolLedger,
    _row: RowHandle,
    push_lock: Mutex<()>,
    pub counters: SpoolCounters,
}

impl Spool {
    /// Registers the row and loads the ids of spooled rows.
    pub fn open(
        store: Store,
        clock: SharedClock,
        registry: &Arc<Registry>,
    ) -> Result<Spool, super::FleetError> {
        let mut config = RowConfig::new("alerts")
            .capacity(SPOOL_CAPACITY as u64)
            .lag_basis(LagBasis::ObservedAge)
            .running_slots(1);
        config.lag_budget = LAG_BUDGET;
        let health = QueueHealth::new(clock.clone(), config);
        let row = registry
            .register(SPOOL_ROW, health.clone())
            .map_err(crate::queue::RowError::at(SPOOL_ROW))
            .map_err(super::FleetError::Queue)?;
        let spool = Spool {
            store,
            clock,
            ledger: SpoolLedger::new(health, 1),
            _row: row,
            push_lock: Mutex::new(()),
            counters: SpoolCounters::default(),
        };
        let n = spool.load_ids().map_err(super::FleetError::Store)?;
        if n > 0 {
            log::info!("{SPOOL_ROW}: {n} alert(s) waiting from before the restart");
        }
        Ok(spool)
    }

    fn load_ids(&self) -> Result<usize, crate::store::StoreError> {
        let rows = self.store.read(crate::store::fleet::ids)?;
        Ok(self.ledger.reload(rows.into_iter().map(|id| (id, 0))))
    }

    /// The row's health.
    pub fn health(&self) -> &Arc<QueueHealth> {
        self.ledger.health()
    }

    /// Alerts in the spool (waiting and in delivery).
    pub fn len(&self) -> usize {
        self.ledger.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ledger.is_empty()
    }

    /// Spools one alert unless its address and scenario were pushed within the decision.
    pub fn admit(&self, p: &Pending, server: &str) -> Admit {
        let _order = self.push_lock.lock();
        let (held, keep) = (self.ledger.len(), self.ledger.in_flight());
        let stamp = self.health().stamp();
        let now = self.clock.now().as_microsecond();
        let until = now.saturating_add(i64::try_from(p.duration.as_micros()).unwrap_or(i64::MAX));
        let at = jiff::Timestamp::from_microsecond(p.at).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let alert = super::lapi::alert(&super::lapi::AlertInput {
            ip: p.ip,
            scenario: &p.scenario,
            events: p.events,
            server,
            reason: &p.reason,
            at,
            duration: p.duration,
        })
        .to_string();
        let (ip, scenario) = (p.ip.to_string(), p.scenario.clone());
        let r = self.store.write(move |c| {
            crate::store::fleet::admit(
                c,
                &ip,
                &scenario,
                &alert,
                now,
                until,
                held,
                SPOOL_CAPACITY,
                &keep,
            )
        });
        match r {
            Ok(a) => {
                let Some(id) = a.inserted else {
                    self.ledger.admitted(&[], &[], stamp);
                    self.counters.deduplicated.fetch_add(1, Ordering::Relaxed);
                    return Admit::Deduplicated;
                };
                self.ledger.admitted(&[(id, 0)], &a.evicted, stamp);
                self.counters.spooled.fetch_add(1, Ordering::Relaxed);
                if !a.evicted.is_empty() {
                    let n = a.evicted.len() as u64;
                    self.counters.evicted.fetch_add(n, Ordering::Relaxed);
                    self.health().record_losses(n);
                }
                Admit::Stored
            }
            Err(crate::store::StoreError::Timeout) => {
                self.ledger.store_failed(true);
                Admit::Uncertain
            }
            Err(e) => {
                self.ledger.store_failed(false);
                log::warn!("{SPOOL_ROW}: cannot spool an alert: {e}");
                Admit::Failed
            }
        }
    }

    /// The oldest row, marked in delivery.
    pub fn take(&self) -> Result<Option<SpoolRow>, crate::store::StoreError> {
        let _order = self.push_lock.lock();
        if self.ledger.resync_due() {
            if let Err(e) = self.load_ids() {
                self.ledger.request_resync();
                return Err(e);
            }
        }
        if self.ledger.is_empty() {
            return Ok(None);
        }
        match self.store.read(crate::store::fleet::head) {
            Ok(Some(row)) => Ok(self.ledger.start(0, row.id).then_some(row)),
            Ok(None) => {
                self.ledger.request_resync();
                Ok(None)
            }
            Err(e) => {
                self.ledger.store_failed(false);
                Err(e)
            }
        }
    }

    /// Puts the row in delivery back to waiting (it keeps its age).
    pub fn release(&self) {
        self.ledger.release(0);
    }

    /// Removes row `id` (delivered or refused).
    pub fn remove(&self, id: i64) -> Result<(), crate::store::StoreError> {
        let r = self
            .store
            .write(move |c| crate::store::fleet::remove(c, &[id]));
        self.ledger.finish(0, id, r.is_ok());
        r.map(|_| ())
    }

    /// Forgets dedup marks whose decision ended.
    pub fn prune(&self) {
        let now = self.clock.now().as_microsecond();
        let _ = self
            .store
            .write_detached(move |c| crate::store::fleet::prune_pushed(c, now).map(|_| ()));
    }

    pub(crate) fn waker(&self) -> Receiver<()> {
        // Lane 0 always exists.
        self.ledger
            .waker(0)
            .unwrap_or_else(crossbeam_channel::never)
    }
}

/// Result of one push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    Delivered,
    /// The token was refused: log in again.
    Unauthorized,
    /// A final refusal (status).
    Rejected(u16),
    /// Retry later.
    Failed(String),
}

/// What an answer to `POST /v1/alerts` means.
pub fn classify(status: u16) -> Attempt {
    match status {
        200..=299 => Attempt::Delivered,
        401 => Attempt::Unauthorized,
        400 | 422 => Attempt::Rejected(status),
        _ => Attempt::Failed(format!("HTTP {status}")),
    }
}

/// Delay before the next attempt after `failures` failures in a row.
pub fn backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF.saturating_mul(1u32 << exp).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn confirmed(trigger: Option<Trigger>, reason: &str) -> Confirmed {
        Confirmed {
            ip: "203.0.113.9".parse().unwrap(),
            trigger,
            reason: reason.into(),
            counts: [8, 0, 0, 0, 0, 0, 0],
            at: 1_000_000,
            expires: Some(1_000_000 + 3600 * 1_000_000),
        }
    }

    #[test]
    fn scenarios_name_the_check() {
        let c = confirmed(Some(Trigger::Finding("ssh_bruteforce".into())), "x");
        assert_eq!(scenario_of(&c), "svc/ssh_bruteforce");
        let c = confirmed(Some(Trigger::Score), "auto: wp_login_bruteforce (score 90)");
        assert_eq!(scenario_of(&c), "svc/wp_login_bruteforce");
        let c = confirmed(None, "auto: <odd>");
        assert_eq!(scenario_of(&c), "svc/threat_score");
        let p = Pending::of_block(&c);
        assert_eq!(p.duration, Duration::from_secs(3600));
        assert_eq!(p.events, 8);
    }

    #[test]
    fn backoff_doubles_to_a_minute() {
        let s: Vec<u64> = (1..=8).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(s, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(classify(201), Attempt::Delivered);
        assert_eq!(classify(401), Attempt::Unauthorized);
        assert_eq!(classify(422), Attempt::Rejected(422));
        assert_eq!(classify(503), Attempt::Failed("HTTP 503".into()));
    }

    #[test]
    fn the_spool_deduplicates_per_decision_and_survives_a_reopen() {
        let dir = std::env::temp_dir().join(format!("svc-fleet-spool-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let clock = ManualClock::at_epoch_2026();
        let reg = Registry::new();
        let s = Spool::open(store.clone(), clock.clone(), &reg).unwrap();
        let p = Pending::of_block(&confirmed(
            Some(Trigger::Finding("ssh_bruteforce".into())),
            "auto: ssh_bruteforce",
        ));
        assert_eq!(s.admit(&p, "web1"), Admit::Stored);
        assert_eq!(s.admit(&p, "web1"), Admit::Deduplicated);
        let row = s.take().unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_str(&row.alert).unwrap();
        assert_eq!(v["scenario"], "svc/ssh_bruteforce");
        assert_eq!(v["decisions"][0]["duration"], "3600s");
        assert_eq!(v["source"]["value"], "203.0.113.9");
        assert!(v["message"].as_str().unwrap().starts_with("svc on web1: "));
        s.release();
        drop(s);
        // Reopened: the row waits, the mark holds until the decision ends.
        let reg = Registry::new();
        let s = Spool::open(store.clone(), clock.clone(), &reg).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s.admit(&p, "web1"), Admit::Deduplicated);
        clock.advance_secs(3601);
        assert_eq!(s.admit(&p, "web1"), Admit::Stored);
        let id = s.take().unwrap().unwrap().id;
        s.remove(id).unwrap();
        assert_eq!(s.len(), 1);
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
