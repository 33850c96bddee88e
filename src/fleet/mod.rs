//! Fleet mode (`[fleet]`, issue 30): blocks and signals shared across servers through
//! CrowdSec's Local API (LAPI).
//!
//! - Bouncer ([`bouncer`]): the LAPI's ban decisions become firewall blocks of source
//!   `fleet` through the `central.actions` queue; deleted decisions unblock.
//! - Watcher ([`watcher`]): each automatic block that took effect is pushed as an alert
//!   with its decision, through a durable spool.
//! - The link's health is row `fleet.lapi` (lag since the last successful poll, failures);
//!   [`Fleet::status`] is `/api/v1/fleet` and `svc fleet status`; [`Fleet::metrics`] feeds
//!   `/metrics`.
//!
//! Guarantees:
//! - Off unless `fleet.lapi_url` and a side's credentials are set; read at start (restart
//!   group `fleet`). Needs the firewall engine for the bouncer and automatic blocking for
//!   the watcher; without them that side stays off with a warning.
//! - TLS is verified (the built-in roots or `fleet.ca_file`); plain `http://` only to
//!   loopback (checked at load). Redirects are not followed.
//! - The bouncer key, the password and the token are never logged or shown; error texts
//!   never contain the URL's path or query ([`crate::net::https`]).
//! - A LAPI that is down or erroring never changes local protection.

pub mod bouncer;
pub mod lapi;
pub mod watcher;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::clock::SharedClock;
use crate::config::fleet::FleetConfig;
use crate::firewall::Firewall;
use crate::net::https::{Client, FetchError, Roots};
use crate::queue::{
    Admitted, BoundedQueue, Flag, LagBasis, PopError, QueueHealth, Registry, RowConfig, RowHandle,
};
use crate::store::Store;
use crate::threat::autoblock::{BlockSink, Confirmed};

use bouncer::{Action, Applier};
use lapi::Skip;
use watcher::{Admit, Attempt, Pending, Spool};

/// Name of the link's health row.
pub const LINK_ROW: &str = "fleet.lapi";
/// Largest answer read from the login and alert routes.
const SMALL_ANSWER_CAP: u64 = 64 * 1024;
/// A token is renewed this long before it expires.
const TOKEN_MARGIN_SECS: i64 = 60;
/// How often the bouncer reads the whole decision list besides the deltas.
const FULL_LIST_EVERY: Duration = Duration::from_secs(600);
/// How soon after a delta with new decisions the whole list is read again.
const FULL_LIST_AFTER_CHANGE: Duration = Duration::from_secs(15);
/// How often dedup marks whose decision ended are forgotten.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Why fleet mode could not be set up.
#[derive(Debug)]
pub enum FleetError {
    /// A queue row could not be built or registered.
    Queue(crate::queue::RowError),
    /// The spool could not be read.
    Store(crate::store::StoreError),
    /// `fleet.ca_file` could not be used.
    Roots(crate::net::https::RootsError),
    /// A thread could not be started.
    Spawn {
        thread: &'static str,
        source: std::io::Error,
    },
}

impl std::fmt::Display for FleetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FleetError::Queue(e) => write!(f, "{e}"),
            FleetError::Store(e) => write!(f, "{}: {e}", watcher::SPOOL_ROW),
            FleetError::Roots(e) => write!(f, "fleet.ca_file: {e}"),
            FleetError::Spawn { thread, source } => write!(f, "cannot start {thread}: {source}"),
        }
    }
}

impl std::error::Error for FleetError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FleetError::Queue(e) => Some(e),
            FleetError::Store(e) => Some(e),
            FleetError::Roots(e) => Some(e),
            FleetError::Spawn { source, .. } => Some(source),
        }
    }
}

/// Bouncer counters (atomics, since start).
#[derive(Default, Debug)]
pub struct Counters {
    /// Decisions in stream answers (new and deleted, usable or not).
    pub received: AtomicU64,
    /// Ban decisions in effect (blocked, already blocked, or recorded as a dry run).
    pub applied: AtomicU64,
    /// Of `applied`: recorded as dry runs (`auto_response.dry_run`).
    pub dry_run: AtomicU64,
    /// Ban decisions the firewall refused (allow list, infrastructure, local, limit).
    pub refused: AtomicU64,
    pub refused_by: [AtomicU64; 4],
    /// Decisions not taken (scope, type, invalid, expired, over the limit).
    pub skipped: AtomicU64,
    pub skipped_by: [AtomicU64; 5],
    /// Deleted decisions received.
    pub deleted_received: AtomicU64,
    /// Fleet blocks removed (deleted decisions, or gone from a full list).
    pub unblocked: AtomicU64,
    /// Firewall failures while applying (the next poll reads the whole list).
    pub apply_errors: AtomicU64,
    /// Answers refused: larger than the cap, or not the expected JSON.
    pub answers_refused: AtomicU64,
}

/// The LAPI link: row `fleet.lapi` and the poll state.
pub struct Link {
    health: Arc<QueueHealth>,
    _row: RowHandle,
    clock: SharedClock,
    /// Stamp of the last successful poll (or of the start), the row's waiting age.
    last_ok_stamp: Mutex<Admitted>,
    /// Microseconds since the epoch of the last successful poll; 0: none yet.
    last_ok_at: AtomicI64,
    pub polls: AtomicU64,
    pub failures: AtomicU64,
    pub consecutive_failures: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// The next poll asks the whole list (`startup=true`).
    pub resync: AtomicBool,
}

impl Link {
    fn new(
        clock: SharedClock,
        registry: &Arc<Registry>,
        poll: Duration,
    ) -> Result<Link, FleetError> {
        let mut config = RowConfig::new("polls").lag_basis(LagBasis::ObservedAge);
        // Lag: time since the last successful poll, degraded past a minute or three polls.
        config.lag_budget = Duration::from_secs(60).max(poll.saturating_mul(3));
        let health = QueueHealth::new(clock.clone(), config);
        let row = registry
            .register(LINK_ROW, health.clone())
            .map_err(crate::queue::RowError::at(LINK_ROW))
            .map_err(FleetError::Queue)?;
        let stamp = health.stamp();
        Ok(Link {
            health,
            _row: row,
            clock,
            last_ok_stamp: Mutex::new(stamp),
            last_ok_at: AtomicI64::new(0),
            polls: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            consecutive_failures: AtomicU64::new(0),
            last_error: Mutex::new(None),
            resync: AtomicBool::new(true),
        })
    }

    fn success(&self) {
        self.polls.fetch_add(1, Ordering::Relaxed);
        self.consecutive_failures.store(0, Ordering::Relaxed);
        self.last_ok_at
            .store(self.clock.now().as_microsecond(), Ordering::Relaxed);
        *self.last_ok_stamp.lock() = self.health.stamp();
        *self.last_error.lock() = None;
        self.health.set_waiting(0);
        self.health.set_oldest_waiting(None);
        self.health.set_flag(Flag::SourceIo, false);
        self.health.note_progress();
    }

    fn failure(&self, why: String) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let n = self.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
        self.resync.store(true, Ordering::Release);
        // One poll waits since the last good one: the row's lag.
        self.health.set_waiting(1);
        self.health
            .set_oldest_waiting(Some(*self.last_ok_stamp.lock()));
        self.health.set_flag(Flag::SourceIo, true);
        self.health.note_retry_failed();
        if n == 1 || n.is_power_of_two() {
            log::warn!(
                "fleet: LAPI poll failed ({n} in a row): {why}; local blocks stay as they are"
            );
        }
        *self.last_error.lock() = Some(why);
    }

    /// Seconds since the last successful poll (since the start when none).
    fn lag_seconds(&self) -> Option<f64> {
        self.health.snapshot().lag_seconds
    }
}

/// The running fleet link.
pub struct Fleet {
    cfg: FleetConfig,
    clock: SharedClock,
    roots: Roots,
    server: String,
    firewall: Option<Arc<Firewall>>,
    link: Arc<Link>,
    pub counters: Arc<Counters>,
    actions: Option<BoundedQueue<Action>>,
    _actions_row: Option<RowHandle>,
    ingress: Option<BoundedQueue<Pending>>,
    _ingress_row: Option<RowHandle>,
    spool: Option<Arc<Spool>>,
    /// Blocks offered by automatic blocking.
    pub offered: AtomicU64,
    stop: AtomicBool,
    stop_tx: Mutex<Option<Sender<()>>>,
    stop_rx: Receiver<()>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Fleet {
    /// Builds the rows and the spool; `None` when fleet mode is off. `firewall` is the
    /// engine (bouncer), `watch` whether automatic blocking runs (watcher).
    pub fn new(
        cfg: &FleetConfig,
        firewall: Option<Arc<Firewall>>,
        watch: bool,
        clock: SharedClock,
        store: Store,
        registry: &Arc<Registry>,
    ) -> Result<Option<Arc<Fleet>>, FleetError> {
        if !cfg.bouncer() && !cfg.watcher() {
            return Ok(None);
        }
        let roots = Roots::load(cfg.ca_file.as_deref()).map_err(FleetError::Roots)?;
        let link = Arc::new(Link::new(
            clock.clone(),
            registry,
            Duration::from_secs(cfg.poll_seconds),
        )?);
        let bouncer_on = cfg.bouncer() && firewall.is_some();
        if cfg.bouncer() && firewall.is_none() {
            log::warn!("fleet: the firewall engine is not running; LAPI decisions are not applied");
        }
        let (actions, actions_row) = if bouncer_on {
            let q = BoundedQueue::new(
                clock.clone(),
                RowConfig::new("actions")
                    .capacity(bouncer::ACTIONS_CAPACITY)
                    .running_slots(1),
            )
            .map_err(crate::queue::RowError::at(bouncer::ACTIONS_ROW))
            .map_err(FleetError::Queue)?;
            let row = registry
                .register(bouncer::ACTIONS_ROW, q.health().clone())
                .map_err(crate::queue::RowError::at(bouncer::ACTIONS_ROW))
                .map_err(FleetError::Queue)?;
            (Some(q), Some(row))
        } else {
            (None, None)
        };
        let watcher_on = cfg.watcher() && watch;
        if cfg.watcher() && !watch {
            log::warn!("fleet: no automatic blocking runs (firewall off), so no alert is pushed");
        }
        let (ingress, ingress_row, spool) = if watcher_on {
            let q = BoundedQueue::new(
                clock.clone(),
                RowConfig::new("blocks")
                    .capacity(watcher::INGRESS_CAPACITY)
                    .running_slots(1),
            )
            .map_err(crate::queue::RowError::at(watcher::INGRESS_ROW))
            .map_err(FleetError::Queue)?;
            let row = registry
                .register(watcher::INGRESS_ROW, q.health().clone())
                .map_err(crate::queue::RowError::at(watcher::INGRESS_ROW))
                .map_err(FleetError::Queue)?;
            let spool = Arc::new(Spool::open(store, clock.clone(), registry)?);
            (Some(q), Some(row), Some(spool))
        } else {
            (None, None, None)
        };
        let server = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .map(|h| crate::text::for_log(&h, 64))
            .unwrap_or_else(|| "unknown".into());
        let (stop_tx, stop_rx) = bounded(1);
        Ok(Some(Arc::new(Fleet {
            cfg: cfg.clone(),
            clock,
            roots,
            server,
            firewall: if bouncer_on { firewall } else { None },
            link,
            counters: Arc::new(Counters::default()),
            actions,
            _actions_row: actions_row,
            ingress,
            _ingress_row: ingress_row,
            spool,
            offered: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            stop_tx: Mutex::new(Some(stop_tx)),
            stop_rx,
            threads: Mutex::new(Vec::new()),
        })))
    }

    /// Whether the watcher side runs (the daemon adds it as a block sink).
    pub fn watching(&self) -> bool {
        self.spool.is_some()
    }

    fn spawn(
        self: &Arc<Self>,
        name: &str,
        what: &'static str,
        f: impl FnOnce(Arc<Fleet>) + Send + 'static,
    ) -> Result<(), FleetError> {
        let me = self.clone();
        let t = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || f(me))
            .map_err(|source| FleetError::Spawn {
                thread: what,
                source,
            })?;
        self.threads.lock().push(t);
        Ok(())
    }

    /// Starts the poller and applier (bouncer) and the writer and sender (watcher).
    pub fn start(self: &Arc<Self>) -> Result<(), FleetError> {
        if let Some(fw) = &self.firewall {
            let applier = Applier::new(fw.clone(), self.counters.clone(), self.link.clone());
            self.spawn("fleet-apply", "the fleet applier", move |me| {
                if let Some(q) = &me.actions {
                    applier.run(q);
                }
            })?;
            self.spawn("fleet-poll", "the fleet poller", |me| me.poll_loop())?;
        }
        if self.spool.is_some() {
            self.spawn("fleet-ingress", "the fleet alert writer", |me| {
                me.write_loop()
            })?;
            self.spawn("fleet-send", "the fleet alert sender", |me| me.send_loop())?;
        }
        Ok(())
    }

    /// Stops: polling ends, waiting actions are applied, blocks waiting for the spool are
    /// written to it; the sender stops (a request in progress ends within its deadline).
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.stop_tx.lock().take();
        if let Some(q) = &self.actions {
            q.close();
        }
        if let Some(q) = &self.ingress {
            q.close();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Waits `d` or until shutdown; false once stopping.
    fn pause(&self, d: Duration) -> bool {
        let _ = self.stop_rx.recv_timeout(d);
        !self.stopping()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.cfg.lapi_url)
    }

    /// The bouncer's poller.
    fn poll_loop(&self) {
        let Some(queue) = &self.actions else { return };
        let timeout = Duration::from_secs(self.cfg.timeout_seconds);
        let base = self.url("/v1/decisions/stream");
        let client = Client::new(&base, &self.roots, timeout, bouncer::ANSWER_CAP, 0);
        let poll = Duration::from_secs(self.cfg.poll_seconds);
        // A delta can miss decisions a LAPI transaction committed after this bouncer's
        // previous pull but stamped before it: the whole list is read again now and then.
        // Such a transaction is usually a burst (an import, a wave of alerts): a delta that
        // brought decisions schedules a whole-list read shortly after.
        let mut full_due = std::time::Instant::now() + FULL_LIST_EVERY;
        while !self.stopping() {
            if std::time::Instant::now() >= full_due {
                self.link.resync.store(true, Ordering::Release);
            }
            let full = self.link.resync.swap(false, Ordering::AcqRel);
            if full {
                full_due = std::time::Instant::now() + FULL_LIST_EVERY;
            }
            let url = if full {
                format!("{base}?startup=true")
            } else {
                base.clone()
            };
            let headers = [
                ("X-Api-Key", self.cfg.bouncer_key.as_str()),
                ("Accept", "application/json"),
            ];
            match client.get(&url, &headers) {
                Ok(f) if f.status == 200 => match bouncer::parse(&f.body) {
                    Ok(s) => {
                        self.link.success();
                        if !full && !s.new.is_empty() {
                            let soon = std::time::Instant::now() + FULL_LIST_AFTER_CHANGE;
                            full_due = full_due.min(soon);
                        }
                        if let Some(a) = bouncer::action_of(s, full, &self.counters) {
                            if !bouncer::offer(queue, a, &|| self.stopping()) {
                                return;
                            }
                        }
                    }
                    Err(e) => {
                        self.counters
                            .answers_refused
                            .fetch_add(1, Ordering::Relaxed);
                        self.link.failure(e.to_string());
                    }
                },
                Ok(f) => self.link.failure(format!("HTTP {}", f.status)),
                Err(FetchError::TooLarge(n)) => {
                    self.counters
                        .answers_refused
                        .fetch_add(1, Ordering::Relaxed);
                    self.link
                        .failure(format!("the decisions answer is larger than {n} bytes"));
                }
                Err(e) => self.link.failure(e.to_string()),
            }
            if !self.pause(poll) {
                return;
            }
        }
    }

    /// The watcher's spool writer.
    fn write_loop(&self) {
        let (Some(q), Some(spool)) = (&self.ingress, &self.spool) else {
            return;
        };
        let mut last_prune: Option<std::time::Instant> = None;
        loop {
            if last_prune.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
                spool.prune();
                last_prune = Some(std::time::Instant::now());
            }
            match q.pop_timeout(Duration::from_secs(1)) {
                Ok(g) => {
                    let (p, _, running) = g.into_parts();
                    match spool.admit(&p, &self.server) {
                        Admit::Failed => running.lose(),
                        _ => running.finish(),
                    }
                }
                Err(PopError::Timeout) => {}
                Err(PopError::Closed) => return,
            }
        }
    }

    /// Logs in; the token or why not.
    fn login(&self, client: &Client) -> Result<lapi::Token, String> {
        let spool = self.spool.as_ref().ok_or("no spool")?;
        let c = &spool.counters;
        let body = lapi::login_body(&self.cfg.machine_id, &self.cfg.password, &[]);
        let r = client.post(
            &self.url("/v1/watchers/login"),
            &[("Content-Type", "application/json")],
            &body,
        );
        let out = match r {
            Ok(f) if f.status == 200 => lapi::parse_login(&f.body).map_err(|e| e.to_string()),
            Ok(f) => Err(format!("login answered HTTP {}", f.status)),
            Err(e) => Err(format!("login: {e}")),
        };
        match &out {
            Ok(_) => c.logins.fetch_add(1, Ordering::Relaxed),
            Err(_) => c.login_failures.fetch_add(1, Ordering::Relaxed),
        };
        out
    }

    /// The watcher's sender: one alert at a time, oldest first.
    fn send_loop(&self) {
        let Some(spool) = &self.spool else { return };
        let wake = spool.waker();
        let timeout = Duration::from_secs(self.cfg.timeout_seconds);
        let alerts = self.url("/v1/alerts");
        let client = Client::new(&alerts, &self.roots, timeout, SMALL_ANSWER_CAP, 0);
        let mut token: Option<lapi::Token> = None;
        let mut failures: u32 = 0;
        let c = &spool.counters;
        let health = spool.health().clone();
        while !self.stopping() {
            let row = match spool.take() {
                Ok(Some(row)) => row,
                Ok(None) => {
                    crossbeam_channel::select! {
                        recv(wake) -> _ => {},
                        recv(self.stop_rx) -> _ => {},
                        default(Duration::from_secs(30)) => {},
                    }
                    continue;
                }
                Err(e) => {
                    log::warn!("{}: cannot read the spool: {e}", watcher::SPOOL_ROW);
                    if !self.pause(watcher::FIRST_BACKOFF) {
                        return;
                    }
                    continue;
                }
            };
            let now = self.clock.now().as_second();
            if token
                .as_ref()
                .is_some_and(|t| t.expires.is_some_and(|e| e - TOKEN_MARGIN_SECS <= now))
            {
                token = None;
            }
            let outcome = match &token {
                Some(t) => self.push(&client, &alerts, t, &row.alert),
                None => match self.login(&client) {
                    Ok(t) => {
                        let o = self.push(&client, &alerts, &t, &row.alert);
                        token = Some(t);
                        o
                    }
                    Err(why) => Attempt::Failed(why),
                },
            };
            match outcome {
                Attempt::Delivered => {
                    failures = 0;
                    health.set_flag(Flag::DeliveryFailed, false);
                    c.sent.fetch_add(1, Ordering::Relaxed);
                    if let Err(e) = spool.remove(row.id) {
                        // Sent again later: at least once.
                        log::warn!("{}: cannot remove a sent alert: {e}", watcher::SPOOL_ROW);
                    }
                }
                Attempt::Unauthorized if token.is_some() => {
                    // An expired or revoked token: log in again at once.
                    token = None;
                    spool.release();
                }
                Attempt::Rejected(status) => {
                    failures = 0;
                    c.rejected.fetch_add(1, Ordering::Relaxed);
                    health.record_loss();
                    log::warn!(
                        "fleet: the LAPI refused the alert for {} ({}; HTTP {status}); dropped",
                        row.ip,
                        row.scenario
                    );
                    if spool.remove(row.id).is_err() {
                        spool.release();
                    }
                }
                Attempt::Unauthorized | Attempt::Failed(_) => {
                    spool.release();
                    let why = match outcome {
                        Attempt::Failed(w) => w,
                        _ => "HTTP 401".into(),
                    };
                    c.failed_attempts.fetch_add(1, Ordering::Relaxed);
                    health.note_retry_failed();
                    health.set_flag(Flag::DeliveryFailed, true);
                    failures = failures.saturating_add(1);
                    let delay = watcher::backoff(failures);
                    if failures == 1 || failures.is_power_of_two() {
                        log::warn!(
                            "fleet: pushing an alert failed: {why}; retrying in {} s",
                            delay.as_secs()
                        );
                    }
                    if !self.pause(delay) {
                        return;
                    }
                }
            }
        }
    }

    fn push(&self, client: &Client, url: &str, t: &lapi::Token, alert: &str) -> Attempt {
        let auth = format!("Bearer {}", t.token);
        let body = format!("[{alert}]");
        match client.post(
            url,
            &[
                ("Authorization", auth.as_str()),
                ("Content-Type", "application/json"),
            ],
            body.as_bytes(),
        ) {
            Ok(f) => watcher::classify(f.status),
            Err(e) => Attempt::Failed(e.to_string()),
        }
    }

    /// The LAPI URL as shown: scheme and host only (a path may carry a secret).
    fn shown_url(&self) -> String {
        let u = &self.cfg.lapi_url;
        match u.split_once("://") {
            Some((scheme, rest)) => {
                let host = rest.split(['/', '?', '#']).next().unwrap_or("");
                let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
                format!("{scheme}://{host}")
            }
            None => String::new(),
        }
    }

    /// `/api/v1/fleet` and `svc fleet status`.
    pub fn status(&self) -> Value {
        let c = &self.counters;
        let l = &self.link;
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let last_ok = l.last_ok_at.load(Ordering::Relaxed);
        let last_ok = (last_ok > 0)
            .then(|| jiff::Timestamp::from_microsecond(last_ok).ok())
            .flatten()
            .map(crate::timefmt::rfc3339);
        let bouncer = self.firewall.is_some();
        let refused_by: serde_json::Map<String, Value> = bouncer::REFUSALS
            .iter()
            .zip(&c.refused_by)
            .map(|(k, v)| (k.to_string(), n(v).into()))
            .collect();
        let skipped_by: serde_json::Map<String, Value> = Skip::ALL
            .iter()
            .map(|s| (s.as_str().to_string(), n(&c.skipped_by[s.index()]).into()))
            .collect();
        let alerts = match &self.spool {
            Some(s) => {
                let sc = &s.counters;
                json!({
                    "enabled": true,
                    "machine_id": self.cfg.machine_id,
                    "offered": n(&self.offered),
                    "spooled": n(&sc.spooled),
                    "deduplicated": n(&sc.deduplicated),
                    "sent": n(&sc.sent),
                    "pending": s.len(),
                    "rejected": n(&sc.rejected),
                    "evicted": n(&sc.evicted),
                    "failed_attempts": n(&sc.failed_attempts),
                    "logins": n(&sc.logins),
                    "login_failures": n(&sc.login_failures),
                })
            }
            None => json!({ "enabled": false }),
        };
        json!({
            "enabled": true,
            "lapi": {
                "url": self.shown_url(),
                "bouncer": bouncer,
                "watcher": self.spool.is_some(),
                "connected": bouncer && n(&l.polls) > 0 && n(&l.consecutive_failures) == 0,
                "poll_seconds": self.cfg.poll_seconds,
                "polls": n(&l.polls),
                "failures": n(&l.failures),
                "consecutive_failures": n(&l.consecutive_failures),
                "last_successful_poll": last_ok,
                "lag_seconds": if bouncer { l.lag_seconds() } else { None },
                "last_error": l.last_error.lock().clone(),
            },
            "decisions": {
                "received": n(&c.received),
                "applied": n(&c.applied),
                "dry_run": n(&c.dry_run),
                "refused": n(&c.refused),
                "refused_by": refused_by,
                "skipped": n(&c.skipped),
                "skipped_by": skipped_by,
                "deleted": n(&c.deleted_received),
                "unblocked": n(&c.unblocked),
                "apply_errors": n(&c.apply_errors),
                "answers_refused": n(&c.answers_refused),
                "waiting_actions": self.actions.as_ref().map_or(0, |q| q.len()),
            },
            "alerts": alerts,
        })
    }

    /// Prometheus samples: (name, type, help, labels, value).
    pub fn metrics(&self) -> Vec<Metric> {
        let c = &self.counters;
        let l = &self.link;
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        let mut out = vec![
            Metric::new(
                "svc_fleet_lapi_up",
                "gauge",
                "1 when the last poll of the LAPI decisions stream succeeded.",
                vec![],
                if n(&l.polls) > 0.0 && n(&l.consecutive_failures) == 0.0 {
                    1.0
                } else {
                    0.0
                },
            ),
            Metric::new(
                "svc_fleet_lapi_polls_total",
                "counter",
                "Successful polls of the LAPI decisions stream.",
                vec![],
                n(&l.polls),
            ),
            Metric::new(
                "svc_fleet_lapi_failures_total",
                "counter",
                "Failed polls of the LAPI decisions stream.",
                vec![],
                n(&l.failures),
            ),
            Metric::new(
                "svc_fleet_lapi_lag_seconds",
                "gauge",
                "Seconds since the last successful poll (since the start before the first).",
                vec![],
                l.lag_seconds().unwrap_or(0.0),
            ),
            Metric::new(
                "svc_fleet_decisions_received_total",
                "counter",
                "Decisions received from the LAPI (new and deleted).",
                vec![],
                n(&c.received),
            ),
            Metric::new(
                "svc_fleet_decisions_applied_total",
                "counter",
                "Ban decisions in effect as firewall blocks (dry runs included).",
                vec![],
                n(&c.applied),
            ),
            Metric::new(
                "svc_fleet_decisions_deleted_total",
                "counter",
                "Deleted decisions received.",
                vec![],
                n(&c.deleted_received),
            ),
            Metric::new(
                "svc_fleet_unblocked_total",
                "counter",
                "Fleet blocks removed for deleted decisions.",
                vec![],
                n(&c.unblocked),
            ),
            Metric::new(
                "svc_fleet_apply_errors_total",
                "counter",
                "Firewall failures while applying decisions.",
                vec![],
                n(&c.apply_errors),
            ),
            Metric::new(
                "svc_fleet_answers_refused_total",
                "counter",
                "LAPI answers refused (too large or not JSON).",
                vec![],
                n(&c.answers_refused),
            ),
        ];
        for (k, v) in bouncer::REFUSALS.iter().zip(&c.refused_by) {
            out.push(Metric::new(
                "svc_fleet_decisions_refused_total",
                "counter",
                "Ban decisions the firewall refused, by reason.",
                vec![("reason", k.to_string())],
                n(v),
            ));
        }
        for s in Skip::ALL {
            out.push(Metric::new(
                "svc_fleet_decisions_skipped_total",
                "counter",
                "Decisions not taken, by reason.",
                vec![("reason", s.as_str().to_string())],
                n(&c.skipped_by[s.index()]),
            ));
        }
        if let Some(s) = &self.spool {
            let sc = &s.counters;
            out.extend([
                Metric::new(
                    "svc_fleet_alerts_sent_total",
                    "counter",
                    "Alerts the LAPI accepted.",
                    vec![],
                    n(&sc.sent),
                ),
                Metric::new(
                    "svc_fleet_alerts_pending",
                    "gauge",
                    "Alerts waiting in the durable spool.",
                    vec![],
                    s.len() as f64,
                ),
                Metric::new(
                    "svc_fleet_alerts_deduplicated_total",
                    "counter",
                    "Blocks not pushed: the address and scenario were pushed within the decision.",
                    vec![],
                    n(&sc.deduplicated),
                ),
                Metric::new(
                    "svc_fleet_alerts_rejected_total",
                    "counter",
                    "Alerts the LAPI refused for good.",
                    vec![],
                    n(&sc.rejected),
                ),
                Metric::new(
                    "svc_fleet_alerts_failed_attempts_total",
                    "counter",
                    "Failed alert pushes (retried).",
                    vec![],
                    n(&sc.failed_attempts),
                ),
            ]);
        }
        out
    }
}

/// One Prometheus sample.
#[derive(Debug, Clone)]
pub struct Metric {
    pub name: &'static str,
    pub kind: &'static str,
    pub help: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

impl Metric {
    fn new(
        name: &'static str,
        kind: &'static str,
        help: &'static str,
        labels: Vec<(&'static str, String)>,
        value: f64,
    ) -> Metric {
        Metric {
            name,
            kind,
            help,
            labels,
            value,
        }
    }
}

impl BlockSink for Fleet {
    fn confirmed(&self, c: &Confirmed) {
        let Some(q) = &self.ingress else { return };
        self.offered.fetch_add(1, Ordering::Relaxed);
        if q.try_push(Pending::of_block(c)).is_err() {
            // Counted on the row; logged at the first loss and at each power of two.
            let lost = q.health().dropped_total();
            if lost <= 1 || lost.is_power_of_two() {
                log::warn!(
                    "{}: full; an alert was dropped ({lost} so far)",
                    watcher::INGRESS_ROW
                );
            }
        }
    }
}
