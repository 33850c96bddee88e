//! Incident snapshots (`incident_snapshots`, one row per incident key) and the incident id
//! counter (`kv` key `incidents.next_id`).
//!
//! Rows are written only by the incidents' ordered writer (the `incidents` subsystem); each row
//! is the whole state of one incident, so writing the newest snapshot of a key is enough
//! and a repeated write is harmless.

use rusqlite::{params, Connection};

/// `kv` key of the next incident id.
const NEXT_ID_KEY: &str = "incidents.next_id";

/// One stored incident.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncidentRow {
    /// `ip`, `account` or `host`.
    pub kind: String,
    pub key: String,
    pub id: u64,
    /// Severity level (0 WARNING, 1 HIGH, 2 CRITICAL).
    pub severity: u8,
    /// Microseconds since the epoch.
    pub first_seen: i64,
    pub last_seen: i64,
    pub count: u64,
    pub checks: Vec<String>,
    pub accounts: Vec<String>,
    pub contained: bool,
}

/// A write of the ordered writer: the newest state of a key, or its removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotOp {
    Upsert(IncidentRow),
    Delete { kind: String, key: String },
}

/// Applies one batch of snapshot writes and the id counter (inside the caller's
/// transaction).
/// Removes the snapshot of incident `kind`/`key`.
pub fn delete_snapshot(c: &Connection, kind: &str, key: &str) -> rusqlite::Result<()> {
    c.prepare_cached("DELETE FROM incident_snapshots WHERE kind = ?1 AND key = ?2")?
        .execute([kind, key])
        .map(drop)
}

pub fn apply(c: &Connection, ops: &[SnapshotOp], next_id: u64) -> rusqlite::Result<()> {
    let mut up = c.prepare_cached(
        "INSERT INTO incident_snapshots(kind, key, id, severity, first_seen, last_seen, count, checks, accounts, contained)
         VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)
         ON CONFLICT(kind, key) DO UPDATE SET id=excluded.id, severity=excluded.severity,
           first_seen=excluded.first_seen, last_seen=excluded.last_seen, count=excluded.count,
           checks=excluded.checks, accounts=excluded.accounts, contained=excluded.contained",
    )?;
    let mut del =
        c.prepare_cached("DELETE FROM incident_snapshots WHERE kind = ?1 AND key = ?2")?;
    for op in ops {
        match op {
            SnapshotOp::Upsert(r) => {
                up.execute(params![
                    r.kind,
                    r.key,
                    i64::try_from(r.id).unwrap_or(i64::MAX),
                    r.severity,
                    r.first_seen,
                    r.last_seen,
                    i64::try_from(r.count).unwrap_or(i64::MAX),
                    serde_json::to_string(&r.checks).unwrap_or_else(|_| "[]".into()),
                    serde_json::to_string(&r.accounts).unwrap_or_else(|_| "[]".into()),
                    r.contained,
                ])?;
            }
            SnapshotOp::Delete { kind, key } => {
                del.execute(params![kind, key])?;
            }
        }
    }
    c.prepare_cached(
        "INSERT INTO kv(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    )?
    .execute(params![NEXT_ID_KEY, next_id.to_string()])?;
    Ok(())
}

/// Why a stored row cannot be read back.
#[derive(Debug)]
pub enum RowFault {
    NegativeId,
    BadSeverity,
    NegativeCount,
    /// A column of the wrong type.
    Column(rusqlite::Error),
    /// `checks` or `accounts` is not a JSON list of names.
    Names(serde_json::Error),
}

impl std::fmt::Display for RowFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RowFault::NegativeId => f.write_str("negative id"),
            RowFault::BadSeverity => f.write_str("bad severity"),
            RowFault::NegativeCount => f.write_str("negative count"),
            RowFault::Column(e) => write!(f, "{e}"),
            RowFault::Names(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RowFault {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RowFault::Column(e) => Some(e),
            RowFault::Names(e) => Some(e),
            _ => None,
        }
    }
}

/// A stored row that cannot be read back. Display: `ip "x": negative id`.
#[derive(Debug)]
pub struct BadRow {
    pub kind: String,
    pub key: String,
    pub error: RowFault,
}

impl std::fmt::Display for BadRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?}: {}", self.kind, self.key, self.error)
    }
}

impl std::error::Error for BadRow {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Every stored incident (a row that cannot be read back is reported as [`BadRow`], not
/// fatal) and the stored next id (0 when none).
pub fn load(c: &Connection) -> rusqlite::Result<(Vec<Result<IncidentRow, BadRow>>, u64)> {
    let mut st = c.prepare(
        "SELECT kind, key, id, severity, first_seen, last_seen, count, checks, accounts, contained FROM incident_snapshots",
    )?;
    let rows = st
        .query_map([], |r| {
            let kind: String = r.get(0)?;
            let key: String = r.get(1)?;
            let id: i64 = r.get(2)?;
            let severity: i64 = r.get(3)?;
            let count: i64 = r.get(6)?;
            let checks: String = r.get(7)?;
            let accounts: String = r.get(8)?;
            let parsed = (|| {
                Ok::<_, RowFault>(IncidentRow {
                    kind: kind.clone(),
                    key: key.clone(),
                    id: u64::try_from(id).map_err(|_| RowFault::NegativeId)?,
                    severity: u8::try_from(severity).map_err(|_| RowFault::BadSeverity)?,
                    first_seen: r.get(4).map_err(RowFault::Column)?,
                    last_seen: r.get(5).map_err(RowFault::Column)?,
                    count: u64::try_from(count).map_err(|_| RowFault::NegativeCount)?,
                    checks: serde_json::from_str(&checks).map_err(RowFault::Names)?,
                    accounts: serde_json::from_str(&accounts).map_err(RowFault::Names)?,
                    contained: r.get(9).map_err(RowFault::Column)?,
                })
            })();
            Ok(parsed.map_err(|error| BadRow { kind, key, error }))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let next: Option<String> = c
        .query_row("SELECT value FROM kv WHERE key = ?1", [NEXT_ID_KEY], |r| {
            r.get(0)
        })
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    let next_id = next.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Ok((rows, next_id))
}
