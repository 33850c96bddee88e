//! Automatic blocking: findings with an attacker address and verdict scores at or above
//! `auto_response.block_score` become firewall blocks.
//!
//! ```text
//! attack events --offer--> [auto_block.waiting] --> state owner (one thread, auto_block.active)
//!     each cycle (1 s): distinct candidates (auto_block.candidates) + due retries
//!     --> exemptions, verdict --> one firewall transaction --> [auto_block.pending] on failure
//! ```
//!
//! Guarantees:
//! - Blocks go through the firewall engine as `Actor::Automatic { source: "auto" }`, so
//!   `auto_response.dry_run` (default true) only records them; nftables changes once it is
//!   false.
//! - Never blocked automatically: loopback, unspecified and this host's addresses,
//!   allow-listed addresses, `firewall.infra_ips`, addresses already blocked, and addresses
//!   an [`Exemption`] claims (verified crawlers plug in here).
//! - A [`Diversion`] (the proof-of-work challenge) may take over an address instead of a
//!   block: findings under their check name, verdict scores as `local_threat_score` or
//!   `ip_reputation` ([`score_check`]). It may also answer that the address solved the
//!   challenge this very check routed it to ([`Diverted::Solved`]): that check neither
//!   routes nor blocks it again while the allow lasts; every other check blocks as usual
//!   (a solve is no exemption). `Trigger::Challenge` (an escalated route) and
//!   `Trigger::Evidence` are never diverted.
//! - Triggers: a finding of a check that reports an attacker address blocks at once; any
//!   other scored event makes the address a candidate whose verdict score is compared with
//!   `auto_response.block_score` (default 80; an automatic cycle is a scan: at most
//!   `reputation.ipfeed_max_per_scan` uncached reputation lookups); an event from an
//!   address with permanent evidence that is no longer blocked blocks it again ("flagged
//!   again when next seen").
//! - At most `auto_response.max_blocks_per_hour` (default 500) blocks per sliding hour;
//!   the rest wait as retry records.
//! - Row `auto_block.pending` holds durable retry records (store `auto_block_pending`, at
//!   most 1,000, two-hour lifetime): blocks held back by the hourly cap, refused by
//!   `firewall.max_blocks`, or failed in the store. Expired records and records pushed out
//!   by overflow are losses. Candidates are never added to pending.
//! - A block sets expiring evidence on the address's record (it expires with the block).

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use super::db::{AttackDb, Evidence};
use super::digest::Digest;
use super::undo::Undo;
use super::verdict::{Aggregator, ScanBudget};
use crate::clock::SharedClock;
use crate::firewall::{Actor, BlockItem, Firewall, FirewallError, Net, Outcome, Refusal};
use crate::queue::{BoundedQueue, LagBasis, PopError, QueueHealth, Registry, RowConfig, RowHandle};
use crate::store::threat::{delete_pending, load_pending, upsert_pending, PendingRow};
use crate::store::Store;

pub const WAITING_ROW: &str = "auto_block.waiting";
pub const ACTIVE_ROW: &str = "auto_block.active";
pub const PENDING_ROW: &str = "auto_block.pending";
pub const CANDIDATES_ROW: &str = "auto_block.candidates";
/// Candidates waiting for the state owner at most.
pub const WAITING_CAPACITY: usize = 10_000;
/// Durable retry records at most.
pub const PENDING_CAPACITY: usize = 1_000;
/// Lifetime of a retry record.
pub const PENDING_LIFETIME_US: i64 = 2 * 3600 * 1_000_000;
const HOUR_US: i64 = 3600 * 1_000_000;
/// The firewall source name of automatic blocks.
pub const SOURCE: &str = "auto";

/// A check that an address must never be blocked automatically (a verified crawler, ...).
pub trait Exemption: Send + Sync {
    /// Why `ip` is exempt, or `None`.
    fn exempt(&self, ip: IpAddr) -> Option<String>;
}

/// What a [`Diversion`] did with an address about to be blocked for a check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Diverted {
    /// Nothing: block as usual.
    No,
    /// Taken over (routed to the challenge, or already pending there).
    Taken,
    /// The address solved the challenge this same check routed it to (the text says until
    /// when): not routed again, and not blocked for this check. Other checks are not
    /// affected.
    Solved(String),
}

/// Routes an address about to be blocked to another response (the proof-of-work
/// challenge of `challenge`, which implements it) instead of a block.
pub trait Diversion: Send + Sync {
    /// What became of `ip`, about to be blocked for `check` (a check name, or
    /// `ip_reputation` / `local_threat_score` for verdict scores).
    fn divert(&self, ip: IpAddr, check: &str) -> Diverted;
}

/// An automatic block that took effect in the firewall (not a dry run): confirmed abuse,
/// offered to every [`BlockSink`] (abuse reporting).
#[derive(Clone, Debug)]
pub struct Confirmed {
    pub ip: IpAddr,
    /// Why it was a candidate; `None` for a retry record (its trigger is not kept).
    pub trigger: Option<Trigger>,
    /// The block's reason (`auto: ssh_bruteforce (score 57)`).
    pub reason: String,
    /// Events per attack kind on the address's record (index of `AttackKind::ALL`).
    pub counts: [u64; 7],
    /// Microseconds since the epoch.
    pub at: i64,
    /// When the block ends (microseconds since the epoch); `None`: permanent.
    pub expires: Option<i64>,
}

/// Takes confirmed blocks; called on the state owner's thread, so it must never wait.
pub trait BlockSink: Send + Sync {
    fn confirmed(&self, c: &Confirmed);
}

/// Why an address is a candidate.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Trigger {
    /// A scored event: block when the verdict score reaches `block_score`.
    Score,
    /// An event from an address with permanent evidence.
    Evidence,
    /// A finding of a check that reports an attacker address.
    Finding(String),
    /// The challenge escalates an address routed for this check: block, never divert.
    Challenge(String),
}

pub(crate) struct Candidate {
    ip: IpAddr,
    trigger: Trigger,
}

/// Settings applied live.
#[derive(Clone, Debug)]
pub struct Settings {
    pub enabled: bool,
    pub block_score: u8,
    pub max_per_hour: u32,
    pub block_hours: u64,
    pub max_per_scan: u32,
}

#[derive(Clone, Debug)]
struct PendingRec {
    reason: String,
    created: i64,
    expires: i64,
    attempts: i64,
    next_at: i64,
    last_error: String,
}

/// Counters (atomics).
#[derive(Default, Debug)]
pub struct Counters {
    pub blocked: AtomicU64,
    pub dry_run: AtomicU64,
    pub exempt: AtomicU64,
    pub below_score: AtomicU64,
    pub rate_limited: AtomicU64,
    pub refused: AtomicU64,
    pub cycles: AtomicU64,
}

pub struct AutoBlock {
    clock: SharedClock,
    store: Store,
    firewall: Arc<Firewall>,
    agg: Arc<Aggregator>,
    db: Arc<AttackDb>,
    undo: Arc<Undo>,
    digest: Arc<Digest>,
    exemptions: Arc<RwLock<Vec<Arc<dyn Exemption>>>>,
    diversion: RwLock<Option<Arc<dyn Diversion>>>,
    sinks: RwLock<Vec<Arc<dyn BlockSink>>>,
    settings: RwLock<Settings>,
    queue: BoundedQueue<Candidate>,
    _waiting_row: RowHandle,
    active: RowHandle,
    pending_row: RowHandle,
    candidates_row: RowHandle,
    pending: Mutex<BTreeMap<IpAddr, PendingRec>>,
    recent: Mutex<VecDeque<i64>>,
    pub counters: Counters,
    stop: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// What the daemon wires in.
pub struct Deps {
    pub clock: SharedClock,
    pub store: Store,
    pub firewall: Arc<Firewall>,
    pub agg: Arc<Aggregator>,
    pub db: Arc<AttackDb>,
    pub undo: Arc<Undo>,
    pub digest: Arc<Digest>,
    pub exemptions: Arc<RwLock<Vec<Arc<dyn Exemption>>>>,
}

fn never(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    ip.is_loopback() || ip.is_unspecified() || ip.is_multicast()
}

impl AutoBlock {
    pub fn new(
        d: Deps,
        settings: Settings,
        registry: &Arc<Registry>,
    ) -> Result<Arc<AutoBlock>, crate::queue::RowError> {
        let queue = BoundedQueue::new(
            d.clock.clone(),
            RowConfig::new("addresses")
                .capacity(WAITING_CAPACITY as u64)
                .running_slots(1),
        )
        .map_err(crate::queue::RowError::at(WAITING_ROW))?;
        let reg = |name: &str, h: Arc<QueueHealth>| {
            registry
                .register(name, h)
                .map_err(crate::queue::RowError::at(name))
        };
        let waiting_row = reg(WAITING_ROW, queue.health().clone())?;
        let active = reg(
            ACTIVE_ROW,
            QueueHealth::new(
                d.clock.clone(),
                RowConfig::new("operations").capacity(1).running_slots(1),
            ),
        )?;
        let pending_row = reg(
            PENDING_ROW,
            QueueHealth::new(d.clock.clone(), {
                // Retry records wait by design (the hourly cap, back-off): their age is
                // shown; only a record kept past its lifetime would be lag, and none is.
                let mut c = RowConfig::new("records")
                    .capacity(PENDING_CAPACITY as u64)
                    .lag_basis(LagBasis::ObservedAge);
                c.lag_budget = Duration::from_micros(PENDING_LIFETIME_US as u64);
                c
            }),
        )?;
        let candidates_row = reg(
            CANDIDATES_ROW,
            QueueHealth::new(d.clock.clone(), RowConfig::new("addresses")),
        )?;
        let now = d.clock.now().as_microsecond();
        let stored = d.store.read(load_pending).unwrap_or_else(|e| {
            log::warn!("auto-block: cannot read retry records: {e}");
            pending_row.health().state_io_error();
            Vec::new()
        });
        let mut pending = BTreeMap::new();
        let mut expired = Vec::new();
        for r in stored {
            let Ok(ip) = r.ip.parse::<IpAddr>() else {
                expired.push(r.ip);
                continue;
            };
            if r.expires <= now {
                expired.push(r.ip);
                pending_row.health().record_loss();
                continue;
            }
            pending.insert(
                ip,
                PendingRec {
                    reason: r.reason,
                    created: r.created,
                    expires: r.expires,
                    attempts: r.attempts,
                    next_at: r.next_at,
                    last_error: r.last_error,
                },
            );
        }
        if !expired.is_empty() {
            let _ = d.store.write_detached(move |c| delete_pending(c, &expired));
        }
        pending_row.health().set_waiting(pending.len() as u64);
        Ok(Arc::new(AutoBlock {
            clock: d.clock,
            store: d.store,
            firewall: d.firewall,
            agg: d.agg,
            db: d.db,
            undo: d.undo,
            digest: d.digest,
            exemptions: d.exemptions,
            diversion: RwLock::new(None),
            sinks: RwLock::new(Vec::new()),
            settings: RwLock::new(settings),
            queue,
            _waiting_row: waiting_row,
            active,
            pending_row,
            candidates_row,
            pending: Mutex::new(pending),
            recent: Mutex::new(VecDeque::new()),
            counters: Counters::default(),
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
        }))
    }

    pub fn set_settings(&self, s: Settings) {
        *self.settings.write() = s;
    }

    pub fn settings(&self) -> Settings {
        self.settings.read().clone()
    }

    /// Sets the routing hook (the proof-of-work challenge).
    pub fn set_diversion(&self, d: Arc<dyn Diversion>) {
        *self.diversion.write() = Some(d);
    }

    /// Offers a candidate (never waits; a full queue counts a loss on `auto_block.waiting`).
    pub fn offer(&self, ip: IpAddr, trigger: Trigger) {
        if !self.settings.read().enabled || never(ip) {
            return;
        }
        let _ = self.queue.try_push(Candidate {
            ip: ip.to_canonical(),
            trigger,
        });
    }

    /// Starts the state owner's thread (a cycle a second).
    pub fn start(self: &Arc<Self>) -> Result<(), std::io::Error> {
        let me = Arc::downgrade(self);
        let t = std::thread::Builder::new()
            .name("threat-autoblock".into())
            .spawn(move || loop {
                let Some(a) = me.upgrade() else { return };
                if a.stop.load(Ordering::SeqCst) {
                    return;
                }
                let first = match a.queue.pop_timeout(Duration::from_secs(1)) {
                    Ok(g) => Some(g.finish()),
                    Err(PopError::Timeout) => None,
                    Err(PopError::Closed) => return,
                };
                a.cycle(first);
            })?;
        *self.thread.lock() = Some(t);
        Ok(())
    }

    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.queue.close();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }

    /// Adds a taker of confirmed blocks (abuse reporting).
    pub fn add_sink(&self, s: Arc<dyn BlockSink>) {
        self.sinks.write().push(s);
    }

    fn confirm(
        &self,
        ip: IpAddr,
        trigger: Option<&Trigger>,
        reason: &str,
        now: i64,
        expires_at: Option<jiff::Timestamp>,
    ) {
        let sinks = self.sinks.read();
        if sinks.is_empty() {
            return;
        }
        let counts = self.db.view(ip, now).map_or([0; 7], |v| v.counts);
        let c = Confirmed {
            ip,
            trigger: trigger.cloned(),
            reason: reason.to_string(),
            counts,
            at: now,
            expires: expires_at.map(|t| t.as_microsecond()),
        };
        sinks.iter().for_each(|s| s.confirmed(&c));
    }

    fn exemption(&self, ip: IpAddr) -> Option<String> {
        self.exemptions.read().iter().find_map(|e| e.exempt(ip))
    }

    /// One cycle: the candidates waiting (plus `first`) and the retry records due.
    pub(crate) fn cycle(&self, first: Option<Candidate>) {
        let running = self.active.health().start_running();
        self.counters.cycles.fetch_add(1, Ordering::Relaxed);
        let settings = self.settings();
        let now = self.clock.now().as_microsecond();
        let mut batch: BTreeMap<IpAddr, Trigger> = BTreeMap::new();
        let mut add = |c: Candidate| {
            let e = batch.entry(c.ip).or_insert(Trigger::Score);
            if c.trigger > *e {
                *e = c.trigger;
            }
        };
        if let Some(c) = first {
            add(c);
        }
        for _ in 0..WAITING_CAPACITY {
            match self.queue.try_pop() {
                Some(g) => add(g.finish()),
                None => break,
            }
        }
        self.candidates_row.health().set_waiting(batch.len() as u64);
        let retries: Vec<(IpAddr, String)> = {
            let p = self.pending.lock();
            p.iter()
                .filter(|(ip, r)| r.next_at <= now && !batch.contains_key(*ip))
                .map(|(ip, r)| (*ip, r.reason.clone()))
                .collect()
        };
        let budget = ScanBudget::new(settings.max_per_scan);
        let duration = Duration::from_secs(settings.block_hours * 3600);
        let mut items: Vec<BlockItem> = Vec::new();
        let mut held: Vec<(IpAddr, String)> = Vec::new();
        let mut done: Vec<IpAddr> = Vec::new();
        {
            let mut recent = self.recent.lock();
            while recent.front().is_some_and(|t| *t <= now - HOUR_US) {
                recent.pop_front();
            }
            let mut consider = |ip: IpAddr, reason: String, items: &mut Vec<BlockItem>| {
                if recent.len() >= settings.max_per_hour as usize {
                    self.counters.rate_limited.fetch_add(1, Ordering::Relaxed);
                    held.push((ip, reason));
                    return;
                }
                recent.push_back(now);
                items.push(BlockItem {
                    net: Net::host(ip),
                    reason,
                    duration: Some(duration),
                });
            };
            for (ip, trigger) in &batch {
                let ip = *ip;
                let c = self.firewall.check(ip);
                if c.allow.is_some() || c.infra.is_some() || c.block.is_some() {
                    done.push(ip);
                    continue;
                }
                if let Some(why) = self.exemption(ip) {
                    log::debug!("auto-block: {ip} exempt: {why}");
                    self.counters.exempt.fetch_add(1, Ordering::Relaxed);
                    done.push(ip);
                    continue;
                }
                let diversion = self.diversion.read().clone();
                // True when the diversion took the address (routed, or solved for `check`).
                let divert = |check: &str| {
                    let d = diversion
                        .as_ref()
                        .map_or(Diverted::No, |d| d.divert(ip, check));
                    if let Diverted::Solved(why) = &d {
                        log::debug!("auto-block: {ip} not blocked for {check}: {why}");
                        self.counters.exempt.fetch_add(1, Ordering::Relaxed);
                    }
                    d != Diverted::No
                };
                let reason = match trigger {
                    Trigger::Finding(check) if divert(check) => {
                        done.push(ip);
                        continue;
                    }
                    Trigger::Challenge(check) => format!("auto: {check}, challenge not solved"),
                    Trigger::Finding(check) => {
                        let score = self
                            .db
                            .score_of(ip, now)
                            .map_or(0, |(s, _, _)| super::score::shown(s));
                        format!("auto: {check} (score {score})")
                    }
                    Trigger::Evidence => "auto: permanent evidence, seen again".to_string(),
                    Trigger::Score => {
                        let v = self.agg.verdict(ip, Some(budget.clone()));
                        if v.blocked || v.score < settings.block_score {
                            self.counters.below_score.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        if divert(score_check(&v)) {
                            done.push(ip);
                            continue;
                        }
                        format!("auto: {} verdict score {}", v.verdict, v.score)
                    }
                };
                consider(ip, reason, &mut items);
            }
            for (ip, reason) in retries {
                let c = self.firewall.check(ip);
                if c.allow.is_some() || c.infra.is_some() || c.block.is_some() {
                    done.push(ip);
                    continue;
                }
                consider(ip, reason, &mut items);
            }
        }
        let mut failed: Vec<(IpAddr, String, String)> = Vec::new();
        if !items.is_empty() {
            let reasons: Vec<(IpAddr, String)> = items
                .iter()
                .map(|i| (i.net.addr(), i.reason.clone()))
                .collect();
            let actor = Actor::Automatic {
                source: SOURCE.into(),
            };
            match self.firewall.block(items, &actor) {
                Ok(outcomes) => {
                    for (o, (ip, reason)) in outcomes.into_iter().zip(reasons) {
                        match o {
                            Outcome::Blocked { expires_at, .. } => {
                                self.counters.blocked.fetch_add(1, Ordering::Relaxed);
                                self.undo.decision(&[ip]);
                                let until = expires_at.map_or(i64::MAX, |t| t.as_second());
                                self.db.set_evidence(ip, Evidence::Expiring(until), now);
                                self.digest.note(ip, &reason, SOURCE, expires_at, false);
                                self.confirm(ip, batch.get(&ip), &reason, now, expires_at);
                                done.push(ip);
                            }
                            Outcome::DryRun { expires_at, .. } => {
                                self.counters.dry_run.fetch_add(1, Ordering::Relaxed);
                                self.digest.note(ip, &reason, SOURCE, expires_at, true);
                                done.push(ip);
                            }
                            Outcome::Unchanged { .. } => done.push(ip),
                            Outcome::Refused {
                                refusal: Refusal::Limit(max),
                                ..
                            } => failed.push((
                                ip,
                                reason,
                                format!("firewall.max_blocks ({max}) reached"),
                            )),
                            Outcome::Refused { .. } => {
                                self.counters.refused.fetch_add(1, Ordering::Relaxed);
                                done.push(ip);
                            }
                        }
                    }
                }
                // The store kept the change; the engine's timer applies it.
                Err(FirewallError::Kernel(_)) => {
                    for (ip, _) in reasons {
                        done.push(ip);
                    }
                }
                Err(e) => {
                    let msg = e.to_string();
                    for (ip, reason) in reasons {
                        failed.push((ip, reason, msg.clone()));
                    }
                }
            }
        }
        held.into_iter().for_each(|(ip, r)| {
            failed.push((ip, r, "auto_response.max_blocks_per_hour reached".into()))
        });
        self.settle(now, done, failed);
        self.candidates_row.health().set_waiting(0);
        self.candidates_row.health().note_progress();
        running.finish();
    }

    /// Updates the retry records: done ones removed, failed ones added or retried later,
    /// expired and overflowed ones dropped (losses). Writes the changes to the store.
    fn settle(&self, now: i64, done: Vec<IpAddr>, failed: Vec<(IpAddr, String, String)>) {
        let mut deletes: Vec<String> = Vec::new();
        let mut upserts: Vec<PendingRow> = Vec::new();
        let h = self.pending_row.health();
        let mut p = self.pending.lock();
        for ip in done {
            if p.remove(&ip).is_some() {
                deletes.push(ip.to_string());
            }
        }
        let any_retry = failed.iter().any(|(ip, _, _)| p.contains_key(ip));
        let touched: Vec<IpAddr> = failed.iter().map(|(ip, _, _)| *ip).collect();
        for (ip, reason, err) in failed {
            let r = p.entry(ip).or_insert_with(|| PendingRec {
                reason,
                created: now,
                expires: now + PENDING_LIFETIME_US,
                attempts: 0,
                next_at: now,
                last_error: String::new(),
            });
            r.attempts += 1;
            r.next_at = now + (30_000_000i64 << (r.attempts.clamp(1, 6) - 1)).min(15 * 60_000_000);
            r.last_error = err;
        }
        if any_retry {
            h.note_retry_failed();
        }
        let expired: Vec<IpAddr> = p
            .iter()
            .filter(|(_, r)| r.expires <= now)
            .map(|(ip, _)| *ip)
            .collect();
        for ip in expired {
            p.remove(&ip);
            deletes.push(ip.to_string());
            h.record_loss();
        }
        while p.len() > PENDING_CAPACITY {
            let oldest = p.iter().min_by_key(|(_, r)| r.created).map(|(ip, _)| *ip);
            let Some(ip) = oldest else { break };
            p.remove(&ip);
            deletes.push(ip.to_string());
            h.record_loss();
        }
        for ip in touched {
            if let Some(r) = p.get(&ip) {
                upserts.push(PendingRow {
                    ip: ip.to_string(),
                    reason: r.reason.clone(),
                    created: r.created,
                    expires: r.expires,
                    attempts: r.attempts,
                    next_at: r.next_at,
                    last_error: r.last_error.clone(),
                });
            }
        }
        h.set_waiting(p.len() as u64);
        let oldest = p.values().map(|r| r.created).min();
        drop(p);
        if oldest.is_none() {
            h.set_oldest_waiting(None);
        }
        if deletes.is_empty() && upserts.is_empty() {
            return;
        }
        match self.store.write(move |c| {
            delete_pending(c, &deletes)?;
            upsert_pending(c, &upserts)
        }) {
            Ok(()) => h.state_io_ok(),
            Err(e) => {
                log::warn!("auto-block: cannot store retry records: {e}");
                h.state_io_error();
            }
        }
    }

    /// Retry records now, oldest first: (address, reason, attempts, last error).
    pub fn pending(&self) -> Vec<(IpAddr, String, i64, String)> {
        let p = self.pending.lock();
        let mut v: Vec<(i64, IpAddr, String, i64, String)> = p
            .iter()
            .map(|(ip, r)| {
                (
                    r.created,
                    *ip,
                    r.reason.clone(),
                    r.attempts,
                    r.last_error.clone(),
                )
            })
            .collect();
        v.sort();
        v.into_iter().map(|(_, a, b, c, d)| (a, b, c, d)).collect()
    }

    /// Blocks made in the last hour (the cap's window).
    pub fn blocks_last_hour(&self) -> usize {
        let now = self.clock.now().as_microsecond();
        self.recent
            .lock()
            .iter()
            .filter(|t| **t > now - HOUR_US)
            .count()
    }

    /// Whether the firewall only records (auto_response.dry_run).
    pub fn dry_run(&self) -> bool {
        self.firewall.dry_run()
    }
}

/// The signal a verdict score stands for: `local_threat_score` when the strongest
/// answered source is local (the attack database, GeoIP), else `ip_reputation`.
pub fn score_check(v: &super::verdict::Verdict) -> &'static str {
    let top = v
        .lines
        .iter()
        .filter(|l| l.answer.status == super::verdict::Status::Ok)
        .filter_map(|l| l.answer.score.map(|s| (l.weight * f64::from(s), l.name)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match top {
        Some((_, "local_db" | "geoip")) | None => "local_threat_score",
        Some(_) => "ip_reputation",
    }
}
