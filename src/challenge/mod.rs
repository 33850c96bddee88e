//! The proof-of-work challenge: pre-auth, browser-visible signals route an address here
//! instead of to a firewall block; the web server sends it to the challenge page; a browser
//! that solves the puzzle earns a signed cookie and a temporary allow; an address that does
//! not solve it in time is blocked after all.
//!
//! ```text
//! auto-block cycle --divert(ip, check)--> routes (pending) --map files--> web server
//!    ^                                      |  timer (1 s): due routes
//!    '---- escalate(ip, check) <------------'  (claimed-crawler routes expire instead)
//! browser --> listener (listener.rs): page, nonce --> proof --> allow (4 h) + cookie
//! ```
//!
//! Guarantees:
//! - Routed checks ([`ROUTED_CHECKS`]): `wp_login_bruteforce`, `xmlrpc_abuse`,
//!   `wp_user_enumeration`, `http_scanner_profile` (only while
//!   `auto_response.http_scanner_action = "challenge"`), `http_claimed_bot_unverified`,
//!   `ip_reputation` and `local_threat_score` (verdict scores). Every other trigger blocks
//!   as before.
//! - A routed address stays pending from its first route; a new route of a pending
//!   address changes nothing (the deadline is not renewed). After
//!   `challenge.timeout_minutes` (default 30) unsolved it is escalated: handed back to the
//!   auto-block path as a hard block (its cap, dry run and exemptions apply). Routes of
//!   `http_claimed_bot_unverified` expire instead.
//! - At most `challenge.max_pending` addresses are pending; a route beyond that is refused
//!   (counted) and the address is blocked as before.
//! - A valid proof ends the route (`solved`) and allows the pair (address, check) for
//!   each check that routed it, for `challenge.allow_hours` (default 4; at most
//!   [`MAX_ALLOWS`] pairs, the one expiring first gives way): that check neither routes
//!   nor blocks the address again meanwhile ([`Diverted::Solved`]). Nothing else: every
//!   other check's automatic block applies (solving proves a browser, not innocence), and a
//!   proof without a pending route allows nothing (the cookie still shows "verified").
//! - Nonces are random (128 bits), bound to the address they were issued to, single use
//!   (consumed by any verification attempt), live [`NONCE_LIFETIME_SECS`], at most
//!   [`MAX_NONCES_PER_CLIENT`] per client (IPv4 address or IPv6 /64; a new one replaces the
//!   oldest, counted), at most [`MAX_NONCES_PER_PROXY`] issued through one trusted proxy
//!   (the same rule) and [`MAX_NONCES`] in all; a request beyond that is refused (503,
//!   counted). The client is the TCP peer unless the peer is in `challenge.trusted_proxies`
//!   (see [`listener`]), so a direct peer is its own client and holds 8 at most.
//! - Pending routes, allows and the escalation count survive a restart (store key
//!   `challenge.state`, written within a second of a change); the per-check counts and the
//!   recent list are since the start.
//! - The map files are rewritten atomically within a second of a change and at least
//!   every five minutes (see [`webserver`]).
//! - Stats and status read memory only.

pub mod listener;
pub mod page;
pub mod pow;
pub mod webserver;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::clock::SharedClock;
use crate::config::challenge::ChallengeConfig;
use crate::store::Store;

/// Checks whose addresses go to the challenge instead of a block.
pub const ROUTED_CHECKS: &[&str] = &[
    "wp_login_bruteforce",
    "xmlrpc_abuse",
    "wp_user_enumeration",
    "http_scanner_profile",
    "http_claimed_bot_unverified",
    "ip_reputation",
    "local_threat_score",
];
/// Routed checks whose unsolved routes expire instead of becoming blocks (a claimed
/// crawler whose verification is pending).
pub const EXPIRING_CHECKS: &[&str] = &["http_claimed_bot_unverified"];
/// Entries of the recent list.
pub const RECENT: usize = 50;
/// Outstanding nonces at most.
pub const MAX_NONCES: usize = 10_000;
/// Outstanding nonces per client (an IPv4 address or an IPv6 /64) at most; a new one
/// replaces the client's oldest, so one client cannot fill the table.
pub const MAX_NONCES_PER_CLIENT: usize = 8;
/// Outstanding nonces issued through one trusted proxy (for the clients it forwards) at
/// most; a new one replaces the proxy's oldest. Half the table: a proxy that carries every
/// visitor is never refused (it only loses nonces older than its 5,000 newest), and direct
/// clients keep the other half.
pub const MAX_NONCES_PER_PROXY: usize = MAX_NONCES / 2;
/// Lifetime of a nonce.
pub const NONCE_LIFETIME_SECS: i64 = 600;
/// Addresses with a temporary allow at most.
pub const MAX_ALLOWS: usize = 100_000;
/// Store key of the durable state.
pub const STATE_KEY: &str = "challenge.state";
/// Reload commands run at most this often.
const RELOAD_EVERY_SECS: i64 = 10;
/// Deadline of one reload command.
const RELOAD_DEADLINE: Duration = Duration::from_secs(30);
const MICROS: i64 = 1_000_000;

/// Settings applied live.
#[derive(Clone, Debug)]
pub struct Settings {
    pub cfg: ChallengeConfig,
    /// `auto_response.http_scanner_action = "challenge"`.
    pub scanner_challenge: bool,
}

/// Blocks an escalated address (wired to the auto-block path): address, check.
pub type EscalateFn = Arc<dyn Fn(IpAddr, &str) + Send + Sync>;

pub use crate::threat::autoblock::Diverted;

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Route {
    check: String,
    /// Unix microseconds.
    at: i64,
    deadline: i64,
    expire_only: bool,
    /// Other checks that routed the address while it was pending (a solve allows each).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    also: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
struct Recent {
    ip: IpAddr,
    check: String,
    at: i64,
    outcome: &'static str,
}

struct NonceRec {
    ip: IpAddr,
    expires: i64,
    bits: u8,
    /// The trusted proxy's key when issued through one.
    proxy: Option<IpAddr>,
}

#[derive(Default)]
struct State {
    pending: BTreeMap<IpAddr, Route>,
    /// (address, check that routed it) -> allowed until.
    allows: HashMap<(IpAddr, String), i64>,
    nonces: HashMap<String, NonceRec>,
    /// Outstanding nonces per client key, oldest first.
    by_client: HashMap<IpAddr, VecDeque<String>>,
    /// Outstanding nonces per trusted proxy key, oldest first.
    by_proxy: HashMap<IpAddr, VecDeque<String>>,
    recent: VecDeque<Recent>,
    routed_by_check: BTreeMap<String, u64>,
    escalated: u64,
}

impl State {
    /// Drops expired nonces (and their per-client entries).
    fn purge_nonces(&mut self, now: i64) {
        let before = self.nonces.len();
        self.nonces.retain(|_, r| r.expires > now);
        if self.nonces.len() != before {
            let nonces = &self.nonces;
            for table in [&mut self.by_client, &mut self.by_proxy] {
                table.retain(|_, q| {
                    q.retain(|n| nonces.contains_key(n));
                    !q.is_empty()
                });
            }
        }
    }

    /// Removes `nonce` from the table and its client's and proxy's queues.
    fn take_nonce(&mut self, nonce: &str) -> Option<NonceRec> {
        let r = self.nonces.remove(nonce)?;
        let keys = [
            (&mut self.by_client, Some(client_key(r.ip))),
            (&mut self.by_proxy, r.proxy),
        ];
        for (table, key) in keys {
            let Some(key) = key else { continue };
            if let Some(q) = table.get_mut(&key) {
                // Usually the oldest (a replaced one): no scan of a proxy's long queue.
                if q.front().is_some_and(|n| n == nonce) {
                    q.pop_front();
                } else {
                    q.retain(|n| n != nonce);
                }
                if q.is_empty() {
                    table.remove(&key);
                }
            }
        }
        Some(r)
    }

    /// Makes room in `key`'s queue of `table` (at most `max`): its oldest nonce goes.
    /// True when one went.
    fn make_room(&mut self, by_proxy: bool, key: IpAddr, max: usize) -> bool {
        let table = if by_proxy {
            &self.by_proxy
        } else {
            &self.by_client
        };
        let oldest = match table.get(&key) {
            Some(q) if q.len() >= max => q.front().cloned(),
            _ => None,
        };
        oldest.is_some_and(|n| self.take_nonce(&n).is_some())
    }
}

/// The key nonces are bounded by: an IPv4 address, or the /64 of an IPv6 address.
fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(std::net::Ipv6Addr::from(
            u128::from(v6) & !((1u128 << 64) - 1),
        )),
        v4 => v4,
    }
}

#[derive(Serialize, Deserialize, Default)]
struct Durable {
    pending: Vec<(IpAddr, Route)>,
    /// Address-only allows of versions before decision 280. Read and dropped (they do not
    /// name the check that routed the address, so they allow nothing); written empty, so
    /// an older binary still reads the document.
    #[serde(default)]
    allows: Vec<(IpAddr, i64)>,
    /// (address, check, until).
    #[serde(default)]
    allowed_routes: Vec<(IpAddr, String, i64)>,
    escalated: u64,
}

/// Counters (atomics).
#[derive(Default, Debug)]
pub struct Counters {
    pub routed: AtomicU64,
    pub refused_full: AtomicU64,
    pub expired: AtomicU64,
    pub solved: AtomicU64,
    pub nonces_issued: AtomicU64,
    pub nonces_refused: AtomicU64,
    /// Nonces replaced by a newer one of the same client.
    pub nonces_replaced: AtomicU64,
    /// Nonces replaced by a newer one issued through the same trusted proxy.
    pub nonces_replaced_proxy: AtomicU64,
    /// Requests whose `X-Forwarded-For` was ignored: the peer is not in
    /// `challenge.trusted_proxies`.
    pub forwarded_untrusted: AtomicU64,
    /// Proofs refused: unknown or used nonce, another address's nonce, expired, wrong.
    pub proofs_refused: AtomicU64,
    /// Request bodies that did not parse.
    pub bad_requests: AtomicU64,
    pub map_writes: AtomicU64,
    pub map_failures: AtomicU64,
    pub store_failures: AtomicU64,
    pub reloads: AtomicU64,
    pub reload_failures: AtomicU64,
}

/// Why a proof was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum VerifyError {
    UnknownNonce,
    OtherAddress,
    Expired,
    WrongProof,
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VerifyError::UnknownNonce => "unknown or already used nonce",
            VerifyError::OtherAddress => "the nonce was issued to another address",
            VerifyError::Expired => "the nonce expired",
            VerifyError::WrongProof => "the proof does not have enough leading zero bits",
        })
    }
}

/// The challenge. Build with [`Challenge::new`]; share as `Arc<Challenge>`.
pub struct Challenge {
    clock: SharedClock,
    store: Store,
    settings: RwLock<Settings>,
    secret: Vec<u8>,
    state: Mutex<State>,
    escalate: RwLock<Option<EscalateFn>>,
    pub counters: Counters,
    dirty: AtomicBool,
    map_dirty: AtomicBool,
    last_map: Mutex<(i64, Vec<IpAddr>)>,
    reload_due: AtomicBool,
    reload_running: Arc<AtomicBool>,
    last_reload: AtomicI64,
    stop: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    logs: crate::lograte::LogLimiter,
}

/// Reads or creates the cookie secret (`{state}/challenge.secret`, 32 random bytes as hex,
/// mode 0600).
pub fn load_secret(state: &Path) -> std::io::Result<Vec<u8>> {
    let path = state.join("challenge.secret");
    if let Ok(s) = crate::fsutil::read_daemon_string(&path) {
        if let Ok(b) = hex::decode(s.trim()) {
            if b.len() == 32 {
                return Ok(b);
            }
        }
        log::warn!(
            "{}: not a 32-byte hex secret; a new one is made",
            path.display()
        );
    }
    let s = crate::ids::random_hex(32);
    crate::fsutil::write_atomic(&path, s.as_bytes(), 0o600, None)?;
    hex::decode(s).map_err(std::io::Error::other)
}

impl Challenge {
    /// Loads the durable state (expired routes are escalated at the first tick).
    pub fn new(
        clock: SharedClock,
        store: Store,
        secret: Vec<u8>,
        settings: Settings,
    ) -> Arc<Challenge> {
        let mut state = State::default();
        match store.read(|c| crate::store::kv::get(c, STATE_KEY)) {
            Ok(Some(text)) => match serde_json::from_str::<Durable>(&text) {
                Ok(d) => {
                    state.pending = d.pending.into_iter().collect();
                    state.allows = d
                        .allowed_routes
                        .into_iter()
                        .take(MAX_ALLOWS)
                        .map(|(a, c, u)| ((a, c), u))
                        .collect();
                    state.escalated = d.escalated;
                    if !d.allows.is_empty() {
                        log::info!(
                            "challenge: {} allows of an older version dropped: they name no check; those addresses are routed again by their next signal",
                            d.allows.len()
                        );
                    }
                }
                Err(e) => log::warn!("challenge: stored state unreadable ({e}); starting empty"),
            },
            Ok(None) => {}
            Err(e) => log::warn!("challenge: cannot read the stored state: {e}"),
        }
        let n = state.pending.len();
        if n > 0 {
            log::info!("challenge: {n} pending addresses restored");
        }
        Arc::new(Challenge {
            logs: crate::lograte::LogLimiter::per_minute(clock.clone()),
            clock,
            store,
            settings: RwLock::new(settings),
            secret,
            state: Mutex::new(state),
            escalate: RwLock::new(None),
            counters: Counters::default(),
            dirty: AtomicBool::new(false),
            map_dirty: AtomicBool::new(true),
            last_map: Mutex::new((i64::MIN, Vec::new())),
            reload_due: AtomicBool::new(false),
            reload_running: Arc::new(AtomicBool::new(false)),
            last_reload: AtomicI64::new(i64::MIN),
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
        })
    }

    pub fn set_settings(&self, s: Settings) {
        let map_moved = self.settings.read().cfg.map_dir != s.cfg.map_dir;
        *self.settings.write() = s;
        if map_moved {
            self.map_dirty.store(true, Ordering::SeqCst);
        }
    }

    pub fn settings(&self) -> Settings {
        self.settings.read().clone()
    }

    /// Wires the blocking of escalated addresses.
    pub fn set_escalate(&self, f: EscalateFn) {
        *self.escalate.write() = Some(f);
    }

    fn now(&self) -> i64 {
        self.clock.now().as_microsecond()
    }

    /// Whether a trigger of `check` goes to the challenge under the settings in effect.
    pub fn routes(&self, check: &str) -> bool {
        if check == "http_scanner_profile" {
            return self.settings.read().scanner_challenge;
        }
        ROUTED_CHECKS.contains(&check)
    }

    /// Routes `ip`, about to be blocked for `check`, to the challenge: `Taken` (routed, or
    /// pending already), `Solved` (it solved the challenge `check` routed it to, and the
    /// allow lasts: neither routed nor blocked for `check`), `No` (not a routed check, or
    /// the pending table is full: block as before).
    pub fn divert(&self, ip: IpAddr, check: &str) -> Diverted {
        if !self.routes(check) {
            return Diverted::No;
        }
        let ip = ip.to_canonical();
        let now = self.now();
        let timeout = self.settings.read().cfg.timeout_minutes as i64 * 60 * MICROS;
        let max = self.settings.read().cfg.max_pending;
        let mut st = self.state.lock();
        if let Some(u) = st
            .allows
            .get(&(ip, check.to_string()))
            .filter(|u| **u > now)
        {
            return Diverted::Solved(format!(
                "solved the proof-of-work challenge {check} routed it to (allowed until {})",
                instant(*u)
            ));
        }
        if let Some(r) = st.pending.get_mut(&ip) {
            if r.check != check && !r.also.iter().any(|c| c == check) {
                r.also.push(check.to_string());
                self.dirty.store(true, Ordering::SeqCst);
            }
            return Diverted::Taken;
        }
        if st.pending.len() >= max {
            self.counters.refused_full.fetch_add(1, Ordering::Relaxed);
            crate::warn_limited!(
                self.logs,
                "challenge_full",
                "",
                "challenge: {max} addresses pending (challenge.max_pending); {ip} is blocked instead"
            );
            return Diverted::No;
        }
        st.pending.insert(
            ip,
            Route {
                check: check.to_string(),
                at: now,
                deadline: now + timeout,
                expire_only: EXPIRING_CHECKS.contains(&check),
                also: Vec::new(),
            },
        );
        *st.routed_by_check.entry(check.to_string()).or_insert(0) += 1;
        st.recent.push_front(Recent {
            ip,
            check: check.to_string(),
            at: now,
            outcome: "pending",
        });
        st.recent.truncate(RECENT);
        drop(st);
        self.counters.routed.fetch_add(1, Ordering::Relaxed);
        self.dirty.store(true, Ordering::SeqCst);
        self.map_dirty.store(true, Ordering::SeqCst);
        Diverted::Taken
    }

    /// Until when `check` does not route `ip` again (it solved the challenge `check`
    /// routed it to), in Unix microseconds.
    pub fn allowed_until(&self, ip: IpAddr, check: &str) -> Option<i64> {
        let now = self.now();
        self.state
            .lock()
            .allows
            .get(&(ip.to_canonical(), check.to_string()))
            .copied()
            .filter(|u| *u > now)
    }

    /// Whether the connection peer `peer` is in `challenge.trusted_proxies` (its last
    /// `X-Forwarded-For` address is then the client).
    pub fn trusts(&self, peer: IpAddr) -> bool {
        self.settings
            .read()
            .cfg
            .trusted_proxies
            .iter()
            .any(|n| n.contains_ip(peer))
    }

    /// Counts (and logs, at most once a minute) a forwarded header from an untrusted peer.
    pub fn note_untrusted_forward(&self, peer: IpAddr) {
        self.counters
            .forwarded_untrusted
            .fetch_add(1, Ordering::Relaxed);
        crate::warn_limited!(
            self.logs,
            "challenge_forwarded",
            "",
            "challenge: {peer} sent X-Forwarded-For but is not in challenge.trusted_proxies; the header is ignored (list the reverse proxy there if it forwards visitors)"
        );
    }

    fn set_outcome(st: &mut State, ip: IpAddr, at: i64, outcome: &'static str) {
        if let Some(r) = st.recent.iter_mut().find(|r| r.ip == ip && r.at == at) {
            r.outcome = outcome;
        }
    }

    /// Issues a nonce for `ip`: (nonce, difficulty bits), or `None` when
    /// [`MAX_NONCES`] are outstanding. `proxy`: the trusted proxy that forwarded `ip`
    /// (`None` when `ip` is the connection's peer).
    pub fn issue(&self, ip: IpAddr, proxy: Option<IpAddr>) -> Option<(String, u8)> {
        let now = self.now();
        let bits = self.settings.read().cfg.difficulty;
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let key = client_key(ip);
        let proxy = proxy.map(client_key).filter(|p| *p != key);
        if st.make_room(false, key, MAX_NONCES_PER_CLIENT) {
            self.counters
                .nonces_replaced
                .fetch_add(1, Ordering::Relaxed);
        }
        if let Some(p) = proxy {
            if st.make_room(true, p, MAX_NONCES_PER_PROXY) {
                self.counters
                    .nonces_replaced_proxy
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        if st.nonces.len() >= MAX_NONCES {
            st.purge_nonces(now);
        }
        if st.nonces.len() >= MAX_NONCES {
            drop(guard);
            self.counters.nonces_refused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let nonce = crate::ids::random_hex(16);
        st.by_client
            .entry(key)
            .or_default()
            .push_back(nonce.clone());
        if let Some(p) = proxy {
            st.by_proxy.entry(p).or_default().push_back(nonce.clone());
        }
        st.nonces.insert(
            nonce.clone(),
            NonceRec {
                ip: ip.to_canonical(),
                expires: now + NONCE_LIFETIME_SECS * MICROS,
                bits,
                proxy,
            },
        );
        drop(guard);
        self.counters.nonces_issued.fetch_add(1, Ordering::Relaxed);
        Some((nonce, bits))
    }

    /// Checks a proof from `ip`; on success ends its route, allows it for the checks that
    /// routed it for `challenge.allow_hours` (nothing without a route) and answers the
    /// cookie value and its lifetime in seconds.
    pub fn verify(&self, ip: IpAddr, proof: &pow::Proof) -> Result<(String, i64), VerifyError> {
        let ip = ip.to_canonical();
        let now = self.now();
        let allow_secs = self.settings.read().cfg.allow_hours as i64 * 3600;
        let mut st = self.state.lock();
        let taken = st.take_nonce(&proof.nonce);
        let result = match taken {
            None => Err(VerifyError::UnknownNonce),
            Some(r) if r.ip != ip => Err(VerifyError::OtherAddress),
            Some(r) if r.expires <= now => Err(VerifyError::Expired),
            Some(r) if !pow::proof_ok(&proof.nonce, &proof.counter, r.bits) => {
                Err(VerifyError::WrongProof)
            }
            Some(_) => Ok(()),
        };
        if let Err(e) = result {
            drop(st);
            self.counters.proofs_refused.fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
        let until = now + allow_secs * MICROS;
        let mut checks = Vec::new();
        if let Some(r) = st.pending.remove(&ip) {
            Self::set_outcome(&mut st, ip, r.at, "solved");
            self.map_dirty.store(true, Ordering::SeqCst);
            checks.push(r.check);
            checks.extend(r.also);
        }
        for check in checks {
            let pair = (ip, check);
            if st.allows.len() >= MAX_ALLOWS && !st.allows.contains_key(&pair) {
                st.allows.retain(|_, u| *u > now);
                if st.allows.len() >= MAX_ALLOWS {
                    let first = st
                        .allows
                        .iter()
                        .min_by_key(|(_, u)| **u)
                        .map(|(a, _)| a.clone());
                    if let Some(first) = first {
                        st.allows.remove(&first);
                    }
                }
            }
            st.allows.insert(pair, until);
        }
        drop(st);
        self.counters.solved.fetch_add(1, Ordering::Relaxed);
        self.dirty.store(true, Ordering::SeqCst);
        let expiry = until / MICROS;
        Ok((pow::cookie_value(&self.secret, ip, expiry), allow_secs))
    }

    /// Logs a solved challenge (client-triggered: at most one line a minute, with the
    /// count held back).
    pub fn log_solved(&self, ip: IpAddr) {
        if let Some(n) = self.logs.admit("challenge_solved", "") {
            log::info!(
                "challenge: {ip} solved the challenge{}",
                crate::lograte::held_back_suffix(n)
            );
        }
    }

    /// Whether `cookie` is a valid cookie of `ip` now.
    pub fn cookie_ok(&self, ip: IpAddr, cookie: &str) -> bool {
        pow::cookie_valid(&self.secret, ip.to_canonical(), cookie, self.now() / MICROS)
    }

    /// Addresses pending now.
    pub fn pending_count(&self) -> usize {
        self.state.lock().pending.len()
    }

    /// Pending addresses, sorted.
    pub fn pending_addresses(&self) -> Vec<IpAddr> {
        self.state.lock().pending.keys().copied().collect()
    }

    /// `GET /api/v1/challenge/stats`.
    pub fn stats(&self) -> Value {
        let now = self.now();
        let st = self.state.lock();
        let recent: Vec<Value> = st
            .recent
            .iter()
            .map(|r| {
                json!({
                    "ip": r.ip.to_string(),
                    "check": r.check,
                    "at": instant(r.at),
                    "outcome": r.outcome,
                })
            })
            .collect();
        let c = &self.counters;
        json!({
            "enabled": true,
            "pending": st.pending.len(),
            "escalated": st.escalated,
            "routed_by_check": st.routed_by_check,
            "recent": recent,
            "solved": c.solved.load(Ordering::Relaxed),
            "expired": c.expired.load(Ordering::Relaxed),
            "allowed_routes": st.allows.values().filter(|u| **u > now).count(),
            "refused_full": c.refused_full.load(Ordering::Relaxed),
            "nonces_refused": c.nonces_refused.load(Ordering::Relaxed),
            "nonces_replaced": c.nonces_replaced.load(Ordering::Relaxed),
            "nonces_replaced_proxy": c.nonces_replaced_proxy.load(Ordering::Relaxed),
            "forwarded_untrusted": c.forwarded_untrusted.load(Ordering::Relaxed),
            "proofs_refused": c.proofs_refused.load(Ordering::Relaxed),
            "difficulty": self.settings.read().cfg.difficulty,
        })
    }

    /// The `/metrics` samples as (name, kind, help, value): pending and allowed addresses,
    /// and the counters.
    pub fn metrics(&self) -> [(&'static str, &'static str, &'static str, u64); 13] {
        let (pending, escalated, allowed) = {
            let now = self.now();
            let st = self.state.lock();
            (
                st.pending.len(),
                st.escalated,
                st.allows.values().filter(|u| **u > now).count(),
            )
        };
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            (
                "svc_challenge_pending",
                "gauge",
                "Addresses routed to the proof-of-work challenge now.",
                pending as u64,
            ),
            (
                "svc_challenge_allowed_routes",
                "gauge",
                "(address, check) pairs that solved the challenge the check routed them to: not routed again by that check.",
                allowed as u64,
            ),
            (
                "svc_challenge_escalated_total",
                "counter",
                "Unsolved routes escalated to blocks.",
                escalated,
            ),
            (
                "svc_challenge_routed_total",
                "counter",
                "Routes to the challenge since start.",
                load(&c.routed),
            ),
            (
                "svc_challenge_solved_total",
                "counter",
                "Valid proofs since start.",
                load(&c.solved),
            ),
            (
                "svc_challenge_expired_total",
                "counter",
                "Claimed-crawler routes that expired since start.",
                load(&c.expired),
            ),
            (
                "svc_challenge_refused_full_total",
                "counter",
                "Routes refused by challenge.max_pending (blocked instead).",
                load(&c.refused_full),
            ),
            (
                "svc_challenge_proofs_refused_total",
                "counter",
                "Proofs refused since start.",
                load(&c.proofs_refused),
            ),
            (
                "svc_challenge_nonces_refused_total",
                "counter",
                "Challenge pages refused with a full nonce table.",
                load(&c.nonces_refused),
            ),
            (
                "svc_challenge_nonces_replaced_proxy_total",
                "counter",
                "Nonces replaced by a newer one issued through the same trusted proxy.",
                load(&c.nonces_replaced_proxy),
            ),
            (
                "svc_challenge_forwarded_untrusted_total",
                "counter",
                "X-Forwarded-For headers ignored: the peer is not in challenge.trusted_proxies.",
                load(&c.forwarded_untrusted),
            ),
            (
                "svc_challenge_map_failures_total",
                "counter",
                "Failed writes of the web-server map files.",
                load(&c.map_failures),
            ),
            (
                "svc_challenge_reload_failures_total",
                "counter",
                "Reload commands that could not start.",
                load(&c.reload_failures),
            ),
        ]
    }

    /// One round of the timer: due routes escalated or expired, allows and nonces expired,
    /// the maps and the durable state written when changed.
    pub fn tick(&self) {
        let now = self.now();
        let mut escalate: Vec<(IpAddr, String)> = Vec::new();
        {
            let mut st = self.state.lock();
            let due: Vec<IpAddr> = st
                .pending
                .iter()
                .filter(|(_, r)| r.deadline <= now)
                .map(|(ip, _)| *ip)
                .collect();
            for ip in due {
                let Some(r) = st.pending.remove(&ip) else {
                    continue;
                };
                if r.expire_only {
                    Self::set_outcome(&mut st, ip, r.at, "expired");
                    self.counters.expired.fetch_add(1, Ordering::Relaxed);
                } else {
                    Self::set_outcome(&mut st, ip, r.at, "escalated");
                    st.escalated += 1;
                    escalate.push((ip, r.check));
                }
                self.dirty.store(true, Ordering::SeqCst);
                self.map_dirty.store(true, Ordering::SeqCst);
            }
            let before = st.allows.len();
            st.allows.retain(|_, u| *u > now);
            if st.allows.len() != before {
                self.dirty.store(true, Ordering::SeqCst);
            }
            st.purge_nonces(now);
        }
        if !escalate.is_empty() {
            let hook = self.escalate.read().clone();
            for (ip, check) in &escalate {
                if let Some(n) = self.logs.admit("challenge_escalated", "") {
                    log::info!(
                        "challenge: {ip} did not solve the challenge ({check}); blocking{}",
                        crate::lograte::held_back_suffix(n)
                    );
                }
                if let Some(h) = &hook {
                    h(*ip, check);
                }
            }
        }
        self.write_maps_if_due(now);
        self.persist_if_dirty();
        self.reload_if_due(now);
    }

    fn write_maps_if_due(&self, now: i64) {
        let last_at = self.last_map.lock().0;
        let stale = last_at == i64::MIN || now - last_at >= webserver::MAP_REFRESH_SECS * MICROS;
        if !self.map_dirty.swap(false, Ordering::SeqCst) && !stale {
            return;
        }
        let addrs = self.pending_addresses();
        let cfg = self.settings.read().cfg.clone();
        // The first write compares with what the web server loaded before this start.
        let changed = if last_at == i64::MIN {
            crate::fsutil::read_daemon_string(&webserver::nginx_map_path(&cfg))
                .map(|t| webserver::parse_map(&t))
                .unwrap_or_default()
                != addrs
        } else {
            self.last_map.lock().1 != addrs
        };
        match webserver::write_maps(&cfg, &addrs) {
            Ok(()) => {
                self.counters.map_writes.fetch_add(1, Ordering::Relaxed);
                if changed {
                    self.reload_due.store(true, Ordering::SeqCst);
                }
                *self.last_map.lock() = (now, addrs);
            }
            Err(e) => {
                self.counters.map_failures.fetch_add(1, Ordering::Relaxed);
                self.map_dirty.store(true, Ordering::SeqCst);
                crate::warn_limited!(
                    self.logs,
                    "challenge_map",
                    "",
                    "challenge: cannot write the map files in {}: {e}",
                    cfg.map_dir.display()
                );
            }
        }
    }

    fn persist_if_dirty(&self) {
        if !self.dirty.swap(false, Ordering::SeqCst) {
            return;
        }
        let d = {
            let st = self.state.lock();
            Durable {
                pending: st.pending.iter().map(|(a, r)| (*a, r.clone())).collect(),
                allows: Vec::new(),
                allowed_routes: st
                    .allows
                    .iter()
                    .map(|((a, c), u)| (*a, c.clone(), *u))
                    .collect(),
                escalated: st.escalated,
            }
        };
        let text = match serde_json::to_string(&d) {
            Ok(t) => t,
            Err(e) => {
                log::warn!("challenge: cannot encode the state: {e}");
                return;
            }
        };
        if let Err(e) = self
            .store
            .write(move |c| crate::store::kv::put(c, STATE_KEY, Some(&text)))
        {
            self.counters.store_failures.fetch_add(1, Ordering::Relaxed);
            self.dirty.store(true, Ordering::SeqCst);
            crate::warn_limited!(
                self.logs,
                "challenge_store",
                "",
                "challenge: cannot store the state: {e}"
            );
        }
    }

    fn reload_if_due(&self, now: i64) {
        if !self.reload_due.load(Ordering::SeqCst) {
            return;
        }
        let argv = self.settings.read().cfg.reload_command.clone();
        let Some((prog, args)) = argv.split_first() else {
            self.reload_due.store(false, Ordering::SeqCst);
            return;
        };
        let last = self.last_reload.load(Ordering::SeqCst);
        if (last != i64::MIN && now - last < RELOAD_EVERY_SECS * MICROS)
            || self.reload_running.load(Ordering::SeqCst)
        {
            return;
        }
        self.reload_due.store(false, Ordering::SeqCst);
        self.last_reload.store(now, Ordering::SeqCst);
        self.counters.reloads.fetch_add(1, Ordering::Relaxed);
        let child = std::process::Command::new(prog)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                self.counters
                    .reload_failures
                    .fetch_add(1, Ordering::Relaxed);
                crate::warn_limited!(
                    self.logs,
                    "challenge_reload",
                    "",
                    "challenge: reload command {}: {e}",
                    crate::text::escape_controls(prog)
                );
                return;
            }
        };
        self.reload_running.store(true, Ordering::SeqCst);
        let running = self.reload_running.clone();
        let started = std::time::Instant::now();
        let spawned = std::thread::Builder::new()
            .name("challenge-reload".into())
            .spawn(move || {
                let status = loop {
                    match child.try_wait() {
                        Ok(Some(s)) => break Ok(s),
                        Ok(None) if started.elapsed() >= RELOAD_DEADLINE => {
                            let _ = child.kill();
                            let _ = child.wait();
                            break Err("timed out".to_string());
                        }
                        Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                        Err(e) => break Err(e.to_string()),
                    }
                };
                match status {
                    Ok(s) if s.success() => {}
                    Ok(s) => log::warn!("challenge: reload command failed: {s}"),
                    Err(e) => log::warn!("challenge: reload command: {e}"),
                }
                running.store(false, Ordering::SeqCst);
            });
        if spawned.is_err() {
            self.reload_running.store(false, Ordering::SeqCst);
        }
    }

    /// Starts the timer thread (a tick a second).
    pub fn start(self: &Arc<Self>) -> std::io::Result<()> {
        let me = Arc::downgrade(self);
        let t = std::thread::Builder::new()
            .name("challenge-timer".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(250));
                let Some(c) = me.upgrade() else { return };
                if c.stop.load(Ordering::SeqCst) {
                    return;
                }
                c.tick();
            })?;
        *self.thread.lock() = Some(t);
        Ok(())
    }

    /// Stops the timer and writes the state.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
        self.persist_if_dirty();
    }
}

fn instant(us: i64) -> String {
    jiff::Timestamp::from_microsecond(us)
        .map(crate::timefmt::rfc3339)
        .unwrap_or_default()
}

/// The routing hook of automatic blocking (routes, and the (address, check) allows of
/// solved routes: there is no address-wide exemption, decision 280).
pub struct Diversion(pub Arc<Challenge>);

impl crate::threat::autoblock::Diversion for Diversion {
    fn divert(&self, ip: IpAddr, check: &str) -> Diverted {
        self.0.divert(ip, check)
    }
}

#[cfg(test)]
mod tests;
