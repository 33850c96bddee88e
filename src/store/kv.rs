//! The `kv` table: small named values (cursors, marks, JSON documents of one subsystem).
//! Every read and write of `kv` goes through here.

use rusqlite::{params, Connection, OptionalExtension};

/// The value of `key`, if set.
pub fn get(c: &Connection, key: &str) -> rusqlite::Result<Option<String>> {
    c.query_row("SELECT value FROM kv WHERE key = ?1", [key], |r| r.get(0))
        .optional()
}

/// Sets `key` to `value`.
pub fn set(c: &Connection, key: &str, value: &str) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO kv(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        params![key, value],
    )?;
    Ok(())
}

/// Removes `key`.
pub fn delete(c: &Connection, key: &str) -> rusqlite::Result<()> {
    c.execute("DELETE FROM kv WHERE key = ?1", [key])?;
    Ok(())
}

/// Sets `key` to `value`, or removes it when `value` is `None`.
pub fn put(c: &Connection, key: &str, value: Option<&str>) -> rusqlite::Result<()> {
    match value {
        Some(v) => set(c, key, v),
        None => delete(c, key),
    }
}
