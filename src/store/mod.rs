//! The SQLite store: one writer thread fed by a bounded queue, separate read connections.
//!
//! Guarantees:
//! - All writes run on the writer thread, batched into one transaction per wake-up; each job
//!   runs inside its own savepoint so one failing job does not undo the others.
//! - [`Store::write`] returns only after the job's transaction committed (or failed).
//! - Health is read from atomics ([`Store::health`]); it never touches the database.

pub mod data;
pub mod findings;
pub mod firewall;
pub mod history;
pub mod incidents;
pub mod quarantine;
mod schema;
pub mod spool;
pub mod suppressions;
pub mod threat;

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};
use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags};
use serde::Serialize;

/// Jobs the writer queue holds before callers are refused.
pub const WRITER_QUEUE: usize = 4096;
/// Jobs committed together at most.
const BATCH: usize = 512;
/// How long a waiting writer caller waits for its commit.
const WRITE_WAIT: Duration = Duration::from_secs(10);
/// Page cache of each pooled read connection, KiB (SQLite's default is 2 MiB). Up to eight
/// readers stay open; with the default, concurrent history searches left ~30 MiB of cached
/// pages behind. Re-reads come from the OS page cache.
const READER_CACHE_KIB: i64 = 512;

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
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Busy => f.write_str("store writer queue is full"),
            StoreError::Timeout => f.write_str("store did not commit in time"),
            StoreError::Closed => f.write_str("store is closed"),
            StoreError::Sql(e) => write!(f, "store error: {e}"),
        }
    }
}

impl std::error::Error for StoreError {}

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
}

struct Inner {
    path: PathBuf,
    tx: Mutex<Option<Sender<Job>>>,
    readers: Mutex<Vec<Connection>>,
    counters: Counters,
    writer: Mutex<Option<JoinHandle<()>>>,
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
            .map_err(|e| StoreError::Sql(rusqlite::Error::ToSqlConversionFailure(Box::new(e))))?;
        }
        let mut conn = open_conn(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        schema::migrate(&mut conn)?;

        let (tx, rx) = bounded::<Job>(WRITER_QUEUE);
        let inner = Arc::new(Inner {
            path: path.to_path_buf(),
            tx: Mutex::new(Some(tx)),
            readers: Mutex::new(Vec::new()),
            counters: Counters::default(),
            writer: Mutex::new(None),
        });
        let weak = Arc::downgrade(&inner);
        let handle = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer_loop(conn, rx, weak))
            .map_err(|e| StoreError::Sql(rusqlite::Error::ToSqlConversionFailure(Box::new(e))))?;
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
        match tx.try_send(job) {
            Ok(()) => {
                self.inner.counters.waiting.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(TrySendError::Full(_)) => {
                self.inner.counters.refused.fetch_add(1, Ordering::Relaxed);
                Err(StoreError::Busy)
            }
            Err(TrySendError::Disconnected(_)) => Err(StoreError::Closed),
        }
    }

    /// Runs `f` on the writer thread and waits for its commit.
    pub fn write<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<R> + Send + 'static,
    {
        let (rtx, rrx) = bounded(1);
        self.submit(Job {
            work: Box::new(move |c| f(c).map(|r| Box::new(r) as Output)),
            reply: Some(rtx),
        })?;
        match rrx.recv_timeout(WRITE_WAIT) {
            Ok(Ok(out)) => out
                .downcast::<R>()
                .map(|b| *b)
                .map_err(|_| StoreError::Closed),
            Ok(Err(e)) => Err(e),
            Err(RecvTimeoutError::Timeout) => Err(StoreError::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(StoreError::Closed),
        }
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
        }
    }

    /// Stops accepting jobs, lets the writer finish what is queued, and joins it.
    pub fn close(&self) {
        self.inner.tx.lock().take();
        if let Some(h) = self.inner.writer.lock().take() {
            let _ = h.join();
        }
    }
}

fn writer_loop(conn: Connection, rx: Receiver<Job>, inner: std::sync::Weak<Inner>) {
    let mut batch: Vec<Job> = Vec::with_capacity(BATCH);
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        let n = batch.len() as u64;
        let results = run_batch(&conn, &mut batch);
        if let Some(inner) = inner.upgrade() {
            let c = &inner.counters;
            c.waiting.fetch_sub(n, Ordering::Relaxed);
            let failed = results.iter().filter(|(r, _)| r.is_err()).count() as u64;
            c.writes_ok.fetch_add(n - failed, Ordering::Relaxed);
            c.writes_failed.fetch_add(failed, Ordering::Relaxed);
            c.commits.fetch_add(1, Ordering::Relaxed);
            c.last_error_failed
                .store(failed == n && failed > 0, Ordering::Relaxed);
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
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        log::error!("store: cannot begin transaction: {e}");
        let msg = e.to_string();
        for job in batch.drain(..) {
            results.push((Err(StoreError::Sql(sql_err(&msg))), job.reply));
        }
        return results;
    }
    for job in batch.drain(..) {
        let _ = conn.execute_batch("SAVEPOINT job");
        let r = (job.work)(conn);
        match r {
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
    if let Err(e) = conn.execute_batch("COMMIT") {
        log::error!("store: commit failed: {e}");
        let _ = conn.execute_batch("ROLLBACK");
        let msg = e.to_string();
        for r in results.iter_mut() {
            r.0 = Err(StoreError::Sql(sql_err(&msg)));
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
}
