//! A map from address to state with a hard size cap.
//!
//! Eviction is CLOCK (second chance): entries sit in insertion order; at the cap the oldest
//! is evicted unless it was touched since it was last passed over and is still live, in
//! which case it moves to the back once. Entries that are no longer live (their window
//! expired) are dropped first and are not counted as evictions: only live state lost to
//! the cap is counted.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

/// How many second chances one insertion may hand out before evicting regardless.
const MAX_SECOND_CHANCES: usize = 32;

struct Slot<V> {
    gen: u64,
    referenced: bool,
    value: V,
}

pub(crate) struct AddrTable<V> {
    map: HashMap<IpAddr, Slot<V>>,
    order: VecDeque<(IpAddr, u64)>,
    cap: usize,
    next_gen: u64,
    evicted: u64,
}

impl<V> AddrTable<V> {
    pub(crate) fn new(cap: usize) -> Self {
        AddrTable {
            map: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
            next_gen: 0,
            evicted: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Changes the cap (configuration reload); a lower cap evicts down to it on the next
    /// insertion.
    pub(crate) fn set_cap(&mut self, cap: usize) {
        self.cap = cap.max(1);
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
        let exists = self.map.contains_key(&ip);
        if !exists {
            self.drop_dead_front(&is_live);
            self.make_room(&is_live);
        }
        let gen = self.next_gen;
        let slot = match self.map.entry(ip) {
            Entry::Occupied(o) => {
                let s = o.into_mut();
                s.referenced = true;
                s
            }
            Entry::Vacant(v) => {
                self.next_gen = self.next_gen.wrapping_add(1);
                self.order.push_back((ip, gen));
                v.insert(Slot {
                    gen,
                    referenced: false,
                    value: make(),
                })
            }
        };
        &mut slot.value
    }

    /// Drops every entry that is no longer live.
    pub(crate) fn purge(&mut self, is_live: impl Fn(&V) -> bool) {
        self.map.retain(|_, s| is_live(&s.value));
        let map = &self.map;
        self.order
            .retain(|(ip, g)| map.get(ip).is_some_and(|s| s.gen == *g));
    }

    /// Cheap incremental clean-up: up to two dead or stale entries at the front.
    fn drop_dead_front(&mut self, is_live: &impl Fn(&V) -> bool) {
        for _ in 0..2 {
            let Some(&(ip, gen)) = self.order.front() else {
                return;
            };
            match self.map.get(&ip) {
                Some(s) if s.gen == gen && is_live(&s.value) => return,
                Some(s) if s.gen == gen => {
                    self.map.remove(&ip);
                }
                _ => {}
            }
            self.order.pop_front();
        }
    }

    fn make_room(&mut self, is_live: &impl Fn(&V) -> bool) {
        let mut chances = 0;
        while self.map.len() >= self.cap {
            let Some((ip, gen)) = self.order.pop_front() else {
                // Unreachable while map and order agree; never loop forever.
                self.map.clear();
                return;
            };
            let Some(slot) = self.map.get_mut(&ip) else {
                continue;
            };
            if slot.gen != gen {
                continue;
            }
            let live = is_live(&slot.value);
            if live && slot.referenced && chances < MAX_SECOND_CHANCES {
                slot.referenced = false;
                chances += 1;
                self.order.push_back((ip, gen));
                continue;
            }
            self.map.remove(&ip);
            if live {
                self.evicted += 1;
            }
        }
    }
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
        assert!(t.map.contains_key(&ip(1)));
        assert!(!t.map.contains_key(&ip(2)));
    }

    #[test]
    fn dead_entries_go_first_and_are_not_counted() {
        let mut t: AddrTable<u32> = AddrTable::new(2);
        t.get_or_insert_with(ip(1), || 0, |v| *v > 0); // dead (0)
        t.get_or_insert_with(ip(2), || 5, |v| *v > 0);
        t.get_or_insert_with(ip(3), || 5, |v| *v > 0);
        assert_eq!(t.evicted(), 0);
        assert!(!t.map.contains_key(&ip(1)));
        t.purge(|v| *v > 5);
        assert_eq!((t.len(), t.order.len()), (0, 0));
    }
}
