//! The attack database: one record per address, in memory, bounded, persisted by the
//! store writer.
//!
//! Guarantees:
//! - At most `threat.max_records` addresses. A new address beyond that evicts the least
//!   recently seen one (the record whose last event was recorded longest ago); evictions
//!   are counted (`evicted_total`) and the evicted record is deleted from the store (its
//!   events stay in the history until `threat.event_retention_days`).
//! - Every recorded event and every changed record is queued for the store: row
//!   `attackdb.events` counts events awaiting persistence (no fixed capacity; a safety cap
//!   of [`MAX_PENDING_EVENTS`] drops the oldest, counted as losses), row `attackdb.records`
//!   counts distinct addresses whose saved update or deletion is pending.
//! - Scores follow `score.rs`: stored as reached after the last event, decayed when read.
//! - Reads take the one lock for the time of a hash lookup (a lookup copies the record out);
//!   `top` and `stats` walk all records under it (about 10 ms at 1,000,000 addresses).
//!
//! Memory per record: a 104-byte slot (address, LRU links, counts, up to four interned
//! accounts, score, evidence; the slot vector grows by an eighth) plus its index bucket
//! (8 bytes at 7/8 load, up to twice that right after the index grows) and, while a change
//! waits for the store, a 5-byte bucket in the set of unsaved slots; `heap_bytes` reports
//! slots, index and names. A pending event is 88 bytes and its message; its check name and
//! its account (when interned) are shared, and the queue gives back its room after a burst.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::score;
use crate::findings::evidence::AttackKind;
use crate::findings::Severity;
use crate::queue::{Admitted, QueueHealth};
use crate::store::threat::{NewEvent, RecordRow};
use crate::text::prefix_within;

/// Events held for the store at most (a safety cap; the oldest are dropped and counted).
pub const MAX_PENDING_EVENTS: usize = 500_000;
/// Accounts remembered per address (more are counted in `accounts_more`).
pub const ACCOUNTS_PER_RECORD: usize = 4;
/// Distinct account names interned at most.
pub const MAX_ACCOUNT_NAMES: usize = 65_536;
/// Longest message kept with an event.
const MAX_MESSAGE: usize = 512;
/// Longest check name and account kept with an event.
const MAX_EVENT_NAME: usize = 64;
/// Distinct check names shared among pending events at most (checks are a small fixed
/// vocabulary; a name beyond it gets its own copy).
const MAX_CHECK_NAMES: usize = 256;
/// Pending events the queue keeps room for at least after a batch is taken.
const MIN_PENDING_ROOM: usize = 1_024;

/// An address as the index key (IPv4 as IPv4-mapped IPv6).
pub type Key = [u8; 16];

pub fn key_of(ip: IpAddr) -> Key {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

pub fn ip_of(k: &Key) -> IpAddr {
    IpAddr::V6(Ipv6Addr::from(*k)).to_canonical()
}

/// Threat evidence an address carries (the state table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evidence {
    None,
    /// Expires with a firewall block at the given instant (seconds since the epoch).
    Expiring(i64),
    /// Stays until cleared.
    Permanent,
}

impl Evidence {
    fn code(self) -> (u8, u32) {
        match self {
            Evidence::None => (0, 0),
            Evidence::Expiring(t) => (1, t.clamp(0, i64::from(u32::MAX)) as u32),
            Evidence::Permanent => (2, 0),
        }
    }

    fn decode(code: u8, until: u32) -> Evidence {
        match code {
            1 => Evidence::Expiring(i64::from(until)),
            2 => Evidence::Permanent,
            _ => Evidence::None,
        }
    }

    /// The evidence in force at `now_secs` (expired evidence is none).
    pub fn at(self, now_secs: i64) -> Evidence {
        match self {
            Evidence::Expiring(t) if t <= now_secs => Evidence::None,
            e => e,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Evidence::None => "none",
            Evidence::Expiring(_) => "expiring",
            Evidence::Permanent => "permanent",
        }
    }
}

/// One event to record.
#[derive(Clone, Debug)]
pub struct AttackEvent {
    pub ip: IpAddr,
    pub kind: AttackKind,
    /// Microseconds since the epoch.
    pub at: i64,
    pub severity: Severity,
    /// The check (or collector) that saw it.
    pub check: String,
    /// Accounts targeted (the first is stored with the event).
    pub accounts: Vec<String>,
    pub message: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Record {
    first_seen: i64,
    last_seen: i64,
    counts: [u32; 7],
    accounts: [u32; ACCOUNTS_PER_RECORD],
    score: f32,
    /// Seconds since the epoch.
    score_at: u32,
    evidence_until: u32,
    accounts_more: u16,
    evidence: u8,
    scoring: u8,
}

const NO_ACCOUNT: u32 = u32::MAX;
const NIL: u32 = u32::MAX;

struct Slot {
    key: Key,
    prev: u32,
    next: u32,
    rec: Record,
}

/// The index from address to slot: open addressing with linear probing. A bucket holds
/// 32 bits of the key's hash (which place it) and the slot number; the key itself is only
/// in its slot, so an address costs 8 bytes here (at most 7/8 of the buckets used) instead
/// of a second copy of its key. Keys are hashed with a random key, as `HashMap` does.
struct Index {
    buckets: Vec<u64>,
    len: usize,
    hasher: RandomState,
}

/// An empty bucket (its slot part is `NIL`, never a slot).
const EMPTY: u64 = u64::MAX;

impl Index {
    fn new() -> Index {
        Index {
            buckets: Vec::new(),
            len: 0,
            hasher: RandomState::new(),
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn hash(&self, key: &Key) -> u32 {
        self.hasher.hash_one(key) as u32
    }

    /// The bucket position of `key` in `slots`, when present.
    fn find(&self, key: &Key, slots: &[Slot]) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mask = self.buckets.len() - 1;
        let hash = self.hash(key);
        let mut p = hash as usize & mask;
        loop {
            let b = self.buckets[p];
            if b == EMPTY {
                return None;
            }
            if (b >> 32) as u32 == hash && slots.get(b as u32 as usize)?.key == *key {
                return Some(p);
            }
            p = (p + 1) & mask;
        }
    }

    fn get(&self, key: &Key, slots: &[Slot]) -> Option<u32> {
        self.find(key, slots).map(|p| self.buckets[p] as u32)
    }

    /// Adds `key` (absent) at `slot`.
    fn insert(&mut self, key: &Key, slot: u32) {
        if (self.len + 1) * 8 > self.buckets.len() * 7 {
            let n = (self.buckets.len() * 2).max(16);
            let old = std::mem::replace(&mut self.buckets, vec![EMPTY; n]);
            for b in old.into_iter().filter(|b| *b != EMPTY) {
                self.place(b);
            }
        }
        self.place((u64::from(self.hash(key)) << 32) | u64::from(slot));
        self.len += 1;
    }

    fn place(&mut self, bucket: u64) {
        let mask = self.buckets.len() - 1;
        let mut p = (bucket >> 32) as usize & mask;
        while self.buckets[p] != EMPTY {
            p = (p + 1) & mask;
        }
        self.buckets[p] = bucket;
    }

    /// Removes `key`; the buckets after it move back so no probe stops short.
    fn remove(&mut self, key: &Key, slots: &[Slot]) {
        let Some(mut hole) = self.find(key, slots) else {
            return;
        };
        let mask = self.buckets.len() - 1;
        let mut q = (hole + 1) & mask;
        loop {
            let b = self.buckets[q];
            if b == EMPTY {
                break;
            }
            // `b` may fill the hole when the hole lies between its place and `q`.
            let home = (b >> 32) as usize & mask;
            if q.wrapping_sub(home) & mask >= q.wrapping_sub(hole) & mask {
                self.buckets[hole] = b;
                hole = q;
            }
            q = (q + 1) & mask;
        }
        self.buckets[hole] = EMPTY;
        self.len -= 1;
    }
}

/// The part of a record an undo restores (score and evidence).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecordState {
    pub score: f32,
    pub score_at: i64,
    pub evidence: Evidence,
}

/// A record as readers see it.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordView {
    pub ip: IpAddr,
    pub first_seen: i64,
    pub last_seen: i64,
    pub counts: [u64; 7],
    pub accounts: Vec<String>,
    pub accounts_more: u64,
    /// Decayed to the time of the read.
    pub score: f32,
    pub scoring: u8,
    /// In force at the time of the read.
    pub evidence: Evidence,
}

impl RecordView {
    pub fn events(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// Counts over the whole database.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    pub addresses: u64,
    /// Events per kind over every record.
    pub events: [u64; 7],
    /// Addresses with at least one event of each kind.
    pub addresses_by_kind: [u64; 7],
    /// Addresses whose decayed score is at least 40 and 80.
    pub suspicious: u64,
    pub malicious: u64,
    /// Events of the last 24 hours per hour (oldest first): (hour since the epoch, per kind).
    pub hourly: Vec<(i64, [u64; 7])>,
}

/// Counters (atomics).
#[derive(Default, Debug)]
pub struct Counters {
    pub events_total: AtomicU64,
    pub evicted_total: AtomicU64,
    pub events_dropped: AtomicU64,
    pub accounts_not_interned: AtomicU64,
}

#[derive(Clone)]
struct Pending {
    at: i64,
    key: Key,
    kind: AttackKind,
    severity: Severity,
    /// Shared with every pending event of the same check (`Inner::checks`).
    check: Arc<str>,
    /// The interned name when it is one (cut to [`MAX_EVENT_NAME`] when written), else its
    /// own copy, already cut.
    account: Option<Arc<str>>,
    message: Box<str>,
    stamp: Admitted,
}

struct Inner {
    index: Index,
    slots: Vec<Slot>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    /// Interned account names; one allocation per name, shared by `name_ids` and events.
    names: Vec<Arc<str>>,
    name_ids: HashMap<Arc<str>, u32>,
    checks: HashSet<Arc<str>>,
    events: VecDeque<Pending>,
    /// Slots whose record changed since it was last taken for the store.
    dirty: HashSet<u32>,
    /// Evicted addresses whose deletion is not yet taken for the store (never in `index`).
    deleted: HashSet<Key>,
    /// Per hour since the epoch, events per kind (the last 24 hours of event time).
    hourly: [(i64, [u32; 7]); 24],
    max_records: usize,
    half_life_secs: f64,
}

/// A changed record as taken for the store.
#[derive(Clone)]
struct Changed {
    key: Key,
    rec: Record,
    /// Its account names: the next this many of the batch's `names`.
    accounts: u8,
}

/// A batch for the store: the events and changed records as held in memory. Store rows
/// are built one at a time while [`Batch::write`] runs, so a batch holds no second copy
/// of its text.
#[derive(Clone, Default)]
pub struct Batch {
    records: Vec<Changed>,
    /// The account names of `records`, in their order (shared with the interned names).
    names: Vec<Arc<str>>,
    pub deletes: Vec<String>,
    /// The addresses of `deletes`.
    deleted: Vec<Key>,
    pending: Vec<Pending>,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.records.is_empty() && self.deletes.is_empty() && self.pending.is_empty()
    }

    /// Events in the batch.
    pub fn events_len(&self) -> usize {
        self.pending.len()
    }

    /// Changed records in the batch (deletions not included).
    pub fn records_len(&self) -> usize {
        self.records.len()
    }

    /// Writes the batch: events (in order), then changed records, then deletions.
    pub fn write(&self, c: &rusqlite::Connection) -> rusqlite::Result<()> {
        // The rows borrow the pending events' text.
        let events = self.pending.iter().map(|p| NewEvent {
            at: p.at,
            ip: ip_of(&p.key),
            kind: p.kind.name(),
            severity: i64::from(p.severity.level()),
            check: &p.check,
            account: p
                .account
                .as_deref()
                .map(|a| prefix_within(a, MAX_EVENT_NAME)),
            message: &p.message,
        });
        crate::store::threat::insert_events(c, events)?;
        crate::store::threat::upsert_records(c, self.rows())?;
        crate::store::threat::delete_records(c, &self.deletes)
    }

    /// The changed records as store rows, built as they are asked for.
    fn rows(&self) -> impl Iterator<Item = RecordRow> + '_ {
        let mut names = self.names.iter();
        self.records.iter().map(move |r| {
            let accounts = names.by_ref().take(usize::from(r.accounts));
            r.row(accounts.map(|a| a.to_string()).collect())
        })
    }

    /// The changed records as store rows.
    #[cfg(test)]
    fn record_rows(&self) -> Vec<RecordRow> {
        self.rows().collect()
    }
}

impl Changed {
    fn row(&self, accounts: Vec<String>) -> RecordRow {
        let r = &self.rec;
        RecordRow {
            ip: ip_of(&self.key).to_string(),
            first_seen: r.first_seen,
            last_seen: r.last_seen,
            counts: r.counts.map(i64::from),
            accounts,
            accounts_more: i64::from(r.accounts_more),
            score: f64::from(r.score),
            score_at: i64::from(r.score_at) * 1_000_000,
            scoring: i64::from(r.scoring),
            evidence: i64::from(r.evidence),
            evidence_until: i64::from(r.evidence_until) * 1_000_000,
        }
    }
}

/// The attack database.
pub struct AttackDb {
    inner: Mutex<Inner>,
    pub counters: Counters,
    events_row: Arc<QueueHealth>,
    records_row: Arc<QueueHealth>,
}

fn secs(us: i64) -> i64 {
    us.div_euclid(1_000_000)
}

impl Inner {
    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let s = &self.slots[i as usize];
            (s.prev, s.next)
        };
        if prev != NIL {
            self.slots[prev as usize].next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            self.slots[next as usize].prev = prev;
        } else {
            self.tail = prev;
        }
    }

    fn push_front(&mut self, i: u32) {
        let old = self.head;
        {
            let s = &mut self.slots[i as usize];
            s.prev = NIL;
            s.next = old;
        }
        if old != NIL {
            self.slots[old as usize].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    /// Removes the least recently seen record; returns its key.
    fn evict_tail(&mut self) -> Option<Key> {
        let t = self.tail;
        if t == NIL {
            return None;
        }
        self.unlink(t);
        let key = self.slots[t as usize].key;
        self.index.remove(&key, &self.slots);
        self.free.push(t);
        self.dirty.remove(&t);
        self.deleted.insert(key);
        Some(key)
    }

    /// The slot of `key`, created (evicting when full) when absent. Returns (slot, evicted).
    fn slot_for(&mut self, key: Key, now: i64) -> (u32, u64) {
        if let Some(i) = self.index.get(&key, &self.slots) {
            self.unlink(i);
            self.push_front(i);
            return (i, 0);
        }
        let mut evicted = 0;
        while self.index.len() >= self.max_records {
            if self.evict_tail().is_none() {
                break;
            }
            evicted += 1;
        }
        let rec = Record {
            first_seen: now,
            last_seen: now,
            accounts: [NO_ACCOUNT; ACCOUNTS_PER_RECORD],
            scoring: score::SCORING_VERSION,
            ..Record::default()
        };
        let slot = Slot {
            key,
            prev: NIL,
            next: NIL,
            rec,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                if self.slots.len() == self.slots.capacity() {
                    // Grow by an eighth rather than doubling (at most `max_records`): the
                    // slots are most of the database's memory.
                    let room = self.max_records.saturating_sub(self.slots.len()).max(1);
                    let step = (self.slots.capacity() / 8).max(64).min(room);
                    self.slots.reserve_exact(step);
                }
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(&key, i);
        self.push_front(i);
        // A deletion not yet saved becomes the save of the new record.
        if self.deleted.remove(&key) {
            self.dirty.insert(i);
        }
        (i, evicted)
    }

    /// Addresses whose save or deletion waits (row `attackdb.records`).
    fn unsaved(&self) -> usize {
        self.dirty.len() + self.deleted.len()
    }

    /// Marks `key` changed: to save when it has a record, else to delete.
    fn mark_unsaved(&mut self, key: Key) {
        match self.index.get(&key, &self.slots) {
            Some(i) => self.dirty.insert(i),
            None => self.deleted.insert(key),
        };
    }

    fn intern(&mut self, name: &str) -> Option<u32> {
        if let Some(&id) = self.name_ids.get(name) {
            return Some(id);
        }
        if self.names.len() >= MAX_ACCOUNT_NAMES {
            return None;
        }
        let id = self.names.len() as u32;
        let a: Arc<str> = name.into();
        self.names.push(a.clone());
        self.name_ids.insert(a, id);
        Some(id)
    }

    /// `check` shared with the pending events of the same check.
    fn check_name(&mut self, check: &str) -> Arc<str> {
        if let Some(c) = self.checks.get(check) {
            return c.clone();
        }
        let c: Arc<str> = check.into();
        if self.checks.len() < MAX_CHECK_NAMES {
            self.checks.insert(c.clone());
        }
        c
    }

    /// Gives back the pending queue's spare room after a burst (it keeps its largest size
    /// otherwise): keeps twice what waits, at least [`MIN_PENDING_ROOM`].
    fn shrink_events(&mut self) {
        let keep = (self.events.len() * 2).max(MIN_PENDING_ROOM);
        if self.events.capacity() > keep * 2 {
            self.events.shrink_to(keep);
        }
    }

    fn decayed(&self, r: &Record, now_secs: i64) -> f32 {
        score::decayed(
            r.score,
            (now_secs - i64::from(r.score_at)) as f64,
            self.half_life_secs,
        )
    }

    fn view(&self, key: &Key, r: &Record, now: i64) -> RecordView {
        let now_s = secs(now);
        RecordView {
            ip: ip_of(key),
            first_seen: r.first_seen,
            last_seen: r.last_seen,
            counts: r.counts.map(u64::from),
            accounts: r
                .accounts
                .iter()
                .filter(|a| **a != NO_ACCOUNT)
                .filter_map(|a| self.names.get(*a as usize).map(|s| s.to_string()))
                .collect(),
            accounts_more: u64::from(r.accounts_more),
            score: self.decayed(r, now_s),
            scoring: r.scoring,
            evidence: Evidence::decode(r.evidence, r.evidence_until).at(now_s),
        }
    }

    /// Adds the record of slot `i` to a batch; accounts in the record's order, unknown ids
    /// skipped.
    fn take_changed(&self, i: u32, b: &mut Batch) {
        let s = &self.slots[i as usize];
        let before = b.names.len();
        let known = s
            .rec
            .accounts
            .iter()
            .filter(|a| **a != NO_ACCOUNT)
            .filter_map(|a| self.names.get(*a as usize));
        b.names.extend(known.cloned());
        b.records.push(Changed {
            key: s.key,
            rec: s.rec,
            accounts: (b.names.len() - before) as u8,
        });
    }

    fn hour_add(&mut self, at: i64, kind: AttackKind) {
        let h = at.div_euclid(3_600_000_000);
        let newest = self.hourly.iter().map(|b| b.0).max().unwrap_or(i64::MIN);
        if h <= newest.saturating_sub(24) {
            return;
        }
        let b = &mut self.hourly[h.rem_euclid(24) as usize];
        if b.0 != h {
            if b.0 > h {
                return;
            }
            *b = (h, [0; 7]);
        }
        b.1[kind.index()] = b.1[kind.index()].saturating_add(1);
    }
}

impl AttackDb {
    /// An empty database holding at most `max_records` addresses, reporting to the two rows.
    pub fn new(
        max_records: usize,
        half_life_hours: u64,
        events_row: Arc<QueueHealth>,
        records_row: Arc<QueueHealth>,
    ) -> AttackDb {
        AttackDb {
            inner: Mutex::new(Inner {
                index: Index::new(),
                slots: Vec::new(),
                free: Vec::new(),
                head: NIL,
                tail: NIL,
                names: Vec::new(),
                name_ids: HashMap::new(),
                checks: HashSet::new(),
                events: VecDeque::new(),
                dirty: HashSet::new(),
                deleted: HashSet::new(),
                hourly: [(i64::MIN, [0; 7]); 24],
                max_records: max_records.max(1),
                half_life_secs: (half_life_hours.max(1) * 3600) as f64,
            }),
            counters: Counters::default(),
            events_row,
            records_row,
        }
    }

    /// Applies `threat.max_records` (evicting down to it) and `threat.half_life_hours`.
    pub fn set_limits(&self, max_records: usize, half_life_hours: u64) {
        let mut g = self.inner.lock();
        g.max_records = max_records.max(1);
        g.half_life_secs = (half_life_hours.max(1) * 3600) as f64;
        let mut evicted = 0;
        while g.index.len() > g.max_records {
            if g.evict_tail().is_none() {
                break;
            }
            evicted += 1;
        }
        self.counters
            .evicted_total
            .fetch_add(evicted, Ordering::Relaxed);
        self.records_row.set_waiting(g.unsaved() as u64);
    }

    /// Records one event: the address's record (created, evicting the least recently seen
    /// when full), its score, and the event queued for the store. Returns the score after it
    /// and the evidence in force.
    pub fn record(&self, ev: &AttackEvent) -> (f32, Evidence) {
        let key = key_of(ev.ip);
        let now_s = secs(ev.at);
        let mut g = self.inner.lock();
        let (i, evicted) = g.slot_for(key, ev.at);
        let mut ids: Vec<u32> = Vec::with_capacity(ev.accounts.len());
        let mut not_interned = 0u64;
        let mut first_account = None;
        for (n, a) in ev.accounts.iter().enumerate() {
            let id = g.intern(a);
            if n == 0 {
                // The event keeps the interned name when there is one, else its own copy.
                first_account = Some(match id.and_then(|id| g.names.get(id as usize)) {
                    Some(name) => name.clone(),
                    None => Arc::from(prefix_within(a, MAX_EVENT_NAME)),
                });
            }
            match id {
                Some(id) => ids.push(id),
                None => not_interned += 1,
            }
        }
        let check = g.check_name(prefix_within(&ev.check, MAX_EVENT_NAME));
        let half_life = g.half_life_secs;
        let r = &mut g.slots[i as usize].rec;
        let prior_scored: u64 = AttackKind::ALL
            .iter()
            .filter(|k| k.scored())
            .map(|k| u64::from(r.counts[k.index()]))
            .sum();
        let known = r.accounts.iter().filter(|a| **a != NO_ACCOUNT).count() as u32
            + u32::from(r.accounts_more);
        let mut new_accounts = 0u32;
        for id in ids {
            if r.accounts.contains(&id) {
                continue;
            }
            new_accounts += 1;
            match r.accounts.iter_mut().find(|a| **a == NO_ACCOUNT) {
                Some(slot) => *slot = id,
                None => r.accounts_more = r.accounts_more.saturating_add(1),
            }
        }
        new_accounts += not_interned as u32;
        r.accounts_more = r.accounts_more.saturating_add(not_interned as u16);
        let k = ev.kind.index();
        r.counts[k] = r.counts[k].saturating_add(1);
        if ev.at < r.first_seen {
            r.first_seen = ev.at;
        }
        if ev.at > r.last_seen {
            r.last_seen = ev.at;
        }
        let add = score::increment(ev.kind, prior_scored, new_accounts, known);
        if add > 0.0 {
            let base = score::decayed(r.score, (now_s - i64::from(r.score_at)) as f64, half_life);
            r.score = (base + add).min(score::MAX);
            r.score_at = now_s.clamp(0, i64::from(u32::MAX)) as u32;
            r.scoring = score::SCORING_VERSION;
        }
        let after = score::decayed(r.score, (now_s - i64::from(r.score_at)) as f64, half_life);
        let evidence = Evidence::decode(r.evidence, r.evidence_until).at(now_s);
        g.dirty.insert(i);
        g.hour_add(ev.at, ev.kind);
        let pending = Pending {
            at: ev.at,
            key,
            kind: ev.kind,
            severity: ev.severity,
            check,
            account: first_account,
            message: prefix_within(&ev.message, MAX_MESSAGE).into(),
            stamp: self.events_row.stamp(),
        };
        g.events.push_back(pending);
        let mut dropped = 0;
        while g.events.len() > MAX_PENDING_EVENTS {
            g.events.pop_front();
            dropped += 1;
        }
        let (n_events, n_dirty) = (g.events.len(), g.unsaved());
        let oldest = g.events.front().map(|p| p.stamp);
        drop(g);
        let c = &self.counters;
        c.events_total.fetch_add(1, Ordering::Relaxed);
        if evicted > 0 {
            c.evicted_total.fetch_add(evicted, Ordering::Relaxed);
        }
        if not_interned > 0 {
            c.accounts_not_interned
                .fetch_add(not_interned, Ordering::Relaxed);
        }
        if dropped > 0 {
            c.events_dropped.fetch_add(dropped, Ordering::Relaxed);
            self.events_row.record_losses(dropped);
        }
        self.events_row.set_waiting(n_events as u64);
        self.events_row.set_oldest_waiting(oldest);
        self.records_row.set_waiting(n_dirty as u64);
        (after, evidence)
    }

    /// The record of `ip` as of `now` (microseconds).
    pub fn view(&self, ip: IpAddr, now: i64) -> Option<RecordView> {
        let key = key_of(ip);
        let g = self.inner.lock();
        let i = g.index.get(&key, &g.slots)?;
        let r = g.slots[i as usize].rec;
        Some(g.view(&key, &r, now))
    }

    /// The decayed score and evidence of `ip` (the verdict's fast path).
    pub fn score_of(&self, ip: IpAddr, now: i64) -> Option<(f32, u64, Evidence)> {
        let key = key_of(ip);
        let g = self.inner.lock();
        let i = g.index.get(&key, &g.slots)?;
        let r = g.slots[i as usize].rec;
        let now_s = secs(now);
        Some((
            g.decayed(&r, now_s),
            r.counts.iter().map(|c| u64::from(*c)).sum(),
            Evidence::decode(r.evidence, r.evidence_until).at(now_s),
        ))
    }

    /// Score and evidence of `ip` for an undo entry.
    pub fn state(&self, ip: IpAddr) -> Option<RecordState> {
        let key = key_of(ip);
        let g = self.inner.lock();
        let i = g.index.get(&key, &g.slots)?;
        let r = g.slots[i as usize].rec;
        Some(RecordState {
            score: r.score,
            score_at: i64::from(r.score_at),
            evidence: Evidence::decode(r.evidence, r.evidence_until),
        })
    }

    fn modify(&self, ip: IpAddr, now: i64, create: bool, f: impl FnOnce(&mut Record)) -> bool {
        let key = key_of(ip);
        let mut g = self.inner.lock();
        let i = match g.index.get(&key, &g.slots) {
            Some(i) => i,
            None if create => {
                let (i, evicted) = g.slot_for(key, now);
                if evicted > 0 {
                    self.counters
                        .evicted_total
                        .fetch_add(evicted, Ordering::Relaxed);
                }
                i
            }
            None => return false,
        };
        f(&mut g.slots[i as usize].rec);
        g.dirty.insert(i);
        self.records_row.set_waiting(g.unsaved() as u64);
        true
    }

    /// Puts back score and evidence (an undo); `None` keeps the record with no score and no
    /// evidence.
    pub fn restore(&self, ip: IpAddr, st: Option<RecordState>, now: i64) {
        self.modify(ip, now, st.is_some(), |r| match st {
            Some(s) => {
                r.score = s.score;
                r.score_at = s.score_at.clamp(0, i64::from(u32::MAX)) as u32;
                let (code, until) = s.evidence.code();
                r.evidence = code;
                r.evidence_until = until;
            }
            None => {
                r.score = 0.0;
                r.evidence = 0;
                r.evidence_until = 0;
            }
        });
    }

    /// Clears the score and evidence of `ip`, keeping its events and counts (rule 2).
    /// Returns the state before, or `None` when the address has no record.
    pub fn clear(&self, ip: IpAddr, now: i64) -> Option<RecordState> {
        let before = self.state(ip)?;
        self.modify(ip, now, false, |r| {
            r.score = 0.0;
            r.score_at = secs(now).clamp(0, i64::from(u32::MAX)) as u32;
            r.evidence = 0;
            r.evidence_until = 0;
        });
        Some(before)
    }

    /// Sets the evidence of `ip` (creating its record when it has none).
    pub fn set_evidence(&self, ip: IpAddr, e: Evidence, now: i64) {
        self.modify(ip, now, true, |r| {
            let (code, until) = e.code();
            r.evidence = code;
            r.evidence_until = until;
        });
    }

    /// The `n` addresses with the highest decayed score (events break ties, then the most
    /// recent), and whether more addresses with events exist.
    pub fn top(&self, n: usize, now: i64) -> (Vec<RecordView>, bool) {
        let now_s = secs(now);
        let g = self.inner.lock();
        let mut scored: Vec<(f32, u64, i64, u32)> = Vec::new();
        let mut with_events = 0usize;
        let mut i = g.head;
        while i != NIL {
            let s = &g.slots[i as usize];
            let ev: u64 = s.rec.counts.iter().map(|c| u64::from(*c)).sum();
            if ev > 0 {
                with_events += 1;
                scored.push((g.decayed(&s.rec, now_s), ev, s.rec.last_seen, i));
            }
            i = s.next;
        }
        let cmp = |a: &(f32, u64, i64, u32), b: &(f32, u64, i64, u32)| {
            b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2))
        };
        if scored.len() > n {
            scored.select_nth_unstable_by(n, cmp);
            scored.truncate(n);
        }
        scored.sort_by(cmp);
        let out = scored
            .iter()
            .map(|&(_, _, _, i)| {
                let s = &g.slots[i as usize];
                g.view(&s.key, &s.rec, now)
            })
            .collect();
        (out, with_events > n)
    }

    /// Counts over every record, and the hourly events of the last 24 hours.
    pub fn totals(&self, now: i64) -> Totals {
        let now_s = secs(now);
        let g = self.inner.lock();
        let mut t = Totals {
            addresses: g.index.len() as u64,
            ..Totals::default()
        };
        let mut i = g.head;
        while i != NIL {
            let s = &g.slots[i as usize];
            for (k, c) in s.rec.counts.iter().enumerate() {
                t.events[k] += u64::from(*c);
                if *c > 0 {
                    t.addresses_by_kind[k] += 1;
                }
            }
            let sc = g.decayed(&s.rec, now_s);
            if sc >= 80.0 {
                t.malicious += 1;
            }
            if sc >= 40.0 {
                t.suspicious += 1;
            }
            i = s.next;
        }
        let this_hour = now.div_euclid(3_600_000_000);
        for h in this_hour - 23..=this_hour {
            let b = &g.hourly[h.rem_euclid(24) as usize];
            let counts = if b.0 == h { b.1.map(u64::from) } else { [0; 7] };
            t.hourly.push((h, counts));
        }
        t
    }

    /// Adds stored hourly counts (at start).
    pub fn seed_hourly(&self, rows: &[(i64, String, u64)]) {
        let mut g = self.inner.lock();
        for (h, kind, n) in rows {
            let Some(k) = AttackKind::parse(kind) else {
                continue;
            };
            let b = &mut g.hourly[h.rem_euclid(24) as usize];
            if b.0 < *h {
                *b = (*h, [0; 7]);
            }
            if b.0 == *h {
                b.1[k.index()] = b.1[k.index()].saturating_add(*n as u32);
            }
        }
    }

    /// Loads stored records (most recent first), up to `max_records`.
    pub fn load(&self, rows: Vec<RecordRow>) {
        let mut g = self.inner.lock();
        // Oldest first, so the most recent ends at the head of the LRU list.
        for row in rows.into_iter().rev() {
            let Ok(ip) = row.ip.parse::<IpAddr>() else {
                continue;
            };
            let key = key_of(ip);
            if g.index.find(&key, &g.slots).is_some() {
                continue;
            }
            let mut accounts = [NO_ACCOUNT; ACCOUNTS_PER_RECORD];
            let mut more = row.accounts_more.clamp(0, i64::from(u16::MAX)) as u16;
            for (n, a) in row.accounts.iter().enumerate() {
                match (n < ACCOUNTS_PER_RECORD).then(|| g.intern(a)).flatten() {
                    Some(id) => accounts[n] = id,
                    None => more = more.saturating_add(1),
                }
            }
            let (i, _) = g.slot_for(key, row.last_seen);
            let clamp_s = |us: i64| secs(us).clamp(0, i64::from(u32::MAX)) as u32;
            g.slots[i as usize].rec = Record {
                first_seen: row.first_seen,
                last_seen: row.last_seen,
                counts: row.counts.map(|c| c.clamp(0, i64::from(u32::MAX)) as u32),
                accounts,
                score: row.score as f32,
                score_at: clamp_s(row.score_at),
                evidence_until: clamp_s(row.evidence_until),
                accounts_more: more,
                evidence: row.evidence.clamp(0, 2) as u8,
                scoring: row.scoring.clamp(0, 255) as u8,
            };
        }
        // Loading is not a change to save.
        g.dirty.clear();
        g.deleted.clear();
    }

    /// Takes up to `max` events and `max` changed records for the store.
    pub fn take_batch(&self, max: usize) -> Batch {
        let mut g = self.inner.lock();
        let mut b = Batch::default();
        let n = g.events.len().min(max);
        b.pending = g.events.drain(..n).collect();
        g.shrink_events();
        // Up to `max` addresses in all: deletions first, then changed records.
        let deleted: Vec<Key> = g.deleted.iter().take(max).copied().collect();
        for k in &deleted {
            g.deleted.remove(k);
            b.deletes.push(ip_of(k).to_string());
        }
        b.deleted = deleted;
        let changed: Vec<u32> = g
            .dirty
            .iter()
            .take(max - b.deleted.len())
            .copied()
            .collect();
        b.records.reserve_exact(changed.len());
        for i in changed {
            g.dirty.remove(&i);
            g.take_changed(i, &mut b);
        }
        let oldest = g.events.front().map(|p| p.stamp);
        self.events_row.set_waiting(g.events.len() as u64);
        self.events_row.set_oldest_waiting(oldest);
        self.records_row.set_waiting(g.unsaved() as u64);
        b
    }

    /// Puts a batch the store refused back (events in front, in order; records dirty again).
    pub fn requeue(&self, b: Batch) {
        let mut g = self.inner.lock();
        for p in b.pending.into_iter().rev() {
            g.events.push_front(p);
        }
        let mut dropped = 0;
        while g.events.len() > MAX_PENDING_EVENTS {
            g.events.pop_back();
            dropped += 1;
        }
        for k in b.records.iter().map(|r| r.key).chain(b.deleted) {
            g.mark_unsaved(k);
        }
        let oldest = g.events.front().map(|p| p.stamp);
        self.events_row.set_waiting(g.events.len() as u64);
        self.events_row.set_oldest_waiting(oldest);
        self.records_row.set_waiting(g.unsaved() as u64);
        drop(g);
        if dropped > 0 {
            self.events_row.record_losses(dropped);
        }
    }

    /// (events, records) awaiting the store.
    pub fn backlog(&self) -> (usize, usize) {
        let g = self.inner.lock();
        (g.events.len(), g.unsaved())
    }

    /// Addresses held.
    pub fn len(&self) -> usize {
        self.inner.lock().index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn max_records(&self) -> usize {
        self.inner.lock().max_records
    }

    /// Bytes the records take in memory (slots, index, interned names).
    pub fn heap_bytes(&self) -> usize {
        let g = self.inner.lock();
        let slots = g.slots.capacity() * std::mem::size_of::<Slot>() + g.free.capacity() * 4;
        // hashbrown: one control byte per bucket (plus a group), buckets hold (key, value).
        let index = g.index.buckets.capacity() * 8;
        // A name: its entry in `names` and its shared allocation (two counts and the text).
        let names: usize = g.names.iter().map(|n| n.len() + 32).sum::<usize>()
            + g.name_ids.capacity() * 8 / 7 * (std::mem::size_of::<(Arc<str>, u32)>() + 1);
        slots + index + names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::queue::RowConfig;
    use crate::store::threat::EventRow;

    fn db(max: usize) -> AttackDb {
        let c = ManualClock::at_epoch_2026();
        AttackDb::new(
            max,
            168,
            QueueHealth::new(c.clone(), RowConfig::new("events")),
            QueueHealth::new(c, RowConfig::new("records")),
        )
    }

    const T0: i64 = 1_767_225_600_000_000;

    fn ev(ip: &str, kind: AttackKind, at: i64, accounts: &[&str]) -> AttackEvent {
        AttackEvent {
            ip: ip.parse().unwrap(),
            kind,
            at,
            severity: Severity::High,
            check: "ssh_bruteforce".into(),
            accounts: accounts.iter().map(|a| a.to_string()).collect(),
            message: "m".into(),
        }
    }

    #[test]
    fn scores_accounts_and_rule_one() {
        let d = db(10);
        let (s, _) = d.record(&ev("192.0.2.1", AttackKind::BruteForce, T0, &["root"]));
        assert_eq!(s, 40.0);
        let (s, _) = d.record(&ev("192.0.2.1", AttackKind::BruteForce, T0, &["admin"]));
        assert_eq!(s, 40.0 + 40.0 + 2.0 + 5.0);
        // auth_success: history and accounts only.
        let (s2, _) = d.record(&ev(
            "192.0.2.1",
            AttackKind::AuthSuccess,
            T0,
            &["bob", "eve"],
        ));
        assert_eq!(s2, s);
        let v = d.view("192.0.2.1".parse().unwrap(), T0).unwrap();
        assert_eq!(v.accounts, vec!["root", "admin", "bob", "eve"]);
        assert_eq!(v.counts[AttackKind::AuthSuccess.index()], 1);
        assert_eq!(v.events(), 3);
        // A week later the score has halved.
        let later = T0 + 7 * 86_400 * 1_000_000;
        assert!((d.view("192.0.2.1".parse().unwrap(), later).unwrap().score - 43.5).abs() < 0.01);
        // IPv4-mapped IPv6 is the same record.
        assert!(d.view("::ffff:192.0.2.1".parse().unwrap(), T0).is_some());
    }

    #[test]
    fn least_recently_seen_is_evicted_and_counted() {
        let d = db(3);
        for (n, ip) in ["192.0.2.1", "192.0.2.2", "192.0.2.3"].iter().enumerate() {
            d.record(&ev(ip, AttackKind::WafBlock, T0 + n as i64, &[]));
        }
        // .1 seen again: .2 is now the least recently seen.
        d.record(&ev("192.0.2.1", AttackKind::WafBlock, T0 + 10, &[]));
        d.record(&ev("192.0.2.4", AttackKind::WafBlock, T0 + 11, &[]));
        assert_eq!(d.len(), 3);
        assert!(d.view("192.0.2.2".parse().unwrap(), T0).is_none());
        assert_eq!(d.counters.evicted_total.load(Ordering::Relaxed), 1);
        let b = d.take_batch(100);
        assert_eq!(b.events_len(), 5);
        assert_eq!(b.deletes, vec!["192.0.2.2".to_string()]);
        assert_eq!(b.records_len(), 3);
        assert_eq!(d.backlog(), (0, 0));
        d.requeue(b);
        assert_eq!(d.backlog(), (5, 4));
        d.set_limits(1, 168);
        assert_eq!(d.len(), 1);
        assert!(d.view("192.0.2.4".parse().unwrap(), T0).is_some());
    }

    #[test]
    fn clear_keeps_events_and_rows_round_trip() {
        let d = db(10);
        let ip: IpAddr = "2001:db8::5".parse().unwrap();
        d.record(&ev(
            "2001:db8::5",
            AttackKind::CommandAndControl,
            T0,
            &["a"],
        ));
        d.set_evidence(ip, Evidence::Permanent, T0);
        let before = d.clear(ip, T0).unwrap();
        assert_eq!(before.evidence, Evidence::Permanent);
        let v = d.view(ip, T0).unwrap();
        assert_eq!((v.score, v.events(), v.evidence), (0.0, 1, Evidence::None));
        d.restore(ip, Some(before), T0);
        assert_eq!(d.view(ip, T0).unwrap().evidence, Evidence::Permanent);
        let rows = d.take_batch(10).record_rows();
        let d2 = db(10);
        d2.load(rows);
        assert_eq!(d2.view(ip, T0), d.view(ip, T0));
        assert_eq!(d2.backlog(), (0, 0));
        // Expiring evidence lapses by itself.
        d.set_evidence(ip, Evidence::Expiring(secs(T0) + 60), T0);
        assert_eq!(
            d.view(ip, T0).unwrap().evidence,
            Evidence::Expiring(secs(T0) + 60)
        );
        assert_eq!(
            d.view(ip, T0 + 61_000_000).unwrap().evidence,
            Evidence::None
        );
    }

    #[test]
    fn written_rows_keep_the_cut_text_of_each_event() {
        let d = db(10);
        let long_check = format!("{}\u{e9}", "c".repeat(63));
        let long_account = format!("{}\u{e9}x", "a".repeat(63));
        d.record(&ev(
            "192.0.2.1",
            AttackKind::BruteForce,
            T0,
            &["root", "admin"],
        ));
        let mut e = ev(
            "2001:db8::1",
            AttackKind::WafBlock,
            T0 + 1,
            &[&long_account],
        );
        e.check = long_check.clone();
        e.message = "\u{e9}".repeat(300);
        e.severity = Severity::Critical;
        d.record(&e);
        d.record(&ev("192.0.2.1", AttackKind::AuthSuccess, T0 + 2, &[]));
        // Past the interned names, the first account is kept as the event's own copy.
        let many: Vec<String> = (0..MAX_ACCOUNT_NAMES).map(|n| format!("u{n}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        d.record(&ev("192.0.2.3", AttackKind::BruteForce, T0 + 3, &many));
        d.record(&ev(
            "192.0.2.3",
            AttackKind::BruteForce,
            T0 + 4,
            &[&long_account],
        ));
        let b = d.take_batch(100);
        let dir = std::env::temp_dir().join(format!("svc-threat-db-rows-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = crate::store::Store::open(&dir.join("svc.db")).unwrap();
        let records = b.record_rows();
        let job = Arc::new(b);
        let j = job.clone();
        store.write(move |c| j.write(c)).unwrap();
        let (events, stored) = store
            .read(|c| {
                let mut all = Vec::new();
                for ip in ["2001:db8::1", "192.0.2.1", "192.0.2.3"] {
                    all.extend(crate::store::threat::events_of(c, ip, 10)?.0);
                }
                Ok((all, crate::store::threat::load_records(c, 10)?))
            })
            .unwrap();
        let row =
            |at, ip: &str, kind: AttackKind, sev: i64, check: &str, account, message| EventRow {
                at,
                ip: ip.into(),
                kind: kind.name().into(),
                severity: sev,
                check: check.into(),
                account,
                message,
            };
        let hi = i64::from(Severity::High.level());
        let cut_account = Some("a".repeat(63));
        assert_eq!(
            events,
            vec![
                row(
                    T0 + 1,
                    "2001:db8::1",
                    AttackKind::WafBlock,
                    i64::from(Severity::Critical.level()),
                    &"c".repeat(63),
                    cut_account.clone(),
                    "\u{e9}".repeat(256),
                ),
                row(
                    T0 + 2,
                    "192.0.2.1",
                    AttackKind::AuthSuccess,
                    hi,
                    "ssh_bruteforce",
                    None,
                    "m".into()
                ),
                row(
                    T0,
                    "192.0.2.1",
                    AttackKind::BruteForce,
                    hi,
                    "ssh_bruteforce",
                    Some("root".into()),
                    "m".into()
                ),
                row(
                    T0 + 4,
                    "192.0.2.3",
                    AttackKind::BruteForce,
                    hi,
                    "ssh_bruteforce",
                    cut_account,
                    "m".into()
                ),
                row(
                    T0 + 3,
                    "192.0.2.3",
                    AttackKind::BruteForce,
                    hi,
                    "ssh_bruteforce",
                    Some("u0".into()),
                    "m".into()
                ),
            ]
        );
        let mut records = records;
        records.sort_by_key(|r| std::cmp::Reverse(r.last_seen));
        assert_eq!(stored, records);
        assert_eq!(records[1].accounts, vec!["root", "admin"]);
        assert_eq!(records[2].accounts, vec![long_account]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pending_room_is_given_back_after_a_burst() {
        let d = db(10);
        for n in 0..5_000 {
            d.record(&ev("192.0.2.1", AttackKind::WafBlock, T0 + n, &[]));
        }
        assert!(d.inner.lock().events.capacity() >= 5_000);
        // Most still waiting: the room stays.
        let b = d.take_batch(1_000);
        assert!(d.inner.lock().events.capacity() >= 5_000);
        d.requeue(b);
        assert_eq!(d.backlog().0, 5_000);
        while d.take_batch(1_024).events_len() > 0 {}
        assert!(d.inner.lock().events.capacity() <= 2 * MIN_PENDING_ROOM);
        // The check name is one allocation shared by every event.
        assert_eq!(d.inner.lock().checks.len(), 1);
    }

    /// Bytes per address and per pending event (`cargo test --lib threat::db -- --ignored
    /// --nocapture`).
    #[test]
    #[ignore]
    fn memory_per_address() {
        let d = db(1_000_000);
        let n = 6_000u32;
        for i in 0..n {
            let ip = IpAddr::from(std::net::Ipv4Addr::from(0xC000_0000 + i));
            for k in 0..2 {
                let mut e = ev(
                    "192.0.2.1",
                    AttackKind::BruteForce,
                    T0 + i64::from(k),
                    &["root"],
                );
                e.ip = ip;
                e.message = format!("Failed password for root from {ip} port 22 ssh2");
                d.record(&e);
            }
        }
        let g = d.inner.lock();
        eprintln!(
            "Slot {} B, Pending {} B, Changed {} B (RecordRow {} B, EventRow {} B)",
            std::mem::size_of::<Slot>(),
            std::mem::size_of::<Pending>(),
            std::mem::size_of::<Changed>(),
            std::mem::size_of::<RecordRow>(),
            std::mem::size_of::<EventRow>(),
        );
        eprintln!(
            "{n} addresses: slots capacity {} ({} B), index buckets {}, dirty capacity {}, \
             pending {} in capacity {}",
            g.slots.capacity(),
            g.slots.capacity() * std::mem::size_of::<Slot>(),
            g.index.buckets.len(),
            g.dirty.capacity(),
            g.events.len(),
            g.events.capacity(),
        );
        drop(g);
        eprintln!(
            "heap_bytes {} ({} per address)",
            d.heap_bytes(),
            d.heap_bytes() / n as usize
        );
    }

    #[test]
    fn an_evicted_address_seen_again_is_saved_not_deleted() {
        let d = db(1);
        d.record(&ev("192.0.2.1", AttackKind::WafBlock, T0, &[]));
        d.take_batch(10);
        d.record(&ev("192.0.2.2", AttackKind::WafBlock, T0 + 1, &[]));
        assert_eq!(d.backlog(), (1, 2));
        d.record(&ev("192.0.2.1", AttackKind::WafBlock, T0 + 2, &[]));
        assert_eq!(d.backlog(), (2, 2));
        let b = d.take_batch(10);
        assert_eq!(b.deletes, vec!["192.0.2.2".to_string()]);
        let rows = b.record_rows();
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].ip.as_str(), rows[0].counts[4]), ("192.0.2.1", 1));
        d.requeue(b);
        assert_eq!(d.backlog(), (2, 2));
        // One address per batch at most: the deletion, then the record.
        assert_eq!(d.take_batch(1).deletes.len(), 1);
        assert_eq!(d.take_batch(1).records_len(), 1);
        assert_eq!(d.backlog(), (0, 0));
    }

    #[test]
    fn index_matches_a_map_through_inserts_and_removals() {
        let mut slots: Vec<Slot> = Vec::new();
        let mut index = Index::new();
        let mut model: HashMap<Key, u32> = HashMap::new();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let key_of_n = |n: u64| {
            let mut k = [0u8; 16];
            k[..2].copy_from_slice(&(n as u16).to_be_bytes());
            k
        };
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = key_of_n(x % 3_000);
            match model.get(&key) {
                Some(_) if (x >> 40) & 1 == 0 => {
                    index.remove(&key, &slots);
                    model.remove(&key);
                }
                Some(&i) => assert_eq!(index.get(&key, &slots), Some(i)),
                None => {
                    let i = slots.len() as u32;
                    slots.push(Slot {
                        key,
                        prev: NIL,
                        next: NIL,
                        rec: Record::default(),
                    });
                    index.insert(&key, i);
                    model.insert(key, i);
                }
            }
            assert_eq!(index.len(), model.len());
        }
        for n in 0..3_000 {
            let key = key_of_n(n);
            assert_eq!(index.get(&key, &slots), model.get(&key).copied());
        }
        assert!(index.len() * 8 <= index.buckets.len() * 7);
    }

    #[test]
    fn top_and_totals() {
        let d = db(100);
        d.record(&ev("192.0.2.1", AttackKind::WafBlock, T0, &[]));
        d.record(&ev("192.0.2.2", AttackKind::CommandAndControl, T0, &[]));
        d.record(&ev("192.0.2.3", AttackKind::AuthSuccess, T0, &[]));
        let (top, more) = d.top(2, T0);
        assert_eq!(top[0].ip.to_string(), "192.0.2.2");
        assert_eq!(top[1].ip.to_string(), "192.0.2.1");
        assert!(more);
        let t = d.totals(T0);
        assert_eq!(t.addresses, 3);
        assert_eq!(t.events[AttackKind::WafBlock.index()], 1);
        assert_eq!(t.malicious, 1);
        assert_eq!(t.hourly.len(), 24);
        assert_eq!(t.hourly[23].1.iter().sum::<u64>(), 3);
    }
}
