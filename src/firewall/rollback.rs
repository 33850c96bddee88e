//! The rollback timer of tentative firewall settings (`firewall.rollback.v1`).
//!
//! A tentative change stores the settings overrides before and after it and a deadline
//! (1-30 minutes). Unless confirmed before the deadline, the engine restores the previous
//! overrides by itself. The state lives in the store (`kv` row `firewall.rollback`), so a
//! restart in between keeps the timer, and a deadline that passed while the daemon was down
//! reverts at start.
//!
//! States: `none` (never used), `pending`, `confirmed`, `reverted` (the last two are the
//! outcome of the most recent change, kept until the next one).

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Shortest and longest timer, minutes.
pub const MIN_MINUTES: u64 = 1;
pub const MAX_MINUTES: u64 = 30;
/// Timer used when a request names none.
pub const DEFAULT_MINUTES: u64 = 5;

/// A tentative change waiting for confirmation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    /// Microseconds since the epoch.
    pub deadline: i64,
    pub started: i64,
    pub timeout_min: u64,
    /// Overrides before the change (restored on revert).
    pub previous: Map<String, Value>,
    /// Overrides the change installed.
    pub applied: Map<String, Value>,
    /// The change as requested.
    pub changes: Map<String, Value>,
    pub by: String,
}

/// How the most recent change ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finished {
    /// `confirmed` or `reverted`.
    pub state: String,
    pub at: i64,
    /// `operator`, `timer` (deadline passed while running), `restart` (deadline passed while
    /// the daemon was down) or `apply_failed`.
    pub reason: String,
    pub by: String,
    pub changes: Map<String, Value>,
}

/// The stored rollback state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rollback {
    pub pending: Option<Pending>,
    pub last: Option<Finished>,
}

fn ts(us: i64) -> Timestamp {
    Timestamp::from_microsecond(us).unwrap_or(Timestamp::UNIX_EPOCH)
}

impl Rollback {
    /// Parses the stored JSON; unreadable text is an empty state (logged by the caller).
    pub fn from_json(text: &str) -> Result<Rollback, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// True when a pending change's deadline is at or before `now` (microseconds).
    pub fn due(&self, now: i64) -> bool {
        self.pending.as_ref().is_some_and(|p| p.deadline <= now)
    }

    /// Starts a pending change.
    pub fn start(&mut self, p: Pending) {
        self.pending = Some(p);
    }

    /// Ends the pending change (`confirmed` or `reverted`); returns it.
    pub fn finish(&mut self, state: &str, reason: &str, by: &str, now: i64) -> Option<Pending> {
        let p = self.pending.take()?;
        self.last = Some(Finished {
            state: state.into(),
            at: now,
            reason: reason.into(),
            by: by.into(),
            changes: p.changes.clone(),
        });
        Some(p)
    }

    /// The API view at `now` (microseconds): `state`, and while pending `deadline`,
    /// `remaining_seconds`, `timeout_min`, `started_at`, `changes`; after an outcome
    /// `finished_at`, `reason`, `changes`.
    pub fn view(&self, now: i64) -> Value {
        let mut m = Map::new();
        match (&self.pending, &self.last) {
            (Some(p), _) => {
                m.insert("state".into(), "pending".into());
                m.insert(
                    "deadline".into(),
                    crate::timefmt::rfc3339(ts(p.deadline)).into(),
                );
                let left = (p.deadline.saturating_sub(now)).max(0) as u64;
                m.insert("remaining_seconds".into(), left.div_ceil(1_000_000).into());
                m.insert("timeout_min".into(), p.timeout_min.into());
                m.insert(
                    "started_at".into(),
                    crate::timefmt::rfc3339(ts(p.started)).into(),
                );
                m.insert("changes".into(), Value::Object(p.changes.clone()));
                m.insert("by".into(), p.by.clone().into());
            }
            (None, Some(f)) => {
                m.insert("state".into(), f.state.clone().into());
                m.insert(
                    "finished_at".into(),
                    crate::timefmt::rfc3339(ts(f.at)).into(),
                );
                m.insert("reason".into(), f.reason.clone().into());
                m.insert("changes".into(), Value::Object(f.changes.clone()));
                m.insert("by".into(), f.by.clone().into());
            }
            (None, None) => {
                m.insert("state".into(), "none".into());
            }
        }
        Value::Object(m)
    }
}

/// The overrides a change produces: `current` with `changes` applied (`null` removes a key).
pub fn merge(current: &Map<String, Value>, changes: &Map<String, Value>) -> Map<String, Value> {
    let mut out = current.clone();
    for (k, v) in changes {
        if v.is_null() {
            out.remove(k);
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use serde_json::json;

    fn us(c: &ManualClock) -> i64 {
        c.now().as_microsecond()
    }

    #[test]
    fn pending_change_is_due_at_its_deadline_and_survives_a_round_trip() {
        let clock = ManualClock::at_epoch_2026();
        let mut r = Rollback::default();
        assert_eq!(r.view(us(&clock))["state"], "none");
        let changes = json!({"tcp_in": [22]}).as_object().unwrap().clone();
        r.start(Pending {
            deadline: us(&clock) + 120_000_000,
            started: us(&clock),
            timeout_min: 2,
            previous: Map::new(),
            applied: changes.clone(),
            changes: changes.clone(),
            by: "ops".into(),
        });
        let v = r.view(us(&clock));
        assert_eq!(v["state"], "pending");
        assert_eq!(v["remaining_seconds"], 120);
        assert_eq!(v["deadline"], "2026-01-01T00:02:00.000000Z");
        clock.advance_secs(119);
        assert!(!r.due(us(&clock)));
        assert_eq!(r.view(us(&clock))["remaining_seconds"], 1);
        // Stored and read back (a restart) it is the same timer.
        let back = Rollback::from_json(&r.to_json()).unwrap();
        assert_eq!(back, r);
        clock.advance_secs(1);
        assert!(back.due(us(&clock)));
        let mut back = back;
        let p = back.finish("reverted", "timer", "svc", us(&clock)).unwrap();
        assert_eq!(p.previous, Map::new());
        let v = back.view(us(&clock));
        assert_eq!(v["state"], "reverted");
        assert_eq!(v["reason"], "timer");
        assert!(v.get("remaining_seconds").is_none());
        assert!(back.finish("confirmed", "operator", "x", 0).is_none());
    }

    #[test]
    fn merge_removes_null_keys() {
        let cur = json!({"tcp_in": [22], "mode": "full"});
        let ch = json!({"tcp_in": null, "udp_in": [53]});
        let m = merge(cur.as_object().unwrap(), ch.as_object().unwrap());
        assert_eq!(Value::Object(m), json!({"mode": "full", "udp_in": [53]}));
    }
}
