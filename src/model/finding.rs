//! The finding: what a detector reports about the host.

use std::fmt;
use std::net::IpAddr;

use jiff::Timestamp;
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use sha2::{Digest, Sha256};

/// Severity label. Ordered so that `Critical > High > Warning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Severity {
    #[serde(rename = "WARNING")]
    Warning,
    #[serde(rename = "HIGH")]
    High,
    #[serde(rename = "CRITICAL")]
    Critical,
}

impl Severity {
    pub const ALL: [Severity; 3] = [Severity::Critical, Severity::High, Severity::Warning];

    /// The label the API sends.
    pub fn label(self) -> &'static str {
        match self {
            Severity::Warning => "WARNING",
            Severity::High => "HIGH",
            Severity::Critical => "CRITICAL",
        }
    }

    /// The legacy numeric level: 0 = WARNING, 1 = HIGH, 2 = CRITICAL.
    pub fn level(self) -> u8 {
        self as u8
    }

    pub fn from_level(level: u8) -> Option<Severity> {
        match level {
            0 => Some(Severity::Warning),
            1 => Some(Severity::High),
            2 => Some(Severity::Critical),
            _ => None,
        }
    }

    /// Parses a filter value: a label in any letter case, or a level 0, 1 or 2.
    pub fn parse_filter(s: &str) -> Option<Severity> {
        let s = s.trim();
        match s.to_ascii_uppercase().as_str() {
            "WARNING" | "0" => Some(Severity::Warning),
            "HIGH" | "1" => Some(Severity::High),
            "CRITICAL" | "2" => Some(Severity::Critical),
            _ => None,
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One finding. Detectors create it with `first_seen == last_seen` and `count == 1`; the
/// active set merges repeats keyed by (check, message). Serialised with its [`Finding::id`]
/// first.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// snake_case name of the check that produced it.
    pub check: String,
    pub severity: Severity,
    pub message: String,
    pub details: String,
    pub account: Option<String>,
    pub ip: Option<IpAddr>,
    pub path: Option<String>,
    pub first_seen: Timestamp,
    pub last_seen: Timestamp,
    pub count: u64,
}

/// Hex digits of a finding id (64 bits of SHA-256).
pub const FINDING_ID_LEN: usize = 16;

/// The id of the finding keyed (`check`, `message`): the first 64 bits of SHA-256 over the
/// check, a NUL and the message, as lower-case hex. The key is what the active set merges
/// on, so the id stays the same while the finding is active and across restarts (no
/// process-wide random key); hex is URL-safe.
pub fn finding_id(check: &str, message: &str) -> String {
    let mut h = Sha256::new();
    h.update(check.as_bytes());
    h.update([0u8]);
    h.update(message.as_bytes());
    let digest = h.finalize();
    hex::encode(&digest[..FINDING_ID_LEN / 2])
}

/// True for text shaped like a finding id (checked before any lookup, so an id with a path
/// or traversal in it is refused as malformed).
pub fn is_finding_id(s: &str) -> bool {
    s.len() == FINDING_ID_LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Unset optional fields are left out; times follow the instant rule.
impl Serialize for Finding {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Instant(Timestamp);
        impl Serialize for Instant {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                crate::timefmt::ser(&self.0, s)
            }
        }
        let mut st = s.serialize_struct("Finding", 11)?;
        st.serialize_field("id", &self.id())?;
        st.serialize_field("check", &self.check)?;
        st.serialize_field("severity", &self.severity)?;
        st.serialize_field("message", &self.message)?;
        st.serialize_field("details", &self.details)?;
        match &self.account {
            Some(a) => st.serialize_field("account", a)?,
            None => st.skip_field("account")?,
        }
        match &self.ip {
            Some(ip) => st.serialize_field("ip", ip)?,
            None => st.skip_field("ip")?,
        }
        match &self.path {
            Some(p) => st.serialize_field("path", p)?,
            None => st.skip_field("path")?,
        }
        st.serialize_field("first_seen", &Instant(self.first_seen))?;
        st.serialize_field("last_seen", &Instant(self.last_seen))?;
        st.serialize_field("count", &self.count)?;
        st.end()
    }
}

impl Finding {
    /// A new finding seen once at `now`. The message is composed text shown to people:
    /// control and bidirectional-override characters from outside (file names, user names
    /// from log lines) are escaped here, once for every producer (`crate::text`); `path`
    /// keeps the exact name.
    pub fn new(
        check: impl Into<String>,
        severity: Severity,
        message: impl Into<String>,
        now: Timestamp,
    ) -> Finding {
        Finding {
            check: check.into(),
            severity,
            message: escape_message(message.into()),
            details: String::new(),
            account: None,
            ip: None,
            path: None,
            first_seen: now,
            last_seen: now,
            count: 1,
        }
    }

    /// The stable id of this finding ([`finding_id`] of its key).
    pub fn id(&self) -> String {
        finding_id(&self.check, &self.message)
    }

    /// Gives back the spare capacity of every text field. Producers build messages and
    /// details by appending, which leaves up to half of each buffer unused; findings kept in
    /// the active set (tens of thousands during an attack) hold their text exactly.
    pub fn shrink_to_fit(&mut self) {
        self.check.shrink_to_fit();
        self.message.shrink_to_fit();
        self.details.shrink_to_fit();
        for text in [&mut self.account, &mut self.path].into_iter().flatten() {
            text.shrink_to_fit();
        }
    }

    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }

    /// The address the finding is about; an IPv4-mapped IPv6 address is stored as the IPv4
    /// address the firewall blocks (every log parser does this too; this catches the rest).
    pub fn with_ip(mut self, ip: IpAddr) -> Self {
        self.ip = Some(ip.to_canonical());
        self
    }

    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    pub fn with_account(mut self, account: impl Into<String>) -> Self {
        self.account = Some(account.into());
        self
    }
}

fn escape_message(m: String) -> String {
    match crate::text::escape_controls(&m) {
        std::borrow::Cow::Borrowed(_) => m,
        std::borrow::Cow::Owned(escaped) => escaped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_escape_controls_and_bidi_but_paths_stay_exact() {
        let name = "/var/www/a\u{202e}php.txt\n\x1b[2J".to_string();
        let f = Finding::new(
            "webshell",
            Severity::Critical,
            format!("Webshell at {name}"),
            Timestamp::UNIX_EPOCH,
        )
        .with_path(name.clone());
        assert!(
            !f.message.chars().any(crate::text::needs_escape),
            "{:?}",
            f.message
        );
        assert_eq!(f.path.as_deref(), Some(name.as_str()));
    }

    #[test]
    fn severity_filter_accepts_labels_and_levels() {
        assert_eq!(Severity::parse_filter("high"), Some(Severity::High));
        assert_eq!(
            Severity::parse_filter(" Critical "),
            Some(Severity::Critical)
        );
        assert_eq!(Severity::parse_filter("0"), Some(Severity::Warning));
        assert_eq!(Severity::parse_filter("3"), None);
        assert_eq!(Severity::parse_filter("info"), None);
        assert!(Severity::Critical > Severity::High && Severity::High > Severity::Warning);
    }

    #[test]
    fn finding_serialises_labels_and_omits_unset_fields() {
        let t = jiff::Timestamp::from_second(0).unwrap();
        let f = Finding::new("ssh_bruteforce", Severity::High, "m", t);
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["severity"], "HIGH");
        assert_eq!(v["first_seen"], "1970-01-01T00:00:00.000000Z");
        assert!(v.get("ip").is_none());
        assert_eq!(v["id"], finding_id("ssh_bruteforce", "m"));
    }

    #[test]
    fn ids_are_short_hex_of_the_key_only() {
        let t = jiff::Timestamp::from_second(0).unwrap();
        let a = Finding::new("webshell", Severity::Critical, "shell at /a.php", t);
        let mut b = a.clone();
        b.details = "other details".into();
        b.count = 9;
        b.last_seen = jiff::Timestamp::from_second(99).unwrap();
        assert_eq!(
            a.id(),
            b.id(),
            "details, counts and times do not change the id"
        );
        assert!(is_finding_id(&a.id()), "{}", a.id());
        // Fixed by the key alone: the same in every process.
        assert_eq!(finding_id("webshell", "shell at /a.php"), a.id());
        assert_ne!(finding_id("webshell", "shell at /b.php"), a.id());
        assert_ne!(finding_id("webshel", "lshell at /a.php"), a.id());
        for bad in [
            "",
            "../../etc/passwd",
            "0123456789ABCDEF",
            "0123456789abcde",
            "0123456789abcdef0",
        ] {
            assert!(!is_finding_id(bad), "{bad}");
        }
    }

    #[test]
    fn an_ipv4_mapped_address_is_the_ipv4_address() {
        let t = jiff::Timestamp::from_second(0).unwrap();
        let f =
            Finding::new("x", Severity::High, "m", t).with_ip("::ffff:43.0.0.1".parse().unwrap());
        assert_eq!(f.ip, Some("43.0.0.1".parse().unwrap()));
    }
}
