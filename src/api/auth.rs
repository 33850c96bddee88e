//! Credentials: API tokens (constant-time), the metrics token, and the failure limiter.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
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
    digest: TokenId,
    name: String,
    scope: Scope,
}

/// SHA-256 of a token value: how a token is known in memory (and which token created a
/// browser session), never the value itself.
pub type TokenId = [u8; 32];

/// The SHA-256 digest of a presented or configured token.
pub fn token_id(token: &str) -> TokenId {
    Sha256::digest(token.as_bytes()).into()
}

/// One configured set of credentials.
struct TokenSet {
    known: Vec<Known>,
    metrics: Option<TokenId>,
}

/// Token lookup. Values are kept only as SHA-256 digests and compared in constant time
/// against every configured token (no early exit, no length leak).
///
/// The set is swapped as a whole by [`Tokens::replace`] (configuration reload): a lookup
/// sees either the old or the new set, never a mix, and route handlers take no lock beyond
/// the short read of the current set.
pub struct Tokens {
    set: RwLock<Arc<TokenSet>>,
}

fn build_set(tokens: &[TokenEntry], metrics_token: &str) -> TokenSet {
    TokenSet {
        known: tokens
            .iter()
            .map(|t| Known {
                digest: token_id(&t.token),
                name: t.name.clone(),
                scope: t.scope,
            })
            .collect(),
        metrics: (!metrics_token.is_empty()).then(|| token_id(metrics_token)),
    }
}

impl Tokens {
    pub fn new(tokens: &[TokenEntry], metrics_token: &str) -> Tokens {
        Tokens {
            set: RwLock::new(Arc::new(build_set(tokens, metrics_token))),
        }
    }

    /// Replaces every credential at once (configuration reload).
    pub fn replace(&self, tokens: &[TokenEntry], metrics_token: &str) {
        let next = Arc::new(build_set(tokens, metrics_token));
        *self.set.write() = next;
    }

    fn current(&self) -> Arc<TokenSet> {
        self.set.read().clone()
    }

    /// The entry a presented API token belongs to.
    pub fn lookup(&self, presented: &str) -> Option<(String, Scope)> {
        let d = token_id(presented);
        let set = self.current();
        let mut found: Option<usize> = None;
        for (i, k) in set.known.iter().enumerate() {
            if bool::from(k.digest.ct_eq(&d)) {
                found = Some(i);
            }
        }
        found.map(|i| (set.known[i].name.clone(), set.known[i].scope))
    }

    /// Whether `id` is a configured admin token now (sessions it created stay valid only
    /// while it is).
    pub fn is_admin(&self, id: &TokenId) -> bool {
        let set = self.current();
        let mut found = false;
        for k in &set.known {
            found |= bool::from(k.digest.ct_eq(id)) && k.scope == Scope::Admin;
        }
        found
    }

    pub fn is_metrics(&self, presented: &str) -> bool {
        match &self.current().metrics {
            Some(m) => bool::from(m.ct_eq(&token_id(presented))),
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
    fn replace_swaps_every_credential_at_once() {
        let t = Tokens::new(
            &[entry("a", "aaaaaaaaaaaaaaaa", Scope::Admin)],
            "mmmmmmmmmmmmmmmm",
        );
        let a = token_id("aaaaaaaaaaaaaaaa");
        assert!(t.is_admin(&a));
        t.replace(
            &[
                entry("b", "bbbbbbbbbbbbbbbb", Scope::Admin),
                entry("a", "aaaaaaaaaaaaaaaa", Scope::Read),
            ],
            "nnnnnnnnnnnnnnnn",
        );
        assert_eq!(
            t.lookup("bbbbbbbbbbbbbbbb"),
            Some(("b".into(), Scope::Admin))
        );
        assert_eq!(
            t.lookup("aaaaaaaaaaaaaaaa"),
            Some(("a".into(), Scope::Read))
        );
        assert!(!t.is_admin(&a), "demoted to read: no longer admin");
        assert!(t.is_admin(&token_id("bbbbbbbbbbbbbbbb")));
        assert!(!t.is_metrics("mmmmmmmmmmmmmmmm"));
        assert!(t.is_metrics("nnnnnnnnnnnnnnnn"));
        t.replace(&[], "");
        assert_eq!(t.lookup("bbbbbbbbbbbbbbbb"), None);
        assert!(!t.is_metrics("nnnnnnnnnnnnnnnn"));
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
