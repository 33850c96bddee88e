//! Scan jobs (`scan_jobs`): one row per requested run of the scheduled checks, with its
//! state (`queued`, `running`, `done`, `error`, `cancelled`) and times in Unix
//! microseconds.

use rusqlite::{params, Connection, OptionalExtension, Row};

/// One stored job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRow {
    pub id: i64,
    pub kind: String,
    pub state: String,
    pub reason: Option<String>,
    pub requested: i64,
    pub started: Option<i64>,
    pub finished: Option<i64>,
    pub findings: i64,
}

const COLUMNS: &str = "id, kind, state, reason, requested, started, finished, findings";

fn job_row(r: &Row<'_>) -> rusqlite::Result<JobRow> {
    Ok(JobRow {
        id: r.get(0)?,
        kind: r.get(1)?,
        state: r.get(2)?,
        reason: r.get(3)?,
        requested: r.get(4)?,
        started: r.get(5)?,
        finished: r.get(6)?,
        findings: r.get(7)?,
    })
}

/// The newest `limit` jobs, newest first.
pub fn recent(c: &Connection, limit: usize) -> rusqlite::Result<Vec<JobRow>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM scan_jobs ORDER BY id DESC LIMIT ?1"
    ))?;
    let rows = st.query_map([limit as i64], job_row)?;
    rows.collect()
}

/// Every job, for counting: how many rows there are.
pub fn count(c: &Connection) -> rusqlite::Result<i64> {
    c.query_row("SELECT count(*) FROM scan_jobs", [], |r| r.get(0))
}

/// The job `id`, if stored.
pub fn get(c: &Connection, id: i64) -> rusqlite::Result<Option<JobRow>> {
    c.query_row(
        &format!("SELECT {COLUMNS} FROM scan_jobs WHERE id = ?1"),
        [id],
        job_row,
    )
    .optional()
}

/// A job cancelled before it finished (`reason` says whether it was waiting or running);
/// false when it was no longer queued or running.
pub fn cancel(
    c: &Connection,
    id: i64,
    reason: &str,
    finished_micros: i64,
) -> rusqlite::Result<bool> {
    c.execute(
        "UPDATE scan_jobs SET state = 'cancelled', reason = ?2, finished = ?3 WHERE id = ?1 AND state IN ('queued', 'running')",
        params![id, reason, finished_micros],
    )
    .map(|n| n > 0)
}

/// Marks the jobs a previous process left queued or running as `error` with reason
/// `daemon_restarted`; returns how many.
pub fn fail_leftovers(c: &Connection, now_micros: i64) -> rusqlite::Result<usize> {
    c.execute(
        "UPDATE scan_jobs SET state = 'error', reason = 'daemon_restarted', finished = ?1 WHERE state IN ('queued', 'running')",
        [now_micros],
    )
}

/// When the latest finished (`done`) scan of the whole host (not of one account) finished.
pub fn latest_done(c: &Connection) -> rusqlite::Result<Option<i64>> {
    c.query_row(
        "SELECT max(finished) FROM scan_jobs WHERE state = 'done' AND kind NOT LIKE 'account:%'",
        [],
        |r| r.get(0),
    )
}

/// Records a new queued job of `kind`; returns its id.
pub fn insert_queued(c: &Connection, kind: &str, requested_micros: i64) -> rusqlite::Result<i64> {
    c.execute(
        "INSERT INTO scan_jobs(kind, state, requested) VALUES (?1, 'queued', ?2)",
        params![kind, requested_micros],
    )?;
    Ok(c.last_insert_rowid())
}

/// A job the full queue refused.
pub fn refuse_full(c: &Connection, id: i64) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE scan_jobs SET state = 'error', reason = 'queue_full' WHERE id = ?1",
        [id],
    )
    .map(drop)
}

/// A job the worker took; false when it is no longer queued (cancelled while waiting).
pub fn start(c: &Connection, id: i64, started_micros: i64) -> rusqlite::Result<bool> {
    c.execute(
        "UPDATE scan_jobs SET state = 'running', started = ?2 WHERE id = ?1 AND state = 'queued'",
        params![id, started_micros],
    )
    .map(|n| n > 0)
}

/// A job that ran to its end with `findings` findings (a job cancelled while running stays
/// cancelled).
pub fn finish(
    c: &Connection,
    id: i64,
    finished_micros: i64,
    findings: i64,
) -> rusqlite::Result<usize> {
    c.execute(
        "UPDATE scan_jobs SET state = 'done', finished = ?2, findings = ?3 WHERE id = ?1 AND state = 'running'",
        params![id, finished_micros, findings],
    )
}
