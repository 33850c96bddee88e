//! Browser sessions (`sessions`): the verifier of each cookie, never the cookie itself.
//! Times are Unix microseconds.

use rusqlite::{params, Connection};

/// One session row.
pub struct Row<'a> {
    pub id: &'a str,
    pub verifier: &'a str,
    pub name: &'a str,
    pub created: i64,
    pub last_seen: i64,
    pub expires: i64,
    pub remote_ip: &'a str,
    pub user_agent: &'a str,
}

pub fn insert(c: &Connection, r: &Row<'_>) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO sessions(id, verifier, name, created, last_seen, expires, remote_ip, user_agent) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)",
        params![r.id, r.verifier, r.name, r.created, r.last_seen, r.expires, r.remote_ip, r.user_agent],
    )
    .map(drop)
}

/// A session seen again: its last use and its new end.
pub fn touch(c: &Connection, id: &str, last_seen: i64, expires: i64) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE sessions SET last_seen = ?2, expires = ?3 WHERE id = ?1",
        params![id, last_seen, expires],
    )
    .map(drop)
}

pub fn delete(c: &Connection, id: &str) -> rusqlite::Result<()> {
    c.execute("DELETE FROM sessions WHERE id = ?1", [id])
        .map(drop)
}

/// Removes every session; returns how many.
pub fn delete_all(c: &Connection) -> rusqlite::Result<usize> {
    c.execute("DELETE FROM sessions", [])
}
