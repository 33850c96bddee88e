//! `[reputation.report]`: abuse reporting (read at start; every key is a restart key).
//!
//! ```toml
//! [reputation.report]
//! enabled = true                 # default false
//! spool_limit = 10000            # durable reports over every destination, 100..1,000,000
//!
//! [[reputation.report.destinations]]
//! name = "abuseipdb"             # 1-64 of letters, digits, - _ . (unique)
//! url = "https://api.abuseipdb.com/api/v2/report"   # https://, or http:// to loopback only
//! format = "abuseipdb"           # "abuseipdb" (form POST, `Key:` header) or "json"
//! api_key_env = "ABUSEIPDB_KEY"  # environment variable holding the key (required for abuseipdb)
//! dedup_window_hours = 24        # 1..8760: an address and category is reported once per window
//! ```
//!
//! Guarantees: URLs are checked with the same rule as every outbound URL
//! ([`super::alerts::validate_webhook_url`]); the key itself never appears in the
//! configuration (only the variable's name), so it is never printed.

use super::reader::{Errors, TableReader};

/// Destinations at most.
pub const MAX_DESTINATIONS: usize = 8;

/// Wire format of a destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportFormat {
    /// `POST` form `ip`, `categories` (numeric ids), `comment`, `timestamp` with a `Key:`
    /// header: the central reporting service's v2 report call.
    AbuseIpDb,
    /// `POST` of one JSON object (`Authorization: Bearer <key>` when a key is configured).
    Json,
}

impl ReportFormat {
    pub fn name(self) -> &'static str {
        match self {
            ReportFormat::AbuseIpDb => "abuseipdb",
            ReportFormat::Json => "json",
        }
    }
}

/// One `[[reputation.report.destinations]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportDestination {
    pub name: String,
    pub url: String,
    pub format: ReportFormat,
    /// Name of the environment variable with the API key; empty: none (json only).
    pub api_key_env: String,
    pub dedup_window_hours: u64,
}

/// `[reputation.report]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportConfig {
    pub enabled: bool,
    /// Durable reports over every destination (`abuse_reporting.spool` capacity).
    pub spool_limit: usize,
    pub destinations: Vec<ReportDestination>,
}

impl Default for ReportConfig {
    /// The defaults of `config::keys::KEYS`.
    fn default() -> Self {
        read(
            &mut TableReader::new(None, "reputation"),
            &mut Errors::default(),
        )
    }
}

impl ReportConfig {
    /// Whether reports are made (enabled with at least one destination).
    pub fn active(&self) -> bool {
        self.enabled && !self.destinations.is_empty()
    }
}

fn env_name_ok(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 128
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !v.starts_with(|c: char| c.is_ascii_digit())
}

/// Reads `[reputation.report]` from the `[reputation]` reader.
pub(super) fn read(r: &mut TableReader<'_>, errs: &mut Errors) -> ReportConfig {
    let mut t = r.table("report", errs);
    let enabled = t.bool("enabled", errs);
    let spool_limit = t.int("spool_limit", errs) as usize;
    let mut destinations: Vec<ReportDestination> = Vec::new();
    let list = t.table_list("destinations", errs);
    if list.len() > MAX_DESTINATIONS {
        errs.push(
            t.key("destinations"),
            format!("at most {MAX_DESTINATIONS} destinations"),
        );
    }
    for mut x in list {
        let name = x.string("name", errs);
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            errs.push(
                x.key("name"),
                "must be 1-64 characters of letters, digits, - _ .",
            );
        } else if destinations.iter().any(|o| o.name == name) {
            errs.push(
                x.key("name"),
                format!("duplicate destination name {name:?}"),
            );
        }
        let url = x.string("url", errs);
        if url.is_empty() {
            errs.push(x.key("url"), "must be set");
        } else if let Err(e) = super::alerts::validate_webhook_url(&url) {
            errs.push(x.key("url"), e);
        }
        let format = match x.string("format", errs).as_str() {
            "abuseipdb" => ReportFormat::AbuseIpDb,
            "json" => ReportFormat::Json,
            // `string` refused any other value.
            _ => ReportFormat::Json,
        };
        let api_key_env = x.string("api_key_env", errs);
        if !api_key_env.is_empty() && !env_name_ok(&api_key_env) {
            errs.push(
                x.key("api_key_env"),
                "must be an environment variable name (letters, digits, _)",
            );
        } else if api_key_env.is_empty() && format == ReportFormat::AbuseIpDb {
            errs.push(
                x.key("api_key_env"),
                "must name the environment variable holding the API key (format \"abuseipdb\")",
            );
        }
        let dedup_window_hours = x.int("dedup_window_hours", errs) as u64;
        x.finish(errs);
        destinations.push(ReportDestination {
            name,
            url,
            format,
            api_key_env,
            dedup_window_hours,
        });
    }
    if enabled && destinations.is_empty() {
        errs.push(
            t.key("destinations"),
            "at least one destination is needed when enabled = true",
        );
    }
    t.finish(errs);
    ReportConfig {
        enabled,
        spool_limit,
        destinations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn check(text: &str) -> Result<Config, crate::config::ConfigErrors> {
        crate::config::from_text(text)
    }

    #[test]
    fn off_by_default_and_a_full_table_reads() {
        let c = check("").unwrap();
        assert_eq!(c.reputation.report, ReportConfig::default());
        assert!(!c.reputation.report.active());
        let c = check(
            "[reputation.report]\nenabled = true\nspool_limit = 500\n[[reputation.report.destinations]]\nname = \"central\"\nurl = \"https://api.abuseipdb.com/api/v2/report\"\nformat = \"abuseipdb\"\napi_key_env = \"ABUSE_KEY\"\n[[reputation.report.destinations]]\nname = \"mine\"\nurl = \"http://127.0.0.1:9/r\"\ndedup_window_hours = 2\n",
        )
        .unwrap();
        let r = &c.reputation.report;
        assert!(r.active());
        assert_eq!(r.spool_limit, 500);
        assert_eq!(r.destinations[0].format, ReportFormat::AbuseIpDb);
        assert_eq!(r.destinations[0].dedup_window_hours, 24);
        assert_eq!(r.destinations[1].format, ReportFormat::Json);
        assert_eq!(r.destinations[1].api_key_env, "");
        assert_eq!(r.destinations[1].dedup_window_hours, 2);
    }

    #[test]
    fn bad_values_name_their_keys() {
        let e = check(
            "[reputation.report]\nenabled = true\nspool_limit = 5\nbogus = 1\n[[reputation.report.destinations]]\nname = \"a b\"\nurl = \"http://collector.example.com/r\"\nformat = \"xml\"\napi_key_env = \"A-B\"\ndedup_window_hours = 0\n[[reputation.report.destinations]]\nname = \"c\"\nurl = \"https://c.example.com/\"\nformat = \"abuseipdb\"\n",
        )
        .unwrap_err().to_string();
        for k in [
            "reputation.report.spool_limit",
            "reputation.report.bogus",
            "reputation.report.destinations[0].name",
            "reputation.report.destinations[0].url: plain http://",
            "reputation.report.destinations[0].format",
            "reputation.report.destinations[0].api_key_env",
            "reputation.report.destinations[0].dedup_window_hours",
            "reputation.report.destinations[1].api_key_env",
        ] {
            assert!(e.contains(k), "{k} missing in {e}");
        }
        let e = check("[reputation.report]\nenabled = true\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("reputation.report.destinations"), "{e}");
        let e = check(
            "[[reputation.report.destinations]]\nname = \"a\"\nurl = \"https://a.example.com/\"\n[[reputation.report.destinations]]\nname = \"a\"\nurl = \"https://a.example.com/\"\n",
        )
        .unwrap_err().to_string();
        assert!(e.contains("duplicate destination name"), "{e}");
    }
}
