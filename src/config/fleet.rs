//! `[fleet]`: the CrowdSec Local API link (issue 30; read at start, every key is in the
//! restart group `fleet`).
//!
//! ```toml
//! [fleet]
//! lapi_url = "https://lapi.example.net:8080"   # https://, or http:// to loopback only
//! ca_file = "/etc/svc/lapi-ca.pem"             # PEM roots for the LAPI (built-in roots unset)
//! bouncer_key = "..."                          # bouncer side: poll decisions
//! poll_seconds = 10
//! machine_id = "web1"                          # watcher side: push alerts
//! password = "..."
//! ```
//!
//! Guarantees: `bouncer_key` and `password` are secrets: `Debug` prints only whether they
//! are set, `/api/v1/settings` never shows them (`dropins::SECRET_KEYS`). Either side may be
//! configured alone; a side needs `lapi_url`.

use std::path::PathBuf;

use super::reader::{Errors, TableReader};
use super::Redacted;

/// `[fleet]`, validated.
#[derive(Clone, PartialEq, Eq)]
pub struct FleetConfig {
    /// `fleet.lapi_url`: base URL of the Local API (without `/v1`); empty: fleet mode off.
    pub lapi_url: String,
    /// `fleet.ca_file`: PEM roots trusted for the LAPI instead of the built-in ones.
    pub ca_file: Option<PathBuf>,
    /// `fleet.bouncer_key`: the bouncer's API key (`cscli bouncers add`); empty: no bouncer.
    pub bouncer_key: String,
    /// `fleet.poll_seconds`: seconds between decision-stream polls.
    pub poll_seconds: u64,
    /// `fleet.machine_id` / `fleet.password`: the watcher's login (`cscli machines add`);
    /// empty: no watcher.
    pub machine_id: String,
    pub password: String,
    /// `fleet.timeout_seconds`: deadline of one LAPI request.
    pub timeout_seconds: u64,
}

impl std::fmt::Debug for FleetConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetConfig")
            .field("lapi_url", &self.lapi_url)
            .field("ca_file", &self.ca_file)
            .field("bouncer_key", &Redacted(&self.bouncer_key))
            .field("poll_seconds", &self.poll_seconds)
            .field("machine_id", &self.machine_id)
            .field("password", &Redacted(&self.password))
            .field("timeout_seconds", &self.timeout_seconds)
            .finish()
    }
}

impl Default for FleetConfig {
    /// The defaults of `config::keys::KEYS`.
    fn default() -> Self {
        read(&mut TableReader::new(None, ""), &mut Errors::default())
    }
}

impl FleetConfig {
    /// The bouncer side runs (URL and key set).
    pub fn bouncer(&self) -> bool {
        !self.lapi_url.is_empty() && !self.bouncer_key.is_empty()
    }

    /// The watcher side runs (URL, machine id and password set).
    pub fn watcher(&self) -> bool {
        !self.lapi_url.is_empty() && !self.machine_id.is_empty() && !self.password.is_empty()
    }
}

fn secret_ok(v: &str) -> bool {
    v.len() <= 256 && !v.chars().any(|c| c.is_control() || c == ' ')
}

/// Reads `[fleet]` from the root table.
pub(super) fn read(root: &mut TableReader<'_>, errs: &mut Errors) -> FleetConfig {
    let mut t = root.table("fleet", errs);
    let lapi_url = t.string("lapi_url", errs);
    if !lapi_url.is_empty() {
        if let Err(e) = super::alerts::validate_webhook_url(&lapi_url) {
            errs.push(t.key("lapi_url"), e);
        }
    }
    let ca = t.string("ca_file", errs);
    let ca_file = if ca.is_empty() {
        None
    } else {
        if !ca.starts_with('/') {
            errs.push(t.key("ca_file"), "must be an absolute path");
        }
        Some(PathBuf::from(ca))
    };
    let bouncer_key = t.string("bouncer_key", errs);
    if !secret_ok(&bouncer_key) {
        errs.push(
            t.key("bouncer_key"),
            "must be at most 256 characters without spaces or control characters",
        );
    }
    let poll_seconds = t.int("poll_seconds", errs) as u64;
    let machine_id = t.string("machine_id", errs);
    if machine_id.len() > 128
        || !machine_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        errs.push(
            t.key("machine_id"),
            "must be at most 128 characters of letters, digits, - _ .",
        );
    }
    let password = t.string("password", errs);
    if !secret_ok(&password) {
        errs.push(
            t.key("password"),
            "must be at most 256 characters without spaces or control characters",
        );
    }
    if machine_id.is_empty() != password.is_empty() {
        errs.push(
            t.key(if machine_id.is_empty() {
                "machine_id"
            } else {
                "password"
            }),
            "must be set together with the other (or both left empty)",
        );
    }
    let timeout_seconds = t.int("timeout_seconds", errs) as u64;
    if lapi_url.is_empty() && (!bouncer_key.is_empty() || !machine_id.is_empty()) {
        errs.push(
            t.key("lapi_url"),
            "must be set when bouncer_key or machine_id is",
        );
    }
    t.finish(errs);
    FleetConfig {
        lapi_url: lapi_url.trim_end_matches('/').to_string(),
        ca_file,
        bouncer_key,
        poll_seconds,
        machine_id,
        password,
        timeout_seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_sides_and_never_prints_secrets() {
        let c = crate::config::from_text(
            "[fleet]\nlapi_url = \"http://127.0.0.1:8080/\"\nbouncer_key = \"bk-secret-1\"\nmachine_id = \"web1\"\npassword = \"pw-secret-2\"\n",
        )
        .unwrap();
        let f = &c.fleet;
        assert_eq!(f.lapi_url, "http://127.0.0.1:8080");
        assert!(f.bouncer() && f.watcher());
        assert_eq!(f.poll_seconds, 10);
        let printed = format!("{c:?}");
        assert!(!printed.contains("bk-secret-1") && !printed.contains("pw-secret-2"));
        assert!(!FleetConfig::default().bouncer());
    }

    #[test]
    fn refuses_plain_http_off_loopback_and_half_logins() {
        let e = crate::config::from_text(
            "[fleet]\nlapi_url = \"http://192.0.2.1:8080\"\nmachine_id = \"web1\"\n",
        )
        .unwrap_err();
        let text: Vec<String> = e.0.iter().map(|e| e.to_string()).collect();
        assert!(
            text.iter()
                .any(|t| t.starts_with("fleet.lapi_url: plain http://")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.starts_with("fleet.password: must be set together")),
            "{text:?}"
        );
    }
}
