//! Scan jobs: `scans.jobs` (8 waiting, 1 worker) and `scans.admission`, job records in the
//! store, the critical/deep schedule, and `latest_scan`.
//!
//! Records left `queued` or `running` by a previous process become `error` with reason
//! `daemon_restarted` at startup and count as losses of `scans.jobs`.
//!
//! Deep and full scans also run the registered [`ScanTask`]s (checks that keep state
//! between scans, such as the mailbox password audit) after the deep checks. A task that
//! did not complete a check answers `None` for it: its findings stay as they are. Account
//! scans run each task's [`ScanTask::run_account`] over the account's web roots.
//!
//! Two more rows measure the checks a job dispatches: `checks.dispatch` holds one unit per
//! check function and runner wrapper (task) the running job still has to start (no fixed
//! capacity: a job's list is as long as its kind), and `checks.executions` the one check or
//! task running now (capacity 1, the single scan worker). A check that panics counts as one
//! lost execution; a cancelled or shut-down job withdraws its pending checks without loss.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, Sender};
use jiff::Timestamp;
use parking_lot::Mutex;
use serde::Serialize;

use super::{critical_checks, deep_checks, CheckContext, NamedCheck};
use crate::clock::SharedClock;
use crate::findings::{Engine, Finding, Ingest};
use crate::queue::{
    BoundedQueue, LagBasis, PhaseBudgets, PopError, QueueHealth, Registry, RowConfig, RowError,
    RowHandle, Ticket,
};
use crate::store::{Store, StoreError};

/// Row of the check function or task running now.
pub const EXECUTIONS_ROW: &str = "checks.executions";
/// Row of the checks and tasks a running job has yet to start.
pub const DISPATCH_ROW: &str = "checks.dispatch";
/// Processing budget of one check function or task (a deep check walks every web root).
const CHECK_BUDGET: Duration = Duration::from_secs(15 * 60);

/// Why the scan jobs could not be set up or started.
#[derive(Debug)]
pub enum JobsError {
    /// A queue row could not be built or registered.
    Queue(RowError),
    /// The stored jobs could not be read or their leftovers marked; `what` says which.
    Store {
        what: &'static str,
        source: StoreError,
    },
    /// The worker or the scheduler thread could not be started.
    Spawn(std::io::Error),
}

impl From<RowError> for JobsError {
    fn from(e: RowError) -> Self {
        JobsError::Queue(e)
    }
}

impl std::fmt::Display for JobsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobsError::Queue(e) => write!(f, "{e}"),
            JobsError::Store { what, source } => write!(f, "{what}: {source}"),
            JobsError::Spawn(e) => write!(f, "cannot start a scan thread: {e}"),
        }
    }
}

impl std::error::Error for JobsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            JobsError::Queue(e) => Some(e),
            JobsError::Store { source, .. } => Some(source),
            JobsError::Spawn(e) => Some(e),
        }
    }
}

/// Why a scan job was not queued or not answered.
#[derive(Debug)]
pub enum RequestError {
    /// The job record could not be written.
    Store(StoreError),
    /// `scans.jobs` already holds [`JOB_CAPACITY`] waiting jobs.
    QueueFull,
    /// The caller stopped waiting for job `id` (it stays queued or running).
    Timeout(i64),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::Store(e) => write!(f, "cannot record the scan job: {e}"),
            RequestError::QueueFull => write!(
                f,
                "scan queue is full ({JOB_CAPACITY} jobs waiting); try again later"
            ),
            RequestError::Timeout(id) => write!(f, "scan job {id} did not finish in time"),
        }
    }
}

impl std::error::Error for RequestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RequestError::Store(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a scan job was not cancelled.
#[derive(Debug)]
pub enum CancelError {
    NoSuchJob(i64),
    /// The job already ended in this state.
    Finished {
        id: i64,
        state: String,
    },
    Store(StoreError),
}

impl std::fmt::Display for CancelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CancelError::NoSuchJob(id) => write!(f, "no scan job {id}"),
            CancelError::Finished { id, state } => {
                write!(f, "scan job {id} already ended ({state})")
            }
            CancelError::Store(e) => write!(f, "cannot cancel the scan job: {e}"),
        }
    }
}

impl std::error::Error for CancelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CancelError::Store(e) => Some(e),
            _ => None,
        }
    }
}

/// `kv` key of the last hardening audit (a JSON document).
const HARDENING_KEY: &str = "hardening";

/// Waiting jobs at most.
pub const JOB_CAPACITY: u64 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    Critical,
    Deep,
    Full,
    /// The web-root checks over one account's web roots ([`AccountScope`]).
    Account,
}

/// What an account scan covers: the account and its web roots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountScope {
    pub account: String,
    pub web_roots: Vec<std::path::PathBuf>,
}

/// Checks of an account scan: those that read only the web roots.
const ACCOUNT_CHECKS: &[&str] = &[
    super::webroot::CHECK,
    super::perf::ERROR_LOG_CHECK,
    super::perf::DISPLAY_ERRORS_CHECK,
    super::perf::CMS_CRON_CHECK,
    super::phishing::CHECK,
    super::uploads::CHECK,
    super::taint::CHECK,
    super::sitedb::OPTION_CHECK,
    super::sitedb::POST_CHECK,
    super::sitedb::TRIGGER_CHECK,
    super::sitedb::EVENT_CHECK,
    super::sitedb::ROUTINE_CHECK,
];

impl JobKind {
    /// The kind named `s` in a request body.
    pub fn parse(s: &str) -> Option<JobKind> {
        match s {
            "critical" => Some(JobKind::Critical),
            "deep" => Some(JobKind::Deep),
            "full" => Some(JobKind::Full),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Critical => "critical",
            JobKind::Deep => "deep",
            JobKind::Full => "full",
            JobKind::Account => "account",
        }
    }

    fn checks(self) -> Vec<NamedCheck> {
        match self {
            JobKind::Critical => critical_checks().to_vec(),
            JobKind::Deep => deep_checks().to_vec(),
            JobKind::Full => critical_checks()
                .iter()
                .chain(deep_checks())
                .cloned()
                .collect(),
            JobKind::Account => deep_checks()
                .iter()
                .filter(|c| ACCOUNT_CHECKS.contains(&c.name))
                .cloned()
                .collect(),
        }
    }
}

/// A deep-scan check with state of its own (the mailbox password audit). Runs on the scan
/// worker after the deep checks of a deep or full scan.
pub trait ScanTask: Send + Sync {
    /// The check names its findings carry (registered as scheduled checks).
    fn checks(&self) -> &'static [&'static str];
    /// Runs once. One entry per check it completed, with that check's findings in force
    /// (the engine resolves the others); a check left out stays as it was. Returns
    /// promptly once `stop` is set.
    fn run(&self, ctx: &CheckContext, stop: &AtomicBool) -> Vec<(&'static str, Vec<Finding>)>;
    /// Runs once over one account's web roots (`ctx.web_roots` is already the scope's), for
    /// tasks whose work is per site; the answers are submitted like the account scan's
    /// checks (only findings beneath the scope's roots are resolved). Default: nothing.
    fn run_account(
        &self,
        _ctx: &CheckContext,
        _scope: &AccountScope,
        _stop: &AtomicBool,
    ) -> Vec<(&'static str, Vec<Finding>)> {
        Vec::new()
    }
    /// Applies a reloaded configuration (live).
    fn reconfigure(&self, cfg: &crate::config::Config);
}

/// What a finished job reports.
#[derive(Debug, Clone, Serialize)]
pub struct JobResult {
    pub id: i64,
    pub kind: JobKind,
    pub state: String,
    pub findings: Vec<Finding>,
    #[serde(serialize_with = "crate::timefmt::ser")]
    pub finished: Timestamp,
}

struct Job {
    id: i64,
    kind: JobKind,
    scope: Option<AccountScope>,
    reply: Option<Sender<JobResult>>,
}

pub struct ScanJobs {
    clock: SharedClock,
    store: Store,
    engine: Arc<Engine>,
    ctx: CheckContext,
    queue: BoundedQueue<Job>,
    _jobs_row: RowHandle,
    admission_row: RowHandle,
    /// `checks.executions`: the check function or task running now.
    executions: RowHandle,
    /// `checks.dispatch`: checks and tasks of the running job not yet started.
    dispatch: RowHandle,
    latest_scan: Mutex<Option<Timestamp>>,
    hardening: Mutex<Option<serde_json::Value>>,
    tasks: Mutex<Vec<Arc<dyn ScanTask>>>,
    stop: AtomicBool,
    /// The running job a caller cancelled (0: none); the worker stops it between checks.
    cancel_running: AtomicI64,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// Answers the caller waiting for `job`, if one is.
fn answer(job: Job, state: &str, findings: Vec<Finding>, finished: Timestamp) {
    if let Some(reply) = job.reply {
        let _ = reply.send(JobResult {
            id: job.id,
            kind: job.kind,
            state: state.into(),
            findings,
            finished,
        });
    }
}

fn micros(t: Timestamp) -> i64 {
    t.as_microsecond()
}

impl ScanJobs {
    /// Builds the job rows, marks leftovers of a previous process and loads `latest_scan`.
    pub fn new(
        clock: SharedClock,
        store: Store,
        engine: Arc<Engine>,
        ctx: CheckContext,
        registry: &Arc<Registry>,
    ) -> Result<Arc<ScanJobs>, JobsError> {
        let queue = BoundedQueue::new(
            clock.clone(),
            RowConfig::new("jobs")
                .capacity(JOB_CAPACITY)
                .lag_basis(LagBasis::OperationProgress)
                .running_slots(1),
        )
        .map_err(RowError::at("scans.jobs"))?;
        // Checks may legitimately run long; a full deep scan gets a 15-minute budget.
        let mut cfg = RowConfig::new("jobs").lag_basis(LagBasis::OperationProgress);
        cfg.capacity = None;
        let admission = QueueHealth::new(clock.clone(), cfg);
        let jobs_row = registry
            .register("scans.jobs", queue.health().clone())
            .map_err(RowError::at("scans.jobs"))?;
        let admission_row = registry
            .register("scans.admission", admission)
            .map_err(RowError::at("scans.admission"))?;
        let mut exec = RowConfig::new("checks")
            .capacity(1)
            .running_slots(1)
            .lag_basis(LagBasis::OperationProgress);
        exec.phase_budgets = PhaseBudgets::uniform(CHECK_BUDGET);
        let executions = registry
            .register(EXECUTIONS_ROW, QueueHealth::new(clock.clone(), exec))
            .map_err(RowError::at(EXECUTIONS_ROW))?;
        let mut pending = RowConfig::new("checks").lag_basis(LagBasis::OperationProgress);
        pending.capacity = None;
        pending.lag_grace = CHECK_BUDGET;
        let dispatch = registry
            .register(DISPATCH_ROW, QueueHealth::new(clock.clone(), pending))
            .map_err(RowError::at(DISPATCH_ROW))?;
        let now = clock.now();
        let leftovers = store
            .write(move |c| crate::store::scan_jobs::fail_leftovers(c, micros(now)))
            .map_err(|source| JobsError::Store {
                what: "marking leftover scan jobs",
                source,
            })?;
        if leftovers > 0 {
            log::warn!("{leftovers} scan jobs left by the previous process marked error (daemon_restarted)");
            queue.health().record_losses(leftovers as u64);
        }
        let latest: Option<i64> =
            store
                .read(crate::store::scan_jobs::latest_done)
                .map_err(|source| JobsError::Store {
                    what: "reading scan jobs",
                    source,
                })?;
        let hardening: Option<String> = store
            .read(|c| crate::store::kv::get(c, HARDENING_KEY))
            .unwrap_or(None);
        Ok(Arc::new(ScanJobs {
            clock,
            store,
            engine,
            ctx,
            queue,
            _jobs_row: jobs_row,
            admission_row,
            executions,
            dispatch,
            latest_scan: Mutex::new(latest.and_then(|m| Timestamp::from_microsecond(m).ok())),
            hardening: Mutex::new(hardening.and_then(|s| serde_json::from_str(&s).ok())),
            tasks: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            cancel_running: AtomicI64::new(0),
            threads: Mutex::new(Vec::new()),
        }))
    }

    /// Starts the worker and, when intervals are given, the scheduler.
    pub fn start(
        self: &Arc<Self>,
        critical_every: Option<Duration>,
        deep_every: Option<Duration>,
    ) -> Result<(), JobsError> {
        let me = self.clone();
        let worker = std::thread::Builder::new()
            .name("scan-worker".into())
            .spawn(move || me.work())
            .map_err(JobsError::Spawn)?;
        self.threads.lock().push(worker);
        if critical_every.is_some() || deep_every.is_some() {
            let me = self.clone();
            let t = std::thread::Builder::new()
                .name("scan-scheduler".into())
                .spawn(move || me.schedule(critical_every, deep_every))
                .map_err(JobsError::Spawn)?;
            self.threads.lock().push(t);
        }
        Ok(())
    }

    /// Adds a task to every deep and full scan (before [`ScanJobs::start`]).
    pub fn add_task(&self, task: Arc<dyn ScanTask>) {
        self.tasks.lock().push(task);
    }

    /// Hands a reloaded configuration to every task.
    pub fn reconfigure_tasks(&self, cfg: &crate::config::Config) {
        for t in self.tasks.lock().iter() {
            t.reconfigure(cfg);
        }
    }

    /// Submits a check's findings and its completion (the engine resolves what is absent).
    fn submit(&self, check: &str, findings: &[Finding]) {
        let messages: Vec<String> = findings.iter().map(|f| f.message.clone()).collect();
        for f in findings {
            if !self
                .engine
                .submit_wait(Ingest::Finding(Box::new(f.clone())), Duration::from_secs(5))
            {
                log::warn!("finding of {check} refused by a full ingest queue");
            }
        }
        self.engine.submit_wait(
            Ingest::check_completed(check.to_string(), messages),
            Duration::from_secs(5),
        );
    }

    /// Submits the findings of a check run over one account's web roots and resolves only
    /// that check's active findings beneath those roots that it no longer reports (a
    /// completion would resolve every other account's).
    fn submit_scoped(&self, check: &str, findings: &[Finding], scope: &AccountScope) {
        for f in findings {
            if !self
                .engine
                .submit_wait(Ingest::Finding(Box::new(f.clone())), Duration::from_secs(5))
            {
                log::warn!("finding of {check} refused by a full ingest queue");
            }
        }
        self.engine.flush(Duration::from_secs(10));
        let beneath = |p: &str| {
            scope
                .web_roots
                .iter()
                .any(|r| std::path::Path::new(p).starts_with(r))
        };
        let gone: Vec<(String, String)> = self.engine.with_active(|a| {
            a.iter()
                .filter(|f| f.check == check && f.path.as_deref().is_some_and(beneath))
                .filter(|f| !findings.iter().any(|n| n.message == f.message))
                .map(|f| (f.check.clone(), f.message.clone()))
                .collect()
        });
        if let Err(e) = self.engine.resolve(gone) {
            log::warn!(
                "account scan of {}: {check} not resolved: {e}",
                scope.account
            );
        }
    }

    pub fn latest_scan(&self) -> Option<Timestamp> {
        *self.latest_scan.lock()
    }

    /// The last stored hardening audit.
    pub fn hardening(&self) -> Option<serde_json::Value> {
        self.hardening.lock().clone()
    }

    /// The last stored hardening audit; when none exists yet, runs one now on this
    /// daemon's check context, stores it and returns it.
    pub fn hardening_or_run(&self) -> Option<serde_json::Value> {
        if let Some(v) = self.hardening() {
            return Some(v);
        }
        self.store_hardening();
        self.hardening()
    }

    /// The check context scans read (paths, web roots, limits).
    pub fn context(&self) -> &CheckContext {
        &self.ctx
    }

    /// Queues a job. With `wait`, blocks until it finishes (or `timeout`).
    pub fn request(
        &self,
        kind: JobKind,
        wait: Option<Duration>,
    ) -> Result<Option<JobResult>, RequestError> {
        let (tx, rx) = bounded(1);
        let id = self.enqueue(kind, None, wait.map(|_| tx))?;
        match wait {
            None => Ok(None),
            Some(t) => rx
                .recv_timeout(t)
                .map(Some)
                .map_err(|_| RequestError::Timeout(id)),
        }
    }

    /// Queues a job without waiting; returns its id (`POST /api/v1/scan-jobs`).
    pub fn submit_job(&self, kind: JobKind) -> Result<i64, RequestError> {
        self.enqueue(kind, None, None)
    }

    /// Queues a scan of one account's web roots; recorded with kind `account:NAME`.
    pub fn submit_account(&self, scope: AccountScope) -> Result<i64, RequestError> {
        self.enqueue(JobKind::Account, Some(scope), None)
    }

    /// Records a queued job and hands it to the worker; a full queue marks the record
    /// `error` (`queue_full`) and counts one loss of `scans.jobs`.
    fn enqueue(
        &self,
        kind: JobKind,
        scope: Option<AccountScope>,
        reply: Option<Sender<JobResult>>,
    ) -> Result<i64, RequestError> {
        let admission = self.admission_row.health();
        let admitted = admission.start_running();
        let now = self.clock.now();
        let recorded = match &scope {
            Some(s) => format!("account:{}", s.account),
            None => kind.as_str().to_string(),
        };
        let id = self
            .store
            .write(move |c| crate::store::scan_jobs::insert_queued(c, &recorded, micros(now)))
            .map_err(|e: StoreError| {
                admission.record_loss();
                RequestError::Store(e)
            })?;
        let pushed = self.queue.try_push(Job {
            id,
            kind,
            scope,
            reply,
        });
        admitted.finish();
        if let Err(refused) = pushed {
            // The refused job counts as one loss of scans.jobs. Its refusal is
            // written before the 429 goes out, so a list read after it never shows
            // it queued (a detached write raced the test's list under load).
            drop(refused);
            let _ = self
                .store
                .write(move |c| crate::store::scan_jobs::refuse_full(c, id));
            return Err(RequestError::QueueFull);
        }
        Ok(id)
    }

    /// Cancels job `id`: a queued job never runs, a running one stops before its next
    /// check (findings of the checks it completed stay submitted). Returns the state it had.
    pub fn cancel(&self, id: i64) -> Result<String, CancelError> {
        let row = self
            .store
            .read(move |c| crate::store::scan_jobs::get(c, id))
            .map_err(CancelError::Store)?
            .ok_or(CancelError::NoSuchJob(id))?;
        let reason = match row.state.as_str() {
            "queued" => "cancelled_while_queued",
            "running" => "cancelled_while_running",
            _ => {
                return Err(CancelError::Finished {
                    id,
                    state: row.state,
                })
            }
        };
        if row.state == "running" {
            self.cancel_running.store(id, Ordering::SeqCst);
        }
        let now = self.clock.now();
        let changed = self
            .store
            .write(move |c| crate::store::scan_jobs::cancel(c, id, reason, micros(now)))
            .map_err(CancelError::Store)?;
        if !changed {
            // It ended between the read and the update.
            let state = self
                .store
                .read(move |c| crate::store::scan_jobs::get(c, id))
                .map_err(CancelError::Store)?
                .map(|r| r.state)
                .unwrap_or_default();
            return Err(CancelError::Finished { id, state });
        }
        Ok(row.state)
    }

    fn cancelled(&self, id: i64) -> bool {
        self.stop.load(Ordering::SeqCst) || self.cancel_running.load(Ordering::SeqCst) == id
    }

    fn schedule(&self, critical: Option<Duration>, deep: Option<Duration>) {
        let nanos = |d: Duration| d.as_nanos().min(i64::MAX as u128) as i64;
        let start = self.clock.monotonic_nanos();
        let (mut next_c, mut next_d) = (start, start);
        let beat = crate::queue::heartbeat::Beat::register("scan-scheduler", self.clock.clone());
        while !self.stop.load(Ordering::SeqCst) {
            beat.beat();
            let now = self.clock.monotonic_nanos();
            if let Some(c) = critical {
                if now >= next_c {
                    next_c = now + nanos(c);
                    if let Err(e) = self.request(JobKind::Critical, None) {
                        log::warn!("scheduled critical scan not queued: {e}");
                    }
                }
            }
            if let Some(d) = deep {
                if now >= next_d {
                    next_d = now + nanos(d);
                    if let Err(e) = self.request(JobKind::Deep, None) {
                        log::warn!("scheduled deep scan not queued: {e}");
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn work(&self) {
        loop {
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            let guard = match self.queue.pop_timeout(Duration::from_millis(500)) {
                Ok(g) => g,
                Err(PopError::Timeout) => continue,
                Err(PopError::Closed) => break,
            };
            let (id, kind) = (guard.id, guard.kind);
            let started = self.clock.now();
            let taken = self
                .store
                .write(move |c| crate::store::scan_jobs::start(c, id, micros(started)));
            if let Ok(false) = taken {
                // Cancelled while it waited.
                answer(guard.finish(), "cancelled", Vec::new(), self.clock.now());
                continue;
            }
            // The job's checks (and tasks) are pending from the moment it runs.
            let checks = kind.checks();
            let runs_tasks = guard.scope.is_some() || matches!(kind, JobKind::Deep | JobKind::Full);
            let tasks = if runs_tasks {
                self.tasks.lock().len()
            } else {
                0
            };
            let mut pending = self.dispatch_pending(checks.len() + tasks);
            #[cfg(debug_assertions)]
            self.test_pause();
            let mut all = Vec::new();
            let scoped = guard.scope.clone().map(|s| {
                let mut ctx = self.ctx.clone();
                ctx.web_roots = s.web_roots.clone();
                (s, ctx)
            });
            for check in checks {
                if self.cancelled(id) {
                    break;
                }
                if let Some(t) = pending.pop() {
                    t.finish();
                }
                let run = self.executions.health().start_running();
                let findings = match &scoped {
                    None => super::run_all(std::slice::from_ref(&check), &self.ctx),
                    Some((_, ctx)) => super::run_all(std::slice::from_ref(&check), ctx),
                };
                if findings
                    .iter()
                    .any(|f| f.check == check.name && f.message == super::PANIC_MESSAGE)
                {
                    run.lose();
                } else {
                    run.finish();
                }
                match &scoped {
                    None => self.submit(check.name, &findings),
                    Some((scope, _)) => self.submit_scoped(check.name, &findings, scope),
                }
                all.extend(findings);
            }
            if let Some((scope, ctx)) = &scoped {
                self.run_tasks(
                    id,
                    &mut all,
                    &mut pending,
                    |t| t.run_account(ctx, scope, &self.stop),
                    |c, f| self.submit_scoped(c, f, scope),
                );
            }
            if matches!(kind, JobKind::Deep | JobKind::Full) {
                self.run_tasks(
                    id,
                    &mut all,
                    &mut pending,
                    |t| t.run(&self.ctx, &self.stop),
                    |c, f| self.submit(c, f),
                );
            }
            // Cancelled, stopped, or tasks removed meanwhile: demand withdrawn, no loss.
            for t in pending.drain(..) {
                t.withdraw();
            }
            if self.stop.load(Ordering::SeqCst) {
                // Abandoned by shutdown: the record stays `running` and the next start marks
                // it `error` with reason `daemon_restarted`.
                break;
            }
            if self.cancel_running.load(Ordering::SeqCst) == id {
                // Cancelled while running: its record already says so.
                self.cancel_running.store(0, Ordering::SeqCst);
                answer(guard.finish(), "cancelled", all, self.clock.now());
                continue;
            }
            if matches!(kind, JobKind::Deep | JobKind::Full) {
                self.store_hardening();
            }
            // A job is done once its findings are in the active set.
            self.engine.flush(Duration::from_secs(10));
            let finished = self.clock.now();
            let n = all.len() as i64;
            let committed = self
                .store
                .write(move |c| crate::store::scan_jobs::finish(c, id, micros(finished), n));
            if let Err(e) = committed {
                log::warn!("scan job {id}: cannot record completion: {e}");
            }
            if kind != JobKind::Account {
                // An account scan covers part of the host: not a scan of it.
                *self.latest_scan.lock() = Some(finished);
            }
            answer(guard.finish(), "done", all, finished);
        }
    }

    /// Admits `n` checks of the starting job on `checks.dispatch`.
    fn dispatch_pending(&self, n: usize) -> Vec<Ticket> {
        let h = self.dispatch.health();
        (0..n).map(|_| h.admit()).collect()
    }

    /// Runs every registered task with `run` and hands each check it answered to
    /// `submit`; a panicking task is counted and logged, the others still run.
    fn run_tasks(
        &self,
        id: i64,
        all: &mut Vec<Finding>,
        pending: &mut Vec<Ticket>,
        run: impl Fn(&dyn ScanTask) -> Vec<(&'static str, Vec<Finding>)>,
        submit: impl Fn(&str, &[Finding]),
    ) {
        let tasks: Vec<Arc<dyn ScanTask>> = self.tasks.lock().clone();
        for task in tasks {
            if self.cancelled(id) {
                break;
            }
            if let Some(t) = pending.pop() {
                t.finish();
            }
            let running = self.executions.health().start_running();
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(task.as_ref()))) {
                Ok(results) => {
                    running.finish();
                    for (check, findings) in results {
                        submit(check, &findings);
                        all.extend(findings);
                    }
                }
                Err(_) => {
                    running.lose();
                    super::context::count(&self.ctx.counters().check_panics, 1);
                    log::error!("scan task {} panicked", task.checks().join(", "));
                }
            }
        }
    }

    /// Debug builds only (integration tests run them): with `SVC_TEST_SCAN_PAUSE=<base>` in
    /// the daemon's environment, a job that starts running writes `<base>.reached` and waits
    /// (at most 30 s, or until shutdown) for `<base>.go`, so a test can fill the queue or
    /// cancel and restart around a running job. Compiled out of release builds.
    #[cfg(debug_assertions)]
    fn test_pause(&self) {
        let Some(base) = std::env::var_os("SVC_TEST_SCAN_PAUSE").map(std::path::PathBuf::from)
        else {
            return;
        };
        let reached = base.with_extension("reached");
        let go = base.with_extension("go");
        if let Err(e) = crate::fsutil::write_atomic(&reached, b"", 0o600, None) {
            log::warn!("SVC_TEST_SCAN_PAUSE: {e}");
            return;
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !go.exists()
            && !self.stop.load(Ordering::SeqCst)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = crate::fsutil::remove_daemon_file(&go);
        let _ = crate::fsutil::remove_daemon_file(&reached);
    }

    fn store_hardening(&self) {
        let report = super::hardening_audit(&self.ctx);
        let Ok(value) = serde_json::to_value(&report) else {
            return;
        };
        let text = value.to_string();
        *self.hardening.lock() = Some(value);
        let _ = self
            .store
            .write_detached(move |c| crate::store::kv::set(c, HARDENING_KEY, &text));
    }

    /// Stops the scheduler and the worker. A running check is abandoned between checks; one
    /// still inside a long walk after `grace` is left behind (the process is exiting; its
    /// record stays `running` and becomes `error`/`daemon_restarted` at the next start), so
    /// shutdown never waits on a scan of a large tree.
    pub fn shutdown(&self, grace: Duration) {
        self.stop.store(true, Ordering::SeqCst);
        self.queue.close();
        let deadline = std::time::Instant::now() + grace;
        for t in self.threads.lock().drain(..) {
            while !t.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if t.is_finished() {
                let _ = t.join();
            } else {
                log::warn!("a scan is still running at shutdown; leaving it behind");
            }
        }
    }
}
