//! Collects one check run's findings under `max_findings_per_check` and adds the summary
//! findings that report a limit being hit (stable messages, so repeats merge).

use jiff::Timestamp;

use super::context::{count, CheckContext};
use super::walk::Walker;
use crate::findings::{Finding, Severity};

/// Message of the finding reporting a walk stopped by the entry limit.
pub const TRUNCATED_MESSAGE: &str = "scan truncated: directory entry limit reached";
/// Message of the finding reporting findings dropped by the per-check limit.
pub const FINDINGS_LIMIT_MESSAGE: &str = "finding limit reached: further findings suppressed";

pub struct Sink<'a> {
    ctx: &'a CheckContext,
    check: &'static str,
    now: Timestamp,
    out: Vec<Finding>,
    refused: u64,
}

impl<'a> Sink<'a> {
    pub fn new(ctx: &'a CheckContext, check: &'static str) -> Sink<'a> {
        Sink {
            ctx,
            check,
            now: ctx.clock.now(),
            out: Vec::new(),
            refused: 0,
        }
    }

    /// The instant of this run (read once from the context's clock).
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// A new finding of this check at this run's instant.
    pub fn finding(&self, severity: Severity, message: impl Into<String>) -> Finding {
        Finding::new(self.check, severity, message, self.now)
    }

    /// Pushes `f` with `owner` (a file owner's user name, when known) as its account.
    pub fn push_owned(&mut self, f: Finding, owner: Option<String>) {
        match owner {
            Some(o) => self.push(f.with_account(o)),
            None => self.push(f),
        }
    }

    pub fn push(&mut self, f: Finding) {
        if self.out.len() < self.ctx.limits.max_findings_per_check {
            self.out.push(f);
        } else {
            self.refused += 1;
            count(&self.ctx.counters().findings_refused, 1);
        }
    }

    /// Returns the findings plus, when a limit was hit, a WARNING summary for it.
    pub fn finish(self, walker: Option<&Walker>) -> Vec<Finding> {
        let mut out = self.out;
        if let Some(w) = walker.filter(|w| w.truncated()) {
            out.push(
                Finding::new(self.check, Severity::Warning, TRUNCATED_MESSAGE, self.now)
                    .with_details(format!(
                        "stopped after {} directory entries (limit {}); results are incomplete",
                        w.walked(),
                        self.ctx.limits.max_walk_entries
                    )),
            );
        }
        if self.refused > 0 {
            out.push(
                Finding::new(
                    self.check,
                    Severity::Warning,
                    FINDINGS_LIMIT_MESSAGE,
                    self.now,
                )
                .with_details(format!(
                    "{} more findings suppressed (limit {})",
                    self.refused, self.ctx.limits.max_findings_per_check
                )),
            );
        }
        out
    }
}
