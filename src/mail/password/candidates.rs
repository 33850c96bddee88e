//! Candidates of the audit: account-derived ones first (user, domain, mailbox local part,
//! simple transformations, year suffixes), then the bundled list `rules/passwords/weak.txt`
//! (most common first).
//!
//! Guarantees: every candidate is at most 256 bytes without NUL (others are dropped and
//! counted by the caller through [`Candidates::dropped`]); account-derived candidates are
//! at most [`MAX_DERIVED`], deduplicated, in a fixed order.

use std::sync::LazyLock;

use sha2::{Digest, Sha256};

use super::verify::acceptable;

/// The bundled list, compiled in.
pub const WEAK_LIST: &str = include_str!("../../../rules/passwords/weak.txt");
/// Account-derived candidates per mailbox, at most.
pub const MAX_DERIVED: usize = 512;

static WEAK: LazyLock<Vec<&'static [u8]>> = LazyLock::new(|| {
    WEAK_LIST
        .lines()
        .filter(|l| !l.starts_with("#!comment:") && !l.is_empty())
        .map(str::as_bytes)
        .filter(|l| acceptable(l))
        .collect()
});

/// The bundled list's entries.
pub fn weak_list() -> &'static [&'static [u8]] {
    &WEAK
}

/// SHA-256 of the bundled list (hex), part of the audit version.
pub fn weak_list_digest() -> String {
    static D: LazyLock<String> =
        LazyLock::new(|| hex::encode(Sha256::digest(WEAK_LIST.as_bytes())));
    D.clone()
}

/// The candidates of one mailbox.
pub struct Candidates {
    derived: Vec<Vec<u8>>,
    /// Entries of the bundled list tried (all, or the first N for slow schemes).
    list_len: usize,
    dropped: u64,
}

impl Candidates {
    /// Candidates for `mailbox` (`local@domain` or a bare user) owned by `account`, with
    /// year suffixes around `year`, and the first `list_limit` entries of the bundled list.
    pub fn new(mailbox: &str, account: Option<&str>, year: i16, list_limit: usize) -> Candidates {
        let (derived, dropped) = derive(mailbox, account, year);
        Candidates {
            derived,
            list_len: list_limit.min(weak_list().len()),
            dropped,
        }
    }

    /// Number of candidates.
    pub fn len(&self) -> usize {
        self.derived.len() + self.list_len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Candidate `i` (derived first, then the list).
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        match self.derived.get(i) {
            Some(c) => Some(c),
            None => {
                let j = i - self.derived.len();
                if j < self.list_len {
                    weak_list().get(j).copied()
                } else {
                    None
                }
            }
        }
    }

    /// Derived candidates dropped for length or NUL.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// Suffixes tried on every derived word first (the commonest shapes).
const SHORT_SUFFIXES: &[&str] = &["", "1", "123", "!", "12", "1234", "12345", "123456"];
/// Suffixes tried after the year suffixes, while room is left.
const MORE_SUFFIXES: &[&str] = &[
    "1!", "123!", "@", "@123", "01", "2", "11", "00", "#", ".", "_", "69", "007", "2000",
];

/// Derived candidates in three tiers, so the cap never starves the likelier shapes:
/// every word with a short suffix; the primary words (local part, domain label, account,
/// as written, lower-case and capitalised) with year suffixes; then the other suffixes.
fn derive(mailbox: &str, account: Option<&str>, year: i16) -> (Vec<Vec<u8>>, u64) {
    let (local, domain) = match mailbox.rsplit_once('@') {
        Some((l, d)) => (l, d),
        None => (mailbox, ""),
    };
    let label = domain.split('.').next().unwrap_or("");
    let mut bases: Vec<String> = Vec::new();
    for b in [local, label, domain, account.unwrap_or(""), mailbox] {
        if !b.is_empty() && !bases.iter().any(|x| x == b) {
            bases.push(b.to_string());
        }
    }
    if !local.is_empty() && !label.is_empty() {
        bases.push(format!("{local}{label}"));
        bases.push(format!("{local}@{label}"));
    }
    let variants = |b: &str| -> [String; 5] {
        let lower = b.to_lowercase();
        let mut cap = String::new();
        let mut chars = lower.chars();
        if let Some(c) = chars.next() {
            cap.extend(c.to_uppercase());
            cap.push_str(chars.as_str());
        }
        let rev: String = b.chars().rev().collect();
        [b.to_string(), lower, cap, b.to_uppercase(), rev]
    };
    let mut words: Vec<String> = Vec::new();
    let mut primary: Vec<String> = Vec::new();
    for b in &bases {
        let is_primary = [local, label, account.unwrap_or("")].contains(&b.as_str());
        for (i, w) in variants(b).into_iter().enumerate() {
            if is_primary && i < 3 && !w.is_empty() && !primary.contains(&w) {
                primary.push(w.clone());
            }
            if !w.is_empty() && !words.contains(&w) {
                words.push(w);
            }
        }
    }
    let year = i32::from(year);
    let mut years: Vec<String> = Vec::new();
    for y in (year - 10..=year + 1).rev() {
        years.push(y.to_string());
    }
    for y in (year - 5..=year + 1).rev() {
        years.push(format!("{:02}", y.rem_euclid(100)));
    }
    years.push(format!("{year}!"));
    years.push(format!("{}!", year - 1));
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut dropped = 0u64;
    let mut push = |c: String, out: &mut Vec<Vec<u8>>| {
        if out.len() >= MAX_DERIVED {
            return;
        }
        let c = c.into_bytes();
        if !acceptable(&c) {
            dropped += 1;
            return;
        }
        if !out.contains(&c) {
            out.push(c);
        }
    };
    for w in &words {
        for s in SHORT_SUFFIXES {
            push(format!("{w}{s}"), &mut out);
        }
    }
    for w in &primary {
        for y in &years {
            push(format!("{w}{y}"), &mut out);
        }
    }
    for w in &words {
        for s in MORE_SUFFIXES {
            push(format!("{w}{s}"), &mut out);
        }
    }
    (out, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_is_loaded_with_its_header_skipped() {
        let l = weak_list();
        assert!(l.len() >= 3000, "{}", l.len());
        assert_eq!(l[0], b"123456");
        assert!(l.iter().all(|c| !c.starts_with(b"#!comment")));
        assert_eq!(weak_list_digest().len(), 64);
    }

    #[test]
    fn derived_candidates_cover_the_usual_shapes() {
        let c = Candidates::new("info@example.com", Some("exmpl"), 2026, 10);
        let all: Vec<String> = (0..c.len())
            .map(|i| String::from_utf8_lossy(c.get(i).unwrap()).into_owned())
            .collect();
        for want in [
            "info",
            "info123",
            "Info1",
            "example",
            "example2026",
            "Example25",
            "exmpl",
            "info@example.com",
            "ofni",
            "INFO",
            "123456",
        ] {
            assert!(all.iter().any(|x| x == want), "{want} missing");
        }
        assert!(c.len() <= MAX_DERIVED + 10);
        assert_eq!(c.get(c.len()), None);
        // A long mailbox: over-long derived candidates are dropped and counted.
        let long = format!("{}@example.com", "a".repeat(300));
        let c = Candidates::new(&long, None, 2026, 0);
        assert!(c.dropped() > 0);
        assert!((0..c.len()).all(|i| c.get(i).unwrap().len() <= 256));
    }
}
