//! The active set: current findings keyed by (check, message).

use std::collections::HashMap;

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

/// Current findings. A repeat of the same (check, message) merges: `first_seen` stays,
/// `last_seen` moves, `count` grows, and severity, details and context take the newest values.
#[derive(Default)]
pub struct ActiveSet {
    by_key: HashMap<(String, String), Finding>,
    /// Bumped on every change; clients poll it to detect changes cheaply.
    version: u64,
    /// Merges of a repeat into an existing entry, since start.
    pub merges: u64,
}

impl ActiveSet {
    pub fn load(findings: Vec<Finding>) -> ActiveSet {
        let mut s = ActiveSet::default();
        for f in findings {
            s.by_key.insert((f.check.clone(), f.message.clone()), f);
        }
        s.version = 1;
        s
    }

    /// Merges one dispatched finding; returns the merged entry.
    pub fn merge(&mut self, f: &Finding) -> Finding {
        self.version += 1;
        let key = (f.check.clone(), f.message.clone());
        match self.by_key.get_mut(&key) {
            Some(e) => {
                self.merges += 1;
                merge_into(e, f);
                e.clone()
            }
            None => {
                self.by_key.insert(key, f.clone());
                f.clone()
            }
        }
    }

    /// Removes entries of `check` whose message is not in `keep`; returns removed keys.
    pub fn resolve_check(&mut self, check: &str, keep: &[String]) -> Vec<(String, String)> {
        let gone: Vec<(String, String)> = self
            .by_key
            .keys()
            .filter(|(c, m)| c == check && !keep.contains(m))
            .cloned()
            .collect();
        for k in &gone {
            self.by_key.remove(k);
        }
        if !gone.is_empty() {
            self.version += 1;
        }
        gone
    }

    /// Removes entries whose last_seen is before `cutoff` and whose check satisfies `pred`.
    pub fn expire(
        &mut self,
        cutoff: Timestamp,
        pred: impl Fn(&str) -> bool,
    ) -> Vec<(String, String)> {
        let gone: Vec<(String, String)> = self
            .by_key
            .iter()
            .filter(|(k, f)| f.last_seen < cutoff && pred(&k.0))
            .map(|(k, _)| k.clone())
            .collect();
        for k in &gone {
            self.by_key.remove(k);
        }
        if !gone.is_empty() {
            self.version += 1;
        }
        gone
    }

    /// Removes the given keys; returns how many were present.
    pub fn remove(&mut self, keys: &[(String, String)]) -> usize {
        let n = keys
            .iter()
            .filter(|k| self.by_key.remove(*k).is_some())
            .count();
        if n > 0 {
            self.version += 1;
        }
        n
    }

    /// Entries ordered by severity (highest first), then newest first.
    pub fn sorted(&self) -> Vec<Finding> {
        let mut v: Vec<Finding> = self.by_key.values().cloned().collect();
        v.sort_by(|a, b| {
            b.severity
                .cmp(&a.severity)
                .then(b.last_seen.cmp(&a.last_seen))
                .then(a.check.cmp(&b.check))
                .then(a.message.cmp(&b.message))
        });
        v
    }

    pub fn get(&self, check: &str, message: &str) -> Option<&Finding> {
        self.by_key.get(&(check.to_string(), message.to_string()))
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    /// Counts by severity: (critical, high, warning).
    pub fn severity_counts(&self) -> (u64, u64, u64) {
        let mut c = (0, 0, 0);
        for f in self.by_key.values() {
            match f.severity {
                Severity::Critical => c.0 += 1,
                Severity::High => c.1 += 1,
                Severity::Warning => c.2 += 1,
            }
        }
        c
    }

    pub fn iter(&self) -> impl Iterator<Item = &Finding> {
        self.by_key.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(check: &str, msg: &str, sev: Severity, t: i64) -> Finding {
        Finding::new(check, sev, msg, Timestamp::from_second(t).unwrap())
    }

    #[test]
    fn merge_keeps_first_seen_and_counts() {
        let mut s = ActiveSet::default();
        s.merge(&f("a", "m", Severity::High, 10));
        let e = s.merge(&f("a", "m", Severity::Critical, 20));
        assert_eq!(e.count, 2);
        assert_eq!(e.first_seen.as_second(), 10);
        assert_eq!(e.last_seen.as_second(), 20);
        assert_eq!(e.severity, Severity::Critical);
        assert_eq!(s.len(), 1);
        assert_eq!(s.merges, 1);
    }

    #[test]
    fn resolve_and_expire() {
        let mut s = ActiveSet::default();
        s.merge(&f("c", "keep", Severity::High, 10));
        s.merge(&f("c", "gone", Severity::High, 10));
        s.merge(&f("other", "x", Severity::Warning, 10));
        assert_eq!(s.resolve_check("c", &["keep".to_string()]).len(), 1);
        assert_eq!(s.len(), 2);
        let gone = s.expire(Timestamp::from_second(11).unwrap(), |c| c == "other");
        assert_eq!(gone, vec![("other".to_string(), "x".to_string())]);
        assert_eq!(s.sorted()[0].message, "keep");
    }
}
