//! [`WafEvent`]: one rule match a web server logged, as the WAF log parsers produce it and
//! the store keeps it (`waf_events` rows).

use std::net::IpAddr;

use jiff::Timestamp;
use serde::Serialize;

use super::finding::Severity;

/// What the engine did with the request for this rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// The request was refused (ModSecurity "Access denied", an intercepted transaction, or
    /// a rule whose disruptive action is deny/drop/redirect).
    Deny,
    /// The rule matched and the request went on ("Warning.", `pass`, `allow`).
    Pass,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "deny",
            Action::Pass => "pass",
        }
    }

    pub fn parse(s: &str) -> Option<Action> {
        match s {
            "deny" => Some(Action::Deny),
            "pass" => Some(Action::Pass),
            _ => None,
        }
    }
}

/// Which log format an event came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Apache `error.log` (mod_security2).
    ApacheError,
    /// nginx `error.log` (libmodsecurity 3 connector).
    NginxError,
    /// LiteSpeed `error.log` (its ModSecurity-compatible engine).
    LiteSpeed,
    /// A JSON audit log line (`SecAuditLogFormat JSON`, ModSecurity 2 or 3).
    JsonAudit,
    /// A native multipart audit log entry (sections A to K, Z).
    NativeAudit,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::ApacheError => "apache_error",
            Format::NginxError => "nginx_error",
            Format::LiteSpeed => "litespeed",
            Format::JsonAudit => "json_audit",
            Format::NativeAudit => "native_audit",
        }
    }

    /// The web server a format implies (`None` for audit logs, which every engine writes).
    pub fn server(self) -> Option<&'static str> {
        match self {
            Format::ApacheError => Some("apache"),
            Format::NginxError => Some("nginx"),
            Format::LiteSpeed => Some("litespeed"),
            Format::JsonAudit | Format::NativeAudit => None,
        }
    }
}

/// Longest kept host name, URI, message, method and unique id (characters); longer values
/// are cut (outside input, stored and shown).
pub const MAX_HOST: usize = 255;
pub const MAX_URI: usize = 2048;
pub const MAX_MESSAGE: usize = 512;
pub const MAX_METHOD: usize = 32;
pub const MAX_UNIQUE_ID: usize = 128;

/// One rule match. Fields a format does not carry are empty (`host`, `uri`, `method`) or
/// `None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WafEvent {
    pub at: Timestamp,
    /// The client, IPv4-mapped IPv6 normalised to IPv4.
    pub ip: IpAddr,
    pub host: String,
    pub uri: String,
    pub method: String,
    pub rule_id: Option<u32>,
    pub message: String,
    pub severity: Severity,
    pub action: Action,
    pub format: Format,
    /// The engine's transaction id (correlates the error-log line and the audit-log entry
    /// of one request).
    pub unique_id: Option<String>,
    /// HTTP status of the answer, when the format carries it.
    pub status: Option<u16>,
}

impl WafEvent {
    /// Cuts every text field to its limit (on a character boundary).
    pub fn bounded(mut self) -> WafEvent {
        cut(&mut self.host, MAX_HOST);
        cut(&mut self.uri, MAX_URI);
        cut(&mut self.message, MAX_MESSAGE);
        cut(&mut self.method, MAX_METHOD);
        if let Some(u) = &mut self.unique_id {
            cut(u, MAX_UNIQUE_ID);
        }
        self
    }

    /// The correlation key of the transaction and rule (duplicates of one match reported by
    /// two logs share it); `None` without a transaction id.
    pub fn dedupe_key(&self) -> Option<(String, Option<u32>)> {
        self.unique_id.clone().map(|u| (u, self.rule_id))
    }
}

fn cut(s: &mut String, max: usize) {
    if let Some((i, _)) = s.char_indices().nth(max) {
        s.truncate(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_cuts_on_char_boundaries() {
        let e = WafEvent {
            at: Timestamp::UNIX_EPOCH,
            ip: "203.0.113.9".parse().unwrap(),
            host: "é".repeat(300),
            uri: "/".repeat(5000),
            method: "GET".into(),
            rule_id: Some(1),
            message: "m".into(),
            severity: Severity::Warning,
            action: Action::Deny,
            format: Format::ApacheError,
            unique_id: None,
            status: None,
        }
        .bounded();
        assert_eq!(e.host.chars().count(), MAX_HOST);
        assert_eq!(e.uri.len(), MAX_URI);
        assert_eq!(Action::parse(Action::Deny.as_str()), Some(Action::Deny));
    }
}
