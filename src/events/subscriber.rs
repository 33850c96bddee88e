//! [`Subscription`]: one subscriber's buffer and the loop that writes it to its stream.

use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::bus::{Link, Shared};
use super::{BUFFER_PER_SUBSCRIBER, HEARTBEAT, RETRY_MILLIS};
use crate::clock::secs_between;
use crate::findings::Finding;

/// One encoded event, shared by every subscriber it is offered to.
pub(super) struct Frame {
    bytes: Box<[u8]>,
}

impl Frame {
    /// `id: N`, `event: finding`, one `data:` line with the finding's JSON, blank line.
    pub(super) fn encode(id: u64, f: &Finding) -> Result<Frame, serde_json::Error> {
        let json = serde_json::to_string(f)?;
        let mut out = String::with_capacity(json.len() + 48);
        out.push_str("id: ");
        out.push_str(&id.to_string());
        out.push_str("\nevent: finding\ndata: ");
        // serde_json escapes control characters, so the JSON is a single line.
        out.push_str(&json);
        out.push_str("\n\n");
        Ok(Frame {
            bytes: out.into_bytes().into_boxed_slice(),
        })
    }

    /// The encoded block.
    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Longest wait for a finding before the stop flags are checked again.
const POLL: Duration = Duration::from_millis(500);
/// While findings stream in continuously, a woken subscriber waits this long to gather
/// more before writing: fewer, larger writes and wake-ups at high rates, at most 1 ms of
/// added latency. Never after a quiet spell (a burst is written at once), never when the
/// buffer is already filling.
const COALESCE: Duration = Duration::from_millis(1);
/// "Streaming continuously": the previous write was at most this long ago.
const STREAMING: Duration = Duration::from_millis(2);
/// Coalescing is skipped when this many findings already wait, and the publisher wakes a
/// gathering subscriber when its buffer reaches it (so a burst is drained early).
pub(super) const WAKE_AT: usize = BUFFER_PER_SUBSCRIBER / 4;

/// What one [`Subscription::step`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Keep going.
    Continue,
    /// The bus closed or the server is stopping: end the stream (not a loss).
    End,
}

/// One subscriber. Created by [`super::EventBus::subscribe`]; its slot is freed when it is
/// dropped. [`run`](Self::run) serves it on the caller's thread (an HTTP worker).
pub struct Subscription {
    shared: Arc<Shared>,
    id: u64,
    rx: Receiver<Arc<Frame>>,
    link: Arc<Link>,
    /// Monotonic instant of the last successful write (preamble, event or heartbeat).
    last_write: i64,
    /// A write or flush failed: what is left in the buffer is lost.
    failed: bool,
    delivered: u64,
    lost_in_flight: u64,
    buf: Vec<u8>,
    batch: Vec<Arc<Frame>>,
    /// Client name for the closing log line.
    peer: String,
    /// Why the stream failed.
    error: Option<String>,
}

impl Subscription {
    pub(super) fn new(
        shared: Arc<Shared>,
        id: u64,
        rx: Receiver<Arc<Frame>>,
        link: Arc<Link>,
    ) -> Subscription {
        let last_write = shared.clock.monotonic_nanos();
        Subscription {
            shared,
            id,
            rx,
            link,
            last_write,
            failed: false,
            delivered: 0,
            lost_in_flight: 0,
            buf: Vec::with_capacity(16 * 1024),
            batch: Vec::with_capacity(BUFFER_PER_SUBSCRIBER),
            peer: String::new(),
            error: None,
        }
    }

    /// Serves the stream until the bus closes, the server stops, or a write or flush fails
    /// (the writer enforces the deadline). `peer` names the client in log lines.
    pub fn run(self, w: &mut dyn Write, peer: &str) -> io::Result<()> {
        self.run_while(w, peer, || true)
    }

    /// Like [`run`](Self::run), and also ends (not a loss: an explicit end) as soon as
    /// `keep` answers false. `keep` is asked before the first write and then at least every
    /// [`POLL`] (half a second) while the stream is healthy, so a stream tied to a browser
    /// session ends within a second of the session ending.
    pub fn run_while(
        mut self,
        w: &mut dyn Write,
        peer: &str,
        mut keep: impl FnMut() -> bool,
    ) -> io::Result<()> {
        self.peer = peer.to_string();
        let _ = self.link.thread.set(std::thread::current());
        let shared = Arc::clone(&self.shared);
        let running = shared.health.start_running();
        let result = self.serve(w, &mut keep);
        running.finish();
        if let Err(e) = &result {
            self.error = Some(e.to_string());
        }
        result
    }

    fn serve(&mut self, w: &mut dyn Write, keep: &mut dyn FnMut() -> bool) -> io::Result<()> {
        if !keep() {
            return Ok(());
        }
        let preamble = format!(": svc event stream\nretry: {RETRY_MILLIS}\n\n");
        self.write_out(w, preamble.as_bytes(), 0)?;
        loop {
            if self.step(w, POLL)? == Step::End || !keep() {
                return Ok(());
            }
        }
    }

    /// One turn: end when stopping; write a heartbeat when one is due; otherwise wait up to
    /// `max_wait` (less when a heartbeat falls due sooner) for findings and write every one
    /// that is buffered (up to a buffer's worth) with one write and one flush.
    ///
    /// An error means the stream failed: the findings being written are counted as lost,
    /// and so is everything still buffered when the subscription is dropped.
    pub fn step(&mut self, w: &mut dyn Write, max_wait: Duration) -> io::Result<Step> {
        if self.shared.stopping() {
            return Ok(Step::End);
        }
        let now = self.shared.clock.monotonic_nanos();
        let idle = Duration::from_secs_f64(secs_between(self.last_write, now));
        if idle >= HEARTBEAT {
            self.write_out(w, b": keep-alive\n\n", 0)?;
            return Ok(Step::Continue);
        }
        // While findings stream in, gather for up to COALESCE outside the channel (the
        // publisher unparks this thread once the buffer reaches WAKE_AT), then take what is
        // there; after a quiet spell, wait on the channel and write the first one at once.
        let streaming = idle <= STREAMING;
        if streaming && !max_wait.is_zero() && self.rx.len() < WAKE_AT {
            std::thread::park_timeout(COALESCE.min(max_wait));
        }
        let first = match self.rx.try_recv() {
            Ok(f) => f,
            Err(_) => match self.rx.recv_timeout(max_wait.min(HEARTBEAT - idle)) {
                Ok(f) => f,
                Err(RecvTimeoutError::Timeout) => return Ok(Step::Continue),
                Err(RecvTimeoutError::Disconnected) => return Ok(Step::End),
            },
        };
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        batch.push(first);
        while batch.len() < BUFFER_PER_SUBSCRIBER {
            match self.rx.try_recv() {
                Ok(f) => batch.push(f),
                Err(_) => break,
            }
        }
        let n = batch.len() as u64;
        // Taken from the buffer: no longer waiting; in flight until written.
        self.shared.health.sub_waiting(n);
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        for f in batch.drain(..) {
            buf.extend_from_slice(f.bytes());
        }
        self.batch = batch;
        let result = self.write_out(w, &buf, n);
        self.buf = buf;
        result.map(|()| Step::Continue)
    }

    /// Writes and flushes `bytes` carrying `findings` events. On failure the stream is
    /// marked failed and the findings count as lost.
    fn write_out(&mut self, w: &mut dyn Write, bytes: &[u8], findings: u64) -> io::Result<()> {
        match w.write_all(bytes).and_then(|()| w.flush()) {
            Ok(()) => {
                self.last_write = self.shared.clock.monotonic_nanos();
                if findings > 0 {
                    self.delivered += findings;
                    self.shared
                        .counters
                        .delivered
                        .fetch_add(findings, Ordering::Relaxed);
                    self.shared.health.note_progress();
                }
                Ok(())
            }
            Err(e) => {
                self.failed = true;
                if findings > 0 {
                    self.lost_in_flight += findings;
                    self.shared.health.record_losses(findings);
                }
                Err(e)
            }
        }
    }

    /// Findings buffered for this subscriber now.
    pub fn buffered(&self) -> usize {
        self.rx.len()
    }

    /// Findings delivered to this subscriber so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Whether a write or flush failed.
    pub fn failed(&self) -> bool {
        self.failed
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let rx = &self.rx;
        let left = self
            .shared
            .release(self.id, || rx.try_iter().count() as u64, self.failed);
        let overflow = self.link.overflow.load(Ordering::Relaxed);
        if self.failed {
            let lost = self.lost_in_flight + left;
            log::info!(
                "event stream to {} closed: {}; delivered {}, lost {lost} on the failed stream and {overflow} to a full buffer",
                self.peer,
                self.error.as_deref().unwrap_or("write failed"),
                self.delivered,
            );
        } else {
            log::debug!(
                "event stream to {} ended; delivered {}, lost {overflow} to a full buffer",
                self.peer,
                self.delivered
            );
        }
    }
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .field("delivered", &self.delivered)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}
