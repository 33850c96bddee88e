//! Which findings alert ([`Selector`]) and the hourly budget ([`Budget`]). Pure state
//! machines over monotonic instants from the injected clock; no threads, no I/O.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use jiff::Timestamp;

use crate::clock::add;
use crate::findings::{Finding, Severity};

/// Length of one budget window.
pub const WINDOW: Duration = Duration::from_secs(3600);
/// A (check, message) quiet for this long alerts again when it reappears.
pub const QUIET: Duration = Duration::from_secs(3600);
/// Keys the selector remembers at most.
pub const MAX_KEYS: usize = 10_000;
/// Distinct (check, severity) buckets a summary lists at most; the rest go to `other`.
pub const MAX_BUCKETS: usize = 100;

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Decides which dispatched findings are alert-worthy: a finding at or above the minimum
/// severity whose (check, message) is new to the active set (`count == 1` after the merge),
/// or that was not dispatched for [`QUIET`] before this dispatch.
///
/// A (check, message) the selector has never seen but which arrives with `count > 1` was
/// already active before this daemon started (loaded from the store) and does not alert.
/// At most [`MAX_KEYS`] keys are remembered; beyond that, keys quiet for [`QUIET`] are
/// forgotten first, then the oldest half.
pub struct Selector {
    min_severity: Severity,
    last_seen: HashMap<(String, String), i64>,
}

impl Selector {
    pub fn new(min_severity: Severity) -> Selector {
        Selector {
            min_severity,
            last_seen: HashMap::new(),
        }
    }

    /// Changes the minimum severity (configuration reload); remembered keys stay.
    pub fn set_min_severity(&mut self, min: Severity) {
        self.min_severity = min;
    }

    /// Records the dispatch of `f` at monotonic instant `now`; true when it should alert.
    pub fn offer(&mut self, f: &Finding, now: i64) -> bool {
        if f.severity < self.min_severity {
            return false;
        }
        let prev = self
            .last_seen
            .insert((f.check.clone(), f.message.clone()), now);
        let fresh = f.count <= 1;
        let alert = match prev {
            None => fresh,
            Some(t) => fresh || now.saturating_sub(t) >= nanos(QUIET),
        };
        if self.last_seen.len() > MAX_KEYS {
            self.forget(now);
        }
        alert
    }

    fn forget(&mut self, now: i64) {
        let quiet = nanos(QUIET);
        self.last_seen.retain(|_, t| now.saturating_sub(*t) < quiet);
        if self.last_seen.len() > MAX_KEYS / 2 {
            let mut times: Vec<i64> = self.last_seen.values().copied().collect();
            times.sort_unstable();
            let cut = times[times.len() / 2];
            self.last_seen.retain(|_, t| *t > cut);
        }
    }

    /// Keys remembered now.
    pub fn len(&self) -> usize {
        self.last_seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.last_seen.is_empty()
    }
}

/// What the budget decided for one alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Send,
    HoldBack,
}

/// Alerts held back in one closed window.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub window_start: Timestamp,
    pub window_end: Timestamp,
    pub max_per_hour: u32,
    pub held_back: u64,
    /// (check, severity, count), by check then severity; at most [`MAX_BUCKETS`] entries plus
    /// one `other` entry per severity.
    pub by_check: Vec<(String, Severity, u64)>,
}

impl Summary {
    /// One line such as `3 alerts held back ... : webshell CRITICAL 3`.
    pub fn text(&self) -> String {
        let parts: Vec<String> = self
            .by_check
            .iter()
            .map(|(c, s, n)| format!("{c} {s} {n}"))
            .collect();
        format!(
            "{} alert{} held back between {} and {} (alerts.max_per_hour = {}): {}",
            self.held_back,
            if self.held_back == 1 { "" } else { "s" },
            crate::timefmt::rfc3339(self.window_start),
            crate::timefmt::rfc3339(self.window_end),
            self.max_per_hour,
            parts.join(", ")
        )
    }
}

struct Window {
    start_mono: i64,
    start_wall: Timestamp,
    sent: u32,
    held_total: u64,
    held: BTreeMap<(String, Severity), u64>,
}

/// The open window, as reported in status.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowState {
    pub start: Timestamp,
    pub end: Timestamp,
    pub sent: u32,
    pub held_back: u64,
}

/// The hourly budget: fixed one-hour windows, each opened by the first alert after the
/// previous one closed. In a window the first `max_per_hour` alerts are sent; later ones are
/// held back and counted by (check, severity). When the window closes, a window that held
/// anything back yields exactly one [`Summary`], which is sent regardless of the budget (so at
/// most `max_per_hour + 1` notifications per hour).
pub struct Budget {
    max_per_hour: u32,
    window: Option<Window>,
    /// Alerts passed by the budget since start.
    pub sent_total: u64,
    /// Alerts held back since start.
    pub held_back_total: u64,
    /// Summaries produced since start.
    pub summaries_total: u64,
}

impl Budget {
    pub fn new(max_per_hour: u32) -> Budget {
        Budget {
            max_per_hour,
            window: None,
            sent_total: 0,
            held_back_total: 0,
            summaries_total: 0,
        }
    }

    /// Closes the open window if its hour is over at `now`; returns its summary when it held
    /// anything back.
    pub fn roll(&mut self, now: i64) -> Option<Summary> {
        let w = self.window.as_ref()?;
        if now.saturating_sub(w.start_mono) < nanos(WINDOW) {
            return None;
        }
        let w = self.window.take()?;
        if w.held_total == 0 {
            return None;
        }
        self.summaries_total += 1;
        Some(Summary {
            window_start: w.start_wall,
            window_end: add(w.start_wall, WINDOW),
            max_per_hour: self.max_per_hour,
            held_back: w.held_total,
            by_check: w.held.into_iter().map(|((c, s), n)| (c, s, n)).collect(),
        })
    }

    /// Decides one alert at `now` (monotonic) / `wall`. Call [`roll`](Self::roll) first so an
    /// expired window is summarised before a new one opens.
    pub fn admit(
        &mut self,
        now: i64,
        wall: Timestamp,
        check: &str,
        severity: Severity,
    ) -> Decision {
        let max = self.max_per_hour;
        let w = self.window.get_or_insert_with(|| Window {
            start_mono: now,
            start_wall: wall,
            sent: 0,
            held_total: 0,
            held: BTreeMap::new(),
        });
        if w.sent < max {
            w.sent += 1;
            self.sent_total += 1;
            return Decision::Send;
        }
        w.held_total += 1;
        self.held_back_total += 1;
        let key = (check.to_string(), severity);
        if w.held.len() < MAX_BUCKETS || w.held.contains_key(&key) {
            *w.held.entry(key).or_insert(0) += 1;
        } else {
            *w.held.entry(("other".to_string(), severity)).or_insert(0) += 1;
        }
        Decision::HoldBack
    }

    /// The open window, if any.
    pub fn window(&self) -> Option<WindowState> {
        self.window.as_ref().map(|w| WindowState {
            start: w.start_wall,
            end: add(w.start_wall, WINDOW),
            sent: w.sent,
            held_back: w.held_total,
        })
    }

    pub fn max_per_hour(&self) -> u32 {
        self.max_per_hour
    }

    /// Changes the budget (configuration reload). The open window keeps what it sent and
    /// held back; the new limit decides its next alerts.
    pub fn set_max_per_hour(&mut self, max: u32) {
        self.max_per_hour = max;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    fn f(check: &str, msg: &str, sev: Severity, count: u64) -> Finding {
        let mut f = Finding::new(check, sev, msg, Timestamp::from_second(1).unwrap());
        f.count = count;
        f
    }

    #[test]
    fn selector_alerts_new_and_quiet_findings_at_or_above_the_minimum() {
        let c = ManualClock::at_epoch_2026();
        let mut s = Selector::new(Severity::High);
        let now = || c.monotonic_nanos();
        assert!(!s.offer(&f("a", "m", Severity::Warning, 1), now()));
        assert!(s.offer(&f("a", "m", Severity::High, 1), now()));
        c.advance_secs(600);
        assert!(!s.offer(&f("a", "m", Severity::High, 2), now()), "repeat");
        c.advance_secs(3599);
        assert!(
            !s.offer(&f("a", "m", Severity::High, 3), now()),
            "quiet < 1 h"
        );
        c.advance_secs(3600);
        assert!(
            s.offer(&f("a", "m", Severity::Critical, 4), now()),
            "quiet 1 h"
        );
        // Resolved and back: new to the active set again.
        c.advance_secs(10);
        assert!(s.offer(&f("a", "m", Severity::High, 1), now()));
        // Active before this daemon started: no alert until it goes quiet.
        assert!(!s.offer(&f("b", "old", Severity::Critical, 7), now()));
        c.advance_secs(3600);
        assert!(s.offer(&f("b", "old", Severity::Critical, 8), now()));
        assert!(s.offer(&f("b", "other", Severity::Critical, 1), now()));
    }

    #[test]
    fn selector_memory_is_bounded() {
        let c = ManualClock::at_epoch_2026();
        let mut s = Selector::new(Severity::Warning);
        for i in 0..(MAX_KEYS * 3) {
            c.advance(Duration::from_millis(1));
            assert!(s.offer(
                &f("x", &i.to_string(), Severity::High, 1),
                c.monotonic_nanos()
            ));
            assert!(s.len() <= MAX_KEYS);
        }
        assert!(!s.is_empty());
    }

    #[test]
    fn budget_sends_then_holds_back_and_summarises_once_per_window() {
        let c = ManualClock::at_epoch_2026();
        let mut b = Budget::new(2);
        let t0 = c.now();
        let mut decide = |check: &str, sev| {
            assert!(b.roll(c.monotonic_nanos()).is_none());
            b.admit(c.monotonic_nanos(), c.now(), check, sev)
        };
        assert_eq!(decide("webshell", Severity::Critical), Decision::Send);
        c.advance_secs(60);
        assert_eq!(decide("webshell", Severity::Critical), Decision::Send);
        assert_eq!(decide("webshell", Severity::Critical), Decision::HoldBack);
        assert_eq!(decide("webshell", Severity::High), Decision::HoldBack);
        assert_eq!(decide("ssh_bruteforce", Severity::High), Decision::HoldBack);
        let w = b.window().unwrap();
        assert_eq!((w.start, w.sent, w.held_back), (t0, 2, 3));
        assert_eq!(w.end, add(t0, WINDOW));
        // Not yet over (the window started at t0, 60 s ago).
        c.advance_secs(3539);
        assert!(b.roll(c.monotonic_nanos()).is_none());
        c.advance_secs(1);
        let s = b.roll(c.monotonic_nanos()).expect("one summary");
        assert_eq!(s.held_back, 3);
        assert_eq!((s.window_start, s.window_end), (t0, add(t0, WINDOW)));
        assert_eq!(
            s.by_check,
            vec![
                ("ssh_bruteforce".to_string(), Severity::High, 1),
                ("webshell".to_string(), Severity::High, 1),
                ("webshell".to_string(), Severity::Critical, 1),
            ]
        );
        assert!(s
            .text()
            .starts_with("3 alerts held back between 2026-01-01T00:00:00.000000Z"));
        assert!(s.text().ends_with("webshell CRITICAL 1"), "{}", s.text());
        assert!(b.roll(c.monotonic_nanos()).is_none(), "only once");
        assert!(b.window().is_none());
        assert_eq!(
            (b.sent_total, b.held_back_total, b.summaries_total),
            (2, 3, 1)
        );
        // A new window opens with the next alert and has its full budget.
        c.advance_secs(7200);
        assert_eq!(
            b.admit(c.monotonic_nanos(), c.now(), "x", Severity::High),
            Decision::Send
        );
        assert_eq!(b.window().unwrap().start, c.now());
    }

    #[test]
    fn a_window_without_held_back_alerts_ends_silently() {
        let c = ManualClock::at_epoch_2026();
        let mut b = Budget::new(5);
        b.admit(c.monotonic_nanos(), c.now(), "x", Severity::High);
        c.advance_secs(3600);
        assert!(b.roll(c.monotonic_nanos()).is_none());
        assert!(b.window().is_none());
        assert_eq!(b.summaries_total, 0);
    }

    #[test]
    fn summary_buckets_are_bounded() {
        let c = ManualClock::at_epoch_2026();
        let mut b = Budget::new(1);
        for i in 0..(MAX_BUCKETS + 50) {
            b.admit(
                c.monotonic_nanos(),
                c.now(),
                &format!("c{i:03}"),
                Severity::High,
            );
        }
        c.advance_secs(3600);
        let s = b.roll(c.monotonic_nanos()).unwrap();
        assert_eq!(s.held_back, (MAX_BUCKETS + 49) as u64);
        assert_eq!(s.by_check.len(), MAX_BUCKETS + 1);
        let other = s.by_check.iter().find(|(c, _, _)| c == "other").unwrap();
        assert_eq!(other.2, 50 - 1);
        assert_eq!(s.by_check.iter().map(|e| e.2).sum::<u64>(), s.held_back);
    }
}
