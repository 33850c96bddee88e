//! Reads behind the data API: audit entries, blocked addresses, the whitelist,
//! database-object backups, and history rows of one finding or one account.

use std::net::IpAddr;

use jiff::Timestamp;
use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::Serialize;

use crate::model::finding::{Finding, Severity};

fn ts(us: i64) -> Timestamp {
    Timestamp::from_microsecond(us).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// One audit entry.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRow {
    pub id: i64,
    #[serde(serialize_with = "crate::timefmt::ser")]
    pub at: Timestamp,
    pub actor: String,
    pub via: String,
    pub action: String,
    pub target: String,
    pub outcome: String,
    pub remote_ip: String,
}

/// The newest `limit` audit entries, newest first.
pub fn audit_newest(c: &Connection, limit: usize) -> rusqlite::Result<Vec<AuditRow>> {
    let mut st = c.prepare(
        "SELECT id, at, actor, via, action, target, outcome, remote_ip FROM audit
         ORDER BY at DESC, id DESC LIMIT ?1",
    )?;
    let rows = st.query_map([limit as i64], |r| {
        Ok(AuditRow {
            id: r.get(0)?,
            at: ts(r.get(1)?),
            actor: r.get(2)?,
            via: r.get(3)?,
            action: r.get(4)?,
            target: r.get(5)?,
            outcome: r.get(6)?,
            remote_ip: r.get(7)?,
        })
    })?;
    rows.collect()
}

/// One blocked address.
#[derive(Debug, Clone, Serialize)]
pub struct BlockedIp {
    pub ip: String,
    pub reason: String,
    pub source: String,
    #[serde(serialize_with = "crate::timefmt::ser")]
    pub created: Timestamp,
    #[serde(
        serialize_with = "crate::timefmt::ser_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires: Option<Timestamp>,
}

fn blocked(r: &Row<'_>) -> rusqlite::Result<BlockedIp> {
    Ok(BlockedIp {
        ip: r.get(0)?,
        reason: r.get(1)?,
        source: r.get(2)?,
        created: ts(r.get(3)?),
        expires: r.get::<_, Option<i64>>(4)?.map(ts),
    })
}

/// Every blocked address, newest first.
pub fn blocked_ips(c: &Connection) -> rusqlite::Result<Vec<BlockedIp>> {
    let mut st = c.prepare(
        "SELECT ip, reason, source, created, expires FROM blocked_ips ORDER BY created DESC, ip",
    )?;
    let rows = st.query_map([], blocked)?;
    rows.collect()
}

/// The block of one address, if any.
pub fn blocked_ip(c: &Connection, ip: IpAddr) -> rusqlite::Result<Option<BlockedIp>> {
    c.query_row(
        "SELECT ip, reason, source, created, expires FROM blocked_ips WHERE ip = ?1",
        [ip.to_string()],
        blocked,
    )
    .optional()
}

/// One whitelisted address.
#[derive(Debug, Clone, Serialize)]
pub struct WhitelistEntry {
    pub ip: String,
    pub reason: String,
    #[serde(serialize_with = "crate::timefmt::ser")]
    pub created: Timestamp,
    pub created_by: String,
    #[serde(
        serialize_with = "crate::timefmt::ser_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires: Option<Timestamp>,
}

/// The whole whitelist, newest first.
pub fn whitelist(c: &Connection) -> rusqlite::Result<Vec<WhitelistEntry>> {
    let mut st = c.prepare(
        "SELECT ip, reason, created, created_by, expires FROM whitelist ORDER BY created DESC, ip",
    )?;
    let rows = st.query_map([], |r| {
        Ok(WhitelistEntry {
            ip: r.get(0)?,
            reason: r.get(1)?,
            created: ts(r.get(2)?),
            created_by: r.get(3)?,
            expires: r.get::<_, Option<i64>>(4)?.map(ts),
        })
    })?;
    rows.collect()
}

/// One captured database object (a dropped trigger, event, procedure or function).
#[derive(Debug, Clone, Serialize)]
pub struct DbObjectBackup {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    pub database: String,
    pub kind: String,
    pub name: String,
    #[serde(serialize_with = "crate::timefmt::ser")]
    pub created: Timestamp,
    /// Length of the captured statement in bytes.
    pub statement_bytes: u64,
    /// The statement; only filled by [`db_object_backup`].
    #[serde(skip)]
    pub statement: String,
}

fn backup(r: &Row<'_>, with_statement: bool) -> rusqlite::Result<DbObjectBackup> {
    Ok(DbObjectBackup {
        key: r.get(0)?,
        account: r.get(1)?,
        database: r.get(2)?,
        kind: r.get(3)?,
        name: r.get(4)?,
        created: ts(r.get(5)?),
        statement_bytes: r.get::<_, i64>(6)?.max(0) as u64,
        statement: if with_statement {
            r.get(7)?
        } else {
            String::new()
        },
    })
}

/// Every backup (without statements), newest first.
pub fn db_object_backups(c: &Connection) -> rusqlite::Result<Vec<DbObjectBackup>> {
    let mut st = c.prepare(
        "SELECT key, account, database_name, kind, name, created, length(CAST(statement AS BLOB))
         FROM db_object_backups ORDER BY created DESC, key",
    )?;
    let rows = st.query_map([], |r| backup(r, false))?;
    rows.collect()
}

/// Keeps a database object before a fix changes or drops it: `statement` puts it back.
pub fn add_db_object_backup(c: &Connection, b: &DbObjectBackup) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO db_object_backups(key, account, database_name, kind, name, statement, created)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        rusqlite::params![
            b.key,
            b.account,
            b.database,
            b.kind,
            b.name,
            b.statement,
            b.created.as_microsecond()
        ],
    )?;
    Ok(())
}

/// One backup with its statement.
pub fn db_object_backup(c: &Connection, key: &str) -> rusqlite::Result<Option<DbObjectBackup>> {
    c.query_row(
        "SELECT key, account, database_name, kind, name, created, length(CAST(statement AS BLOB)), statement
         FROM db_object_backups WHERE key = ?1",
        [key],
        |r| backup(r, true),
    )
    .optional()
}

/// One history row (one dispatch of a finding).
#[derive(Debug, Clone, Serialize)]
pub struct HistoryRow {
    pub id: i64,
    #[serde(serialize_with = "crate::timefmt::ser")]
    pub at: Timestamp,
    pub check: String,
    pub severity: Severity,
    pub message: String,
    pub details: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

const HISTORY_COLUMNS: &str = "id, at, check_name, severity, message, details, account, ip, path";

fn history_row(r: &Row<'_>) -> rusqlite::Result<HistoryRow> {
    let level: u8 = r.get(3)?;
    Ok(HistoryRow {
        id: r.get(0)?,
        at: ts(r.get(1)?),
        check: r.get(2)?,
        severity: Severity::from_level(level).unwrap_or(Severity::Warning),
        message: r.get(4)?,
        details: r.get(5)?,
        account: r.get(6)?,
        ip: r.get(7)?,
        path: r.get(8)?,
    })
}

/// The newest `cap` history rows of one finding, newest first, and how many there are.
pub fn history_of(
    c: &Connection,
    check: &str,
    message: &str,
    cap: usize,
) -> rusqlite::Result<(Vec<HistoryRow>, u64)> {
    let total: i64 = c.query_row(
        "SELECT count(*) FROM history WHERE check_name = ?1 AND message = ?2",
        params![check, message],
        |r| r.get(0),
    )?;
    let mut st = c.prepare(&format!(
        "SELECT {HISTORY_COLUMNS} FROM history WHERE check_name = ?1 AND message = ?2
         ORDER BY at DESC, id DESC LIMIT ?3"
    ))?;
    let rows = st.query_map(params![check, message, cap as i64], history_row)?;
    Ok((rows.collect::<rusqlite::Result<_>>()?, total.max(0) as u64))
}

/// A finding no longer active, rebuilt from its history: the newest row's fields, with
/// `first_seen`, `last_seen` and `count` over all its rows. `None` when it never dispatched.
pub fn finding_from_history(
    c: &Connection,
    check: &str,
    message: &str,
) -> rusqlite::Result<Option<Finding>> {
    let newest = c
        .query_row(
            &format!(
                "SELECT {HISTORY_COLUMNS} FROM history WHERE check_name = ?1 AND message = ?2
                 ORDER BY at DESC, id DESC LIMIT 1"
            ),
            params![check, message],
            history_row,
        )
        .optional()?;
    let Some(row) = newest else {
        return Ok(None);
    };
    let (first, count): (i64, i64) = c.query_row(
        "SELECT min(at), count(*) FROM history WHERE check_name = ?1 AND message = ?2",
        params![check, message],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(Some(Finding {
        check: row.check,
        severity: row.severity,
        message: row.message,
        details: row.details,
        account: row.account,
        ip: row.ip.and_then(|s| s.parse().ok()),
        path: row.path,
        first_seen: ts(first),
        last_seen: row.at,
        count: count.max(0) as u64,
    }))
}

/// The newest `cap` history rows naming `account`, newest first, and how many there are.
pub fn history_of_account(
    c: &Connection,
    account: &str,
    cap: usize,
) -> rusqlite::Result<(Vec<HistoryRow>, u64)> {
    let total: i64 = c.query_row(
        "SELECT count(*) FROM history WHERE account = ?1",
        [account],
        |r| r.get(0),
    )?;
    let mut st = c.prepare(&format!(
        "SELECT {HISTORY_COLUMNS} FROM history WHERE account = ?1 ORDER BY at DESC, id DESC LIMIT ?2"
    ))?;
    let rows = st.query_map(params![account, cap as i64], history_row)?;
    Ok((rows.collect::<rusqlite::Result<_>>()?, total.max(0) as u64))
}

/// The newest `cap` history rows since `since` naming address `ip` or account `account`,
/// newest first, and how many there are (the incident timeline).
pub fn history_of_source(
    c: &Connection,
    since: Timestamp,
    ip: Option<&str>,
    account: Option<&str>,
    cap: usize,
) -> rusqlite::Result<(Vec<HistoryRow>, u64)> {
    let filter = "at >= ?1 AND ((?2 IS NOT NULL AND ip = ?2) OR (?3 IS NOT NULL AND account = ?3))";
    let since = since.as_microsecond();
    let total: i64 = c.query_row(
        &format!("SELECT count(*) FROM history WHERE {filter}"),
        params![since, ip, account],
        |r| r.get(0),
    )?;
    let mut st = c.prepare(&format!(
        "SELECT {HISTORY_COLUMNS} FROM history WHERE {filter} ORDER BY at DESC, id DESC LIMIT ?4"
    ))?;
    let rows = st.query_map(params![since, ip, account, cap as i64], history_row)?;
    Ok((rows.collect::<rusqlite::Result<_>>()?, total.max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn history_reads_and_finding_rebuild() {
        let dir = std::env::temp_dir().join(format!("svc-store-data-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let s = Store::open(&dir.join("svc.db")).unwrap();
        let t = |sec| Timestamp::from_second(sec).unwrap();
        let f1 = Finding::new("webshell", Severity::High, "m", t(10)).with_account("alice");
        let f2 = Finding::new("webshell", Severity::Critical, "m", t(20))
            .with_account("alice")
            .with_ip("192.0.2.1".parse().unwrap());
        let other = Finding::new("webshell", Severity::Warning, "n", t(30));
        s.write(move |c| crate::store::findings::insert_history(c, &[&f1, &f2, &other]))
            .unwrap();
        let (rows, total) = s.read(|c| history_of(c, "webshell", "m", 1)).unwrap();
        assert_eq!((rows.len(), total), (1, 2));
        assert_eq!(rows[0].severity, Severity::Critical);
        let f = s
            .read(|c| finding_from_history(c, "webshell", "m"))
            .unwrap()
            .unwrap();
        assert_eq!((f.first_seen, f.last_seen, f.count), (t(10), t(20), 2));
        assert_eq!(f.ip, Some("192.0.2.1".parse().unwrap()));
        assert!(s
            .read(|c| finding_from_history(c, "webshell", "zz"))
            .unwrap()
            .is_none());
        let (rows, total) = s.read(|c| history_of_account(c, "alice", 100)).unwrap();
        assert_eq!((rows.len(), total), (2, 2));
        assert!(s.read(blocked_ips).unwrap().is_empty());
        assert!(s.read(db_object_backups).unwrap().is_empty());
        s.write(|c| {
            c.execute(
                "INSERT INTO db_object_backups(key, account, database_name, kind, name, statement, created)
                 VALUES ('k1', 'alice', 'wp', 'trigger', 'evil', 'CREATE TRIGGER évil', 5)",
                [],
            )
            .map(|_| ())
        })
        .unwrap();
        let list = s.read(db_object_backups).unwrap();
        assert_eq!(list[0].statement_bytes, 20);
        assert!(list[0].statement.is_empty());
        let one = s.read(|c| db_object_backup(c, "k1")).unwrap().unwrap();
        assert_eq!(one.statement, "CREATE TRIGGER évil");
        s.close();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
