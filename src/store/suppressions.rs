//! The suppressions table: operator rules that keep matching findings out of the active set.

use jiff::Timestamp;
use rusqlite::{params, Connection, Row};
use serde::Serialize;

/// One stored suppression rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suppression {
    pub id: i64,
    pub check: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_prefix: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
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

/// What a new rule holds (the id and creation instant are assigned on insert).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewSuppression {
    pub check: String,
    pub message: Option<String>,
    pub path_prefix: Option<String>,
    pub ip: Option<String>,
    pub account: Option<String>,
    pub reason: String,
    pub expires: Option<Timestamp>,
}

fn ts(us: i64) -> Timestamp {
    Timestamp::from_microsecond(us).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn row(r: &Row<'_>) -> rusqlite::Result<Suppression> {
    Ok(Suppression {
        id: r.get(0)?,
        check: r.get(1)?,
        message: r.get(2)?,
        path_prefix: r.get(3)?,
        ip: r.get(4)?,
        account: r.get(5)?,
        reason: r.get(6)?,
        created: ts(r.get(7)?),
        created_by: r.get(8)?,
        expires: r.get::<_, Option<i64>>(9)?.map(ts),
    })
}

/// Every rule, newest first.
pub fn list(c: &Connection) -> rusqlite::Result<Vec<Suppression>> {
    let mut st = c.prepare(
        "SELECT id, check_name, message, path_prefix, ip, account, reason, created, created_by, expires
         FROM suppressions ORDER BY created DESC, id DESC",
    )?;
    let rows = st.query_map([], row)?;
    rows.collect()
}

/// Inserts a rule; returns it with its id.
pub fn insert(
    c: &Connection,
    new: &NewSuppression,
    created: Timestamp,
    created_by: &str,
) -> rusqlite::Result<Suppression> {
    c.execute(
        "INSERT INTO suppressions(check_name, message, path_prefix, ip, account, reason, created, created_by, expires)
         VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)",
        params![
            new.check,
            new.message,
            new.path_prefix,
            new.ip,
            new.account,
            new.reason,
            created.as_microsecond(),
            created_by,
            new.expires.map(|t| t.as_microsecond()),
        ],
    )?;
    Ok(Suppression {
        id: c.last_insert_rowid(),
        check: new.check.clone(),
        message: new.message.clone(),
        path_prefix: new.path_prefix.clone(),
        ip: new.ip.clone(),
        account: new.account.clone(),
        reason: new.reason.clone(),
        created,
        created_by: created_by.to_string(),
        expires: new.expires,
    })
}

/// Deletes a rule; returns the number of rows removed (0 or 1).
pub fn delete(c: &Connection, id: i64) -> rusqlite::Result<usize> {
    c.execute("DELETE FROM suppressions WHERE id = ?1", [id])
}
