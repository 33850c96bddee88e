//! The quarantine table: one row per quarantined file, with its full record as JSON.

use jiff::Timestamp;
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

/// A quarantine row as the API and CLI show it.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub id: String,
    pub original_path: String,
    pub check: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    #[serde(serialize_with = "crate::timefmt::ser")]
    pub quarantined_at: Timestamp,
    #[serde(
        serialize_with = "crate::timefmt::ser_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub restored_at: Option<Timestamp>,
    /// The mechanics record (owner, mode, times, size, hash).
    pub record: serde_json::Value,
}

#[allow(clippy::too_many_arguments)]
pub fn insert(
    c: &Connection,
    id: &str,
    record_json: &str,
    original_path: &str,
    check: &str,
    reason: &str,
    account: Option<&str>,
    at: Timestamp,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO quarantine(id, record, original_path, check_name, reason, account, at) VALUES (?1,?2,?3,?4,?5,?6,?7)",
        params![id, record_json, original_path, check, reason, account, at.as_microsecond()],
    )
    .map(|_| ())
}

fn ts(us: i64) -> Timestamp {
    Timestamp::from_microsecond(us).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<Entry> {
    let record: String = r.get(1)?;
    Ok(Entry {
        id: r.get(0)?,
        record: serde_json::from_str(&record).unwrap_or(serde_json::Value::Null),
        original_path: r.get(2)?,
        check: r.get(3)?,
        reason: r.get(4)?,
        account: r.get(5)?,
        quarantined_at: ts(r.get(6)?),
        restored_at: r.get::<_, Option<i64>>(7)?.map(ts),
    })
}

const COLUMNS: &str = "id, record, original_path, check_name, reason, account, at, restored_at";

/// Newest first.
pub fn list(c: &Connection) -> rusqlite::Result<Vec<Entry>> {
    let mut st = c.prepare(&format!(
        "SELECT {COLUMNS} FROM quarantine ORDER BY at DESC, id"
    ))?;
    let rows = st.query_map([], entry)?;
    rows.collect()
}

/// Entries of `check` quarantined from exactly `original_path`, newest first.
pub fn for_path(c: &Connection, check: &str, original_path: &str) -> rusqlite::Result<Vec<Entry>> {
    let mut st = c.prepare(&format!(
        "SELECT {COLUMNS} FROM quarantine WHERE check_name = ?1 AND original_path = ?2 ORDER BY at DESC, id"
    ))?;
    let rows = st.query_map(params![check, original_path], entry)?;
    rows.collect()
}

/// Entries whose file belonged to `account`, newest first.
pub fn for_account(c: &Connection, account: &str) -> rusqlite::Result<Vec<Entry>> {
    let mut st = c.prepare(&format!(
        "SELECT {COLUMNS} FROM quarantine WHERE account = ?1 ORDER BY at DESC, id"
    ))?;
    let rows = st.query_map([account], entry)?;
    rows.collect()
}

pub fn get(c: &Connection, id: &str) -> rusqlite::Result<Option<Entry>> {
    c.query_row(
        &format!("SELECT {COLUMNS} FROM quarantine WHERE id = ?1"),
        [id],
        entry,
    )
    .optional()
}

/// Deletes entry `id`; false when there was none.
pub fn delete(c: &Connection, id: &str) -> rusqlite::Result<bool> {
    c.execute("DELETE FROM quarantine WHERE id = ?1", [id])
        .map(|n| n > 0)
}

pub fn mark_restored(c: &Connection, id: &str, at: Timestamp) -> rusqlite::Result<usize> {
    c.execute(
        "UPDATE quarantine SET restored_at = ?2 WHERE id = ?1 AND restored_at IS NULL",
        params![id, at.as_microsecond()],
    )
}
