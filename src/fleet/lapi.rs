//! The CrowdSec Local API's wire formats: the decisions stream, the watcher login and the
//! alerts push.
//!
//! Guarantees:
//! - Parsers of LAPI answers never panic: an answer that is not the expected JSON is an
//!   error ([`ParseError`]); one decision that cannot be used is classified ([`Skip`]) and
//!   counted by the caller, never fatal to the rest of the answer.
//! - At most [`MAX_DECISIONS`] decisions are taken from one answer (new and deleted
//!   together); the rest are reported as `over_limit` and counted.
//! - Durations are Go durations (`3h59m58.85s`, `-13.8ms`); a negative or zero one is an
//!   expired decision.

use std::net::IpAddr;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::net::cidr::Net;

/// Decisions taken from one stream answer at most.
pub const MAX_DECISIONS: usize = 100_000;
/// Longest scenario or origin kept (characters).
const MAX_TEXT: usize = 128;

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unexpected answer: {}", self.0)
    }
}

impl std::error::Error for ParseError {}

/// One usable ban decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub id: i64,
    pub net: Net,
    /// Time left; `None` for a deleted decision (its duration does not matter).
    pub duration: Option<Duration>,
    pub scenario: String,
    pub origin: String,
}

/// Why a decision was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Skip {
    /// A scope other than `Ip` and `Range` (`Country`, `AS`, `Username`, ...).
    Scope,
    /// A type other than `ban` (`captcha`, `throttle`, ...).
    Type,
    /// The value is not an address or range of its scope, or a field is missing.
    Invalid,
    /// A new decision whose time is already over.
    Expired,
    /// Beyond [`MAX_DECISIONS`] in one answer.
    OverLimit,
}

impl Skip {
    pub const ALL: [Skip; 5] = [
        Skip::Scope,
        Skip::Type,
        Skip::Invalid,
        Skip::Expired,
        Skip::OverLimit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Skip::Scope => "scope",
            Skip::Type => "type",
            Skip::Invalid => "invalid",
            Skip::Expired => "expired",
            Skip::OverLimit => "over_limit",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// A stream answer: usable decisions and the skipped ones by reason.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stream {
    pub new: Vec<Decision>,
    pub deleted: Vec<Decision>,
    /// Decisions received (new and deleted, usable or not).
    pub received: u64,
    pub skipped: Vec<Skip>,
}

#[derive(Deserialize)]
struct RawStream {
    #[serde(default)]
    new: Option<Vec<Value>>,
    #[serde(default)]
    deleted: Option<Vec<Value>>,
}

/// Parses `/v1/decisions/stream`'s answer.
pub fn parse_stream(body: &[u8]) -> Result<Stream, ParseError> {
    let raw: RawStream = serde_json::from_slice(body).map_err(|e| ParseError(e.to_string()))?;
    let mut out = Stream::default();
    let mut taken = 0usize;
    for (list, deleted) in [(raw.new, false), (raw.deleted, true)] {
        for v in list.unwrap_or_default() {
            out.received += 1;
            if taken >= MAX_DECISIONS {
                out.skipped.push(Skip::OverLimit);
                continue;
            }
            taken += 1;
            match decision(&v, deleted) {
                Ok(d) if deleted => out.deleted.push(d),
                Ok(d) => out.new.push(d),
                Err(s) => out.skipped.push(s),
            }
        }
    }
    Ok(out)
}

fn text(v: &Value, k: &str) -> String {
    let s = v.get(k).and_then(Value::as_str).unwrap_or("");
    crate::text::for_log(s, MAX_TEXT)
}

/// One decision object.
fn decision(v: &Value, deleted: bool) -> Result<Decision, Skip> {
    let id = v.get("id").and_then(Value::as_i64).ok_or(Skip::Invalid)?;
    let scope = v
        .get("scope")
        .and_then(Value::as_str)
        .ok_or(Skip::Invalid)?;
    let kind = v.get("type").and_then(Value::as_str).ok_or(Skip::Invalid)?;
    let value = v
        .get("value")
        .and_then(Value::as_str)
        .ok_or(Skip::Invalid)?;
    let net = if scope.eq_ignore_ascii_case("ip") {
        Net::host(
            value
                .trim()
                .parse::<IpAddr>()
                .map_err(|_| Skip::Invalid)?
                .to_canonical(),
        )
    } else if scope.eq_ignore_ascii_case("range") {
        Net::parse(value.trim()).map_err(|_| Skip::Invalid)?
    } else {
        return Err(Skip::Scope);
    };
    if !kind.eq_ignore_ascii_case("ban") {
        return Err(Skip::Type);
    }
    let duration = if deleted {
        None
    } else {
        let d = v
            .get("duration")
            .and_then(Value::as_str)
            .ok_or(Skip::Invalid)?;
        match go_duration(d) {
            Some(d) if !d.is_zero() => Some(d),
            Some(_) => return Err(Skip::Expired),
            None if d.trim_start().starts_with('-') => return Err(Skip::Expired),
            None => return Err(Skip::Invalid),
        }
    };
    Ok(Decision {
        id,
        net,
        duration,
        scenario: text(v, "scenario"),
        origin: text(v, "origin"),
    })
}

/// A Go duration (`72h3m0.5s`, `1.5h`, `300ms`, `-2m`): `None` when it does not parse or
/// is negative. Fractions below a nanosecond are dropped.
pub fn go_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.starts_with('-') {
        return None;
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() || s.len() > 64 {
        return None;
    }
    let b = s.as_bytes();
    let mut i = 0;
    let mut total: f64 = 0.0;
    while i < b.len() {
        let start = i;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
            i += 1;
        }
        let n: f64 = s.get(start..i)?.parse().ok()?;
        let ustart = i;
        while i < b.len() && !(b[i].is_ascii_digit() || b[i] == b'.') {
            i += 1;
        }
        let unit = match s.get(ustart..i)? {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" | "μs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += n * unit;
    }
    if !total.is_finite() || total > 1e11 {
        return None;
    }
    Some(Duration::from_secs_f64(total))
}

/// The watcher login's body.
pub fn login_body(machine_id: &str, password: &str, scenarios: &[String]) -> Vec<u8> {
    json!({ "machine_id": machine_id, "password": password, "scenarios": scenarios })
        .to_string()
        .into_bytes()
}

/// A login answer: the token and when it expires (seconds since the epoch; `None` when the
/// answer has no readable expiry).
#[derive(Clone)]
pub struct Token {
    pub token: String,
    pub expires: Option<i64>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("token", &"<redacted>")
            .field("expires", &self.expires)
            .finish()
    }
}

/// Parses `/v1/watchers/login`'s answer (`{"code":200,"expire":"RFC 3339","token":"..."}`).
pub fn parse_login(body: &[u8]) -> Result<Token, ParseError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| ParseError(e.to_string()))?;
    let token = v
        .get("token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty() && t.len() <= 8192 && !t.chars().any(char::is_control))
        .ok_or_else(|| ParseError("no token".into()))?;
    let expires = v
        .get("expire")
        .and_then(Value::as_str)
        .and_then(|e| e.parse::<jiff::Timestamp>().ok())
        .map(|t| t.as_second());
    Ok(Token {
        token: token.to_string(),
        expires,
    })
}

/// What one alert says: an automatic block of `ip` for `scenario`.
#[derive(Debug, Clone)]
pub struct AlertInput<'a> {
    pub ip: IpAddr,
    pub scenario: &'a str,
    pub events: u64,
    pub server: &'a str,
    pub reason: &'a str,
    /// Block time and its length.
    pub at: jiff::Timestamp,
    pub duration: Duration,
}

/// Formats a duration the way the LAPI reads it (`14400s`).
pub fn duration_text(d: Duration) -> String {
    format!("{}s", d.as_secs().max(1))
}

/// One alert object of `POST /v1/alerts` with its ban decision.
pub fn alert(a: &AlertInput<'_>) -> Value {
    let ip = a.ip.to_canonical().to_string();
    let at = crate::timefmt::rfc3339(a.at);
    let message = format!(
        "svc on {}: {} ({} events)",
        a.server,
        crate::text::for_log(a.reason, 160),
        a.events
    );
    json!({
        "scenario": a.scenario,
        "scenario_hash": "",
        "scenario_version": "",
        "message": message,
        "events_count": a.events.min(i32::MAX as u64),
        "events": [],
        "start_at": at,
        "stop_at": at,
        "capacity": 0,
        "leakspeed": "0",
        "simulated": false,
        "remediation": true,
        "labels": null,
        "source": { "scope": "Ip", "value": ip, "ip": ip },
        "decisions": [{
            "duration": duration_text(a.duration),
            "origin": "crowdsec",
            "scenario": a.scenario,
            "scope": "Ip",
            "type": "ban",
            "value": ip,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let d = |s| go_duration(s).map(|d| d.as_millis());
        assert_eq!(d("3h59m58.852095685s"), Some(14_398_852));
        assert_eq!(d("1h59m58s"), Some(7_198_000));
        assert_eq!(d("300ms"), Some(300));
        assert_eq!(d("1.5h"), Some(5_400_000));
        assert_eq!(d("0"), Some(0));
        assert_eq!(d("-13.816791ms"), None);
        assert_eq!(d("4 hours"), None);
        assert_eq!(d(""), None);
        assert_eq!(d("9999999999h"), None);
    }

    #[test]
    fn a_stream_answer_is_classified_never_fatal() {
        let body = br#"{"deleted":[{"duration":"-1s","id":1,"origin":"cscli","scenario":"test","scope":"Ip","type":"ban","value":"192.0.2.7"}],
            "new":[{"duration":"1h","id":2,"origin":"cscli","scenario":"s","scope":"Range","type":"ban","value":"198.51.100.0/24"},
                   {"duration":"1h","id":3,"origin":"crowdsec","scenario":"s","scope":"Ip","type":"captcha","value":"192.0.2.9"},
                   {"duration":"1h","id":4,"origin":"crowdsec","scenario":"s","scope":"Country","type":"ban","value":"FR"},
                   {"duration":"1h","id":5,"scope":"Ip","type":"ban","value":"not-an-ip"},
                   {"duration":"-2s","id":6,"scope":"Ip","type":"ban","value":"192.0.2.10"},
                   {"duration":"4h","id":7,"scope":"ip","type":"ban","value":"::ffff:192.0.2.11"},
                   17]}"#;
        let s = parse_stream(body).unwrap();
        assert_eq!(s.received, 8);
        assert_eq!(s.deleted.len(), 1);
        assert_eq!(s.deleted[0].net.to_string(), "192.0.2.7");
        let nets: Vec<String> = s.new.iter().map(|d| d.net.to_string()).collect();
        assert_eq!(nets, ["198.51.100.0/24", "192.0.2.11"]);
        assert_eq!(
            s.skipped,
            [
                Skip::Type,
                Skip::Scope,
                Skip::Invalid,
                Skip::Expired,
                Skip::Invalid
            ]
        );
        assert_eq!(
            parse_stream(b"{\"new\":null,\"deleted\":null}")
                .unwrap()
                .received,
            0
        );
        assert!(parse_stream(b"<html>").is_err());
        assert!(parse_stream(b"[1]").is_err());
    }

    #[test]
    fn login_answers() {
        let t = parse_login(br#"{"code":200,"expire":"2026-11-28T04:20:32Z","token":"abc.def"}"#)
            .unwrap();
        assert_eq!(t.token, "abc.def");
        assert!(t.expires.is_some());
        assert!(!format!("{t:?}").contains("abc.def"));
        assert!(parse_login(br#"{"code":401,"message":"bad"}"#).is_err());
    }
}
