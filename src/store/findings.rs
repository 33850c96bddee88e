//! Tables of the findings pipeline: history, the active set, source checkpoints.

use std::net::IpAddr;

use jiff::Timestamp;
use rusqlite::{params, Connection, Row};

use crate::model::finding::{Finding, Severity};

fn ts(micros: i64) -> Timestamp {
    Timestamp::from_microsecond(micros).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Rows per multi-row INSERT statement (fewer statements, one autoincrement update each).
const ROWS_PER_STATEMENT: usize = 32;

/// `INSERT OR FAIL INTO {head} VALUES (?, ...), ... {tail}` for `rows` rows of `cols`
/// columns.
///
/// `OR FAIL` rather than the default `ABORT`: a statement that may abort halfway through
/// several rows makes SQLite copy every page it touches into a statement journal first, to
/// undo its own earlier rows. Here a failed statement fails its whole store job, which the
/// writer undoes anyway (transaction or savepoint), so the copies are waste: 90 MB of
/// journal writes in a 1,000,000-line drain. Callers therefore run inside a transaction
/// (every store job does); in autocommit mode the rows before a failing one would stay.
fn multi_row_sql(head: &str, cols: usize, rows: usize, tail: &str) -> String {
    let row = format!("({})", vec!["?"; cols].join(","));
    format!(
        "INSERT OR FAIL INTO {head} VALUES {} {tail}",
        vec![row; rows].join(",")
    )
}

/// Runs the insert of `items`, binding each item's `cols` values with `bind`: plain inserts
/// in statements of [`ROWS_PER_STATEMENT`] rows (the rest one by one, so only two statements
/// are cached), upserts (a non-empty `tail`) one row per statement. SQLite journals a
/// multi-row upsert's pages whatever its conflict clause; a single row needs no journal.
fn insert_rows<T>(
    c: &Connection,
    head: &str,
    cols: usize,
    tail: &str,
    items: &[T],
    bind: impl Fn(&mut rusqlite::Statement<'_>, usize, &T) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    let multi_row = tail.is_empty();
    let mut chunks = items.chunks_exact(ROWS_PER_STATEMENT);
    if multi_row && chunks.len() > 0 {
        let mut st = c.prepare_cached(&multi_row_sql(head, cols, ROWS_PER_STATEMENT, tail))?;
        for chunk in chunks.by_ref() {
            for (i, item) in chunk.iter().enumerate() {
                bind(&mut st, i * cols + 1, item)?;
            }
            st.raw_execute()?;
        }
    }
    let rest = if multi_row { chunks.remainder() } else { items };
    if !rest.is_empty() {
        let mut st = c.prepare_cached(&multi_row_sql(head, cols, 1, tail))?;
        for item in rest {
            bind(&mut st, 1, item)?;
            st.raw_execute()?;
        }
    }
    Ok(())
}

/// Appends one history row per finding (one dispatch each), then counts the new rows into
/// the day counts ([`super::history::derive_pending`]) in the same transaction.
pub fn insert_history(c: &Connection, findings: &[&Finding]) -> rusqlite::Result<()> {
    insert_rows(
        c,
        "history(at, check_name, severity, message, details, account, ip, path)",
        8,
        "",
        findings,
        |st, i, f| {
            st.raw_bind_parameter(i, f.last_seen.as_microsecond())?;
            st.raw_bind_parameter(i + 1, &f.check)?;
            st.raw_bind_parameter(i + 2, f.severity.level())?;
            st.raw_bind_parameter(i + 3, &f.message)?;
            st.raw_bind_parameter(i + 4, &f.details)?;
            st.raw_bind_parameter(i + 5, &f.account)?;
            st.raw_bind_parameter(i + 6, f.ip.map(|a| a.to_string()))?;
            st.raw_bind_parameter(i + 7, &f.path)
        },
    )?;
    super::history::derive_pending(c)?;
    Ok(())
}

/// Writes the merged state of active findings (one row per key: callers pass each key once).
pub fn upsert_active(c: &Connection, findings: &[&Finding]) -> rusqlite::Result<()> {
    insert_rows(
        c,
        "active_findings(check_name, message, severity, details, account, ip, path, first_seen, last_seen, count)",
        10,
        "ON CONFLICT(check_name, message) DO UPDATE SET severity=excluded.severity, details=excluded.details,
           account=excluded.account, ip=excluded.ip, path=excluded.path, first_seen=excluded.first_seen,
           last_seen=excluded.last_seen, count=excluded.count",
        findings,
        |st, i, f| {
            st.raw_bind_parameter(i, &f.check)?;
            st.raw_bind_parameter(i + 1, &f.message)?;
            st.raw_bind_parameter(i + 2, f.severity.level())?;
            st.raw_bind_parameter(i + 3, &f.details)?;
            st.raw_bind_parameter(i + 4, &f.account)?;
            st.raw_bind_parameter(i + 5, f.ip.map(|a| a.to_string()))?;
            st.raw_bind_parameter(i + 6, &f.path)?;
            st.raw_bind_parameter(i + 7, f.first_seen.as_microsecond())?;
            st.raw_bind_parameter(i + 8, f.last_seen.as_microsecond())?;
            st.raw_bind_parameter(i + 9, f.count as i64)
        },
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let mut c = Connection::open_in_memory().unwrap();
        crate::store::schema::migrate(&mut c).unwrap();
        c
    }

    fn f(i: usize, count: u64) -> Finding {
        let mut f = Finding::new(
            "ssh_bruteforce",
            Severity::High,
            format!("m{i}"),
            Timestamp::from_second(1_767_225_600 + i as i64).unwrap(),
        )
        .with_ip(format!("192.0.2.{}", i % 250).parse().unwrap());
        f.count = count;
        f
    }

    #[test]
    fn multi_row_statements_write_every_row_and_upsert() {
        let c = db();
        // 70 rows: two full statements and six single rows.
        let rows: Vec<Finding> = (0..70).map(|i| f(i, 1)).collect();
        let refs: Vec<&Finding> = rows.iter().collect();
        insert_history(&c, &refs).unwrap();
        assert_eq!(history_count(&c).unwrap(), 70);
        let at: Vec<i64> = c
            .prepare("SELECT at FROM history ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let want: Vec<i64> = rows.iter().map(|f| f.last_seen.as_microsecond()).collect();
        assert_eq!(at, want, "in order");
        upsert_active(&c, &refs).unwrap();
        let again: Vec<Finding> = (0..40).map(|i| f(i, 7)).collect();
        let refs: Vec<&Finding> = again.iter().collect();
        upsert_active(&c, &refs).unwrap();
        let mut active = load_active(&c).unwrap();
        active.sort_by_key(|f| f.first_seen);
        assert_eq!(active.len(), 70);
        assert_eq!(active[39].count, 7);
        assert_eq!(active[40].count, 1);
        assert_eq!(active[5], again[5]);
        delete_active_keys(&c, [("ssh_bruteforce", "m0"), ("ssh_bruteforce", "m69")]).unwrap();
        assert_eq!(load_active(&c).unwrap().len(), 68);
    }
}
