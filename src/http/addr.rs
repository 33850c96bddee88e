//! Open connections per client address (IPv4 per address, IPv6 per /64).
//!
//! Bounded by construction: a key exists only while it has an open connection, so the table
//! never holds more keys than `max_connections`.

use std::collections::HashMap;
use std::net::IpAddr;

/// The unit a per-address limit counts: one IPv4 address, or one IPv6 /64 (a single host
/// commonly owns a whole /64). IPv4-mapped IPv6 addresses count as their IPv4 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddrKey {
    V4(u32),
    V6(u64),
}

impl AddrKey {
    pub fn of(ip: IpAddr) -> AddrKey {
        match ip {
            IpAddr::V4(a) => AddrKey::V4(u32::from(a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => AddrKey::V4(u32::from(v4)),
                None => AddrKey::V6((u128::from(a) >> 64) as u64),
            },
        }
    }
}

/// Open connections by [`AddrKey`].
#[derive(Default, Debug)]
pub struct PerAddress {
    counts: HashMap<AddrKey, u32>,
}

impl PerAddress {
    /// Counts one more connection for `key` unless it already has `max`; false when over.
    pub fn try_add(&mut self, key: AddrKey, max: usize) -> bool {
        let n = self.counts.entry(key).or_insert(0);
        if usize::try_from(*n).unwrap_or(usize::MAX) >= max {
            if *n == 0 {
                self.counts.remove(&key);
            }
            return false;
        }
        *n += 1;
        true
    }

    /// One connection of `key` closed.
    pub fn remove(&mut self, key: AddrKey) {
        if let Some(n) = self.counts.get_mut(&key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.counts.remove(&key);
            }
        }
    }

    #[cfg(test)]
    pub fn get(&self, key: AddrKey) -> u32 {
        self.counts.get(&key).copied().unwrap_or(0)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        let a = AddrKey::of("2001:db8:1:2::1".parse().unwrap());
        let b = AddrKey::of("2001:db8:1:2:ffff::9".parse().unwrap());
        let c = AddrKey::of("2001:db8:1:3::1".parse().unwrap());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(
            AddrKey::of("::ffff:192.0.2.7".parse().unwrap()),
            AddrKey::of("192.0.2.7".parse().unwrap())
        );
        assert_ne!(
            AddrKey::of("192.0.2.7".parse().unwrap()),
            AddrKey::of("192.0.2.8".parse().unwrap())
        );
    }

    #[test]
    fn limit_per_key_and_keys_leave_when_closed() {
        let mut t = PerAddress::default();
        let k = AddrKey::of("198.51.100.1".parse().unwrap());
        let other = AddrKey::of("198.51.100.2".parse().unwrap());
        for _ in 0..3 {
            assert!(t.try_add(k, 3));
        }
        assert!(!t.try_add(k, 3));
        assert!(t.try_add(other, 3));
        assert_eq!(t.get(k), 3);
        for _ in 0..3 {
            t.remove(k);
        }
        t.remove(other);
        assert!(t.is_empty());
        assert!(!t.try_add(k, 0));
        assert!(t.is_empty(), "a refused key leaves no entry");
    }
}
