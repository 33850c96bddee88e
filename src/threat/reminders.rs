//! Persistent warning conditions of the threat subsystem (`reputation_quota_exhausted`,
//! `threat_feed_stale`) as findings, with at most one reminder a day.
//!
//! Guarantees:
//! - While a condition holds, its finding is submitted when it starts and then at most once
//!   per 24 hours (keeping it in the active set, whose event findings expire after a quiet
//!   day). The instant of the last reminder per (check, message) is kept in the store
//!   (`kv` `threat.reminder.<check>.<hash>`), so a restart does not send another one early.
//! - When a condition ends, its finding is resolved (a `CheckCompleted` listing the
//!   messages still in force). The first evaluation after a start also resolves findings
//!   of conditions that ended while the daemon was down.
//! - These findings never score and never block: the attack database ignores their checks.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::clock::SharedClock;
use crate::findings::{Finding, Ingest, Severity};
use crate::store::Store;

/// Submits an item to the findings engine; false when refused.
pub type Submit = Arc<dyn Fn(Ingest) -> bool + Send + Sync>;

/// Shortest time between two reminders of one condition.
pub const REMINDER_EVERY_US: i64 = 24 * 3600 * 1_000_000;

#[derive(Default)]
struct CheckState {
    /// Messages in force.
    active: BTreeMap<String, ()>,
    synced: bool,
}

pub struct Reminders {
    clock: SharedClock,
    store: Store,
    submit: Submit,
    state: Mutex<HashMap<&'static str, CheckState>>,
    last: Mutex<HashMap<String, Option<i64>>>,
}

fn kv_key(check: &str, message: &str) -> String {
    let h = Sha256::digest(message.as_bytes());
    format!("threat.reminder.{check}.{}", hex::encode(&h[..8]))
}

impl Reminders {
    pub fn new(clock: SharedClock, store: Store, submit: Submit) -> Reminders {
        Reminders {
            clock,
            store,
            submit,
            state: Mutex::new(HashMap::new()),
            last: Mutex::new(HashMap::new()),
        }
    }

    fn last_sent(&self, key: &str) -> Option<i64> {
        if let Some(v) = self.last.lock().get(key) {
            return *v;
        }
        let k = key.to_string();
        let v = self
            .store
            .read(|c| crate::store::kv::get(c, &k))
            .ok()
            .flatten()
            .and_then(|s| s.parse::<i64>().ok());
        self.last.lock().insert(key.to_string(), v);
        v
    }

    /// Sets the conditions of `check` in force now: (message, details) each. Returns the
    /// number of findings submitted.
    pub fn set(&self, check: &'static str, current: Vec<(String, String)>) -> usize {
        let now = self.clock.now();
        let now_us = now.as_microsecond();
        let mut sent = 0;
        let resolve = {
            let mut st = self.state.lock();
            let s = st.entry(check).or_default();
            let before: Vec<String> = s.active.keys().cloned().collect();
            s.active = current.iter().map(|(m, _)| (m.clone(), ())).collect();
            let gone = before.iter().any(|m| !s.active.contains_key(m));
            let first = !s.synced;
            s.synced = true;
            gone || first
        };
        for (message, details) in &current {
            let key = kv_key(check, message);
            let due = match self.last_sent(&key) {
                Some(t) => now_us.saturating_sub(t) >= REMINDER_EVERY_US || t > now_us,
                None => true,
            };
            if !due {
                continue;
            }
            let f = Finding::new(check, Severity::Warning, message.clone(), now)
                .with_details(details.clone());
            if (self.submit)(Ingest::Finding(Box::new(f))) {
                sent += 1;
                self.last.lock().insert(key.clone(), Some(now_us));
                let v = now_us.to_string();
                if let Err(e) = self
                    .store
                    .write(move |c| crate::store::kv::put(c, &key, Some(&v)))
                {
                    log::warn!("threat: cannot store the reminder time of {check}: {e}");
                }
            }
        }
        if resolve {
            let messages: Vec<String> = current.into_iter().map(|(m, _)| m).collect();
            (self.submit)(Ingest::check_completed(check.to_string(), messages));
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn setup(tag: &str) -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("svc-rem-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        (Store::open(&dir.join("svc.db")).unwrap(), dir)
    }

    fn collector() -> (Submit, Arc<Mutex<Vec<Ingest>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        (
            Arc::new(move |i| {
                s.lock().push(i);
                true
            }),
            seen,
        )
    }

    fn findings(v: &[Ingest]) -> usize {
        v.iter().filter(|i| matches!(i, Ingest::Finding(_))).count()
    }

    #[test]
    fn once_a_day_across_restarts() {
        let (store, dir) = setup("daily");
        let clock = ManualClock::at_epoch_2026();
        let cond = || vec![("quota".to_string(), "d".to_string())];
        let (submit, seen) = collector();
        let r = Reminders::new(clock.clone(), store.clone(), submit);
        assert_eq!(r.set("reputation_quota_exhausted", cond()), 1);
        clock.advance_secs(3600);
        assert_eq!(r.set("reputation_quota_exhausted", cond()), 0);
        // A restart 2 hours in: still nothing before the day is over.
        clock.advance_secs(3600);
        let (submit2, seen2) = collector();
        let r2 = Reminders::new(clock.clone(), store.clone(), submit2);
        assert_eq!(r2.set("reputation_quota_exhausted", cond()), 0);
        clock.advance_secs(22 * 3600 - 1);
        assert_eq!(r2.set("reputation_quota_exhausted", cond()), 0);
        clock.advance_secs(1);
        assert_eq!(r2.set("reputation_quota_exhausted", cond()), 1);
        assert_eq!(findings(&seen.lock()), 1);
        assert_eq!(findings(&seen2.lock()), 1);
        // The condition ends: its finding is resolved.
        r2.set("reputation_quota_exhausted", vec![]);
        let last = seen2.lock().last().cloned().unwrap();
        assert!(matches!(last, Ingest::CheckCompleted(done) if done.messages.is_empty()));
        store.close();
        let _ = std::fs::remove_dir_all(dir);
    }
}
