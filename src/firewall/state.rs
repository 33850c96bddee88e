//! The engine's memory of its store rows: blocks, dry-run records and allow entries, keyed
//! by address or range, with lookups by containment.
//!
//! Guarantees:
//! - Memory mirrors the store: the engine changes both under one operation lock, store
//!   first.
//! - An entry whose expiry has passed is invisible to every lookup, even before the purge
//!   removes it.
//! - Lookups by containment cost one hash lookup per prefix length in use, not a scan.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use jiff::Timestamp;

use super::net::Net;

/// Expiry of a permanent entry.
pub const PERMANENT: i64 = i64::MAX;

/// One block, dry-run record or allow entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Microseconds since the epoch.
    pub created: i64,
    /// Microseconds since the epoch; [`PERMANENT`] for none.
    pub expires: i64,
    pub reason: Arc<str>,
    pub source: Arc<str>,
    pub by: Arc<str>,
}

impl Entry {
    pub fn permanent(&self) -> bool {
        self.expires == PERMANENT
    }

    pub fn active(&self, now: i64) -> bool {
        self.expires > now
    }

    pub fn created_at(&self) -> Timestamp {
        Timestamp::from_microsecond(self.created).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    pub fn expires_at(&self) -> Option<Timestamp> {
        (!self.permanent())
            .then(|| Timestamp::from_microsecond(self.expires).unwrap_or(Timestamp::UNIX_EPOCH))
    }

    /// The store row of this entry.
    pub fn row(&self, net: &Net) -> crate::store::firewall::Row {
        crate::store::firewall::Row {
            ip: net.to_string(),
            reason: self.reason.to_string(),
            source: self.source.to_string(),
            created_by: self.by.to_string(),
            created: self.created,
            expires: (!self.permanent()).then_some(self.expires),
        }
    }
}

/// Entries by address or range.
#[derive(Default)]
pub struct NetMap {
    map: HashMap<Net, Entry>,
    /// Entries per prefix length: [0..=32] IPv4, [33..=161] IPv6 (offset 33).
    prefixes: Vec<u32>,
}

fn slot(n: &Net) -> usize {
    if n.is_v4() {
        n.prefix() as usize
    } else {
        33 + n.prefix() as usize
    }
}

impl NetMap {
    pub fn new() -> NetMap {
        NetMap {
            map: HashMap::new(),
            prefixes: vec![0; 33 + 129],
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn insert(&mut self, net: Net, e: Entry) {
        if self.map.insert(net, e).is_none() {
            self.prefixes[slot(&net)] += 1;
        }
    }

    pub fn remove(&mut self, net: &Net) -> Option<Entry> {
        let e = self.map.remove(net);
        if e.is_some() {
            self.prefixes[slot(net)] -= 1;
        }
        e
    }

    /// The active entry of exactly `net`.
    pub fn get(&self, net: &Net, now: i64) -> Option<&Entry> {
        self.map.get(net).filter(|e| e.active(now))
    }

    /// The active entry with the longest prefix that contains `ip`.
    pub fn containing(&self, ip: IpAddr, now: i64) -> Option<(Net, &Entry)> {
        let ip = ip.to_canonical();
        let (base, width) = if ip.is_ipv4() { (0, 32u8) } else { (33, 128u8) };
        for p in (0..=width).rev() {
            if self.prefixes[base + p as usize] == 0 {
                continue;
            }
            let n = Net::covering(ip, p);
            if let Some(e) = self.get(&n, now) {
                return Some((n, e));
            }
        }
        None
    }

    /// An active entry that shares an address with `net` (containing it, or inside it).
    pub fn overlapping(&self, net: &Net, now: i64) -> Option<(Net, &Entry)> {
        if let Some(found) = self.containing_net(net, now) {
            return Some(found);
        }
        if net.is_host() {
            // Nothing but the address itself lies inside it; containing_net checked that.
            return None;
        }
        self.map
            .iter()
            .find(|(n, e)| e.active(now) && net.contains(n))
            .map(|(n, e)| (*n, e))
    }

    /// The active entry with the longest prefix that contains all of `net`.
    pub fn containing_net(&self, net: &Net, now: i64) -> Option<(Net, &Entry)> {
        let base = if net.is_v4() { 0 } else { 33 };
        for p in (0..=net.prefix()).rev() {
            if self.prefixes[base + p as usize] == 0 {
                continue;
            }
            let n = Net::covering(net.addr(), p);
            if let Some(e) = self.get(&n, now) {
                return Some((n, e));
            }
        }
        None
    }

    /// Active entries inside `net` (including `net` itself).
    pub fn inside(&self, net: &Net, now: i64) -> Vec<Net> {
        if net.is_host() {
            return self.get(net, now).map(|_| vec![*net]).unwrap_or_default();
        }
        self.map
            .iter()
            .filter(|(n, e)| e.active(now) && net.contains(n))
            .map(|(n, _)| *n)
            .collect()
    }

    /// Every entry, active or not.
    pub fn iter(&self) -> impl Iterator<Item = (&Net, &Entry)> {
        self.map.iter()
    }

    /// Active entries.
    pub fn active(&self, now: i64) -> impl Iterator<Item = (&Net, &Entry)> {
        self.map.iter().filter(move |(_, e)| e.active(now))
    }

    /// Removes entries whose expiry passed; returns their keys.
    pub fn purge(&mut self, now: i64) -> Vec<Net> {
        let gone: Vec<Net> = self
            .map
            .iter()
            .filter(|(_, e)| !e.active(now))
            .map(|(n, _)| *n)
            .collect();
        for n in &gone {
            self.remove(n);
        }
        gone
    }

    /// Bytes the map holds (table and entries, not shared strings).
    pub fn heap_bytes(&self) -> usize {
        self.map.capacity() * (std::mem::size_of::<(Net, Entry)>() + 1)
    }
}

/// Shares equal strings (reasons, sources, actor names) between entries, bounded.
#[derive(Default)]
pub struct Interner {
    set: HashSet<Arc<str>>,
}

/// Distinct strings shared at most; beyond it each entry keeps its own copy.
const INTERN_MAX: usize = 4096;

impl Interner {
    pub fn get(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.set.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        if self.set.len() < INTERN_MAX {
            self.set.insert(a.clone());
        }
        a
    }
}

/// Blocks (addresses and subnets), dry-run records and allow entries.
pub struct Tables {
    /// Address blocks (keys are single addresses).
    pub blocks: NetMap,
    /// Subnet blocks.
    pub subnets: NetMap,
    /// Blocks automatic callers recorded in dry-run mode.
    pub dry: NetMap,
    /// The allow list (addresses and ranges).
    pub allows: NetMap,
    pub strings: Interner,
}

impl Default for Tables {
    fn default() -> Self {
        Tables {
            blocks: NetMap::new(),
            subnets: NetMap::new(),
            dry: NetMap::new(),
            allows: NetMap::new(),
            strings: Interner::default(),
        }
    }
}

impl Tables {
    /// Blocks that count against `firewall.max_blocks`.
    pub fn block_count(&self) -> usize {
        self.blocks.len() + self.subnets.len()
    }

    /// The active block that drops `ip`: its address block, else a subnet containing it.
    pub fn block_for(&self, ip: IpAddr, now: i64) -> Option<(Net, &Entry)> {
        let host = Net::host(ip);
        if let Some(e) = self.blocks.get(&host, now) {
            return Some((host, e));
        }
        self.subnets.containing(ip, now)
    }

    /// An entry built with shared strings.
    pub fn entry(
        &mut self,
        created: i64,
        expires: i64,
        reason: &str,
        source: &str,
        by: &str,
    ) -> Entry {
        Entry {
            created,
            expires,
            reason: self.strings.get(reason),
            source: self.strings.get(source),
            by: self.strings.get(by),
        }
    }

    /// Approximate bytes held per tracked entry, for the benchmark.
    pub fn heap_bytes(&self) -> usize {
        self.blocks.heap_bytes()
            + self.subnets.heap_bytes()
            + self.dry.heap_bytes()
            + self.allows.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(t: &mut Tables, expires: i64) -> Entry {
        t.entry(1, expires, "r", "operator", "ops")
    }

    fn n(s: &str) -> Net {
        Net::parse(s).unwrap()
    }

    #[test]
    fn containment_finds_the_longest_prefix_and_ignores_expired() {
        let mut t = Tables::default();
        let a = e(&mut t, PERMANENT);
        let b = e(&mut t, 100);
        t.subnets.insert(n("198.51.100.0/24"), a.clone());
        t.subnets.insert(n("198.51.100.128/25"), b);
        let ip: IpAddr = "198.51.100.200".parse().unwrap();
        assert_eq!(
            t.subnets.containing(ip, 50).unwrap().0,
            n("198.51.100.128/25")
        );
        assert_eq!(
            t.subnets.containing(ip, 150).unwrap().0,
            n("198.51.100.0/24")
        );
        assert!(t
            .subnets
            .containing("2001:db8::1".parse().unwrap(), 0)
            .is_none());
        let (o, _) = t.subnets.overlapping(&n("198.51.100.0/23"), 0).unwrap();
        assert!(n("198.51.100.0/23").contains(&o));
        assert_eq!(t.subnets.overlapping(&n("198.51.100.7"), 0).unwrap().1, &a);
        assert_eq!(t.subnets.purge(150), vec![n("198.51.100.128/25")]);
        assert_eq!(t.subnets.len(), 1);
        assert_eq!(
            t.subnets.inside(&n("198.51.0.0/16"), 0),
            vec![n("198.51.100.0/24")]
        );
        let p = e(&mut t, PERMANENT);
        t.blocks.insert(n("192.0.2.7"), p);
        assert_eq!(
            t.block_for("192.0.2.7".parse().unwrap(), 0).unwrap().0,
            n("192.0.2.7")
        );
        assert_eq!(
            t.block_for("::ffff:198.51.100.9".parse().unwrap(), 0)
                .unwrap()
                .0,
            n("198.51.100.0/24")
        );
        assert_eq!(t.block_count(), 2);
    }

    #[test]
    fn strings_are_shared() {
        let mut t = Tables::default();
        let a = e(&mut t, 1);
        let b = e(&mut t, 2);
        assert!(Arc::ptr_eq(&a.reason, &b.reason));
        assert_eq!(a.row(&n("192.0.2.1")).expires, Some(1));
        assert_eq!(e(&mut t, PERMANENT).row(&n("192.0.2.1")).expires, None);
    }
}
