//! A map from address to state with a hard size cap.
//!
//! Eviction is CLOCK (second chance): entries sit in insertion order; at the cap the oldest
//! is evicted unless it was touched since it was last passed over and is still live, in
//! which case it moves to the back once. Entries that are no longer live (their window
//! expired) are dropped first and are not counted as evictions: only live state lost to
//! the cap is counted.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv6Addr};

/// How many second chances one insertion may hand out before evicting regardless.
const MAX_SECOND_CHANCES: usize = 32;
/// In an index value: touched since last passed over. The other bits are the slot id.
const REFERENCED: u32 = 1 << 31;
/// The largest cap: slot ids must stay below [`REFERENCED`].
const MAX_CAP: usize = 1 << 31;

/// Address -> slot id (with [`REFERENCED`]). IPv4 keys take 4 bytes instead of `IpAddr`'s
/// 17, so a bucket is 8 bytes; a lookup hashes the address once.
#[derive(Default)]
struct Index {
    v4: HashMap<u32, u32>,
    v6: HashMap<Ipv6Addr, u32>,
}

impl Index {
    fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    fn get_mut(&mut self, ip: &IpAddr) -> Option<&mut u32> {
        match ip {
            IpAddr::V4(a) => self.v4.get_mut(&u32::from(*a)),
            IpAddr::V6(a) => self.v6.get_mut(a),
        }
    }

    fn get(&self, ip: &IpAddr) -> Option<u32> {
        match ip {
            IpAddr::V4(a) => self.v4.get(&u32::from(*a)).copied(),
            IpAddr::V6(a) => self.v6.get(a).copied(),
        }
    }

    fn contains(&self, ip: &IpAddr) -> bool {
        self.get(ip).is_some()
    }

    fn insert(&mut self, ip: IpAddr, value: u32) {
        match ip {
            IpAddr::V4(a) => self.v4.insert(u32::from(a), value),
            IpAddr::V6(a) => self.v6.insert(a, value),
        };
    }

    fn remove(&mut self, ip: &IpAddr) {
        match ip {
            IpAddr::V4(a) => self.v4.remove(&u32::from(*a)),
            IpAddr::V6(a) => self.v6.remove(a),
        };
    }

    fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        self.v4.retain(|_, v| keep(*v));
        self.v6.retain(|_, v| keep(*v));
    }

    fn clear(&mut self) {
        self.v4.clear();
        self.v6.clear();
    }
}

/// The values live in a slab (`slots`, reused through `free`) that grows by half rather
/// than doubling; the hash index holds only slot ids, and the CLOCK queue holds each address
/// once (17 bytes), which is all eviction needs to find the index entry.
pub(crate) struct AddrTable<V> {
    index: Index,
    slots: Vec<Option<V>>,
    free: Vec<u32>,
    order: VecDeque<IpAddr>,
    cap: usize,
    evicted: u64,
}

impl<V> AddrTable<V> {
    /// A table of at most `cap` entries (forced into 1..=2^31).
    pub(crate) fn new(cap: usize) -> Self {
        AddrTable {
            index: Index::default(),
            slots: Vec::new(),
            free: Vec::new(),
            order: VecDeque::new(),
            cap: cap.clamp(1, MAX_CAP),
            evicted: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Changes the cap (configuration reload); a lower cap evicts down to it on the next
    /// insertion.
    pub(crate) fn set_cap(&mut self, cap: usize) {
        self.cap = cap.clamp(1, MAX_CAP);
    }

    /// Live entries evicted because of the cap, since creation.
    pub(crate) fn evicted(&self) -> u64 {
        self.evicted
    }

    /// The entry for `ip`, created with `make` if absent (evicting at the cap).
    pub(crate) fn get_or_insert_with(
        &mut self,
        ip: IpAddr,
        make: impl FnOnce() -> V,
        is_live: impl Fn(&V) -> bool,
    ) -> &mut V {
        let id = match self.index.get_mut(&ip) {
            Some(v) => {
                *v |= REFERENCED;
                *v & !REFERENCED
            }
            None => {
                self.drop_dead_front(&is_live);
                self.make_room(&is_live);
                let id = self.take_slot();
                self.index.insert(ip, id);
                if self.order.len() == self.order.capacity() {
                    self.order.reserve_exact(growth(self.order.len(), self.cap));
                }
                self.order.push_back(ip);
                id
            }
        };
        // Filled here for a new entry: `make` runs only then.
        self.slots[slot_index(id)].get_or_insert_with(make)
    }

    /// Drops every entry that is no longer live.
    pub(crate) fn purge(&mut self, is_live: impl Fn(&V) -> bool) {
        let (slots, free) = (&mut self.slots, &mut self.free);
        self.index.retain(|v| {
            let id = v & !REFERENCED;
            let slot = &mut slots[slot_index(id)];
            let keep = slot.as_ref().is_some_and(&is_live);
            if !keep {
                *slot = None;
                free.push(id);
            }
            keep
        });
        let index = &self.index;
        self.order.retain(|ip| index.contains(ip));
    }

    /// A free slot id (the slot is `None`).
    fn take_slot(&mut self) -> u32 {
        if let Some(id) = self.free.pop() {
            return id;
        }
        if self.slots.len() == self.slots.capacity() {
            self.slots.reserve_exact(growth(self.slots.len(), self.cap));
        }
        // Below MAX_CAP: the index holds fewer than `cap` entries and every slot is in use.
        let id = u32::try_from(self.slots.len()).unwrap_or(REFERENCED - 1);
        self.slots.push(None);
        id
    }

    /// Removes the entry for `ip` in slot `id`.
    fn remove(&mut self, ip: &IpAddr, id: u32) {
        self.index.remove(ip);
        self.slots[slot_index(id)] = None;
        self.free.push(id);
    }

    fn is_live(&self, id: u32, is_live: &impl Fn(&V) -> bool) -> bool {
        self.slots[slot_index(id)].as_ref().is_some_and(is_live)
    }

    /// Cheap incremental clean-up: up to two dead entries at the front.
    fn drop_dead_front(&mut self, is_live: &impl Fn(&V) -> bool) {
        for _ in 0..2 {
            let Some(&ip) = self.order.front() else {
                return;
            };
            if let Some(v) = self.index.get(&ip) {
                let id = v & !REFERENCED;
                if self.is_live(id, is_live) {
                    return;
                }
                self.remove(&ip, id);
            }
            self.order.pop_front();
        }
    }

    fn make_room(&mut self, is_live: &impl Fn(&V) -> bool) {
        let mut chances = 0;
        while self.index.len() >= self.cap {
            let Some(ip) = self.order.pop_front() else {
                // Unreachable while index and order agree; never loop forever.
                self.index.clear();
                self.slots.clear();
                self.free.clear();
                return;
            };
            let Some(v) = self.index.get_mut(&ip) else {
                continue;
            };
            let id = *v & !REFERENCED;
            let live = self.slots[slot_index(id)].as_ref().is_some_and(is_live);
            if live && *v & REFERENCED != 0 && chances < MAX_SECOND_CHANCES {
                *v = id;
                chances += 1;
                self.order.push_back(ip);
                continue;
            }
            self.remove(&ip, id);
            if live {
                self.evicted += 1;
            }
        }
    }
}

fn slot_index(id: u32) -> usize {
    // u32 fits usize on every target std supports here (32 and 64 bits).
    id as usize
}

/// How much a full slab or queue of `len` grows: by half (at least 16), not past `cap`.
fn growth(len: usize, cap: usize) -> usize {
    (len / 2).max(16).min(cap.saturating_sub(len)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(n: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(n))
    }

    #[test]
    fn cap_is_enforced_and_live_evictions_counted() {
        let mut t: AddrTable<u32> = AddrTable::new(3);
        for n in 0..10 {
            *t.get_or_insert_with(ip(n), || 0, |_| true) += 1;
            assert!(t.len() <= 3);
        }
        assert_eq!(t.len(), 3);
        assert_eq!(t.evicted(), 7);
        assert!(t.order.len() <= 3);
    }

    #[test]
    fn touched_entries_get_a_second_chance() {
        let mut t: AddrTable<u32> = AddrTable::new(2);
        t.get_or_insert_with(ip(1), || 1, |_| true);
        t.get_or_insert_with(ip(2), || 2, |_| true);
        t.get_or_insert_with(ip(1), || 0, |_| true); // touch 1
        t.get_or_insert_with(ip(3), || 3, |_| true); // evicts 2, not 1
        assert!(t.index.contains(&ip(1)));
        assert!(!t.index.contains(&ip(2)));
    }

    #[test]
    fn dead_entries_go_first_and_are_not_counted() {
        let mut t: AddrTable<u32> = AddrTable::new(2);
        t.get_or_insert_with(ip(1), || 0, |v| *v > 0); // dead (0)
        t.get_or_insert_with(ip(2), || 5, |v| *v > 0);
        t.get_or_insert_with(ip(3), || 5, |v| *v > 0);
        assert_eq!(t.evicted(), 0);
        assert!(!t.index.contains(&ip(1)));
        t.purge(|v| *v > 5);
        assert_eq!((t.len(), t.order.len()), (0, 0));
    }

    #[test]
    fn slots_are_reused_and_families_kept_apart() {
        let mut t: AddrTable<u32> = AddrTable::new(4);
        let v6 = |n: u16| IpAddr::V6(std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, n));
        for n in 0..100u16 {
            *t.get_or_insert_with(ip(u32::from(n)), || 1, |_| true) += 1;
            *t.get_or_insert_with(v6(n), || 2, |_| true) += 1;
        }
        assert_eq!((t.len(), t.order.len(), t.evicted()), (4, 4, 196));
        assert!(t.slots.len() <= 4, "evicted slots are reused");
        // The same 32 bits as IPv4 and inside IPv6 are different addresses.
        let mut t: AddrTable<u32> = AddrTable::new(8);
        *t.get_or_insert_with(ip(1), || 10, |_| true) += 1;
        *t.get_or_insert_with(v6(1), || 20, |_| true) += 1;
        assert_eq!(*t.get_or_insert_with(ip(1), || 0, |_| true), 11);
        assert_eq!(*t.get_or_insert_with(v6(1), || 0, |_| true), 21);
        t.purge(|v| *v == 21);
        assert_eq!((t.len(), t.order.len(), t.free.len()), (1, 1, 1));
        assert_eq!(*t.get_or_insert_with(ip(7), || 5, |_| true), 5);
        assert_eq!(t.slots.len(), 2, "a purged slot is reused");
    }

    /// Bytes per address: `cargo test --lib authlog::table::tests::bytes_per_address -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn bytes_per_address() {
        eprintln!(
            "IpAddr {} (u32,u32) {} (Ipv6Addr,u32) {}",
            std::mem::size_of::<IpAddr>(),
            std::mem::size_of::<(u32, u32)>(),
            std::mem::size_of::<(std::net::Ipv6Addr, u32)>(),
        );
        let mut t: AddrTable<[u8; 64]> = AddrTable::new(65_536);
        for n in 0..6_000 {
            t.get_or_insert_with(ip(n), || [0; 64], |_| true);
        }
        eprintln!(
            "6000 addresses: index v4 capacity {}, slots capacity {} x {} B, order capacity {} x 17 B",
            t.index.v4.capacity(),
            t.slots.capacity(),
            std::mem::size_of::<Option<[u8; 64]>>(),
            t.order.capacity()
        );
    }
}
