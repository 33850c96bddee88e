//! CMS verification tables: `cms_checksums` (official core checksums per version and
//! locale, as fetched) and `cms_coverage` (one row per installation and verification kind,
//! the evidence behind `cms_verification`). Every statement on them lives here.

use rusqlite::{params, Connection, OptionalExtension};

/// One stored coverage row (see `cms::coverage::Record`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoverageRow {
    pub path: String,
    pub kind: String,
    pub platform: String,
    pub account: Option<String>,
    pub state: String,
    /// Microseconds since the epoch.
    pub last_attempt: Option<i64>,
    pub failures: i64,
    pub cause: Option<String>,
    pub detail: Option<String>,
    pub scan_seq: i64,
}

/// The cached checksum document of `version`/`locale` (JSON text), if any.
pub fn checksums(c: &Connection, version: &str, locale: &str) -> rusqlite::Result<Option<String>> {
    c.query_row(
        "SELECT checksums FROM cms_checksums WHERE version = ?1 AND locale = ?2",
        params![version, locale],
        |r| r.get(0),
    )
    .optional()
}

/// Stores the checksum document of `version`/`locale`.
pub fn put_checksums(
    c: &Connection,
    version: &str,
    locale: &str,
    at: i64,
    json: &str,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO cms_checksums(version, locale, fetched_at, checksums) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(version, locale) DO UPDATE SET fetched_at = excluded.fetched_at, checksums = excluded.checksums",
        params![version, locale, at, json],
    )?;
    Ok(())
}

/// Every coverage row.
pub fn coverage(c: &Connection) -> rusqlite::Result<Vec<CoverageRow>> {
    let mut st = c.prepare(
        "SELECT path, kind, platform, account, state, last_attempt, failures, cause, detail, scan_seq
         FROM cms_coverage ORDER BY path, kind",
    )?;
    let rows = st.query_map([], |r| {
        Ok(CoverageRow {
            path: r.get(0)?,
            kind: r.get(1)?,
            platform: r.get(2)?,
            account: r.get(3)?,
            state: r.get(4)?,
            last_attempt: r.get(5)?,
            failures: r.get(6)?,
            cause: r.get(7)?,
            detail: r.get(8)?,
            scan_seq: r.get(9)?,
        })
    })?;
    rows.collect()
}

/// Writes `rows` (insert or replace by path and kind) and deletes the rows of `gone`
/// (path, kind). Runs as one writer job (the writer wraps it in its transaction).
pub fn save_coverage(
    c: &Connection,
    rows: &[CoverageRow],
    gone: &[(String, String)],
) -> rusqlite::Result<()> {
    {
        let mut put = c.prepare(
            "INSERT INTO cms_coverage(path, kind, platform, account, state, last_attempt, failures, cause, detail, scan_seq)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             ON CONFLICT(path, kind) DO UPDATE SET platform = excluded.platform,
               account = excluded.account, state = excluded.state,
               last_attempt = excluded.last_attempt, failures = excluded.failures,
               cause = excluded.cause, detail = excluded.detail, scan_seq = excluded.scan_seq",
        )?;
        for r in rows {
            put.execute(params![
                r.path,
                r.kind,
                r.platform,
                r.account,
                r.state,
                r.last_attempt,
                r.failures,
                r.cause,
                r.detail,
                r.scan_seq
            ])?;
        }
        let mut del = c.prepare("DELETE FROM cms_coverage WHERE path = ?1 AND kind = ?2")?;
        for (p, k) in gone {
            del.execute(params![p, k])?;
        }
    }
    Ok(())
}
