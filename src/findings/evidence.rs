//! What a finding is evidence of, beyond its severity: which checks name an attacker's
//! address, and which attack-database event each address-carrying check records.
//!
//! Adding a collector that names addresses: add one line to [`ATTACK_EVIDENCE`]. Its
//! findings then feed the attack database (`threat`), and when `attacker` is true
//! also automatic blocking and the enriched route's `block_ip`.

use super::Finding;

/// Attack-database event types (spec "Threat intelligence"). Names are stable API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AttackKind {
    BruteForce,
    WebshellUpload,
    Phishing,
    CommandAndControl,
    WafBlock,
    /// Authenticated activity (successful logins, authenticated file-manager writes): kept
    /// in history and account counts, never scored (rule 1).
    AuthSuccess,
    /// Readable in historical records; no current check produces it.
    FileUpload,
}

impl AttackKind {
    pub const ALL: [AttackKind; 7] = [
        AttackKind::BruteForce,
        AttackKind::WebshellUpload,
        AttackKind::Phishing,
        AttackKind::CommandAndControl,
        AttackKind::WafBlock,
        AttackKind::AuthSuccess,
        AttackKind::FileUpload,
    ];

    /// Position in [`AttackKind::ALL`] (and in stored count columns).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The API name (`type` of an event).
    pub fn name(self) -> &'static str {
        match self {
            AttackKind::BruteForce => "brute_force",
            AttackKind::WebshellUpload => "webshell_upload",
            AttackKind::Phishing => "phishing",
            AttackKind::CommandAndControl => "command_and_control",
            AttackKind::WafBlock => "waf_block",
            AttackKind::AuthSuccess => "auth_success",
            AttackKind::FileUpload => "file_upload",
        }
    }

    /// The label pages show.
    pub fn label(self) -> &'static str {
        match self {
            AttackKind::BruteForce => "Brute force",
            AttackKind::WebshellUpload => "Webshell upload",
            AttackKind::Phishing => "Phishing",
            AttackKind::CommandAndControl => "Command and control",
            AttackKind::WafBlock => "WAF block",
            AttackKind::AuthSuccess => "Authenticated Activity",
            AttackKind::FileUpload => "File upload",
        }
    }

    pub fn parse(name: &str) -> Option<AttackKind> {
        AttackKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether events of this kind add to a score (not `auth_success`, not the historical
    /// `file_upload`).
    pub fn scored(self) -> bool {
        !matches!(self, AttackKind::AuthSuccess | AttackKind::FileUpload)
    }
}

/// One check whose findings carry an address in `ip`.
pub struct Evidence {
    pub check: &'static str,
    pub kind: AttackKind,
    /// The address is the attacker's own: automatic blocking acts on it.
    pub attacker: bool,
}

/// Every check whose findings put an address in `ip`, with what that address did.
pub const ATTACK_EVIDENCE: &[Evidence] = &[
    // Authentication-log detector (watch/authlog).
    Evidence {
        check: "ssh_bruteforce",
        kind: AttackKind::BruteForce,
        attacker: true,
    },
    Evidence {
        check: "pam_bruteforce",
        kind: AttackKind::BruteForce,
        attacker: true,
    },
    // Successful logins: history and account counts only (rule 1).
    Evidence {
        check: "ssh_root_login",
        kind: AttackKind::AuthSuccess,
        attacker: false,
    },
    Evidence {
        check: "auth_new_address_login",
        kind: AttackKind::AuthSuccess,
        attacker: false,
    },
    // WAF deny escalation (issue 12): repeated denies from one address.
    Evidence {
        check: "modsec_block_escalation",
        kind: AttackKind::WafBlock,
        attacker: true,
    },
    // Mail-log reader (issue 14): SMTP AUTH failures from one address.
    Evidence {
        check: "mail_auth_bruteforce",
        kind: AttackKind::BruteForce,
        attacker: true,
    },
    // Access-log login floods (issue 15).
    Evidence {
        check: "wp_login_bruteforce",
        kind: AttackKind::BruteForce,
        attacker: true,
    },
    Evidence {
        check: "xmlrpc_abuse",
        kind: AttackKind::BruteForce,
        attacker: true,
    },
    // Access-log reconnaissance and crawler identity (issue 15, decision 225).
    Evidence {
        check: "wp_user_enumeration",
        kind: AttackKind::BruteForce,
        attacker: true,
    },
    Evidence {
        check: "http_scanner_profile",
        kind: AttackKind::WafBlock,
        attacker: true,
    },
    Evidence {
        check: "http_ua_spoof",
        kind: AttackKind::WafBlock,
        attacker: true,
    },
    // Not proof of abuse (the crawler may be real and unverifiable): scored, never blocked.
    Evidence {
        check: "http_claimed_bot_unverified",
        kind: AttackKind::WafBlock,
        attacker: false,
    },
];

/// Checks whose findings name an attacker's address in `ip`: the evidence automatic
/// blocking acts on, and the only findings the enriched route offers `block_ip` for.
/// Other findings may carry an address (a cron line's download host, a client of a
/// suspicious request, a successful login) that is not the attacker's own.
pub fn reports_attacker_address(check: &str) -> bool {
    evidence_of(check).is_some_and(|e| e.attacker)
}

/// What a finding of `check` records in the attack database, if anything.
pub fn evidence_of(check: &str) -> Option<&'static Evidence> {
    ATTACK_EVIDENCE.iter().find(|e| e.check == check)
}

/// Longest account name taken from a finding.
const MAX_ACCOUNT: usize = 64;
/// Accounts taken from one finding at most.
const MAX_ACCOUNTS: usize = 8;

/// Accounts a finding says were targeted: its `account`, the user names a brute-force
/// finding lists in its details (`...; users: a, b (+3 more); services: ...`), the user of
/// a successful login (`SSH root login ...` is `root`, `Login as <user> from new address`).
pub fn targeted_accounts(f: &Finding) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        let s = s.trim();
        if s.is_empty() || out.len() >= MAX_ACCOUNTS || has_control(s) {
            return;
        }
        // At most MAX_ACCOUNT characters, cut at a character boundary (one copy).
        let s = match s.char_indices().nth(MAX_ACCOUNT) {
            Some((end, _)) => s.get(..end).unwrap_or(s),
            None => s,
        };
        if !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    };
    if let Some(a) = &f.account {
        push(a);
    }
    match f.check.as_str() {
        "ssh_bruteforce" | "pam_bruteforce" => {
            // The text between the first "; users: " and the next one (if any), up to
            // "; services:", then up to " (+".
            if let Some(rest) = after(&f.details, &USERS) {
                let rest = before(rest, &USERS);
                let list = before(before(rest, &SERVICES), &MORE);
                if list != "(none logged)" {
                    for u in list.split(", ") {
                        push(u);
                    }
                }
            }
        }
        "ssh_root_login" => push("root"),
        "auth_new_address_login" => {
            if let Some(rest) = f.message.strip_prefix("Login as ") {
                if let Some((user, _)) = rest.rsplit_once(" from new address ") {
                    push(user);
                }
            }
        }
        _ => {}
    }
    out
}

/// Whether `s` holds a control character (C0, DEL or C1), looked at byte by byte when ASCII.
fn has_control(s: &str) -> bool {
    if s.is_ascii() {
        s.bytes().any(|b| b.is_ascii_control())
    } else {
        s.chars().any(char::is_control)
    }
}

/// Searchers of the separators in a brute-force finding's details, built once.
static USERS: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new("; users: "));
static SERVICES: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new("; services:"));
static MORE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(" (+"));

/// The text after the first match of `pat` in `s`.
fn after<'a>(s: &'a str, pat: &memchr::memmem::Finder<'_>) -> Option<&'a str> {
    let i = pat.find(s.as_bytes())?;
    s.get(i + pat.needle().len()..)
}

/// The text before the first match of `pat` in `s` (all of it without one).
fn before<'a>(s: &'a str, pat: &memchr::memmem::Finder<'_>) -> &'a str {
    match pat.find(s.as_bytes()) {
        Some(i) => s.get(..i).unwrap_or(s),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Severity;

    /// The accounts as the first version computed them (char-by-char), for comparison.
    fn targeted_accounts_reference(f: &Finding) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut push = |s: &str| {
            let s = s.trim();
            if s.is_empty() || out.len() >= MAX_ACCOUNTS || s.chars().any(char::is_control) {
                return;
            }
            let s: String = s.chars().take(MAX_ACCOUNT).collect();
            if !out.contains(&s) {
                out.push(s);
            }
        };
        if let Some(a) = &f.account {
            push(a);
        }
        if let Some(rest) = f.details.split("; users: ").nth(1) {
            let list = rest.split("; services:").next().unwrap_or("");
            let list = list.split(" (+").next().unwrap_or("");
            if list != "(none logged)" {
                for u in list.split(", ") {
                    push(u);
                }
            }
        }
        out
    }

    #[test]
    fn account_extraction_matches_the_reference_on_odd_details() {
        let long = "é".repeat(70);
        let details = [
            "5 failed logins within 600 s; users: root, admin (+2 more); services: sshd"
                .to_string(),
            "x; users: a; users: b; services: c".to_string(),
            "x; users: a, b\u{85}c, , d ".to_string(),
            format!("x; users: {long}, {long}x, b\u{7f}"),
            "x; users: (none logged); services: s".to_string(),
            "x; users: ; services:".to_string(),
            "no list here".to_string(),
            "x; users: a, a, b, c, d, e, f, g, h, i, j".to_string(),
            format!("x; users: {}", "z".repeat(200)),
        ];
        for d in details {
            let mut f = Finding::new(
                "ssh_bruteforce",
                Severity::High,
                "m",
                jiff::Timestamp::UNIX_EPOCH,
            )
            .with_details(d.clone());
            assert_eq!(
                targeted_accounts(&f),
                targeted_accounts_reference(&f),
                "{d:?}"
            );
            f.account = Some(format!(" {long} "));
            assert_eq!(
                targeted_accounts(&f),
                targeted_accounts_reference(&f),
                "{d:?}"
            );
        }
    }

    #[test]
    fn only_attack_checks_report_attackers() {
        assert!(reports_attacker_address("ssh_bruteforce"));
        assert!(reports_attacker_address("pam_bruteforce"));
        assert!(reports_attacker_address("modsec_block_escalation"));
        assert!(reports_attacker_address("mail_auth_bruteforce"));
        for c in crate::watch::accesslog::CHECKS {
            assert!(evidence_of(c).is_some(), "{c}");
        }
        assert!(reports_attacker_address("http_scanner_profile"));
        assert!(!reports_attacker_address("http_claimed_bot_unverified"));
        assert!(!reports_attacker_address("ssh_root_login"));
        assert!(!reports_attacker_address("suspicious_cron"));
        assert!(!reports_attacker_address("webshell"));
        assert_eq!(
            evidence_of("auth_new_address_login").unwrap().kind,
            AttackKind::AuthSuccess
        );
        for k in AttackKind::ALL {
            assert_eq!(AttackKind::parse(k.name()), Some(k));
            assert_eq!(AttackKind::ALL[k.index()], k);
        }
        assert!(!AttackKind::AuthSuccess.scored() && AttackKind::WafBlock.scored());
    }

    #[test]
    fn accounts_from_findings() {
        let now = jiff::Timestamp::from_second(1_767_225_600).unwrap();
        let f = Finding::new("ssh_bruteforce", Severity::High, "SSH brute force from 192.0.2.7", now)
            .with_details("6 failed logins from 192.0.2.7 within 600 s (threshold 5); users: root, admin, bob (+2 more); services: sshd");
        assert_eq!(targeted_accounts(&f), vec!["root", "admin", "bob"]);
        let f = Finding::new("pam_bruteforce", Severity::High, "m", now)
            .with_details("5 failed logins; users: (none logged); services: vsftpd");
        assert!(targeted_accounts(&f).is_empty());
        let f = Finding::new(
            "auth_new_address_login",
            Severity::Warning,
            "Login as deploy from new address 192.0.2.9",
            now,
        );
        assert_eq!(targeted_accounts(&f), vec!["deploy"]);
        let f = Finding::new(
            "ssh_root_login",
            Severity::Warning,
            "SSH root login from x",
            now,
        );
        assert_eq!(targeted_accounts(&f), vec!["root"]);
        // Hostile text never panics and control characters are dropped.
        let f = Finding::new("ssh_bruteforce", Severity::High, "m", now)
            .with_details("; users: a\u{1b}b, ; services:");
        assert!(targeted_accounts(&f).is_empty());
    }
}
