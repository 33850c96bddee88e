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
use super::rollback::{self, Pending, Rollback};
use super::script::{self, ELEMENT_SETS};
use super::state::{Entry, NetMap, Tables, PERMANENT};
pub use super::types::*;

/// Queue row of addresses awaiting re-assertion after the table was lost.
pub const CLEANUP_ROW: &str = "auto_block.cleanup";
/// Expiries made in one second are spread over this window (100 ms steps).
const SPREAD_STEPS: u64 = 50;
const SPREAD_STEP_MS: u64 = 100;
/// Seconds between purges of expired rows.
const PURGE_EVERY_US: i64 = 5_000_000;

/// Why the engine is not running.
pub fn availability(cfg: &FirewallConfig) -> Result<PathBuf, String> {
    if !cfg.enabled {
        return Err("firewall.enabled is false".into());
    }
    if !nix::unistd::geteuid().is_root() {
        return Err("the daemon is not running as root (nftables needs CAP_NET_ADMIN)".into());
    }
    let Some(nft) = script::locate(&cfg.nft_path) else {
        return Err(format!(
            "nftables is not installed: no {} program in PATH, /usr/sbin or /sbin",
            cfg.nft_path
        ));
    };
    let mut nl = Netlink::open(Duration::from_secs(5))
        .map_err(|e| format!("nftables is not available: {e}"))?;
    match nl.generation() {
        Ok(_) => Ok(nft),
        Err(e) if e.errno() == Some(nix::errno::Errno::EPERM) => {
            Err("not permitted to use nftables (CAP_NET_ADMIN is missing)".into())
        }
        Err(e) => Err(format!("nftables is not available in this kernel: {e}")),
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
    ) -> Result<Arc<Firewall>, String> {
        let nl = Netlink::open(Duration::from_secs(10)).map_err(|e| e.to_string())?;
        let health = QueueHealth::new(
            clock.clone(),
            RowConfig::new("addresses").lag_basis(LagBasis::DeferredCheckpoint),
        );
        let row = registry
            .register(CLEANUP_ROW, health)
            .map_err(|e| format!("{CLEANUP_ROW}: {e}"))?;
        let now = now_us(&clock);
        let (rows, overrides_text, rollback_text) = store
            .read(|c| {
                Ok((
                    [Kind::Block, Kind::DryRun, Kind::Allow]
                        .map(|k| sfw::load(c, k))
                        .into_iter()
                        .collect::<rusqlite::Result<Vec<_>>>()?,
                    sfw::kv_get(c, "firewall.overrides")?,
                    sfw::kv_get(c, "firewall.rollback")?,
                ))
            })
            .map_err(|e| format!("loading firewall state: {e}"))?;
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
                    sfw::kv_set(c, "firewall.overrides", Some(&o))?;
                    sfw::kv_set(c, "firewall.rollback", Some(&r))
                })
                .map_err(|e| format!("saving firewall state: {e}"))?;
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
            .map_err(|e| e.to_string())?;
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
        let st = script::render(&settings, &self.extra_tcp_in, false);
        if let Err(e) = script::run(&ops.kernel.nft, &st.script) {
            crate::warn_limited!(
                self.logs,
                "firewall_structure",
                "",
                "firewall: structure update failed ({e}); rebuilding table inet svc"
            );
            let st = script::render(&settings, &self.extra_tcp_in, true);
            script::run(&ops.kernel.nft, &st.script)
                .map_err(|e| self.kernel_failed(ops, e.to_string()))?;
        }
        ops.kernel.input_rules = st.input_rules;
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

    /// Why `net` may not be blocked by `actor`, if it may not.
    fn refusal(
        &self,
        net: &Net,
        actor: &Actor,
        t: &Tables,
        s: &FirewallConfig,
        locals: &[IpAddr],
        now: i64,
    ) -> Option<Refusal> {
        if net.is_default_route() {
            return Some(Refusal::DefaultRoute);
        }
        if is_loopback_or_unspecified(net.addr()) {
            return Some(Refusal::Local(net.addr()));
        }
        if let Some(ip) = locals.iter().find(|ip| net.contains_ip(**ip)) {
            return Some(Refusal::Local(*ip));
        }
        if !net.is_host() {
            let lo = if net.is_v4() {
                Net::parse("127.0.0.0/8").ok()
            } else {
                Net::parse("::1").ok()
            };
            if let Some(lo) = lo.filter(|lo| net.overlaps(lo)) {
                return Some(Refusal::Local(lo.addr()));
            }
        }
        if let Some(i) = s.infra_ips.iter().find(|i| i.overlaps(net)) {
            return Some(Refusal::Infra(*i));
        }
        if let Some((entry, e)) = t.allows.overlapping(net, now) {
            return Some(Refusal::Allowed {
                entry,
                reason: e.reason.to_string(),
            });
        }
        if let Actor::Operator {
            protect: Some(ip), ..
        } = actor
        {
            if !net.is_host() && net.contains_ip(*ip) {
                return Some(Refusal::OwnAddress(*ip));
            }
        }
        if !net.is_host() {
            if let Some((other, _)) = t.subnets.overlapping(net, now) {
                if other != *net {
                    return Some(Refusal::OverlapsSubnet(other));
                }
            }
        }
        None
    }

    /// Expiry of a temporary block made now: spread in 100 ms steps over five seconds
    /// across the blocks of one second (never more than a tenth of the duration), so a mass
    /// ban does not lapse at one instant.
    fn spread_expiry(ops: &mut Ops, now: i64, d: Duration) -> i64 {
        let sec = now.div_euclid(1_000_000);
        if ops.burst.0 != sec {
            ops.burst = (sec, 0);
        }
        let k = ops.burst.1;
        ops.burst.1 += 1;
        let d_ms = d.as_millis().min(u64::MAX as u128) as u64;
        let offset_ms = ((k % SPREAD_STEPS) * SPREAD_STEP_MS).min(d_ms / 10);
        now.saturating_add((d_ms.saturating_add(offset_ms) as i64).saturating_mul(1000))
    }

    /// Blocks addresses and subnets: all accepted items in one store transaction and one
    /// kernel transaction. Automatic callers in dry-run mode only record what they would
    /// have blocked. Each item gets an [`Outcome`]; the call fails only when the store or
    /// nftables does.
    pub fn block(
        &self,
        items: Vec<BlockItem>,
        actor: &Actor,
    ) -> Result<Vec<Outcome>, FirewallError> {
        for it in &items {
            check_reason(&it.reason)?;
        }
        let mut ops = self.ops.lock();
        let now = self.now();
        let settings = self.settings();
        let locals = self.locals(&mut ops, now);
        let dry = actor.automatic() && self.auto_dry_run;
        let mut outcomes = Vec::with_capacity(items.len());
        let mut puts: Vec<(Net, Entry)> = Vec::new();
        let mut replaced: std::collections::HashSet<Net> = std::collections::HashSet::new();
        let mut seen = std::collections::HashSet::new();
        {
            let mut t = self.tables.write();
            let mut count = if dry { t.dry.len() } else { t.block_count() };
            for it in items {
                let net = it.net;
                if !seen.insert(net) {
                    outcomes.push(Outcome::Unchanged {
                        net,
                        why: "listed twice in this request".into(),
                    });
                    continue;
                }
                if let Some(r) = self.refusal(&net, actor, &t, &settings, &locals, now) {
                    self.counters.refused.fetch_add(1, Ordering::Relaxed);
                    outcomes.push(Outcome::Refused { net, refusal: r });
                    continue;
                }
                let existing = if net.is_host() {
                    t.block_for(net.addr(), now).map(|(n, e)| (n, e.clone()))
                } else {
                    t.subnets.get(&net, now).map(|e| (net, e.clone()))
                };
                let expires = match it.duration {
                    None => PERMANENT,
                    Some(d) => Self::spread_expiry(&mut ops, now, d),
                };
                if let Some((by, e)) = &existing {
                    let longer = e.permanent() || (expires != PERMANENT && e.expires >= expires);
                    if longer || by != &net {
                        let why = if by != &net {
                            format!("already blocked by subnet {by}")
                        } else if e.permanent() {
                            "already blocked permanently; unblock first to change its lifetime"
                                .into()
                        } else {
                            format!(
                                "already blocked until {}; unblock first to shorten it",
                                e.expires_at().map(rfc3339).unwrap_or_default()
                            )
                        };
                        outcomes.push(Outcome::Unchanged { net, why });
                        continue;
                    }
                }
                let map_has = |t: &Tables| {
                    if dry {
                        t.dry.get(&net, now).cloned()
                    } else {
                        None
                    }
                };
                if let Some(e) = map_has(&t) {
                    if e.permanent() || (expires != PERMANENT && e.expires >= expires) {
                        outcomes.push(Outcome::Unchanged {
                            net,
                            why: "a dry-run record as long or longer exists".into(),
                        });
                        continue;
                    }
                }
                let is_new = if dry {
                    t.dry.get(&net, i64::MIN).is_none()
                } else {
                    existing.is_none()
                };
                if is_new && count >= settings.max_blocks {
                    self.counters.refused.fetch_add(1, Ordering::Relaxed);
                    outcomes.push(Outcome::Refused {
                        net,
                        refusal: Refusal::Limit(settings.max_blocks),
                    });
                    continue;
                }
                if is_new {
                    count += 1;
                }
                let entry = t.entry(now, expires, &it.reason, actor.source(), actor.name());
                let expires_at = entry.expires_at();
                if !dry && existing.is_some() {
                    replaced.insert(net);
                }
                puts.push((net, entry));
                outcomes.push(if dry {
                    Outcome::DryRun { net, expires_at }
                } else {
                    Outcome::Blocked { net, expires_at }
                });
            }
        }
        if puts.is_empty() {
            return Ok(outcomes);
        }
        let kind = if dry { Kind::DryRun } else { Kind::Block };
        let rows: Vec<sfw::Row> = puts.iter().map(|(n, e)| e.row(n)).collect();
        self.store.write(move |c| sfw::upsert(c, kind, &rows))?;
        let mut batch = Batch::new();
        {
            let mut t = self.tables.write();
            for (net, e) in &puts {
                if dry {
                    t.dry.insert(*net, e.clone());
                    self.counters.dry_run.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let map = if net.is_host() {
                    &mut t.blocks
                } else {
                    &mut t.subnets
                };
                if replaced.contains(net) {
                    batch.delete(set_of(net, Kind::Block), net);
                }
                map.insert(*net, e.clone());
                if let Some(to) = timeout_ms(e, now) {
                    batch.add(set_of(net, Kind::Block), net, to);
                }
            }
        }
        self.note_counts();
        if !dry {
            self.commit(&mut ops, batch)?;
        }
        Ok(outcomes)
    }

    /// Removes every block of address `ip` (its address block and any dry-run record), not
    /// subnets. Nothing to remove is `NotFound`, naming a subnet that still covers it.
    pub fn unblock(&self, ip: IpAddr) -> Result<Vec<Listed>, FirewallError> {
        let net = Net::host(ip);
        let mut ops = self.ops.lock();
        let now = self.now();
        let (block, dry) = {
            let t = self.tables.read();
            (
                t.blocks.get(&net, i64::MIN).cloned(),
                t.dry.get(&net, i64::MIN).cloned(),
            )
        };
        let active = block.as_ref().is_some_and(|e| e.active(now));
        let dry_active = dry.as_ref().is_some_and(|e| e.active(now));
        if !active && !dry_active {
            let t = self.tables.read();
            return Err(FirewallError::NotFound(match t.subnets.containing(ip, now) {
                Some((s, _)) => format!(
                    "{net} has no address block; it is covered by blocked subnet {s} (use remove-subnet)"
                ),
                None => format!("{net} is not blocked"),
            }));
        }
        let key = net.to_string();
        let (b, d) = (block.is_some(), dry.is_some());
        self.store.write(move |c| {
            if b {
                sfw::delete(c, Kind::Block, std::slice::from_ref(&key))?;
            }
            if d {
                sfw::delete(c, Kind::DryRun, std::slice::from_ref(&key))?;
            }
            Ok(())
        })?;
        let mut removed = Vec::new();
        let mut batch = Batch::new();
        {
            let mut t = self.tables.write();
            if let Some(e) = t.blocks.remove(&net) {
                if e.active(now) {
                    batch.delete(set_of(&net, Kind::Block), &net);
                    removed.push(Listed {
                        net,
                        entry: e,
                        dry_run: false,
                    });
                }
            }
            if let Some(e) = t.dry.remove(&net) {
                if e.active(now) {
                    removed.push(Listed {
                        net,
                        entry: e,
                        dry_run: true,
                    });
                }
            }
        }
        self.note_counts();
        self.commit(&mut ops, batch)?;
        Ok(removed)
    }

    /// Blocks a subnet permanently (`deny-subnet`).
    pub fn deny_subnet(
        &self,
        net: Net,
        reason: &str,
        actor: &Actor,
    ) -> Result<Outcome, FirewallError> {
        if net.is_host() {
            return Err(FirewallError::Invalid(format!(
                "{net} is a single address; give a range such as {}",
                Net::covering(net.addr(), if net.is_v4() { 24 } else { 64 })
            )));
        }
        let out = self.block(
            vec![BlockItem {
                net,
                reason: reason.into(),
                duration: None,
            }],
            actor,
        )?;
        out.into_iter()
            .next()
            .ok_or_else(|| FirewallError::Invalid("empty request".into()))
    }

    /// Removes a subnet block.
    pub fn remove_subnet(&self, net: Net) -> Result<Listed, FirewallError> {
        let mut ops = self.ops.lock();
        let now = self.now();
        let found = self.tables.read().subnets.get(&net, now).cloned();
        let Some(entry) = found else {
            return Err(FirewallError::NotFound(format!(
                "{net} is not a blocked subnet"
            )));
        };
        let key = net.to_string();
        self.store
            .write(move |c| sfw::delete(c, Kind::Block, std::slice::from_ref(&key)))?;
        self.tables.write().subnets.remove(&net);
        self.note_counts();
        let mut batch = Batch::new();
        batch.delete(set_of(&net, Kind::Block), &net);
        self.commit(&mut ops, batch)?;
        Ok(Listed {
            net,
            entry,
            dry_run: false,
        })
    }

    /// Removes every temporary block (addresses and subnets) and temporary dry-run record;
    /// permanent ones stay. Returns how many were removed.
    pub fn flush_temporary(&self) -> Result<usize, FirewallError> {
        let mut ops = self.ops.lock();
        let now = self.now();
        let (blocks, dry): (Vec<(Net, Entry)>, Vec<Net>) = {
            let t = self.tables.read();
            let temp = |m: &NetMap| -> Vec<(Net, Entry)> {
                m.active(now)
                    .filter(|(_, e)| !e.permanent())
                    .map(|(n, e)| (*n, e.clone()))
                    .collect()
            };
            let mut b = temp(&t.blocks);
            b.extend(temp(&t.subnets));
            (b, temp(&t.dry).into_iter().map(|(n, _)| n).collect())
        };
        if blocks.is_empty() && dry.is_empty() {
            return Ok(0);
        }
        let keys: Vec<String> = blocks.iter().map(|(n, _)| n.to_string()).collect();
        let dkeys: Vec<String> = dry.iter().map(|n| n.to_string()).collect();
        self.store.write(move |c| {
            sfw::delete(c, Kind::Block, &keys)?;
            sfw::delete(c, Kind::DryRun, &dkeys)
        })?;
        let mut batch = Batch::new();
        {
            let mut t = self.tables.write();
            for (n, _) in &blocks {
                if n.is_host() {
                    t.blocks.remove(n);
                } else {
                    t.subnets.remove(n);
                }
                batch.delete(set_of(n, Kind::Block), n);
            }
            for n in &dry {
                t.dry.remove(n);
            }
        }
        self.note_counts();
        self.commit(&mut ops, batch)?;
        Ok(blocks.len() + dry.len())
    }

    /// Adds (or renews) an allow entry. Address blocks and dry-run records inside it are
    /// removed in the same transactions; a blocked subnet overlapping it keeps dropping
    /// (blocked drop precedes allowed accept), reported as a warning.
    pub fn allow(
        &self,
        net: Net,
        reason: &str,
        duration: Option<Duration>,
        actor: &Actor,
    ) -> Result<AllowOutcome, FirewallError> {
        check_reason(reason)?;
        if net.is_default_route() {
            return Err(FirewallError::Invalid(
                "a default route (0.0.0.0/0, ::/0) cannot be allowed".into(),
            ));
        }
        let mut ops = self.ops.lock();
        let now = self.now();
        let settings = self.settings();
        let (entry, replaced, unblocked, undry, warning) = {
            let mut t = self.tables.write();
            let replaced = match t.allows.overlapping(&net, now) {
                Some((other, _)) if other != net => {
                    return Err(FirewallError::Refused(format!(
                        "{net} overlaps allow entry {other}; remove it first"
                    )))
                }
                Some(_) => true,
                None => false,
            };
            if !replaced && t.allows.len() >= settings.max_allows {
                return Err(FirewallError::Refused(format!(
                    "firewall.max_allows ({}) reached",
                    settings.max_allows
                )));
            }
            let expires = match duration {
                None => PERMANENT,
                Some(d) => now.saturating_add(d.as_micros().min(i64::MAX as u128) as i64),
            };
            let entry = t.entry(now, expires, reason, "", actor.name());
            let unblocked = t.blocks.inside(&net, now);
            let undry = t.dry.inside(&net, now);
            let warning = t.subnets.overlapping(&net, now).map(|(s, _)| {
                format!("blocked subnet {s} overlaps {net} and still drops it: blocked drop takes precedence over the allow list")
            });
            (entry, replaced, unblocked, undry, warning)
        };
        let row = entry.row(&net);
        let bkeys: Vec<String> = unblocked.iter().map(|n| n.to_string()).collect();
        let dkeys: Vec<String> = undry.iter().map(|n| n.to_string()).collect();
        self.store.write(move |c| {
            sfw::upsert(c, Kind::Allow, &[row])?;
            sfw::delete(c, Kind::Block, &bkeys)?;
            sfw::delete(c, Kind::DryRun, &dkeys)
        })?;
        let mut batch = Batch::new();
        {
            let mut t = self.tables.write();
            for n in &unblocked {
                t.blocks.remove(n);
                batch.delete(set_of(n, Kind::Block), n);
            }
            for n in &undry {
                t.dry.remove(n);
            }
            if replaced {
                batch.delete(set_of(&net, Kind::Allow), &net);
            }
            if let Some(to) = timeout_ms(&entry, now) {
                batch.add(set_of(&net, Kind::Allow), &net, to);
            }
            t.allows.insert(net, entry.clone());
        }
        self.note_counts();
        self.commit(&mut ops, batch)?;
        let mut unblocked = unblocked;
        unblocked.extend(undry);
        unblocked.sort();
        unblocked.dedup();
        Ok(AllowOutcome {
            net,
            expires_at: entry.expires_at(),
            unblocked,
            warning,
        })
    }

    /// Removes an allow entry (exactly `net`).
    pub fn unallow(&self, net: Net) -> Result<Listed, FirewallError> {
        let mut ops = self.ops.lock();
        let now = self.now();
        let found = self.tables.read().allows.get(&net, now).cloned();
        let Some(entry) = found else {
            let t = self.tables.read();
            return Err(FirewallError::NotFound(
                match t.allows.containing(net.addr(), now) {
                    Some((other, _)) if net.is_host() => {
                        format!(
                            "{net} has no allow entry of its own; allow entry {other} covers it"
                        )
                    }
                    _ => format!("{net} is not on the allow list"),
                },
            ));
        };
        let key = net.to_string();
        self.store
            .write(move |c| sfw::delete(c, Kind::Allow, std::slice::from_ref(&key)))?;
        self.tables.write().allows.remove(&net);
        let mut batch = Batch::new();
        batch.delete(set_of(&net, Kind::Allow), &net);
        self.commit(&mut ops, batch)?;
        Ok(Listed {
            net,
            entry,
            dry_run: false,
        })
    }

    /// Whether `ip` is on the allow list (for automatic callers).
    pub fn is_allowed(&self, ip: IpAddr) -> bool {
        let now = self.now();
        self.tables.read().allows.containing(ip, now).is_some()
    }

    /// What the firewall does with `ip`.
    pub fn check(&self, ip: IpAddr) -> CheckResult {
        let now = self.now();
        let ip = ip.to_canonical();
        let settings = self.settings();
        let t = self.tables.read();
        CheckResult {
            ip,
            block: t.block_for(ip, now).map(|(n, e)| (n, e.clone())),
            allow: t.allows.containing(ip, now).map(|(n, e)| (n, e.clone())),
            infra: settings
                .infra_ips
                .iter()
                .find(|n| n.contains_ip(ip))
                .copied(),
            dry_run: t
                .dry
                .get(&Net::host(ip), now)
                .map(|e| (Net::host(ip), e.clone())),
            now,
        }
    }

    /// Blocks and dry-run records, newest first.
    pub fn list(&self) -> Vec<Listed> {
        let now = self.now();
        let t = self.tables.read();
        let mut out: Vec<Listed> = Vec::with_capacity(t.block_count() + t.dry.len());
        for (m, dry) in [(&t.blocks, false), (&t.subnets, false), (&t.dry, true)] {
            out.extend(m.active(now).map(|(n, e)| Listed {
                net: *n,
                entry: e.clone(),
                dry_run: dry,
            }));
        }
        out.sort_by(|a, b| {
            b.entry
                .created
                .cmp(&a.entry.created)
                .then_with(|| a.net.cmp(&b.net))
        });
        out
    }

    /// Allow entries, newest first.
    pub fn allows(&self) -> Vec<Listed> {
        let now = self.now();
        let t = self.tables.read();
        let mut out: Vec<Listed> = t
            .allows
            .active(now)
            .map(|(n, e)| Listed {
                net: *n,
                entry: e.clone(),
                dry_run: false,
            })
            .collect();
        out.sort_by_key(|l| std::cmp::Reverse(l.entry.created));
        out
    }

    /// Address and subnet blocks, for the status snapshot's blocklist size: an atomic, so
    /// health reads never wait for an operation (expired blocks count until the purge, at
    /// most five seconds).
    pub fn blocked_count(&self) -> u64 {
        self.counters.blocks.load(Ordering::Relaxed)
    }

    /// Bytes the engine's tables hold (benchmark).
    pub fn heap_bytes(&self) -> usize {
        self.tables.read().heap_bytes()
    }

    /// The rollback state (`GET /api/v1/settings/firewall/rollback`, status snapshot).
    pub fn rollback_view(&self) -> Value {
        let r = self.view.lock().rollback.clone();
        r.view(self.now())
    }

    /// `GET /api/v1/firewall/status`.
    pub fn status(&self) -> Value {
        let now = self.now();
        let settings = self.settings();
        let (sets, blocks, dry, allows) = {
            let t = self.tables.read();
            let mut sets = Map::new();
            let count =
                |m: &NetMap, v4: bool| m.active(now).filter(|(n, _)| n.is_v4() == v4).count();
            for (name, map) in [("block", &t.blocks), ("blocknet", &t.subnets)] {
                sets.insert(format!("{name}4"), count(map, true).into());
                sets.insert(format!("{name}6"), count(map, false).into());
            }
            for (name, host) in [("allow", true), ("allownet", false)] {
                for (v4, fam) in [(true, "4"), (false, "6")] {
                    let n = t
                        .allows
                        .active(now)
                        .filter(|(n, _)| n.is_v4() == v4 && n.is_host() == host)
                        .count();
                    sets.insert(format!("{name}{fam}"), n.into());
                }
            }
            for (name, list) in [
                ("infra", &settings.infra_ips),
                ("dosx", &settings.dos_exempt_ranges),
            ] {
                sets.insert(
                    format!("{name}4"),
                    list.iter().filter(|n| n.is_v4()).count().into(),
                );
                sets.insert(
                    format!("{name}6"),
                    list.iter().filter(|n| !n.is_v4()).count().into(),
                );
            }
            let temp = t.blocks.active(now).filter(|(_, e)| !e.permanent()).count()
                + t.subnets
                    .active(now)
                    .filter(|(_, e)| !e.permanent())
                    .count();
            let addr = t.blocks.active(now).count();
            let sub = t.subnets.active(now).count();
            (
                sets,
                json!({"addresses": addr, "subnets": sub, "temporary": temp, "permanent": addr + sub - temp}),
                t.dry.active(now).count(),
                t.allows.active(now).count(),
            )
        };
        let v = self.view.lock().clone();
        let mut m = Map::new();
        m.insert("ok".into(), true.into());
        m.insert("active".into(), true.into());
        m.insert("mode".into(), settings.mode.as_str().into());
        m.insert("table".into(), format!("inet {}", super::TABLE).into());
        m.insert("table_present".into(), v.table_present.into());
        m.insert("sets".into(), Value::Object(sets));
        m.insert("blocks".into(), blocks);
        m.insert("dry_run_records".into(), dry.into());
        m.insert("allows".into(), allows.into());
        m.insert("dry_run".into(), self.auto_dry_run.into());
        if let Some(t) = v.last_reassert {
            m.insert("last_reassert_at".into(), rfc3339(t).into());
        }
        m.insert(
            "reasserts_total".into(),
            self.counters.reasserts.load(Ordering::Relaxed).into(),
        );
        m.insert(
            "transactions_total".into(),
            self.counters.transactions.load(Ordering::Relaxed).into(),
        );
        m.insert(
            "kernel_failures_total".into(),
            self.counters.kernel_failures.load(Ordering::Relaxed).into(),
        );
        m.insert(
            "refused_total".into(),
            self.counters.refused.load(Ordering::Relaxed).into(),
        );
        m.insert(
            "dry_run_total".into(),
            self.counters.dry_run.load(Ordering::Relaxed).into(),
        );
        if let Some(e) = v.last_error {
            m.insert("last_error".into(), e.into());
        }
        m.insert("rollback".into(), v.rollback.view(now));
        m.insert("settings".into(), settings.runtime_json());
        m.insert("overrides".into(), Value::Object(v.overrides));
        Value::Object(m)
    }

    /// Applies a settings change with a rollback timer of `timeout_min` minutes (1-30).
    pub fn tentative_apply(
        &self,
        changes: Map<String, Value>,
        timeout_min: u64,
        by: &str,
    ) -> Result<Value, FirewallError> {
        if !(rollback::MIN_MINUTES..=rollback::MAX_MINUTES).contains(&timeout_min) {
            return Err(FirewallError::Invalid(format!(
                "timeout_min must be from {} to {} minutes",
                rollback::MIN_MINUTES,
                rollback::MAX_MINUTES
            )));
        }
        if changes.is_empty() {
            return Err(FirewallError::Invalid(
                "changes must name at least one [firewall] key".into(),
            ));
        }
        let mut ops = self.ops.lock();
        if ops.rollback.pending.is_some() {
            return Err(FirewallError::Refused(
                "a tentative firewall change is already pending; confirm or revert it first".into(),
            ));
        }
        let applied = rollback::merge(&ops.overrides, &changes);
        let settings = self
            .file
            .with_changes(&self.file, &applied)
            .map_err(FirewallError::Settings)?;
        let now = self.now();
        let deadline = now.saturating_add((timeout_min * 60_000_000) as i64);
        let mut rb = ops.rollback.clone();
        rb.start(Pending {
            deadline,
            started: now,
            timeout_min,
            previous: ops.overrides.clone(),
            applied: applied.clone(),
            changes,
            by: by.into(),
        });
        self.persist(&applied, &rb)?;
        let previous = std::mem::replace(&mut *self.settings.write(), Arc::new(settings));
        if let Err(e) = self.apply_structure(&mut ops) {
            // Nothing tentative survives a failed apply: restore and record it.
            *self.settings.write() = previous;
            let mut rb2 = rb.clone();
            rb2.finish("reverted", "apply_failed", by, now);
            let prev = ops.overrides.clone();
            let _ = self.persist(&prev, &rb2);
            let _ = self.apply_structure(&mut ops);
            ops.rollback = rb2.clone();
            self.view.lock().rollback = rb2;
            return Err(e);
        }
        ops.overrides = applied;
        ops.rollback = rb.clone();
        {
            let mut v = self.view.lock();
            v.rollback = rb.clone();
            v.overrides = ops.overrides.clone();
        }
        log::warn!(
            "firewall: tentative settings change applied by {}; reverts in {timeout_min} min unless confirmed",
            crate::text::for_log(by, 64)
        );
        Ok(rb.view(now))
    }

    /// Keeps the pending change.
    pub fn confirm(&self, by: &str) -> Result<Value, FirewallError> {
        let mut ops = self.ops.lock();
        let now = self.now();
        let mut rb = ops.rollback.clone();
        if rb.finish("confirmed", "operator", by, now).is_none() {
            return Err(FirewallError::Refused(
                "no tentative firewall change is pending".into(),
            ));
        }
        let o = ops.overrides.clone();
        self.persist(&o, &rb)?;
        ops.rollback = rb.clone();
        self.view.lock().rollback = rb.clone();
        log::info!(
            "firewall: tentative settings change confirmed by {}",
            crate::text::for_log(by, 64)
        );
        Ok(rb.view(now))
    }

    /// Restores the settings from before the pending change.
    pub fn revert(&self, by: &str) -> Result<Value, FirewallError> {
        let mut ops = self.ops.lock();
        self.revert_locked(&mut ops, by, "operator")
    }

    fn revert_locked(&self, ops: &mut Ops, by: &str, reason: &str) -> Result<Value, FirewallError> {
        let now = self.now();
        let mut rb = ops.rollback.clone();
        let Some(p) = rb.finish("reverted", reason, by, now) else {
            return Err(FirewallError::Refused(
                "no tentative firewall change is pending".into(),
            ));
        };
        let settings = match self.file.with_changes(&self.file, &p.previous) {
            Ok(s) => s,
            Err(_) => self.file.clone(),
        };
        self.persist(&p.previous, &rb)?;
        ops.overrides = p.previous;
        ops.rollback = rb.clone();
        {
            let mut v = self.view.lock();
            v.rollback = rb.clone();
            v.overrides = ops.overrides.clone();
        }
        *self.settings.write() = Arc::new(settings);
        log::warn!("firewall: tentative settings change reverted ({reason})");
        self.apply_structure(ops)?;
        Ok(rb.view(now))
    }

    fn persist(&self, overrides: &Map<String, Value>, rb: &Rollback) -> Result<(), FirewallError> {
        let o = Value::Object(overrides.clone()).to_string();
        let r = rb.to_json();
        self.store.write(move |c| {
            sfw::kv_set(c, "firewall.overrides", Some(&o))?;
            sfw::kv_set(c, "firewall.rollback", Some(&r))
        })?;
        Ok(())
    }

    /// Applies the structure for the current settings (one `nft -f` transaction); when
    /// the table needs more, re-asserts everything.
    fn apply_structure(&self, ops: &mut Ops) -> Result<(), FirewallError> {
        if ops.kernel.needs_assert {
            return self.assert_all(ops);
        }
        let st = script::render(&self.settings(), &self.extra_tcp_in, false);
        match script::run(&ops.kernel.nft, &st.script) {
            Ok(()) => {
                ops.kernel.input_rules = st.input_rules;
                self.counters.transactions.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                log::warn!("firewall: {e}; re-creating table inet svc");
                ops.kernel.needs_assert = true;
                self.assert_all(ops)
            }
        }
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
