//! The password audit as a deep-scan task ([`ScanTask`]): owns the shared hash slots and
//! the auditor, holds the live `mail.password_*` settings, and answers the two checks
//! `email_weak_password` and `email_password_audit_incomplete` after each deep or full scan.
//!
//! - Audit turned off (`mail.password_audit = false`): both checks complete with no
//!   findings, so earlier ones are resolved (the operator asked for no audit).
//! - A run whose records could not be read completes neither check: findings stay.
//! - Shutdown sets the scan's stop flag, which the audit treats as cancellation (mailboxes
//!   in progress are temporary failures, retried at the next deep scan).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::RwLock;

use super::audit::{AuditSettings, Auditor, CHECK_INCOMPLETE, CHECK_WEAK};
use super::pool::{HashPool, PoolError};
use crate::checks::jobs::ScanTask;
use crate::checks::CheckContext;
use crate::clock::SharedClock;
use crate::findings::Finding;
use crate::queue::Registry;
use crate::store::Store;

/// The checks the task answers.
pub static CHECKS: [&str; 2] = [CHECK_WEAK, CHECK_INCOMPLETE];

/// The deep-scan password audit (one per daemon).
pub struct PasswordAudit {
    auditor: Arc<Auditor>,
    settings: RwLock<AuditSettings>,
}

impl PasswordAudit {
    /// Starts the three hash threads and registers the rows `email_password.*`.
    pub fn start(
        settings: &AuditSettings,
        store: Store,
        clock: SharedClock,
        registry: &Arc<Registry>,
    ) -> Result<Arc<PasswordAudit>, PoolError> {
        let pool = HashPool::start(clock.clone(), registry)?;
        let auditor = Auditor::new(pool, store, clock, registry).map_err(PoolError::Row)?;
        Ok(Arc::new(PasswordAudit {
            auditor,
            settings: RwLock::new(settings.clone()),
        }))
    }

    /// The settings in force.
    pub fn settings(&self) -> AuditSettings {
        self.settings.read().clone()
    }

    /// Stops the hash threads after their current batch.
    pub fn shutdown(&self) {
        self.auditor.pool().shutdown();
    }
}

impl ScanTask for PasswordAudit {
    fn checks(&self) -> &'static [&'static str] {
        &CHECKS
    }

    fn run(&self, ctx: &CheckContext, stop: &AtomicBool) -> Vec<(&'static str, Vec<Finding>)> {
        let mut settings = self.settings();
        // Patterns name the host's paths; checks read them under `checks.root`.
        settings.files = settings
            .files
            .iter()
            .map(|p| crate::hostfs::reroot(&ctx.sysroot, p))
            .collect();
        if !settings.enabled {
            return vec![(CHECK_WEAK, Vec::new()), (CHECK_INCOMPLETE, Vec::new())];
        }
        let (weak, stats) = self.auditor.run(ctx, &settings, stop);
        if stats.skipped {
            return Vec::new();
        }
        let incomplete = self.auditor.last_incomplete().unwrap_or_default();
        vec![(CHECK_WEAK, weak), (CHECK_INCOMPLETE, incomplete)]
    }

    fn reconfigure(&self, cfg: &crate::config::Config) {
        *self.settings.write() = cfg.mail.password.clone();
    }
}
