//! [`BoundedQueue`]: a `crossbeam_channel` channel plus a [`QueueHealth`] row.
//!
//! The bound is kept by a count of taken slots, not by the channel: an admission reserves a
//! slot first and a pop gives it back. The channel itself is unbounded, so its memory grows
//! and shrinks with the items waiting (blocks of 31 slots) instead of holding `capacity`
//! slots from the start: an idle daemon's queues of tens of thousands of slots cost nothing.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use parking_lot::{Condvar, Mutex};

use super::capacity::Capacity;
use super::health::QueueHealth;
use super::ring::AdmissionRing;
use super::types::{Admitted, Phase, RowConfig};
use super::work::{PendingLoss, Refused, WorkGuard};
use crate::clock::SharedClock;

pub(super) struct Entry<T> {
    pub(super) item: T,
    pub(super) admitted: i64,
}

struct Inner<T> {
    tx: Sender<Entry<T>>,
    rx: Receiver<Entry<T>>,
    /// Slots taken: items waiting plus admissions between their reservation and their send.
    slots: Capacity,
    /// Producers waiting in [`BoundedQueue::push_timeout`] for a slot; a pop wakes one.
    waiters: AtomicUsize,
    room: Mutex<()>,
    room_freed: Condvar,
    health: Arc<QueueHealth>,
    closed: AtomicBool,
}

/// Bounded multi-producer multi-consumer queue whose health is a [`QueueHealth`] row.
/// Cloning is cheap and shares the queue.
///
/// Guarantees:
/// - Never holds more than its capacity; a refused item is returned to the caller inside
///   [`Refused`], which counts exactly one loss unless retried successfully or withdrawn.
/// - Push and pop cost one channel operation, one clock read and a few atomic operations;
///   no lock is taken by the queue itself.
/// - Items carry their admission stamp, so waiting age survives requeue, retry and
///   coalescing ([`try_push_stamped`](Self::try_push_stamped)).
/// - Cancellation ([`WorkGuard::cancel`], [`Refused::withdraw`]) and shutdown
///   ([`close`](Self::close), [`drain`](Self::drain)) never count as loss.
pub struct BoundedQueue<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for BoundedQueue<T> {
    fn clone(&self) -> Self {
        BoundedQueue {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// Why a queue was not built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueConfigError {
    /// `RowConfig::capacity` was `None` or zero; a bounded queue needs at least one slot.
    NoCapacity,
    /// The capacity is above [`BoundedQueue::MAX_CAPACITY`].
    CapacityTooLarge(u64),
}

impl fmt::Display for QueueConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueConfigError::NoCapacity => {
                write!(f, "a bounded queue needs a capacity of at least 1")
            }
            QueueConfigError::CapacityTooLarge(c) => write!(f, "queue capacity {c} is too large"),
        }
    }
}

impl std::error::Error for QueueConfigError {}

/// Why an item was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefuseReason {
    /// The queue was full (`try_push`).
    Full,
    /// The queue stayed full for the whole wait (`push_timeout`).
    Timeout,
    /// The queue was closed for shutdown: not a loss.
    Closed,
}

/// Why a pop returned nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PopError {
    /// Nothing arrived within the wait.
    Timeout,
    /// The queue is closed and empty.
    Closed,
}

impl<T> BoundedQueue<T> {
    /// Largest accepted capacity (the admission ring holds 8 bytes per slot).
    pub const MAX_CAPACITY: usize = 1 << 20;

    /// Builds a queue of `config.capacity` slots (required, at least 1).
    pub fn new(clock: SharedClock, config: RowConfig) -> Result<Self, QueueConfigError> {
        let cap64 = config.capacity.ok_or(QueueConfigError::NoCapacity)?;
        if cap64 == 0 {
            return Err(QueueConfigError::NoCapacity);
        }
        let capacity = usize::try_from(cap64)
            .ok()
            .filter(|c| *c <= Self::MAX_CAPACITY)
            .ok_or(QueueConfigError::CapacityTooLarge(cap64))?;
        let (tx, rx) = unbounded();
        let health = Arc::new(QueueHealth::build(
            clock,
            config,
            Some(AdmissionRing::new(capacity)),
        ));
        Ok(BoundedQueue {
            inner: Arc::new(Inner {
                tx,
                rx,
                slots: Capacity::new(capacity),
                waiters: AtomicUsize::new(0),
                room: Mutex::new(()),
                room_freed: Condvar::new(),
                health,
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// The queue's health row (register it with a [`super::Registry`]).
    pub fn health(&self) -> &Arc<QueueHealth> {
        &self.inner.health
    }

    /// Fixed capacity.
    pub fn capacity(&self) -> usize {
        self.inner.slots.max()
    }

    /// Items waiting now.
    pub fn len(&self) -> usize {
        self.inner.rx.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.inner.rx.is_empty()
    }

    /// Admits a new item now, or refuses it at once when full.
    #[inline]
    pub fn try_push(&self, item: T) -> Result<(), Refused<T>> {
        let now = self.inner.health.now_nanos();
        self.try_push_entry(
            Entry {
                item,
                admitted: now,
            },
            now,
        )
    }

    /// Admits an item keeping an earlier admission stamp (retry, coalescing), or refuses it.
    pub fn try_push_stamped(&self, item: T, admitted: Admitted) -> Result<(), Refused<T>> {
        let now = self.inner.health.now_nanos();
        self.try_push_entry(
            Entry {
                item,
                admitted: admitted.0,
            },
            now,
        )
    }

    /// Admits an item, waiting up to `timeout` (real time) for space. The admission stamp is
    /// the call instant: a producer blocked on a full queue is waiting demand.
    /// A producer already waiting when the queue closes waits until space or its timeout.
    pub fn push_timeout(&self, item: T, timeout: Duration) -> Result<(), Refused<T>> {
        let now = self.inner.health.now_nanos();
        if self.is_closed() {
            return Err(self.refused(
                Entry {
                    item,
                    admitted: now,
                },
                RefuseReason::Closed,
            ));
        }
        let e = Entry {
            item,
            admitted: now,
        };
        if !self.reserve_within(timeout) {
            self.inner.health.on_full(self.inner.health.now_nanos());
            return Err(self.refused(e, RefuseReason::Timeout));
        }
        match self.inner.tx.send(e) {
            Ok(()) => {
                self.inner
                    .health
                    .on_admitted(now, self.inner.health.now_nanos());
                Ok(())
            }
            Err(e) => {
                self.release();
                Err(self.refused(e.0, RefuseReason::Closed))
            }
        }
    }

    /// Takes a slot if one is free.
    #[inline]
    fn reserve(&self) -> bool {
        self.inner.slots.try_take()
    }

    /// Takes a slot, waiting up to `timeout` for one to be freed.
    fn reserve_within(&self, timeout: Duration) -> bool {
        if self.reserve() {
            return true;
        }
        if timeout.is_zero() {
            return false;
        }
        let deadline = Instant::now().checked_add(timeout);
        let inner = &self.inner;
        // Registered before the check under the lock, so a pop that frees a slot after the
        // check sees a waiter and notifies it (it takes the lock to do so).
        inner.waiters.fetch_add(1, Ordering::SeqCst);
        let mut room = inner.room.lock();
        let got = loop {
            if self.reserve() {
                break true;
            }
            match deadline {
                Some(d) => {
                    if inner.room_freed.wait_until(&mut room, d).timed_out() {
                        break self.reserve();
                    }
                }
                None => inner.room_freed.wait(&mut room),
            }
        };
        drop(room);
        inner.waiters.fetch_sub(1, Ordering::SeqCst);
        got
    }

    /// Gives back the slot of an item taken out of the channel.
    #[inline]
    fn release(&self) {
        let inner = &self.inner;
        inner.slots.give_back(1);
        if inner.waiters.load(Ordering::SeqCst) > 0 {
            let _room = inner.room.lock();
            inner.room_freed.notify_one();
        }
    }

    /// The next waiting entry, its slot given back.
    #[inline]
    fn take(&self) -> Option<Entry<T>> {
        let e = self.inner.rx.try_recv().ok()?;
        self.release();
        Some(e)
    }

    /// Tries a refused item again with its original stamp. The earlier refusal counts no
    /// loss; a new refusal is a new [`Refused`] (one loss if not resolved otherwise).
    pub fn retry(&self, refused: Refused<T>) -> Result<(), Refused<T>> {
        let Refused {
            item,
            admitted,
            mut pending,
            ..
        } = refused;
        pending.disarm();
        let e = Entry {
            item,
            admitted: admitted.0,
        };
        self.try_push_entry(e, self.inner.health.now_nanos())
    }

    /// Admits an item; when full, evicts the oldest waiting item (counted as one loss) and
    /// returns it. Refuses only when closed, or when other producers refilled the freed slot
    /// first (the evicted item is then dropped, already counted).
    pub fn force_push(&self, item: T) -> Result<Option<T>, Refused<T>> {
        let now = self.inner.health.now_nanos();
        match self.try_push_entry(
            Entry {
                item,
                admitted: now,
            },
            now,
        ) {
            Ok(()) => Ok(None),
            Err(r) if r.reason == RefuseReason::Full => {
                let evicted = self.take().map(|old| {
                    self.inner.health.on_removed(now, false);
                    self.inner.health.record_loss();
                    old.item
                });
                self.retry(r).map(|()| evicted)
            }
            Err(r) => Err(r),
        }
    }

    #[inline]
    fn try_push_entry(&self, e: Entry<T>, now: i64) -> Result<(), Refused<T>> {
        if self.is_closed() {
            return Err(self.refused(e, RefuseReason::Closed));
        }
        if !self.reserve() {
            self.inner.health.on_full(now);
            return Err(self.refused(e, RefuseReason::Full));
        }
        let admitted = e.admitted;
        match self.inner.tx.send(e) {
            Ok(()) => {
                self.inner.health.on_admitted(admitted, now);
                Ok(())
            }
            Err(e) => {
                self.release();
                Err(self.refused(e.0, RefuseReason::Closed))
            }
        }
    }

    fn refused(&self, e: Entry<T>, reason: RefuseReason) -> Refused<T> {
        let health = (reason != RefuseReason::Closed).then(|| Arc::clone(&self.inner.health));
        Refused {
            item: e.item,
            admitted: Admitted(e.admitted),
            reason,
            pending: PendingLoss(health),
        }
    }

    /// Takes the head item if any; it is running until the guard ends.
    #[inline]
    pub fn try_pop(&self) -> Option<WorkGuard<'_, T>> {
        self.take().map(|e| self.guard(e))
    }

    /// Takes the head item, waiting up to `timeout` (real time).
    pub fn pop_timeout(&self, timeout: Duration) -> Result<WorkGuard<'_, T>, PopError> {
        match self.inner.rx.recv_timeout(timeout) {
            Ok(e) => {
                self.release();
                Ok(self.guard(e))
            }
            Err(RecvTimeoutError::Timeout) if !self.is_closed() => Err(PopError::Timeout),
            Err(_) => Err(PopError::Closed),
        }
    }

    #[inline]
    fn guard(&self, e: Entry<T>) -> WorkGuard<'_, T> {
        let h = &self.inner.health;
        let now = h.now_nanos();
        h.on_removed(now, true);
        WorkGuard {
            queue: self,
            item: e.item,
            admitted: Admitted(e.admitted),
            running: h.start_running_at(now, Phase::Processing),
        }
    }

    /// Shutdown: refuses new items with [`RefuseReason::Closed`] (not a loss). Waiting items
    /// stay poppable; `pop_timeout` reports [`PopError::Closed`] once empty.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// Removes every waiting item without counting loss or progress (shutdown drain, bulk
    /// cancellation). Returns them in queue order.
    pub fn drain(&self) -> Vec<T> {
        let h = &self.inner.health;
        let mut out = Vec::with_capacity(self.len());
        while let Some(e) = self.take() {
            h.on_removed(h.now_nanos(), false);
            out.push(e.item);
        }
        out
    }
}

impl<T> fmt::Debug for BoundedQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundedQueue")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .field("closed", &self.is_closed())
            .finish()
    }
}
