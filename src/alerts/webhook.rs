//! The webhook notifier: notifications wait in the durable spool ([`super::spool`], row
//! `panel.spool`); one worker thread POSTs each as JSON, oldest first, with bounded attempts
//! and exponential backoff, and removes it from the spool once delivered or given up.
//!
//! Row `panel.spool` (`depth_unit` `records`, capacity [`super::spool::CAPACITY`],
//! `lag_basis` `consumer_progress`):
//! - `waiting`: spooled notifications; `running`: the one being delivered (including its
//!   backoff pauses between attempts).
//! - A full spool drops its oldest waiting record for the new one: one loss.
//! - A failed attempt that will be retried reports `retry_failed` for a minute and counts no
//!   loss. A notification whose last attempt failed (or that got a permanent refusal) is one
//!   loss and sets `delivery_failed` until the next successful delivery.
//! - Delivery is at least once: a record leaves the spool only after its delivery (or its
//!   last attempt); a restart in between delivers it again. Each body carries a unique `id`
//!   so receivers can drop repeats. After a restart every spooled record starts again with
//!   `max_attempts` attempts.
//! - Shutdown leaves the spool as it is (nothing is dropped; the record in delivery stays).
//!
//! Attempt outcomes: a 2xx answer delivers. Transport errors, timeouts and the answers 408,
//! 425, 429 and 5xx are retried; any other answer (redirects are not followed) is a
//! permanent refusal.
//!
//! Settings (`alerts.webhook.*`) are swapped live by [`Webhook::reconfigure`]: the worker
//! builds a new transport before its next attempt, keeping the record in delivery and its
//! attempt count.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use super::spool::Spool;
use crate::clock::SharedClock;
use crate::config::alerts::WebhookConfig;
use crate::queue::{Flag, Registry, RunningGuard};
use crate::store::spool::SpoolRecord;
use crate::store::Store;

/// Pause after the first failed attempt; doubles after each further failure.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// Longest pause between attempts.
pub const BACKOFF_CAP: Duration = Duration::from_secs(16);
/// Longest wait of the worker before it checks the stop signal and the budget window.
const POLL: Duration = Duration::from_millis(500);
/// Pause before retrying a failed spool read or removal.
const SPOOL_RETRY: Duration = Duration::from_secs(1);

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

/// Builds the transport for a webhook configuration (the real one: [`HttpTransport::new`]).
pub type TransportFactory = Box<dyn Fn(&WebhookConfig) -> Box<dyn Transport> + Send + Sync>;

/// The real transport factory.
pub fn http_factory() -> TransportFactory {
    Box::new(|cfg| Box::new(HttpTransport::new(cfg)))
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

/// The live webhook settings with a generation, so the worker notices a change.
pub struct Settings {
    cfg: RwLock<(u64, WebhookConfig)>,
}

impl Settings {
    pub fn new(cfg: &WebhookConfig) -> Arc<Settings> {
        Arc::new(Settings {
            cfg: RwLock::new((1, cfg.clone())),
        })
    }

    /// Replaces the settings (a new generation when they differ).
    pub fn set(&self, cfg: &WebhookConfig) -> bool {
        let mut g = self.cfg.write();
        if g.1 == *cfg {
            return false;
        }
        *g = (g.0 + 1, cfg.clone());
        true
    }

    pub fn get(&self) -> (u64, WebhookConfig) {
        self.cfg.read().clone()
    }
}

/// A notification being delivered, with its attempt count and next attempt instant.
pub struct InFlight<'s> {
    record: SpoolRecord,
    running: RunningGuard<'s>,
    attempts: u32,
    next_at: i64,
    /// Delivered or given up; its removal from the spool is pending.
    done: Option<Done>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Done {
    Delivered,
    Lost,
}

/// What one [`Worker::step`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turn {
    /// Nothing spooled.
    Idle,
    /// Delivered (and removed from the spool).
    Delivered,
    /// The attempt failed; the next one is due after the pause.
    Retrying(Duration),
    /// Waiting for the next attempt; this much is left.
    Backoff(Duration),
    /// Given up: one loss (removed from the spool).
    Lost,
    /// The spool could not be read or updated; try again after this pause.
    SpoolError(Duration),
}

/// The delivery logic, driven by [`Worker::step`] (the thread loop, or a test with a manual
/// clock).
pub struct Worker {
    factory: TransportFactory,
    settings: Arc<Settings>,
    generation: u64,
    transport: Box<dyn Transport>,
    max_attempts: u32,
    clock: SharedClock,
    counters: Arc<Counters>,
}

impl Worker {
    pub fn new(
        factory: TransportFactory,
        settings: Arc<Settings>,
        clock: SharedClock,
        counters: Arc<Counters>,
    ) -> Worker {
        let (generation, cfg) = settings.get();
        Worker {
            transport: factory(&cfg),
            max_attempts: cfg.max_attempts.max(1),
            factory,
            settings,
            generation,
            clock,
            counters,
        }
    }

    /// Picks up changed settings: a new transport (destination, timeout) and attempt limit.
    fn refresh(&mut self) {
        let (generation, cfg) = self.settings.get();
        if generation != self.generation {
            self.transport = (self.factory)(&cfg);
            self.max_attempts = cfg.max_attempts.max(1);
            self.generation = generation;
            log::info!(
                "webhook: settings changed; delivering to {}",
                cfg.redacted()
            );
        }
    }

    /// One turn: take the oldest spooled notification if none is in flight (waiting up to
    /// `wait` when the spool is empty), and make an attempt when one is due.
    pub fn step<'s>(
        &mut self,
        spool: &'s Spool,
        current: &mut Option<InFlight<'s>>,
        wait: Duration,
    ) -> Turn {
        self.refresh();
        if current.is_none() {
            match spool.head() {
                Ok(Some(record)) => {
                    spool.set_in_flight(record.id);
                    *current = Some(InFlight {
                        record,
                        running: spool.health().start_running(),
                        attempts: 0,
                        next_at: self.clock.monotonic_nanos(),
                        done: None,
                    });
                }
                Ok(None) => {
                    spool.wait(wait);
                    return Turn::Idle;
                }
                Err(e) => {
                    log::warn!("webhook: cannot read the spool: {e}");
                    return Turn::SpoolError(SPOOL_RETRY);
                }
            }
        }
        let Some(c) = current.as_mut() else {
            return Turn::Idle;
        };
        if let Some(done) = c.done {
            return Self::finish(spool, current, done);
        }
        let now = self.clock.monotonic_nanos();
        if now < c.next_at {
            let left = u64::try_from(c.next_at - now).unwrap_or(0);
            return Turn::Backoff(Duration::from_nanos(left));
        }
        // Each attempt (and the pause after it) gets its own phase budget.
        c.running.set_phase(crate::queue::Phase::Processing);
        c.attempts += 1;
        self.counters.attempts.fetch_add(1, Ordering::Relaxed);
        let outcome = self.transport.post(&c.record.body);
        let health = spool.health();
        match outcome {
            Ok(()) => {
                health.set_flag(Flag::DeliveryFailed, false);
                self.counters.delivered.fetch_add(1, Ordering::Relaxed);
                log::debug!("webhook: delivered {}", c.record.describe);
                c.done = Some(Done::Delivered);
                Self::finish(spool, current, Done::Delivered)
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
                    c.record.describe,
                    pause.as_secs()
                );
                Turn::Retrying(pause)
            }
            Err(AttemptError::Retry(e)) | Err(AttemptError::Permanent(e)) => {
                health.set_flag(Flag::DeliveryFailed, true);
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
                log::error!(
                    "webhook: giving up on {} after {} attempt(s): {e}",
                    c.record.describe,
                    c.attempts
                );
                c.done = Some(Done::Lost);
                Self::finish(spool, current, Done::Lost)
            }
        }
    }

    /// Removes the finished record from the spool; until that succeeds it stays in flight
    /// (never attempted again).
    fn finish<'s>(spool: &'s Spool, current: &mut Option<InFlight<'s>>, done: Done) -> Turn {
        let Some(c) = current.as_ref() else {
            return Turn::Idle;
        };
        if let Err(e) = spool.remove(c.record.id) {
            log::warn!(
                "webhook: cannot remove {} from the spool: {e}",
                c.record.describe
            );
            return Turn::SpoolError(SPOOL_RETRY);
        }
        let Some(c) = current.take() else {
            return Turn::Idle;
        };
        spool.set_in_flight(0);
        match done {
            Done::Delivered => {
                c.running.finish();
                Turn::Delivered
            }
            Done::Lost => {
                c.running.lose();
                Turn::Lost
            }
        }
    }
}

/// The notifier: spool, settings, worker thread.
pub struct Webhook {
    spool: Arc<Spool>,
    settings: Arc<Settings>,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Webhook {
    /// Opens the spool (registers `panel.spool`). Call [`start`](Self::start) next.
    pub fn new(
        cfg: &WebhookConfig,
        clock: SharedClock,
        store: Store,
        registry: &Arc<Registry>,
        capacity: usize,
    ) -> Result<Webhook, super::AlertsError> {
        let spool = Spool::open(store, clock, registry, capacity)?;
        Ok(Webhook {
            spool: Arc::new(spool),
            settings: Settings::new(cfg),
            counters: Arc::new(Counters::default()),
            stop: Arc::new(AtomicBool::new(false)),
            thread: Mutex::new(None),
        })
    }

    /// Starts the worker thread. `tick` runs at least every half second (the budget uses it
    /// to close its window).
    pub fn start(
        &self,
        factory: TransportFactory,
        clock: SharedClock,
        tick: Box<dyn Fn() + Send>,
    ) -> Result<(), super::AlertsError> {
        let worker = Worker::new(factory, self.settings.clone(), clock, self.counters.clone());
        let spool = self.spool.clone();
        let stop = self.stop.clone();
        let t = std::thread::Builder::new()
            .name("alerts-webhook".into())
            .spawn(move || run(worker, &spool, &stop, tick))
            .map_err(super::AlertsError::Spawn)?;
        *self.thread.lock() = Some(t);
        Ok(())
    }

    /// Spools a notification; false when it could not be stored (one loss, logged).
    pub fn enqueue(&self, n: Notification) -> bool {
        self.spool.push(&n.describe, &n.body)
    }

    /// New settings (`alerts.webhook.*`); the worker uses them from its next attempt.
    pub fn reconfigure(&self, cfg: &WebhookConfig) -> bool {
        let changed = self.settings.set(cfg);
        if changed {
            self.spool.wake();
        }
        changed
    }

    /// Where notifications go (scheme and host only).
    pub fn destination(&self) -> String {
        self.settings.get().1.redacted()
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Attempt deadline of the current settings.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.settings.get().1.timeout_seconds)
    }

    #[cfg(test)]
    pub(crate) fn spool(&self) -> &Spool {
        &self.spool
    }

    /// Stops the worker: waits up to `grace` for an attempt in progress, then leaves the
    /// thread to end on its own. The spool keeps every record, the one in delivery too.
    /// Returns whether the thread ended within `grace`.
    pub fn shutdown(&self, grace: Duration) -> bool {
        self.stop.store(true, Ordering::SeqCst);
        self.spool.wake();
        let Some(t) = self.thread.lock().take() else {
            return true;
        };
        let deadline = Instant::now() + grace;
        while !t.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if t.is_finished() {
            let _ = t.join();
            true
        } else {
            log::warn!("webhook: an attempt is still in progress at shutdown; not waiting for it");
            false
        }
    }
}

fn run(mut worker: Worker, spool: &Spool, stop: &AtomicBool, tick: Box<dyn Fn() + Send>) {
    let mut current: Option<InFlight<'_>> = None;
    while !stop.load(Ordering::SeqCst) {
        tick();
        match worker.step(spool, &mut current, POLL) {
            Turn::Backoff(left) | Turn::Retrying(left) | Turn::SpoolError(left) => {
                spool.wait(left.min(POLL));
            }
            Turn::Idle | Turn::Delivered | Turn::Lost => {}
        }
    }
    if let Some(c) = current.take() {
        // Still spooled: delivered after the next start (not a loss).
        spool.set_in_flight(0);
        c.running.cancel();
    }
    let left = spool.len();
    if left > 0 {
        log::info!("webhook: {left} notification(s) stay spooled for the next start");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::spool::ROW;
    use crate::clock::ManualClock;
    use crate::queue::{Condition, Row, Status};
    use std::collections::VecDeque;

    type Script = Arc<Mutex<VecDeque<Result<(), AttemptError>>>>;
    type Seen = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

    /// Answers attempts from a script; records every body with the URL it went to.
    struct Scripted {
        url: String,
        answers: Script,
        seen: Seen,
    }

    impl Transport for Scripted {
        fn post(&mut self, body: &[u8]) -> Result<(), AttemptError> {
            self.seen.lock().push((self.url.clone(), body.to_vec()));
            self.answers.lock().pop_front().unwrap_or(Ok(()))
        }
    }

    struct Fixture {
        hook: Webhook,
        worker: Worker,
        reg: Arc<Registry>,
        clock: Arc<ManualClock>,
        answers: Script,
        seen: Seen,
        store: Store,
        dir: std::path::PathBuf,
    }

    fn cfg(max_attempts: u32) -> WebhookConfig {
        WebhookConfig {
            url: "https://hooks.example.com/secret".into(),
            timeout_seconds: 5,
            max_attempts,
        }
    }

    fn setup(tag: &str, max_attempts: u32) -> Fixture {
        let dir = std::env::temp_dir().join(format!("svc-hook-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let clock = ManualClock::at_epoch_2026();
        let reg = Registry::new();
        let hook =
            Webhook::new(&cfg(max_attempts), clock.clone(), store.clone(), &reg, 16).unwrap();
        let answers: Script = Arc::new(Mutex::new(VecDeque::new()));
        let seen: Seen = Arc::new(Mutex::new(Vec::new()));
        let (a, s) = (answers.clone(), seen.clone());
        let factory: TransportFactory = Box::new(move |c: &WebhookConfig| {
            Box::new(Scripted {
                url: c.url.clone(),
                answers: a.clone(),
                seen: s.clone(),
            }) as Box<dyn Transport>
        });
        let worker = Worker::new(
            factory,
            hook.settings.clone(),
            clock.clone(),
            hook.counters.clone(),
        );
        Fixture {
            hook,
            worker,
            reg,
            clock,
            answers,
            seen,
            store,
            dir,
        }
    }

    impl Fixture {
        fn finish(self) {
            self.store.close();
            let _ = std::fs::remove_dir_all(&self.dir);
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
        let mut f = setup("retry", 5);
        f.answers.lock().extend([
            Err(AttemptError::Retry("connection refused".into())),
            Err(AttemptError::Retry("answered 503".into())),
        ]);
        assert!(f.hook.enqueue(note(1)));
        let spool = f.hook.spool.clone();
        let mut cur = None;
        assert_eq!(
            f.worker.step(&spool, &mut cur, Duration::ZERO),
            Turn::Retrying(Duration::from_secs(1))
        );
        let r = row(&f.reg);
        assert_eq!((r.waiting, r.running, r.dropped_total), (Some(0), 1, 0));
        assert_eq!(r.conditions, vec![Condition::RetryFailed]);
        assert_eq!(r.status, Status::Warning);
        // Not due yet: no attempt.
        assert_eq!(
            f.worker.step(&spool, &mut cur, Duration::ZERO),
            Turn::Backoff(Duration::from_secs(1))
        );
        f.clock.advance_secs(1);
        assert_eq!(
            f.worker.step(&spool, &mut cur, Duration::ZERO),
            Turn::Retrying(Duration::from_secs(2))
        );
        f.clock.advance_secs(2);
        assert_eq!(
            f.worker.step(&spool, &mut cur, Duration::ZERO),
            Turn::Delivered
        );
        assert_eq!(f.seen.lock().len(), 3);
        assert!(spool.is_empty(), "delivered records leave the spool");
        let r = row(&f.reg);
        assert_eq!((r.running, r.dropped_total), (0, 0));
        assert_eq!(
            r.conditions,
            vec![Condition::RetryFailed],
            "shown for a minute"
        );
        f.clock.advance_secs(60);
        let r = row(&f.reg);
        assert!(r.conditions.is_empty());
        assert_eq!(r.status, Status::Ok);
        assert_eq!(f.worker.step(&spool, &mut cur, Duration::ZERO), Turn::Idle);
        drop(cur);
        f.finish();
    }

    #[test]
    fn exhausted_attempts_are_one_loss_and_delivery_failed_until_a_success() {
        let mut f = setup("lost", 3);
        for _ in 0..3 {
            f.answers
                .lock()
                .push_back(Err(AttemptError::Retry("timeout".into())));
        }
        f.hook.enqueue(note(1));
        f.hook.enqueue(note(2));
        let spool = f.hook.spool.clone();
        let mut cur = None;
        assert!(matches!(
            f.worker.step(&spool, &mut cur, Duration::ZERO),
            Turn::Retrying(_)
        ));
        f.clock.advance_secs(1);
        assert!(matches!(
            f.worker.step(&spool, &mut cur, Duration::ZERO),
            Turn::Retrying(_)
        ));
        f.clock.advance_secs(2);
        assert_eq!(f.worker.step(&spool, &mut cur, Duration::ZERO), Turn::Lost);
        let r = row(&f.reg);
        assert_eq!(r.dropped_total, 1, "one notification, one loss");
        assert!(r.conditions.contains(&Condition::DeliveryFailed));
        assert_eq!(r.waiting, Some(1));
        assert_eq!(spool.len(), 1, "the lost one left the spool");
        // The next notification gets through: delivery_failed clears.
        assert_eq!(
            f.worker.step(&spool, &mut cur, Duration::ZERO),
            Turn::Delivered
        );
        f.clock.advance_secs(61);
        let r = row(&f.reg);
        assert!(r.conditions.is_empty(), "{r:?}");
        assert_eq!(r.dropped_total, 1, "losses survive recovery");
        assert_eq!(f.hook.counters().failed.load(Ordering::Relaxed), 1);
        assert_eq!(f.hook.counters().attempts.load(Ordering::Relaxed), 4);
        drop(cur);
        f.finish();
    }

    #[test]
    fn permanent_refusal_is_not_retried() {
        let mut f = setup("permanent", 5);
        f.answers
            .lock()
            .push_back(Err(AttemptError::Permanent("answered 404".into())));
        f.hook.enqueue(note(1));
        let spool = f.hook.spool.clone();
        let mut cur = None;
        assert_eq!(f.worker.step(&spool, &mut cur, Duration::ZERO), Turn::Lost);
        assert_eq!(f.seen.lock().len(), 1);
        assert_eq!(row(&f.reg).dropped_total, 1);
        drop(cur);
        f.finish();
    }

    #[test]
    fn a_full_spool_drops_the_oldest_with_one_loss_each() {
        let f = setup("full", 5);
        for i in 0..18 {
            assert!(f.hook.enqueue(note(i)));
        }
        let r = row(&f.reg);
        assert_eq!((r.waiting, r.dropped_total), (Some(16), 2));
        assert_eq!(r.depth_unit, "records");
        let head = f.hook.spool.head().unwrap().unwrap();
        assert_eq!(head.describe, "alert 2", "the two oldest went");
        f.finish();
    }

    #[test]
    fn new_settings_apply_from_the_next_attempt_keeping_the_record() {
        let mut f = setup("settings", 5);
        f.answers
            .lock()
            .push_back(Err(AttemptError::Retry("connection refused".into())));
        f.hook.enqueue(note(7));
        let spool = f.hook.spool.clone();
        let mut cur = None;
        assert!(matches!(
            f.worker.step(&spool, &mut cur, Duration::ZERO),
            Turn::Retrying(_)
        ));
        let mut next = cfg(5);
        next.url = "https://other.example.net/hook".into();
        assert!(f.hook.reconfigure(&next));
        assert!(
            !f.hook.reconfigure(&next),
            "unchanged settings are no change"
        );
        assert_eq!(f.hook.destination(), "https://other.example.net");
        f.clock.advance_secs(1);
        assert_eq!(
            f.worker.step(&spool, &mut cur, Duration::ZERO),
            Turn::Delivered
        );
        let seen = f.seen.lock().clone();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].0, "https://hooks.example.com/secret");
        assert_eq!(seen[1].0, "https://other.example.net/hook");
        assert_eq!(seen[1].1, b"{\"n\":7}");
        drop(cur);
        f.finish();
    }

    #[test]
    fn a_record_in_delivery_at_shutdown_stays_spooled_for_the_next_start() {
        let mut f = setup("restart", 5);
        f.answers
            .lock()
            .push_back(Err(AttemptError::Retry("connection refused".into())));
        f.hook.enqueue(note(1));
        let spool = f.hook.spool.clone();
        let mut cur = None;
        assert!(matches!(
            f.worker.step(&spool, &mut cur, Duration::ZERO),
            Turn::Retrying(_)
        ));
        // Shutdown while retrying: cancelled, not a loss, still in the store.
        if let Some(c) = cur.take() {
            spool.set_in_flight(0);
            c.running.cancel();
        }
        assert_eq!(row(&f.reg).dropped_total, 0);
        drop(cur);
        drop(spool);
        drop(f.worker);
        drop(f.hook);
        // The next process replays it with a fresh attempt budget.
        let reg = Registry::new();
        let clock = ManualClock::at_epoch_2026();
        let hook = Webhook::new(&cfg(5), clock.clone(), f.store.clone(), &reg, 16).unwrap();
        let seen: Seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let factory: TransportFactory = Box::new(move |c: &WebhookConfig| {
            Box::new(Scripted {
                url: c.url.clone(),
                answers: Arc::new(Mutex::new(VecDeque::new())),
                seen: s2.clone(),
            }) as Box<dyn Transport>
        });
        let mut w = Worker::new(factory, hook.settings.clone(), clock, hook.counters.clone());
        assert_eq!(row(&reg).waiting, Some(1));
        let spool = hook.spool.clone();
        let mut cur = None;
        assert_eq!(w.step(&spool, &mut cur, Duration::ZERO), Turn::Delivered);
        assert_eq!(seen.lock()[0].1, b"{\"n\":1}");
        assert!(spool.is_empty());
        drop(cur);
        f.store.close();
        let _ = std::fs::remove_dir_all(&f.dir);
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
