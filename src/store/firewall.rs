//! The firewall's tables: `blocked_ips` (address and subnet blocks), `firewall_dry_run`
//! (blocks automatic callers would have made), `whitelist` (the allow list, shared with the
//! threat routes) and two `kv` rows (`firewall.overrides`, `firewall.rollback`).
//!
//! Times are microseconds since the Unix epoch; `expires` NULL means permanent. An `ip` is
//! an address (`192.0.2.7`) or a CIDR range (`198.51.100.0/24`), in the canonical form
//! `net::cidr::Net` prints (the firewall's `Net`; the store does not import `firewall`).

use rusqlite::{params, Connection, OptionalExtension};

/// One stored block, dry-run record or allow entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub ip: String,
    pub reason: String,
    /// `operator`, `auto`, ... (allow entries: empty).
    pub source: String,
    pub created_by: String,
    pub created: i64,
    pub expires: Option<i64>,
}

/// Which table a row lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Block,
    DryRun,
    Allow,
}

impl Kind {
    fn table(self) -> &'static str {
        match self {
            Kind::Block => "blocked_ips",
            Kind::DryRun => "firewall_dry_run",
            Kind::Allow => "whitelist",
        }
    }
}

/// Every row of one table.
pub fn load(c: &Connection, kind: Kind) -> rusqlite::Result<Vec<Row>> {
    let sql = match kind {
        Kind::Allow => "SELECT ip, reason, '', created_by, created, expires FROM whitelist",
        Kind::Block => "SELECT ip, reason, source, created_by, created, expires FROM blocked_ips",
        Kind::DryRun => {
            "SELECT ip, reason, source, created_by, created, expires FROM firewall_dry_run"
        }
    };
    let mut st = c.prepare(sql)?;
    let rows = st.query_map([], |r| {
        Ok(Row {
            ip: r.get(0)?,
            reason: r.get(1)?,
            source: r.get(2)?,
            created_by: r.get(3)?,
            created: r.get(4)?,
            expires: r.get(5)?,
        })
    })?;
    rows.collect()
}

/// Inserts or replaces rows (one statement prepared once).
pub fn upsert(c: &Connection, kind: Kind, rows: &[Row]) -> rusqlite::Result<()> {
    let sql = match kind {
        Kind::Allow => {
            "INSERT OR REPLACE INTO whitelist(ip, reason, created, created_by, expires) VALUES (?1, ?2, ?5, ?4, ?6)"
        }
        Kind::Block => {
            "INSERT OR REPLACE INTO blocked_ips(ip, reason, source, created_by, created, expires) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        }
        Kind::DryRun => {
            "INSERT OR REPLACE INTO firewall_dry_run(ip, reason, source, created_by, created, expires) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        }
    };
    let mut st = c.prepare_cached(sql)?;
    for r in rows {
        if kind == Kind::Allow {
            st.execute(params![
                r.ip,
                r.reason,
                rusqlite::types::Null,
                r.created_by,
                r.created,
                r.expires
            ])?;
        } else {
            st.execute(params![
                r.ip,
                r.reason,
                r.source,
                r.created_by,
                r.created,
                r.expires
            ])?;
        }
    }
    Ok(())
}

/// Deletes rows by `ip`.
pub fn delete(c: &Connection, kind: Kind, ips: &[String]) -> rusqlite::Result<()> {
    let sql = format!("DELETE FROM {} WHERE ip = ?1", kind.table());
    let mut st = c.prepare_cached(&sql)?;
    for ip in ips {
        st.execute([ip])?;
    }
    Ok(())
}

/// Deletes rows whose expiry is at or before `now`; returns how many per table.
pub fn purge_expired(c: &Connection, now: i64) -> rusqlite::Result<(usize, usize, usize)> {
    let mut n = [0usize; 3];
    for (i, kind) in [Kind::Block, Kind::DryRun, Kind::Allow].iter().enumerate() {
        n[i] = c.execute(
            &format!(
                "DELETE FROM {} WHERE expires IS NOT NULL AND expires <= ?1",
                kind.table()
            ),
            [now],
        )?;
    }
    Ok((n[0], n[1], n[2]))
}

/// The reason of the permanent block of `ip` (canonical text), if it has one.
pub fn permanent_block_reason(c: &Connection, ip: &str) -> rusqlite::Result<Option<String>> {
    c.query_row(
        "SELECT reason FROM blocked_ips WHERE ip = ?1 AND expires IS NULL",
        [ip],
        |r| r.get(0),
    )
    .optional()
}

/// How many addresses `blocked_ips` holds.
pub fn blocked_count(c: &Connection) -> rusqlite::Result<u64> {
    c.query_row("SELECT count(*) FROM blocked_ips", [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let mut c = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&mut c).unwrap();
        c
    }

    fn row(ip: &str, expires: Option<i64>) -> Row {
        Row {
            ip: ip.into(),
            reason: "r".into(),
            source: "operator".into(),
            created_by: "ops".into(),
            created: 10,
            expires,
        }
    }

    #[test]
    fn rows_round_trip_and_expire() {
        let c = conn();
        upsert(
            &c,
            Kind::Block,
            &[row("192.0.2.7", Some(100)), row("198.51.100.0/24", None)],
        )
        .unwrap();
        upsert(&c, Kind::DryRun, &[row("192.0.2.8", Some(50))]).unwrap();
        let mut allow = row("203.0.113.0/24", None);
        allow.source = String::new();
        upsert(&c, Kind::Allow, &[allow.clone()]).unwrap();
        assert_eq!(load(&c, Kind::Allow).unwrap(), vec![allow]);
        let mut blocks = load(&c, Kind::Block).unwrap();
        blocks.sort_by(|a, b| a.ip.cmp(&b.ip));
        assert_eq!(blocks[0], row("192.0.2.7", Some(100)));
        // Replacing keeps one row per address.
        upsert(&c, Kind::Block, &[row("192.0.2.7", Some(200))]).unwrap();
        assert_eq!(load(&c, Kind::Block).unwrap().len(), 2);
        assert_eq!(purge_expired(&c, 150).unwrap(), (0, 1, 0));
        assert_eq!(purge_expired(&c, 250).unwrap(), (1, 0, 0));
        delete(&c, Kind::Block, &["198.51.100.0/24".into()]).unwrap();
        assert!(load(&c, Kind::Block).unwrap().is_empty());
        super::super::kv::put(&c, "firewall.overrides", Some("{}")).unwrap();
        assert_eq!(
            super::super::kv::get(&c, "firewall.overrides")
                .unwrap()
                .as_deref(),
            Some("{}")
        );
        super::super::kv::put(&c, "firewall.overrides", None).unwrap();
        assert_eq!(
            super::super::kv::get(&c, "firewall.overrides").unwrap(),
            None
        );
    }
}
