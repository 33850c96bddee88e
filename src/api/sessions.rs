//! Browser sessions: opaque cookie ids, CSRF tokens, idle and absolute deadlines.
//!
//! The cookie carries a random secret; memory and the store keep only its SHA-256
//! verifier. A separate random public id names the session in listings and revocation.
//! Revocation commits to the store before the session stops working in memory, so
//! `{ok: true}` always means the revocation is durable. A daemon restart ends all sessions.
//!
//! An event stream opened with a session asks [`Sessions::keep_alive`] every half second:
//! that counts as activity for the idle deadline, and the stream ends as soon as the session
//! is revoked, logged out or reaches its absolute deadline.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use parking_lot::Mutex;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::auth::TokenId;
use crate::clock::SharedClock;
use crate::store::{Store, StoreError};

/// Name of the session cookie.
pub const COOKIE: &str = "svc_auth";

#[derive(Clone, Debug)]
struct Session {
    id: String,
    csrf: String,
    name: String,
    created: Timestamp,
    last_seen: Timestamp,
    last_persisted: Timestamp,
    remote_ip: String,
    user_agent: String,
    /// Digest of the admin token that created the session: a reload that removes (or
    /// demotes) that token ends the session.
    creator: TokenId,
}

/// One row of `GET /api/v1/sessions`.
#[derive(Debug, Clone, Serialize)]
pub struct SessionView {
    pub id: String,
    pub name: String,
    #[serde(serialize_with = "crate::timefmt::ser")]
    pub created: Timestamp,
    #[serde(serialize_with = "crate::timefmt::ser")]
    pub last_seen: Timestamp,
    #[serde(serialize_with = "crate::timefmt::ser")]
    pub expires: Timestamp,
    pub remote_ip: String,
    pub user_agent: String,
    pub current: bool,
}

/// A session that authenticated a request.
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub id: String,
    pub name: String,
    pub csrf: String,
}

/// Live sessions by verifier, with an index by public id.
#[derive(Default)]
struct Table {
    by_verifier: HashMap<String, Session>,
    /// Public id -> verifier.
    by_id: HashMap<String, String>,
}

impl Table {
    fn insert(&mut self, verifier: String, s: Session) {
        self.by_id.insert(s.id.clone(), verifier.clone());
        self.by_verifier.insert(verifier, s);
    }

    fn remove_verifier(&mut self, verifier: &str) -> Option<Session> {
        let s = self.by_verifier.remove(verifier)?;
        self.by_id.remove(&s.id);
        Some(s)
    }

    fn remove_id(&mut self, id: &str) -> Option<Session> {
        let v = self.by_id.remove(id)?;
        self.by_verifier.remove(&v)
    }

    fn clear(&mut self) {
        self.by_verifier.clear();
        self.by_id.clear();
    }

    fn len(&self) -> usize {
        self.by_verifier.len()
    }
}

struct Inner {
    table: Mutex<Table>,
    store: Store,
    clock: SharedClock,
    idle: Duration,
    max: Duration,
}

/// The browser sessions. Cheap to clone; clones share the sessions.
#[derive(Clone)]
pub struct Sessions {
    inner: Arc<Inner>,
}

/// Random hex of `bytes` bytes from the OS.
use crate::ids::random_hex;

fn verifier(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

fn micros(t: Timestamp) -> i64 {
    t.as_microsecond()
}

const MAX_USER_AGENT: usize = 256;
/// Sessions kept at most; creating more ends the least recently used.
const MAX_SESSIONS: usize = 1024;

impl Sessions {
    pub fn new(store: Store, clock: SharedClock, idle: Duration, max: Duration) -> Sessions {
        Sessions {
            inner: Arc::new(Inner {
                table: Mutex::new(Table::default()),
                store,
                clock,
                idle,
                max,
            }),
        }
    }

    /// Ends every stored session (called at startup: a restart ends all sessions).
    pub fn end_all_stored(store: &Store) -> Result<usize, StoreError> {
        store.write(crate::store::sessions::delete_all)
    }

    fn expires(&self, s: &Session) -> Timestamp {
        let idle_end = crate::clock::add(s.last_seen, self.inner.idle);
        let abs_end = crate::clock::add(s.created, self.inner.max);
        idle_end.min(abs_end)
    }

    /// Creates a session for `name`, created by the admin token `creator`; returns the
    /// cookie secret. The row is committed first.
    pub fn create(
        &self,
        name: &str,
        creator: TokenId,
        remote_ip: &str,
        user_agent: &str,
    ) -> Result<(String, Authenticated), StoreError> {
        let secret = random_hex(32);
        let now = self.inner.clock.now();
        let ua: String = user_agent
            .chars()
            .filter(|c| !c.is_control())
            .take(MAX_USER_AGENT)
            .collect();
        let s = Session {
            id: random_hex(16),
            csrf: random_hex(32),
            name: name.to_string(),
            created: now,
            last_seen: now,
            last_persisted: now,
            remote_ip: remote_ip.to_string(),
            user_agent: ua,
            creator,
        };
        let v = verifier(&secret);
        let row = s.clone();
        let expires = micros(self.expires(&s));
        let vv = v.clone();
        self.inner.store.write(move |c| {
            crate::store::sessions::insert(
                c,
                &crate::store::sessions::Row {
                    id: &row.id,
                    verifier: &vv,
                    name: &row.name,
                    created: micros(row.created),
                    last_seen: micros(row.last_seen),
                    expires,
                    remote_ip: &row.remote_ip,
                    user_agent: &row.user_agent,
                },
            )
        })?;
        let auth = Authenticated {
            id: s.id.clone(),
            name: s.name.clone(),
            csrf: s.csrf.clone(),
        };
        let mut t = self.inner.table.lock();
        if t.len() >= MAX_SESSIONS {
            if let Some(oldest) = t
                .by_verifier
                .iter()
                .min_by_key(|(_, s)| s.last_seen)
                .map(|(k, _)| k.clone())
            {
                if let Some(old) = t.remove_verifier(&oldest) {
                    self.forget_in_store(old.id);
                }
            }
        }
        t.insert(v, s);
        Ok((secret, auth))
    }

    fn forget_in_store(&self, id: String) {
        let _ = self
            .inner
            .store
            .write_detached(move |c| crate::store::sessions::delete(c, &id));
    }

    /// Looks up a cookie secret; refreshes last_seen. Expired sessions end here.
    pub fn authenticate(&self, secret: &str) -> Option<Authenticated> {
        if secret.len() != 64 {
            return None;
        }
        let v = verifier(secret);
        let mut t = self.inner.table.lock();
        let s = self.touch(&mut t, &v)?;
        Some(Authenticated {
            id: s.id.clone(),
            name: s.name.clone(),
            csrf: s.csrf.clone(),
        })
    }

    /// Activity on the session with public id `id` (an open event stream): refreshes its
    /// idle deadline like a request does. False when the session no longer exists (revoked,
    /// logged out, ended by a deadline): the stream must end.
    pub fn keep_alive(&self, id: &str) -> bool {
        let mut t = self.inner.table.lock();
        let Some(v) = t.by_id.get(id).cloned() else {
            return false;
        };
        self.touch(&mut t, &v).is_some()
    }

    /// Marks the session with verifier `v` seen now, or ends it when a deadline passed.
    fn touch<'t>(&self, t: &'t mut Table, v: &str) -> Option<&'t Session> {
        let now = self.inner.clock.now();
        let s = t.by_verifier.get(v)?;
        let idle_end = crate::clock::add(s.last_seen, self.inner.idle);
        let abs_end = crate::clock::add(s.created, self.inner.max);
        if now >= idle_end || now >= abs_end {
            if let Some(old) = t.remove_verifier(v) {
                self.forget_in_store(old.id);
            }
            return None;
        }
        let s = t.by_verifier.get_mut(v)?;
        s.last_seen = now;
        if now.as_second() - s.last_persisted.as_second() >= 60 {
            s.last_persisted = now;
            let (id, seen) = (s.id.clone(), micros(now));
            let exp = micros(crate::clock::add(now, self.inner.idle).min(abs_end));
            let _ = self
                .inner
                .store
                .write_detached(move |c| crate::store::sessions::touch(c, &id, seen, exp));
        }
        Some(s)
    }

    /// Live sessions, newest first; `current` marks the caller's.
    pub fn list(&self, current_id: Option<&str>) -> Vec<SessionView> {
        let now = self.inner.clock.now();
        let t = self.inner.table.lock();
        let mut out: Vec<SessionView> = t
            .by_verifier
            .values()
            .filter(|s| self.expires(s) > now)
            .map(|s| SessionView {
                id: s.id.clone(),
                name: s.name.clone(),
                created: s.created,
                last_seen: s.last_seen,
                expires: self.expires(s),
                remote_ip: s.remote_ip.clone(),
                user_agent: s.user_agent.clone(),
                current: Some(s.id.as_str()) == current_id,
            })
            .collect();
        out.sort_by(|a, b| b.created.cmp(&a.created).then(a.id.cmp(&b.id)));
        out
    }

    /// Revokes one session by public id. `Ok(false)` when unknown. Memory changes only
    /// after the store committed.
    pub fn revoke(&self, id: &str) -> Result<bool, StoreError> {
        let valid = id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid {
            return Ok(false);
        }
        let known = self.inner.table.lock().by_id.contains_key(id);
        if !known {
            return Ok(false);
        }
        let idc = id.to_string();
        self.inner
            .store
            .write(move |c| crate::store::sessions::delete(c, &idc))?;
        self.inner.table.lock().remove_id(id);
        Ok(true)
    }

    /// Revokes every session, the caller's too.
    pub fn revoke_all(&self) -> Result<usize, StoreError> {
        self.inner.store.write(crate::store::sessions::delete_all)?;
        let mut t = self.inner.table.lock();
        let n = t.len();
        t.clear();
        Ok(n)
    }

    /// Ends every session whose creating token `still_valid` rejects (configuration reload:
    /// the token was removed or is no longer admin). Each goes through [`Sessions::revoke`],
    /// so it ends exactly as a revocation does. Returns how many ended.
    pub fn end_created_by(
        &self,
        still_valid: impl Fn(&TokenId) -> bool,
    ) -> Result<usize, StoreError> {
        let ids: Vec<String> = self
            .inner
            .table
            .lock()
            .by_verifier
            .values()
            .filter(|s| !still_valid(&s.creator))
            .map(|s| s.id.clone())
            .collect();
        let mut n = 0;
        for id in ids {
            if self.revoke(&id)? {
                n += 1;
            }
        }
        Ok(n)
    }

    pub fn count(&self) -> usize {
        self.inner.table.lock().len()
    }

    pub fn max_age(&self) -> Duration {
        self.inner.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    fn setup(
        tag: &str,
    ) -> (
        Sessions,
        std::sync::Arc<ManualClock>,
        Store,
        std::path::PathBuf,
    ) {
        let dir = std::env::temp_dir().join(format!("svc-sess-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let clock = ManualClock::at_epoch_2026();
        let s = Sessions::new(
            store.clone(),
            clock.clone(),
            Duration::from_secs(30 * 60),
            Duration::from_secs(12 * 3600),
        );
        (s, clock, store, dir)
    }

    fn rows(store: &Store) -> i64 {
        store
            .read(|c| c.query_row("SELECT count(*) FROM sessions", [], |r| r.get(0)))
            .unwrap()
    }

    #[test]
    fn idle_deadline_ends_session() {
        let (s, clock, store, dir) = setup("idle");
        let (secret, _) = s.create("admin", [1; 32], "127.0.0.1", "ua").unwrap();
        assert_eq!(rows(&store), 1);
        clock.advance_secs(29 * 60);
        assert!(
            s.authenticate(&secret).is_some(),
            "activity within idle window"
        );
        clock.advance_secs(29 * 60);
        assert!(
            s.authenticate(&secret).is_some(),
            "idle window slides with activity"
        );
        clock.advance_secs(31 * 60);
        assert!(s.authenticate(&secret).is_none(), "idle deadline passed");
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn absolute_deadline_ends_active_session() {
        let (s, clock, store, dir) = setup("abs");
        let (secret, _) = s.create("admin", [1; 32], "127.0.0.1", "ua").unwrap();
        for _ in 0..(12 * 3) {
            clock.advance_secs(20 * 60);
            if s.authenticate(&secret).is_none() {
                // Ends exactly when 12 hours have passed.
                assert!(clock.now().as_second() - 1_767_225_600 >= 12 * 3600);
                store.close();
                std::fs::remove_dir_all(dir).unwrap();
                return;
            }
        }
        panic!("absolute deadline never ended the session");
    }

    #[test]
    fn keep_alive_is_activity_and_ends_with_the_session() {
        let (s, clock, store, dir) = setup("keepalive");
        let (secret, a) = s.create("admin", [1; 32], "127.0.0.1", "ua").unwrap();
        // A stream keeps the session past its idle deadline...
        for _ in 0..4 {
            clock.advance_secs(20 * 60);
            assert!(s.keep_alive(&a.id));
        }
        assert!(s.authenticate(&secret).is_some());
        // ...but not past its absolute deadline.
        let mut ended = false;
        for _ in 0..(12 * 4) {
            clock.advance_secs(20 * 60);
            if !s.keep_alive(&a.id) {
                ended = true;
                break;
            }
        }
        assert!(ended, "absolute deadline ends a kept-alive session");
        assert!(s.authenticate(&secret).is_none());
        // Revocation ends it at once.
        let (_, b) = s.create("admin", [1; 32], "127.0.0.1", "ua").unwrap();
        assert!(s.keep_alive(&b.id));
        assert!(s.revoke(&b.id).unwrap());
        assert!(!s.keep_alive(&b.id));
        let (_, c) = s.create("admin", [1; 32], "127.0.0.1", "ua").unwrap();
        s.revoke_all().unwrap();
        assert!(!s.keep_alive(&c.id));
        assert!(!s.keep_alive("unknown"));
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn sessions_end_with_the_token_that_created_them() {
        let (s, _clock, store, dir) = setup("creator");
        let (a1, _) = s.create("a", [1; 32], "127.0.0.1", "ua").unwrap();
        let (a2, _) = s.create("a", [1; 32], "127.0.0.1", "ua").unwrap();
        let (b, _) = s.create("b", [2; 32], "127.0.0.1", "ua").unwrap();
        assert_eq!(s.end_created_by(|id| *id != [1; 32]).unwrap(), 2);
        assert!(s.authenticate(&a1).is_none());
        assert!(s.authenticate(&a2).is_none());
        assert!(s.authenticate(&b).is_some());
        assert_eq!(rows(&store), 1);
        assert_eq!(s.end_created_by(|_| true).unwrap(), 0);
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn revoke_is_durable_and_unknown_ids_are_false() {
        let (s, _clock, store, dir) = setup("revoke");
        let (secret, a) = s.create("admin", [1; 32], "127.0.0.1", "ua").unwrap();
        let (secret2, _) = s.create("admin", [1; 32], "127.0.0.1", "ua").unwrap();
        assert_eq!(s.list(Some(&a.id)).iter().filter(|v| v.current).count(), 1);
        assert!(!s.revoke("nope").unwrap());
        assert!(!s.revoke(&"0".repeat(32)).unwrap());
        assert!(s.revoke(&a.id).unwrap());
        assert!(s.authenticate(&secret).is_none());
        assert_eq!(rows(&store), 1);
        assert_eq!(s.revoke_all().unwrap(), 1);
        assert!(s.authenticate(&secret2).is_none());
        assert_eq!(rows(&store), 0);
        store.close();
        assert!(s.revoke_all().is_err(), "store failure is an error, not ok");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
