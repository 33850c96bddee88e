//! Crawler verification records (`bot_verify`): cached results (`verified`, `negative`) and
//! attempt history (`no_ptr`, `failed`) per address and claimed identity.
//!
//! Times are Unix seconds. `retry_at` is when lookups may run again (results: when the cached
//! result lapses); `expires` is when the row is removed. The verifier keeps the same rows in
//! memory and writes here first: a row it could not write is never believed.

use rusqlite::{params, Connection};

/// One record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub ip: String,
    pub name: String,
    pub kind: String,
    pub at: i64,
    pub retry_at: i64,
    pub expires: i64,
}

/// `kv` key of the last history cleanup (Unix seconds).
pub const LAST_CLEANUP_KEY: &str = "crawler.last_cleanup";

/// Every unexpired row.
pub fn load(c: &Connection, now: i64) -> rusqlite::Result<Vec<Row>> {
    let mut st = c.prepare(
        "SELECT ip, name, kind, at, retry_at, expires FROM bot_verify WHERE expires > ?1",
    )?;
    let rows = st.query_map(params![now], |r| {
        Ok(Row {
            ip: r.get(0)?,
            name: r.get(1)?,
            kind: r.get(2)?,
            at: r.get(3)?,
            retry_at: r.get(4)?,
            expires: r.get(5)?,
        })
    })?;
    rows.collect()
}

/// Writes `row` (replacing the address's record for that identity) and removes `evict`
/// (a history entry it replaces).
pub fn put(c: &Connection, row: &Row, evict: Option<(&str, &str)>) -> rusqlite::Result<()> {
    if let Some((ip, name)) = evict {
        c.execute(
            "DELETE FROM bot_verify WHERE ip = ?1 AND name = ?2",
            params![ip, name],
        )?;
    }
    c.prepare_cached(
        "INSERT OR REPLACE INTO bot_verify (ip, name, kind, at, retry_at, expires)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        row.ip,
        row.name,
        row.kind,
        row.at,
        row.retry_at,
        row.expires
    ])?;
    Ok(())
}

/// Removes expired rows when the last cleanup is at least `every` seconds old (or never
/// ran), and records this attempt's time first so a failing cleanup is not retried before
/// `every` has passed again. Returns the rows removed, `None` when not due.
pub fn cleanup_if_due(c: &Connection, now: i64, every: i64) -> rusqlite::Result<Option<usize>> {
    let last = last_cleanup(c);
    if last.is_some_and(|l| now >= l && now - l < every) {
        return Ok(None);
    }
    super::kv::set(c, LAST_CLEANUP_KEY, &now.to_string())?;
    let n = c.execute("DELETE FROM bot_verify WHERE expires <= ?1", params![now])?;
    Ok(Some(n))
}

/// When the last cleanup ran (Unix seconds), if it ever did and the mark reads.
pub fn last_cleanup(c: &Connection) -> Option<i64> {
    super::kv::get(c, LAST_CLEANUP_KEY)
        .ok()
        .flatten()
        .and_then(|v| v.parse().ok())
}

/// Removes every record and the cleanup mark (`svc store reset-bot-verify`).
pub fn clear(c: &Connection) -> rusqlite::Result<usize> {
    super::kv::delete(c, LAST_CLEANUP_KEY)?;
    c.execute("DELETE FROM bot_verify", [])
}
