//! Suppressions: operator rules that keep matching findings out of the active set.
//!
//! A suppressed finding is still written to history (one row per dispatch), but it is not
//! merged into the active set, so it is neither shown as active nor passed to listeners
//! (alerts, the event stream). Creating a rule also removes the active findings it matches
//! (see [`crate::findings::Engine::apply_suppressions`]).
//!
//! Matching: `check` must equal the finding's check. Each optional field narrows the rule and
//! needs the finding to carry a matching value: `message` equal; `path_prefix` equal to the
//! path or one of its leading directories (`/var/www/a` covers `/var/www/a/x.php`, not
//! `/var/www/ab`; a prefix ending in `/` covers everything below it); `ip` the same address
//! (IPv4-mapped IPv6 counts as IPv4); `account` equal. A rule with `expires` stops matching
//! at that instant, read from the injected clock.
//!
//! Rules live in the `suppressions` table and are cached in memory as a [`Matcher`]; every
//! change through [`Suppressions`] is stored first, then applied to the cache (without
//! reading the table back), so the dispatcher never reads the store to decide.
//!
//! Guarantees:
//! - Deciding whether a finding is suppressed does not scan the rules: the [`Matcher`]
//!   indexes them by check, then by address and by message, so the dispatcher examines only
//!   the rules that could match (those of the finding's check with its address, its message,
//!   or neither set). Addresses are parsed once, when the matcher is built.
//! - Readers take the matcher as an `Arc` under a lock held only for that copy; a reload
//!   builds the new matcher before swapping it in.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use jiff::Timestamp;
use parking_lot::RwLock;

use super::Finding;
use crate::clock::SharedClock;
use crate::store::suppressions::{self, NewSuppression, Suppression};
use crate::store::{Store, StoreError};

/// True when `path` is `prefix` or lies below it.
pub fn path_under(path: &str, prefix: &str) -> bool {
    match path.strip_prefix(prefix) {
        None => false,
        Some("") => true,
        Some(rest) => prefix.ends_with('/') || rest.starts_with('/'),
    }
}

/// The address a rule names, canonical (IPv4-mapped IPv6 as IPv4); `Some(None)` when it
/// names one that does not parse (such a rule matches nothing).
fn rule_ip(rule: &Suppression) -> Option<Option<IpAddr>> {
    rule.ip
        .as_deref()
        .map(|s| s.parse::<IpAddr>().ok().map(|a| a.to_canonical()))
}

/// The field test with the rule's address already parsed ([`rule_ip`]).
fn fields_match(rule: &Suppression, ip: Option<Option<IpAddr>>, f: &Finding) -> bool {
    if rule.check != f.check {
        return false;
    }
    if rule.message.as_ref().is_some_and(|m| *m != f.message) {
        return false;
    }
    if let Some(prefix) = &rule.path_prefix {
        if !f.path.as_deref().is_some_and(|p| path_under(p, prefix)) {
            return false;
        }
    }
    if let Some(want) = ip {
        if want.is_none() || f.ip.map(|a| a.to_canonical()) != want {
            return false;
        }
    }
    if let Some(account) = &rule.account {
        if f.account.as_ref() != Some(account) {
            return false;
        }
    }
    true
}

/// True when `rule` matches `f`, ignoring expiry.
pub fn matches_fields(rule: &Suppression, f: &Finding) -> bool {
    fields_match(rule, rule_ip(rule), f)
}

/// True when `rule` is in force at `now`.
pub fn in_force(rule: &Suppression, now: Timestamp) -> bool {
    rule.expires.is_none_or(|e| now < e)
}

/// True when `rule` is in force at `now` and matches `f`.
pub fn matches(rule: &Suppression, f: &Finding, now: Timestamp) -> bool {
    in_force(rule, now) && matches_fields(rule, f)
}

/// A rule with its address parsed.
struct Compiled {
    rule: Suppression,
    ip: Option<Option<IpAddr>>,
}

impl Compiled {
    fn matches(&self, f: &Finding, now: Timestamp) -> bool {
        in_force(&self.rule, now) && fields_match(&self.rule, self.ip, f)
    }
}

/// The rules of one check, indexed by what narrows them most.
#[derive(Default)]
struct CheckRules {
    /// Rules that set an address, by address.
    by_ip: HashMap<IpAddr, Vec<usize>>,
    /// Rules without an address that set a message, by message.
    by_message: HashMap<String, Vec<usize>>,
    /// Rules with neither (each is examined for every finding of the check).
    other: Vec<usize>,
}

/// The rules compiled for matching: indexed by check, then by address or message.
#[derive(Default)]
pub struct Matcher {
    rules: Vec<Compiled>,
    by_check: HashMap<String, CheckRules>,
    /// Latest expiry of all rules; `None` inside when one never expires.
    until: Option<Option<Timestamp>>,
}

impl Matcher {
    /// Compiles `rules` (newest first, as listed).
    pub fn new(rules: &[Suppression]) -> Matcher {
        let mut m = Matcher::default();
        for (i, rule) in rules.iter().enumerate() {
            let ip = rule_ip(rule);
            let c = m.by_check.entry(rule.check.clone()).or_default();
            match (ip, &rule.message) {
                (Some(Some(a)), _) => c.by_ip.entry(a).or_default().push(i),
                // An address that does not parse matches nothing: in no index.
                (Some(None), _) => {}
                (None, Some(msg)) => c.by_message.entry(msg.clone()).or_default().push(i),
                (None, None) => c.other.push(i),
            }
            m.until = Some(match (m.until, rule.expires) {
                (Some(None), _) | (_, None) => None,
                (Some(Some(a)), Some(b)) => Some(a.max(b)),
                (None, Some(b)) => Some(b),
            });
            m.rules.push(Compiled {
                rule: rule.clone(),
                ip,
            });
        }
        m
    }

    /// The first rule (in listing order: newest first) in force at `now` that matches `f`.
    pub fn matching(&self, f: &Finding, now: Timestamp) -> Option<i64> {
        let c = self.by_check.get(&f.check)?;
        let mut best: Option<usize> = None;
        let mut consider = |ids: Option<&Vec<usize>>| {
            for &i in ids.into_iter().flatten() {
                if best.is_some_and(|b| b < i) {
                    break;
                }
                if self.rules[i].matches(f, now) {
                    best = Some(best.map_or(i, |b| b.min(i)));
                    break;
                }
            }
        };
        if let Some(ip) = f.ip {
            consider(c.by_ip.get(&ip.to_canonical()));
        }
        consider(c.by_message.get(&f.message));
        consider(Some(&c.other));
        best.map(|i| self.rules[i].rule.id)
    }

    pub fn is_suppressed(&self, f: &Finding, now: Timestamp) -> bool {
        self.matching(f, now).is_some()
    }

    /// True when at least one rule is in force at `now` (lets callers skip work).
    pub fn any_in_force(&self, now: Timestamp) -> bool {
        match self.until {
            None => false,
            Some(None) => true,
            Some(Some(t)) => now < t,
        }
    }

    /// Rules compiled.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// The rules, cached from the store.
pub struct Suppressions {
    store: Store,
    clock: SharedClock,
    rules: RwLock<(Arc<Vec<Suppression>>, Arc<Matcher>)>,
    /// Held while the cache is changed.
    updating: parking_lot::Mutex<()>,
}

impl Suppressions {
    /// Loads every rule from the store.
    pub fn load(store: Store, clock: SharedClock) -> Result<Arc<Suppressions>, StoreError> {
        let rules = store.read(suppressions::list)?;
        let matcher = Arc::new(Matcher::new(&rules));
        Ok(Arc::new(Suppressions {
            store,
            clock,
            rules: RwLock::new((Arc::new(rules), matcher)),
            updating: parking_lot::Mutex::new(()),
        }))
    }

    /// Re-reads the rules from the store and swaps in a new matcher.
    pub fn reload(&self) -> Result<(), StoreError> {
        let _one = self.updating.lock();
        let rules = self.store.read(suppressions::list)?;
        let matcher = Arc::new(Matcher::new(&rules));
        *self.rules.write() = (Arc::new(rules), matcher);
        Ok(())
    }

    /// Every rule (also expired ones), newest first.
    pub fn rules(&self) -> Arc<Vec<Suppression>> {
        self.rules.read().0.clone()
    }

    /// The compiled rules (a copy of an `Arc`).
    pub fn matcher(&self) -> Arc<Matcher> {
        self.rules.read().1.clone()
    }

    /// The first rule in force that matches `f`.
    pub fn matching(&self, f: &Finding) -> Option<i64> {
        self.matcher().matching(f, self.clock.now())
    }

    pub fn is_suppressed(&self, f: &Finding) -> bool {
        self.matching(f).is_some()
    }

    /// True when at least one rule is in force (lets callers skip work).
    pub fn any_in_force(&self) -> bool {
        self.matcher().any_in_force(self.clock.now())
    }

    /// Stores a rule created now by `created_by`, then adds it to the cache (no re-read of
    /// the table: the insert returned the stored rule).
    pub fn create(&self, new: NewSuppression, created_by: &str) -> Result<Suppression, StoreError> {
        let now = self.clock.now();
        let by = created_by.to_string();
        let rule = self
            .store
            .write(move |c| suppressions::insert(c, &new, now, &by))?;
        self.update(|rules| {
            // Newest first: created descending, then id descending.
            let at = rules
                .iter()
                .position(|r| (r.created, r.id) < (rule.created, rule.id))
                .unwrap_or(rules.len());
            rules.insert(at, rule.clone());
        });
        Ok(rule)
    }

    /// Deletes a rule; false when no rule has that id.
    pub fn delete(&self, id: i64) -> Result<bool, StoreError> {
        let n = self.store.write(move |c| suppressions::delete(c, id))?;
        self.update(|rules| rules.retain(|r| r.id != id));
        Ok(n > 0)
    }

    /// Changes the cached rules and swaps in a new matcher (one change at a time; readers
    /// keep the previous pair meanwhile).
    fn update(&self, change: impl FnOnce(&mut Vec<Suppression>)) {
        let _one = self.updating.lock();
        let mut rules: Vec<Suppression> = (*self.rules()).clone();
        change(&mut rules);
        let matcher = Arc::new(Matcher::new(&rules));
        *self.rules.write() = (Arc::new(rules), matcher);
    }

    /// The clock rules are judged by.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::findings::Severity;

    fn rule(check: &str) -> Suppression {
        Suppression {
            id: 1,
            check: check.into(),
            message: None,
            path_prefix: None,
            ip: None,
            account: None,
            reason: "r".into(),
            created: Timestamp::UNIX_EPOCH,
            created_by: "t".into(),
            expires: None,
        }
    }

    fn finding() -> Finding {
        Finding::new(
            "webshell",
            Severity::Critical,
            "Webshell signature x in /var/www/a/x.php",
            Timestamp::from_second(1_767_225_600).unwrap(),
        )
        .with_path("/var/www/a/x.php")
        .with_account("alice")
        .with_ip("203.0.113.9".parse().unwrap())
    }

    #[test]
    fn each_field_narrows_the_rule() {
        let f = finding();
        let now = f.last_seen;
        assert!(matches(&rule("webshell"), &f, now));
        assert!(!matches(&rule("phishing"), &f, now));
        let with = |edit: fn(&mut Suppression)| {
            let mut r = rule("webshell");
            edit(&mut r);
            matches(&r, &f, now)
        };
        assert!(with(
            |r| r.message = Some("Webshell signature x in /var/www/a/x.php".into())
        ));
        assert!(!with(|r| r.message = Some("other".into())));
        assert!(with(|r| r.path_prefix = Some("/var/www/a".into())));
        assert!(with(|r| r.path_prefix = Some("/var/www/".into())));
        assert!(with(|r| r.path_prefix = Some("/var/www/a/x.php".into())));
        assert!(!with(|r| r.path_prefix = Some("/var/www/ab".into())));
        assert!(!with(|r| r.path_prefix = Some("/var/www/a/x".into())));
        assert!(with(|r| r.ip = Some("203.0.113.9".into())));
        assert!(with(|r| r.ip = Some("::ffff:203.0.113.9".into())));
        assert!(!with(|r| r.ip = Some("203.0.113.10".into())));
        assert!(with(|r| r.account = Some("alice".into())));
        assert!(!with(|r| r.account = Some("bob".into())));
        // A field the finding does not carry cannot match.
        let mut bare = f.clone();
        bare.path = None;
        bare.ip = None;
        bare.account = None;
        let mut r = rule("webshell");
        r.path_prefix = Some("/".into());
        assert!(!matches(&r, &bare, now));
        let mut r = rule("webshell");
        r.ip = Some("203.0.113.9".into());
        assert!(!matches(&r, &bare, now));
        let mut r = rule("webshell");
        r.account = Some("alice".into());
        assert!(!matches(&r, &bare, now));
    }

    #[test]
    fn stored_rules_expire_by_the_injected_clock() {
        let dir = std::env::temp_dir().join(format!("svc-suppress-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let clock = ManualClock::at_epoch_2026();
        let s = Suppressions::load(store.clone(), clock.clone()).unwrap();
        let f = finding();
        assert!(!s.is_suppressed(&f));
        assert!(!s.any_in_force());
        let temp = s
            .create(
                NewSuppression {
                    check: "webshell".into(),
                    account: Some("alice".into()),
                    reason: "known test file".into(),
                    expires: Some(crate::clock::add(
                        clock.now(),
                        std::time::Duration::from_secs(3600),
                    )),
                    ..NewSuppression::default()
                },
                "ops-admin",
            )
            .unwrap();
        assert_eq!(s.matching(&f), Some(temp.id));
        assert!(s.any_in_force());
        clock.advance_secs(3599);
        assert!(s.is_suppressed(&f));
        clock.advance_secs(1);
        assert!(!s.is_suppressed(&f), "expired at its instant");
        assert!(!s.any_in_force());
        assert_eq!(s.rules().len(), 1, "expired rules stay listed");
        // A reload from the store sees the same rules; delete removes it.
        let again = Suppressions::load(store.clone(), clock.clone()).unwrap();
        assert_eq!(again.rules()[0], temp);
        // The cache kept in memory lists what the table lists, in the same order.
        for (check, later) in [("older", 100), ("a", 0), ("b", 0)] {
            s.create(
                NewSuppression {
                    check: check.into(),
                    reason: "r".into(),
                    ..NewSuppression::default()
                },
                "ops-admin",
            )
            .unwrap();
            clock.advance_secs(later);
        }
        let stored = Suppressions::load(store.clone(), clock.clone())
            .unwrap()
            .rules();
        assert_eq!(*s.rules(), *stored);
        let cached = s.rules();
        let order: Vec<&str> = cached.iter().map(|r| r.check.as_str()).collect();
        assert_eq!(order, ["b", "a", "older", "webshell"]);
        for r in stored.iter().filter(|r| r.id != temp.id) {
            assert!(s.delete(r.id).unwrap());
        }
        assert!(s.delete(temp.id).unwrap());
        assert!(!s.delete(temp.id).unwrap());
        assert!(s.rules().is_empty());
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_index_finds_what_a_scan_of_every_rule_finds() {
        let mut seed = 7u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let now = Timestamp::from_second(1_767_225_600).unwrap();
        let checks = ["webshell", "ssh_bruteforce", "cron"];
        let ips = [
            "203.0.113.1",
            "::ffff:203.0.113.2",
            "203.0.113.3",
            "not an ip",
        ];
        let mut rules = Vec::new();
        for id in (1..=300).rev() {
            let mut r = rule(checks[next(3) as usize]);
            r.id = id;
            if next(3) == 0 {
                r.ip = Some(ips[next(4) as usize].into());
            }
            if next(3) == 0 {
                r.message = Some(format!("m{}", next(5)));
            }
            if next(4) == 0 {
                r.path_prefix = Some(format!("/var/www/{}", next(3)));
            }
            if next(4) == 0 {
                r.account = Some(format!("u{}", next(3)));
            }
            if next(3) == 0 {
                let secs = next(200) as i64 - 100;
                r.expires = Some(Timestamp::from_second(now.as_second() + secs).unwrap());
            }
            rules.push(r);
        }
        let m = Matcher::new(&rules);
        let mut hits = 0;
        for _ in 0..3000 {
            let mut f = Finding::new(
                checks[next(3) as usize],
                Severity::High,
                format!("m{}", next(6)),
                now,
            );
            if next(2) == 0 {
                f.ip = Some(
                    [
                        "203.0.113.1",
                        "203.0.113.2",
                        "::ffff:203.0.113.3",
                        "2001:db8::1",
                    ][next(4) as usize]
                        .parse()
                        .unwrap(),
                );
            }
            if next(2) == 0 {
                f.path = Some(format!("/var/www/{}/x.php", next(4)));
            }
            if next(2) == 0 {
                f.account = Some(format!("u{}", next(4)));
            }
            let naive = rules.iter().find(|r| matches(r, &f, now)).map(|r| r.id);
            assert_eq!(m.matching(&f, now), naive, "{f:?}");
            hits += usize::from(naive.is_some());
        }
        assert!(hits > 300, "{hits}");
        assert!(m.any_in_force(now));
        assert!(!Matcher::new(&[]).any_in_force(now));
        let mut temp = rule("x");
        temp.expires = Some(now);
        assert!(!Matcher::new(&[temp]).any_in_force(now));
    }
}
