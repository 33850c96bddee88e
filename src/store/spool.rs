//! The durable webhook queue (`webhook_spool`, queue row `panel.spool`): notifications
//! waiting for delivery, delivered oldest first, removed once delivered or given up.

use rusqlite::{params, Connection, OptionalExtension};

/// One spooled notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolRecord {
    pub id: i64,
    /// Microseconds since the epoch when it was spooled.
    pub created: i64,
    pub describe: String,
    pub body: Vec<u8>,
}

/// Removes the records `evict` (overflow: the caller counts them as losses) and appends one
/// record; returns its id and how many of `evict` existed.
pub fn push(
    c: &Connection,
    created: i64,
    describe: &str,
    body: &[u8],
    evict: &[i64],
) -> rusqlite::Result<(i64, usize)> {
    let mut evicted = 0;
    {
        let mut del = c.prepare_cached("DELETE FROM webhook_spool WHERE id = ?1")?;
        for id in evict {
            evicted += del.execute([id])?;
        }
    }
    c.prepare_cached("INSERT INTO webhook_spool(created, describe, body) VALUES (?1, ?2, ?3)")?
        .execute(params![created, describe, body])?;
    Ok((c.last_insert_rowid(), evicted))
}

/// The oldest record.
pub fn head(c: &Connection) -> rusqlite::Result<Option<SpoolRecord>> {
    c.prepare_cached("SELECT id, created, describe, body FROM webhook_spool ORDER BY id LIMIT 1")?
        .query_row([], |r| {
            Ok(SpoolRecord {
                id: r.get(0)?,
                created: r.get(1)?,
                describe: r.get(2)?,
                body: r.get(3)?,
            })
        })
        .optional()
}

/// Every record id, oldest first (start-up: the depth and order of the queue).
pub fn ids(c: &Connection) -> rusqlite::Result<Vec<i64>> {
    let mut st = c.prepare("SELECT id FROM webhook_spool ORDER BY id")?;
    let out = st
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<i64>>>()?;
    Ok(out)
}

/// Removes a delivered (or given-up) record; false when it was already gone.
pub fn remove(c: &Connection, id: i64) -> rusqlite::Result<bool> {
    Ok(c.prepare_cached("DELETE FROM webhook_spool WHERE id = ?1")?
        .execute([id])?
        > 0)
}
