//! Schema migrations, tracked in `PRAGMA user_version`.
//!
//! Each entry is applied once, in order, inside a transaction. Never edit a released entry;
//! append a new one.

use rusqlite::Connection;

const MIGRATIONS: &[&str] = &[
    // 1: sessions and audit
    "CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        verifier TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        created INTEGER NOT NULL,
        last_seen INTEGER NOT NULL,
        expires INTEGER NOT NULL,
        remote_ip TEXT NOT NULL,
        user_agent TEXT NOT NULL
    );
    CREATE TABLE audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        actor TEXT NOT NULL,
        via TEXT NOT NULL,
        action TEXT NOT NULL,
        target TEXT NOT NULL,
        outcome TEXT NOT NULL,
        remote_ip TEXT NOT NULL
    );",
];

/// Applies pending migrations.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let version = i as i64 + 1;
        if version <= current {
            continue;
        }
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
    }
    Ok(())
}
