//! Credentials: API tokens (constant-time), the metrics token, and the failure limiter.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::clock::SharedClock;
use crate::config::{Scope, TokenEntry};

/// How a caller authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    Token,
    Browser,
    Metrics,
    Anonymous,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Token => "token",
            Via::Browser => "browser",
            Via::Metrics => "metrics_token",
            Via::Anonymous => "anonymous",
        }
    }
}

/// The authenticated caller of one request.
#[derive(Clone, Debug)]
pub struct Caller {
    pub name: String,
    pub scope: Option<Scope>,
    pub via: Via,
    /// Session id and CSRF token for browser callers.
    pub session: Option<(String, String)>,
}

impl Caller {
    pub fn anonymous() -> Caller {
        Caller {
            name: "anonymous".into(),
            scope: None,
            via: Via::Anonymous,
            session: None,
        }
    }
}

struct Known {
    digest: [u8; 32],
    name: String,
    scope: Scope,
}

/// Token lookup. Values are kept only as SHA-256 digests and compared in constant time
/// against every configured token (no early exit, no length leak).
pub struct Tokens {
    known: Vec<Known>,
    metrics: Option<[u8; 32]>,
}

fn digest(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

impl Tokens {
    pub fn new(tokens: &[TokenEntry], metrics_token: &str) -> Tokens {
        Tokens {
            known: tokens
                .iter()
                .map(|t| Known {
                    digest: digest(&t.token),
                    name: t.name.clone(),
                    scope: t.scope,
                })
                .collect(),
            metrics: (!metrics_token.is_empty()).then(|| digest(metrics_token)),
        }
    }

    /// The entry a presented API token belongs to.
    pub fn lookup(&self, presented: &str) -> Option<(String, Scope)> {
        let d = digest(presented);
        let mut found: Option<usize> = None;
        for (i, k) in self.known.iter().enumerate() {
            if bool::from(k.digest.ct_eq(&d)) {
                found = Some(i);
            }
        }
        found.map(|i| (self.known[i].name.clone(), self.known[i].scope))
    }

    pub fn is_metrics(&self, presented: &str) -> bool {
        match &self.metrics {
            Some(m) => bool::from(m.ct_eq(&digest(presented))),
            None => false,
        }
    }
}

/// Counts authentication failures per address over a sliding minute.
///
/// Once an address reaches the limit, further failing attempts from it are answered 429
/// until its failures in the last minute drop below the limit. A valid credential from that
/// address is still accepted: tokens are at least 16 characters, so the limit exists to shed
/// guessing floods cheaply, not to lock operators out (see docs/decisions.md).
pub struct FailureLimiter {
    per_minute: usize,
    clock: SharedClock,
    by_ip: Mutex<HashMap<IpAddr, VecDeque<i64>>>,
    pub failures_total: AtomicU64,
    pub limited_total: AtomicU64,
}

/// Addresses tracked at most; the oldest entries are dropped first.
const MAX_TRACKED: usize = 10_000;

impl FailureLimiter {
    pub fn new(per_minute: u32, clock: SharedClock) -> Self {
        FailureLimiter {
            per_minute: per_minute.max(1) as usize,
            clock,
            by_ip: Mutex::new(HashMap::new()),
            failures_total: AtomicU64::new(0),
            limited_total: AtomicU64::new(0),
        }
    }

    fn prune(q: &mut VecDeque<i64>, now: i64) {
        while q.front().is_some_and(|&t| now - t >= 60_000_000_000) {
            q.pop_front();
        }
    }

    /// True when the address is over the limit now.
    pub fn is_limited(&self, ip: IpAddr) -> bool {
        let now = self.clock.monotonic_nanos();
        let mut map = self.by_ip.lock();
        match map.get_mut(&ip) {
            Some(q) => {
                Self::prune(q, now);
                q.len() >= self.per_minute
            }
            None => false,
        }
    }

    /// Records one failure; returns true when the address is now limited.
    pub fn record_failure(&self, ip: IpAddr) -> bool {
        self.failures_total.fetch_add(1, Ordering::Relaxed);
        let now = self.clock.monotonic_nanos();
        let mut map = self.by_ip.lock();
        if map.len() >= MAX_TRACKED && !map.contains_key(&ip) {
            map.retain(|_, q| q.back().is_some_and(|&t| now - t < 60_000_000_000));
            if map.len() >= MAX_TRACKED {
                if let Some(k) = map.keys().next().copied() {
                    map.remove(&k);
                }
            }
        }
        let q = map.entry(ip).or_default();
        Self::prune(q, now);
        let limited = q.len() >= self.per_minute;
        if q.len() <= self.per_minute {
            q.push_back(now);
        }
        if limited {
            self.limited_total.fetch_add(1, Ordering::Relaxed);
        }
        limited
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn entry(name: &str, token: &str, scope: Scope) -> TokenEntry {
        TokenEntry {
            name: name.into(),
            token: token.into(),
            scope,
        }
    }

    #[test]
    fn lookup_and_metrics_are_separate() {
        let t = Tokens::new(
            &[
                entry("a", "aaaaaaaaaaaaaaaa", Scope::Admin),
                entry("r", "rrrrrrrrrrrrrrrr", Scope::Read),
            ],
            "mmmmmmmmmmmmmmmm",
        );
        assert_eq!(
            t.lookup("aaaaaaaaaaaaaaaa"),
            Some(("a".into(), Scope::Admin))
        );
        assert_eq!(
            t.lookup("rrrrrrrrrrrrrrrr"),
            Some(("r".into(), Scope::Read))
        );
        assert_eq!(t.lookup("mmmmmmmmmmmmmmmm"), None);
        assert!(t.is_metrics("mmmmmmmmmmmmmmmm"));
        assert!(!t.is_metrics("aaaaaaaaaaaaaaaa"));
        assert_eq!(t.lookup(""), None);
    }

    #[test]
    fn limiter_trips_and_recovers_with_time() {
        let c = ManualClock::at_epoch_2026();
        let l = FailureLimiter::new(3, c.clone());
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(!l.record_failure(ip));
        assert!(!l.record_failure(ip));
        assert!(!l.record_failure(ip));
        assert!(l.is_limited(ip));
        assert!(l.record_failure(ip));
        assert!(!l.is_limited("192.0.2.2".parse().unwrap()));
        c.advance_secs(61);
        assert!(!l.is_limited(ip));
    }
}
