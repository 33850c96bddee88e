//! The SQLite store: one writer thread fed by a bounded queue, separate read connections.
//!
//! Guarantees:
//! - All writes run on the writer thread, batched into one transaction per wake-up; each job
//!   runs inside its own savepoint so one failing job does not undo the others.
//! - [`Store::write`] returns only after the job's transaction committed (or failed).
//! - Health is read from atomics ([`Store::health`]); it never touches the database.

pub mod abuse;
pub mod audit;
pub mod cms;
pub mod crawler;
pub mod data;
pub mod file_index;
pub mod findings;
pub mod firewall;
pub mod fleet;
pub mod history;
pub mod incidents;
pub mod kv;
pub mod mail;
pub mod mail_accounts;
pub mod quarantine;
pub mod scan_jobs;
mod schema;
pub mod sessions;
pub mod sitedb;
pub mod spool;
pub mod suppressions;
pub mod threat;
pub mod waf;

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags};
use serde::Serialize;

use crate::queue::Capacity;

/// Jobs the writer queue holds before callers are refused.
pub const WRITER_QUEUE: usize = 4096;
/// Jobs committed together at most.
const BATCH: usize = 512;
/// Quiet time after which the writer works on the search index's backlog: longer than the
/// gaps between the commits of a stream of findings (a log being drained commits a batch
/// every few milliseconds, more on a busy host), so an index step never lands in one.
const IDLE: Duration = Duration::from_millis(25);
/// FTS5 `automerge` of the search index (segments merged at once per level).
const FTS_AUTOMERGE: i64 = 8;
/// How long a waiting writer caller waits for its commit.
const WRITE_WAIT: Duration = Duration::from_secs(10);
/// Page cache of each pooled read connection, KiB (SQLite's default is 2 MiB). Up to eight
/// readers stay open; with the default, concurrent history searches left ~30 MiB of cached
/// pages behind. Re-reads come from the OS page cache.
const READER_CACHE_KIB: i64 = 512;
/// Page cache of the writer connection, KiB (SQLite's default is 2 MiB). A 1,000,000-line
/// drain peaks about 1 MiB lower with it and its writer spends no measurable CPU more
/// (decision 272).
const WRITER_CACHE_KIB: i64 = 1024;

/// Why a store operation failed.
#[derive(Debug)]
pub enum StoreError {
    /// The writer queue is full; the job was refused (counted).
    Busy,
    /// The writer did not answer in time; the outcome is unknown.
    Timeout,
    /// The store is closed (shutting down).
    Closed,
    /// SQLite reported an error.
    Sql(rusqlite::Error),
    /// The database file could not be created.
    Io(std::io::Error),
    /// A store thread (writer or checkpointer) could not be started.
    Spawn(std::io::Error),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Busy => f.write_str("store writer queue is full"),
            StoreError::Timeout => f.write_str("store did not commit in time"),
            StoreError::Closed => f.write_str("store is closed"),
            StoreError::Sql(e) => write!(f, "store error: {e}"),
            StoreError::Io(e) => write!(f, "cannot create the database file: {e}"),
            StoreError::Spawn(e) => write!(f, "cannot start a store thread: {e}"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Sql(e) => Some(e),
            StoreError::Io(e) | StoreError::Spawn(e) => Some(e),
            StoreError::Busy | StoreError::Timeout | StoreError::Closed => None,
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sql(e)
    }
}

type Output = Box<dyn Any + Send>;
type Work = Box<dyn FnOnce(&Connection) -> rusqlite::Result<Output> + Send>;

struct Job {
    work: Work,
    reply: Option<Sender<Result<Output, StoreError>>>,
}

/// Store health counters (atomics only).
#[derive(Default)]
struct Counters {
    writes_ok: AtomicU64,
    writes_failed: AtomicU64,
    refused: AtomicU64,
    commits: AtomicU64,
    waiting: AtomicU64,
    last_error_failed: AtomicBool,
    /// History rows not yet in the search index (updated by the writer).
    unindexed: AtomicU64,
}

/// Snapshot of store health for status and metrics.
#[derive(Debug, Clone, Serialize)]
pub struct StoreHealth {
    pub ok: bool,
    pub path: String,
    pub writes_ok: u64,
    pub writes_failed: u64,
    pub writes_refused: u64,
    pub commits: u64,
    pub writer_waiting: u64,
    pub writer_capacity: usize,
    /// History rows written and counted but not yet in the search index: the writer indexes
    /// them while no write waits (searches examine them directly meanwhile).
    pub search_index_backlog: u64,
}

struct Inner {
    path: PathBuf,
    tx: Mutex<Option<Sender<Job>>>,
    /// Jobs in the channel, not yet taken by the writer: [`WRITER_QUEUE`] at most. The
    /// channel is unbounded so that its slots are allocated on use, not all at start.
    queued: Capacity,
    readers: Mutex<Vec<Connection>>,
    counters: Counters,
    writer: Mutex<Option<JoinHandle<()>>>,
    checkpointer: Mutex<Option<JoinHandle<()>>>,
}

/// A queued write ([`Store::write_pending`]).
pub struct PendingWrite<R> {
    rx: Receiver<Result<Output, StoreError>>,
    _out: std::marker::PhantomData<fn() -> R>,
}

impl<R: 'static> PendingWrite<R> {
    /// Waits for the commit (at most the store's write wait; then the outcome is unknown).
    pub fn wait(self) -> Result<R, StoreError> {
        match self.rx.recv_timeout(WRITE_WAIT) {
            Ok(Ok(out)) => out
                .downcast::<R>()
                .map(|b| *b)
                .map_err(|_| StoreError::Closed),
            Ok(Err(e)) => Err(e),
            Err(RecvTimeoutError::Timeout) => Err(StoreError::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(StoreError::Closed),
        }
    }
}

/// Handle to the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

fn open_conn(path: &Path, flags: OpenFlags) -> rusqlite::Result<Connection> {
    let c = Connection::open_with_flags(path, flags)?;
    c.busy_timeout(Duration::from_secs(5))?;
    c.pragma_update(None, "foreign_keys", true)?;
    Ok(c)
}

impl Store {
    /// Opens (creating if needed) the database at `path`, runs migrations and starts the
    /// writer thread. The file is created with mode 0600.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            use std::os::unix::fs::OpenOptionsExt;
            crate::fsutil::open_daemon_file_with(
                path,
                std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .mode(0o600),
            )
            .map_err(StoreError::Io)?;
        }
        let mut conn = open_conn(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "cache_size", -WRITER_CACHE_KIB)?;
        // Statement and savepoint journals keep their first 64 KiB in memory and spill the
        // rest to an unlinked temporary file (SQLite's default temp_store). With MEMORY, a
        // savepoint around a job that upserts a few thousand active findings held a copy of
        // every page it touched on the heap (3.5 MB in a 1,000,000-line drain).
        schema::migrate(&mut conn)?;
        // The search index merges 8 segments of a level at once instead of FTS5's 4: each
        // row is rewritten by fewer merges (about a fifth less indexing CPU at the same
        // query cost, decision 157). Stored in the index's own config, written once.
        let automerge: Option<i64> = conn
            .query_row(
                "SELECT v FROM history_fts_config WHERE k = 'automerge'",
                [],
                |r| r.get(0),
            )
            .ok();
        if automerge != Some(FTS_AUTOMERGE) {
            conn.execute(
                "INSERT INTO history_fts(history_fts, rank) VALUES('automerge', ?1)",
                [FTS_AUTOMERGE],
            )?;
        }
        {
            // Rows written by other means (an older build, a restore, a tool) are derived now.
            let tx = conn.transaction()?;
            let n = history::derive_pending(&tx)?;
            tx.commit()?;
            if n > 0 {
                log::info!("store: indexed {n} history rows written outside the daemon");
            }
        }

        // Checkpoints run on their own thread and connection (their fsync never delays a
        // commit); the writer only tells it that something was committed.
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        let ckpt_conn = open_conn(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        let (ckpt_tx, ckpt_rx) = bounded::<()>(1);
        let spawn_err = StoreError::Spawn;
        let checkpointer = std::thread::Builder::new()
            .name("store-checkpoint".into())
            .spawn(move || checkpoint_loop(ckpt_conn, ckpt_rx))
            .map_err(spawn_err)?;
        let (tx, rx) = unbounded::<Job>();
        let inner = Arc::new(Inner {
            path: path.to_path_buf(),
            tx: Mutex::new(Some(tx)),
            queued: Capacity::new(WRITER_QUEUE),
            readers: Mutex::new(Vec::new()),
            counters: Counters::default(),
            writer: Mutex::new(None),
            checkpointer: Mutex::new(Some(checkpointer)),
        });
        let weak = Arc::downgrade(&inner);
        let handle = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer_loop(conn, rx, weak, ckpt_tx))
            .map_err(spawn_err)?;
        *inner.writer.lock() = Some(handle);
        Ok(Store { inner })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    fn submit(&self, job: Job) -> Result<(), StoreError> {
        let guard = self.inner.tx.lock();
        let Some(tx) = guard.as_ref() else {
            return Err(StoreError::Closed);
        };
        let c = &self.inner.counters;
        if !self.inner.queued.try_take() {
            c.refused.fetch_add(1, Ordering::Relaxed);
            return Err(StoreError::Busy);
        }
        match tx.send(job) {
            Ok(()) => {
                c.waiting.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(_) => {
                self.inner.queued.give_back(1);
                Err(StoreError::Closed)
            }
        }
    }

    /// Runs `f` on the writer thread and waits for its commit.
    pub fn write<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<R> + Send + 'static,
    {
        self.write_pending(f)?.wait()
    }

    /// Queues `f` on the writer thread; [`PendingWrite::wait`] waits for its commit. Lets a
    /// caller prepare its next write while this one commits (jobs commit in queue order).
    pub fn write_pending<R, F>(&self, f: F) -> Result<PendingWrite<R>, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<R> + Send + 'static,
    {
        let (rtx, rrx) = bounded(1);
        self.submit(Job {
            work: Box::new(move |c| f(c).map(|r| Box::new(r) as Output)),
            reply: Some(rtx),
        })?;
        Ok(PendingWrite {
            rx: rrx,
            _out: std::marker::PhantomData,
        })
    }

    /// Queues `f` on the writer thread without waiting. Refusal is counted.
    pub fn write_detached<F>(&self, f: F) -> Result<(), StoreError>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<()> + Send + 'static,
    {
        self.submit(Job {
            work: Box::new(move |c| f(c).map(|()| Box::new(()) as Output)),
            reply: None,
        })
    }

    /// Runs `f` on a read connection (never the writer's).
    pub fn read<R>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<R>,
    ) -> Result<R, StoreError> {
        let conn = match self.inner.readers.lock().pop() {
            Some(c) => c,
            None => {
                let c = open_conn(&self.inner.path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
                c.pragma_update(None, "cache_size", -READER_CACHE_KIB)?;
                c
            }
        };
        let out = f(&conn);
        let mut pool = self.inner.readers.lock();
        if pool.len() < 8 {
            pool.push(conn);
        }
        Ok(out?)
    }

    /// Health from counters only.
    pub fn health(&self) -> StoreHealth {
        let c = &self.inner.counters;
        StoreHealth {
            ok: !c.last_error_failed.load(Ordering::Relaxed) && self.inner.tx.lock().is_some(),
            path: self.inner.path.display().to_string(),
            writes_ok: c.writes_ok.load(Ordering::Relaxed),
            writes_failed: c.writes_failed.load(Ordering::Relaxed),
            writes_refused: c.refused.load(Ordering::Relaxed),
            commits: c.commits.load(Ordering::Relaxed),
            writer_waiting: c.waiting.load(Ordering::Relaxed),
            writer_capacity: WRITER_QUEUE,
            search_index_backlog: c.unindexed.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting jobs, lets the writer finish what is queued, and joins it.
    pub fn close(&self) {
        self.inner.tx.lock().take();
        if let Some(h) = self.inner.writer.lock().take() {
            let _ = h.join();
        }
        if let Some(h) = self.inner.checkpointer.lock().take() {
            let _ = h.join();
        }
    }
}

/// Rows of the next index step, sized so that a step takes about [`INDEX_STEP_TIME`] (a
/// write that arrives meanwhile waits at most that long).
struct StepSize {
    rows: i64,
}

/// Target duration of one index step.
const INDEX_STEP_TIME: Duration = Duration::from_millis(10);

impl StepSize {
    fn adjust(&mut self, rows: i64, took: Duration) {
        if rows <= 0 {
            return;
        }
        let per_row = took.as_secs_f64() / rows as f64;
        let want = (INDEX_STEP_TIME.as_secs_f64() / per_row.max(1e-9)) as i64;
        self.rows = want.clamp(64, history::INDEX_STEP);
    }
}

/// One step of the search index's backlog in its own transaction. Returns whether more
/// rows wait.
/// How often an idle writer looks for history rows another connection wrote (a restore, a
/// tool, a test fixture): they are counted and indexed within about this long even when
/// the daemon itself writes nothing.
const OUTSIDE_ROWS_CHECK: Duration = Duration::from_secs(1);

/// Counts history rows above the day-count watermark (written by another connection while
/// the writer was idle). A read when there are none; true when some were counted (the search
/// index then has a backlog to work off). A failure is logged when it starts, not each time.
fn derive_outside_rows(conn: &Connection, failing: &mut bool) -> bool {
    let step = (|| {
        let tx = conn.unchecked_transaction()?;
        let n = history::derive_pending(&tx)?;
        tx.commit()?;
        Ok::<u64, rusqlite::Error>(n)
    })();
    match step {
        Ok(n) => {
            *failing = false;
            n > 0
        }
        Err(e) => {
            if !std::mem::replace(failing, true) {
                log::warn!("store: cannot count history rows written outside the daemon: {e}");
            }
            false
        }
    }
}

fn index_step(conn: &Connection, inner: &std::sync::Weak<Inner>, size: &mut StepSize) -> bool {
    let started = std::time::Instant::now();
    let step = (|| {
        let tx = conn.unchecked_transaction()?;
        let (before, newest) = history::index_backlog(&tx)?;
        let left = history::index_pending(&tx, size.rows)?;
        tx.commit()?;
        Ok::<(i64, i64), rusqlite::Error>(((newest - before) - left, left))
    })();
    match step {
        Ok((done, left)) => {
            size.adjust(done, started.elapsed());
            if let Some(inner) = inner.upgrade() {
                inner
                    .counters
                    .unindexed
                    .store(left.max(0) as u64, Ordering::Relaxed);
            }
            left > 0
        }
        Err(e) => {
            log::warn!("store: search index step failed (retried after the next write): {e}");
            false
        }
    }
}

/// How busy the writer was with jobs lately: the share of wall time spent running them,
/// over windows of [`LOAD_WINDOW`].
struct Load {
    window_start: std::time::Instant,
    busy: Duration,
    last: f64,
}

/// Length of one [`Load`] window.
const LOAD_WINDOW: Duration = Duration::from_millis(250);
/// The search index's backlog is worked off only while the writer spent less than this share
/// of its time on jobs (in the last window and so far in this one), so a burst of writes is
/// not slowed by indexing and the index catches up as soon as the burst ends.
const INDEX_BELOW_LOAD: f64 = 0.5;

impl Load {
    fn new() -> Load {
        Load {
            window_start: std::time::Instant::now(),
            busy: Duration::ZERO,
            last: 0.0,
        }
    }

    fn add(&mut self, busy: Duration) {
        self.busy += busy;
        let elapsed = self.window_start.elapsed();
        if elapsed >= LOAD_WINDOW {
            self.last = self.busy.as_secs_f64() / elapsed.as_secs_f64();
            self.window_start = std::time::Instant::now();
            self.busy = Duration::ZERO;
        }
    }

    fn light(&self) -> bool {
        let elapsed = self.window_start.elapsed().max(Duration::from_millis(20));
        self.last < INDEX_BELOW_LOAD
            && self.busy.as_secs_f64() / elapsed.as_secs_f64() < INDEX_BELOW_LOAD
    }
}

/// Least time between two checkpoints.
const CHECKPOINT_PERIOD: Duration = Duration::from_millis(500);

/// Copies committed WAL frames back into the database (PASSIVE: never waits for readers or
/// the writer) at most every [`CHECKPOINT_PERIOD`] while commits happen; ends when the
/// writer does.
fn checkpoint_loop(conn: Connection, rx: Receiver<()>) {
    let checkpoint = |conn: &Connection| {
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            log::warn!("store: checkpoint failed: {e}");
        }
    };
    let mut last: Option<std::time::Instant> = None;
    while rx.recv().is_ok() {
        if let Some(wait) = last.map(|t| CHECKPOINT_PERIOD.saturating_sub(t.elapsed())) {
            // Gather the commits of the rest of the period.
            let deadline = std::time::Instant::now() + wait;
            loop {
                match rx.recv_deadline(deadline) {
                    Ok(()) => continue,
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => break,
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                        checkpoint(&conn);
                        return;
                    }
                }
            }
        }
        checkpoint(&conn);
        last = Some(std::time::Instant::now());
    }
}

fn writer_loop(
    conn: Connection,
    rx: Receiver<Job>,
    inner: std::sync::Weak<Inner>,
    checkpoints: Sender<()>,
) {
    crate::sys::priority::raise_priority("store writer");
    let mut batch: Vec<Job> = Vec::with_capacity(BATCH);
    // Whether the search index may have a backlog to work off while no job waits.
    let mut indexing = true;
    let mut load = Load::new();
    let mut size = StepSize { rows: 512 };
    // Whether the last look for rows written outside failed (logged once until it works).
    let mut outside_failing = false;
    let beat = crate::queue::heartbeat::Beat::register(
        "store-writer",
        crate::clock::SystemClock::shared(),
    );
    loop {
        beat.beat();
        let first = if indexing {
            // Idle means no job for a moment, not merely an empty queue between two jobs
            // of a caller that writes again at once, and a light load lately.
            match rx.recv_timeout(IDLE) {
                Ok(j) => j,
                Err(RecvTimeoutError::Timeout) => {
                    // Rows written outside are counted before the (longer) index work.
                    derive_outside_rows(&conn, &mut outside_failing);
                    if load.light() {
                        indexing = index_step(&conn, &inner, &mut size);
                    } else {
                        load.add(Duration::ZERO);
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match rx.recv_timeout(OUTSIDE_ROWS_CHECK) {
                Ok(j) => j,
                Err(RecvTimeoutError::Timeout) => {
                    indexing = derive_outside_rows(&conn, &mut outside_failing);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        };
        indexing = true;
        batch.push(first);
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        let n = batch.len() as u64;
        if let Some(inner) = inner.upgrade() {
            inner.queued.give_back(batch.len());
        }
        let started = std::time::Instant::now();
        let results = run_batch(&conn, &mut batch);
        load.add(started.elapsed());
        let _ = checkpoints.try_send(());
        if let Some(inner) = inner.upgrade() {
            let c = &inner.counters;
            c.waiting.fetch_sub(n, Ordering::Relaxed);
            let failed = results.iter().filter(|(r, _)| r.is_err()).count() as u64;
            c.writes_ok.fetch_add(n - failed, Ordering::Relaxed);
            c.writes_failed.fetch_add(failed, Ordering::Relaxed);
            c.commits.fetch_add(1, Ordering::Relaxed);
            c.last_error_failed
                .store(failed == n && failed > 0, Ordering::Relaxed);
            if let Ok((indexed, newest)) = history::index_backlog(&conn) {
                c.unindexed
                    .store((newest - indexed).max(0) as u64, Ordering::Relaxed);
            }
        }
        for (result, reply) in results {
            if let Some(reply) = reply {
                let _ = reply.send(result);
            }
        }
    }
}

type JobResult = (
    Result<Output, StoreError>,
    Option<Sender<Result<Output, StoreError>>>,
);

fn run_batch(conn: &Connection, batch: &mut Vec<Job>) -> Vec<JobResult> {
    let mut results: Vec<JobResult> = Vec::with_capacity(batch.len());
    let mut jobs = batch.drain(..);
    // One transaction per turn; a failed first job ends its transaction early and the rest
    // go on in the next.
    while jobs.len() > 0 {
        if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
            log::error!("store: cannot begin transaction: {e}");
            let msg = e.to_string();
            for job in jobs.by_ref() {
                results.push((Err(StoreError::Sql(sql_err(&msg))), job.reply));
            }
            return results;
        }
        let tx_start = results.len();
        let mut first_failed = false;
        for job in jobs.by_ref() {
            if results.len() == tx_start {
                // The first job of a transaction runs without a savepoint: when it fails,
                // rolling the transaction back undoes exactly that job. A savepoint copies
                // every page the job touches into the statement journal (the pages of a
                // few thousand active findings for a large batch), so only the jobs after
                // the first pay for one.
                match (job.work)(conn) {
                    Ok(out) => results.push((Ok(out), job.reply)),
                    Err(e) => {
                        let _ = conn.execute_batch("ROLLBACK");
                        log::warn!("store: write failed: {e}");
                        results.push((Err(StoreError::Sql(e)), job.reply));
                        first_failed = true;
                        break;
                    }
                }
                continue;
            }
            let _ = conn.execute_batch("SAVEPOINT job");
            match (job.work)(conn) {
                Ok(out) => {
                    let _ = conn.execute_batch("RELEASE job");
                    results.push((Ok(out), job.reply));
                }
                Err(e) => {
                    let _ = conn.execute_batch("ROLLBACK TO job; RELEASE job");
                    log::warn!("store: write failed: {e}");
                    results.push((Err(StoreError::Sql(e)), job.reply));
                }
            }
        }
        if first_failed {
            continue;
        }
        if let Err(e) = conn.execute_batch("COMMIT") {
            log::error!("store: commit failed: {e}");
            let _ = conn.execute_batch("ROLLBACK");
            let msg = e.to_string();
            for r in results.iter_mut().skip(tx_start) {
                r.0 = Err(StoreError::Sql(sql_err(&msg)));
            }
        }
    }
    results
}

fn sql_err(msg: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
        Some(msg.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp_store(tag: &str) -> (Store, PathBuf) {
        let dir = std::env::temp_dir().join(format!("svc-store-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("svc.db");
        (Store::open(&p).unwrap(), dir)
    }

    /// A database file that cannot be created is an I/O error, not a SQLite one.
    #[test]
    fn open_reports_file_creation_as_io() {
        let dir = std::env::temp_dir().join(format!("svc-store-io-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // A regular file where the parent directory should be: ENOTDIR.
        std::fs::write(dir.join("notadir"), b"").unwrap();
        let err = Store::open(&dir.join("notadir").join("svc.db"))
            .err()
            .unwrap();
        assert!(matches!(err, StoreError::Io(_)), "{err:?}");
        assert!(std::error::Error::source(&err).is_some());
        assert!(
            err.to_string().contains("cannot create the database file"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn write_then_read_and_failed_job_isolated() {
        let (s, dir) = tmp_store("rw");
        s.write(|c| c.execute("CREATE TABLE t(x INTEGER)", []).map(|_| ()))
            .unwrap();
        s.write(|c| c.execute("INSERT INTO t VALUES (1)", []).map(|_| ()))
            .unwrap();
        assert!(s
            .write(|c| c.execute("INSERT INTO nope VALUES (1)", []).map(|_| ()))
            .is_err());
        let n: i64 = s
            .read(|c| c.query_row("SELECT count(*) FROM t", [], |r| r.get(0)))
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(s.health().writes_failed, 1);
        s.close();
        assert!(matches!(s.write(|_| Ok(())), Err(StoreError::Closed)));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_full_writer_queue_refuses_and_counts_then_takes_jobs_again() {
        let (s, dir) = tmp_store("full");
        // Hold the writer inside a job so that the queue fills behind it.
        let (entered_tx, entered_rx) = bounded::<()>(1);
        let (go_tx, go_rx) = bounded::<()>(1);
        let held = s
            .write_pending(move |_| {
                let _ = entered_tx.send(());
                let _ = go_rx.recv();
                Ok(())
            })
            .unwrap();
        entered_rx.recv().unwrap();
        for _ in 0..WRITER_QUEUE {
            s.write_detached(|_| Ok(())).unwrap();
        }
        assert!(matches!(
            s.write_detached(|_| Ok(())),
            Err(StoreError::Busy)
        ));
        assert_eq!(s.health().writes_refused, 1);
        go_tx.send(()).unwrap();
        held.wait().unwrap();
        // Everything queued commits (the writer takes it in batches after the held job's
        // reply, so wait for that); then the queue takes jobs again.
        for _ in 0..6000 {
            if s.health().writer_waiting == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(s.health().writer_waiting, 0);
        s.write(|_| Ok(())).unwrap();
        assert_eq!(s.health().writes_ok, WRITER_QUEUE as u64 + 2);
        assert_eq!(s.health().writer_waiting, 0);
        s.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_lone_failing_job_leaves_nothing_behind() {
        let (s, dir) = tmp_store("lone");
        s.write(|c| c.execute("CREATE TABLE t(x INTEGER)", []).map(|_| ()))
            .unwrap();
        // Alone in its transaction (no savepoint): its first insert is undone with it.
        let r = s.write(|c| {
            c.execute("INSERT INTO t VALUES (1)", [])?;
            c.execute("INSERT INTO nope VALUES (1)", []).map(|_| ())
        });
        assert!(r.is_err());
        s.write(|c| c.execute("INSERT INTO t VALUES (2)", []).map(|_| ()))
            .unwrap();
        let xs: Vec<i64> = s
            .read(|c| {
                c.prepare("SELECT x FROM t")?
                    .query_map([], |r| r.get(0))?
                    .collect()
            })
            .unwrap();
        assert_eq!(xs, vec![2]);
        // Several jobs in one transaction: a failing one is undone alone.
        let mut batch: Vec<Job> = Vec::new();
        for sql in [
            "INSERT INTO t VALUES (3)",
            "INSERT INTO nope VALUES (1)",
            "INSERT INTO t VALUES (4)",
        ] {
            batch.push(Job {
                work: Box::new(move |c| c.execute(sql, []).map(|_| Box::new(()) as Output)),
                reply: None,
            });
        }
        let conn = Connection::open(dir.join("svc.db")).unwrap();
        conn.busy_timeout(Duration::from_secs(5)).unwrap();
        let results = run_batch(&conn, &mut batch);
        assert_eq!(
            results.iter().map(|(r, _)| r.is_ok()).collect::<Vec<_>>(),
            vec![true, false, true]
        );
        let n: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 3);
        // The first job of a transaction runs without a savepoint: when it fails after a
        // write, its transaction is rolled back and the jobs after it commit in the next.
        let mut batch: Vec<Job> = Vec::new();
        for sql in [
            "INSERT INTO t VALUES (5); INSERT INTO nope VALUES (1)",
            "INSERT INTO t VALUES (6)",
            "INSERT INTO nope VALUES (2)",
            "INSERT INTO t VALUES (7)",
        ] {
            batch.push(Job {
                work: Box::new(move |c| c.execute_batch(sql).map(|()| Box::new(()) as Output)),
                reply: None,
            });
        }
        let results = run_batch(&conn, &mut batch);
        assert_eq!(
            results.iter().map(|(r, _)| r.is_ok()).collect::<Vec<_>>(),
            vec![false, true, false, true]
        );
        let xs: Vec<i64> = conn
            .prepare("SELECT x FROM t ORDER BY x")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(xs, vec![2, 3, 4, 6, 7]);
        drop(conn);
        s.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_search_index_merges_eight_segments_at_once() {
        let (s, dir) = tmp_store("automerge");
        let v: i64 = s
            .read(|c| {
                c.query_row(
                    "SELECT v FROM history_fts_config WHERE k = 'automerge'",
                    [],
                    |r| r.get(0),
                )
            })
            .unwrap();
        assert_eq!(v, FTS_AUTOMERGE);
        s.close();
        // Reopening finds it set (and does not write it again).
        let s = Store::open(&dir.join("svc.db")).unwrap();
        s.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn writer_and_readers_keep_their_page_cache_sizes() {
        let (s, dir) = tmp_store("cache-size");
        let cache = |c: &Connection| c.query_row("PRAGMA cache_size", [], |r| r.get::<_, i64>(0));
        assert_eq!(s.write(move |c| cache(c)).unwrap(), -WRITER_CACHE_KIB);
        assert_eq!(s.read(|c| cache(c)).unwrap(), -READER_CACHE_KIB);
        s.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn reopen_keeps_schema_version() {
        let (s, dir) = tmp_store("reopen");
        let v1: i64 = s
            .read(|c| c.query_row("PRAGMA user_version", [], |r| r.get(0)))
            .unwrap();
        s.close();
        let s2 = Store::open(&dir.join("svc.db")).unwrap();
        let v2: i64 = s2
            .read(|c| c.query_row("PRAGMA user_version", [], |r| r.get(0)))
            .unwrap();
        assert_eq!(v1, v2);
        assert!(v1 >= 1);
        s2.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn rows_written_by_another_connection_are_counted_while_idle() {
        let (s, dir) = tmp_store("outside");
        let other = Connection::open(dir.join("svc.db")).unwrap();
        other
            .execute(
                "INSERT INTO history(at, check_name, severity, message, details) VALUES (1, 'outside', 1, 'm', '')",
                [],
            )
            .unwrap();
        // No write through the store: the idle writer finds the row by itself.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let n: i64 = s
                .read(|c| {
                    c.query_row(
                        "SELECT coalesce(sum(n), 0) FROM history_daily WHERE check_name = 'outside'",
                        [],
                        |r| r.get(0),
                    )
                })
                .unwrap();
            if n == 1 && s.health().search_index_backlog == 0 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "never counted");
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(other);
        s.close();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
