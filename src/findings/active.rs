//! The active set: current findings keyed by (check, message).
//!
//! The dispatcher owns the one mutable [`ActiveSet`]; everyone else reads immutable
//! [`Snapshot`]s of it. Guarantees:
//! - Taking a snapshot copies 64 pointers ([`ActiveSet::snapshot`]); a snapshot never
//!   changes afterwards, so readers need no lock while they walk, sort or serialise it.
//! - The set is split into 4,096 shards (64 groups of 64) by a per-process random hash of the
//!   key, each behind an `Arc`. A change copies only the shards (and groups) it touches that
//!   a live snapshot still shares ("copy on write"): a dispatched batch of `b` findings over
//!   `n` active ones costs about `min(b, 4096) * n / 4096` entry copies, not `n`.
//! - Counts per severity and per check (with the findings that name no account) are kept
//!   up to date on every change, so status and the enriched route read them without a walk.
//! - The set is bounded ([`ActiveSet::evict_over`]): event findings (from checks that are
//!   not scheduled: log and file-watcher detections) leave first, least recently dispatched
//!   first; condition findings (scheduled checks, resolved when their check completes) leave
//!   only when no event finding is left, in the same order.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, DefaultHasher, Hash, Hasher, RandomState};
use std::sync::{Arc, OnceLock};

use jiff::Timestamp;

use super::{Finding, Severity};

/// Merges a repeat `f` into the existing entry `e`: `first_seen` stays the earliest,
/// `last_seen` the latest, `count` grows, severity and details take the newest values, and
/// account, ip and path are replaced when the repeat carries them.
pub fn merge_into(e: &mut Finding, f: &Finding) {
    e.last_seen = e.last_seen.max(f.last_seen);
    e.first_seen = e.first_seen.min(f.first_seen);
    e.count = e.count.saturating_add(f.count.max(1));
    e.severity = f.severity;
    e.details.clone_from(&f.details);
    if f.account.is_some() {
        e.account.clone_from(&f.account);
    }
    if f.ip.is_some() {
        e.ip = f.ip;
    }
    if f.path.is_some() {
        e.path.clone_from(&f.path);
    }
}

/// Orders findings as the API lists them: severity (highest first), then newest
/// `last_seen`, then check and message (a total order, so pages are stable).
pub fn listing_order(a: &Finding, b: &Finding) -> std::cmp::Ordering {
    b.severity
        .cmp(&a.severity)
        .then(b.last_seen.cmp(&a.last_seen))
        .then_with(|| a.check.cmp(&b.check))
        .then_with(|| a.message.cmp(&b.message))
}

/// A borrowed view of an entry's key, (check, message), so lookups by `(&str, &str)`
/// allocate nothing.
trait KeyView {
    fn parts(&self) -> (&str, &str);
}

impl KeyView for (&str, &str) {
    fn parts(&self) -> (&str, &str) {
        (self.0, self.1)
    }
}

impl Hash for dyn KeyView + '_ {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.parts().hash(h);
    }
}

impl PartialEq for dyn KeyView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn KeyView + '_ {}

/// An entry's finding as the key of its shard: it hashes and compares as its (check,
/// message), so the set keeps no copy of the key text. A merge replaces the entry (remove,
/// then insert the merged finding).
#[derive(Clone, Debug)]
struct Entry(Arc<Finding>);

impl KeyView for Entry {
    fn parts(&self) -> (&str, &str) {
        (&self.0.check, &self.0.message)
    }
}

impl Hash for Entry {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.parts().hash(h);
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for Entry {}

impl<'a> Borrow<dyn KeyView + 'a> for Entry {
    fn borrow(&self) -> &(dyn KeyView + 'a) {
        self
    }
}

/// An entry's bookkeeping in 8 bytes: the dispatch sequence of its latest merge (recency
/// for eviction, and the entry's identity in the recency queues: unique among live entries)
/// and, in the top bit, whether it is an event finding (see the module docs) rather than a
/// condition finding.
#[derive(Clone, Copy)]
struct Slot(u64);

const EVENT_BIT: u64 = 1 << 63;

impl Slot {
    fn new(seq: u64, event: bool) -> Slot {
        Slot((seq & !EVENT_BIT) | if event { EVENT_BIT } else { 0 })
    }

    fn seq(self) -> u64 {
        self.0 & !EVENT_BIT
    }

    fn event(self) -> bool {
        self.0 & EVENT_BIT != 0
    }
}

/// A recency queue item in 8 bytes: an entry's sequence (low 52 bits; they wrap after 2^52
/// merges, far beyond any uptime) and its shard index (high 12 bits).
#[derive(Clone, Copy)]
struct Queued(u64);

const SHARD_SHIFT: u32 = 52;
const SEQ_MASK: u64 = (1 << SHARD_SHIFT) - 1;
const _: () = assert!(GROUPS * PER_GROUP <= 1 << (64 - SHARD_SHIFT));

impl Queued {
    fn new(seq: u64, shard: usize) -> Queued {
        Queued(((shard as u64) << SHARD_SHIFT) | (seq & SEQ_MASK))
    }

    fn shard(self) -> usize {
        (self.0 >> SHARD_SHIFT) as usize
    }

    /// Whether `slot` is the entry this item was queued for.
    fn is(self, slot: Slot) -> bool {
        slot.seq() & SEQ_MASK == self.0 & SEQ_MASK
    }
}

/// The hasher of every shard's map: one process-wide random key, since a `RandomState` in
/// each of the 4,096 shards would cost 16 bytes apiece.
#[derive(Clone, Copy, Default)]
struct ShardHasher;

impl BuildHasher for ShardHasher {
    type Hasher = DefaultHasher;

    fn build_hasher(&self) -> DefaultHasher {
        static KEYS: OnceLock<RandomState> = OnceLock::new();
        KEYS.get_or_init(RandomState::new).build_hasher()
    }
}

type Shard = HashMap<Entry, Slot, ShardHasher>;
type Group = Vec<Arc<Shard>>;

const GROUP_BITS: u32 = 6;
const SHARD_BITS: u32 = 6;
const GROUPS: usize = 1 << GROUP_BITS;
const PER_GROUP: usize = 1 << SHARD_BITS;

/// Counts of one check's active findings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckCounts {
    /// By severity level (0 WARNING, 1 HIGH, 2 CRITICAL).
    pub by_level: [u64; 3],
    /// Findings that name no account.
    pub unattributed: u64,
}

impl CheckCounts {
    pub fn total(&self) -> u64 {
        self.by_level.iter().sum()
    }

    /// The highest severity present, if any.
    pub fn highest(&self) -> Option<Severity> {
        (0..3u8)
            .rev()
            .find(|l| self.by_level[*l as usize] > 0)
            .and_then(Severity::from_level)
    }
}

/// Counts over the whole set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// By severity level (0 WARNING, 1 HIGH, 2 CRITICAL).
    pub by_level: [u64; 3],
    pub by_check: BTreeMap<String, CheckCounts>,
}

impl Counts {
    fn add(&mut self, f: &Finding, n: i64) {
        let l = f.severity.level() as usize;
        let apply = |v: &mut u64| *v = v.saturating_add_signed(n);
        apply(&mut self.by_level[l]);
        if !self.by_check.contains_key(f.check.as_str()) {
            self.by_check
                .insert(f.check.clone(), CheckCounts::default());
        }
        let Some(c) = self.by_check.get_mut(f.check.as_str()) else {
            return;
        };
        apply(&mut c.by_level[l]);
        if f.account.is_none() {
            apply(&mut c.unattributed);
        }
        if c.total() == 0 {
            self.by_check.remove(f.check.as_str());
        }
    }
}

/// An immutable view of the active set at one version.
pub struct Snapshot {
    groups: Vec<Arc<Group>>,
    hasher: RandomState,
    len: usize,
    version: u64,
    merges: u64,
    counts: Arc<Counts>,
}

impl Snapshot {
    /// The number of active findings.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bumped on every change of the set.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Merges of a repeat into an existing entry, since start.
    pub fn merges(&self) -> u64 {
        self.merges
    }

    /// Counts by severity and by check.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// (critical, high, warning).
    pub fn severity_counts(&self) -> (u64, u64, u64) {
        let l = self.counts.by_level;
        (l[2], l[1], l[0])
    }

    pub fn get(&self, check: &str, message: &str) -> Option<&Finding> {
        self.get_arc(check, message).map(|a| &**a)
    }

    /// The entry as a shared pointer (no copy).
    pub fn get_arc(&self, check: &str, message: &str) -> Option<&Arc<Finding>> {
        let view: &dyn KeyView = &(check, message);
        let i = shard_of(&self.hasher, view);
        self.groups[i >> SHARD_BITS][i & (PER_GROUP - 1)]
            .get_key_value(view)
            .map(|(e, _)| &e.0)
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Finding> {
        self.iter_arc().map(|a| &**a)
    }

    /// Every entry as a shared pointer, in no particular order.
    pub fn iter_arc(&self) -> impl Iterator<Item = &Arc<Finding>> {
        self.groups
            .iter()
            .flat_map(|g| g.iter())
            .flat_map(|s| s.keys())
            .map(|e| &e.0)
    }

    /// The entries `[offset, offset + limit)` in [`listing_order`], without sorting the
    /// others: two selections (everything before `offset` moves left of it, everything after
    /// the page right of it), then a sort of the page. Costs one walk of the set, `O(n)`
    /// comparisons and `O(limit log limit)` for the page, whatever the offset.
    pub fn page(&self, offset: usize, limit: usize) -> Vec<&Finding> {
        let mut all: Vec<&Finding> = self.iter().collect();
        let end = offset.saturating_add(limit).min(all.len());
        if offset >= end {
            return Vec::new();
        }
        let cmp = |a: &&Finding, b: &&Finding| listing_order(a, b);
        if offset > 0 {
            all.select_nth_unstable_by(offset, cmp);
        }
        let rest = &mut all[offset..];
        if end - offset < rest.len() {
            rest.select_nth_unstable_by(end - offset - 1, cmp);
        }
        let page = &mut all[offset..end];
        page.sort_unstable_by(cmp);
        page.to_vec()
    }

    /// Every entry in [`listing_order`] (copies; for tests and small sets).
    pub fn sorted(&self) -> Vec<Finding> {
        self.page(0, self.len).into_iter().cloned().collect()
    }
}

fn shard_of(hasher: &RandomState, key: &dyn KeyView) -> usize {
    (hasher.hash_one(key) as usize) & (GROUPS * PER_GROUP - 1)
}

/// What one change did to the set (for the store and the listeners).
#[derive(Debug, Default)]
pub struct Removed {
    /// The entries that left, as they were.
    pub findings: Vec<Arc<Finding>>,
}

/// The mutable active set (owned by the dispatcher). See the module docs.
pub struct ActiveSet {
    groups: Vec<Arc<Group>>,
    hasher: RandomState,
    len: usize,
    version: u64,
    merges: u64,
    counts: Arc<Counts>,
    next_seq: u64,
    /// Recency queues (oldest first) of event and condition entries, as (seq, shard index).
    /// Entries are not removed when they merge again or leave: a queued seq that no entry of
    /// its shard has (of that kind) is stale and skipped. Rebuilt when more than half is
    /// stale.
    recency: [VecDeque<Queued>; 2],
    /// Live entries per kind: [condition, event].
    kinds: [usize; 2],
    /// The messages of the condition entries of each check, so a completed check resolves
    /// without a walk. Event entries are not indexed (they are the many, and a completed
    /// check concerns scheduled checks); [`ActiveSet::resolve_check`] walks the set only
    /// when the check also has event entries (its schedule changed since they arrived).
    conditions: HashMap<Box<str>, HashSet<Box<str>>>,
}

impl Default for ActiveSet {
    fn default() -> Self {
        ActiveSet {
            groups: (0..GROUPS)
                .map(|_| Arc::new((0..PER_GROUP).map(|_| Arc::new(Shard::default())).collect()))
                .collect(),
            hasher: RandomState::new(),
            len: 0,
            version: 0,
            merges: 0,
            counts: Arc::new(Counts::default()),
            next_seq: 0,
            recency: [VecDeque::new(), VecDeque::new()],
            kinds: [0, 0],
            conditions: HashMap::new(),
        }
    }
}

impl ActiveSet {
    /// A set holding `findings` (all taken as event findings until [`classify`] runs),
    /// oldest `last_seen` first in the recency order.
    ///
    /// [`classify`]: ActiveSet::classify
    pub fn load(mut findings: Vec<Finding>) -> ActiveSet {
        let mut s = ActiveSet::default();
        findings.sort_by_key(|f| f.last_seen);
        for f in findings {
            let seq = s.bump_seq();
            s.insert_new(Arc::new(f), true, seq);
        }
        s.version = 1;
        s
    }

    /// Marks each entry an event finding when `is_event(check)`, else a condition finding,
    /// and rebuilds the recency order (by `last_seen`, oldest first).
    pub fn classify(&mut self, is_event: impl Fn(&str) -> bool) {
        let mut all: Vec<(Timestamp, u64, Arc<Finding>)> = Vec::with_capacity(self.len);
        for g in &self.groups {
            for sh in g.iter() {
                for (e, s) in sh.iter() {
                    all.push((e.0.last_seen, s.seq(), e.0.clone()));
                }
            }
        }
        all.sort_by_key(|(t, seq, _)| (*t, *seq));
        self.recency = [VecDeque::new(), VecDeque::new()];
        self.kinds = [0, 0];
        self.conditions = HashMap::new();
        for (_, _, f) in all {
            let event = is_event(&f.check);
            let seq = self.bump_seq();
            let view: &dyn KeyView = &(f.check.as_str(), f.message.as_str());
            let i = self.shard_index(view);
            if let Some(slot) = self.shard_mut_at(i).get_mut(view) {
                *slot = Slot::new(seq, event);
            }
            if !event {
                self.index_condition(&f);
            }
            self.kinds[usize::from(event)] += 1;
            self.recency[usize::from(event)].push_back(Queued::new(seq, i));
        }
    }

    fn bump_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    fn shard_index(&self, key: &dyn KeyView) -> usize {
        shard_of(&self.hasher, key)
    }

    /// Shard `i` for writing (copied first if a snapshot shares it).
    fn shard_mut_at(&mut self, i: usize) -> &mut Shard {
        let group = Arc::make_mut(&mut self.groups[i >> SHARD_BITS]);
        Arc::make_mut(&mut group[i & (PER_GROUP - 1)])
    }

    fn shard_at(&self, i: usize) -> &Shard {
        &self.groups[i >> SHARD_BITS][i & (PER_GROUP - 1)]
    }

    fn shard(&self, key: &dyn KeyView) -> &Shard {
        self.shard_at(self.shard_index(key))
    }

    fn index_condition(&mut self, f: &Finding) {
        match self.conditions.get_mut(f.check.as_str()) {
            Some(messages) => {
                messages.insert(f.message.as_str().into());
            }
            None => {
                let messages = HashSet::from([f.message.as_str().into()]);
                self.conditions.insert(f.check.as_str().into(), messages);
            }
        }
    }

    fn unindex_condition(&mut self, f: &Finding) {
        if let Some(messages) = self.conditions.get_mut(f.check.as_str()) {
            messages.remove(f.message.as_str());
            if messages.is_empty() {
                self.conditions.remove(f.check.as_str());
            }
        }
    }

    /// Adds an entry known to be absent, in shard `i` of its key.
    fn insert_at(&mut self, i: usize, f: Arc<Finding>, event: bool, seq: u64) {
        Arc::make_mut(&mut self.counts).add(&f, 1);
        if !event {
            self.index_condition(&f);
        }
        self.shard_mut_at(i).insert(Entry(f), Slot::new(seq, event));
        self.recency[usize::from(event)].push_back(Queued::new(seq, i));
        self.kinds[usize::from(event)] += 1;
        self.len += 1;
    }

    fn insert_new(&mut self, f: Arc<Finding>, event: bool, seq: u64) {
        let i = self.shard_index(&(f.check.as_str(), f.message.as_str()));
        self.insert_at(i, f, event, seq);
    }

    /// Merges one dispatched finding (`event` says its kind when it is new); returns the
    /// entry after the merge and whether it was new.
    pub fn merge(&mut self, f: Arc<Finding>, event: bool) -> (Arc<Finding>, bool) {
        self.version += 1;
        let seq = self.bump_seq();
        let view: &dyn KeyView = &(f.check.as_str(), f.message.as_str());
        let i = self.shard_index(view);
        let Some((Entry(old), slot)) = self.shard_mut_at(i).remove_entry(view) else {
            self.insert_at(i, f.clone(), event, seq);
            return (f, true);
        };
        self.merges += 1;
        let mut merged = (*old).clone();
        merge_into(&mut merged, &f);
        let merged = Arc::new(merged);
        {
            let counts = Arc::make_mut(&mut self.counts);
            counts.add(&old, -1);
            counts.add(&merged, 1);
        }
        let kind = slot.event();
        self.shard_mut_at(i)
            .insert(Entry(merged.clone()), Slot::new(seq, kind));
        self.recency[usize::from(kind)].push_back(Queued::new(seq, i));
        self.compact(kind);
        (merged, false)
    }

    /// Removes one entry; returns it when it was present.
    fn remove_key(&mut self, check: &str, message: &str) -> Option<Arc<Finding>> {
        let view: &dyn KeyView = &(check, message);
        let i = self.shard_index(view);
        let shard = self.shard_mut_at(i);
        let (Entry(f), slot) = shard.remove_entry(view)?;
        if shard.capacity() > 64 && shard.len() * 4 < shard.capacity() {
            shard.shrink_to_fit();
        }
        Arc::make_mut(&mut self.counts).add(&f, -1);
        let event = slot.event();
        if !event {
            self.unindex_condition(&f);
        }
        self.kinds[usize::from(event)] -= 1;
        self.len -= 1;
        self.compact(event);
        Some(f)
    }

    /// Removes the given keys; returns the entries that were present.
    pub fn remove<'a>(&mut self, keys: impl IntoIterator<Item = (&'a str, &'a str)>) -> Removed {
        let mut out = Removed::default();
        for (c, m) in keys {
            if let Some(f) = self.remove_key(c, m) {
                out.findings.push(f);
            }
        }
        if !out.findings.is_empty() {
            self.version += 1;
        }
        out
    }

    /// Removes entries of `check` whose message is not in `keep`; returns the removed
    /// entries.
    pub fn resolve_check(&mut self, check: &str, keep: &[String]) -> Removed {
        let kept = |m: &str| keep.iter().any(|k| k == m);
        let active = self
            .counts
            .by_check
            .get(check)
            .map_or(0, CheckCounts::total);
        let indexed = self.conditions.get(check).map_or(0, HashSet::len);
        let gone: Vec<Box<str>> = if active > indexed as u64 {
            // Event entries of this check too: one walk.
            self.iter()
                .filter(|f| f.check == check && !kept(&f.message))
                .map(|f| f.message.as_str().into())
                .collect()
        } else {
            self.conditions
                .get(check)
                .into_iter()
                .flatten()
                .filter(|m| !kept(m))
                .cloned()
                .collect()
        };
        self.remove(gone.iter().map(|m| (check, &**m)))
    }

    /// Removes event findings whose `last_seen` is before `cutoff` (one walk of the set).
    pub fn expire(&mut self, cutoff: Timestamp) -> Removed {
        let gone: Vec<Arc<Finding>> = self
            .groups
            .iter()
            .flat_map(|g| g.iter())
            .flat_map(|s| s.iter())
            .filter(|(e, s)| s.event() && e.0.last_seen < cutoff)
            .map(|(e, _)| e.0.clone())
            .collect();
        self.remove(gone.iter().map(|f| (f.check.as_str(), f.message.as_str())))
    }

    /// While more than `max` entries are active, removes the least recently dispatched
    /// event finding, or the least recently dispatched condition finding when no event
    /// finding is left. Returns the removed entries.
    pub fn evict_over(&mut self, max: usize) -> Removed {
        let mut out = Removed::default();
        while self.len > max {
            let kind = usize::from(self.kinds[1] > 0);
            let Some(queued) = self.recency[kind].pop_front() else {
                break;
            };
            // A shard holds a handful of entries (the set is bounded, 4,096 shards).
            let live = self
                .shard_at(queued.shard())
                .iter()
                .find(|(_, s)| queued.is(**s) && usize::from(s.event()) == kind)
                .map(|(e, _)| e.0.clone());
            if let Some(f) = live {
                if let Some(gone) = self.remove_key(&f.check, &f.message) {
                    out.findings.push(gone);
                }
            }
        }
        if !out.findings.is_empty() {
            self.version += 1;
        }
        out
    }

    /// Rebuilds a recency queue when more than half of it is stale.
    fn compact(&mut self, event: bool) {
        let kind = usize::from(event);
        if self.recency[kind].len() <= 2 * self.kinds[kind] + 1024 {
            return;
        }
        let mut live: Vec<(u64, usize)> = Vec::with_capacity(self.kinds[kind]);
        for (gi, g) in self.groups.iter().enumerate() {
            for (si, sh) in g.iter().enumerate() {
                let i = (gi << SHARD_BITS) | si;
                live.extend(
                    sh.values()
                        .filter(|s| s.event() == event)
                        .map(|s| (s.seq(), i)),
                );
            }
        }
        live.sort_unstable_by_key(|(seq, _)| *seq);
        self.recency[kind] = live
            .into_iter()
            .map(|(seq, i)| Queued::new(seq, i))
            .collect();
    }

    /// An immutable view of the set now (copies 64 pointers).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            groups: self.groups.clone(),
            hasher: self.hasher.clone(),
            len: self.len,
            version: self.version,
            merges: self.merges,
            counts: self.counts.clone(),
        }
    }

    pub fn get(&self, check: &str, message: &str) -> Option<&Finding> {
        let view: &dyn KeyView = &(check, message);
        self.shard(view).get_key_value(view).map(|(e, _)| &*e.0)
    }

    /// Whether the entry of (check, message) is an event finding.
    pub fn is_event(&self, check: &str, message: &str) -> Option<bool> {
        let view: &dyn KeyView = &(check, message);
        self.shard(view).get(view).map(|s| s.event())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    /// Marks a change made outside [`merge`](Self::merge) and the removals.
    pub fn bump_version(&mut self) {
        self.version += 1;
    }

    pub fn merges(&self) -> u64 {
        self.merges
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Finding> {
        self.groups
            .iter()
            .flat_map(|g| g.iter())
            .flat_map(|s| s.keys())
            .map(|e| &*e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(check: &str, msg: &str, sev: Severity, t: i64) -> Arc<Finding> {
        Arc::new(Finding::new(
            check,
            sev,
            msg,
            Timestamp::from_second(t).unwrap(),
        ))
    }

    fn keys(r: &Removed) -> Vec<String> {
        let mut v: Vec<String> = r.findings.iter().map(|f| f.message.clone()).collect();
        v.sort();
        v
    }

    #[test]
    fn merge_keeps_first_seen_and_counts() {
        let mut s = ActiveSet::default();
        s.merge(f("a", "m", Severity::High, 10), true);
        let (e, new) = s.merge(f("a", "m", Severity::Critical, 20), true);
        assert!(!new);
        assert_eq!(e.count, 2);
        assert_eq!(e.first_seen.as_second(), 10);
        assert_eq!(e.last_seen.as_second(), 20);
        assert_eq!(e.severity, Severity::Critical);
        assert_eq!(s.len(), 1);
        assert_eq!(s.merges(), 1);
        assert_eq!(s.counts().by_level, [0, 0, 1]);
        assert_eq!(s.counts().by_check["a"].by_level, [0, 0, 1]);
        assert_eq!(s.counts().by_check["a"].unattributed, 1);
    }

    #[test]
    fn resolve_and_expire() {
        let mut s = ActiveSet::default();
        s.merge(f("c", "keep", Severity::High, 10), false);
        s.merge(f("c", "gone", Severity::High, 10), false);
        s.merge(f("other", "x", Severity::Warning, 10), true);
        assert_eq!(keys(&s.resolve_check("c", &["keep".to_string()])), ["gone"]);
        assert_eq!(s.len(), 2);
        let gone = s.expire(Timestamp::from_second(11).unwrap());
        assert_eq!(keys(&gone), ["x"], "only event findings expire");
        assert_eq!(s.snapshot().sorted()[0].message, "keep");
        assert_eq!(s.counts().by_check.len(), 1);
    }

    #[test]
    fn an_entry_costs_sixteen_bytes_in_its_shard_and_eight_in_a_queue() {
        assert_eq!(std::mem::size_of::<(Entry, Slot)>(), 16);
        assert_eq!(std::mem::size_of::<Queued>(), 8);
        assert_eq!(std::mem::size_of::<ShardHasher>(), 0);
        let s = Slot::new(SEQ_MASK + 5, true);
        assert!(s.event() && s.seq() == SEQ_MASK + 5);
        let q = Queued::new(SEQ_MASK + 5, GROUPS * PER_GROUP - 1);
        assert!(q.is(s) && q.shard() == GROUPS * PER_GROUP - 1);
        assert!(!q.is(Slot::new(6, true)));
    }

    #[test]
    fn a_completed_check_resolves_its_event_entries_too() {
        // Entries that arrived while the check was not scheduled are event entries (not
        // indexed by check); its completion still resolves them.
        let mut s = ActiveSet::default();
        s.merge(f("c", "ev-keep", Severity::High, 10), true);
        s.merge(f("c", "ev-gone", Severity::High, 10), true);
        s.merge(f("c", "cond-gone", Severity::High, 10), false);
        s.merge(f("other", "x", Severity::High, 10), true);
        let gone = s.resolve_check("c", &["ev-keep".to_string()]);
        assert_eq!(keys(&gone), ["cond-gone", "ev-gone"]);
        assert_eq!(s.len(), 2);
        assert!(s.conditions.is_empty());
        assert_eq!(keys(&s.resolve_check("c", &[])), ["ev-keep"]);
        assert_eq!(keys(&s.resolve_check("absent", &[])), Vec::<String>::new());
    }

    #[test]
    fn an_entry_is_its_finding_and_a_merge_replaces_it() {
        let mut s = ActiveSet::default();
        let first = f("c", "m", Severity::High, 10);
        s.merge(first.clone(), true);
        assert!(Arc::ptr_eq(s.snapshot().get_arc("c", "m").unwrap(), &first));
        let (merged, _) = s.merge(f("c", "m", Severity::High, 20), true);
        let snap = s.snapshot();
        assert!(Arc::ptr_eq(snap.get_arc("c", "m").unwrap(), &merged));
        assert_eq!(
            Arc::strong_count(&first),
            1,
            "the set keeps no older version"
        );
        assert_eq!(snap.iter().count(), 1);
    }

    #[test]
    fn a_snapshot_never_changes_and_shares_untouched_shards() {
        let mut s = ActiveSet::default();
        for i in 0..10_000 {
            s.merge(f("c", &format!("m{i}"), Severity::Warning, i), true);
        }
        let before = s.snapshot();
        let v = before.version();
        s.merge(f("c", "m5", Severity::Critical, 99_999), true);
        s.merge(f("c", "new", Severity::High, 99_999), true);
        s.remove([("c", "m7")]);
        // The old snapshot still shows the old state.
        assert_eq!(before.version(), v);
        assert_eq!(before.len(), 10_000);
        assert_eq!(before.get("c", "m5").unwrap().severity, Severity::Warning);
        assert!(before.get("c", "new").is_none());
        assert!(before.get("c", "m7").is_some());
        assert_eq!(before.severity_counts(), (0, 0, 10_000));
        // The new one shows the new state.
        let after = s.snapshot();
        assert!(after.version() > v);
        assert_eq!(after.len(), 10_000);
        assert_eq!(after.get("c", "m5").unwrap().count, 2);
        assert_eq!(after.severity_counts(), (1, 1, 9_998));
        // Only the touched shards were copied.
        let shared = before
            .groups
            .iter()
            .flat_map(|g| g.iter())
            .zip(after.groups.iter().flat_map(|g| g.iter()))
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count();
        assert!(shared >= GROUPS * PER_GROUP - 3, "{shared}");
    }

    #[test]
    fn pages_follow_the_listing_order() {
        let mut s = ActiveSet::default();
        for i in 0..500i64 {
            let sev = Severity::from_level((i % 3) as u8).unwrap();
            s.merge(f("c", &format!("m{i:03}"), sev, i % 17), true);
        }
        let snap = s.snapshot();
        let all = snap.sorted();
        assert_eq!(all.len(), 500);
        assert!(all.windows(2).all(|w| listing_order(&w[0], &w[1]).is_lt()));
        for (offset, limit) in [(0, 10), (10, 10), (495, 10), (500, 1), (0, 1000), (123, 77)] {
            let page: Vec<Finding> = snap.page(offset, limit).into_iter().cloned().collect();
            let want: Vec<Finding> = all.iter().skip(offset).take(limit).cloned().collect();
            assert_eq!(page, want, "{offset} {limit}");
        }
    }

    #[test]
    fn eviction_takes_the_least_recent_event_findings_first() {
        let mut s = ActiveSet::default();
        s.merge(f("cond", "c1", Severity::High, 1), false);
        for i in 0..5 {
            s.merge(f("ev", &format!("e{i}"), Severity::High, 1), true);
        }
        // e0 dispatched again: now the most recent.
        s.merge(f("ev", "e0", Severity::High, 2), true);
        assert_eq!(keys(&s.evict_over(4)), ["e1", "e2"]);
        assert_eq!(s.len(), 4);
        assert!(s.get("ev", "e0").is_some());
        // Condition findings leave only when no event finding is left.
        assert_eq!(keys(&s.evict_over(1)), ["e0", "e3", "e4"]);
        assert!(s.get("cond", "c1").is_some());
        assert_eq!(keys(&s.evict_over(0)), ["c1"]);
        assert!(s.is_empty());
        assert_eq!(*s.counts(), Counts::default());
    }

    #[test]
    fn recency_queues_stay_small_under_repeats() {
        let mut s = ActiveSet::default();
        for i in 0..100_000 {
            s.merge(f("ev", &format!("e{}", i % 10), Severity::High, i), true);
        }
        assert!(
            s.recency[1].len() <= 2 * 10 + 1024 + 1,
            "{}",
            s.recency[1].len()
        );
        assert_eq!(keys(&s.evict_over(9)), ["e0"]);
    }

    #[test]
    fn classify_orders_loaded_findings_by_last_seen() {
        let mut loaded = Vec::new();
        for (i, t) in [(0, 30), (1, 10), (2, 20)] {
            loaded.push((*f("ev", &format!("e{i}"), Severity::High, t)).clone());
        }
        loaded.push((*f("cond", "c", Severity::High, 5)).clone());
        let mut s = ActiveSet::load(loaded);
        s.classify(|c| c != "cond");
        assert_eq!(s.is_event("cond", "c"), Some(false));
        assert_eq!(keys(&s.evict_over(2)), ["e1", "e2"]);
    }
}
