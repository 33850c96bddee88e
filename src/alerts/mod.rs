//! Alerts: alert-worthy findings become notifications, bounded by an hourly budget.
//!
//! ```text
//! dispatcher --listener--> Alerts::offer --(Selector, Budget)--> [panel.spool] --> POST
//! ```
//!
//! Guarantees:
//! - [`Alerts::offer`] runs on the dispatcher thread and never waits for the network: it
//!   decides under a short in-memory lock and spools the notification (a store commit, the
//!   same kind of wait the dispatcher's own commits have). Only what the budget lets
//!   through is spooled.
//! - Which findings alert: see [`budget::Selector`] (at or above `alerts.min_severity`; new
//!   to the active set, or quiet for an hour).
//! - At most `alerts.max_per_hour` alerts are sent per one-hour window ([`budget::Budget`]).
//!   What the budget holds back is never silently dropped: it is counted by check and
//!   severity, visible in status (`alerts`) and metrics, and when the window ends exactly one
//!   summary notification ("N alerts held back ...") is sent.
//! - Windows and quiet periods run on the injected clock's monotonic time.
//! - The subsystem is active only while a notifier is configured (`[alerts.webhook]`);
//!   without one there is nowhere to send, so no budget runs, status has no `alerts` object
//!   and there is no `panel.spool` row (spooled records stay in the store for a later
//!   notifier).
//! - [`Alerts::reconfigure`] applies a new `[alerts]` section live: minimum severity and
//!   hourly budget at once (the open window keeps its count), webhook settings from the next
//!   attempt, and a notifier added or removed starts or stops the worker.

pub mod budget;
pub mod spool;
pub mod webhook;

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use jiff::Timestamp;
use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};

use crate::clock::SharedClock;
use crate::config::alerts::AlertsConfig;
use crate::findings::engine::Listener;
use crate::findings::{Finding, Severity};
use crate::queue::Registry;
use crate::store::Store;
use crate::timefmt::rfc3339;

use budget::{Budget, Decision, Selector, Summary, WINDOW};
use webhook::{Notification, TransportFactory, Webhook};

/// Why the alert notifier could not be set up.
#[derive(Debug)]
pub enum AlertsError {
    /// The spool's queue row could not be registered.
    Queue(crate::queue::RowError),
    /// The spooled records could not be read.
    Spool(crate::store::StoreError),
    /// The webhook worker thread could not be started.
    Spawn(std::io::Error),
}

impl std::fmt::Display for AlertsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AlertsError::Queue(e) => write!(f, "{e}"),
            AlertsError::Spool(e) => write!(f, "{}: {e}", spool::ROW),
            AlertsError::Spawn(e) => write!(f, "cannot start the webhook thread: {e}"),
        }
    }
}

impl std::error::Error for AlertsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AlertsError::Queue(e) => Some(e),
            AlertsError::Spool(e) => Some(e),
            AlertsError::Spawn(e) => Some(e),
        }
    }
}

const NO_WINDOW: i64 = i64::MIN;

struct State {
    selector: Selector,
    budget: Budget,
}

/// Mirrors of the budget for status and metrics (atomics only; no lock on reads).
#[derive(Debug)]
pub struct Counters {
    /// Alert-worthy findings seen (before the budget).
    pub selected: AtomicU64,
    /// Alerts the budget passed to the notifier.
    pub sent: AtomicU64,
    /// Alerts held back since start.
    pub held_back: AtomicU64,
    /// Summaries produced.
    pub summaries: AtomicU64,
    /// Notifications the spool could not store.
    pub refused: AtomicU64,
    window_start_micros: AtomicI64,
    window_sent: AtomicU64,
    window_held_back: AtomicU64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            selected: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            held_back: AtomicU64::new(0),
            summaries: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            window_start_micros: AtomicI64::new(NO_WINDOW),
            window_sent: AtomicU64::new(0),
            window_held_back: AtomicU64::new(0),
        }
    }
}

/// The alerts subsystem.
pub struct Alerts {
    clock: SharedClock,
    store: Store,
    registry: Arc<Registry>,
    host: String,
    min_severity: AtomicU8,
    max_per_hour: AtomicU64,
    state: Mutex<State>,
    /// The notifier while `[alerts.webhook]` is configured.
    notifier: RwLock<Option<Arc<Webhook>>>,
    factory: Arc<dyn Fn() -> TransportFactory + Send + Sync>,
    spool_capacity: usize,
    /// Serializes reconfigurations.
    reconfiguring: Mutex<()>,
    counters: Counters,
}

impl Alerts {
    /// Builds the subsystem and, when `[alerts.webhook]` is configured, starts its notifier.
    pub fn start(
        cfg: &AlertsConfig,
        clock: SharedClock,
        store: Store,
        registry: &Arc<Registry>,
    ) -> Result<Arc<Alerts>, AlertsError> {
        let a = Alerts::build(
            cfg,
            clock,
            store,
            registry,
            Arc::new(webhook::http_factory),
            spool::CAPACITY,
        );
        a.reconfigure(cfg)?;
        Ok(a)
    }

    /// Builds the subsystem without a notifier (see [`Alerts::reconfigure`]).
    fn build(
        cfg: &AlertsConfig,
        clock: SharedClock,
        store: Store,
        registry: &Arc<Registry>,
        factory: Arc<dyn Fn() -> TransportFactory + Send + Sync>,
        spool_capacity: usize,
    ) -> Arc<Alerts> {
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_default();
        Arc::new(Alerts {
            clock,
            store,
            registry: registry.clone(),
            host,
            min_severity: AtomicU8::new(cfg.min_severity.level()),
            max_per_hour: AtomicU64::new(u64::from(cfg.max_per_hour)),
            state: Mutex::new(State {
                selector: Selector::new(cfg.min_severity),
                budget: Budget::new(cfg.max_per_hour),
            }),
            notifier: RwLock::new(None),
            factory,
            spool_capacity,
            reconfiguring: Mutex::new(()),
            counters: Counters::default(),
        })
    }

    /// Applies an `[alerts]` section: minimum severity and budget at once; webhook settings
    /// from the next attempt; a notifier added starts (and delivers what is spooled), one
    /// removed stops (its spooled records stay in the store).
    pub fn reconfigure(self: &Arc<Self>, cfg: &AlertsConfig) -> Result<(), AlertsError> {
        let _one = self.reconfiguring.lock();
        {
            let mut st = self.state.lock();
            st.selector.set_min_severity(cfg.min_severity);
            st.budget.set_max_per_hour(cfg.max_per_hour);
        }
        self.min_severity
            .store(cfg.min_severity.level(), Ordering::Relaxed);
        self.max_per_hour
            .store(u64::from(cfg.max_per_hour), Ordering::Relaxed);
        let current = self.notifier.read().clone();
        match (current, &cfg.webhook) {
            (None, None) => {}
            (Some(n), Some(w)) => {
                if n.reconfigure(w) {
                    log::info!("alerts: webhook now {}", n.destination());
                }
            }
            (Some(n), None) => {
                *self.notifier.write() = None;
                // Wait for an attempt in progress so the row can be registered again later.
                n.shutdown(n.timeout() + Duration::from_secs(2));
                log::info!("alerts: webhook removed; alerts are off");
            }
            (None, Some(w)) => {
                let n = Arc::new(Webhook::new(
                    w,
                    self.clock.clone(),
                    self.store.clone(),
                    &self.registry,
                    self.spool_capacity,
                )?);
                self.start_notifier(&n)?;
                *self.notifier.write() = Some(n.clone());
                log::info!(
                    "alerts: webhook to {} (at most {} per hour, {} and above)",
                    n.destination(),
                    cfg.max_per_hour,
                    cfg.min_severity
                );
            }
        }
        Ok(())
    }

    fn start_notifier(self: &Arc<Self>, n: &Webhook) -> Result<(), AlertsError> {
        let me: Weak<Alerts> = Arc::downgrade(self);
        n.start(
            (self.factory)(),
            self.clock.clone(),
            Box::new(move || {
                if let Some(a) = me.upgrade() {
                    a.tick();
                }
            }),
        )
    }

    /// Whether a notifier is configured.
    pub fn enabled(&self) -> bool {
        self.notifier.read().is_some()
    }

    /// The listener to register with [`crate::findings::Engine::subscribe`].
    pub fn listener(self: &Arc<Self>) -> Listener {
        let me = Arc::clone(self);
        Box::new(move |f: &Finding| me.offer(f))
    }

    /// Considers one dispatched finding (active-set entry after the merge).
    pub fn offer(&self, f: &Finding) {
        if f.severity.level() < self.min_severity.load(Ordering::Relaxed) || !self.enabled() {
            return;
        }
        let now = self.clock.monotonic_nanos();
        let wall = self.clock.now();
        let mut out: Vec<Notification> = Vec::new();
        {
            let mut st = self.state.lock();
            if let Some(s) = st.budget.roll(now) {
                out.push(self.summary_notification(&s));
            }
            if st.selector.offer(f, now) {
                self.counters.selected.fetch_add(1, Ordering::Relaxed);
                if st.budget.admit(now, wall, &f.check, f.severity) == Decision::Send {
                    out.push(self.alert_notification(f, wall));
                }
            }
            self.mirror(&st.budget);
        }
        for n in out {
            self.send(n);
        }
    }

    /// Closes an ended window and sends its summary (called by the notifier thread).
    pub fn tick(&self) {
        let now = self.clock.monotonic_nanos();
        let summary = {
            let mut st = self.state.lock();
            let s = st.budget.roll(now);
            self.mirror(&st.budget);
            s
        };
        if let Some(s) = summary {
            self.send(self.summary_notification(&s));
        }
    }

    /// Spools a notification another subsystem built (the threat block digest), outside
    /// the alert budget (the caller bounds its own rate). False when no notifier is
    /// configured or the spool refused it.
    pub fn notify(&self, body: Vec<u8>, describe: String) -> bool {
        let notifier = self.notifier.read().clone();
        match notifier {
            Some(hook) => hook.enqueue(Notification { body, describe }),
            None => false,
        }
    }

    fn send(&self, n: Notification) {
        let notifier = self.notifier.read().clone();
        let Some(hook) = notifier else { return };
        if !hook.enqueue(n) {
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn mirror(&self, b: &Budget) {
        let c = &self.counters;
        c.sent.store(b.sent_total, Ordering::Relaxed);
        c.held_back.store(b.held_back_total, Ordering::Relaxed);
        c.summaries.store(b.summaries_total, Ordering::Relaxed);
        match b.window() {
            Some(w) => {
                c.window_start_micros
                    .store(w.start.as_microsecond(), Ordering::Relaxed);
                c.window_sent.store(u64::from(w.sent), Ordering::Relaxed);
                c.window_held_back.store(w.held_back, Ordering::Relaxed);
            }
            None => {
                c.window_start_micros.store(NO_WINDOW, Ordering::Relaxed);
                c.window_sent.store(0, Ordering::Relaxed);
                c.window_held_back.store(0, Ordering::Relaxed);
            }
        }
    }

    fn alert_notification(&self, f: &Finding, wall: Timestamp) -> Notification {
        let text = format!("{} {}: {}", f.severity, f.check, f.message);
        let body = json!({
            "id": crate::ids::random_hex(16),
            "type": "finding",
            "text": text,
            "host": self.host,
            "created_at": rfc3339(wall),
            "finding": f,
        });
        Notification {
            body: serde_json::to_vec(&body).unwrap_or_default(),
            describe: format!("alert {} {}", f.severity, f.check),
        }
    }

    fn summary_notification(&self, s: &Summary) -> Notification {
        let by: Vec<Value> = s
            .by_check
            .iter()
            .map(|(c, sev, n)| json!({ "check": c, "severity": sev, "count": n }))
            .collect();
        let body = json!({
            "id": crate::ids::random_hex(16),
            "type": "held_back_summary",
            "text": s.text(),
            "host": self.host,
            "created_at": rfc3339(self.clock.now()),
            "held_back": s.held_back,
            "max_per_hour": s.max_per_hour,
            "window_start": rfc3339(s.window_start),
            "window_end": rfc3339(s.window_end),
            "by_check": by,
        });
        Notification {
            body: serde_json::to_vec(&body).unwrap_or_default(),
            describe: format!("summary of {} held-back alerts", s.held_back),
        }
    }

    /// Counters (atomics).
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Alerts held back in the open window.
    pub fn held_back_in_window(&self) -> u64 {
        self.counters.window_held_back.load(Ordering::Relaxed)
    }

    /// The `alerts` object of the status snapshot (atomics and a short read lock); `None`
    /// while no notifier is configured.
    pub fn status(&self) -> Option<Value> {
        let hook = self.notifier.read().clone()?;
        let c = &self.counters;
        let hc = hook.counters();
        let min = Severity::from_level(self.min_severity.load(Ordering::Relaxed))
            .unwrap_or(Severity::High);
        let mut v = json!({
            "max_per_hour": self.max_per_hour.load(Ordering::Relaxed),
            "min_severity": min,
            "window_seconds": WINDOW.as_secs(),
            "selected_total": c.selected.load(Ordering::Relaxed),
            "sent_total": c.sent.load(Ordering::Relaxed),
            "held_back_total": c.held_back.load(Ordering::Relaxed),
            "summaries_total": c.summaries.load(Ordering::Relaxed),
            "sent_in_window": c.window_sent.load(Ordering::Relaxed),
            "held_back_in_window": c.window_held_back.load(Ordering::Relaxed),
            "notifiers": {
                "webhook": {
                    "destination": hook.destination(),
                    "delivered_total": hc.delivered.load(Ordering::Relaxed),
                    "failed_total": hc.failed.load(Ordering::Relaxed),
                    "retries_total": hc.retries.load(Ordering::Relaxed),
                    "refused_total": c.refused.load(Ordering::Relaxed),
                }
            },
        });
        let start = c.window_start_micros.load(Ordering::Relaxed);
        if start != NO_WINDOW {
            if let Ok(t) = Timestamp::from_microsecond(start) {
                v["window_started_at"] = json!(rfc3339(t));
                v["window_ends_at"] = json!(rfc3339(crate::clock::add(t, WINDOW)));
            }
        }
        Some(v)
    }

    /// Stops the notifier (waits up to `grace` for an attempt in progress). Spooled
    /// notifications stay for the next start.
    pub fn shutdown(&self, grace: Duration) {
        let n = self.notifier.write().take();
        if let Some(n) = n {
            n.shutdown(grace);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::config::alerts::WebhookConfig;
    use crate::findings::Severity;
    use crate::queue::Row;

    struct Fixture {
        a: Arc<Alerts>,
        reg: Arc<Registry>,
        clock: Arc<ManualClock>,
        store: Store,
        dir: std::path::PathBuf,
    }

    fn config(max: u32) -> AlertsConfig {
        AlertsConfig {
            max_per_hour: max,
            min_severity: Severity::High,
            webhook: Some(WebhookConfig {
                url: "https://hooks.example.com/x".into(),
                timeout_seconds: 5,
                max_attempts: 3,
            }),
        }
    }

    fn setup(tag: &str, max: u32) -> Fixture {
        let dir = std::env::temp_dir().join(format!("svc-alerts-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let clock = ManualClock::at_epoch_2026();
        let reg = Registry::new();
        let cfg = config(max);
        let a = Alerts::build(
            &cfg,
            clock.clone(),
            store.clone(),
            &reg,
            Arc::new(webhook::http_factory),
            16,
        );
        // A notifier without its thread: the test reads the spool itself.
        let hook = Webhook::new(
            cfg.webhook.as_ref().unwrap(),
            clock.clone(),
            store.clone(),
            &reg,
            16,
        )
        .unwrap();
        *a.notifier.write() = Some(Arc::new(hook));
        Fixture {
            a,
            reg,
            clock,
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

    fn shell(i: u32) -> Finding {
        Finding::new(
            "webshell",
            Severity::Critical,
            format!("webshell in /var/www/{i}.php"),
            Timestamp::from_second(1_767_225_600).unwrap(),
        )
    }

    /// Takes every spooled notification, oldest first.
    fn queued(a: &Alerts) -> Vec<Value> {
        let hook = a.notifier.read().clone().unwrap();
        let mut out = Vec::new();
        while let Some(r) = hook.spool().head().unwrap() {
            out.push(serde_json::from_slice(&r.body).unwrap());
            hook.spool().remove(r.id).unwrap();
        }
        out
    }

    fn row(reg: &Registry) -> Row {
        reg.snapshot()[spool::ROW].clone()
    }

    #[test]
    fn budget_of_two_sends_two_holds_three_and_summarises_at_window_end() {
        let Fixture {
            a,
            reg,
            clock,
            store,
            dir,
        } = setup("budget", 2);
        for i in 0..5 {
            a.offer(&shell(i));
            clock.advance_secs(10);
        }
        // Below the minimum severity and repeats never count.
        a.offer(&Finding::new("x", Severity::Warning, "w", clock.now()));
        let mut repeat = shell(0);
        repeat.count = 2;
        a.offer(&repeat);
        let sent = queued(&a);
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[0]["type"], "finding");
        assert_eq!(sent[0]["id"].as_str().unwrap().len(), 32);
        assert_ne!(sent[0]["id"], sent[1]["id"]);
        assert_eq!(sent[0]["finding"]["severity"], "CRITICAL");
        assert_eq!(sent[0]["finding"]["check"], "webshell");
        assert!(sent[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("CRITICAL webshell: "));
        let s = a.status().unwrap();
        assert_eq!(s["held_back_in_window"], 3);
        assert_eq!(s["held_back_total"], 3);
        assert_eq!(s["sent_in_window"], 2);
        assert_eq!(s["window_started_at"], "2026-01-01T00:00:00.000000Z");
        assert_eq!(s["window_ends_at"], "2026-01-01T01:00:00.000000Z");
        assert_eq!(a.held_back_in_window(), 3);
        // The hour ends: exactly one summary, sent although the budget is used up.
        clock.advance_secs(3600 - 50 - 1);
        a.tick();
        assert!(queued(&a).is_empty());
        clock.advance_secs(1);
        a.tick();
        a.tick();
        let summary = queued(&a);
        assert_eq!(summary.len(), 1);
        let s0 = &summary[0];
        assert_eq!(s0["type"], "held_back_summary");
        assert_eq!(s0["held_back"], 3);
        assert_eq!(s0["max_per_hour"], 2);
        assert_eq!(
            s0["by_check"],
            json!([{ "check": "webshell", "severity": "CRITICAL", "count": 3 }])
        );
        assert!(s0["text"]
            .as_str()
            .unwrap()
            .starts_with("3 alerts held back between 2026-01-01T00:00:00.000000Z and 2026-01-01T01:00:00.000000Z"));
        let s = a.status().unwrap();
        assert_eq!(
            (
                s["held_back_in_window"].as_u64(),
                s["summaries_total"].as_u64()
            ),
            (Some(0), Some(1))
        );
        assert!(s.get("window_started_at").is_none());
        assert_eq!(row(&reg).dropped_total, 0);
        Fixture {
            a,
            reg,
            clock,
            store,
            dir,
        }
        .finish();
    }

    #[test]
    fn the_next_window_summarises_the_previous_one_first() {
        let f = setup("next", 1);
        f.a.offer(&shell(1));
        f.a.offer(&shell(2));
        f.clock.advance_secs(4000);
        f.a.offer(&shell(3));
        let out = queued(&f.a);
        let types: Vec<&str> = out.iter().map(|v| v["type"].as_str().unwrap()).collect();
        assert_eq!(types, vec!["finding", "held_back_summary", "finding"]);
        assert_eq!(out[1]["held_back"], 1);
        f.finish();
    }

    #[test]
    fn a_full_spool_is_counted_not_hidden() {
        let f = setup("full", 100_000);
        for i in 0..(16 + 5) {
            f.a.offer(&shell(i));
        }
        assert_eq!(row(&f.reg).dropped_total, 5, "the oldest five gave way");
        assert_eq!(queued(&f.a).len(), 16);
        f.finish();
    }

    #[test]
    fn reconfigure_changes_severity_and_budget_live_and_removes_the_notifier() {
        let f = setup("reconf", 1);
        f.a.offer(&shell(1));
        f.a.offer(&shell(2));
        assert_eq!(f.a.status().unwrap()["held_back_in_window"], 1);
        let mut next = config(3);
        next.min_severity = Severity::Critical;
        // Keep the test's thread-less notifier: same webhook settings.
        f.a.reconfigure(&next).unwrap();
        let s = f.a.status().unwrap();
        assert_eq!(
            (s["max_per_hour"].as_u64(), s["min_severity"].as_str()),
            (Some(3), Some("CRITICAL"))
        );
        f.a.offer(&shell(3));
        assert_eq!(
            f.a.status().unwrap()["sent_in_window"],
            2,
            "the open window got room"
        );
        let mut high = shell(4);
        high.severity = Severity::High;
        f.a.offer(&high);
        assert_eq!(
            f.a.status().unwrap()["selected_total"],
            3,
            "HIGH is below the new minimum"
        );
        next.webhook = None;
        f.a.reconfigure(&next).unwrap();
        assert!(f.a.status().is_none());
        assert!(!f.a.enabled());
        assert!(
            !f.reg.snapshot().contains_key(spool::ROW),
            "the row went with the notifier"
        );
        f.a.offer(&shell(5));
        assert_eq!(f.a.counters().selected.load(Ordering::Relaxed), 3);
        f.finish();
    }
}
