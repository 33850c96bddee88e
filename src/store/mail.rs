//! Mail antivirus tables: `mail_quarantine` (one row per quarantined message, its state
//! and the recovery metadata of every spool file) and `mail_scan_hours` (scan counters per
//! UTC hour and engine, for the 24-hour statistics).

use jiff::Timestamp;
use rusqlite::{params, Connection, OptionalExtension};

/// A `mail_quarantine` row. `meta` and `files` are JSON owned by `mail::quarantine`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    pub state: String,
    pub mta: String,
    pub queue_id: String,
    pub spool_path: String,
    pub meta: String,
    pub files: String,
    pub quarantined_at: i64,
    pub updated: i64,
    pub error: Option<String>,
}

const COLUMNS: &str =
    "id, state, mta, queue_id, spool_path, meta, files, quarantined_at, updated, error";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get(0)?,
        state: r.get(1)?,
        mta: r.get(2)?,
        queue_id: r.get(3)?,
        spool_path: r.get(4)?,
        meta: r.get(5)?,
        files: r.get(6)?,
        quarantined_at: r.get(7)?,
        updated: r.get(8)?,
        error: r.get(9)?,
    })
}

pub fn insert(c: &Connection, r: &Row) -> rusqlite::Result<()> {
    c.execute(
        &format!("INSERT INTO mail_quarantine({COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)"),
        params![
            r.id,
            r.state,
            r.mta,
            r.queue_id,
            r.spool_path,
            r.meta,
            r.files,
            r.quarantined_at,
            r.updated,
            r.error
        ],
    )
    .map(|_| ())
}

/// Moves a row to `state` (only from one of `from`); returns whether it changed.
pub fn set_state(
    c: &Connection,
    id: &str,
    from: &[&str],
    state: &str,
    error: Option<&str>,
    at: Timestamp,
) -> rusqlite::Result<bool> {
    let cur: Option<String> = c
        .query_row(
            "SELECT state FROM mail_quarantine WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .optional()?;
    match cur {
        Some(s) if from.contains(&s.as_str()) => {
            c.execute(
                "UPDATE mail_quarantine SET state = ?2, error = ?3, updated = ?4 WHERE id = ?1",
                params![id, state, error, at.as_microsecond()],
            )?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

pub fn get(c: &Connection, id: &str) -> rusqlite::Result<Option<Row>> {
    c.query_row(
        &format!("SELECT {COLUMNS} FROM mail_quarantine WHERE id = ?1"),
        [id],
        row,
    )
    .optional()
}

/// Rows in one of `states`, newest first, a page of them, and how many there are.
pub fn list(
    c: &Connection,
    states: &[&str],
    offset: u64,
    limit: u64,
) -> rusqlite::Result<(Vec<Row>, u64)> {
    let marks = vec!["?"; states.len()].join(",");
    let total: i64 = c.query_row(
        &format!("SELECT count(*) FROM mail_quarantine WHERE state IN ({marks})"),
        rusqlite::params_from_iter(states.iter()),
        |r| r.get(0),
    )?;
    let mut st = c.prepare(&format!(
        "SELECT {COLUMNS} FROM mail_quarantine WHERE state IN ({marks}) ORDER BY quarantined_at DESC, id LIMIT {} OFFSET {}",
        limit.min(i64::MAX as u64),
        offset.min(i64::MAX as u64)
    ))?;
    let rows = st
        .query_map(rusqlite::params_from_iter(states.iter()), row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok((rows, total.max(0) as u64))
}

/// Queue ids of rows in `state` updated at or after `since`.
pub fn queue_ids(c: &Connection, state: &str, since: Timestamp) -> rusqlite::Result<Vec<String>> {
    let mut st = c.prepare(
        "SELECT queue_id FROM mail_quarantine WHERE state = ?1 AND updated >= ?2 LIMIT 100000",
    )?;
    let rows = st.query_map(params![state, since.as_microsecond()], |r| r.get(0))?;
    rows.collect()
}

/// Counters of one scan, added to its hour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub scanned: u64,
    pub infected: u64,
    pub quarantined: u64,
    pub incomplete: u64,
    pub errors: u64,
}

impl Counts {
    pub fn add(&mut self, o: &Counts) {
        self.scanned += o.scanned;
        self.infected += o.infected;
        self.quarantined += o.quarantined;
        self.incomplete += o.incomplete;
        self.errors += o.errors;
    }
}

pub fn add_hour(c: &Connection, hour: i64, engine: &str, n: &Counts) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO mail_scan_hours(hour, engine, scanned, infected, quarantined, incomplete, errors)
         VALUES (?1,?2,?3,?4,?5,?6,?7)
         ON CONFLICT(hour, engine) DO UPDATE SET scanned = scanned + excluded.scanned,
           infected = infected + excluded.infected, quarantined = quarantined + excluded.quarantined,
           incomplete = incomplete + excluded.incomplete, errors = errors + excluded.errors",
        params![
            hour,
            engine,
            n.scanned as i64,
            n.infected as i64,
            n.quarantined as i64,
            n.incomplete as i64,
            n.errors as i64
        ],
    )?;
    // Hours older than a week are not read again.
    c.execute(
        "DELETE FROM mail_scan_hours WHERE hour < ?1",
        [hour - 24 * 7],
    )?;
    Ok(())
}

/// Sums per engine over hours `>= since_hour`.
pub fn sum_since(c: &Connection, since_hour: i64) -> rusqlite::Result<Vec<(String, Counts)>> {
    let mut st = c.prepare(
        "SELECT engine, sum(scanned), sum(infected), sum(quarantined), sum(incomplete), sum(errors)
         FROM mail_scan_hours WHERE hour >= ?1 GROUP BY engine ORDER BY engine",
    )?;
    let rows = st.query_map([since_hour], |r| {
        let g = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(i)?.max(0) as u64) };
        Ok((
            r.get::<_, String>(0)?,
            Counts {
                scanned: g(1)?,
                infected: g(2)?,
                quarantined: g(3)?,
                incomplete: g(4)?,
                errors: g(5)?,
            },
        ))
    })?;
    rows.collect()
}
