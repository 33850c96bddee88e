//! Abuse reporting (issue 15): the durable report spool `abuse_spool` (queue row
//! `abuse_reporting.spool`) and the dedup record `abuse_reported` (which address and
//! category each destination was sent, and when).
//!
//! Guarantees: [`admit`] runs in one writer transaction, so a report's spool rows, its
//! dedup marks and the overflow evictions it causes commit together or not at all.

use rusqlite::{params, Connection, OptionalExtension};

/// One spooled report for one destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolRow {
    pub id: i64,
    pub dest: String,
    /// Microseconds since the epoch when it was spooled.
    pub created: i64,
    pub ip: String,
    /// Category names, comma-separated.
    pub categories: String,
    pub comment: String,
    /// Microseconds since the epoch of the abuse (the block).
    pub at: i64,
}

/// A report to spool for some destinations.
#[derive(Debug, Clone)]
pub struct NewReport {
    pub ip: String,
    pub categories: Vec<String>,
    pub comment: String,
    pub at: i64,
}

/// What [`admit`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admission {
    /// Spooled rows: (id, index of the destination in the caller's list).
    pub inserted: Vec<(i64, usize)>,
    /// Destinations for which every category was reported within the window.
    pub deduplicated: usize,
    /// Ids removed to stay within capacity (oldest first, never one of `keep`).
    pub evicted: Vec<i64>,
}

/// Spools `r` for each destination `(name, dedup window in microseconds)` with the
/// categories not sent to it within its window (marking them sent now), then removes the
/// oldest rows beyond `capacity` (the spool held `held` rows before), never one in `keep`.
pub fn admit(
    c: &Connection,
    dests: &[(String, i64)],
    r: &NewReport,
    now: i64,
    held: usize,
    capacity: usize,
    keep: &[i64],
) -> rusqlite::Result<Admission> {
    let mut out = Admission::default();
    {
        let mut seen = c.prepare_cached(
            "SELECT at FROM abuse_reported WHERE dest = ?1 AND ip = ?2 AND category = ?3",
        )?;
        let mut mark = c.prepare_cached(
            "INSERT INTO abuse_reported(dest, ip, category, at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(dest, ip, category) DO UPDATE SET at = excluded.at",
        )?;
        let mut ins = c.prepare_cached(
            "INSERT INTO abuse_spool(dest, created, ip, categories, comment, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        for (i, (dest, window)) in dests.iter().enumerate() {
            let mut fresh: Vec<&str> = Vec::new();
            for cat in &r.categories {
                let last: Option<i64> = seen
                    .query_row(params![dest, r.ip, cat], |row| row.get(0))
                    .optional()?;
                if last.is_some_and(|t| t > now - window) {
                    continue;
                }
                fresh.push(cat);
            }
            if fresh.is_empty() {
                out.deduplicated += 1;
                continue;
            }
            for cat in &fresh {
                mark.execute(params![dest, r.ip, cat, now])?;
            }
            ins.execute(params![dest, now, r.ip, fresh.join(","), r.comment, r.at])?;
            out.inserted.push((c.last_insert_rowid(), i));
        }
    }
    let excess = (held + out.inserted.len()).saturating_sub(capacity);
    if excess > 0 {
        let mut st = c.prepare_cached("SELECT id FROM abuse_spool ORDER BY id LIMIT ?1")?;
        let ids: Vec<i64> = st
            .query_map([(excess + keep.len()) as i64], |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let mut del = c.prepare_cached("DELETE FROM abuse_spool WHERE id = ?1")?;
        for id in ids.into_iter().filter(|id| !keep.contains(id)).take(excess) {
            if del.execute([id])? > 0 {
                out.evicted.push(id);
            }
        }
    }
    Ok(out)
}

/// The oldest row of destination `dest`.
pub fn head(c: &Connection, dest: &str) -> rusqlite::Result<Option<SpoolRow>> {
    c.prepare_cached(
        "SELECT id, dest, created, ip, categories, comment, at FROM abuse_spool
         WHERE dest = ?1 ORDER BY id LIMIT 1",
    )?
    .query_row([dest], |r| {
        Ok(SpoolRow {
            id: r.get(0)?,
            dest: r.get(1)?,
            created: r.get(2)?,
            ip: r.get(3)?,
            categories: r.get(4)?,
            comment: r.get(5)?,
            at: r.get(6)?,
        })
    })
    .optional()
}

/// Every row as (id, destination), oldest first (start-up: depth and order).
pub fn ids(c: &Connection) -> rusqlite::Result<Vec<(i64, String)>> {
    let mut st = c.prepare("SELECT id, dest FROM abuse_spool ORDER BY id")?;
    let out = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(out)
}

/// Removes rows (delivered, rejected, or of a destination no longer configured); returns
/// how many existed.
pub fn remove(c: &Connection, ids: &[i64]) -> rusqlite::Result<usize> {
    let mut del = c.prepare_cached("DELETE FROM abuse_spool WHERE id = ?1")?;
    let mut n = 0;
    for id in ids {
        n += del.execute([id])?;
    }
    Ok(n)
}

/// Forgets dedup marks that no window covers any more: marks of destinations not in
/// `dests`, and marks older than their destination's window. Returns how many went.
pub fn prune_reported(
    c: &Connection,
    dests: &[(String, i64)],
    now: i64,
) -> rusqlite::Result<usize> {
    let mut n = 0;
    let names: Vec<&str> = dests.iter().map(|(d, _)| d.as_str()).collect();
    let stale: Vec<String> = {
        let mut st = c.prepare("SELECT DISTINCT dest FROM abuse_reported")?;
        let all = st
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        all.into_iter()
            .filter(|d| !names.contains(&d.as_str()))
            .collect()
    };
    for d in stale {
        n += c.execute("DELETE FROM abuse_reported WHERE dest = ?1", [d])?;
    }
    for (d, window) in dests {
        n += c.execute(
            "DELETE FROM abuse_reported WHERE dest = ?1 AND at <= ?2",
            params![d, now - window],
        )?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let mut c = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&mut c).unwrap();
        c
    }

    fn report(ip: &str, cats: &[&str]) -> NewReport {
        NewReport {
            ip: ip.into(),
            categories: cats.iter().map(|s| s.to_string()).collect(),
            comment: "c".into(),
            at: 5,
        }
    }

    #[test]
    fn dedup_is_per_destination_address_and_category_within_the_window() {
        let c = conn();
        let h = 3_600_000_000i64;
        let dests = vec![("a".to_string(), h), ("b".to_string(), 2 * h)];
        let r = report("192.0.2.7", &["brute_force", "ssh"]);
        let a = admit(&c, &dests, &r, 0, 0, 100, &[]).unwrap();
        assert_eq!(a.inserted.len(), 2);
        // Same address and categories: nothing new for either destination.
        let a = admit(&c, &dests, &r, h / 2, 2, 100, &[]).unwrap();
        assert_eq!((a.inserted.len(), a.deduplicated), (0, 2));
        // One new category: only that one is sent.
        let r2 = report("192.0.2.7", &["ssh", "web_app_attack"]);
        let a = admit(&c, &dests, &r2, h / 2, 2, 100, &[]).unwrap();
        assert_eq!(a.inserted.len(), 2);
        assert_eq!(
            head(&c, "a").unwrap().unwrap().categories,
            "brute_force,ssh"
        );
        // After a's window (one hour) a is sent again, b (two hours) is not.
        let a = admit(&c, &dests, &r, h + 1, 4, 100, &[]).unwrap();
        assert_eq!(a.inserted, vec![(a.inserted[0].0, 0)]);
        assert_eq!(a.deduplicated, 1);
        // b is gone (3 marks), a's 3 marks are older than its window.
        assert_eq!(prune_reported(&c, &dests[..1], 3 * h).unwrap(), 6);
    }

    #[test]
    fn overflow_evicts_the_oldest_but_never_a_kept_row() {
        let c = conn();
        let dests = vec![("a".to_string(), 1)];
        let mut held = 0;
        for i in 0..3 {
            let a = admit(
                &c,
                &dests,
                &report(&format!("192.0.2.{i}"), &["x"]),
                10 * i,
                held,
                3,
                &[],
            )
            .unwrap();
            held += a.inserted.len();
        }
        let ids: Vec<i64> = ids(&c).unwrap().into_iter().map(|(i, _)| i).collect();
        let a = admit(
            &c,
            &dests,
            &report("192.0.2.9", &["x"]),
            100,
            3,
            3,
            &[ids[0]],
        )
        .unwrap();
        assert_eq!(a.evicted, vec![ids[1]]);
        assert_eq!(head(&c, "a").unwrap().unwrap().id, ids[0]);
        assert_eq!(remove(&c, &[ids[0], ids[1]]).unwrap(), 1);
        assert_eq!(super::ids(&c).unwrap().len(), 2);
    }
}
