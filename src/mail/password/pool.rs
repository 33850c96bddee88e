//! The shared password-verification slots: at most [`HASH_SLOTS`] hash calculations at
//! once, on three long-lived threads, with the rows `email_password.hashes` (running
//! calculations, capacity 3) and `email_password.waiting` (callers waiting for a slot,
//! `capacity_unavailable`).
//!
//! Guarantees:
//! - A caller holds no slot while it waits; it takes one, hands a bounded batch of
//!   candidates to a calculation thread, and the thread releases the slot when the batch
//!   ends. At most three batches are calculated at any time, whatever the number of
//!   callers.
//! - Cancellation returns promptly (within [`POLL`]): a waiting caller leaves the queue
//!   (no loss: explicit cancellation), a caller waiting for its batch stops waiting; the
//!   batch keeps its slot until its bounded work ends (it stops at the next candidate once
//!   abandoned).
//! - No password, hash, mailbox or account goes into a row, a log line or an error.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use parking_lot::{Condvar, Mutex};

use super::candidates::Candidates;
use super::scheme::Stored;
use super::verify::{verify, VerifyError};
use crate::clock::SharedClock;
use crate::queue::{LagBasis, QueueHealth, RegisterError, Registry, RowConfig, RowHandle};

/// Concurrent hash calculations at most.
pub const HASH_SLOTS: usize = 3;
/// Row of the running calculations.
pub const HASHES_ROW: &str = "email_password.hashes";
/// Row of the callers waiting for a slot.
pub const WAITING_ROW: &str = "email_password.waiting";
/// How often a waiting caller looks at its cancellation flag and deadline.
pub const POLL: Duration = Duration::from_millis(20);
/// Work per batch: about this many cost units ([`Stored::cost_units`], ~microseconds).
pub const BATCH_UNITS: u64 = 20_000;

/// How a check of a candidate range ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Checked {
    /// Candidate at this index matched.
    Matched(usize),
    /// No candidate of the range matched.
    NoMatch,
    /// The caller's cancellation flag was set.
    Cancelled,
    /// The caller's deadline passed first.
    Deadline,
    /// The calculation was refused by the hashing library.
    Failed(VerifyError),
}

struct Job {
    stored: Arc<Stored>,
    candidates: Arc<Candidates>,
    range: Range<usize>,
    abandoned: Arc<AtomicBool>,
    reply: Sender<Result<Option<usize>, VerifyError>>,
}

struct Slots {
    free: Mutex<usize>,
    cv: Condvar,
}

/// The verification slots (one per daemon; shared by every audit).
pub struct HashPool {
    slots: Arc<Slots>,
    tx: Mutex<Option<Sender<Job>>>,
    hashes: Arc<QueueHealth>,
    waiting: Arc<QueueHealth>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Deadlines are monotonic nanoseconds on this clock (injected in tests).
    clock: SharedClock,
    _rows: Vec<RowHandle>,
}

impl HashPool {
    /// Starts the three calculation threads and registers both rows.
    pub fn start(clock: SharedClock, registry: &Arc<Registry>) -> Result<Arc<HashPool>, PoolError> {
        let hashes = QueueHealth::new(
            clock.clone(),
            RowConfig::new("calculations")
                .capacity(HASH_SLOTS as u64)
                .lag_basis(LagBasis::OperationProgress)
                .running_slots(HASH_SLOTS),
        );
        let mut wcfg = RowConfig::new("callers").lag_basis(LagBasis::OperationProgress);
        wcfg.capacity = None;
        let waiting = QueueHealth::new(clock.clone(), wcfg);
        let rows = vec![
            registry
                .register(HASHES_ROW, hashes.clone())
                .map_err(PoolError::Row)?,
            registry
                .register(WAITING_ROW, waiting.clone())
                .map_err(PoolError::Row)?,
        ];
        let slots = Arc::new(Slots {
            free: Mutex::new(HASH_SLOTS),
            cv: Condvar::new(),
        });
        let (tx, rx) = bounded::<Job>(HASH_SLOTS);
        let mut threads = Vec::new();
        for i in 0..HASH_SLOTS {
            let rx: Receiver<Job> = rx.clone();
            let slots = slots.clone();
            let row = hashes.clone();
            let t = std::thread::Builder::new()
                .name(format!("pw-hash-{i}"))
                .spawn(move || calculate(&rx, &slots, &row))
                .map_err(PoolError::Spawn)?;
            threads.push(t);
        }
        Ok(Arc::new(HashPool {
            slots,
            tx: Mutex::new(Some(tx)),
            hashes,
            waiting,
            threads: Mutex::new(threads),
            clock,
            _rows: rows,
        }))
    }

    /// Candidates per batch for `stored` (about [`BATCH_UNITS`] of work, at least one).
    pub fn batch_len(stored: &Stored) -> usize {
        (BATCH_UNITS / stored.cost_units().max(1)).clamp(1, 4096) as usize
    }

    /// The deadline `d` from now, in the pool clock's monotonic nanoseconds.
    pub fn deadline_after(&self, d: Duration) -> i64 {
        let nanos = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        self.clock.monotonic_nanos().saturating_add(nanos)
    }

    /// Monotonic nanoseconds of the pool's clock.
    pub fn now_nanos(&self) -> i64 {
        self.clock.monotonic_nanos()
    }

    /// Calculations running now (tests, benchmarks).
    pub fn running(&self) -> u64 {
        self.hashes.snapshot().running
    }

    /// Checks candidates `range` against `stored` on one slot. Waits for a slot and then for
    /// the batch, each until `cancel` is set or `deadline` (monotonic nanoseconds of the
    /// pool's clock, see [`HashPool::deadline_after`]) passes.
    pub fn check(
        &self,
        stored: &Arc<Stored>,
        candidates: &Arc<Candidates>,
        range: Range<usize>,
        cancel: &AtomicBool,
        deadline: i64,
    ) -> Checked {
        // Take a slot.
        {
            let ticket = self.waiting.admit();
            let mut free = self.slots.free.lock();
            loop {
                if cancel.load(Ordering::Acquire) {
                    drop(free);
                    ticket.withdraw();
                    return Checked::Cancelled;
                }
                if self.clock.monotonic_nanos() >= deadline {
                    drop(free);
                    ticket.withdraw();
                    return Checked::Deadline;
                }
                if *free > 0 {
                    *free -= 1;
                    break;
                }
                let _ = self.slots.cv.wait_for(&mut free, POLL);
            }
            drop(free);
            ticket.finish();
        }
        let (rtx, rrx) = bounded(1);
        let abandoned = Arc::new(AtomicBool::new(false));
        let job = Job {
            stored: stored.clone(),
            candidates: candidates.clone(),
            range,
            abandoned: abandoned.clone(),
            reply: rtx,
        };
        let sent = match self.tx.lock().as_ref() {
            Some(tx) => tx.send(job).is_ok(),
            None => false,
        };
        if !sent {
            release(&self.slots);
            return Checked::Cancelled;
        }
        loop {
            match rrx.recv_timeout(POLL) {
                Ok(Ok(Some(i))) => return Checked::Matched(i),
                Ok(Ok(None)) => return Checked::NoMatch,
                Ok(Err(e)) => return Checked::Failed(e),
                Err(RecvTimeoutError::Disconnected) => return Checked::Cancelled,
                Err(RecvTimeoutError::Timeout) => {}
            }
            if cancel.load(Ordering::Acquire) {
                abandoned.store(true, Ordering::Release);
                return Checked::Cancelled;
            }
            if self.clock.monotonic_nanos() >= deadline {
                abandoned.store(true, Ordering::Release);
                return Checked::Deadline;
            }
        }
    }

    /// Stops the calculation threads after their current batch.
    pub fn shutdown(&self) {
        self.tx.lock().take();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for HashPool {
    fn drop(&mut self) {
        self.tx.lock().take();
    }
}

fn release(slots: &Slots) {
    *slots.free.lock() += 1;
    slots.cv.notify_one();
}

fn calculate(rx: &Receiver<Job>, slots: &Slots, row: &QueueHealth) {
    while let Ok(job) = rx.recv() {
        let guard = row.start_running();
        let mut result = Ok(None);
        for i in job.range.clone() {
            if job.abandoned.load(Ordering::Acquire) {
                break;
            }
            let Some(c) = job.candidates.get(i) else {
                break;
            };
            match verify(&job.stored, c) {
                Ok(true) => {
                    result = Ok(Some(i));
                    break;
                }
                Ok(false) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        guard.finish();
        release(slots);
        let _ = job.reply.send(result);
    }
}

/// Why the pool could not start.
#[derive(Debug)]
pub enum PoolError {
    Row(RegisterError),
    Spawn(std::io::Error),
}

impl std::fmt::Display for PoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolError::Row(e) => write!(f, "password audit rows: {e}"),
            PoolError::Spawn(e) => write!(f, "password audit threads: {e}"),
        }
    }
}

impl std::error::Error for PoolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PoolError::Row(e) => Some(e),
            PoolError::Spawn(e) => Some(e),
        }
    }
}
