//! The webhook notifier: a bounded queue of notifications (`alerts.webhook`), one worker
//! thread that POSTs each as JSON, with bounded attempts and exponential backoff.
//!
//! Row `alerts.webhook` (`depth_unit` `notifications`, capacity [`CAPACITY`],
//! `lag_basis` `consumer_progress`):
//! - `waiting`: notifications queued; `running`: the one being delivered (including its
//!   backoff pauses between attempts).
//! - A full queue refuses the new notification: one loss.
//! - A failed attempt that will be retried reports `retry_failed` for a minute and counts no
//!   loss. A notification whose last attempt failed (or that got a permanent refusal) is one
//!   loss and sets `delivery_failed` until the next successful delivery.
//! - Shutdown drops what is still queued without counting loss (logged).
//!
//! Attempt outcomes: a 2xx answer delivers. Transport errors, timeouts and the answers 408,
//! 425, 429 and 5xx are retried; any other answer (redirects are not followed) is a
//! permanent refusal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TryRecvError};
use parking_lot::Mutex;

use crate::clock::SharedClock;
use crate::config::alerts::WebhookConfig;
use crate::queue::{BoundedQueue, Flag, PopError, Registry, RowConfig, RowHandle, WorkGuard};

/// Name of the health row.
pub const ROW: &str = "alerts.webhook";
/// Notifications waiting at most.
pub const CAPACITY: u64 = 256;
/// Pause after the first failed attempt; doubles after each further failure.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// Longest pause between attempts.
pub const BACKOFF_CAP: Duration = Duration::from_secs(16);
/// Longest wait of the worker before it checks the stop signal and the budget window.
const POLL: Duration = Duration::from_millis(500);

/// Pause before the next attempt after `failed` failed attempts (1, 2, 4, 8, 16, 16, ... s).
pub fn backoff(failed: u32) -> Duration {
    let shift = failed.saturating_sub(1).min(16);
    BACKOFF_BASE.saturating_mul(1u32 << shift).min(BACKOFF_CAP)
}

/// One notification: its JSON body and a short description for logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub body: Vec<u8>,
    pub describe: String,
}

/// Why an attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptError {
    /// Worth retrying (transport error, timeout, 408/425/429/5xx).
    Retry(String),
    /// Retrying will not help (another non-2xx answer).
    Permanent(String),
}

/// Sends one notification body.
pub trait Transport: Send {
    fn post(&mut self, body: &[u8]) -> Result<(), AttemptError>;
}

/// The real transport: a JSON POST with `ureq` (rustls, ring), one deadline per attempt, no
/// redirects; loopback destinations bypass any proxy from the environment.
pub struct HttpTransport {
    agent: ureq::Agent,
    url: String,
    redacted: String,
}

impl HttpTransport {
    pub fn new(cfg: &WebhookConfig) -> HttpTransport {
        let mut b = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(cfg.timeout_seconds)))
            .max_redirects(0)
            .http_status_as_error(false)
            .user_agent(format!("svc/{}", env!("CARGO_PKG_VERSION")));
        if cfg.is_loopback() {
            b = b.proxy(None);
        }
        HttpTransport {
            agent: b.build().into(),
            url: cfg.url.clone(),
            redacted: cfg.redacted(),
        }
    }

    /// Error text without the URL (it may carry a secret).
    fn scrub(&self, msg: String) -> String {
        msg.replace(&self.url, &self.redacted)
    }
}

impl Transport for HttpTransport {
    fn post(&mut self, body: &[u8]) -> Result<(), AttemptError> {
        let result = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .send(body);
        match result {
            Ok(resp) => {
                let status = resp.status().as_u16();
                match status {
                    200..=299 => Ok(()),
                    408 | 425 | 429 | 500..=599 => {
                        Err(AttemptError::Retry(format!("answered {status}")))
                    }
                    _ => Err(AttemptError::Permanent(format!("answered {status}"))),
                }
            }
            Err(e) => Err(AttemptError::Retry(self.scrub(e.to_string()))),
        }
    }
}

/// Counters of the notifier (atomics only).
#[derive(Default, Debug)]
pub struct Counters {
    pub delivered: AtomicU64,
    pub failed: AtomicU64,
    pub attempts: AtomicU64,
    pub retries: AtomicU64,
}

/// A notification being delivered, with its attempt count and next attempt instant.
pub struct InFlight<'q> {
    guard: WorkGuard<'q, Notification>,
    attempts: u32,
    next_at: i64,
}

/// What one [`Worker::step`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turn {
    /// Nothing queued.
    Idle,
    /// The queue is closed and empty.
    Closed,
    /// Delivered.
    Delivered,
    /// The attempt failed; the next one is due after the pause.
    Retrying(Duration),
    /// Waiting for the next attempt; this much is left.
    Backoff(Duration),
    /// Given up: one loss.
    Lost,
}

/// The delivery logic, driven by [`Worker::step`] (the thread loop, or a test with a manual
/// clock).
pub struct Worker {
    transport: Box<dyn Transport>,
    clock: SharedClock,
    max_attempts: u32,
    counters: Arc<Counters>,
}

impl Worker {
    pub fn new(
        transport: Box<dyn Transport>,
        clock: SharedClock,
        max_attempts: u32,
        counters: Arc<Counters>,
    ) -> Worker {
        Worker {
            transport,
            clock,
            max_attempts: max_attempts.max(1),
            counters,
        }
    }

    /// One turn: take a notification if none is in flight (waiting up to `wait`), and make
    /// an attempt when one is due.
    pub fn step<'q>(
        &mut self,
        queue: &'q BoundedQueue<Notification>,
        current: &mut Option<InFlight<'q>>,
        wait: Duration,
    ) -> Turn {
        if current.is_none() {
            match queue.pop_timeout(wait) {
                Ok(guard) => {
                    *current = Some(InFlight {
                        guard,
                        attempts: 0,
                        next_at: self.clock.monotonic_nanos(),
                    });
                }
                Err(PopError::Timeout) => return Turn::Idle,
                Err(PopError::Closed) => return Turn::Closed,
            }
        }
        let Some(c) = current.as_mut() else {
            return Turn::Idle;
        };
        let now = self.clock.monotonic_nanos();
        if now < c.next_at {
            let left = u64::try_from(c.next_at - now).unwrap_or(0);
            return Turn::Backoff(Duration::from_nanos(left));
        }
        // Each attempt (and the pause after it) gets its own phase budget.
        c.guard.set_phase(crate::queue::Phase::Processing);
        c.attempts += 1;
        self.counters.attempts.fetch_add(1, Ordering::Relaxed);
        let outcome = self.transport.post(&c.guard.body);
        let health = queue.health();
        match outcome {
            Ok(()) => {
                health.set_flag(Flag::DeliveryFailed, false);
                self.counters.delivered.fetch_add(1, Ordering::Relaxed);
                if let Some(c) = current.take() {
                    log::debug!("webhook: delivered {}", c.guard.describe);
                    c.guard.finish();
                }
                Turn::Delivered
            }
            Err(AttemptError::Retry(e)) if c.attempts < self.max_attempts => {
                let pause = backoff(c.attempts);
                c.next_at = now.saturating_add(i64::try_from(pause.as_nanos()).unwrap_or(i64::MAX));
                health.note_retry_failed();
                self.counters.retries.fetch_add(1, Ordering::Relaxed);
                log::warn!(
                    "webhook: attempt {}/{} for {} failed ({e}); retrying in {} s",
                    c.attempts,
                    self.max_attempts,
                    c.guard.describe,
                    pause.as_secs()
                );
                Turn::Retrying(pause)
            }
            Err(AttemptError::Retry(e)) | Err(AttemptError::Permanent(e)) => {
                health.set_flag(Flag::DeliveryFailed, true);
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
                if let Some(c) = current.take() {
                    log::error!(
                        "webhook: giving up on {} after {} attempt(s): {e}",
                        c.guard.describe,
                        c.attempts
                    );
                    c.guard.lose();
                }
                Turn::Lost
            }
        }
    }
}

/// The notifier: queue, row, worker thread.
pub struct Webhook {
    queue: BoundedQueue<Notification>,
    _row: RowHandle,
    max_attempts: u32,
    destination: String,
    counters: Arc<Counters>,
    stop: Mutex<Option<Sender<()>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Webhook {
    /// Builds the queue and registers `alerts.webhook`. Call [`start`](Self::start) next.
    pub fn new(
        cfg: &WebhookConfig,
        clock: SharedClock,
        registry: &Arc<Registry>,
    ) -> Result<Webhook, String> {
        let queue = BoundedQueue::new(
            clock,
            RowConfig::new("notifications")
                .capacity(CAPACITY)
                .running_slots(1),
        )
        .map_err(|e| format!("{ROW}: {e}"))?;
        let row = registry
            .register(ROW, queue.health().clone())
            .map_err(|e| format!("{ROW}: {e}"))?;
        Ok(Webhook {
            queue,
            _row: row,
            max_attempts: cfg.max_attempts,
            destination: cfg.redacted(),
            counters: Arc::new(Counters::default()),
            stop: Mutex::new(None),
            thread: Mutex::new(None),
        })
    }

    /// Starts the worker thread. `tick` runs at least every half second (the budget uses it
    /// to close its window).
    pub fn start(
        &self,
        transport: Box<dyn Transport>,
        clock: SharedClock,
        tick: Box<dyn Fn() + Send>,
    ) -> Result<(), String> {
        let (tx, rx) = bounded::<()>(0);
        let worker = Worker::new(transport, clock, self.max_attempts, self.counters.clone());
        let queue = self.queue.clone();
        let t = std::thread::Builder::new()
            .name("alerts-webhook".into())
            .spawn(move || run(worker, queue, rx, tick))
            .map_err(|e| e.to_string())?;
        *self.stop.lock() = Some(tx);
        *self.thread.lock() = Some(t);
        Ok(())
    }

    /// Queues a notification; false when refused (a full queue counts one loss).
    pub fn enqueue(&self, n: Notification) -> bool {
        match self.queue.try_push(n) {
            Ok(()) => true,
            Err(refused) => {
                log::warn!("webhook: {} refused: {refused}", refused.item().describe);
                false
            }
        }
    }

    /// Where notifications go (scheme and host only).
    pub fn destination(&self) -> &str {
        &self.destination
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    #[cfg(test)]
    pub(crate) fn queue_for_tests(&self) -> &BoundedQueue<Notification> {
        &self.queue
    }

    /// Stops the worker: waits up to `grace` for an attempt in progress, then leaves the
    /// thread to end on its own (the process is exiting). Queued notifications are dropped
    /// (a shutdown drain, not a loss; logged).
    pub fn shutdown(&self, grace: Duration) {
        self.queue.close();
        drop(self.stop.lock().take());
        let Some(t) = self.thread.lock().take() else {
            return;
        };
        let deadline = Instant::now() + grace;
        while !t.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if t.is_finished() {
            let _ = t.join();
        } else {
            log::warn!("webhook: an attempt is still in progress at shutdown; not waiting for it");
        }
    }
}

fn run(
    mut worker: Worker,
    queue: BoundedQueue<Notification>,
    stop: Receiver<()>,
    tick: Box<dyn Fn() + Send>,
) {
    let mut current: Option<InFlight<'_>> = None;
    loop {
        tick();
        if matches!(stop.try_recv(), Err(TryRecvError::Disconnected)) {
            break;
        }
        match worker.step(&queue, &mut current, POLL) {
            Turn::Closed => break,
            Turn::Backoff(left) | Turn::Retrying(left) => {
                if let Err(RecvTimeoutError::Disconnected) = stop.recv_timeout(left.min(POLL)) {
                    break;
                }
            }
            Turn::Idle | Turn::Delivered | Turn::Lost => {}
        }
    }
    if let Some(c) = current.take() {
        log::warn!(
            "webhook: shutdown while retrying {}; not sent",
            c.guard.describe
        );
        c.guard.cancel();
    }
    let left = queue.drain();
    if !left.is_empty() {
        log::warn!(
            "webhook: {} queued notification(s) not sent at shutdown",
            left.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::queue::{Condition, Row, Status};
    use std::collections::VecDeque;

    /// Answers attempts from a script; records every body.
    struct Scripted {
        answers: Arc<Mutex<VecDeque<Result<(), AttemptError>>>>,
        seen: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    impl Transport for Scripted {
        fn post(&mut self, body: &[u8]) -> Result<(), AttemptError> {
            self.seen.lock().push(body.to_vec());
            self.answers.lock().pop_front().unwrap_or(Ok(()))
        }
    }

    type Script = Arc<Mutex<VecDeque<Result<(), AttemptError>>>>;

    struct Fixture {
        hook: Webhook,
        worker: Worker,
        reg: Arc<Registry>,
        clock: Arc<ManualClock>,
        answers: Script,
        seen: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    fn setup(max_attempts: u32) -> Fixture {
        let clock = ManualClock::at_epoch_2026();
        let reg = Registry::new();
        let cfg = WebhookConfig {
            url: "https://hooks.example.com/secret".into(),
            timeout_seconds: 5,
            max_attempts,
        };
        let hook = Webhook::new(&cfg, clock.clone(), &reg).unwrap();
        let answers: Script = Arc::new(Mutex::new(VecDeque::new()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let worker = Worker::new(
            Box::new(Scripted {
                answers: answers.clone(),
                seen: seen.clone(),
            }),
            clock.clone(),
            max_attempts,
            hook.counters.clone(),
        );
        Fixture {
            hook,
            worker,
            reg,
            clock,
            answers,
            seen,
        }
    }

    fn note(i: u32) -> Notification {
        Notification {
            body: format!("{{\"n\":{i}}}").into_bytes(),
            describe: format!("alert {i}"),
        }
    }

    fn row(reg: &Registry) -> Row {
        reg.snapshot()[ROW].clone()
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let secs: Vec<u64> = (1..=7).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 16, 16]);
        assert_eq!(backoff(0).as_secs(), 1);
        assert_eq!(backoff(u32::MAX), BACKOFF_CAP);
    }

    #[test]
    fn a_retry_that_survives_reports_retry_failed_without_loss() {
        let Fixture {
            hook,
            worker: mut w,
            reg,
            clock,
            answers,
            seen,
        } = setup(5);
        answers.lock().extend([
            Err(AttemptError::Retry("connection refused".into())),
            Err(AttemptError::Retry("answered 503".into())),
        ]);
        assert!(hook.enqueue(note(1)));
        let q = hook.queue.clone();
        let mut cur = None;
        assert_eq!(
            w.step(&q, &mut cur, Duration::ZERO),
            Turn::Retrying(Duration::from_secs(1))
        );
        let r = row(&reg);
        assert_eq!((r.waiting, r.running, r.dropped_total), (Some(0), 1, 0));
        assert_eq!(r.conditions, vec![Condition::RetryFailed]);
        assert_eq!(r.status, Status::Warning);
        // Not due yet: no attempt.
        assert_eq!(
            w.step(&q, &mut cur, Duration::ZERO),
            Turn::Backoff(Duration::from_secs(1))
        );
        clock.advance_secs(1);
        assert_eq!(
            w.step(&q, &mut cur, Duration::ZERO),
            Turn::Retrying(Duration::from_secs(2))
        );
        clock.advance_secs(2);
        assert_eq!(w.step(&q, &mut cur, Duration::ZERO), Turn::Delivered);
        assert_eq!(seen.lock().len(), 3);
        let r = row(&reg);
        assert_eq!((r.running, r.dropped_total), (0, 0));
        assert_eq!(
            r.conditions,
            vec![Condition::RetryFailed],
            "shown for a minute"
        );
        clock.advance_secs(60);
        let r = row(&reg);
        assert!(r.conditions.is_empty());
        assert_eq!(r.status, Status::Ok);
        assert_eq!(w.step(&q, &mut cur, Duration::ZERO), Turn::Idle);
    }

    #[test]
    fn exhausted_attempts_are_one_loss_and_delivery_failed_until_a_success() {
        let Fixture {
            hook,
            worker: mut w,
            reg,
            clock,
            answers,
            ..
        } = setup(3);
        for _ in 0..3 {
            answers
                .lock()
                .push_back(Err(AttemptError::Retry("timeout".into())));
        }
        hook.enqueue(note(1));
        hook.enqueue(note(2));
        let q = hook.queue.clone();
        let mut cur = None;
        assert!(matches!(
            w.step(&q, &mut cur, Duration::ZERO),
            Turn::Retrying(_)
        ));
        clock.advance_secs(1);
        assert!(matches!(
            w.step(&q, &mut cur, Duration::ZERO),
            Turn::Retrying(_)
        ));
        clock.advance_secs(2);
        assert_eq!(w.step(&q, &mut cur, Duration::ZERO), Turn::Lost);
        let r = row(&reg);
        assert_eq!(r.dropped_total, 1, "one notification, one loss");
        assert!(r.conditions.contains(&Condition::DeliveryFailed));
        assert_eq!(r.waiting, Some(1));
        // The next notification gets through: delivery_failed clears.
        assert_eq!(w.step(&q, &mut cur, Duration::ZERO), Turn::Delivered);
        clock.advance_secs(61);
        let r = row(&reg);
        assert!(r.conditions.is_empty(), "{r:?}");
        assert_eq!(r.dropped_total, 1, "losses survive recovery");
        assert_eq!(hook.counters().failed.load(Ordering::Relaxed), 1);
        assert_eq!(hook.counters().attempts.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn permanent_refusal_is_not_retried() {
        let Fixture {
            hook,
            worker: mut w,
            reg,
            answers,
            seen,
            ..
        } = setup(5);
        answers
            .lock()
            .push_back(Err(AttemptError::Permanent("answered 404".into())));
        hook.enqueue(note(1));
        let q = hook.queue.clone();
        let mut cur = None;
        assert_eq!(w.step(&q, &mut cur, Duration::ZERO), Turn::Lost);
        assert_eq!(seen.lock().len(), 1);
        assert_eq!(row(&reg).dropped_total, 1);
    }

    #[test]
    fn a_full_queue_refuses_with_one_loss_each() {
        let Fixture { hook, reg, .. } = setup(5);
        for i in 0..(CAPACITY as u32 + 2) {
            let _ = hook.enqueue(note(i));
        }
        let r = row(&reg);
        assert_eq!((r.waiting, r.dropped_total), (Some(CAPACITY), 2));
        assert_eq!(r.depth_unit, "notifications");
    }

    /// A real HTTP exchange with the real transport against a one-shot loopback server.
    #[test]
    fn http_transport_posts_json_and_classifies_answers() {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let mut bodies = Vec::new();
            for status in ["204 No Content", "503 Service Unavailable", "404 Not Found"] {
                let (conn, _) = listener.accept().unwrap();
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut len = 0usize;
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    r.read_line(&mut line).unwrap();
                    if line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                    head.push_str(&line);
                }
                let mut body = vec![0; len];
                r.read_exact(&mut body).unwrap();
                bodies.push((head, body));
                let mut w = conn;
                write!(
                    w,
                    "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                .unwrap();
            }
            bodies
        });
        let cfg = WebhookConfig {
            url: format!("http://127.0.0.1:{port}/hook/SECRET"),
            timeout_seconds: 5,
            max_attempts: 3,
        };
        let mut t = HttpTransport::new(&cfg);
        assert_eq!(t.post(b"{\"a\":1}"), Ok(()));
        assert!(matches!(t.post(b"{}"), Err(AttemptError::Retry(_))));
        assert!(matches!(t.post(b"{}"), Err(AttemptError::Permanent(_))));
        let bodies = server.join().unwrap();
        assert!(bodies[0].0.starts_with("POST /hook/SECRET HTTP/1.1"));
        assert!(bodies[0]
            .0
            .to_ascii_lowercase()
            .contains("content-type: application/json"));
        assert_eq!(bodies[0].1, b"{\"a\":1}");
        // Nobody listens any more: a transport error, retried, without the secret.
        match t.post(b"{}") {
            Err(AttemptError::Retry(e)) => assert!(!e.contains("SECRET"), "{e}"),
            other => panic!("{other:?}"),
        }
    }
}
