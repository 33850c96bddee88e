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
//! Rules live in the `suppressions` table and are cached in memory; every change through
//! [`Suppressions`] reloads the cache, so the dispatcher never reads the store to decide.

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

fn same_ip(rule: &str, ip: IpAddr) -> bool {
    rule.parse::<IpAddr>()
        .is_ok_and(|r| r.to_canonical() == ip.to_canonical())
}

/// True when `rule` matches `f`, ignoring expiry.
pub fn matches_fields(rule: &Suppression, f: &Finding) -> bool {
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
    if let Some(ip) = &rule.ip {
        if !f.ip.is_some_and(|fi| same_ip(ip, fi)) {
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

/// True when `rule` is in force at `now`.
pub fn in_force(rule: &Suppression, now: Timestamp) -> bool {
    rule.expires.is_none_or(|e| now < e)
}

/// True when `rule` is in force at `now` and matches `f`.
pub fn matches(rule: &Suppression, f: &Finding, now: Timestamp) -> bool {
    in_force(rule, now) && matches_fields(rule, f)
}

/// The rules, cached from the store.
pub struct Suppressions {
    store: Store,
    clock: SharedClock,
    rules: RwLock<Arc<Vec<Suppression>>>,
}

impl Suppressions {
    /// Loads every rule from the store.
    pub fn load(store: Store, clock: SharedClock) -> Result<Arc<Suppressions>, StoreError> {
        let rules = store.read(suppressions::list)?;
        Ok(Arc::new(Suppressions {
            store,
            clock,
            rules: RwLock::new(Arc::new(rules)),
        }))
    }

    /// Re-reads the rules from the store.
    pub fn reload(&self) -> Result<(), StoreError> {
        let rules = self.store.read(suppressions::list)?;
        *self.rules.write() = Arc::new(rules);
        Ok(())
    }

    /// Every rule (also expired ones), newest first.
    pub fn rules(&self) -> Arc<Vec<Suppression>> {
        self.rules.read().clone()
    }

    /// The first rule in force that matches `f`.
    pub fn matching(&self, f: &Finding) -> Option<i64> {
        let now = self.clock.now();
        self.rules
            .read()
            .iter()
            .find(|r| matches(r, f, now))
            .map(|r| r.id)
    }

    pub fn is_suppressed(&self, f: &Finding) -> bool {
        self.matching(f).is_some()
    }

    /// True when at least one rule is in force (lets callers skip work).
    pub fn any_in_force(&self) -> bool {
        let now = self.clock.now();
        self.rules.read().iter().any(|r| in_force(r, now))
    }

    /// Stores a rule created now by `created_by`, then reloads the cache.
    pub fn create(&self, new: NewSuppression, created_by: &str) -> Result<Suppression, StoreError> {
        let now = self.clock.now();
        let by = created_by.to_string();
        let rule = self
            .store
            .write(move |c| suppressions::insert(c, &new, now, &by))?;
        self.reload()?;
        Ok(rule)
    }

    /// Deletes a rule; false when no rule has that id.
    pub fn delete(&self, id: i64) -> Result<bool, StoreError> {
        let n = self.store.write(move |c| suppressions::delete(c, id))?;
        self.reload()?;
        Ok(n > 0)
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
        assert!(s.delete(temp.id).unwrap());
        assert!(!s.delete(temp.id).unwrap());
        assert!(s.rules().is_empty());
        store.close();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
