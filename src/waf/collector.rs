//! The WAF log collector: a [`Follower`] (the shared log tail: rotation-safe, checkpointed,
//! inotify-woken) over the WAF logs, with [`WafHandler`] as its line handler, on its own
//! thread `waf-log`, with the `waf.file_source` row and the `waf_log` watcher row.
//!
//! [`WafHandler`] is independent of the tail: it takes lines and gives findings, so any
//! log-follow mechanism can drive it.
//!
//! Guarantees:
//! - Every event (deny or pass) of every supported format is stored in `waf_events`, in
//!   batches of at most [`BATCH`] (one write per batch, queued without waiting on the
//!   store); a batch the store refuses (full queue) is dropped and counted in
//!   [`Counters::dropped`]. Events older than `waf.event_retention_days` and beyond
//!   `waf.max_events` are deleted every [`PRUNE_EVERY`].
//! - The same rule match reported by two logs of one transaction (the error log and the
//!   audit log both carry its unique id) is one event: the last [`DEDUPE`] (transaction,
//!   rule) keys are remembered.
//! - Denies feed the [`Escalator`]; its findings go to the findings engine and to the
//!   escalation hook (the daemon blocks the address through the firewall as an automatic
//!   caller, subject to dry run and the allow list).
//! - Lines replayed at start (already read before a restart) rebuild the escalation windows
//!   and are not stored again.

use std::collections::{HashSet, VecDeque};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use jiff::tz::TimeZone;
use jiff::Timestamp;
use parking_lot::Mutex;

use super::escalate::{Escalator, Exclusions, Thresholds};
use super::event::{Action, WafEvent, WafSink};
use super::parse::{Parser, RuleActions};
use crate::clock::SharedClock;
use crate::components::Components;
use crate::findings::{Engine, Finding};
use crate::queue::{Registry, RowHandle};
use crate::store::waf::NewEvent;
use crate::store::Store;
pub use crate::watch::tail::StartError;
use crate::watch::tail::{file_source_row, Follower, LineHandler, Running};

/// Name of the queue row.
pub const ROW: &str = "waf.file_source";
/// Name of the watcher row.
pub const COMPONENT: &str = "waf_log";
/// Prefix of the checkpoint keys.
pub const KEY_PREFIX: &str = "waf";
/// Events stored per write.
pub const BATCH: usize = 512;
/// Transaction keys remembered for de-duplication.
pub const DEDUPE: usize = 4096;
/// How often old events are deleted.
pub const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// Counters of the collector (read by `/api/v1/waf/stats`).
#[derive(Default)]
pub struct Counters {
    pub events: AtomicU64,
    pub denies: AtomicU64,
    pub duplicates: AtomicU64,
    /// Events the store refused (its queue was full).
    pub dropped: AtomicU64,
    pub escalations: AtomicU64,
    /// Addresses dropped from the escalation windows to stay within the limit.
    pub evicted: AtomicU64,
    pub unparsed: AtomicU64,
}

/// Called with each escalation finding (after it is emitted).
pub type EscalateHook = Arc<dyn Fn(&Finding) + Send + Sync>;

/// Everything the handler shares with the daemon.
#[derive(Clone)]
pub struct Shared {
    pub exclusions: Arc<Exclusions>,
    pub thresholds: Arc<Mutex<Thresholds>>,
    pub counters: Arc<Counters>,
    pub actions: Arc<dyn RuleActions + Send + Sync>,
    pub hook: Option<EscalateHook>,
    pub sink: Option<Arc<dyn WafSink>>,
    pub country: Option<Arc<dyn Fn(IpAddr) -> Option<String> + Send + Sync>>,
    /// (retention, max rows) of `waf_events`.
    pub retention: Arc<Mutex<(Duration, u64)>>,
}

/// The line handler: parse, de-duplicate, store, escalate.
pub struct WafHandler {
    parser: Parser,
    escalator: Escalator,
    shared: Shared,
    th: Thresholds,
    store: Option<Store>,
    clock: SharedClock,
    batch: Vec<NewEvent>,
    seen: HashSet<(String, Option<u32>)>,
    seen_order: VecDeque<(String, Option<u32>)>,
    scratch: Vec<WafEvent>,
    last_prune: Option<Timestamp>,
    unparsed_seen: u64,
}

impl WafHandler {
    /// A handler reading local times in `tz`, storing into `store` (`None`: events are
    /// not stored, as in benchmarks).
    pub fn new(shared: Shared, store: Option<Store>, clock: SharedClock, tz: TimeZone) -> Self {
        let th = *shared.thresholds.lock();
        WafHandler {
            parser: Parser::new(tz),
            escalator: Escalator::new(th, shared.exclusions.clone()),
            shared,
            th,
            store,
            clock,
            batch: Vec::new(),
            seen: HashSet::new(),
            seen_order: VecDeque::new(),
            scratch: Vec::new(),
            last_prune: None,
            unparsed_seen: 0,
        }
    }

    fn duplicate(&mut self, e: &WafEvent) -> bool {
        let Some(key) = e.dedupe_key() else {
            return false;
        };
        if self.seen.contains(&key) {
            return true;
        }
        if self.seen_order.len() >= DEDUPE {
            if let Some(old) = self.seen_order.pop_front() {
                self.seen.remove(&old);
            }
        }
        self.seen.insert(key.clone());
        self.seen_order.push_back(key);
        false
    }

    fn process(&mut self, line: &str, store: bool, emit: &mut dyn FnMut(Finding)) {
        let now = self.clock.now();
        let mut events = std::mem::take(&mut self.scratch);
        self.parser
            .line(line, now, self.shared.actions.as_ref(), &mut events);
        self.note_unparsed();
        for e in events.drain(..) {
            self.event(e, store, emit);
        }
        self.scratch = events;
    }

    fn note_unparsed(&mut self) {
        let u = self.parser.counters.unparsed;
        if u > self.unparsed_seen {
            self.shared
                .counters
                .unparsed
                .fetch_add(u - self.unparsed_seen, Ordering::Relaxed);
            self.unparsed_seen = u;
        }
    }

    fn event(&mut self, e: WafEvent, store: bool, emit: &mut dyn FnMut(Finding)) {
        if self.duplicate(&e) {
            self.shared
                .counters
                .duplicates
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Some(f) = self.escalator.event(&e) {
            if store {
                self.shared
                    .counters
                    .escalations
                    .fetch_add(1, Ordering::Relaxed);
                if let Some(h) = &self.shared.hook {
                    h(&f);
                }
                emit(f);
            }
        }
        if !store {
            return;
        }
        let c = &self.shared.counters;
        c.events.fetch_add(1, Ordering::Relaxed);
        if e.action == Action::Deny {
            c.denies.fetch_add(1, Ordering::Relaxed);
            if let Some(s) = &self.shared.sink {
                s.waf_deny(&e);
            }
        }
        if self.store.is_some() {
            let country = self.shared.country.as_ref().and_then(|f| f(e.ip));
            self.batch.push(NewEvent { event: e, country });
            if self.batch.len() >= BATCH {
                self.flush();
            }
        }
    }

    /// Queues the batch on the store.
    pub fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        let n = batch.len() as u64;
        if let Some(store) = &self.store {
            if store
                .write_detached(move |c| crate::store::waf::insert(c, &batch))
                .is_err()
            {
                let before = self.shared.counters.dropped.fetch_add(n, Ordering::Relaxed);
                // Logged at powers of two of the total: bounded log volume under a flood.
                if (before + n).ilog2() != before.checked_ilog2().unwrap_or(u32::MAX) {
                    log::warn!(
                        "waf log: the store refused WAF events (its queue is full); {} dropped so far",
                        before + n
                    );
                }
            }
        }
    }

    fn prune(&mut self, now: Timestamp) {
        let due = self
            .last_prune
            .is_none_or(|t| now.duration_since(t).as_secs() >= PRUNE_EVERY.as_secs() as i64);
        if !due {
            return;
        }
        self.last_prune = Some(now);
        let (keep, max) = *self.shared.retention.lock();
        let before = now.as_microsecond() - keep.as_micros().min(i64::MAX as u128) as i64;
        if let Some(store) = &self.store {
            let _ =
                store.write_detached(move |c| crate::store::waf::prune(c, before, max).map(|_| ()));
        }
    }

    /// Counters of the parser (benchmarks, tests).
    pub fn parse_counters(&self) -> super::parse::ParseCounters {
        self.parser.counters
    }
}

impl LineHandler for WafHandler {
    fn line(&mut self, line: &str, emit: &mut dyn FnMut(Finding)) {
        self.process(line, true, emit);
    }

    fn replay(&mut self, line: &str) {
        self.process(line, false, &mut |_| {});
    }

    fn maintain(&mut self) {
        let th = *self.shared.thresholds.lock();
        if th != self.th {
            self.th = th;
            self.escalator.set_thresholds(th);
        }
        let now = self.clock.now();
        self.escalator.expire(now);
        let ev = self.escalator.evicted;
        let seen = self.shared.counters.evicted.load(Ordering::Relaxed);
        if ev > seen {
            self.shared.counters.evicted.store(ev, Ordering::Relaxed);
        }
        self.flush();
        self.prune(now);
    }
}

/// A running WAF log collector.
pub struct WafCollector {
    /// First field: dropped (the thread stopped and joined) before the row is removed.
    running: Running,
    _row: RowHandle,
}

impl WafCollector {
    /// Starts following `paths` (already expanded, see [`super::logs::resolve`])..
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        paths: &[PathBuf],
        shared: Shared,
        clock: SharedClock,
        engine: &Arc<Engine>,
        registry: &Arc<Registry>,
        components: &Components,
        store: &Store,
    ) -> Result<WafCollector, StartError> {
        let health = file_source_row(clock.clone());
        let row = registry
            .register(ROW, health.clone())
            .map_err(|e| StartError::Row(ROW, e))?;
        let component = components.add(COMPONENT, "log_watcher");
        component.set_detail(
            paths
                .iter()
                .map(|p| crate::text::escape_path(p).into_owned())
                .collect::<Vec<_>>()
                .join(", "),
        );
        let window = shared.thresholds.lock().window;
        let handler = WafHandler::new(
            shared,
            Some(store.clone()),
            clock.clone(),
            TimeZone::system(),
        );
        let follower = Follower::new(
            "waf log",
            KEY_PREFIX,
            paths,
            window,
            handler,
            store,
            engine.clone(),
            health,
            component,
            clock,
        )
        .map_err(|e| StartError::Io("waf-log", e))?;
        let running = Running::spawn("waf-log", follower, |f, stop| {
            f.run(stop);
        })
        .map_err(|e| StartError::Io("waf-log", e))?;
        Ok(WafCollector { running, _row: row })
    }

    pub fn request_stop(&self) {
        self.running.request_stop();
    }

    /// Stops the thread and waits (up to 5 s) for what it submitted to commit.
    pub fn stop(self) {
        self.running.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::waf::parse::NoActions;

    fn shared() -> Shared {
        Shared {
            exclusions: Exclusions::new([]),
            thresholds: Arc::new(Mutex::new(Thresholds {
                denies: 3,
                window: Duration::from_secs(600),
                max_addresses: 64,
            })),
            counters: Arc::new(Counters::default()),
            actions: Arc::new(NoActions),
            hook: None,
            sink: None,
            country: None,
            retention: Arc::new(Mutex::new((Duration::from_secs(86400), 1000))),
        }
    }

    #[test]
    fn real_apache_lines_escalate_and_duplicates_are_one_event() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/waf/apache-error.log"
        ))
        .unwrap();
        let audit = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/waf/apache-audit-native.log"
        ))
        .unwrap();
        let clock = ManualClock::new(Timestamp::from_second(1_900_000_000).unwrap());
        let clock: SharedClock = clock;
        let hooked = Arc::new(AtomicU64::new(0));
        let mut s = shared();
        let h = hooked.clone();
        s.hook = Some(Arc::new(move |_f: &Finding| {
            h.fetch_add(1, Ordering::Relaxed);
        }));
        let counters = s.counters.clone();
        let mut handler = WafHandler::new(s, None, clock.clone(), TimeZone::UTC);
        let mut found = Vec::new();
        for l in text.lines().chain(audit.lines()) {
            handler.line(l, &mut |f| found.push(f));
        }
        assert!(!found.is_empty(), "no escalation from the fixture");
        assert!(found
            .iter()
            .all(|f| f.check == super::super::escalate::CHECK));
        assert_eq!(hooked.load(Ordering::Relaxed), found.len() as u64);
        // The native audit log repeats the error log's matches (same unique ids).
        assert!(counters.duplicates.load(Ordering::Relaxed) > 0);
        assert!(counters.denies.load(Ordering::Relaxed) >= 3);
    }

    #[test]
    fn replayed_lines_neither_store_nor_emit() {
        let clock: SharedClock = ManualClock::new(Timestamp::from_second(1_900_000_000).unwrap());
        let s = shared();
        let counters = s.counters.clone();
        let mut handler = WafHandler::new(s, None, clock.clone(), TimeZone::UTC);
        let line = "[Mon Nov 23 17:10:01.000000 2026] [security2:error] [pid 1] [client 203.0.113.5:4000] [client 203.0.113.5] ModSecurity: Access denied with code 403 (phase 1). [file \"/x\"] [line \"1\"] [id \"900112\"] [msg \"m\"] [hostname \"h\"] [uri \"/wp-json/wp/v2/users\"] [unique_id \"U1\"]";
        handler.replay(line);
        handler.replay(&line.replace("U1", "U2"));
        assert_eq!(counters.events.load(Ordering::Relaxed), 0);
        let mut found = Vec::new();
        handler.line(&line.replace("U1", "U3"), &mut |f| found.push(f));
        assert_eq!(
            found.len(),
            1,
            "the replayed denies count toward the window"
        );
        assert_eq!(counters.events.load(Ordering::Relaxed), 1);
    }
}
