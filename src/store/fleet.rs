//! Fleet mode (issue 30): the outbound alert spool `fleet_spool` (queue row `fleet.spool`)
//! and the dedup record `fleet_pushed` (which address and scenario were pushed, until when).
//!
//! Guarantees: [`admit`] runs in one writer transaction, so an alert's spool row, its dedup
//! mark and the overflow evictions it causes commit together or not at all.

use rusqlite::{params, Connection, OptionalExtension};

/// One spooled alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolRow {
    pub id: i64,
    pub ip: String,
    pub scenario: String,
    /// The alert object (JSON) as the LAPI takes it.
    pub alert: String,
}

/// What [`admit`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admission {
    /// The spooled row, or `None` when the pair was pushed within its window.
    pub inserted: Option<i64>,
    /// Ids removed to stay within capacity (oldest first, never one of `keep`).
    pub evicted: Vec<i64>,
}

/// Spools `alert` for `ip` and `scenario` unless that pair was pushed and its decision has
/// not ended (`until` after `now`); marks it pushed until `until`, then removes the oldest
/// rows beyond `capacity` (the spool held `held` rows before), never one in `keep`.
#[allow(clippy::too_many_arguments)]
pub fn admit(
    c: &Connection,
    ip: &str,
    scenario: &str,
    alert: &str,
    now: i64,
    until: i64,
    held: usize,
    capacity: usize,
    keep: &[i64],
) -> rusqlite::Result<Admission> {
    let mut out = Admission::default();
    let seen: Option<i64> = c
        .prepare_cached("SELECT until FROM fleet_pushed WHERE ip = ?1 AND scenario = ?2")?
        .query_row(params![ip, scenario], |r| r.get(0))
        .optional()?;
    if seen.is_some_and(|u| u > now) {
        return Ok(out);
    }
    c.prepare_cached(
        "INSERT INTO fleet_pushed(ip, scenario, until) VALUES (?1, ?2, ?3)
         ON CONFLICT(ip, scenario) DO UPDATE SET until = excluded.until",
    )?
    .execute(params![ip, scenario, until])?;
    c.prepare_cached(
        "INSERT INTO fleet_spool(created, ip, scenario, alert) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![now, ip, scenario, alert])?;
    out.inserted = Some(c.last_insert_rowid());
    let over = (held + 1).saturating_sub(capacity);
    if over > 0 {
        let mut st = c.prepare_cached("SELECT id FROM fleet_spool ORDER BY id")?;
        let ids = st
            .query_map([], |r| r.get::<_, i64>(0))?
            .collect::<rusqlite::Result<Vec<i64>>>()?;
        let victims: Vec<i64> = ids
            .into_iter()
            .filter(|id| !keep.contains(id) && Some(*id) != out.inserted)
            .take(over)
            .collect();
        remove(c, &victims)?;
        out.evicted = victims;
    }
    Ok(out)
}

/// The oldest row.
pub fn head(c: &Connection) -> rusqlite::Result<Option<SpoolRow>> {
    c.prepare_cached("SELECT id, ip, scenario, alert FROM fleet_spool ORDER BY id LIMIT 1")?
        .query_row([], |r| {
            Ok(SpoolRow {
                id: r.get(0)?,
                ip: r.get(1)?,
                scenario: r.get(2)?,
                alert: r.get(3)?,
            })
        })
        .optional()
}

/// Every row id, oldest first.
pub fn ids(c: &Connection) -> rusqlite::Result<Vec<i64>> {
    let mut st = c.prepare("SELECT id FROM fleet_spool ORDER BY id")?;
    let out = st
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<i64>>>()?;
    Ok(out)
}

/// Removes rows (delivered, refused or evicted); returns how many existed.
pub fn remove(c: &Connection, ids: &[i64]) -> rusqlite::Result<usize> {
    let mut del = c.prepare_cached("DELETE FROM fleet_spool WHERE id = ?1")?;
    let mut n = 0;
    for id in ids {
        n += del.execute([id])?;
    }
    Ok(n)
}

/// Forgets dedup marks whose decision ended before `now`.
pub fn prune_pushed(c: &Connection, now: i64) -> rusqlite::Result<usize> {
    c.prepare_cached("DELETE FROM fleet_pushed WHERE until <= ?1")?
        .execute([now])
}
