//! Alerts: alert-worthy findings become notifications, bounded by an hourly budget.
//!
//! ```text
//! dispatcher --listener--> Alerts::offer --(Selector, Budget)--> [alerts.webhook] --> POST
//! ```
//!
//! Guarantees:
//! - [`Alerts::offer`] runs on the dispatcher thread and never waits for the network: it
//!   decides under a short in-memory lock and hands the notification to the webhook's
//!   bounded queue without blocking.
//! - Which findings alert: see [`budget::Selector`] (at or above `alerts.min_severity`; new
//!   to the active set, or quiet for an hour).
//! - At most `alerts.max_per_hour` alerts are sent per one-hour window ([`budget::Budget`]).
//!   What the budget holds back is never silently dropped: it is counted by check and
//!   severity, visible in status (`alerts`) and metrics, and when the window ends exactly one
//!   summary notification ("N alerts held back ...") is sent.
//! - Windows and quiet periods run on the injected clock's monotonic time.
//! - The subsystem exists only when a notifier is configured (`[alerts.webhook]`); without
//!   one there is nowhere to send, so no budget runs and status has no `alerts` object.

pub mod budget;
pub mod webhook;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use jiff::Timestamp;
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::clock::SharedClock;
use crate::config::alerts::AlertsConfig;
use crate::findings::engine::Listener;
use crate::findings::Finding;
use crate::queue::Registry;
use crate::timefmt::rfc3339;

use budget::{Budget, Decision, Selector, Summary, WINDOW};
use webhook::{HttpTransport, Notification, Transport, Webhook};

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
    /// Notifications the notifier queue refused.
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
    cfg: AlertsConfig,
    host: String,
    state: Mutex<State>,
    webhook: Webhook,
    counters: Counters,
}

impl Alerts {
    /// Builds the subsystem and starts its notifier; `None` when no notifier is configured.
    pub fn start(
        cfg: &AlertsConfig,
        clock: SharedClock,
        registry: &Arc<Registry>,
    ) -> Result<Option<Arc<Alerts>>, String> {
        let Some(wcfg) = &cfg.webhook else {
            return Ok(None);
        };
        let transport = Box::new(HttpTransport::new(wcfg));
        let alerts = Alerts::build(cfg, clock.clone(), registry)?;
        alerts.start_notifier(transport, clock)?;
        log::info!(
            "alerts: webhook to {} (at most {} per hour, {} and above)",
            alerts.webhook.destination(),
            cfg.max_per_hour,
            cfg.min_severity
        );
        Ok(Some(alerts))
    }

    /// Builds the subsystem without starting the notifier thread.
    fn build(
        cfg: &AlertsConfig,
        clock: SharedClock,
        registry: &Arc<Registry>,
    ) -> Result<Arc<Alerts>, String> {
        let wcfg = cfg
            .webhook
            .as_ref()
            .ok_or_else(|| "alerts: no notifier configured".to_string())?;
        let webhook = Webhook::new(wcfg, clock.clone(), registry)?;
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_default();
        Ok(Arc::new(Alerts {
            clock,
            cfg: cfg.clone(),
            host,
            state: Mutex::new(State {
                selector: Selector::new(cfg.min_severity),
                budget: Budget::new(cfg.max_per_hour),
            }),
            webhook,
            counters: Counters::default(),
        }))
    }

    fn start_notifier(
        self: &Arc<Self>,
        transport: Box<dyn Transport>,
        clock: SharedClock,
    ) -> Result<(), String> {
        let me: Weak<Alerts> = Arc::downgrade(self);
        self.webhook.start(
            transport,
            clock,
            Box::new(move || {
                if let Some(a) = me.upgrade() {
                    a.tick();
                }
            }),
        )
    }

    /// The listener to register with [`crate::findings::Engine::subscribe`].
    pub fn listener(self: &Arc<Self>) -> Listener {
        let me = Arc::clone(self);
        Box::new(move |f: &Finding| me.offer(f))
    }

    /// Considers one dispatched finding (active-set entry after the merge).
    pub fn offer(&self, f: &Finding) {
        if f.severity < self.cfg.min_severity {
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

    fn send(&self, n: Notification) {
        if !self.webhook.enqueue(n) {
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

    /// The `alerts` object of the status snapshot (atomics only).
    pub fn status(&self) -> Value {
        let c = &self.counters;
        let hook = self.webhook.counters();
        let mut v = json!({
            "max_per_hour": self.cfg.max_per_hour,
            "min_severity": self.cfg.min_severity,
            "window_seconds": WINDOW.as_secs(),
            "selected_total": c.selected.load(Ordering::Relaxed),
            "sent_total": c.sent.load(Ordering::Relaxed),
            "held_back_total": c.held_back.load(Ordering::Relaxed),
            "summaries_total": c.summaries.load(Ordering::Relaxed),
            "sent_in_window": c.window_sent.load(Ordering::Relaxed),
            "held_back_in_window": c.window_held_back.load(Ordering::Relaxed),
            "notifiers": {
                "webhook": {
                    "destination": self.webhook.destination(),
                    "delivered_total": hook.delivered.load(Ordering::Relaxed),
                    "failed_total": hook.failed.load(Ordering::Relaxed),
                    "retries_total": hook.retries.load(Ordering::Relaxed),
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
        v
    }

    /// Stops the notifier (waits up to `grace` for an attempt in progress).
    pub fn shutdown(&self, grace: Duration) {
        self.webhook.shutdown(grace);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::config::alerts::WebhookConfig;
    use crate::findings::Severity;
    use crate::queue::{PopError, Row};

    fn setup(max: u32) -> (Arc<Alerts>, Arc<Registry>, Arc<ManualClock>) {
        let clock = ManualClock::at_epoch_2026();
        let reg = Registry::new();
        let cfg = AlertsConfig {
            max_per_hour: max,
            min_severity: Severity::High,
            webhook: Some(WebhookConfig {
                url: "https://hooks.example.com/x".into(),
                timeout_seconds: 5,
                max_attempts: 3,
            }),
        };
        // No notifier thread: the test reads the queue itself.
        let a = Alerts::build(&cfg, clock.clone(), &reg).unwrap();
        (a, reg, clock)
    }

    fn shell(i: u32) -> Finding {
        Finding::new(
            "webshell",
            Severity::Critical,
            format!("webshell in /var/www/{i}.php"),
            Timestamp::from_second(1_767_225_600).unwrap(),
        )
    }

    fn queued(a: &Alerts) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            match a.webhook.queue_for_tests().pop_timeout(Duration::ZERO) {
                Ok(g) => out.push(serde_json::from_slice(&g.finish().body).unwrap()),
                Err(PopError::Timeout) | Err(PopError::Closed) => return out,
            }
        }
    }

    fn row(reg: &Registry) -> Row {
        reg.snapshot()[webhook::ROW].clone()
    }

    #[test]
    fn budget_of_two_sends_two_holds_three_and_summarises_at_window_end() {
        let (a, reg, clock) = setup(2);
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
        assert_eq!(sent[0]["finding"]["severity"], "CRITICAL");
        assert_eq!(sent[0]["finding"]["check"], "webshell");
        assert!(sent[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("CRITICAL webshell: "));
        let s = a.status();
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
        let s = a.status();
        assert_eq!(
            (
                s["held_back_in_window"].as_u64(),
                s["summaries_total"].as_u64()
            ),
            (Some(0), Some(1))
        );
        assert!(s.get("window_started_at").is_none());
        assert_eq!(row(&reg).dropped_total, 0);
    }

    #[test]
    fn the_next_window_summarises_the_previous_one_first() {
        let (a, _reg, clock) = setup(1);
        a.offer(&shell(1));
        a.offer(&shell(2));
        clock.advance_secs(4000);
        a.offer(&shell(3));
        let out = queued(&a);
        let types: Vec<&str> = out.iter().map(|v| v["type"].as_str().unwrap()).collect();
        assert_eq!(types, vec!["finding", "held_back_summary", "finding"]);
        assert_eq!(out[1]["held_back"], 1);
    }

    #[test]
    fn a_full_notifier_queue_is_counted_not_hidden() {
        let (a, reg, _clock) = setup(100_000);
        for i in 0..(webhook::CAPACITY as u32 + 5) {
            a.offer(&shell(i));
        }
        assert_eq!(row(&reg).dropped_total, 5);
        assert_eq!(a.status()["notifiers"]["webhook"]["refused_total"], 5);
    }
}
