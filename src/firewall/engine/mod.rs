//! The engine: owns table `inet svc`, keeps it equal to the store, runs the timers.
//!
//! Every change runs under one operation lock in this order: validate against memory and
//! settings, write the store (one SQLite transaction), update memory, then one kernel
//! transaction (a netlink batch, or for settings one `nft -f` script). When the kernel
//! refuses a batch (an element expired a moment earlier, the table was flushed meanwhile),
//! the engine re-asserts the whole table from memory at once; if that fails too, the change
//! stays stored and the timer retries (row `auto_block.cleanup` shows the addresses that
//! wait). Reads (`check`, `list`, `status`) take a read lock on memory and never wait for the
//! kernel.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use parking_lot::{Mutex, RwLock};
use serde_json::{json, Map, Value};

use crate::clock::SharedClock;
use crate::config::firewall::FirewallConfig;
use crate::queue::{Admitted, LagBasis, QueueHealth, Registry, RowConfig, RowHandle};
use crate::store::firewall::{self as sfw, Kind};
use crate::store::Store;
use crate::timefmt::rfc3339;

use super::net::{is_loopback_or_unspecified, Net};
use super::netlink::{Batch, Netlink, NlError, SetRef};
use super::rollback::Rollback;
use super::script::{self, ELEMENT_SETS};
use super::state::{Entry, NetMap, Tables, PERMANENT};

mod changes;
mod reads;
mod restore;
mod settings;
pub use super::types::*;
pub use restore::PriorBlock;

/// Queue row of addresses awaiting re-assertion after the table was lost.
pub const CLEANUP_ROW: &str = "auto_block.cleanup";
/// Expiries made in one second are spread over this window (100 ms steps).
const SPREAD_STEPS: u64 = 50;
const SPREAD_STEP_MS: u64 = 100;
/// Seconds between purges of expired rows.
const PURGE_EVERY_US: i64 = 5_000_000;

/// Why the engine cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// `firewall.enabled = false`.
    Disabled,
    NotRoot,
    /// No nft program (the configured name).
    NoNft(String),
    /// The kernel refused nftables to this process.
    NotPermitted,
    /// No usable nf_tables (the netlink error).
    Kernel(String),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::Disabled => f.write_str("firewall.enabled is false"),
            Unavailable::NotRoot => {
                f.write_str("the daemon is not running as root (nftables needs CAP_NET_ADMIN)")
            }
            Unavailable::NoNft(name) => write!(
                f,
                "nftables is not installed: no {name} program in PATH, /usr/sbin or /sbin"
            ),
            Unavailable::NotPermitted => {
                f.write_str("not permitted to use nftables (CAP_NET_ADMIN is missing)")
            }
            Unavailable::Kernel(e) => write!(f, "nftables is not available in this kernel: {e}"),
        }
    }
}

impl std::error::Error for Unavailable {}

/// Why [`Firewall::start`] failed.
#[derive(Debug)]
pub enum StartError {
    Netlink(NlError),
    Row(crate::queue::RegisterError),
    Store(crate::store::StoreError),
    Thread(std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Netlink(e) => write!(f, "{e}"),
            StartError::Row(e) => write!(f, "{CLEANUP_ROW}: {e}"),
            StartError::Store(e) => write!(f, "firewall state: {e}"),
            StartError::Thread(e) => write!(f, "cannot start the firewall thread: {e}"),
        }
    }
}

impl std::error::Error for StartError {}

/// The nft program when the engine can run here, else why not.
pub fn availability(cfg: &FirewallConfig) -> Result<PathBuf, Unavailable> {
    if !cfg.enabled {
        return Err(Unavailable::Disabled);
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(Unavailable::NotRoot);
    }
    let Some(nft) = script::locate(&cfg.nft_path) else {
        return Err(Unavailable::NoNft(cfg.nft_path.clone()));
    };
    let mut nl =
        Netlink::open(Duration::from_secs(5)).map_err(|e| Unavailable::Kernel(e.to_string()))?;
    match nl.generation() {
        Ok(_) => Ok(nft),
        Err(e) if e.errno() == Some(nix::errno::Errno::EPERM) => Err(Unavailable::NotPermitted),
        Err(e) => Err(Unavailable::Kernel(e.to_string())),
    }
}

/// Construction options of the engine.
pub struct Options {
    /// `[firewall]` of the configuration file.
    pub file: FirewallConfig,
    /// `auto_response.dry_run`.
    pub auto_dry_run: bool,
    /// Ports opened in `full` mode beside `tcp_in` (the daemon's HTTPS port).
    pub extra_tcp_in: Vec<u16>,
    /// The nft program.
    pub nft: PathBuf,
}

struct Kernel {
    nl: Netlink,
    nft: PathBuf,
    handle: Option<u64>,
    input_rules: usize,
    /// Meter rules the kernel's table holds (`None`: unknown; the next script empties every
    /// meter set).
    meters: Option<script::Meters>,
    /// The table must be re-created from memory (lost, or a batch failed).
    needs_assert: bool,
    /// When the need was noticed (waiting age of the cleanup row).
    since: Option<Admitted>,
}

/// State under the operation lock.
struct Ops {
    kernel: Kernel,
    overrides: Map<String, Value>,
    rollback: Rollback,
    burst: (i64, u64),
    local: (i64, Vec<IpAddr>),
    next_probe: i64,
    next_purge: i64,
    retry_after: i64,
}

#[derive(Default)]
struct Counters {
    transactions: AtomicU64,
    reasserts: AtomicU64,
    kernel_failures: AtomicU64,
    refused: AtomicU64,
    dry_run: AtomicU64,
    /// Address and subnet blocks in memory (expired ones until the next purge).
    blocks: AtomicU64,
}

/// Status facts read without the operation lock.
#[derive(Clone, Default)]
struct View {
    table_present: bool,
    last_reassert: Option<Timestamp>,
    last_error: Option<String>,
    rollback: Rollback,
    /// Settings overrides in force (keys changed through the API).
    overrides: Map<String, Value>,
}

/// The firewall engine. Build with [`Firewall::start`]; share as `Arc<Firewall>`.
pub struct Firewall {
    clock: SharedClock,
    store: Store,
    file: FirewallConfig,
    auto_dry_run: bool,
    extra_tcp_in: Vec<u16>,
    ops: Mutex<Ops>,
    tables: RwLock<Tables>,
    settings: RwLock<Arc<FirewallConfig>>,
    view: Mutex<View>,
    counters: Counters,
    row: RowHandle,
    stop: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Repeated failures (a table that cannot be re-created) log once a minute.
    logs: crate::lograte::LogLimiter,
}

fn now_us(clock: &SharedClock) -> i64 {
    clock.now().as_microsecond()
}

/// The set an entry lives in: addresses in the hash sets, ranges in the interval sets.
fn set_of(net: &Net, kind: Kind) -> SetRef {
    let i = match kind {
        Kind::Allow => 4,
        _ => 0,
    } + if net.is_host() { 0 } else { 2 }
        + usize::from(!net.is_v4());
    ELEMENT_SETS[i].set_ref()
}

fn timeout_ms(e: &Entry, now: i64) -> Option<Option<u64>> {
    if e.permanent() {
        return Some(None);
    }
    let left = e.expires - now;
    (left > 0).then(|| Some((left as u64).div_ceil(1000)))
}

fn local_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
        for a in addrs {
            if let Some(s) = a.address {
                if let Some(v4) = s.as_sockaddr_in() {
                    out.push(IpAddr::V4(v4.ip()));
                } else if let Some(v6) = s.as_sockaddr_in6() {
                    out.push(IpAddr::V6(v6.ip()));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

impl Firewall {
    /// Loads the store, applies a passed rollback deadline, creates table `inet svc` from
    /// the store (structure, then one batch with every element), registers row
    /// `auto_block.cleanup` and starts the timer thread.
    pub fn start(
        opts: Options,
        clock: SharedClock,
        store: Store,
        registry: &Arc<Registry>,
    ) -> Result<Arc<Firewall>, StartError> {
        let nl = Netlink::open(Duration::from_secs(10)).map_err(StartError::Netlink)?;
        let health = QueueHealth::new(
            clock.clone(),
            RowConfig::new("addresses").lag_basis(LagBasis::DeferredCheckpoint),
        );
        let row = registry
            .register(CLEANUP_ROW, health)
            .map_err(StartError::Row)?;
        let now = now_us(&clock);
        let (rows, overrides_text, rollback_text) = store
            .read(|c| {
                Ok((
                    [Kind::Block, Kind::DryRun, Kind::Allow]
                        .map(|k| sfw::load(c, k))
                        .into_iter()
                        .collect::<rusqlite::Result<Vec<_>>>()?,
                    crate::store::kv::get(c, "firewall.overrides")?,
                    crate::store::kv::get(c, "firewall.rollback")?,
                ))
            })
            .map_err(StartError::Store)?;
        let mut tables = Tables::default();
        for (kind, list) in [Kind::Block, Kind::DryRun, Kind::Allow].iter().zip(rows) {
            for r in list {
                let Ok(net) = Net::parse(&r.ip) else {
                    log::warn!(
                        "firewall: ignoring stored entry {:?}: not an address or range",
                        crate::text::for_log(&r.ip, 80)
                    );
                    continue;
                };
                let e = tables.entry(
                    r.created,
                    r.expires.unwrap_or(PERMANENT),
                    &r.reason,
                    &r.source,
                    &r.created_by,
                );
                match kind {
                    Kind::Block if net.is_host() => tables.blocks.insert(net, e),
                    Kind::Block => tables.subnets.insert(net, e),
                    Kind::DryRun => tables.dry.insert(net, e),
                    Kind::Allow => tables.allows.insert(net, e),
                }
            }
        }
        let mut overrides: Map<String, Value> = overrides_text
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        let mut rollback = match rollback_text {
            None => Rollback::default(),
            Some(t) => Rollback::from_json(&t).unwrap_or_else(|e| {
                log::warn!(
                    "firewall: stored rollback state unreadable ({e}); starting without one"
                );
                Rollback::default()
            }),
        };
        let mut persist = false;
        if rollback.due(now) {
            if let Some(p) = rollback.finish("reverted", "restart", "svc", now) {
                log::warn!(
                    "firewall: the tentative settings change passed its deadline while the daemon was down; reverted"
                );
                overrides = p.previous;
                persist = true;
            }
        }
        let settings = match opts.file.with_changes(&opts.file, &overrides) {
            Ok(s) => s,
            Err(errs) => {
                let v: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                log::warn!(
                    "firewall: stored settings overrides no longer validate ({}); using the configuration file",
                    v.join("; ")
                );
                overrides.clear();
                persist = true;
                opts.file.clone()
            }
        };
        if persist {
            let (o, r) = (
                Value::Object(overrides.clone()).to_string(),
                rollback.to_json(),
            );
            store
                .write(move |c| {
                    crate::store::kv::put(c, "firewall.overrides", Some(&o))?;
                    crate::store::kv::put(c, "firewall.rollback", Some(&r))
                })
                .map_err(StartError::Store)?;
        }
        let overrides_view = overrides.clone();
        let fw = Arc::new(Firewall {
            file: opts.file,
            auto_dry_run: opts.auto_dry_run,
            extra_tcp_in: opts.extra_tcp_in,
            ops: Mutex::new(Ops {
                kernel: Kernel {
                    nl,
                    nft: opts.nft,
                    handle: None,
                    input_rules: 0,
                    meters: None,
                    needs_assert: true,
                    since: None,
                },
                overrides,
                rollback: rollback.clone(),
                burst: (0, 0),
                local: (i64::MIN, Vec::new()),
                next_probe: 0,
                next_purge: 0,
                retry_after: 0,
            }),
            tables: RwLock::new(tables),
            settings: RwLock::new(Arc::new(settings)),
            view: Mutex::new(View {
                rollback,
                overrides: overrides_view,
                ..View::default()
            }),
            counters: Counters::default(),
            row,
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
            logs: crate::lograte::LogLimiter::per_minute(clock.clone()),
            store,
            clock,
        });
        fw.note_counts();
        {
            let mut ops = fw.ops.lock();
            ops.kernel.since = Some(fw.row.health().stamp());
            fw.row.health().set_waiting(fw.element_count() as u64);
            if let Err(e) = fw.assert_all(&mut ops) {
                log::error!("firewall: cannot create table inet svc: {e}; retrying");
            }
        }
        let weak = Arc::downgrade(&fw);
        let handle = std::thread::Builder::new()
            .name("firewall".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(200));
                let Some(fw) = weak.upgrade() else { return };
                if fw.stop.load(Ordering::SeqCst) {
                    return;
                }
                fw.tick();
            })
            .map_err(StartError::Thread)?;
        *fw.thread.lock() = Some(handle);
        Ok(fw)
    }

    /// Stops the timer thread. The table stays: blocks keep working while the daemon is
    /// down, and the next start re-asserts it from the store.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }

    /// `auto_response.dry_run`.
    pub fn dry_run(&self) -> bool {
        self.auto_dry_run
    }

    /// The effective settings (file with the run-time overrides).
    pub fn settings(&self) -> Arc<FirewallConfig> {
        self.settings.read().clone()
    }

    fn now(&self) -> i64 {
        now_us(&self.clock)
    }

    fn note_counts(&self) {
        let n = self.tables.read().block_count() as u64;
        self.counters.blocks.store(n, Ordering::Relaxed);
    }

    fn element_count(&self) -> usize {
        let t = self.tables.read();
        t.blocks.len() + t.subnets.len() + t.allows.len()
    }

    /// Creates the structure and replaces every element set's content (two transactions:
    /// the script, then one batch).
    fn assert_all(&self, ops: &mut Ops) -> Result<(), FirewallError> {
        let settings = self.settings();
        let mut st = script::render(
            &settings,
            &self.extra_tcp_in,
            false,
            ops.kernel.meters.as_ref(),
        );
        if let Err(e) = script::run(&ops.kernel.nft, &st.script) {
            ops.kernel.meters = None;
            crate::warn_limited!(
                self.logs,
                "firewall_structure",
                "",
                "firewall: structure update failed ({e}); rebuilding table inet svc"
            );
            st = script::render(&settings, &self.extra_tcp_in, true, None);
            script::run(&ops.kernel.nft, &st.script)
                .map_err(|e| self.kernel_failed(ops, e.to_string()))?;
        }
        ops.kernel.input_rules = st.input_rules;
        ops.kernel.meters = Some(st.meters);
        let now = self.now();
        let mut batch = Batch::new();
        for d in ELEMENT_SETS {
            batch.flush(d.name);
        }
        {
            let t = self.tables.read();
            for (map, kind) in [
                (&t.blocks, Kind::Block),
                (&t.subnets, Kind::Block),
                (&t.allows, Kind::Allow),
            ] {
                for (net, e) in map.iter() {
                    if let Some(to) = timeout_ms(e, now) {
                        batch.add(set_of(net, kind), net, to);
                    }
                }
            }
        }
        ops.kernel
            .nl
            .commit(batch)
            .map_err(|e| self.kernel_failed(ops, e.to_string()))?;
        ops.kernel.handle = ops.kernel.nl.table_handle().ok().flatten();
        ops.kernel.needs_assert = false;
        ops.kernel.since = None;
        self.counters.reasserts.fetch_add(1, Ordering::Relaxed);
        self.counters.transactions.fetch_add(2, Ordering::Relaxed);
        let h = self.row.health();
        h.set_waiting(0);
        h.set_oldest_waiting(None);
        h.note_progress();
        let mut v = self.view.lock();
        v.table_present = true;
        v.last_reassert = Some(self.clock.now());
        v.last_error = None;
        Ok(())
    }

    fn kernel_failed(&self, ops: &mut Ops, msg: String) -> FirewallError {
        self.counters
            .kernel_failures
            .fetch_add(1, Ordering::Relaxed);
        if !ops.kernel.needs_assert {
            ops.kernel.needs_assert = true;
        }
        if ops.kernel.since.is_none() {
            ops.kernel.since = Some(self.row.health().stamp());
        }
        let h = self.row.health();
        h.set_waiting(self.element_count() as u64);
        h.set_oldest_waiting(ops.kernel.since);
        h.note_retry_failed();
        ops.retry_after = self.now() + 2_000_000;
        self.view.lock().last_error = Some(msg.clone());
        FirewallError::Kernel(msg)
    }

    /// Commits an element batch; on a refusal re-asserts everything from memory.
    fn commit(&self, ops: &mut Ops, batch: Batch) -> Result<(), FirewallError> {
        if batch.is_empty() {
            return Ok(());
        }
        if ops.kernel.needs_assert {
            return self.assert_all(ops);
        }
        match ops.kernel.nl.commit(batch) {
            Ok(()) => {
                self.counters.transactions.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                log::warn!("firewall: {e}; re-creating table inet svc from the store");
                self.note_error(&e);
                ops.kernel.needs_assert = true;
                ops.kernel.since = Some(self.row.health().stamp());
                self.row.health().set_waiting(self.element_count() as u64);
                self.assert_all(ops)
            }
        }
    }

    fn note_error(&self, e: &NlError) {
        self.view.lock().last_error = Some(e.to_string());
    }

    fn locals(&self, ops: &mut Ops, now: i64) -> Vec<IpAddr> {
        if now.saturating_sub(ops.local.0) > 10_000_000 || now < ops.local.0 {
            ops.local = (now, local_addresses());
        }
        ops.local.1.clone()
    }

    /// Whether the kernel still holds the table as last asserted.
    fn intact(&self, ops: &mut Ops) -> Result<bool, NlError> {
        let k = &mut ops.kernel;
        let handle = k.nl.table_handle()?;
        if handle.is_none() || handle != k.handle {
            return Ok(false);
        }
        let names = k.nl.set_names()?;
        if script::all_set_names()
            .iter()
            .any(|n| !names.iter().any(|m| m == n))
        {
            return Ok(false);
        }
        Ok(k.nl.rule_count("input")? == k.input_rules)
    }

    /// One timer step: rollback deadline, table check, retries, purge of expired rows.
    pub fn tick(&self) {
        let mut ops = self.ops.lock();
        let now = self.now();
        if ops.rollback.due(now) {
            if let Err(e) = self.revert_locked(&mut ops, "svc", "timer") {
                log::error!("firewall: reverting the tentative change failed: {e}");
            }
        }
        if now >= ops.next_probe {
            let every = self.settings().check_interval_seconds as i64 * 1_000_000;
            ops.next_probe = now + every;
            if !ops.kernel.needs_assert {
                match self.intact(&mut ops) {
                    Ok(true) => self.view.lock().table_present = true,
                    Ok(false) => {
                        log::warn!("firewall: table inet svc was removed or changed by someone else; re-creating it from the store");
                        self.view.lock().table_present = false;
                        ops.kernel.needs_assert = true;
                        ops.kernel.since = Some(self.row.health().stamp());
                        let h = self.row.health();
                        h.set_waiting(self.element_count() as u64);
                        h.set_oldest_waiting(ops.kernel.since);
                    }
                    Err(e) => crate::warn_limited!(
                        self.logs,
                        "firewall_probe",
                        "",
                        "firewall: cannot check table inet svc: {e}"
                    ),
                }
            }
        }
        if ops.kernel.needs_assert && now >= ops.retry_after {
            if let Err(e) = self.assert_all(&mut ops) {
                crate::warn_limited!(
                    self.logs,
                    "firewall_reassert",
                    "",
                    "firewall: re-creating table inet svc failed: {e}; retrying"
                );
            }
        }
        if now >= ops.next_purge {
            ops.next_purge = now + PURGE_EVERY_US;
            self.purge(now);
        }
    }

    fn purge(&self, now: i64) {
        let any = {
            let t = self.tables.read();
            let expired = t
                .blocks
                .iter()
                .chain(t.subnets.iter())
                .chain(t.dry.iter())
                .chain(t.allows.iter())
                .any(|(_, e)| !e.active(now));
            expired
        };
        if !any {
            return;
        }
        match self.store.write(move |c| sfw::purge_expired(c, now)) {
            Ok(_) => {
                let mut t = self.tables.write();
                t.blocks.purge(now);
                t.subnets.purge(now);
                t.dry.purge(now);
                t.allows.purge(now);
                drop(t);
                self.note_counts();
            }
            Err(e) => crate::warn_limited!(
                self.logs,
                "firewall_purge",
                "",
                "firewall: purging expired entries failed: {e}"
            ),
        }
    }
}
