//! Threat intelligence tables (migration 9): `attack_records` (one row per address),
//! `attack_events` (history), `threat_cache` (answers of remote verdict sources),
//! `auto_block_pending` (durable auto-block retries), `threat_undo` (undo entries),
//! `threat_feed_entries` (downloaded feed lists), and `kv` rows named `threat.*` /
//! `reputation.*` (quota, back-off, reminders, feed refresh times).
//!
//! Times are microseconds since the Unix epoch. Addresses are in canonical text form
//! (IPv4-mapped IPv6 written as IPv4).

use std::borrow::Borrow;
use std::fmt::Write as _;

use rusqlite::{params, Connection, OptionalExtension};

/// Event kinds, in the order of the `n_*` count columns.
pub const KIND_COLUMNS: [&str; 7] = [
    "n_brute_force",
    "n_webshell_upload",
    "n_phishing",
    "n_command_and_control",
    "n_waf_block",
    "n_auth_success",
    "n_file_upload",
];

/// One stored attack record.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordRow {
    pub ip: String,
    pub first_seen: i64,
    pub last_seen: i64,
    pub counts: [i64; 7],
    pub accounts: Vec<String>,
    pub accounts_more: i64,
    pub score: f64,
    pub score_at: i64,
    pub scoring: i64,
    /// 0 none, 1 expiring (with a block), 2 permanent.
    pub evidence: i64,
    pub evidence_until: i64,
}

/// One stored attack event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRow {
    pub at: i64,
    pub ip: String,
    pub kind: String,
    /// Finding severity level (0 WARNING, 1 HIGH, 2 CRITICAL).
    pub severity: i64,
    pub check: String,
    pub account: Option<String>,
    pub message: String,
}

/// An attack event to insert, borrowing its text (the attack database writes its pending
/// events as they are held in memory).
#[derive(Clone, Copy, Debug)]
pub struct NewEvent<'a> {
    pub at: i64,
    /// Stored in its canonical text form (an IPv4-mapped IPv6 address as IPv4).
    pub ip: std::net::IpAddr,
    pub kind: &'a str,
    /// Finding severity level (0 WARNING, 1 HIGH, 2 CRITICAL).
    pub severity: i64,
    pub check: &'a str,
    pub account: Option<&'a str>,
    pub message: &'a str,
}

/// Inserts or replaces records (one prepared statement).
pub fn upsert_records<R: Borrow<RecordRow>>(
    c: &Connection,
    rows: impl IntoIterator<Item = R>,
) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(
        "INSERT OR REPLACE INTO attack_records(ip, first_seen, last_seen, n_brute_force,
            n_webshell_upload, n_phishing, n_command_and_control, n_waf_block, n_auth_success,
            n_file_upload, accounts, accounts_more, score, score_at, scoring, evidence,
            evidence_until)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    )?;
    for r in rows {
        let r = r.borrow();
        let accounts = serde_json::to_string(&r.accounts).unwrap_or_else(|_| "[]".into());
        st.execute(params![
            r.ip,
            r.first_seen,
            r.last_seen,
            r.counts[0],
            r.counts[1],
            r.counts[2],
            r.counts[3],
            r.counts[4],
            r.counts[5],
            r.counts[6],
            accounts,
            r.accounts_more,
            r.score,
            r.score_at,
            r.scoring,
            r.evidence,
            r.evidence_until,
        ])?;
    }
    Ok(())
}

/// Deletes records by address.
pub fn delete_records(c: &Connection, ips: &[String]) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached("DELETE FROM attack_records WHERE ip = ?1")?;
    for ip in ips {
        st.execute([ip])?;
    }
    Ok(())
}

/// The `limit` most recently seen records, most recent first.
pub fn load_records(c: &Connection, limit: usize) -> rusqlite::Result<Vec<RecordRow>> {
    let mut st = c.prepare(
        "SELECT ip, first_seen, last_seen, n_brute_force, n_webshell_upload, n_phishing,
                n_command_and_control, n_waf_block, n_auth_success, n_file_upload, accounts,
                accounts_more, score, score_at, scoring, evidence, evidence_until
         FROM attack_records ORDER BY last_seen DESC LIMIT ?1",
    )?;
    let rows = st.query_map([limit as i64], |r| {
        let accounts: String = r.get(10)?;
        Ok(RecordRow {
            ip: r.get(0)?,
            first_seen: r.get(1)?,
            last_seen: r.get(2)?,
            counts: [
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
                r.get(9)?,
            ],
            accounts: serde_json::from_str(&accounts).unwrap_or_default(),
            accounts_more: r.get(11)?,
            score: r.get(12)?,
            score_at: r.get(13)?,
            scoring: r.get(14)?,
            evidence: r.get(15)?,
            evidence_until: r.get(16)?,
        })
    })?;
    rows.collect()
}

/// Number of stored records.
pub fn count_records(c: &Connection) -> rusqlite::Result<u64> {
    c.query_row("SELECT count(*) FROM attack_records", [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n.max(0) as u64)
}

/// Appends events (one prepared statement).
pub fn insert_events<'a>(
    c: &Connection,
    rows: impl IntoIterator<Item = NewEvent<'a>>,
) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(
        "INSERT INTO attack_events(at, ip, kind, severity, check_name, account, message)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    // One buffer for every address's text.
    let mut ip = String::new();
    for e in rows {
        ip.clear();
        let _ = write!(ip, "{}", e.ip.to_canonical());
        st.execute(params![
            e.at, ip, e.kind, e.severity, e.check, e.account, e.message
        ])?;
    }
    Ok(())
}

/// The newest `limit` events of `ip`, newest first, and whether older ones exist.
pub fn events_of(
    c: &Connection,
    ip: &str,
    limit: usize,
) -> rusqlite::Result<(Vec<EventRow>, bool)> {
    let mut st = c.prepare_cached(
        "SELECT at, ip, kind, severity, check_name, account, message FROM attack_events
         WHERE ip = ?1 ORDER BY at DESC, id DESC LIMIT ?2",
    )?;
    let rows = st.query_map(params![ip, limit as i64 + 1], |r| {
        Ok(EventRow {
            at: r.get(0)?,
            ip: r.get(1)?,
            kind: r.get(2)?,
            severity: r.get(3)?,
            check: r.get(4)?,
            account: r.get(5)?,
            message: r.get(6)?,
        })
    })?;
    let mut out: Vec<EventRow> = rows.collect::<rusqlite::Result<_>>()?;
    let more = out.len() > limit;
    out.truncate(limit);
    Ok((out, more))
}

/// Event counts per (hour since the epoch, kind) since `since`.
pub fn hourly_counts(c: &Connection, since: i64) -> rusqlite::Result<Vec<(i64, String, u64)>> {
    let mut st = c.prepare(
        "SELECT at / 3600000000, kind, count(*) FROM attack_events WHERE at >= ?1 GROUP BY 1, 2",
    )?;
    let rows = st.query_map([since], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)?.max(0) as u64))
    })?;
    rows.collect()
}

/// Number of stored events.
pub fn count_events(c: &Connection) -> rusqlite::Result<u64> {
    c.query_row("SELECT count(*) FROM attack_events", [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n.max(0) as u64)
}

/// Deletes events older than `before` and, beyond that, the oldest ones over `max_rows`.
/// Returns how many were deleted.
pub fn prune_events(c: &Connection, before: i64, max_rows: u64) -> rusqlite::Result<usize> {
    let mut n = c.execute("DELETE FROM attack_events WHERE at < ?1", [before])?;
    let total = count_events(c)?;
    if total > max_rows {
        let over = (total - max_rows) as i64;
        n += c.execute(
            "DELETE FROM attack_events WHERE id IN (SELECT id FROM attack_events ORDER BY id LIMIT ?1)",
            [over],
        )?;
    }
    Ok(n)
}

/// A cached answer of a remote source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheRow {
    pub fetched: i64,
    pub expires: i64,
    pub score: Option<i64>,
    pub reason: String,
    pub data: String,
}

pub fn cache_get(c: &Connection, source: &str, ip: &str) -> rusqlite::Result<Option<CacheRow>> {
    c.query_row(
        "SELECT fetched, expires, score, reason, data FROM threat_cache WHERE source = ?1 AND ip = ?2",
        params![source, ip],
        |r| {
            Ok(CacheRow {
                fetched: r.get(0)?,
                expires: r.get(1)?,
                score: r.get(2)?,
                reason: r.get(3)?,
                data: r.get(4)?,
            })
        },
    )
    .optional()
}

pub fn cache_put(c: &Connection, source: &str, ip: &str, row: &CacheRow) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT OR REPLACE INTO threat_cache(source, ip, fetched, expires, score, reason, data)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        source,
        ip,
        row.fetched,
        row.expires,
        row.score,
        row.reason,
        row.data
    ])?;
    Ok(())
}

/// Deletes cached answers that expired at or before `now`.
pub fn cache_purge(c: &Connection, now: i64) -> rusqlite::Result<usize> {
    c.execute("DELETE FROM threat_cache WHERE expires <= ?1", [now])
}

/// A durable auto-block retry record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingRow {
    pub ip: String,
    pub reason: String,
    pub created: i64,
    pub expires: i64,
    pub attempts: i64,
    pub next_at: i64,
    pub last_error: String,
}

pub fn load_pending(c: &Connection) -> rusqlite::Result<Vec<PendingRow>> {
    let mut st = c.prepare(
        "SELECT ip, reason, created, expires, attempts, next_at, last_error FROM auto_block_pending ORDER BY created",
    )?;
    let rows = st.query_map([], |r| {
        Ok(PendingRow {
            ip: r.get(0)?,
            reason: r.get(1)?,
            created: r.get(2)?,
            expires: r.get(3)?,
            attempts: r.get(4)?,
            next_at: r.get(5)?,
            last_error: r.get(6)?,
        })
    })?;
    rows.collect()
}

pub fn upsert_pending(c: &Connection, rows: &[PendingRow]) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(
        "INSERT OR REPLACE INTO auto_block_pending(ip, reason, created, expires, attempts, next_at, last_error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for r in rows {
        st.execute(params![
            r.ip,
            r.reason,
            r.created,
            r.expires,
            r.attempts,
            r.next_at,
            r.last_error
        ])?;
    }
    Ok(())
}

pub fn delete_pending(c: &Connection, ips: &[String]) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached("DELETE FROM auto_block_pending WHERE ip = ?1")?;
    for ip in ips {
        st.execute([ip])?;
    }
    Ok(())
}

/// A stored undo entry (`body` is the entry as JSON).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndoRow {
    pub token_hash: String,
    pub caller: String,
    pub action: String,
    pub seq: i64,
    pub created: i64,
    pub expires: i64,
    pub body: String,
}

pub fn insert_undo(c: &Connection, row: &UndoRow) -> rusqlite::Result<()> {
    c.execute(
        "INSERT OR REPLACE INTO threat_undo(token_hash, caller, action, seq, created, expires, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            row.token_hash,
            row.caller,
            row.action,
            row.seq,
            row.created,
            row.expires,
            row.body
        ],
    )?;
    Ok(())
}

pub fn delete_undo(c: &Connection, token_hashes: &[String]) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached("DELETE FROM threat_undo WHERE token_hash = ?1")?;
    for h in token_hashes {
        st.execute([h])?;
    }
    Ok(())
}

/// Undo entries that have not expired at `now`, oldest first.
pub fn load_undo(c: &Connection, now: i64) -> rusqlite::Result<Vec<UndoRow>> {
    c.execute("DELETE FROM threat_undo WHERE expires <= ?1", [now])?;
    let mut st = c.prepare(
        "SELECT token_hash, caller, action, seq, created, expires, body FROM threat_undo ORDER BY seq",
    )?;
    let rows = st.query_map([], |r| {
        Ok(UndoRow {
            token_hash: r.get(0)?,
            caller: r.get(1)?,
            action: r.get(2)?,
            seq: r.get(3)?,
            created: r.get(4)?,
            expires: r.get(5)?,
            body: r.get(6)?,
        })
    })?;
    rows.collect()
}

/// Replaces the entries of `feed`.
pub fn replace_feed(c: &Connection, feed: &str, nets: &[String]) -> rusqlite::Result<()> {
    c.execute("DELETE FROM threat_feed_entries WHERE feed = ?1", [feed])?;
    let mut st =
        c.prepare_cached("INSERT OR IGNORE INTO threat_feed_entries(feed, net) VALUES (?1, ?2)")?;
    for n in nets {
        st.execute(params![feed, n])?;
    }
    Ok(())
}

pub fn load_feed(c: &Connection, feed: &str) -> rusqlite::Result<Vec<String>> {
    let mut st = c.prepare("SELECT net FROM threat_feed_entries WHERE feed = ?1")?;
    let rows = st.query_map([feed], |r| r.get(0))?;
    rows.collect()
}

/// Daily quota reservation: when the stored day is `day` and `used < quota`, counts one
/// more request and answers true; a new day starts at one. Answers false (and changes
/// nothing) when the day's quota is used up. One statement sequence inside the writer's
/// transaction, so concurrent reservations never exceed the quota.
pub fn reserve_quota(c: &Connection, key: &str, day: i64, quota: u32) -> rusqlite::Result<bool> {
    let cur = super::kv::get(c, key)?;
    let (d, used) = cur
        .as_deref()
        .and_then(|v| v.split_once(':'))
        .and_then(|(d, u)| Some((d.parse::<i64>().ok()?, u.parse::<u64>().ok()?)))
        .unwrap_or((day, 0));
    let used = if d == day { used } else { 0 };
    if used >= u64::from(quota) {
        return Ok(false);
    }
    super::kv::set(c, key, &format!("{day}:{}", used + 1))?;
    Ok(true)
}

/// (day, used) of a quota key.
pub fn quota_used(c: &Connection, key: &str) -> rusqlite::Result<Option<(i64, u64)>> {
    Ok(super::kv::get(c, key)?
        .as_deref()
        .and_then(|v| v.split_once(':'))
        .and_then(|(d, u)| Some((d.parse().ok()?, u.parse().ok()?))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let mut c = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&mut c).unwrap();
        c
    }

    #[test]
    fn records_events_cache_and_quota_round_trip() {
        let c = conn();
        let r = RecordRow {
            ip: "192.0.2.7".into(),
            first_seen: 1,
            last_seen: 5,
            counts: [1, 0, 0, 0, 2, 3, 0],
            accounts: vec!["root".into(), "a\"b".into()],
            accounts_more: 1,
            score: 42.5,
            score_at: 5,
            scoring: 1,
            evidence: 2,
            evidence_until: 0,
        };
        upsert_records(&c, std::slice::from_ref(&r)).unwrap();
        assert_eq!(load_records(&c, 10).unwrap(), vec![r]);
        assert_eq!(count_records(&c).unwrap(), 1);
        delete_records(&c, &["192.0.2.7".into()]).unwrap();
        assert_eq!(count_records(&c).unwrap(), 0);
        let ev = |at| NewEvent {
            at,
            // Mapped: stored as the IPv4 address.
            ip: "::ffff:192.0.2.7".parse().unwrap(),
            kind: "brute_force",
            severity: 1,
            check: "ssh_bruteforce",
            account: None,
            message: "m",
        };
        insert_events(&c, [ev(1), ev(2), ev(3)]).unwrap();
        let (list, more) = events_of(&c, "192.0.2.7", 2).unwrap();
        assert_eq!(list.iter().map(|e| e.at).collect::<Vec<_>>(), vec![3, 2]);
        assert!(more);
        assert_eq!(prune_events(&c, 2, 100).unwrap(), 1);
        assert_eq!(prune_events(&c, 0, 1).unwrap(), 1);
        assert_eq!(count_events(&c).unwrap(), 1);
        let row = CacheRow {
            fetched: 1,
            expires: 10,
            score: Some(5),
            reason: "r".into(),
            data: "{}".into(),
        };
        cache_put(&c, "rdap", "192.0.2.7", &row).unwrap();
        assert_eq!(cache_get(&c, "rdap", "192.0.2.7").unwrap(), Some(row));
        assert_eq!(cache_purge(&c, 10).unwrap(), 1);
        assert!(reserve_quota(&c, "q", 100, 2).unwrap());
        assert!(reserve_quota(&c, "q", 100, 2).unwrap());
        assert!(!reserve_quota(&c, "q", 100, 2).unwrap());
        assert!(reserve_quota(&c, "q", 101, 2).unwrap());
        assert_eq!(quota_used(&c, "q").unwrap(), Some((101, 1)));
    }
}
