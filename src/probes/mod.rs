//! Kernel probes (issue 29): execution, connection, sensitive-file and AF_ALG backends, and
//! process context for their findings.
//!
//! Data flow, per backend: the kernel program (`bpf/<backend>.bpf.c`) writes records to its
//! ring (`<backend>.kernel`: occupancy in bytes, kernel-side drop counter); the reader
//! thread (`sys::bpf`) copies each record to `bpf.<backend>.output` (256 slots; a refusal is
//! a loss); one consumer parses it (`record`), runs the detection (`detect`) and hands a hit
//! to `processctx.enrichment` (1,024 waiting, 2 workers, overflow replaces the oldest),
//! whose workers add argv from `/proc` and the account (`context`) and submit the finding.
//! Outbound connections on an allowed port also go to `bpf.connection.verdict` (256
//! waiting, 4 running): an advisory threat-score lookup that never holds a finding back.
//!
//! Without the `bpf` feature, or not as root, the configured backends are components that
//! are not attached, with the reason; a backend that cannot attach is reported the same way
//! and the daemon runs on.

pub mod context;
pub mod detect;
pub mod record;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::components::Components;
use crate::config::probes::ProbesConfig;
use crate::model::finding::Finding;
use crate::queue::{BoundedQueue, LagBasis, Registry, RowConfig, RowHandle};

use context::ProcContext;
use detect::Hit;
use record::Head;

/// Slots of each `bpf.<backend>.output` row.
pub const OUTPUT_SLOTS: usize = 256;
/// `bpf.connection.verdict`: waiting and running.
pub const VERDICT_WAITING: usize = 256;
pub const VERDICT_WORKERS: usize = 4;
/// `processctx.enrichment`: waiting and workers.
pub const ENRICH_WAITING: usize = 1024;
pub const ENRICH_WORKERS: usize = 2;
/// Component kind of a backend in `/api/v1/components`.
pub const COMPONENT_KIND: &str = "probe";
/// How often idle workers look at the stop flag.
const IDLE: Duration = Duration::from_millis(200);

/// The component name of `backend`.
pub fn component_name(backend: &str) -> String {
    format!("probe.{backend}")
}

/// Finds the threat database's score (0-100) of an address; `None` when unknown.
pub type ScoreLookup = Arc<dyn Fn(IpAddr) -> Option<u8> + Send + Sync>;
/// Hands a finding to the findings engine.
pub type Submit = Arc<dyn Fn(Finding) + Send + Sync>;

/// What the probes need from the daemon.
pub struct Deps {
    pub clock: SharedClock,
    pub registry: Arc<Registry>,
    pub components: Arc<Components>,
    pub submit: Submit,
    pub score: Option<ScoreLookup>,
    /// `/proc` (a test may point elsewhere).
    pub proc_root: PathBuf,
    /// The passwd file for account names.
    pub passwd: PathBuf,
}

/// A detection waiting for its context.
struct Pending {
    hit: Hit,
    head: Head,
}

/// The shared context pool: `processctx.enrichment` and `processctx.proc_reads`.
struct Enrichment {
    queue: BoundedQueue<Pending>,
    ctx: Arc<ProcContext>,
}

/// The running probes; [`Probes::stop`] ends every thread.
pub struct Probes {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    _rows: Vec<RowHandle>,
}

/// The detail of a backend component in a build without the `bpf` feature. `svc doctor`
/// shows it as ok: a build choice, not a fault (decision 421).
pub const NOT_BUILT: &str = "not built (cargo feature bpf)";

/// Why the backends are not running, for their components.
fn not_running_reason() -> Option<&'static str> {
    if !cfg!(feature = "bpf") {
        return Some(NOT_BUILT);
    }
    if !nix::unistd::geteuid().is_root() {
        return Some("not started: kernel probes need root");
    }
    None
}

impl Probes {
    /// Starts the configured backends; never fails: a backend that cannot start is a
    /// detached component naming why.
    pub fn start(cfg: &ProbesConfig, deps: Deps) -> Probes {
        let mut probes = Probes {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            _rows: Vec::new(),
        };
        if cfg.backends.is_empty() {
            return probes;
        }
        if let Some(reason) = not_running_reason() {
            for b in &cfg.backends {
                let c = deps.components.add(&component_name(b), COMPONENT_KIND);
                c.set_detail(reason);
            }
            return probes;
        }
        probes.start_backends(cfg, &deps);
        probes
    }

    #[cfg(not(feature = "bpf"))]
    fn start_backends(&mut self, _cfg: &ProbesConfig, _deps: &Deps) {}

    #[cfg(feature = "bpf")]
    fn start_backends(&mut self, cfg: &ProbesConfig, deps: &Deps) {
        let enrichment = match self.start_enrichment(deps) {
            Ok(e) => e,
            Err(e) => {
                for b in &cfg.backends {
                    let c = deps.components.add(&component_name(b), COMPONENT_KIND);
                    c.set_detail(format!("not started: {e}"));
                }
                return;
            }
        };
        for b in &cfg.backends {
            let component = deps.components.add(&component_name(b), COMPONENT_KIND);
            match self.start_backend(b, cfg, deps, &enrichment, &component) {
                Ok(()) => {
                    component.attached.store(true, Ordering::Relaxed);
                    component.set_detail("attached");
                    log::info!("kernel probe {b} attached");
                }
                Err(e) => {
                    component.set_detail(format!("cannot attach: {e}"));
                    log::warn!("kernel probe {b} cannot attach: {e}");
                }
            }
        }
    }

    /// `processctx.enrichment` and `processctx.proc_reads`, created when the first probe
    /// consumer starts (the spec: the row appears only then).
    #[cfg_attr(not(feature = "bpf"), allow(dead_code))]
    fn start_enrichment(&mut self, deps: &Deps) -> Result<Arc<Enrichment>, StartError> {
        let ctx = Arc::new(ProcContext::new(
            deps.clock.clone(),
            deps.proc_root.clone(),
            deps.passwd.clone(),
        ));
        let queue = BoundedQueue::new(
            deps.clock.clone(),
            RowConfig::new("requests")
                .capacity(ENRICH_WAITING as u64)
                .running_slots(ENRICH_WORKERS)
                .lag_basis(LagBasis::ConsumerProgress),
        )
        .map_err(|e| StartError::Queue(e.to_string()))?;
        self._rows.push(
            deps.registry
                .register("processctx.enrichment", queue.health().clone())
                .map_err(|e| StartError::Row(e.to_string()))?,
        );
        self._rows.push(
            deps.registry
                .register("processctx.proc_reads", ctx.reads.clone())
                .map_err(|e| StartError::Row(e.to_string()))?,
        );
        let enrichment = Arc::new(Enrichment { queue, ctx });
        for i in 0..ENRICH_WORKERS {
            let e = enrichment.clone();
            let stop = self.stop.clone();
            let submit = deps.submit.clone();
            let clock = deps.clock.clone();
            let t = std::thread::Builder::new()
                .name(format!("processctx-{i}"))
                .spawn(move || enrich_worker(&e, &stop, &submit, &clock))
                .map_err(|e| StartError::Thread(e.to_string()))?;
            self.threads.push(t);
        }
        Ok(enrichment)
    }

    /// Stops every thread (readers unmap their rings first); the rows go after.
    pub fn stop(mut self) {
        self.halt();
    }

    /// Ends every thread; the rows stay registered (showing the unmapped rings).
    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Why the shared context pool did not start.
#[derive(Debug)]
pub enum StartError {
    Queue(String),
    Row(String),
    Thread(String),
    #[cfg(feature = "bpf")]
    Bpf(crate::sys::bpf::BpfError),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Queue(e) => write!(f, "queue: {e}"),
            StartError::Row(e) => write!(f, "health row: {e}"),
            StartError::Thread(e) => write!(f, "thread: {e}"),
            #[cfg(feature = "bpf")]
            StartError::Bpf(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StartError {}

/// Adds context to each waiting detection and submits its finding.
fn enrich_worker(e: &Enrichment, stop: &AtomicBool, submit: &Submit, clock: &SharedClock) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(guard) = e.queue.pop_timeout(IDLE) else {
            continue;
        };
        let Pending { hit, mut head } = guard.finish();
        e.ctx.enrich(&mut head);
        submit(finding_of(hit, &head, &e.ctx, clock));
    }
}

/// The finding of `hit`: the account in the message (the merge key: one finding per
/// account and cause), the chain in the details.
fn finding_of(hit: Hit, head: &Head, ctx: &ProcContext, clock: &SharedClock) -> Finding {
    let account = ctx.account(head.actor.uid);
    let who = account
        .clone()
        .unwrap_or_else(|| format!("uid {}", head.actor.uid));
    let chain = context::chain_text(head, &|u| ctx.account(u));
    let mut f = Finding::new(
        hit.check,
        hit.severity,
        format!("{} [account {who}]", hit.message),
        clock.now(),
    )
    .with_details(format!(
        "process chain (actor first, up to init):\n{chain}cgroup {}",
        head.cgroup
    ));
    if let Some(a) = account {
        f = f.with_account(a);
    }
    if let Some(p) = hit.path {
        f = f.with_path(p);
    }
    if let Some(ip) = hit.ip {
        f = f.with_ip(ip);
    }
    f
}

#[cfg(feature = "bpf")]
mod running;
