//! Rules 1-8 of `cms_verification`, case by case.

use super::*;

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).unwrap()
}

fn fail(cause: &str) -> Outcome {
    Outcome::Failed {
        cause: cause.into(),
        detail: format!("6.4.3/en_US: {cause}"),
    }
}

fn wp(c: &mut Coverage, path: &str, account: &str) {
    for g in Group::ALL {
        c.discovered(path, g, Platform::WordPress, Some(account.into()));
    }
}

#[test]
fn rule_1_discovery_without_attempt_is_unknown() {
    let mut c = Coverage::default();
    wp(&mut c, "/w/a", "u");
    let n = c.counts(Group::Core).unwrap();
    assert_eq!((n.unknown, n.verified, n.last_attempt), (1, 0, None));
    assert!(c.view()["core"].get("last_attempt").is_none());
}

#[test]
fn rule_2_differences_are_modified() {
    let mut c = Coverage::default();
    wp(&mut c, "/w/a", "u");
    let s = c.begin_scan();
    assert!(c.attempt("/w/a", Group::Core, s, t(1), Outcome::Modified));
    let n = c.counts(Group::Core).unwrap();
    assert_eq!((n.modified, n.unknown, n.last_attempt), (1, 0, Some(t(1))));
}

#[test]
fn rule_3_plugins_verified_is_a_state_not_a_verdict_on_versions() {
    let mut c = Coverage::default();
    wp(&mut c, "/w/a", "u");
    let s = c.begin_scan();
    c.attempt("/w/a", Group::Plugins, s, t(1), Outcome::Verified);
    assert_eq!(c.counts(Group::Plugins).unwrap().verified, 1);
    assert_eq!(c.counts(Group::Plugins).unwrap().modified, 0);
}

#[test]
fn rule_4_persist_scan_order_and_discovery_keeps_evidence() {
    let mut c = Coverage::default();
    wp(&mut c, "/w/a", "u");
    let older = c.begin_scan();
    let newer = c.begin_scan();
    // The newer scan's attempt lands first; the older one finishing later changes nothing.
    assert!(c.attempt(
        "/w/a",
        Group::Core,
        newer,
        t(5),
        fail("checksum_source_error")
    ));
    assert!(!c.attempt("/w/a", Group::Core, older, t(6), Outcome::Verified));
    let r = c.get("/w/a", Group::Core).unwrap().clone();
    assert_eq!(
        (r.state, r.failures, r.last_attempt),
        (State::Unverified, 1, Some(t(5)))
    );
    // Discovery alone (a scan stopped before its attempt) keeps the evidence.
    let _ = c.begin_scan();
    wp(&mut c, "/w/a", "u");
    assert_eq!(c.get("/w/a", Group::Core).unwrap(), &r);
    // Stored and loaded again: same counts, and the sequence continues after the stored one.
    let (rows, gone) = c.take_changes();
    assert!(gone.is_empty());
    let mut back = Coverage::from_rows(rows);
    assert_eq!(back.counts(Group::Core), c.counts(Group::Core));
    assert_eq!(back.view(), c.view());
    assert!(back.begin_scan() > newer);
    // A restart does not reset the failure history.
    let s = back.begin_scan();
    back.attempt("/w/a", Group::Core, s, t(9), fail("checksum_source_error"));
    assert_eq!(back.get("/w/a", Group::Core).unwrap().failures, 2);
}

#[test]
fn rule_5_absent_groups_and_unreadable_history() {
    let c = Coverage::default();
    assert_eq!(c.view(), json!({}));
    let mut c = Coverage::default();
    c.discovered("/w/j", Group::Core, Platform::Joomla, None);
    assert!(c.view().get("core").is_some());
    assert!(c.view().get("plugins").is_none());
    let e = Coverage::unreadable("installation history unreadable: disk".into());
    assert_eq!(
        e.view(),
        json!({"error": "installation history unreadable: disk"})
    );
    // Forgotten installations leave no history: the group goes away.
    let mut c = Coverage::default();
    wp(&mut c, "/w/a", "u");
    c.prune(&[PathBuf::from("/w")], &Default::default());
    assert_eq!(c.view(), json!({}));
    let (_, gone) = c.take_changes();
    assert_eq!(gone.len(), 2);
}

#[test]
fn rule_6_first_failure_counts_repeated_failures_warn() {
    let mut c = Coverage::default();
    wp(&mut c, "/w/a", "u");
    let s = c.begin_scan();
    c.attempt("/w/a", Group::Core, s, t(1), fail("checksum_source_error"));
    assert_eq!(c.counts(Group::Core).unwrap().unverified, 1);
    assert!(c.unverified_findings(Group::Core, None, t(1)).is_empty());
    let s = c.begin_scan();
    c.attempt("/w/a", Group::Core, s, t(2), fail("checksum_source_error"));
    let f = c.unverified_findings(Group::Core, None, t(2));
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].check, CORE_UNVERIFIED);
    assert_eq!(f[0].path.as_deref(), Some("/w/a"));
    assert_eq!(f[0].account.as_deref(), Some("u"));
    assert!(
        f[0].message.contains("checksum_source_error"),
        "{}",
        f[0].message
    );
    // A success clears the history.
    let s = c.begin_scan();
    c.attempt("/w/a", Group::Core, s, t(3), Outcome::Verified);
    assert!(c.unverified_findings(Group::Core, None, t(3)).is_empty());
    assert_eq!(c.get("/w/a", Group::Core).unwrap().failures, 0);
}

fn failing_many(n: usize, accounts: &[&str]) -> Coverage {
    let mut c = Coverage::default();
    for i in 0..n {
        wp(&mut c, &format!("/w/{i}"), accounts[i % accounts.len()]);
    }
    for _ in 0..2 {
        let s = c.begin_scan();
        for i in 0..n {
            c.attempt(
                &format!("/w/{i}"),
                Group::Core,
                s,
                t(1),
                fail("checksum_source_error"),
            );
        }
    }
    c
}

#[test]
fn rule_7_host_scans_collapse_per_cause_account_scans_do_not() {
    // At the limit: per-installation warnings.
    let c = failing_many(PER_CAUSE_LIMIT, &["u"]);
    assert_eq!(
        c.unverified_findings(Group::Core, None, t(1)).len(),
        PER_CAUSE_LIMIT
    );
    // Above it, across accounts: one finding, no path, no account.
    let c = failing_many(PER_CAUSE_LIMIT + 3, &["u", "v"]);
    let f = c.unverified_findings(Group::Core, None, t(1));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].path, None);
    assert_eq!(f[0].account, None);
    assert!(f[0].message.contains("checksum_source_error"));
    assert!(!f[0].message.contains("/w/"));
    assert!(f[0]
        .details
        .starts_with(&format!("{} installations", PER_CAUSE_LIMIT + 3)));
    assert!(!f[0].details.contains("/w/"), "{}", f[0].details);
    // All of one account: the summary names it.
    let c = failing_many(PER_CAUSE_LIMIT + 1, &["u"]);
    let f = c.unverified_findings(Group::Core, None, t(1));
    assert_eq!(f[0].account.as_deref(), Some("u"));
    // Another cause and the other kind are counted apart.
    let mut c = failing_many(PER_CAUSE_LIMIT + 1, &["u"]);
    wp(&mut c, "/x/a", "w");
    for _ in 0..2 {
        let s = c.begin_scan();
        c.attempt("/x/a", Group::Core, s, t(2), fail("version_unreadable"));
        c.attempt(
            "/x/a",
            Group::Plugins,
            s,
            t(2),
            fail("checksum_source_error"),
        );
    }
    assert_eq!(c.unverified_findings(Group::Core, None, t(2)).len(), 2);
    assert_eq!(c.unverified_findings(Group::Plugins, None, t(2)).len(), 1);
    // An account scan keeps installation-specific warnings beneath its roots.
    let c = failing_many(PER_CAUSE_LIMIT + 3, &["u"]);
    let f = c.unverified_findings(Group::Core, Some(&[PathBuf::from("/w")]), t(1));
    assert_eq!(f.len(), PER_CAUSE_LIMIT + 3);
    assert!(f.iter().all(|f| f.path.is_some()));
    assert!(c
        .unverified_findings(Group::Core, Some(&[PathBuf::from("/other")]), t(1))
        .is_empty());
}

#[test]
fn rule_8_and_not_platform_are_not_failures() {
    let mut c = Coverage::default();
    c.discovered("/w/d", Group::Core, Platform::Drupal, None);
    let s = c.begin_scan();
    c.attempt("/w/d", Group::Core, s, t(1), Outcome::NotPlatform);
    let n = c.counts(Group::Core).unwrap();
    assert_eq!((n.not_platform, n.unverified), (1, 0));
    // Not discovered: no attempt is recorded.
    assert!(!c.attempt("/w/none", Group::Core, s, t(1), Outcome::Verified));
}
