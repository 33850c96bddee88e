//! Live deny escalation: repeated WAF denies from one address within a window raise the
//! HIGH finding `modsec_block_escalation` carrying the address (the attacker evidence
//! automatic blocking and `block_ip` act on).
//!
//! Guarantees:
//! - An address escalates when `denies` deny events fall within `window` of each other
//!   (a sliding window of event times, as the logs give them), unless escalation is off for
//!   every rule involved: one deny of a rule with escalation on (or of no rule id) among
//!   them is enough. Pass events never count.
//! - After escalating, the address starts a new window (one finding per `denies` denies,
//!   the findings engine merges repeats into one active finding with a count).
//! - Memory is bounded: at most `max_addresses` addresses are tracked (the one seen least
//!   recently is dropped, counted in [`Escalator::evicted`]) and each keeps at most
//!   `denies` times and [`MAX_RULES`] rule ids.
//! - Correlation: the finding names the rules and URIs involved (first [`MAX_RULES`]
//!   each), so one finding shows what the address tried.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use parking_lot::RwLock;

use super::event::{Action, WafEvent};
use crate::findings::{Finding, Severity};

/// Name of the finding.
pub const CHECK: &str = "modsec_block_escalation";
/// Rule ids and URIs remembered per address.
pub const MAX_RULES: usize = 8;

/// Thresholds, changed live by a configuration reload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    pub denies: u32,
    pub window: Duration,
    pub max_addresses: usize,
}

impl Thresholds {
    pub fn of(cfg: &crate::config::waf::WafConfig) -> Thresholds {
        Thresholds {
            denies: cfg.escalation_denies.max(1),
            window: Duration::from_secs(cfg.escalation_window_minutes * 60),
            max_addresses: cfg.max_tracked_addresses.max(1),
        }
    }
}

/// Rules whose denies never escalate (shared with the routes that edit them).
#[derive(Default)]
pub struct Exclusions(RwLock<HashSet<u32>>);

impl Exclusions {
    pub fn new(ids: impl IntoIterator<Item = u32>) -> Arc<Exclusions> {
        Arc::new(Exclusions(RwLock::new(ids.into_iter().collect())))
    }
    pub fn set(&self, rule_id: u32, off: bool) {
        let mut s = self.0.write();
        if off {
            s.insert(rule_id);
        } else {
            s.remove(&rule_id);
        }
    }
    pub fn is_off(&self, rule_id: u32) -> bool {
        self.0.read().contains(&rule_id)
    }
    pub fn list(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.0.read().iter().copied().collect();
        v.sort_unstable();
        v
    }
}

struct Track {
    times: VecDeque<i64>,
    /// A deny with escalation on is among the window's denies.
    escalating: VecDeque<bool>,
    rules: Vec<u32>,
    uris: Vec<String>,
    hosts: Vec<String>,
    last_seen: u64,
}

/// The per-address windows.
pub struct Escalator {
    th: Thresholds,
    exclusions: Arc<Exclusions>,
    tracks: HashMap<IpAddr, Track>,
    /// Addresses by their last deny's tick: the least recently seen is the first (eviction
    /// costs O(log n), not a scan of every tracked address).
    order: BTreeMap<u64, IpAddr>,
    tick: u64,
    /// Addresses dropped to stay within `max_addresses`.
    pub evicted: u64,
    /// Findings raised.
    pub raised: u64,
}

impl Escalator {
    pub fn new(th: Thresholds, exclusions: Arc<Exclusions>) -> Escalator {
        Escalator {
            th,
            exclusions,
            tracks: HashMap::new(),
            order: BTreeMap::new(),
            tick: 0,
            evicted: 0,
            raised: 0,
        }
    }

    pub fn set_thresholds(&mut self, th: Thresholds) {
        self.th = th;
    }

    pub fn tracked(&self) -> usize {
        self.tracks.len()
    }

    /// Reads one event; a finding when the address escalates.
    pub fn event(&mut self, e: &WafEvent) -> Option<Finding> {
        if e.action != Action::Deny {
            return None;
        }
        self.tick += 1;
        let at = e.at.as_microsecond();
        let window = self.th.window.as_micros().min(i64::MAX as u128) as i64;
        if !self.tracks.contains_key(&e.ip) && self.tracks.len() >= self.th.max_addresses {
            if let Some((_, old)) = self.order.pop_first() {
                self.tracks.remove(&old);
                self.evicted += 1;
            }
        }
        let tick = self.tick;
        let t = self.tracks.entry(e.ip).or_insert_with(|| Track {
            times: VecDeque::new(),
            escalating: VecDeque::new(),
            rules: Vec::new(),
            uris: Vec::new(),
            hosts: Vec::new(),
            last_seen: tick,
        });
        self.order.remove(&t.last_seen);
        t.last_seen = tick;
        self.order.insert(tick, e.ip);
        t.times.push_back(at);
        t.escalating
            .push_back(e.rule_id.is_none_or(|r| !self.exclusions.is_off(r)));
        while let Some(&first) = t.times.front() {
            if at.saturating_sub(first) > window || t.times.len() > self.th.denies as usize {
                t.times.pop_front();
                t.escalating.pop_front();
            } else {
                break;
            }
        }
        if let Some(r) = e.rule_id {
            if !t.rules.contains(&r) && t.rules.len() < MAX_RULES {
                t.rules.push(r);
            }
        }
        if !e.uri.is_empty() && !t.uris.contains(&e.uri) && t.uris.len() < MAX_RULES {
            t.uris.push(e.uri.clone());
        }
        if !e.host.is_empty() && !t.hosts.contains(&e.host) && t.hosts.len() < MAX_RULES {
            t.hosts.push(e.host.clone());
        }
        if t.times.len() < self.th.denies as usize {
            return None;
        }
        if !t.escalating.iter().any(|&x| x) {
            // Every deny in the window is of a rule excluded from escalation.
            return None;
        }
        let t = self.tracks.remove(&e.ip)?;
        self.order.remove(&t.last_seen);
        self.raised += 1;
        Some(finding(e.ip, &t, self.th, e.at))
    }

    /// Drops addresses whose last deny is older than the window.
    pub fn expire(&mut self, now: Timestamp) {
        let window = self.th.window.as_micros().min(i64::MAX as u128) as i64;
        let now = now.as_microsecond();
        let order = &mut self.order;
        self.tracks.retain(|_, t| {
            let keep = t
                .times
                .back()
                .is_some_and(|&last| now.saturating_sub(last) <= window);
            if !keep {
                order.remove(&t.last_seen);
            }
            keep
        });
    }
}

fn finding(ip: IpAddr, t: &Track, th: Thresholds, at: Timestamp) -> Finding {
    let rules: Vec<String> = t.rules.iter().map(u32::to_string).collect();
    let mut f = Finding::new(
        CHECK,
        Severity::High,
        format!(
            "{} WAF denies from {ip} within {} minutes (rules {})",
            t.times.len(),
            th.window.as_secs() / 60,
            if rules.is_empty() {
                "unknown".to_string()
            } else {
                rules.join(", ")
            }
        ),
        at,
    );
    f.ip = Some(ip);
    f.details = format!(
        "rules: {}; uris: {}; hosts: {}",
        rules.join(", "),
        t.uris
            .iter()
            .map(|u| crate::text::escape_controls(u).into_owned())
            .collect::<Vec<_>>()
            .join(", "),
        t.hosts
            .iter()
            .map(|h| crate::text::escape_controls(h).into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    );
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::waf::event::Format;

    fn deny(secs: i64, ip: &str, rule: u32) -> WafEvent {
        WafEvent {
            at: Timestamp::from_second(1_800_000_000 + secs).unwrap(),
            ip: ip.parse().unwrap(),
            host: "example.test".into(),
            uri: format!("/r{rule}"),
            method: "GET".into(),
            rule_id: Some(rule),
            message: "m".into(),
            severity: Severity::High,
            action: Action::Deny,
            format: Format::ApacheError,
            unique_id: None,
            status: Some(403),
        }
    }

    fn th() -> Thresholds {
        Thresholds {
            denies: 3,
            window: Duration::from_secs(600),
            max_addresses: 4,
        }
    }

    #[test]
    fn three_denies_within_the_window_escalate_once() {
        let mut e = Escalator::new(th(), Exclusions::new([]));
        assert!(e.event(&deny(0, "203.0.113.9", 900112)).is_none());
        assert!(e.event(&deny(10, "203.0.113.9", 900109)).is_none());
        let f = e.event(&deny(20, "203.0.113.9", 900112)).unwrap();
        assert_eq!(f.check, CHECK);
        assert_eq!(f.severity, Severity::High);
        assert_eq!(f.ip, Some("203.0.113.9".parse().unwrap()));
        assert!(f.message.contains("900112, 900109"), "{}", f.message);
        assert!(f.details.contains("/r900109"), "{}", f.details);
        // A new window starts.
        assert!(e.event(&deny(30, "203.0.113.9", 900112)).is_none());
    }

    #[test]
    fn denies_spread_beyond_the_window_do_not() {
        let mut e = Escalator::new(th(), Exclusions::new([]));
        assert!(e.event(&deny(0, "203.0.113.9", 1)).is_none());
        assert!(e.event(&deny(400, "203.0.113.9", 1)).is_none());
        assert!(e.event(&deny(700, "203.0.113.9", 1)).is_none());
        // 400, 700, 900 are within 600 s.
        assert!(e.event(&deny(900, "203.0.113.9", 1)).is_some());
        // Other addresses and passes never count.
        let mut p = deny(901, "203.0.113.9", 1);
        p.action = Action::Pass;
        assert!(e.event(&p).is_none());
    }

    #[test]
    fn excluded_rules_escalate_only_with_another_rule() {
        let ex = Exclusions::new([900112]);
        let mut e = Escalator::new(th(), ex.clone());
        for s in 0..5 {
            assert!(e.event(&deny(s, "198.51.100.7", 900112)).is_none());
        }
        assert!(e.event(&deny(6, "198.51.100.7", 900109)).is_some());
        ex.set(900112, false);
        let mut e = Escalator::new(th(), ex);
        e.event(&deny(0, "198.51.100.8", 900112));
        e.event(&deny(1, "198.51.100.8", 900112));
        assert!(e.event(&deny(2, "198.51.100.8", 900112)).is_some());
    }

    #[test]
    fn tracked_addresses_are_bounded_and_expire() {
        let mut e = Escalator::new(th(), Exclusions::new([]));
        for i in 0..10 {
            e.event(&deny(i, &format!("192.0.2.{i}"), 1));
        }
        assert_eq!(e.tracked(), 4);
        assert_eq!(e.evicted, 6);
        // The least recently seen goes first: 192.0.2.6 denies again, so 192.0.2.7 is
        // evicted by the next new address and 192.0.2.6 stays.
        e.event(&deny(10, "192.0.2.6", 1));
        e.event(&deny(11, "192.0.2.99", 1));
        assert_eq!(e.evicted, 7);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(e.tracks.contains_key(&ip("192.0.2.6")));
        assert!(!e.tracks.contains_key(&ip("192.0.2.7")));
        assert_eq!(e.order.len(), e.tracks.len());
        e.expire(Timestamp::from_second(1_800_000_000 + 605).unwrap());
        assert_eq!(e.tracked(), 4);
        e.expire(Timestamp::from_second(1_800_000_000 + 700).unwrap());
        assert_eq!(e.tracked(), 0);
        assert!(e.order.is_empty());
    }
}
