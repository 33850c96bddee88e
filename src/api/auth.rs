//! Credentials: API tokens (constant-time), the metrics token, and the failure limiter.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
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

    /// Whether `id` is a configured token now (either scope grants read): a stream opened
    /// with it ends once a reload removes it.
    pub fn is_configured(&self, id: &TokenId) -> bool {
        let set = self.current();
        let mut found = false;
        for k in &set.known {
            found |= bool::from(k.digest.ct_eq(id));
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

/// Why a request failed authentication: the `reason` label of `svc_auth_failures_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailReason {
    /// A known route without any credential (401, not counted by the limiter).
    NoCredential,
    /// A Bearer token that matches no configured token (401).
    InvalidToken,
    /// An `Authorization` header that is not `Bearer` (401).
    UnsupportedScheme,
    /// A session cookie that names no live session (401).
    InvalidSession,
    /// The metrics token on another route (401, not counted by the limiter).
    MetricsTokenElsewhere,
    /// `POST /login` with a token that matches no configured token (401).
    InvalidLogin,
    /// A failing attempt from an address over the limit (429).
    RateLimited,
}

impl FailReason {
    pub const ALL: [FailReason; 7] = [
        FailReason::NoCredential,
        FailReason::InvalidToken,
        FailReason::UnsupportedScheme,
        FailReason::InvalidSession,
        FailReason::MetricsTokenElsewhere,
        FailReason::InvalidLogin,
        FailReason::RateLimited,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailReason::NoCredential => "no_credential",
            FailReason::InvalidToken => "invalid_token",
            FailReason::UnsupportedScheme => "unsupported_scheme",
            FailReason::InvalidSession => "invalid_session",
            FailReason::MetricsTokenElsewhere => "metrics_token_elsewhere",
            FailReason::InvalidLogin => "invalid_login",
            FailReason::RateLimited => "rate_limited",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Requests that failed authentication, by reason (atomics only).
#[derive(Default, Debug)]
pub struct FailureCounts([AtomicU64; 7]);

impl FailureCounts {
    pub fn count(&self, reason: FailReason) {
        self.0[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(&self, reason: FailReason) -> u64 {
        self.0[reason.index()].load(Ordering::Relaxed)
    }
}

/// The address the limiter (and the log limiter) counts a client under: IPv4 (an
/// IPv4-mapped IPv6 address counts as its IPv4 address), or the /64 network of an IPv6
/// address, since one host commonly holds a whole /64.
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(
            u128::from(v6) & 0xffff_ffff_ffff_ffff_0000_0000_0000_0000,
        )),
        v4 => v4,
    }
}

/// Failures of one address in the last minute: 60 one-second buckets.
#[derive(Clone)]
struct Window {
    last_sec: i64,
    sum: u32,
    buckets: [u32; 60],
}

impl Window {
    fn new(now_sec: i64) -> Window {
        Window {
            last_sec: now_sec,
            sum: 0,
            buckets: [0; 60],
        }
    }

    /// Drops the buckets that left the minute ending at `now_sec` (at most 60 steps).
    fn advance(&mut self, now_sec: i64) {
        if now_sec <= self.last_sec {
            return;
        }
        if now_sec - self.last_sec >= 60 {
            self.buckets = [0; 60];
            self.sum = 0;
        } else {
            for s in self.last_sec + 1..=now_sec {
                let b = &mut self.buckets[s.rem_euclid(60) as usize];
                self.sum -= *b;
                *b = 0;
            }
        }
        self.last_sec = now_sec;
    }

    fn add(&mut self, now_sec: i64) {
        let b = &mut self.buckets[now_sec.rem_euclid(60) as usize];
        *b = b.saturating_add(1);
        self.sum = self.sum.saturating_add(1);
    }
}

const NIL: usize = usize::MAX;

struct Node {
    key: IpAddr,
    prev: usize,
    next: usize,
    window: Window,
}

/// Windows by address key, in least-recently-seen order: a doubly linked list over a slab,
/// so finding, refreshing and evicting an entry cost O(1) whatever the table holds.
struct Lru {
    map: HashMap<IpAddr, usize>,
    nodes: Vec<Node>,
    /// Most recently seen.
    head: usize,
    /// Least recently seen: evicted first.
    tail: usize,
    capacity: usize,
}

impl Lru {
    fn new(capacity: usize) -> Lru {
        Lru {
            map: HashMap::new(),
            nodes: Vec::new(),
            head: NIL,
            tail: NIL,
            capacity: capacity.max(1),
        }
    }

    fn unlink(&mut self, i: usize) {
        let (prev, next) = (self.nodes[i].prev, self.nodes[i].next);
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next].prev = prev;
        }
    }

    fn push_front(&mut self, i: usize) {
        self.nodes[i].prev = NIL;
        self.nodes[i].next = self.head;
        if self.head != NIL {
            self.nodes[self.head].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    /// The window of `key`, moved to the front; created (evicting the least recently seen
    /// entry when full) if missing. Returns the window and whether an entry was evicted.
    fn seen(&mut self, key: IpAddr, now_sec: i64) -> (&mut Window, bool) {
        let mut evicted = false;
        let i = match self.map.get(&key) {
            Some(&i) => {
                self.unlink(i);
                i
            }
            None if self.nodes.len() < self.capacity => {
                self.nodes.push(Node {
                    key,
                    prev: NIL,
                    next: NIL,
                    window: Window::new(now_sec),
                });
                self.map.insert(key, self.nodes.len() - 1);
                self.nodes.len() - 1
            }
            None => {
                let i = self.tail;
                self.unlink(i);
                let old = std::mem::replace(&mut self.nodes[i].key, key);
                self.map.remove(&old);
                self.map.insert(key, i);
                self.nodes[i].window = Window::new(now_sec);
                evicted = true;
                i
            }
        };
        self.push_front(i);
        (&mut self.nodes[i].window, evicted)
    }

    fn get(&mut self, key: &IpAddr) -> Option<&mut Window> {
        let i = *self.map.get(key)?;
        Some(&mut self.nodes[i].window)
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

/// Counts authentication failures per address over a sliding minute.
///
/// Once an address reaches the limit, further failing attempts from it are answered 429
/// until its failures in the last minute drop below the limit. A valid credential from that
/// address is still accepted: tokens are at least 16 characters, so the limit exists to shed
/// guessing floods cheaply, not to lock operators out (see docs/decisions.md).
///
/// Guarantees:
/// - Addresses are counted by [`address_key`]: IPv6 per /64.
/// - At most [`MAX_TRACKED`] addresses are tracked, each in fixed memory (60 one-second
///   buckets); when the table is full the least recently seen address is forgotten, in O(1),
///   so a flood of new addresses costs each request the same small, constant work.
pub struct FailureLimiter {
    per_minute: u32,
    clock: SharedClock,
    table: Mutex<Lru>,
    /// Failures recorded by the limiter (invalid tokens and failed logins).
    pub failures_total: AtomicU64,
    /// Failing attempts refused with 429.
    pub limited_total: AtomicU64,
    /// Tracked addresses forgotten to make room for new ones.
    pub evicted_total: AtomicU64,
    /// Every authentication failure, by reason (`svc_auth_failures_total`).
    pub by_reason: FailureCounts,
}

/// Addresses tracked at most; the least recently seen is forgotten first.
pub const MAX_TRACKED: usize = 10_000;

impl FailureLimiter {
    pub fn new(per_minute: u32, clock: SharedClock) -> Self {
        Self::with_capacity(per_minute, clock, MAX_TRACKED)
    }

    pub fn with_capacity(per_minute: u32, clock: SharedClock, capacity: usize) -> Self {
        FailureLimiter {
            per_minute: per_minute.max(1),
            clock,
            table: Mutex::new(Lru::new(capacity)),
            failures_total: AtomicU64::new(0),
            limited_total: AtomicU64::new(0),
            evicted_total: AtomicU64::new(0),
            by_reason: FailureCounts::default(),
        }
    }

    fn now_sec(&self) -> i64 {
        self.clock.monotonic_nanos().div_euclid(1_000_000_000)
    }

    /// True when the address is over the limit now.
    pub fn is_limited(&self, ip: IpAddr) -> bool {
        let now = self.now_sec();
        let mut t = self.table.lock();
        match t.get(&address_key(ip)) {
            Some(w) => {
                w.advance(now);
                w.sum >= self.per_minute
            }
            None => false,
        }
    }

    /// Records one failure; returns true when the address is over the limit (the attempt
    /// is to be answered 429, counted as [`FailReason::RateLimited`]).
    pub fn record_failure(&self, ip: IpAddr) -> bool {
        self.failures_total.fetch_add(1, Ordering::Relaxed);
        let now = self.now_sec();
        let limited = {
            let mut t = self.table.lock();
            let (w, evicted) = t.seen(address_key(ip), now);
            w.advance(now);
            let limited = w.sum >= self.per_minute;
            if !limited {
                w.add(now);
            }
            if evicted {
                self.evicted_total.fetch_add(1, Ordering::Relaxed);
            }
            limited
        };
        if limited {
            self.limited_total.fetch_add(1, Ordering::Relaxed);
        }
        limited
    }

    /// Addresses tracked now.
    pub fn tracked(&self) -> usize {
        self.table.lock().len()
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

    #[test]
    fn window_slides_by_the_second() {
        let c = ManualClock::at_epoch_2026();
        let l = FailureLimiter::new(3, c.clone());
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        l.record_failure(ip);
        c.advance_secs(30);
        l.record_failure(ip);
        l.record_failure(ip);
        assert!(l.is_limited(ip));
        // The first failure leaves the minute; two remain.
        c.advance_secs(31);
        assert!(!l.is_limited(ip));
        assert!(!l.record_failure(ip));
        assert!(l.record_failure(ip), "three in the last minute again");
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_v4_as_v4() {
        let c = ManualClock::at_epoch_2026();
        let l = FailureLimiter::new(3, c.clone());
        for host in ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::9"] {
            l.record_failure(host.parse().unwrap());
        }
        assert!(l.is_limited("2001:db8:1:2:abcd::1".parse().unwrap()));
        assert!(!l.is_limited("2001:db8:1:3::1".parse().unwrap()));
        for _ in 0..3 {
            l.record_failure("::ffff:198.51.100.4".parse().unwrap());
        }
        assert!(l.is_limited("198.51.100.4".parse().unwrap()));
        assert_eq!(l.tracked(), 2);
    }

    #[test]
    fn full_table_forgets_the_least_recently_seen() {
        let c = ManualClock::at_epoch_2026();
        let l = FailureLimiter::with_capacity(2, c.clone(), 3);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        l.record_failure(a);
        l.record_failure(a);
        l.record_failure(b);
        l.record_failure("192.0.2.3".parse().unwrap());
        // `a` is seen again: `b` is now the least recently seen.
        assert!(l.record_failure(a));
        l.record_failure("192.0.2.4".parse().unwrap());
        assert_eq!(l.tracked(), 3);
        assert_eq!(l.evicted_total.load(Ordering::Relaxed), 1);
        assert!(l.is_limited(a), "a survived");
        // A flood of new addresses: the table stays at its size, each step O(1).
        for i in 0..100_000u32 {
            l.record_failure(IpAddr::V4(std::net::Ipv4Addr::from(0xc633_0000 + i)));
        }
        assert_eq!(l.tracked(), 3);
        assert!(!l.is_limited(a), "a was forgotten by the flood");
    }
}
