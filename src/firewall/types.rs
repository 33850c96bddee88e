//! What callers hand the engine and get back: actors, block items, outcomes and
//! refusals, list entries and check answers, errors.

use std::net::IpAddr;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Map, Value};

use crate::store::StoreError;
use crate::timefmt::rfc3339;

use super::net::Net;
use super::state::Entry;

/// Longest reason text kept.
pub const MAX_REASON: usize = 256;

/// What went wrong with a firewall operation.
#[derive(Debug)]
pub enum FirewallError {
    /// The request is invalid (400).
    Invalid(String),
    /// Nothing to act on (404).
    NotFound(String),
    /// Refused by the rules or the current state (409).
    Refused(String),
    /// A settings change that does not validate (400 with `errors`).
    Settings(Vec<crate::config::ConfigError>),
    /// The store could not commit (503).
    Store(StoreError),
    /// nftables refused; the store keeps the change and the timer retries (500).
    Kernel(String),
}

impl std::fmt::Display for FirewallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FirewallError::Invalid(m) | FirewallError::NotFound(m) | FirewallError::Refused(m) => {
                f.write_str(m)
            }
            FirewallError::Settings(errs) => {
                let v: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                write!(f, "invalid firewall settings: {}", v.join("; "))
            }
            FirewallError::Store(e) => write!(f, "store unavailable: {e}"),
            FirewallError::Kernel(m) => write!(f, "nftables error: {m}"),
        }
    }
}

impl std::error::Error for FirewallError {}

impl From<StoreError> for FirewallError {
    fn from(e: StoreError) -> Self {
        FirewallError::Store(e)
    }
}

/// Who asks for a change.
#[derive(Clone, Debug)]
pub enum Actor {
    /// An operator (API token, browser session, the CLI). `protect` is the caller's own
    /// address, which no block may cover (None with `"force": true`, and for the CLI).
    /// Operator actions always apply.
    Operator {
        name: String,
        protect: Option<IpAddr>,
    },
    /// An automatic caller (threat scoring, WAF escalation). `source` is recorded with the
    /// block (`auto`, ...). Subject to `auto_response.dry_run`.
    Automatic { source: String },
}

impl Actor {
    pub fn operator(name: &str) -> Actor {
        Actor::Operator {
            name: name.into(),
            protect: None,
        }
    }

    /// The source recorded with a block: `operator` or the automatic caller's source.
    pub fn source(&self) -> &str {
        match self {
            Actor::Operator { .. } => "operator",
            Actor::Automatic { source } => source,
        }
    }

    /// Who acted (operator name, or the automatic caller's source).
    pub fn name(&self) -> &str {
        match self {
            Actor::Operator { name, .. } => name,
            Actor::Automatic { source } => source,
        }
    }

    pub fn automatic(&self) -> bool {
        matches!(self, Actor::Automatic { .. })
    }
}

/// One block requested: an address or a subnet, why, and for how long (None: permanent).
#[derive(Clone, Debug)]
pub struct BlockItem {
    pub net: Net,
    pub reason: String,
    pub duration: Option<Duration>,
}

/// Why a block was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    DefaultRoute,
    /// The target is or contains an address of this host (or loopback).
    Local(IpAddr),
    /// The target is or contains a `firewall.infra_ips` entry.
    Infra(Net),
    /// The target is on, or contains an entry of, the allow list.
    Allowed {
        entry: Net,
        reason: String,
    },
    /// The address or subnet covers the caller's own address.
    OwnAddress(IpAddr),
    /// The subnet overlaps a blocked subnet.
    OverlapsSubnet(Net),
    /// `firewall.max_blocks` reached.
    Limit(usize),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::DefaultRoute => {
                f.write_str("a default route (0.0.0.0/0, ::/0) is never blocked")
            }
            Refusal::Local(ip) => write!(f, "{ip} is an address of this host; it is never blocked"),
            Refusal::Infra(n) => write!(
                f,
                "{n} is an infrastructure address (firewall.infra_ips); it is never blocked"
            ),
            Refusal::Allowed { entry, reason } => write!(
                f,
                "allow-list entry {entry} ({}) covers it; remove the allow entry first",
                crate::text::for_log(reason, 80)
            ),
            Refusal::OwnAddress(ip) => {
                write!(
                    f,
                    "it covers your own address {ip}; refusing to lock you out (send \"force\": true to do it anyway)"
                )
            }
            Refusal::OverlapsSubnet(n) => {
                write!(
                    f,
                    "it overlaps blocked subnet {n}; remove that subnet first"
                )
            }
            Refusal::Limit(max) => write!(f, "firewall.max_blocks ({max}) reached"),
        }
    }
}

impl Refusal {
    /// A short token for counters and JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::DefaultRoute => "default_route",
            Refusal::Local(_) => "local",
            Refusal::Infra(_) => "infra",
            Refusal::Allowed { .. } => "allowed",
            Refusal::OwnAddress(_) => "own_address",
            Refusal::OverlapsSubnet(_) => "overlaps_subnet",
            Refusal::Limit(_) => "limit",
        }
    }
}

/// The result of one block item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// In nftables and the store.
    Blocked {
        net: Net,
        expires_at: Option<Timestamp>,
    },
    /// Dry run: recorded, nftables untouched.
    DryRun {
        net: Net,
        expires_at: Option<Timestamp>,
    },
    /// Already blocked as long or longer.
    Unchanged {
        net: Net,
        why: String,
    },
    Refused {
        net: Net,
        refusal: Refusal,
    },
}

impl Outcome {
    pub fn net(&self) -> Net {
        match self {
            Outcome::Blocked { net, .. }
            | Outcome::DryRun { net, .. }
            | Outcome::Unchanged { net, .. }
            | Outcome::Refused { net, .. } => *net,
        }
    }

    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("ip".into(), self.net().to_string().into());
        let exp = |m: &mut Map<String, Value>, e: &Option<Timestamp>| {
            if let Some(t) = e {
                m.insert("expires_at".into(), rfc3339(*t).into());
            }
            m.insert("permanent".into(), e.is_none().into());
        };
        match self {
            Outcome::Blocked { expires_at, .. } => {
                m.insert("result".into(), "blocked".into());
                exp(&mut m, expires_at);
            }
            Outcome::DryRun { expires_at, .. } => {
                m.insert("result".into(), "dry_run".into());
                m.insert("dry_run".into(), true.into());
                exp(&mut m, expires_at);
            }
            Outcome::Unchanged { why, .. } => {
                m.insert("result".into(), "unchanged".into());
                m.insert("warning".into(), why.clone().into());
            }
            Outcome::Refused { refusal, .. } => {
                m.insert("result".into(), "refused".into());
                m.insert("refusal".into(), refusal.kind().into());
                m.insert("error".into(), refusal.to_string().into());
            }
        }
        Value::Object(m)
    }
}

/// Operator-readable text of an outcome, for log lines: `203.0.113.5 blocked until
/// 2026-01-02T00:00:00.000000Z`, `... dry run: would be blocked ...`, `... left as it is:
/// <why>`, `... not blocked: <refusal>`.
impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let until = |e: &Option<Timestamp>| match e {
            Some(t) => format!("until {}", rfc3339(*t)),
            None => "permanently".to_string(),
        };
        match self {
            Outcome::Blocked { net, expires_at } => {
                write!(f, "{net} blocked {}", until(expires_at))
            }
            Outcome::DryRun { net, expires_at } => write!(
                f,
                "{net} recorded as a dry run (auto_response.dry_run): would be blocked {}",
                until(expires_at)
            ),
            Outcome::Unchanged { net, why } => write!(f, "{net} left as it is: {why}"),
            Outcome::Refused { net, refusal } => write!(f, "{net} not blocked: {refusal}"),
        }
    }
}

/// What an allow request changed.
#[derive(Clone, Debug)]
pub struct AllowOutcome {
    pub net: Net,
    pub expires_at: Option<Timestamp>,
    /// Address blocks (and dry-run records) the allow entry replaced.
    pub unblocked: Vec<Net>,
    pub warning: Option<String>,
}

/// One entry of the block list (`/api/v1/blocked-ips`).
#[derive(Clone, Debug)]
pub struct Listed {
    pub net: Net,
    pub entry: Entry,
    pub dry_run: bool,
}

impl Listed {
    pub fn to_json(&self) -> Value {
        entry_json(&self.net, &self.entry, self.dry_run)
    }
}

fn entry_json(net: &Net, e: &Entry, dry_run: bool) -> Value {
    let mut m = Map::new();
    m.insert("ip".into(), net.to_string().into());
    m.insert("reason".into(), e.reason.to_string().into());
    m.insert("source".into(), e.source.to_string().into());
    m.insert("created_at".into(), rfc3339(e.created_at()).into());
    if let Some(x) = e.expires_at() {
        m.insert("expires_at".into(), rfc3339(x).into());
    }
    m.insert("permanent".into(), e.permanent().into());
    if dry_run {
        m.insert("dry_run".into(), true.into());
    }
    if !e.by.is_empty() {
        m.insert("created_by".into(), e.by.to_string().into());
    }
    Value::Object(m)
}

/// The answer of `check`.
#[derive(Clone, Debug)]
pub struct CheckResult {
    pub ip: IpAddr,
    pub block: Option<(Net, Entry)>,
    pub allow: Option<(Net, Entry)>,
    pub infra: Option<Net>,
    pub dry_run: Option<(Net, Entry)>,
    pub now: i64,
}

impl CheckResult {
    /// `{ok, success, ip, blocked, permanent, temporary, expires_at, allowed, infra}`:
    /// `permanent` the reason of a permanent block or subnet, `temporary` the reason with an
    /// expiry phrase, `expires_at` the instant (omitted when not set, like every time);
    /// unknown parts are `null`.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("ok".into(), true.into());
        m.insert("success".into(), true.into());
        m.insert("ip".into(), self.ip.to_canonical().to_string().into());
        m.insert("blocked".into(), self.block.is_some().into());
        let mut permanent = Value::Null;
        let mut temporary = Value::Null;
        if let Some((net, e)) = &self.block {
            let reason = if net.is_host() {
                e.reason.to_string()
            } else {
                format!("{} (subnet {net})", e.reason)
            };
            if e.permanent() {
                permanent = reason.into();
            } else {
                let left = (e.expires - self.now).max(0) as u64 / 1_000_000;
                temporary =
                    format!("{reason} (expires in {})", super::duration::phrase(left)).into();
                if let Some(x) = e.expires_at() {
                    m.insert("expires_at".into(), rfc3339(x).into());
                }
            }
            m.insert("source".into(), e.source.to_string().into());
            m.insert("blocked_by".into(), net.to_string().into());
        }
        m.insert("permanent".into(), permanent);
        m.insert("temporary".into(), temporary);
        m.insert("allowed".into(), self.allow.is_some().into());
        if let Some((net, _)) = &self.allow {
            m.insert("allowed_by".into(), net.to_string().into());
        }
        m.insert("infra".into(), self.infra.is_some().into());
        if let Some((_, e)) = &self.dry_run {
            m.insert("dry_run".into(), entry_json(&Net::host(self.ip), e, true));
        }
        Value::Object(m)
    }
}

/// Checks a reason text: at most [`MAX_REASON`] characters, no control characters.
pub fn check_reason(reason: &str) -> Result<(), FirewallError> {
    if reason.chars().count() > MAX_REASON {
        return Err(FirewallError::Invalid(format!(
            "reason is longer than {MAX_REASON} characters"
        )));
    }
    if reason.chars().any(crate::text::needs_escape) {
        return Err(FirewallError::Invalid(
            "reason must not contain control characters".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 23 item 13: outcomes read as text in log lines, not as Rust `Debug` output.
    #[test]
    fn outcomes_read_as_operator_text() {
        let net = Net::parse("203.0.113.5").unwrap();
        let t = Timestamp::from_second(1_767_312_000).unwrap();
        let cases = [
            (
                Outcome::Blocked {
                    net,
                    expires_at: Some(t),
                },
                "203.0.113.5 blocked until 2026-01-02T00:00:00.000000Z",
            ),
            (
                Outcome::Blocked {
                    net,
                    expires_at: None,
                },
                "203.0.113.5 blocked permanently",
            ),
            (
                Outcome::DryRun {
                    net,
                    expires_at: Some(t),
                },
                "203.0.113.5 recorded as a dry run (auto_response.dry_run): would be blocked until 2026-01-02T00:00:00.000000Z",
            ),
            (
                Outcome::Unchanged {
                    net,
                    why: "already blocked permanently".into(),
                },
                "203.0.113.5 left as it is: already blocked permanently",
            ),
            (
                Outcome::Refused {
                    net,
                    refusal: Refusal::Infra(Net::parse("203.0.113.0/24").unwrap()),
                },
                "203.0.113.5 not blocked: 203.0.113.0/24 is an infrastructure address (firewall.infra_ips); it is never blocked",
            ),
        ];
        for (o, text) in cases {
            assert_eq!(o.to_string(), text);
        }
    }
}
