//! [`Names`]: the checks and the accounts of one incident in one allocation.
//!
//! Incidents are kept for up to [`super::MAX_INCIDENTS`] addresses at once, each with a
//! handful of checks and accounts. A `Vec<Box<str>>` per set costs one allocation per name
//! plus the vector's own; this packs both sets as length-prefixed bytes in one boxed slice
//! that grows by exactly the name added (a set changes a few times per incident, so the
//! copy on each addition is cheap). Names are kept whole, whatever their length.

use std::cmp::Ordering;

/// One of the two sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Set {
    Checks,
    Accounts,
}

/// Two sets of names, each sorted (by bytes, as `str` orders) and without repeats.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Names {
    /// The byte length of the checks section, then the checks section, then the accounts
    /// section; a section is its names in order, each as its byte length followed by its
    /// UTF-8 bytes. Lengths are LEB128. Empty when both sets are.
    packed: Box<[u8]>,
}

/// Bytes `n` takes as LEB128.
fn len_of_len(mut n: usize) -> usize {
    let mut bytes = 1;
    while n >= 0x80 {
        n >>= 7;
        bytes += 1;
    }
    bytes
}

fn put_len(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        // Low seven bits with the continuation bit; the cast keeps exactly those bits.
        out.push((n & 0x7f) as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A LEB128 length and the bytes after it.
fn split_len(bytes: &[u8]) -> Option<(usize, &[u8])> {
    let mut n = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        let shift = u32::try_from(7 * i).ok()?;
        n |= usize::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some((n, &bytes[i + 1..]));
        }
    }
    None
}

/// The first name of a section and the rest of it.
fn split_name(section: &[u8]) -> Option<(&[u8], &[u8])> {
    let (n, rest) = split_len(section)?;
    rest.split_at_checked(n)
}

fn names_in(section: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = section;
    std::iter::from_fn(move || {
        let (name, tail) = split_name(rest)?;
        rest = tail;
        Some(name)
    })
}

impl Names {
    /// The checks section and the accounts section.
    fn sections(&self) -> (&[u8], &[u8]) {
        split_len(&self.packed)
            .and_then(|(n, rest)| rest.split_at_checked(n))
            .unwrap_or_default()
    }

    fn section(&self, set: Set) -> &[u8] {
        let (checks, accounts) = self.sections();
        match set {
            Set::Checks => checks,
            Set::Accounts => accounts,
        }
    }

    /// Adds `name` to `set` in its sorted place; false when it is there already.
    pub(super) fn insert(&mut self, set: Set, name: &str) -> bool {
        let name = name.as_bytes();
        let section = self.section(set);
        let mut at = section.len();
        let mut rest = section;
        while let Some((n, tail)) = split_name(rest) {
            match n.cmp(name) {
                Ordering::Equal => return false,
                Ordering::Greater => {
                    at = section.len() - rest.len();
                    break;
                }
                Ordering::Less => rest = tail,
            }
        }
        let entry = len_of_len(name.len()) + name.len();
        let (checks, accounts) = self.sections();
        let checks_len = checks.len() + if set == Set::Checks { entry } else { 0 };
        let mut out =
            Vec::with_capacity(len_of_len(checks_len) + checks.len() + accounts.len() + entry);
        put_len(&mut out, checks_len);
        let (before, after) = section.split_at(at);
        if set == Set::Accounts {
            out.extend_from_slice(checks);
        }
        out.extend_from_slice(before);
        put_len(&mut out, name.len());
        out.extend_from_slice(name);
        out.extend_from_slice(after);
        if set == Set::Checks {
            out.extend_from_slice(accounts);
        }
        self.packed = out.into_boxed_slice();
        true
    }

    pub(super) fn len(&self, set: Set) -> usize {
        names_in(self.section(set)).count()
    }

    /// The names of `set` in order.
    pub(super) fn iter(&self, set: Set) -> impl Iterator<Item = &str> {
        // Only whole `&str`s are packed.
        names_in(self.section(set)).filter_map(|n| std::str::from_utf8(n).ok())
    }

    pub(super) fn to_vec(&self, set: Set) -> Vec<String> {
        self.iter(set).map(str::to_string).collect()
    }

    /// Both sets from lists in any order, with repeats.
    pub(super) fn from_lists(checks: Vec<String>, accounts: Vec<String>) -> Names {
        let mut names = Names::default();
        for c in &checks {
            names.insert(Set::Checks, c);
        }
        for a in &accounts {
            names.insert(Set::Accounts, a);
        }
        names
    }

    /// Bytes allocated for the names.
    #[cfg(test)]
    pub(super) fn heap_bytes(&self) -> usize {
        self.packed.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_are_sorted_without_repeats_and_kept_apart() {
        let mut n = Names::default();
        assert_eq!((n.len(Set::Checks), n.len(Set::Accounts)), (0, 0));
        assert!(n.insert(Set::Checks, "ssh_bruteforce"));
        assert!(n.insert(Set::Accounts, "root"));
        assert!(n.insert(Set::Checks, "pam_bruteforce"));
        assert!(n.insert(Set::Accounts, "admin"));
        assert!(n.insert(Set::Checks, "x"));
        assert!(n.insert(Set::Accounts, ""));
        assert!(!n.insert(Set::Checks, "ssh_bruteforce"));
        assert!(!n.insert(Set::Accounts, "root"));
        assert!(
            n.insert(Set::Accounts, "ssh_bruteforce"),
            "the sets are apart"
        );
        assert_eq!(
            n.to_vec(Set::Checks),
            ["pam_bruteforce", "ssh_bruteforce", "x"]
        );
        assert_eq!(
            n.to_vec(Set::Accounts),
            ["", "admin", "root", "ssh_bruteforce"]
        );
        assert_eq!((n.len(Set::Checks), n.len(Set::Accounts)), (3, 4));
        // One allocation of exactly the packed bytes.
        assert_eq!(n.heap_bytes(), 1 + (15 + 15 + 2) + (1 + 6 + 5 + 15));
    }

    #[test]
    fn order_is_the_order_of_str() {
        let words = ["é", "z", "Z", "a", "ab", "aa", "", "ä", "a\u{0}"];
        let n = Names::from_lists(words.map(String::from).to_vec(), Vec::new());
        let mut want = words.map(String::from).to_vec();
        want.sort();
        assert_eq!(n.to_vec(Set::Checks), want);
        assert!(n.to_vec(Set::Accounts).is_empty());
    }

    #[test]
    fn long_names_are_kept_whole() {
        let long = "é".repeat(20_000); // 40,000 bytes: a three-byte length
        let mut n = Names::default();
        n.insert(Set::Checks, "c");
        n.insert(Set::Accounts, &long);
        n.insert(Set::Checks, &long);
        n.insert(Set::Accounts, "b");
        assert_eq!(n.to_vec(Set::Checks), ["c".to_string(), long.clone()]);
        assert_eq!(n.to_vec(Set::Accounts), ["b".to_string(), long.clone()]);
        assert!(!n.insert(Set::Checks, &long));
    }

    #[test]
    fn lengths_round_trip() {
        for v in [0, 1, 0x7f, 0x80, 0x3fff, 0x4000, usize::MAX] {
            let mut out = Vec::new();
            put_len(&mut out, v);
            assert_eq!(out.len(), len_of_len(v));
            out.push(9);
            assert_eq!(split_len(&out), Some((v, &[9u8][..])));
        }
        assert_eq!(split_len(&[0x80]), None, "cut short");
    }
}
