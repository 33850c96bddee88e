//! Tables of the findings pipeline: history, the active set, source checkpoints.

use std::net::IpAddr;

use jiff::Timestamp;
use rusqlite::{params, Connection, Row};

use crate::findings::{Finding, Severity};

fn ts(micros: i64) -> Timestamp {
    Timestamp::from_microsecond(micros).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Appends one history row per finding (one dispatch each), then derives the day counts and
/// the search index of the new rows ([`super::history::derive_pending`]) in the same
/// transaction.
pub fn insert_history(c: &Connection, findings: &[&Finding]) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(
        "INSERT INTO history(at, check_name, severity, message, details, account, ip, path) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)",
    )?;
    for f in findings {
        st.execute(params![
            f.last_seen.as_microsecond(),
            f.check,
            f.severity.level(),
            f.message,
            f.details,
            f.account,
            f.ip.map(|i| i.to_string()),
            f.path,
        ])?;
    }
    super::history::derive_pending(c)?;
    Ok(())
}

/// Writes the merged state of active findings.
pub fn upsert_active(c: &Connection, findings: &[&Finding]) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(
        "INSERT INTO active_findings(check_name, message, severity, details, account, ip, path, first_seen, last_seen, count)
         VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)
         ON CONFLICT(check_name, message) DO UPDATE SET severity=excluded.severity, details=excluded.details,
           account=excluded.account, ip=excluded.ip, path=excluded.path, first_seen=excluded.first_seen,
           last_seen=excluded.last_seen, count=excluded.count",
    )?;
    for f in findings {
        st.execute(params![
            f.check,
            f.message,
            f.severity.level(),
            f.details,
            f.account,
            f.ip.map(|i| i.to_string()),
            f.path,
            f.first_seen.as_microsecond(),
            f.last_seen.as_microsecond(),
            f.count as i64,
        ])?;
    }
    Ok(())
}

/// Deletes the active rows of the given (check, message) keys.
pub fn delete_active_keys<'a>(
    c: &Connection,
    keys: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> rusqlite::Result<()> {
    let mut st =
        c.prepare_cached("DELETE FROM active_findings WHERE check_name = ?1 AND message = ?2")?;
    for (check, message) in keys {
        st.execute(params![check, message])?;
    }
    Ok(())
}

pub fn delete_active(c: &Connection, keys: &[(String, String)]) -> rusqlite::Result<()> {
    delete_active_keys(c, keys.iter().map(|(a, b)| (a.as_str(), b.as_str())))
}

fn finding_from_row(r: &Row<'_>) -> rusqlite::Result<Finding> {
    let level: u8 = r.get(2)?;
    let ip: Option<String> = r.get(5)?;
    Ok(Finding {
        check: r.get(0)?,
        message: r.get(1)?,
        severity: Severity::from_level(level).unwrap_or(Severity::Warning),
        details: r.get(3)?,
        account: r.get(4)?,
        ip: ip.and_then(|s| s.parse::<IpAddr>().ok()),
        path: r.get(6)?,
        first_seen: ts(r.get(7)?),
        last_seen: ts(r.get(8)?),
        count: r.get::<_, i64>(9)?.max(0) as u64,
    })
}

pub fn load_active(c: &Connection) -> rusqlite::Result<Vec<Finding>> {
    let mut st = c.prepare(
        "SELECT check_name, message, severity, details, account, ip, path, first_seen, last_seen, count FROM active_findings",
    )?;
    let rows = st.query_map([], finding_from_row)?;
    rows.collect()
}

pub fn save_checkpoint(
    c: &Connection,
    source: &str,
    inode: u64,
    offset: u64,
    now: Timestamp,
) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT INTO source_checkpoints(source, inode, offset, updated) VALUES (?1,?2,?3,?4)
         ON CONFLICT(source) DO UPDATE SET inode=excluded.inode, offset=excluded.offset, updated=excluded.updated",
    )?
    .execute(params![source, inode as i64, offset as i64, now.as_microsecond()])?;
    Ok(())
}

/// The saved (inode, offset) of a source.
pub fn load_checkpoint(c: &Connection, source: &str) -> rusqlite::Result<Option<(u64, u64)>> {
    let mut st = c.prepare("SELECT inode, offset FROM source_checkpoints WHERE source = ?1")?;
    let mut rows = st.query([source])?;
    match rows.next()? {
        Some(r) => Ok(Some((
            r.get::<_, i64>(0)? as u64,
            r.get::<_, i64>(1)? as u64,
        ))),
        None => Ok(None),
    }
}

pub fn history_count(c: &Connection) -> rusqlite::Result<i64> {
    c.query_row("SELECT count(*) FROM history", [], |r| r.get(0))
}
