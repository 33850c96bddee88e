//! Report categories: what a confirmed block is reported as.
//!
//! | Evidence | Categories (central service ids) |
//! |---|---|
//! | `ssh_bruteforce` | `brute_force` (18), `ssh` (22) |
//! | `pam_bruteforce`, `mail_auth_bruteforce` | `brute_force` (18) |
//! | `wp_login_bruteforce`, `xmlrpc_abuse` | `brute_force` (18), `web_app_attack` (21) |
//! | `modsec_block_escalation` | `web_app_attack` (21) |
//! | `wp_user_enumeration`, `http_scanner_profile` | `web_app_attack` (21), `bad_web_bot` (19) |
//! | `http_ua_spoof`, `http_claimed_bot_unverified` | `bad_web_bot` (19) |
//! | score or evidence blocks: events of kind `brute_force` | `brute_force` (18) |
//! | ... `webshell_upload`, `waf_block` | `web_app_attack` (21) |
//! | ... `phishing` | `phishing` (7) |
//! | ... `command_and_control` | `hacking` (15) |
//!
//! `auth_success` and `file_upload` events are never abuse. A block with no category is not
//! reported.

use crate::findings::evidence::AttackKind;
use crate::threat::autoblock::{Confirmed, Trigger};

/// Every category: (name, the central reporting service's numeric id).
pub const CATEGORIES: &[(&str, u8)] = &[
    ("brute_force", 18),
    ("ssh", 22),
    ("web_app_attack", 21),
    ("phishing", 7),
    ("hacking", 15),
    ("bad_web_bot", 19),
];

/// Categories of a finding of an attacker-address check.
const CHECKS: &[(&str, &[&str])] = &[
    ("ssh_bruteforce", &["brute_force", "ssh"]),
    ("pam_bruteforce", &["brute_force"]),
    ("mail_auth_bruteforce", &["brute_force"]),
    ("wp_login_bruteforce", &["brute_force", "web_app_attack"]),
    ("xmlrpc_abuse", &["brute_force", "web_app_attack"]),
    ("modsec_block_escalation", &["web_app_attack"]),
    // Access-log checks (issue 15).
    ("wp_user_enumeration", &["web_app_attack", "bad_web_bot"]),
    ("http_scanner_profile", &["web_app_attack", "bad_web_bot"]),
    ("http_ua_spoof", &["bad_web_bot"]),
    ("http_claimed_bot_unverified", &["bad_web_bot"]),
];

/// The category of one attack kind's events, if it is abuse.
pub fn of_kind(k: AttackKind) -> Option<&'static str> {
    match k {
        AttackKind::BruteForce => Some("brute_force"),
        AttackKind::WebshellUpload | AttackKind::WafBlock => Some("web_app_attack"),
        AttackKind::Phishing => Some("phishing"),
        AttackKind::CommandAndControl => Some("hacking"),
        AttackKind::AuthSuccess | AttackKind::FileUpload => None,
    }
}

/// The categories of a check's finding, if the table knows the check.
pub fn of_check(check: &str) -> Option<&'static [&'static str]> {
    CHECKS.iter().find(|(c, _)| *c == check).map(|(_, v)| *v)
}

/// The numeric id of a category name.
pub fn id_of(name: &str) -> Option<u8> {
    CATEGORIES.iter().find(|(n, _)| *n == name).map(|(_, i)| *i)
}

/// The check named by a block reason `auto: <check> (score N)` (retry records keep only
/// the reason).
fn check_of_reason(reason: &str) -> Option<&str> {
    let rest = reason.strip_prefix("auto: ")?;
    let (check, _) = rest.split_once(" (score ")?;
    Some(check)
}

/// The categories a confirmed block is reported under, in table order, without repeats.
pub fn of_block(c: &Confirmed) -> Vec<&'static str> {
    let check = match &c.trigger {
        // An escalated challenge route is reported as its routed check.
        Some(Trigger::Finding(check) | Trigger::Challenge(check)) => Some(check.as_str()),
        Some(_) => None,
        None => check_of_reason(&c.reason),
    };
    let mut out: Vec<&'static str> = Vec::new();
    if let Some(cats) = check.and_then(of_check) {
        out.extend(cats.iter().copied());
    }
    for (k, n) in AttackKind::ALL.iter().zip(c.counts) {
        if n == 0 {
            continue;
        }
        if let Some(cat) = of_kind(*k) {
            if !out.contains(&cat) {
                out.push(cat);
            }
        }
    }
    out.sort_by_key(|n| CATEGORIES.iter().position(|(x, _)| x == n));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(trigger: Option<Trigger>, reason: &str, counts: [u64; 7]) -> Confirmed {
        Confirmed {
            ip: "192.0.2.1".parse().unwrap(),
            trigger,
            reason: reason.into(),
            counts,
            at: 0,
            expires: None,
        }
    }

    #[test]
    fn checks_kinds_and_retry_reasons_map_to_categories() {
        let ssh = block(
            Some(Trigger::Finding("ssh_bruteforce".into())),
            "auto: ssh_bruteforce (score 40)",
            [8, 0, 0, 0, 0, 3, 0],
        );
        assert_eq!(of_block(&ssh), vec!["brute_force", "ssh"]);
        let retry = block(None, "auto: xmlrpc_abuse (score 10)", [0; 7]);
        assert_eq!(of_block(&retry), vec!["brute_force", "web_app_attack"]);
        let score = block(
            Some(Trigger::Score),
            "auto: malicious verdict score 90",
            [0, 1, 0, 2, 4, 0, 0],
        );
        assert_eq!(of_block(&score), vec!["web_app_attack", "hacking"]);
        let logins_only = block(Some(Trigger::Evidence), "auto: x", [0, 0, 0, 0, 0, 9, 1]);
        assert!(of_block(&logins_only).is_empty());
        for (name, _) in CATEGORIES {
            assert!(id_of(name).is_some());
        }
        for (_, cats) in CHECKS {
            assert!(cats.iter().all(|c| id_of(c).is_some()));
        }
        for e in crate::findings::evidence::ATTACK_EVIDENCE {
            if e.attacker {
                assert!(of_check(e.check).is_some(), "{} has no categories", e.check);
            }
        }
    }
}
