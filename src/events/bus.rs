//! [`EventBus`]: the subscriber table and the publishing side.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_channel::{bounded, Sender, TrySendError};
use parking_lot::RwLock;

use super::subscriber::{Frame, Subscription, WAKE_AT};
use super::{BUFFER_PER_SUBSCRIBER, ROW};
use crate::clock::SharedClock;
use crate::findings::engine::Listener;
use crate::findings::Finding;
use crate::queue::{LagBasis, QueueHealth, RegisterError, Registry, RowConfig, RowHandle};

/// Counters of the bus (atomics only; the row carries losses and depth).
#[derive(Default, Debug)]
pub struct Counters {
    /// Findings published (each got an event id).
    pub published: AtomicU64,
    /// Findings written to a subscriber (one per finding per subscriber).
    pub delivered: AtomicU64,
    /// Subscriptions accepted since start.
    pub subscribed: AtomicU64,
    /// Subscriptions refused over the limit since start.
    pub refused: AtomicU64,
}

/// Why a subscription was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscribeError {
    /// `limit` subscribers are already connected.
    Full { limit: usize },
    /// The bus is closed (shutdown).
    Closed,
}

impl fmt::Display for SubscribeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubscribeError::Full { limit } => write!(
                f,
                "too many event-stream subscribers (limit {limit}); try again later"
            ),
            SubscribeError::Closed => write!(f, "the event stream is shutting down"),
        }
    }
}

impl std::error::Error for SubscribeError {}

/// What the publisher and one subscriber share besides the channel.
#[derive(Default)]
pub(super) struct Link {
    /// Findings this subscriber lost to a full buffer (for its closing log line).
    pub(super) overflow: AtomicU64,
    /// The thread serving the stream, woken early when its buffer starts filling while it
    /// gathers a batch.
    pub(super) thread: OnceLock<std::thread::Thread>,
}

pub(super) struct Entry {
    id: u64,
    tx: Sender<Arc<Frame>>,
    link: Arc<Link>,
}

#[derive(Default)]
pub(super) struct Table {
    entries: Vec<Entry>,
    /// Live [`Subscription`]s (entries are removed before a subscription ends, and all at once
    /// by [`EventBus::close`]).
    active: usize,
    next_id: u64,
}

pub(super) struct Shared {
    pub(super) clock: SharedClock,
    pub(super) health: Arc<QueueHealth>,
    _row: RowHandle,
    max_subscribers: usize,
    pub(super) table: RwLock<Table>,
    /// Mirror of `table.active` for readers that must not take the table lock.
    active: AtomicUsize,
    next_event: AtomicU64,
    closed: AtomicBool,
    server_stop: OnceLock<Arc<AtomicBool>>,
    pub(super) counters: Counters,
}

impl Shared {
    /// True once the bus is closed or the HTTP server is stopping.
    pub(super) fn stopping(&self) -> bool {
        self.closed.load(Ordering::Acquire)
            || self
                .server_stop
                .get()
                .is_some_and(|f| f.load(Ordering::Acquire))
    }

    /// Called by a subscription as it ends: removes its entry (no more findings arrive),
    /// then settles what it still buffered and shrinks the row's capacity.
    pub(super) fn release(&self, id: u64, leftover: impl FnOnce() -> u64, failed: bool) -> u64 {
        let mut t = self.table.write();
        t.entries.retain(|e| e.id != id);
        let left = leftover();
        if left > 0 {
            // Depth first, capacity second: the row never sees "0 waiting of 0" as full.
            self.health.sub_waiting(left);
            if failed {
                self.health.record_losses(left);
            }
        }
        t.active = t.active.saturating_sub(1);
        self.active.store(t.active, Ordering::Release);
        self.health
            .set_capacity(Some((t.active * BUFFER_PER_SUBSCRIBER) as u64));
        left
    }
}

/// The event bus. Cheap to clone; clones share the subscriber table and the row.
#[derive(Clone)]
pub struct EventBus {
    shared: Arc<Shared>,
}

impl EventBus {
    /// Builds the bus and registers its `events.deliveries` row.
    pub fn new(
        clock: SharedClock,
        registry: &Arc<Registry>,
        max_subscribers: usize,
    ) -> Result<EventBus, RegisterError> {
        let health = QueueHealth::new(
            clock.clone(),
            RowConfig::new("findings")
                .capacity(0)
                .lag_basis(LagBasis::ConsumerProgress)
                // Streams run indefinitely: they are counted, never aged.
                .running_slots(0),
        );
        let row = registry.register(ROW, health.clone())?;
        Ok(EventBus {
            shared: Arc::new(Shared {
                clock,
                health,
                _row: row,
                max_subscribers,
                table: RwLock::new(Table::default()),
                active: AtomicUsize::new(0),
                next_event: AtomicU64::new(0),
                closed: AtomicBool::new(false),
                server_stop: OnceLock::new(),
                counters: Counters::default(),
            }),
        })
    }

    /// Streams also end when this flag (the HTTP server's stop flag) is set.
    pub fn watch_server_stop(&self, flag: Arc<AtomicBool>) {
        let _ = self.shared.server_stop.set(flag);
    }

    /// The listener to register with [`crate::findings::Engine::subscribe`].
    pub fn listener(&self) -> Listener {
        let bus = self.clone();
        Box::new(move |f: &Finding| bus.publish(f))
    }

    /// Offers one dispatched finding to every subscriber without waiting. A full buffer
    /// drops it for that subscriber (one loss); an encoding error drops it for all (one loss
    /// per subscriber).
    pub fn publish(&self, f: &Finding) {
        let s = &*self.shared;
        if s.closed.load(Ordering::Acquire) {
            return;
        }
        let id = s.next_event.fetch_add(1, Ordering::Relaxed) + 1;
        s.counters.published.fetch_add(1, Ordering::Relaxed);
        let table = s.table.read();
        if table.entries.is_empty() {
            return;
        }
        let frame = match Frame::encode(id, f) {
            Ok(frame) => Arc::new(frame),
            Err(e) => {
                log::warn!("events: finding {id} could not be encoded: {e}");
                s.health.record_losses(table.entries.len() as u64);
                return;
            }
        };
        for e in &table.entries {
            // Counted before the send so the depth never reads low.
            s.health.add_waiting(1);
            match e.tx.try_send(Arc::clone(&frame)) {
                Ok(()) => {
                    if e.tx.len() == WAKE_AT {
                        if let Some(t) = e.link.thread.get() {
                            t.unpark();
                        }
                    }
                }
                Err(TrySendError::Full(_)) => {
                    s.health.sub_waiting(1);
                    s.health.record_loss();
                    e.link.overflow.fetch_add(1, Ordering::Relaxed);
                }
                // The subscription is ending; it settles its own buffer.
                Err(TrySendError::Disconnected(_)) => s.health.sub_waiting(1),
            }
        }
    }

    /// Adds a subscriber, or refuses it over the limit or after [`close`](Self::close).
    pub fn subscribe(&self) -> Result<Subscription, SubscribeError> {
        let s = &self.shared;
        let mut t = s.table.write();
        if s.closed.load(Ordering::Acquire) {
            return Err(SubscribeError::Closed);
        }
        if t.active >= s.max_subscribers {
            s.counters.refused.fetch_add(1, Ordering::Relaxed);
            return Err(SubscribeError::Full {
                limit: s.max_subscribers,
            });
        }
        let (tx, rx) = bounded(BUFFER_PER_SUBSCRIBER);
        t.next_id += 1;
        let id = t.next_id;
        let link = Arc::new(Link::default());
        t.entries.push(Entry {
            id,
            tx,
            link: link.clone(),
        });
        t.active += 1;
        s.active.store(t.active, Ordering::Release);
        s.health
            .set_capacity(Some((t.active * BUFFER_PER_SUBSCRIBER) as u64));
        s.counters.subscribed.fetch_add(1, Ordering::Relaxed);
        Ok(Subscription::new(Arc::clone(s), id, rx, link))
    }

    /// Shutdown: refuses new subscribers and ends every stream (their buffers are a shutdown
    /// drain, not a loss). Idempotent.
    pub fn close(&self) {
        let s = &self.shared;
        s.closed.store(true, Ordering::Release);
        // Dropping the senders wakes every subscriber waiting for a finding.
        s.table.write().entries.clear();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Subscribers connected now (an atomic read; never takes the table lock).
    pub fn subscribers(&self) -> usize {
        self.shared.active.load(Ordering::Acquire)
    }

    /// Most subscribers accepted at once.
    pub fn max_subscribers(&self) -> usize {
        self.shared.max_subscribers
    }

    /// Counters (published, delivered, subscribed, refused).
    pub fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    /// The row's health (also registered as `events.deliveries`).
    pub fn health(&self) -> &Arc<QueueHealth> {
        &self.shared.health
    }
}

impl fmt::Debug for EventBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventBus")
            .field("subscribers", &self.subscribers())
            .field("closed", &self.is_closed())
            .finish()
    }
}
