//! The audit trail (`audit`): one row per administrative action, newest `keep` kept.

/// One audit record, as the API layer formats it (times in Unix microseconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub at_us: i64,
    pub actor: String,
    pub via: String,
    pub action: String,
    pub target: String,
    pub outcome: String,
    pub remote_ip: String,
}

/// Inserts `records` and trims the table to the newest `keep` rows (one transaction: the
/// store writer's).
pub fn insert_and_trim(
    c: &rusqlite::Connection,
    records: &[Row],
    keep: u64,
) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(
        "INSERT INTO audit(at, actor, via, action, target, outcome, remote_ip) VALUES (?1,?2,?3,?4,?5,?6,?7)",
    )?;
    for r in records {
        st.execute(rusqlite::params![
            r.at_us,
            r.actor,
            r.via,
            r.action,
            r.target,
            r.outcome,
            r.remote_ip
        ])?;
    }
    let newest = c.last_insert_rowid();
    let keep = i64::try_from(keep).unwrap_or(i64::MAX);
    let below = newest.saturating_sub(keep);
    if below > 0 {
        c.execute("DELETE FROM audit WHERE id <= ?1", [below])?;
    }
    Ok(())
}
