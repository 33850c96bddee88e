//! Threat intelligence: the attack database, scoring, the verdict aggregator and its
//! sources, automatic blocking, undo, and the block digest.
//!
//! ```text
//! findings (listener) ----+--> attack database (db.rs) --[attackdb.events/.records]--> store
//! Recorder (WAF, web) ----'          |
//!                                    '--> auto-block (autoblock.rs) --> firewall engine
//! routes / svc threat --> control.rs --> verdict (verdict.rs + sources/), actions.rs, undo.rs
//! ```
//!
//! Guarantees:
//! - The findings listener and [`Recorder::record`] never wait on the store, the network
//!   or the firewall: they update memory and hand candidates to the auto-block thread
//!   through a bounded queue.
//! - Only findings of checks listed in `findings::evidence::ATTACK_EVIDENCE` that carry an
//!   address become events; their kind and whether the address is the attacker's come from
//!   that table.
//! - The threat subsystem runs whether or not the firewall engine does; automatic blocking
//!   (and its rows) only while the engine runs.
//! - Every key of `[threat]`, `[reputation]` and the auto-block keys of `[auto_response]`
//!   applies live ([`Threat::reconfigure`]).
//!
//! Threads: `threat-persist` (events and records to the store every 500 ms, full batches
//! back to back, old events pruned hourly), `threat-maint` (digest, quota and feed
//! conditions every 5 s, cache purge hourly), `threat-feeds` (feed downloads, every 30 s
//! when due), `threat-autoblock`, and the lookup pool `threat-lookup-*` while a remote
//! source is configured.

pub mod actions;
pub mod autoblock;
pub mod breaker;
pub mod control;
pub mod db;
pub mod digest;
pub mod reminders;
pub mod score;
pub mod sources;
pub mod undo;
pub mod verdict;

#[cfg(test)]
mod tests;

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

pub use crate::findings::evidence::AttackKind;
pub use autoblock::Exemption;
pub use db::{AttackEvent, Evidence};

use crate::alerts::Alerts;
use crate::clock::SharedClock;
use crate::config::threat::{ReputationConfig, ThreatConfig};
use crate::findings::engine::Listener;
use crate::findings::{evidence, Finding, Severity};
use crate::firewall::Handle;
use crate::queue::{QueueHealth, Registry, RowConfig, RowHandle};
use crate::store::Store;

pub const EVENTS_ROW: &str = "attackdb.events";
pub const RECORDS_ROW: &str = "attackdb.records";
/// Events and records written per store transaction at most. Small enough that the rows
/// of one transaction (and its statement journal) stay small during a burst from thousands
/// of addresses; a tick writes up to [`FLUSH_TURN`] of them.
const PERSIST_BATCH: usize = 1_024;
/// Full batches written per tick of the persistence thread at most (then the stop flag
/// and pruning get their turn).
const FLUSH_TURN: usize = 50;

/// Why the subsystem could not start.
#[derive(Debug)]
pub enum StartError {
    /// A queue row could not be built or registered.
    Row(crate::queue::RowError),
    /// The attack database could not be loaded.
    Store(crate::store::StoreError),
    /// A source or feed could not be configured.
    Config(sources::SourceError),
    /// A thread could not be started.
    Thread(std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Row(e) => write!(f, "threat: {e}"),
            StartError::Store(e) => write!(f, "threat: loading the attack database: {e}"),
            StartError::Config(e) => write!(f, "threat: {e}"),
            StartError::Thread(e) => write!(f, "threat: cannot start a thread: {e}"),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Row(e) => Some(e),
            StartError::Store(e) => Some(e),
            StartError::Config(e) => Some(e),
            StartError::Thread(e) => Some(e),
        }
    }
}

/// What the daemon wires in.
pub struct Deps {
    pub clock: SharedClock,
    pub store: Store,
    pub registry: Arc<Registry>,
    pub firewall: Handle,
    pub geoip: Option<Arc<crate::geoip::GeoIp>>,
    pub alerts: Arc<Alerts>,
    /// Submits the subsystem's own findings (`reputation_quota_exhausted`,
    /// `threat_feed_stale`).
    pub submit: reminders::Submit,
}

/// Counters of persistence (atomics).
#[derive(Default, Debug)]
pub struct PersistCounters {
    /// Events in the store (counted at start, then kept).
    pub stored_events: AtomicU64,
    pub write_failures: AtomicU64,
    pub pruned_events: AtomicU64,
}

/// The threat subsystem. Build with [`Threat::start`]; share as `Arc<Threat>`.
pub struct Threat {
    pub clock: SharedClock,
    pub store: Store,
    pub db: Arc<db::AttackDb>,
    pub agg: Arc<verdict::Aggregator>,
    pub undo: Arc<undo::Undo>,
    pub digest: Arc<digest::Digest>,
    pub firewall: Handle,
    pub geoip: Option<Arc<crate::geoip::GeoIp>>,
    pub autoblock: Option<Arc<autoblock::AutoBlock>>,
    pub feeds: Arc<sources::feeds::Feeds>,
    pub feedset: Arc<sources::feeds::FeedSet>,
    exemptions: Arc<RwLock<Vec<Arc<dyn Exemption>>>>,
    cfg: RwLock<Arc<(ThreatConfig, ReputationConfig)>>,
    remote: RwLock<sources::Built>,
    pub persist: PersistCounters,
    _events_row: RowHandle,
    records_row: RowHandle,
    stop: AtomicBool,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    env: sources::Env,
    logs: crate::lograte::LogLimiter,
    last_prune: AtomicI64,
    last_purge: AtomicI64,
}

/// A handle for collectors that see attacks without a finding per attack (each WAF deny,
/// each access-log hit): one call records one event with its address.
#[derive(Clone)]
pub struct Recorder(Weak<Threat>);

impl Recorder {
    /// Records one event. `attacker`: the address is the attacker's own and the event
    /// alone justifies a block (as a finding listed with `attacker: true` in
    /// `findings::evidence` does); otherwise the event adds to the score and a block
    /// follows only when the verdict score reaches `auto_response.block_score`.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &self,
        ip: IpAddr,
        kind: AttackKind,
        check: &str,
        severity: Severity,
        account: Option<&str>,
        message: &str,
        attacker: bool,
    ) {
        let Some(t) = self.0.upgrade() else { return };
        let ev = AttackEvent {
            ip: ip.to_canonical(),
            kind,
            at: t.clock.now().as_microsecond(),
            severity,
            check: check.to_string(),
            accounts: account.map(|a| vec![a.to_string()]).unwrap_or_default(),
            message: message.to_string(),
        };
        t.record_event(&ev, attacker);
    }
}

impl Threat {
    /// Loads the attack database, builds the sources, starts the threads.
    pub fn start(
        d: Deps,
        t: &ThreatConfig,
        r: &ReputationConfig,
    ) -> Result<Arc<Threat>, StartError> {
        let events_h = QueueHealth::new(d.clock.clone(), RowConfig::new("events"));
        let records_h = QueueHealth::new(d.clock.clone(), RowConfig::new("records"));
        let events_row = d
            .registry
            .register(EVENTS_ROW, events_h.clone())
            .map_err(crate::queue::RowError::at(EVENTS_ROW))
            .map_err(StartError::Row)?;
        let records_row = d
            .registry
            .register(RECORDS_ROW, records_h.clone())
            .map_err(crate::queue::RowError::at(RECORDS_ROW))
            .map_err(StartError::Row)?;
        let db = Arc::new(db::AttackDb::new(
            t.max_records,
            t.half_life_hours,
            events_h,
            records_h,
        ));
        let now = d.clock.now().as_microsecond();
        let max = t.max_records;
        let (rows, hourly, stored) = d
            .store
            .read(|c| {
                Ok((
                    crate::store::threat::load_records(c, max)?,
                    crate::store::threat::hourly_counts(c, now - 24 * 3_600_000_000)?,
                    crate::store::threat::count_events(c)?,
                ))
            })
            .map_err(StartError::Store)?;
        let n = rows.len();
        db.load(rows);
        db.seed_hourly(&hourly);
        if n > 0 {
            log::info!("attack database: {n} addresses loaded, {stored} events stored");
        }
        let reminders = Arc::new(reminders::Reminders::new(
            d.clock.clone(),
            d.store.clone(),
            d.submit.clone(),
        ));
        let undo = Arc::new(undo::Undo::load(d.store.clone(), d.clock.clone()));
        let feedset = Arc::new(sources::feeds::FeedSet::default());
        let env = sources::Env {
            clock: d.clock.clone(),
            store: d.store.clone(),
            db: db.clone(),
            firewall: d.firewall.clone(),
            geoip: d.geoip.clone(),
            reminders: reminders.clone(),
            feeds: feedset.clone(),
        };
        let feeds = Arc::new(sources::feeds::Feeds::new(&env, feedset.clone()));
        feeds.configure(r).map_err(StartError::Config)?;
        let digest = Arc::new(digest::Digest::new(
            d.clock.clone(),
            &d.registry,
            d.alerts.clone(),
            d.geoip.clone(),
        ));
        digest.configure(&t.watched_countries, t.digest_interval_minutes);
        let agg = Arc::new(verdict::Aggregator::new(d.clock.clone(), &d.registry));
        let built = sources::build(&env, t, r).map_err(StartError::Config)?;
        let weights_cfg = t.clone();
        agg.set_sources(
            built.sources.clone(),
            Arc::new(move |n| weights_cfg.weight(n)),
            Duration::from_millis(t.verdict_deadline_ms),
        )
        .map_err(StartError::Config)?;
        let exemptions: Arc<RwLock<Vec<Arc<dyn Exemption>>>> = Arc::new(RwLock::new(Vec::new()));
        let autoblock = match d.firewall.engine() {
            Ok(fw) => Some(
                autoblock::AutoBlock::new(
                    autoblock::Deps {
                        clock: d.clock.clone(),
                        store: d.store.clone(),
                        firewall: fw.clone(),
                        agg: agg.clone(),
                        db: db.clone(),
                        undo: undo.clone(),
                        digest: digest.clone(),
                        exemptions: exemptions.clone(),
                    },
                    auto_settings(t, r),
                    &d.registry,
                )
                .map_err(StartError::Row)?,
            ),
            Err(reason) => {
                log::info!(
                    "automatic blocking is off: the firewall engine is not running ({reason})"
                );
                None
            }
        };
        let threat = Arc::new(Threat {
            clock: d.clock,
            store: d.store,
            db,
            agg,
            undo,
            digest,
            firewall: d.firewall,
            geoip: d.geoip,
            autoblock,
            feeds,
            feedset,
            exemptions,
            cfg: RwLock::new(Arc::new((t.clone(), r.clone()))),
            remote: RwLock::new(built),
            persist: PersistCounters::default(),
            _events_row: events_row,
            records_row,
            stop: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            logs: crate::lograte::LogLimiter::per_minute(env.clock.clone()),
            env,
            last_prune: AtomicI64::new(i64::MIN),
            last_purge: AtomicI64::new(i64::MIN),
        });
        threat
            .persist
            .stored_events
            .store(stored, Ordering::Relaxed);
        threat.start_threads().map_err(StartError::Thread)?;
        if let Some(a) = &threat.autoblock {
            a.start().map_err(StartError::Thread)?;
        }
        Ok(threat)
    }

    fn start_threads(self: &Arc<Self>) -> std::io::Result<()> {
        let spawn = |name: &str, every: Duration, f: fn(&Threat)| {
            let me = Arc::downgrade(self);
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || loop {
                    std::thread::sleep(Duration::from_millis(100));
                    let mut slept = Duration::from_millis(100);
                    let Some(t) = me.upgrade() else { return };
                    while slept < every {
                        if t.stop.load(Ordering::SeqCst) {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                        slept += Duration::from_millis(100);
                    }
                    if t.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    f(&t);
                })
        };
        let mut th = self.threads.lock();
        th.push(spawn("threat-persist", Duration::from_millis(500), |t| {
            // Full batches follow each other at once (an attack of more than 40,000
            // events a second never waits on the tick); a partial one ends the turn.
            for _ in 0..FLUSH_TURN {
                if t.stop.load(Ordering::SeqCst) || !t.flush_full() {
                    break;
                }
            }
            t.prune_if_due();
        })?);
        th.push(spawn(
            "threat-maint",
            Duration::from_secs(5),
            Threat::maintain,
        )?);
        th.push(spawn("threat-feeds", Duration::from_secs(30), |t| {
            t.feeds.tick();
        })?);
        Ok(())
    }

    /// Stops the threads, writes what waits, and stops the lookup pool.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(a) = &self.autoblock {
            a.shutdown();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        while self.flush() {}
        self.agg.shutdown();
    }

    /// The findings listener.
    pub fn listener(self: &Arc<Self>) -> Listener {
        let me = Arc::downgrade(self);
        Box::new(move |f: &Finding| {
            if let Some(t) = me.upgrade() {
                t.observe(f);
            }
        })
    }

    /// The handle for collectors that record events themselves.
    pub fn recorder(self: &Arc<Self>) -> Recorder {
        Recorder(Arc::downgrade(self))
    }

    /// Adds a check that exempts addresses from automatic blocks (verified crawlers).
    pub fn add_exemption(&self, e: Arc<dyn Exemption>) {
        self.exemptions.write().push(e);
    }

    /// The configuration in effect.
    pub fn config(&self) -> Arc<(ThreatConfig, ReputationConfig)> {
        self.cfg.read().clone()
    }

    /// A finding that names an address, as an attack event.
    pub fn observe(&self, f: &Finding) {
        let Some(e) = evidence::evidence_of(&f.check) else {
            return;
        };
        let Some(ip) = f.ip else { return };
        let ev = AttackEvent {
            ip: ip.to_canonical(),
            kind: e.kind,
            at: f.last_seen.as_microsecond(),
            severity: f.severity,
            check: f.check.clone(),
            accounts: evidence::targeted_accounts(f),
            message: f.message.clone(),
        };
        self.record_event(&ev, e.attacker);
    }

    fn record_event(&self, ev: &AttackEvent, attacker: bool) {
        let (_, evidence) = self.db.record(ev);
        let Some(ab) = &self.autoblock else { return };
        if attacker {
            ab.offer(ev.ip, autoblock::Trigger::Finding(ev.check.clone()));
        } else if evidence == Evidence::Permanent {
            ab.offer(ev.ip, autoblock::Trigger::Evidence);
        } else if ev.kind.scored() {
            ab.offer(ev.ip, autoblock::Trigger::Score);
        }
    }

    /// Writes one batch of waiting events and records; true when it wrote something.
    pub fn flush(&self) -> bool {
        self.flush_batch().is_some()
    }

    /// Writes one batch; true when it was full (more may be waiting).
    fn flush_full(&self) -> bool {
        self.flush_batch().is_some_and(|full| full)
    }

    /// Writes one batch: `None` when nothing waited or the store failed, else whether the
    /// batch was full.
    fn flush_batch(&self) -> Option<bool> {
        let b = self.db.take_batch(PERSIST_BATCH);
        if b.is_empty() {
            return None;
        }
        let full = b.events_len() >= PERSIST_BATCH || b.records_len() >= PERSIST_BATCH;
        let n_events = b.events_len() as u64;
        // Shared with the writer's job, which builds the rows one at a time; kept here to
        // put back when the write fails.
        let b = Arc::new(b);
        let job = b.clone();
        let result = self.store.write(move |c| job.write(c));
        match result {
            Ok(()) => {
                self.persist
                    .stored_events
                    .fetch_add(n_events, Ordering::Relaxed);
                self.records_row.health().note_progress();
                self.records_row.health().state_io_ok();
                Some(full)
            }
            Err(e) => {
                self.persist.write_failures.fetch_add(1, Ordering::Relaxed);
                crate::warn_limited!(
                    self.logs,
                    "attackdb_write",
                    "",
                    "attack database: store write failed ({e}); retrying"
                );
                self.records_row.health().note_retry_failed();
                // The job is gone once it ran; a job never run may still hold its share.
                self.db
                    .requeue(Arc::try_unwrap(b).unwrap_or_else(|shared| (*shared).clone()));
                None
            }
        }
    }

    fn prune_if_due(&self) {
        let now = self.clock.now().as_microsecond();
        let last = self.last_prune.load(Ordering::Relaxed);
        if last != i64::MIN && now - last < 3_600_000_000 && now >= last {
            return;
        }
        self.last_prune.store(now, Ordering::Relaxed);
        let (t, _) = &*self.config();
        let before = now - t.event_retention_days as i64 * 86_400_000_000;
        let max = t.max_events;
        match self
            .store
            .write(move |c| crate::store::threat::prune_events(c, before, max))
        {
            Ok(n) if n > 0 => {
                self.persist
                    .pruned_events
                    .fetch_add(n as u64, Ordering::Relaxed);
                let _ = self.persist.stored_events.fetch_update(
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                    |v| Some(v.saturating_sub(n as u64)),
                );
            }
            Ok(_) => {}
            Err(e) => log::warn!("attack database: pruning old events failed: {e}"),
        }
    }

    /// The periodic work: digest, quota and feed conditions, cache purge.
    pub fn maintain(&self) {
        self.digest.tick();
        let now = self.clock.now().as_microsecond();
        if let Some(f) = &self.remote.read().ipfeed {
            f.evaluate(now);
        }
        self.feeds.evaluate(now);
        let last = self.last_purge.load(Ordering::Relaxed);
        if last == i64::MIN || now - last >= 3_600_000_000 || now < last {
            self.last_purge.store(now, Ordering::Relaxed);
            let _ = self
                .store
                .write_detached(move |c| crate::store::threat::cache_purge(c, now).map(|_| ()));
        }
    }

    /// Applies a new configuration: database limits, weights, deadline, sources, feeds,
    /// digest and auto-block settings.
    pub fn reconfigure(
        &self,
        t: &ThreatConfig,
        r: &ReputationConfig,
    ) -> Result<(), sources::SourceError> {
        let built = sources::build(&self.env, t, r)?;
        self.feeds.configure(r)?;
        let w = t.clone();
        self.agg.set_sources(
            built.sources.clone(),
            Arc::new(move |n| w.weight(n)),
            Duration::from_millis(t.verdict_deadline_ms),
        )?;
        *self.remote.write() = built;
        self.db.set_limits(t.max_records, t.half_life_hours);
        self.digest
            .configure(&t.watched_countries, t.digest_interval_minutes);
        if let Some(a) = &self.autoblock {
            a.set_settings(auto_settings(t, r));
        }
        *self.cfg.write() = Arc::new((t.clone(), r.clone()));
        Ok(())
    }

    /// The upstream source's breaker state and the feed quota, for db-stats.
    pub fn remote_status(&self) -> serde_json::Value {
        let now = self.clock.now().as_microsecond();
        let r = self.remote.read();
        let mut v = serde_json::json!({});
        if let Some(f) = &r.ipfeed {
            let (used, quota) = f.quota(now);
            v["ipfeed"] = serde_json::json!({
                "quota_used_today": used, "daily_quota": quota,
                "exhausted": f.exhausted(now).is_some(),
            });
        }
        if let Some(u) = &r.upstream {
            v["upstream"] = serde_json::json!({
                "breaker": u.breaker.state_name(),
                "breaker_opened_total": u.breaker.opened.load(Ordering::Relaxed),
                "breaker_refused_total": u.breaker.refused.load(Ordering::Relaxed),
            });
        }
        v
    }
}

fn auto_settings(t: &ThreatConfig, r: &ReputationConfig) -> autoblock::Settings {
    autoblock::Settings {
        enabled: t.auto_block,
        block_score: t.block_score.min(100) as u8,
        max_per_hour: t.max_blocks_per_hour,
        block_hours: t.block_hours,
        max_per_scan: r.ipfeed.as_ref().map_or(
            crate::config::keys::int_default("reputation.ipfeed_max_per_scan") as u32,
            |f| f.max_per_scan,
        ),
    }
}

/// Test support: sources' environment on a fresh store, with a manual clock and the
/// findings the subsystem submits collected.
#[cfg(test)]
pub(crate) fn test_env(
    tag: &str,
) -> (
    sources::Env,
    std::path::PathBuf,
    Arc<crate::clock::ManualClock>,
    Arc<Mutex<Vec<crate::findings::Ingest>>>,
) {
    let dir = std::env::temp_dir().join(format!("svc-threat-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = Store::open(&dir.join("svc.db")).unwrap();
    let clock = crate::clock::ManualClock::at_epoch_2026();
    let (env, seen) = test_env_on(&store, clock.clone());
    (env, dir, clock, seen)
}

/// Test support: as [`test_env`] on an existing store (a "restart").
#[cfg(test)]
pub(crate) fn test_env_on(
    store: &Store,
    clock: Arc<crate::clock::ManualClock>,
) -> (sources::Env, Arc<Mutex<Vec<crate::findings::Ingest>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let submit: reminders::Submit = Arc::new(move |i| {
        s.lock().push(i);
        true
    });
    let db = Arc::new(db::AttackDb::new(
        1000,
        168,
        QueueHealth::new(clock.clone(), RowConfig::new("events")),
        QueueHealth::new(clock.clone(), RowConfig::new("records")),
    ));
    let env = sources::Env {
        clock: clock.clone(),
        store: store.clone(),
        db,
        firewall: Handle::Absent("test".into()),
        geoip: None,
        reminders: Arc::new(reminders::Reminders::new(clock, store.clone(), submit)),
        feeds: Arc::new(sources::feeds::FeedSet::default()),
    };
    (env, seen)
}

/// Test support: polls `f` (real time, 10 s at most).
#[cfg(test)]
pub(crate) fn wait_for(mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(5));
    }
}
