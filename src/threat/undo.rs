//! Undo entries of operator changes (`webui.undo.v1`).
//!
//! Guarantees:
//! - Each threat change that changed something registers one entry under a fresh token
//!   (128 random bits); only its SHA-256 is kept, in memory and in the store
//!   (`threat_undo`), so entries survive a restart and a token never sits in the database.
//! - An entry belongs to the caller that made the change (the token or session name) and
//!   lives `threat.undo_minutes` (default 60).
//! - Every decision on an address (a block, permanent block, clear, whitelist or
//!   unwhitelist, automatic blocks and undos included) invalidates the older entries that
//!   touch it, also across a restart (the mark is stored with the entry). Running an
//!   invalidated entry is refused (409); it stays listed as invalidated until it expires.
//! - At most [`MAX_ENTRIES`] entries and [`MAX_ITEMS`] addresses are kept; the oldest
//!   entries give way.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::clock::SharedClock;
use crate::store::threat::{delete_undo, insert_undo, load_undo, UndoRow};
use crate::store::Store;

pub const MAX_ENTRIES: usize = 1_000;
pub const MAX_ITEMS: usize = 100_000;

/// A block as it was (`firewall::PriorBlock` in a storable form).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub reason: String,
    pub source: String,
    pub created_by: String,
    pub created: i64,
    pub expires: Option<i64>,
}

impl From<crate::firewall::PriorBlock> for Block {
    fn from(p: crate::firewall::PriorBlock) -> Block {
        Block {
            reason: p.reason,
            source: p.source,
            created_by: p.created_by,
            created: p.created,
            expires: p.expires,
        }
    }
}

impl From<&Block> for crate::firewall::PriorBlock {
    fn from(b: &Block) -> crate::firewall::PriorBlock {
        crate::firewall::PriorBlock {
            reason: b.reason.clone(),
            source: b.source.clone(),
            created_by: b.created_by.clone(),
            created: b.created,
            expires: b.expires,
        }
    }
}

/// An allow entry as it was.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allow {
    pub reason: String,
    pub expires: Option<i64>,
}

/// Score and evidence as they were.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub score: f32,
    pub score_at: i64,
    /// 0 none, 1 expiring, 2 permanent.
    pub evidence: u8,
    pub evidence_until: i64,
}

/// One address's state before the change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Item {
    pub ip: IpAddr,
    pub block: Option<Block>,
    pub allow: Option<Allow>,
    /// `None`: the address had no record.
    pub record: Option<Record>,
}

/// One undoable change.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Entry {
    #[serde(skip)]
    pub token_hash: String,
    /// The token itself: listed to its caller only (`GET /api/v1/undo/pending`), who may
    /// run it with the same credential; a token alone is worth nothing to anyone else.
    pub token: String,
    pub caller: String,
    pub action: String,
    pub seq: u64,
    pub created: i64,
    pub expires: i64,
    pub items: Vec<Item>,
    /// A later decision touched one of its addresses (this one).
    #[serde(default)]
    pub invalidated_by: Option<IpAddr>,
}

/// Why an entry cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UndoError {
    /// No such token for this caller (or it expired, or it already ran).
    NotFound,
    /// A later decision touched this address.
    Invalidated(IpAddr),
    Store(String),
}

impl std::fmt::Display for UndoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UndoError::NotFound => f.write_str(
                "no such undo token for this caller (expired, already used, or never issued)",
            ),
            UndoError::Invalidated(ip) => write!(
                f,
                "invalidated: a later block, clear or whitelist decision changed {ip}"
            ),
            UndoError::Store(e) => write!(f, "store unavailable: {e}"),
        }
    }
}

#[derive(Default)]
struct Inner {
    entries: BTreeMap<u64, Entry>,
    by_hash: HashMap<String, u64>,
    /// Live entries per address.
    members: HashMap<IpAddr, Vec<u64>>,
    seq: u64,
    items: usize,
}

pub struct Undo {
    clock: SharedClock,
    store: Store,
    inner: Mutex<Inner>,
}

/// SHA-256 of a token, hex.
pub fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl Inner {
    fn insert(&mut self, e: Entry) {
        for it in &e.items {
            self.members.entry(it.ip).or_default().push(e.seq);
        }
        self.items += e.items.len();
        self.by_hash.insert(e.token_hash.clone(), e.seq);
        self.entries.insert(e.seq, e);
    }

    fn remove(&mut self, seq: u64) -> Option<Entry> {
        let e = self.entries.remove(&seq)?;
        self.by_hash.remove(&e.token_hash);
        self.items -= e.items.len();
        for it in &e.items {
            if let Some(v) = self.members.get_mut(&it.ip) {
                v.retain(|s| *s != seq);
                if v.is_empty() {
                    self.members.remove(&it.ip);
                }
            }
        }
        Some(e)
    }

    fn valid(&self, e: &Entry) -> Result<(), IpAddr> {
        match e.invalidated_by {
            Some(ip) => Err(ip),
            None => Ok(()),
        }
    }
}

fn row_of(e: &Entry) -> UndoRow {
    UndoRow {
        token_hash: e.token_hash.clone(),
        caller: e.caller.clone(),
        action: e.action.clone(),
        seq: e.seq as i64,
        created: e.created,
        expires: e.expires,
        body: serde_json::to_string(e).unwrap_or_default(),
    }
}

impl Undo {
    /// Loads the entries that have not expired.
    pub fn load(store: Store, clock: SharedClock) -> Undo {
        let now = clock.now().as_microsecond();
        let rows = store.write(move |c| load_undo(c, now)).unwrap_or_else(|e| {
            log::warn!("threat: cannot load undo entries: {e}");
            Vec::new()
        });
        let mut inner = Inner::default();
        for r in rows {
            let Ok(mut e) = serde_json::from_str::<Entry>(&r.body) else {
                continue;
            };
            e.token_hash = r.token_hash.clone();
            inner.seq = inner.seq.max(e.seq);
            inner.insert(e);
        }
        Undo {
            clock,
            store,
            inner: Mutex::new(inner),
        }
    }

    /// Notes a decision on `ips`: every live entry touching one of them is invalidated
    /// (kept in the store too). Returns the decision's sequence number.
    pub fn decision(&self, ips: &[IpAddr]) -> u64 {
        let mut changed = Vec::new();
        let s = {
            let mut g = self.inner.lock();
            g.seq += 1;
            let s = g.seq;
            for ip in ips {
                let ip = ip.to_canonical();
                let Some(seqs) = g.members.get(&ip).cloned() else {
                    continue;
                };
                for seq in seqs {
                    if let Some(e) = g.entries.get_mut(&seq) {
                        if e.invalidated_by.is_none() {
                            e.invalidated_by = Some(ip);
                            changed.push(row_of(e));
                        }
                    }
                }
            }
            s
        };
        if !changed.is_empty() {
            let _ = self.store.write_detached(move |c| {
                for r in &changed {
                    insert_undo(c, r)?;
                }
                Ok(())
            });
        }
        s
    }

    /// Registers an entry for a decision made with sequence `seq`; returns its token.
    pub fn register(
        &self,
        caller: &str,
        action: &str,
        seq: u64,
        items: Vec<Item>,
        lifetime_us: i64,
    ) -> Result<String, UndoError> {
        let token = crate::ids::random_hex(16);
        let now = self.clock.now().as_microsecond();
        let e = Entry {
            token_hash: hash(&token),
            token: token.clone(),
            caller: caller.to_string(),
            action: action.to_string(),
            seq,
            created: now,
            expires: now.saturating_add(lifetime_us),
            items: items
                .into_iter()
                .map(|mut it| {
                    it.ip = it.ip.to_canonical();
                    it
                })
                .collect(),
            invalidated_by: None,
        };
        let row = row_of(&e);
        let mut gone = Vec::new();
        {
            let mut g = self.inner.lock();
            self.expire_locked(&mut g, now, &mut gone);
            while !g.entries.is_empty()
                && (g.entries.len() >= MAX_ENTRIES || g.items + e.items.len() > MAX_ITEMS)
            {
                let oldest = *g.entries.keys().next().unwrap_or(&0);
                if let Some(x) = g.remove(oldest) {
                    gone.push(x.token_hash);
                }
            }
            g.insert(e);
        }
        self.store
            .write(move |c| {
                delete_undo(c, &gone)?;
                insert_undo(c, &row)
            })
            .map_err(|e| UndoError::Store(e.to_string()))?;
        Ok(token)
    }

    fn expire_locked(&self, g: &mut Inner, now: i64, gone: &mut Vec<String>) {
        let expired: Vec<u64> = g
            .entries
            .values()
            .filter(|e| e.expires <= now)
            .map(|e| e.seq)
            .collect();
        for s in expired {
            if let Some(e) = g.remove(s) {
                gone.push(e.token_hash);
            }
        }
    }

    /// The caller's entries, newest first, each with whether it can still run.
    pub fn pending(&self, caller: &str) -> Vec<(Entry, bool)> {
        let now = self.clock.now().as_microsecond();
        let mut gone = Vec::new();
        let out = {
            let mut g = self.inner.lock();
            self.expire_locked(&mut g, now, &mut gone);
            g.entries
                .values()
                .rev()
                .filter(|e| e.caller == caller)
                .map(|e| (e.clone(), g.valid(e).is_ok()))
                .collect()
        };
        if !gone.is_empty() {
            let _ = self.store.write_detached(move |c| delete_undo(c, &gone));
        }
        out
    }

    /// Takes the caller's entry of `token` to run it (it is removed); an invalidated one
    /// stays.
    pub fn take(&self, token: &str, caller: &str) -> Result<Entry, UndoError> {
        let h = hash(token);
        let now = self.clock.now().as_microsecond();
        let e = {
            let mut g = self.inner.lock();
            let Some(&seq) = g.by_hash.get(&h) else {
                return Err(UndoError::NotFound);
            };
            let e = g.entries.get(&seq).ok_or(UndoError::NotFound)?;
            if e.caller != caller || e.expires <= now {
                return Err(UndoError::NotFound);
            }
            g.valid(e).map_err(UndoError::Invalidated)?;
            g.remove(seq).ok_or(UndoError::NotFound)?
        };
        let gone = vec![h];
        if let Err(err) = self.store.write(move |c| delete_undo(c, &gone)) {
            log::warn!("threat: cannot delete a used undo entry: {err}");
        }
        Ok(e)
    }

    /// Puts back an entry taken with [`Undo::take`] whose run failed entirely.
    pub fn put_back(&self, e: Entry) {
        let row = row_of(&e);
        self.inner.lock().insert(e);
        let _ = self.store.write_detached(move |c| insert_undo(c, &row));
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn item(ip: &str) -> Item {
        Item {
            ip: ip.parse().unwrap(),
            block: None,
            allow: None,
            record: None,
        }
    }

    #[test]
    fn later_decisions_invalidate_and_entries_survive_a_restart() {
        let dir = std::env::temp_dir().join(format!("svc-undo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let clock = ManualClock::at_epoch_2026();
        let u = Undo::load(store.clone(), clock.clone());
        let ip1: IpAddr = "192.0.2.1".parse().unwrap();
        let s1 = u.decision(&[ip1]);
        let t1 = u
            .register("ops", "block", s1, vec![item("192.0.2.1")], 3_600_000_000)
            .unwrap();
        let s2 = u.decision(&["192.0.2.2".parse().unwrap()]);
        let t2 = u
            .register("ops", "clear", s2, vec![item("192.0.2.2")], 3_600_000_000)
            .unwrap();
        let p = u.pending("ops");
        assert_eq!(
            p.iter().map(|(e, _)| e.action.as_str()).collect::<Vec<_>>(),
            ["clear", "block"]
        );
        assert!(u.pending("other").is_empty());
        assert_eq!(u.take(&t1, "other").unwrap_err(), UndoError::NotFound);
        // A later decision on 192.0.2.1 invalidates the first entry.
        u.decision(&[ip1]);
        assert_eq!(u.take(&t1, "ops").unwrap_err(), UndoError::Invalidated(ip1));
        assert!(!u.pending("ops")[1].1);
        // Restart: entries and their validity come back.
        let u2 = Undo::load(store.clone(), clock.clone());
        assert_eq!(u2.len(), 2);
        assert_eq!(
            u2.take(&t1, "ops").unwrap_err(),
            UndoError::Invalidated(ip1)
        );
        assert_eq!(u2.take(&t2, "ops").unwrap().action, "clear");
        assert_eq!(u2.take(&t2, "ops").unwrap_err(), UndoError::NotFound);
        clock.advance_secs(3601);
        assert!(u2.pending("ops").is_empty());
        store.close();
        let _ = std::fs::remove_dir_all(dir);
    }
}
