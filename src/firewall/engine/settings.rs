//! Settings changes of the engine: tentative apply with the rollback timer, confirm,
//! revert (by an operator, the timer, or at start), and applying the structure script.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::{Firewall, FirewallError, Ops};
use crate::firewall::rollback::{self, Pending, Rollback};
use crate::firewall::script;

impl Firewall {
    /// Applies a settings change with a rollback timer of `timeout_min` minutes (1-30).
    pub fn tentative_apply(
        &self,
        changes: Map<String, Value>,
        timeout_min: u64,
        by: &str,
    ) -> Result<Value, FirewallError> {
        if !(rollback::MIN_MINUTES..=rollback::MAX_MINUTES).contains(&timeout_min) {
            return Err(FirewallError::Invalid(format!(
                "timeout_min must be from {} to {} minutes",
                rollback::MIN_MINUTES,
                rollback::MAX_MINUTES
            )));
        }
        if changes.is_empty() {
            return Err(FirewallError::Invalid(
                "changes must name at least one [firewall] key".into(),
            ));
        }
        let mut ops = self.ops.lock();
        if ops.rollback.pending.is_some() {
            return Err(FirewallError::Refused(
                "a tentative firewall change is already pending; confirm or revert it first".into(),
            ));
        }
        let applied = rollback::merge(&ops.overrides, &changes);
        let settings = self
            .file
            .with_changes(&self.file, &applied)
            .map_err(FirewallError::Settings)?;
        let now = self.now();
        let deadline = now.saturating_add((timeout_min * 60_000_000) as i64);
        let mut rb = ops.rollback.clone();
        rb.start(Pending {
            deadline,
            started: now,
            timeout_min,
            previous: ops.overrides.clone(),
            applied: applied.clone(),
            changes,
            by: by.into(),
        });
        self.persist(&applied, &rb)?;
        let previous = std::mem::replace(&mut *self.settings.write(), Arc::new(settings));
        if let Err(e) = self.apply_structure(&mut ops) {
            // Nothing tentative survives a failed apply: restore and record it.
            *self.settings.write() = previous;
            let mut rb2 = rb.clone();
            rb2.finish("reverted", "apply_failed", by, now);
            let prev = ops.overrides.clone();
            let _ = self.persist(&prev, &rb2);
            let _ = self.apply_structure(&mut ops);
            ops.rollback = rb2.clone();
            self.view.lock().rollback = rb2;
            return Err(e);
        }
        ops.overrides = applied;
        ops.rollback = rb.clone();
        {
            let mut v = self.view.lock();
            v.rollback = rb.clone();
            v.overrides = ops.overrides.clone();
        }
        log::warn!(
            "firewall: tentative settings change applied by {}; reverts in {timeout_min} min unless confirmed",
            crate::text::for_log(by, 64)
        );
        Ok(rb.view(now))
    }

    /// Keeps the pending change.
    pub fn confirm(&self, by: &str) -> Result<Value, FirewallError> {
        let mut ops = self.ops.lock();
        let now = self.now();
        let mut rb = ops.rollback.clone();
        if rb.finish("confirmed", "operator", by, now).is_none() {
            return Err(FirewallError::Refused(
                "no tentative firewall change is pending".into(),
            ));
        }
        let o = ops.overrides.clone();
        self.persist(&o, &rb)?;
        ops.rollback = rb.clone();
        self.view.lock().rollback = rb.clone();
        log::info!(
            "firewall: tentative settings change confirmed by {}",
            crate::text::for_log(by, 64)
        );
        Ok(rb.view(now))
    }

    /// Restores the settings from before the pending change.
    pub fn revert(&self, by: &str) -> Result<Value, FirewallError> {
        let mut ops = self.ops.lock();
        self.revert_locked(&mut ops, by, "operator")
    }

    pub(super) fn revert_locked(
        &self,
        ops: &mut Ops,
        by: &str,
        reason: &str,
    ) -> Result<Value, FirewallError> {
        let now = self.now();
        let mut rb = ops.rollback.clone();
        let Some(p) = rb.finish("reverted", reason, by, now) else {
            return Err(FirewallError::Refused(
                "no tentative firewall change is pending".into(),
            ));
        };
        let settings = match self.file.with_changes(&self.file, &p.previous) {
            Ok(s) => s,
            Err(_) => self.file.clone(),
        };
        self.persist(&p.previous, &rb)?;
        ops.overrides = p.previous;
        ops.rollback = rb.clone();
        {
            let mut v = self.view.lock();
            v.rollback = rb.clone();
            v.overrides = ops.overrides.clone();
        }
        *self.settings.write() = Arc::new(settings);
        log::warn!("firewall: tentative settings change reverted ({reason})");
        self.apply_structure(ops)?;
        Ok(rb.view(now))
    }

    fn persist(&self, overrides: &Map<String, Value>, rb: &Rollback) -> Result<(), FirewallError> {
        let o = Value::Object(overrides.clone()).to_string();
        let r = rb.to_json();
        self.store.write(move |c| {
            crate::store::kv::put(c, "firewall.overrides", Some(&o))?;
            crate::store::kv::put(c, "firewall.rollback", Some(&r))
        })?;
        Ok(())
    }

    /// Applies the structure for the current settings (one `nft -f` transaction); when
    /// the table needs more, re-asserts everything.
    pub(super) fn apply_structure(&self, ops: &mut Ops) -> Result<(), FirewallError> {
        if ops.kernel.needs_assert {
            return self.assert_all(ops);
        }
        let st = script::render(
            &self.settings(),
            &self.extra_tcp_in,
            false,
            ops.kernel.meters.as_ref(),
        );
        match script::run(&ops.kernel.nft, &st.script) {
            Ok(()) => {
                ops.kernel.input_rules = st.input_rules;
                ops.kernel.meters = Some(st.meters);
                self.counters.transactions.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                log::warn!("firewall: {e}; re-creating table inet svc");
                ops.kernel.meters = None;
                ops.kernel.needs_assert = true;
                self.assert_all(ops)
            }
        }
    }
}
