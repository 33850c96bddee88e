//! `php_taint.requests`: PHP files the file analyzer saw written, moved or linked in, and
//! that no high-confidence signature matched, wait here for the taint analysis ([`crate::scan::taint`]) on
//! a thread of their own, so a burst of uploads never slows the signature scan. A flow becomes a `php_taint_flow`
//! finding carrying the file's owner as account. A full queue refuses the file (a loss of
//! the row); a recovered panic of the analysis is lost work.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::findings::Engine;
use crate::queue::{BoundedQueue, PopError};
use crate::scan::taint::{self, Counters, SkipReason};
use crate::text::escape_path;

/// Files waiting for the analysis at most (decision 403).
pub const TAINT_CAPACITY: u64 = 1024;

pub struct TaintWorker {
    pub engine: Arc<Engine>,
    pub clock: SharedClock,
    pub counters: Arc<Counters>,
    owners: crate::hostfs::OwnerCache,
}

impl TaintWorker {
    pub fn new(engine: Arc<Engine>, clock: SharedClock, counters: Arc<Counters>) -> TaintWorker {
        TaintWorker {
            engine,
            clock,
            counters,
            owners: crate::hostfs::OwnerCache::default(),
        }
    }

    /// Analyses queued files until the queue is closed or `stop` is set.
    pub fn run(mut self, queue: BoundedQueue<PathBuf>, stop: Arc<AtomicBool>) {
        while !stop.load(Ordering::SeqCst) {
            match queue.pop_timeout(Duration::from_millis(250)) {
                Ok(guard) => {
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        self.analyze(&guard)
                    }));
                    if result.is_err() {
                        log::error!("taint: analysing {} panicked", escape_path(&guard));
                        guard.lose();
                    } else {
                        guard.finish();
                    }
                }
                Err(PopError::Timeout) => {}
                Err(PopError::Closed) => return,
            }
        }
    }

    fn analyze(&mut self, path: &std::path::Path) {
        let (report, uid) = match taint::analyze_file(path, &self.counters) {
            Ok(r) => r,
            // Gone, replaced by a symlink or too large: nothing to analyse (counted).
            Err(SkipReason::TooLarge) | Err(SkipReason::Open(_)) => return,
            Err(SkipReason::Read(e)) => {
                self.counters.read_errors.fetch_add(1, Ordering::Relaxed);
                log::debug!("taint: cannot read {}: {e}", escape_path(path));
                return;
            }
        };
        if report.flows.is_empty() {
            return;
        }
        let owner = self.owners.name(uid);
        let now = self.clock.now();
        for flow in &report.flows {
            let mut f = taint::finding(path, flow, now);
            if let Some(o) = &owner {
                f = f.with_account(o.clone());
            }
            if !self.engine.submit(f) {
                log::warn!(
                    "taint: finding for {} refused by a full ingest queue",
                    escape_path(path)
                );
            }
        }
    }
}
