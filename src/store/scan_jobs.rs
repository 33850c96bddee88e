//! Scan jobs (`scan_jobs`): one row per requested run of the scheduled checks, with its
//! state (`queued`, `running`, `done`, `error`) and times in Unix microseconds.

use rusqlite::{params, Connection};

/// Marks the jobs a previous process left queued or running as `error` with reason
/// `daemon_restarted`; returns how many.
pub fn fail_leftovers(c: &Connection, now_micros: i64) -> rusqlite::Result<usize> {
    c.execute(
        "UPDATE scan_jobs SET state = 'error', reason = 'daemon_restarted', finished = ?1 WHERE state IN ('queued', 'running')",
        [now_micros],
    )
}

/// When the latest finished (`done`) job finished.
pub fn latest_done(c: &Connection) -> rusqlite::Result<Option<i64>> {
    c.query_row(
        "SELECT max(finished) FROM scan_jobs WHERE state = 'done'",
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

/// A job the worker took.
pub fn start(c: &Connection, id: i64, started_micros: i64) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE scan_jobs SET state = 'running', started = ?2 WHERE id = ?1",
        params![id, started_micros],
    )
    .map(drop)
}

/// A job that ran to its end with `findings` findings.
pub fn finish(
    c: &Connection,
    id: i64,
    finished_micros: i64,
    findings: i64,
) -> rusqlite::Result<usize> {
    c.execute(
        "UPDATE scan_jobs SET state = 'done', finished = ?2, findings = ?3 WHERE id = ?1",
        params![id, finished_micros, findings],
    )
}
