//! Audit records of state-changing requests.

use std::sync::atomic::{AtomicU64, Ordering};

use jiff::Timestamp;

use crate::store::Store;

/// Writes audit records through the store writer without blocking the request.
pub struct AuditLog {
    store: Store,
    /// Records the writer queue refused (also logged).
    pub dropped: AtomicU64,
}

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

impl AuditLog {
    pub fn new(store: Store) -> AuditLog {
        AuditLog {
            store,
            dropped: AtomicU64::new(0),
        }
    }

    pub fn record(&self, e: Entry<'_>) {
        let row = (
            e.at.as_microsecond(),
            e.actor.to_string(),
            e.via.to_string(),
            e.action.to_string(),
            e.target.to_string(),
            e.outcome.to_string(),
            e.remote_ip.to_string(),
        );
        let r = self.store.write_detached(move |c| {
            c.execute(
                "INSERT INTO audit(at, actor, via, action, target, outcome, remote_ip) VALUES (?1,?2,?3,?4,?5,?6,?7)",
                rusqlite::params![row.0, row.1, row.2, row.3, row.4, row.5, row.6],
            )
            .map(|_| ())
        });
        if let Err(err) = r {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            log::warn!(
                "audit record {} by {} not written: {err}",
                e.action,
                e.actor
            );
        }
    }
}
