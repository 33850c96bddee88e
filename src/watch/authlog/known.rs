//! Addresses each user has logged in from, with a hard cap on remembered pairs.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;

use crate::text::prefix_within;

/// Longest user name kept (bytes, cut at a character boundary).
pub(crate) const MAX_USER_BYTES: usize = 128;

/// What [`KnownLogins::observe`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The user had logged in from this address before.
    Known,
    /// The user was unknown: the address becomes its baseline, nothing to report.
    Baseline,
    /// The user is known, the address is not. Carries how many addresses it had.
    New(usize),
}

pub(crate) struct KnownLogins {
    users: HashMap<Box<str>, HashSet<IpAddr>>,
    order: VecDeque<(Box<str>, IpAddr)>,
    cap: usize,
    evicted: u64,
}

impl KnownLogins {
    pub(crate) fn new(cap: usize) -> Self {
        KnownLogins {
            users: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
            evicted: 0,
        }
    }

    /// Changes the cap (configuration reload); a lower cap forgets the oldest pairs on the
    /// next new pair.
    pub(crate) fn set_cap(&mut self, cap: usize) {
        self.cap = cap.max(1);
    }

    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    pub(crate) fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Records a successful login and says whether the address was new for the user.
    pub(crate) fn observe(&mut self, user: &str, ip: IpAddr) -> Seen {
        let user = prefix_within(user, MAX_USER_BYTES);
        let seen = match self.users.get_mut(user) {
            Some(set) if set.contains(&ip) => return Seen::Known,
            Some(set) => {
                let n = set.len();
                set.insert(ip);
                Seen::New(n)
            }
            None => {
                let mut set = HashSet::new();
                set.insert(ip);
                self.users.insert(user.into(), set);
                Seen::Baseline
            }
        };
        self.order.push_back((user.into(), ip));
        while self.order.len() > self.cap {
            let Some((u, old)) = self.order.pop_front() else {
                break;
            };
            self.evicted += 1;
            if let Some(set) = self.users.get_mut(&u) {
                set.remove(&old);
                if set.is_empty() {
                    self.users.remove(&u);
                }
            }
        }
        seen
    }

    /// Every remembered (user, address) pair, oldest first (for persistence by the caller).
    pub(crate) fn snapshot(&self) -> Vec<(String, IpAddr)> {
        self.order
            .iter()
            .map(|(u, ip)| (u.to_string(), *ip))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn baseline_then_known_then_new() {
        let mut k = KnownLogins::new(10);
        assert_eq!(k.observe("deploy", ip("192.0.2.1")), Seen::Baseline);
        assert_eq!(k.observe("deploy", ip("192.0.2.1")), Seen::Known);
        assert_eq!(k.observe("deploy", ip("192.0.2.2")), Seen::New(1));
        assert_eq!(k.observe("other", ip("192.0.2.2")), Seen::Baseline);
        assert_eq!(k.len(), 3);
    }

    #[test]
    fn cap_forgets_oldest_pairs_and_counts() {
        let mut k = KnownLogins::new(2);
        k.observe("a", ip("192.0.2.1"));
        k.observe("a", ip("192.0.2.2"));
        k.observe("a", ip("192.0.2.3"));
        assert_eq!((k.len(), k.evicted()), (2, 1));
        assert_eq!(k.observe("a", ip("192.0.2.1")), Seen::New(2));
        k.observe("b", ip("192.0.2.9"));
        k.observe("c", ip("192.0.2.9"));
        assert!(k.users.len() <= 2);
        assert_eq!(k.snapshot().len(), 2);
    }

    #[test]
    fn long_user_names_are_cut_at_char_boundary() {
        let long = "é".repeat(200);
        let mut k = KnownLogins::new(4);
        k.observe(&long, ip("192.0.2.1"));
        assert_eq!(k.observe(&long, ip("192.0.2.1")), Seen::Known);
    }
}
