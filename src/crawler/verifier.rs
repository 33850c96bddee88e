//! The verifier: answers [`BotOracle::check`] from memory and runs forward-confirmed reverse
//! DNS asynchronously on the `bot_verification.requests` queue (256 waiting, 1 running).
//!
//! Order of a check: cached result (verified, negative) -> address ranges (operator
//! `ip_ranges`, or the published snapshot; a match verifies, a miss is a confirmed negative
//! unless the identity also has reverse-DNS suffixes, which are then the fallback) ->
//! reverse DNS: the PTR must be under one of the identity's suffixes, and that name's A or
//! AAAA records must contain the address.
//!
//! Guarantees (spec "Verified crawlers", rules 4-7):
//! - `check` never blocks on the network; it admits at most one job per address and
//!   identity. A new job gets a pending window of [`PENDING_WINDOW_SECS`] from admission
//!   (queue time included); afterwards, and when the queue is full, the worker stopped or
//!   admission refused, the claim is `Unverified`.
//! - DNS failures, a missing PTR and failed store writes prove nothing: the claim is
//!   `Unresolved`, the next lookup waits ([`FAILURE_RETRY_SECS`], or one hour after a missing
//!   PTR), and no fresh pending window is granted while the attempt is in history.
//! - A missing PTR is stored (`bot_verify`, kind `no_ptr`) with lookups suppressed for one
//!   fixed hour from the attempt (checks do not extend it), kept as history for a day, also
//!   across restarts. Expired rows are removed at most once an hour (also after a failed
//!   cleanup). A definitive result replaces the history row.
//! - Attempt history holds at most [`HISTORY_MAX`] entries (pending, running and completed
//!   attempts). When full, a new address may replace the oldest completed attempt whose
//!   cooldown has passed; when none can be replaced, admission is refused (counted) and no
//!   lookup runs untracked.
//! - A confirmed negative answers `Spoofed` (eligible for spoof detection); a cached positive
//!   answers `Verified` and exempts the address from automatic blocks ([`Exemption`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use super::guards::under;
use super::identity::{Identities, Identity};
use super::ranges::RangeSet;
use super::{BotCheck, BotOracle, VerifierSettings};
use crate::clock::SharedClock;
use crate::dns::{Lookup, Resolver};
use crate::queue::{BoundedQueue, PopError, Registry, RowConfig, RowHandle};
use crate::store::crawler::{self as rows, Row};
use crate::store::Store;
use crate::threat::Exemption;

/// Queue row name.
pub const ROW: &str = "bot_verification.requests";
/// Jobs waiting at most.
pub const QUEUE_CAPACITY: usize = 256;
/// Pending window of a new job, from admission (queue time included).
pub const PENDING_WINDOW_SECS: i64 = 10;
/// DNS time of one job (PTR and forward confirmation together).
pub const DNS_BUDGET: Duration = Duration::from_secs(4);
/// Lookups suppressed after a missing PTR.
pub const NO_PTR_SUPPRESS_SECS: i64 = 3600;
/// Retry delay after a DNS failure or a failed store write.
pub const FAILURE_RETRY_SECS: i64 = 300;
/// How long an attempt stays in history.
pub const HISTORY_KEEP_SECS: i64 = 86_400;
/// How long a verified or negative result is cached.
pub const RESULT_TTL_SECS: i64 = 86_400;
/// Attempt history entries at most.
pub const HISTORY_MAX: usize = 16_384;
/// Cached results at most (the oldest-expiring is dropped first).
pub const RESULTS_MAX: usize = 65_536;
/// Cleanup of expired records at most this often.
pub const CLEANUP_EVERY_SECS: i64 = 3600;
/// PTR names forward-checked per job at most.
const MAX_PTR_NAMES: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
    NoPtr,
    Failed,
}

#[derive(Clone, Copy, Debug)]
enum Entry {
    /// A first job is queued or running; pending treatment until `window_end`.
    Pending { window_end: i64 },
    /// A completed attempt that proved nothing; `in_flight` while its retry runs.
    Attempt {
        kind: Attempt,
        at: i64,
        retry_at: i64,
        expires: i64,
        in_flight: bool,
    },
    /// A definitive result.
    Result { positive: bool, expires: i64 },
}

impl Entry {
    fn is_history(&self) -> bool {
        !matches!(self, Entry::Result { .. })
    }
}

#[derive(Default)]
struct State {
    by_ip: HashMap<IpAddr, Vec<(Arc<str>, Entry)>>,
    history: usize,
    results: usize,
    /// Bumped by a reset: results of jobs admitted before it are discarded.
    generation: u64,
    /// Last cleanup attempt (Unix seconds), store and memory.
    last_cleanup: Option<i64>,
}

impl State {
    fn get(&self, ip: IpAddr, name: &str) -> Option<Entry> {
        self.by_ip
            .get(&ip)
            .and_then(|v| v.iter().find(|(n, _)| &**n == name).map(|(_, e)| *e))
    }

    fn remove(&mut self, ip: IpAddr, name: &str) -> Option<Entry> {
        let v = self.by_ip.get_mut(&ip)?;
        let pos = v.iter().position(|(n, _)| &**n == name)?;
        let (_, e) = v.swap_remove(pos);
        if v.is_empty() {
            self.by_ip.remove(&ip);
        }
        if e.is_history() {
            self.history -= 1;
        } else {
            self.results -= 1;
        }
        Some(e)
    }

    fn insert(&mut self, ip: IpAddr, name: Arc<str>, e: Entry) {
        self.remove(ip, &name);
        if e.is_history() {
            self.history += 1;
        } else {
            self.results += 1;
        }
        self.by_ip.entry(ip).or_default().push((name, e));
    }

    /// The oldest completed attempt whose cooldown has passed.
    fn replaceable(&self, now: i64) -> Option<(IpAddr, Arc<str>)> {
        let mut best: Option<(i64, IpAddr, &Arc<str>)> = None;
        for (ip, v) in &self.by_ip {
            for (n, e) in v {
                if let Entry::Attempt {
                    at,
                    retry_at,
                    in_flight: false,
                    ..
                } = e
                {
                    if now >= *retry_at && best.is_none_or(|(b, _, _)| *at < b) {
                        best = Some((*at, *ip, n));
                    }
                }
            }
        }
        best.map(|(_, ip, n)| (ip, n.clone()))
    }

    /// Drops the result that lapses first (the results cap).
    fn evict_one_result(&mut self) {
        let mut best: Option<(i64, IpAddr, Arc<str>)> = None;
        for (ip, v) in &self.by_ip {
            for (n, e) in v {
                if let Entry::Result { expires, .. } = e {
                    if best.as_ref().is_none_or(|(b, _, _)| expires < b) {
                        best = Some((*expires, *ip, n.clone()));
                    }
                }
            }
        }
        if let Some((_, ip, n)) = best {
            self.remove(ip, &n);
        }
    }

    /// Removes lapsed results and attempts whose day has passed.
    fn purge(&mut self, now: i64) {
        let mut gone = Vec::new();
        for (ip, v) in &self.by_ip {
            for (n, e) in v {
                let dead = match e {
                    Entry::Result { expires, .. } => *expires <= now,
                    Entry::Attempt {
                        expires, in_flight, ..
                    } => !in_flight && *expires <= now,
                    Entry::Pending { .. } => false,
                };
                if dead {
                    gone.push((*ip, n.clone()));
                }
            }
        }
        for (ip, n) in gone {
            self.remove(ip, &n);
        }
    }
}

struct Job {
    ip: IpAddr,
    name: Arc<str>,
    generation: u64,
    /// A history entry this job's admission replaced (its row is deleted with the write).
    evict: Option<(IpAddr, Arc<str>)>,
}

/// The configuration in force.
struct Live {
    settings: VerifierSettings,
    ids: Identities,
    resolver: Arc<Resolver>,
}

impl Live {
    fn new(settings: VerifierSettings) -> Live {
        Live {
            ids: Identities::new(&settings.operator),
            resolver: Arc::new(Resolver::from_config(settings.dns_server)),
            settings,
        }
    }
}

/// Counters (since start) for status and metrics.
#[derive(Debug, Default)]
pub struct Counters {
    pub verified: AtomicU64,
    pub negative: AtomicU64,
    pub no_ptr: AtomicU64,
    pub dns_failures: AtomicU64,
    pub store_failures: AtomicU64,
    /// Admissions refused because the history was full of unreplaceable entries.
    pub history_refused: AtomicU64,
    /// Admissions refused because the queue was full or closed.
    pub queue_refused: AtomicU64,
    pub history_replaced: AtomicU64,
    pub cleanups: AtomicU64,
}

/// Refresh state of the published ranges (the `svc_botranges_*` metrics).
#[derive(Debug, Default)]
pub struct RangeStatus {
    /// 1 when the last refresh fetched every feed, 0 when one failed, -1 before any.
    pub last_ok: AtomicI64,
    pub failures: AtomicU64,
    /// Unix seconds of the last refresh that fetched every feed (0: never).
    pub last_success: AtomicI64,
}

/// The crawler verifier.
pub struct Verifier {
    clock: SharedClock,
    store: Store,
    live: RwLock<Arc<Live>>,
    ranges: RwLock<Arc<RangeSet>>,
    state: Mutex<State>,
    queue: Arc<BoundedQueue<Job>>,
    registry: Arc<Registry>,
    /// The queue row, registered while verification is on (rows of inactive features do not
    /// exist).
    row: Mutex<Option<RowHandle>>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
    stopped: AtomicBool,
    pub counters: Counters,
    pub range_status: RangeStatus,
}

/// Why the verifier did not start.
#[derive(Debug)]
pub enum StartError {
    /// The verifier's queue row could not be built or registered.
    Queue(crate::queue::RowError),
    /// Its thread could not be started.
    Thread(std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Queue(e) => write!(f, "{e}"),
            StartError::Thread(e) => write!(f, "cannot start the crawler verifier: {e}"),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Queue(e) => Some(e),
            StartError::Thread(e) => Some(e),
        }
    }
}

fn secs(clock: &SharedClock) -> i64 {
    clock.now().as_second()
}

impl Verifier {
    /// Loads stored records, registers the queue row and starts the worker.
    pub fn start(
        settings: VerifierSettings,
        ranges: RangeSet,
        clock: SharedClock,
        store: Store,
        registry: &Arc<Registry>,
    ) -> Result<Arc<Verifier>, StartError> {
        let queue = Arc::new(
            BoundedQueue::new(
                clock.clone(),
                RowConfig::new("requests")
                    .capacity(QUEUE_CAPACITY as u64)
                    .running_slots(1),
            )
            .map_err(crate::queue::RowError::at(ROW))
            .map_err(StartError::Queue)?,
        );
        let row = if settings.enabled {
            Some(
                registry
                    .register(ROW, queue.health().clone())
                    .map_err(crate::queue::RowError::at(ROW))
                    .map_err(StartError::Queue)?,
            )
        } else {
            None
        };
        let v = Arc::new(Verifier {
            clock,
            store,
            live: RwLock::new(Arc::new(Live::new(settings))),
            ranges: RwLock::new(Arc::new(ranges)),
            state: Mutex::new(State::default()),
            queue,
            registry: registry.clone(),
            row: Mutex::new(row),
            worker: Mutex::new(None),
            stopped: AtomicBool::new(false),
            counters: Counters::default(),
            range_status: RangeStatus {
                last_ok: AtomicI64::new(-1),
                ..RangeStatus::default()
            },
        });
        v.load_stored();
        let weak = Arc::downgrade(&v);
        let queue = v.queue.clone();
        let handle = std::thread::Builder::new()
            .name("crawler-verify".into())
            .spawn(move || loop {
                match queue.pop_timeout(Duration::from_millis(500)) {
                    Ok(g) => {
                        let Some(v) = weak.upgrade() else { return };
                        if v.stopped.load(Ordering::Relaxed) {
                            let _ = g.cancel();
                            continue;
                        }
                        let (job, _, running) = g.into_parts();
                        let done =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| v.run(&job)));
                        match done {
                            Ok(()) => running.finish(),
                            Err(_) => {
                                v.abandon(&job);
                                running.lose();
                            }
                        }
                    }
                    Err(PopError::Timeout) => {}
                    Err(PopError::Closed) => return,
                }
            })
            .map_err(StartError::Thread)?;
        *v.worker.lock() = Some(handle);
        Ok(v)
    }

    fn load_stored(&self) {
        let now = secs(&self.clock);
        let loaded = self.store.read(|c| {
            let rows = rows::load(c, now)?;
            let last = rows::last_cleanup(c);
            Ok((rows, last))
        });
        let Ok((mut list, last)) = loaded else {
            self.counters.store_failures.fetch_add(1, Ordering::Relaxed);
            return;
        };
        // Newest first, so the caps keep the most recent records.
        list.sort_by_key(|r| std::cmp::Reverse(r.at));
        let mut st = self.state.lock();
        st.last_cleanup = last;
        for r in list {
            let Ok(ip) = r.ip.parse::<IpAddr>() else {
                continue;
            };
            let name: Arc<str> = Arc::from(r.name.as_str());
            let e = match r.kind.as_str() {
                "verified" | "negative" if st.results < RESULTS_MAX => Entry::Result {
                    positive: r.kind == "verified",
                    expires: r.expires,
                },
                k @ ("no_ptr" | "failed") if st.history < HISTORY_MAX => Entry::Attempt {
                    kind: if k == "no_ptr" {
                        Attempt::NoPtr
                    } else {
                        Attempt::Failed
                    },
                    at: r.at,
                    retry_at: r.retry_at,
                    expires: r.expires,
                    in_flight: false,
                },
                _ => continue,
            };
            st.insert(ip, name, e);
        }
    }

    /// Applies a new configuration. A change of `verified_bots` clears every record and
    /// cached result (spec rule 3).
    pub fn reconfigure(&self, settings: VerifierSettings) {
        let reset = self.live.read().settings.operator != settings.operator;
        {
            let mut row = self.row.lock();
            if !settings.enabled {
                *row = None;
            } else if row.is_none() {
                match self.registry.register(ROW, self.queue.health().clone()) {
                    Ok(h) => *row = Some(h),
                    Err(e) => log::warn!("{ROW}: {e}"),
                }
            }
        }
        *self.live.write() = Arc::new(Live::new(settings));
        if reset {
            let _ = self.reset();
        }
    }

    /// Clears every record and cached result, in memory and in the store. Jobs already
    /// queued finish without recording anything.
    pub fn reset(&self) -> Result<usize, crate::store::StoreError> {
        {
            let mut st = self.state.lock();
            let generation = st.generation + 1;
            *st = State {
                generation,
                ..State::default()
            };
        }
        self.store.write(rows::clear)
    }

    /// Replaces the published ranges (the updater, `svc update-bot-ranges`).
    pub fn set_ranges(&self, ranges: RangeSet) {
        *self.ranges.write() = Arc::new(ranges);
    }

    pub fn ranges(&self) -> Arc<RangeSet> {
        self.ranges.read().clone()
    }

    /// The injected clock's time, Unix seconds.
    pub fn now_secs(&self) -> i64 {
        secs(&self.clock)
    }

    pub fn enabled(&self) -> bool {
        self.live.read().settings.enabled
    }

    /// Entries in attempt history and cached results.
    pub fn sizes(&self) -> (usize, usize) {
        let st = self.state.lock();
        (st.history, st.results)
    }

    /// Stops the worker (queued jobs are dropped without loss).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.queue.close();
        let _ = self.queue.drain();
        if let Some(h) = self.worker.lock().take() {
            let _ = h.join();
        }
    }

    /// Whether the queue is empty and nothing runs (tests, benches).
    pub fn idle(&self) -> bool {
        self.queue.is_empty()
            && self.state.lock().by_ip.values().flatten().all(|(_, e)| {
                !matches!(
                    e,
                    Entry::Pending { .. }
                        | Entry::Attempt {
                            in_flight: true,
                            ..
                        }
                )
            })
    }

    fn decide(&self, ip: IpAddr, id: &Identity) -> BotCheck {
        let name = id.name.to_string();
        let now = secs(&self.clock);
        // 1. Cached result.
        if let Some(Entry::Result { positive, expires }) = self.state.lock().get(ip, &id.name) {
            if expires > now {
                return if positive {
                    BotCheck::Verified { name }
                } else {
                    BotCheck::Spoofed { name }
                };
            }
        }
        // 2. Address ranges.
        let in_range = if !id.ip_ranges.is_empty() {
            Some(id.ip_ranges.iter().any(|n| n.contains(ip)))
        } else if id.published {
            self.ranges.read().lookup(&id.name, ip)
        } else {
            None
        };
        match in_range {
            Some(true) => return BotCheck::Verified { name },
            Some(false) if id.rdns_suffixes.is_empty() => return BotCheck::Spoofed { name },
            None if id.rdns_suffixes.is_empty() => return BotCheck::Unverified { name },
            _ => {}
        }
        // 3. Reverse DNS, asynchronously.
        let mut st = self.state.lock();
        let entry = st.get(ip, &id.name).filter(|e| match e {
            Entry::Result { expires, .. } => *expires > now,
            Entry::Attempt {
                expires, in_flight, ..
            } => *in_flight || *expires > now,
            Entry::Pending { .. } => true,
        });
        match entry {
            Some(Entry::Pending { window_end }) => {
                if now < window_end {
                    BotCheck::Pending { name }
                } else {
                    BotCheck::Unverified { name }
                }
            }
            Some(Entry::Attempt {
                kind,
                at,
                retry_at,
                expires,
                in_flight,
            }) => {
                if !in_flight && now >= retry_at && !self.stopped.load(Ordering::Relaxed) {
                    // The retry runs; no fresh pending window (rule 6).
                    let job = Job {
                        ip,
                        name: id.name.clone(),
                        generation: st.generation,
                        evict: None,
                    };
                    if self.queue.try_push(job).is_ok() {
                        st.insert(
                            ip,
                            id.name.clone(),
                            Entry::Attempt {
                                kind,
                                at,
                                retry_at,
                                expires,
                                in_flight: true,
                            },
                        );
                    } else {
                        self.counters.queue_refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
                BotCheck::Unresolved { name }
            }
            Some(Entry::Result { .. }) | None => {
                // A lapsed result or nothing: admit a first job.
                st.remove(ip, &id.name);
                let mut evict = None;
                if st.history >= HISTORY_MAX {
                    match st.replaceable(now) {
                        Some((eip, en)) => {
                            st.remove(eip, &en);
                            self.counters
                                .history_replaced
                                .fetch_add(1, Ordering::Relaxed);
                            evict = Some((eip, en));
                        }
                        None => {
                            self.counters
                                .history_refused
                                .fetch_add(1, Ordering::Relaxed);
                            return BotCheck::Unverified { name };
                        }
                    }
                }
                let job = Job {
                    ip,
                    name: id.name.clone(),
                    generation: st.generation,
                    evict,
                };
                match self.queue.try_push(job) {
                    Ok(()) => {
                        st.insert(
                            ip,
                            id.name.clone(),
                            Entry::Pending {
                                window_end: now + PENDING_WINDOW_SECS,
                            },
                        );
                        BotCheck::Pending { name }
                    }
                    Err(_refused) => {
                        self.counters.queue_refused.fetch_add(1, Ordering::Relaxed);
                        BotCheck::Unverified { name }
                    }
                }
            }
        }
    }

    /// One job: reverse DNS, forward confirmation, store, memory.
    fn run(&self, job: &Job) {
        let live = self.live.read().clone();
        let Some(id) = live.ids.get(&job.name).cloned() else {
            self.abandon(job);
            return;
        };
        let outcome = fcrdns(
            &live.resolver,
            job.ip,
            &id.rdns_suffixes,
            Instant::now() + DNS_BUDGET,
        );
        self.record(job, outcome);
    }

    /// Counts a completed verification. Called where its answer is recorded (under the
    /// state lock), so a reader that sees the count gets the answer from `check`.
    fn count(&self, outcome: Outcome) {
        let c = &self.counters;
        match outcome {
            Outcome::Verified => c.verified.fetch_add(1, Ordering::Relaxed),
            Outcome::Negative => c.negative.fetch_add(1, Ordering::Relaxed),
            Outcome::NoPtr => c.no_ptr.fetch_add(1, Ordering::Relaxed),
            Outcome::Failed => c.dns_failures.fetch_add(1, Ordering::Relaxed),
        };
    }

    fn record(&self, job: &Job, outcome: Outcome) {
        let now = secs(&self.clock);
        if self.state.lock().generation != job.generation {
            // A reload replaced the state the job was for: counted, not recorded.
            self.count(outcome);
            return;
        }
        let (kind, retry_at, expires) = match outcome {
            Outcome::Verified => ("verified", now + RESULT_TTL_SECS, now + RESULT_TTL_SECS),
            Outcome::Negative => ("negative", now + RESULT_TTL_SECS, now + RESULT_TTL_SECS),
            Outcome::NoPtr => (
                "no_ptr",
                now + NO_PTR_SUPPRESS_SECS,
                now + HISTORY_KEEP_SECS,
            ),
            Outcome::Failed => ("failed", now + FAILURE_RETRY_SECS, now + HISTORY_KEEP_SECS),
        };
        let row = Row {
            ip: job.ip.to_string(),
            name: job.name.to_string(),
            kind: kind.to_string(),
            at: now,
            retry_at,
            expires,
        };
        let evict = job
            .evict
            .as_ref()
            .map(|(ip, n)| (ip.to_string(), n.to_string()));
        let written = self.store.write(move |c| {
            rows::put(
                c,
                &row,
                evict.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
            )
        });
        let entry = match (written.is_ok(), outcome) {
            (true, Outcome::Verified) => Entry::Result {
                positive: true,
                expires,
            },
            (true, Outcome::Negative) => Entry::Result {
                positive: false,
                expires,
            },
            (true, Outcome::NoPtr) => Entry::Attempt {
                kind: Attempt::NoPtr,
                at: now,
                retry_at,
                expires,
                in_flight: false,
            },
            (true, Outcome::Failed) | (false, _) => {
                if written.is_err() {
                    self.counters.store_failures.fetch_add(1, Ordering::Relaxed);
                }
                Entry::Attempt {
                    kind: Attempt::Failed,
                    at: now,
                    retry_at: now + FAILURE_RETRY_SECS,
                    expires: now + HISTORY_KEEP_SECS,
                    in_flight: false,
                }
            }
        };
        let cleanup_due = {
            let mut st = self.state.lock();
            self.count(outcome);
            if st.generation != job.generation {
                return;
            }
            if !entry.is_history() && st.results >= RESULTS_MAX {
                st.evict_one_result();
            }
            st.insert(job.ip, job.name.clone(), entry);
            let due = st
                .last_cleanup
                .is_none_or(|l| now < l || now - l >= CLEANUP_EVERY_SECS);
            if due {
                // Marked before it runs: a failing cleanup waits the same hour.
                st.last_cleanup = Some(now);
                st.purge(now);
            }
            due
        };
        if cleanup_due {
            self.counters.cleanups.fetch_add(1, Ordering::Relaxed);
            if self
                .store
                .write(move |c| rows::cleanup_if_due(c, now, CLEANUP_EVERY_SECS))
                .is_err()
            {
                self.counters.store_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A job that will not complete (identity gone, panic): its pending entry ends.
    fn abandon(&self, job: &Job) {
        let mut st = self.state.lock();
        if st.generation != job.generation {
            return;
        }
        match st.get(job.ip, &job.name) {
            Some(Entry::Pending { .. }) => {
                st.remove(job.ip, &job.name);
            }
            Some(Entry::Attempt {
                kind,
                at,
                retry_at,
                expires,
                in_flight: true,
            }) => st.insert(
                job.ip,
                job.name.clone(),
                Entry::Attempt {
                    kind,
                    at,
                    retry_at,
                    expires,
                    in_flight: false,
                },
            ),
            _ => {}
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Verified,
    Negative,
    NoPtr,
    Failed,
}

/// Forward-confirmed reverse DNS: a PTR under one of `suffixes` whose forward records
/// contain `ip`. A PTR-only match is never trusted.
fn fcrdns(resolver: &Resolver, ip: IpAddr, suffixes: &[String], deadline: Instant) -> Outcome {
    let names = match resolver.ptr(ip, deadline) {
        Err(_) => return Outcome::Failed,
        Ok(Lookup::NxDomain | Lookup::NoData) => return Outcome::NoPtr,
        Ok(Lookup::Records(names)) => names,
    };
    let candidates: Vec<&String> = names
        .iter()
        .filter(|n| suffixes.iter().any(|s| under(n, s)))
        .take(MAX_PTR_NAMES)
        .collect();
    if candidates.is_empty() {
        return Outcome::Negative;
    }
    let mut failed = false;
    for name in candidates {
        match resolver.forward(name, ip, deadline) {
            Ok(l) if l.records().contains(&ip) => return Outcome::Verified,
            Ok(_) => {}
            Err(_) => failed = true,
        }
    }
    if failed {
        Outcome::Failed
    } else {
        Outcome::Negative
    }
}

impl BotOracle for Verifier {
    fn check(&self, ip: IpAddr, user_agent: &str) -> BotCheck {
        let live = self.live.read().clone();
        if !live.settings.enabled {
            return BotCheck::NoClaim;
        }
        let Some(id) = live.ids.claim(user_agent) else {
            return BotCheck::NoClaim;
        };
        self.decide(ip.to_canonical(), id)
    }
}

impl Exemption for Verifier {
    /// A cached positive exempts the address (rule 7).
    fn exempt(&self, ip: IpAddr) -> Option<String> {
        if !self.enabled() {
            return None;
        }
        let now = secs(&self.clock);
        let st = self.state.lock();
        st.by_ip.get(&ip.to_canonical()).and_then(|v| {
            v.iter().find_map(|(n, e)| match e {
                Entry::Result {
                    positive: true,
                    expires,
                } if *expires > now => Some(format!("verified crawler {n}")),
                _ => None,
            })
        })
    }
}

#[cfg(test)]
#[path = "verifier_tests.rs"]
mod tests;
