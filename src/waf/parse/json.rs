//! JSON audit-log lines (`SecAuditLogFormat JSON`), one transaction per line.
//!
//! ModSecurity 3 (libmodsecurity):
//! `{"transaction":{"client_ip":A,"time_stamp":"Mon Nov 23 17:10:27 2026","unique_id":U,
//! "request":{"method":M,"uri":P,"headers":{...}},"response":{"http_code":403},
//! "messages":[{"message":T,"details":{"ruleId":"900112","severity":"4","data":D}}]}}`
//!
//! ModSecurity 2 (mod_security2 with YAJL):
//! `{"transaction":{"time":"23/Nov/2026:17:08:58.549147 +0000","transaction_id":U,
//! "remote_address":A},"request":{"request_line":"GET / HTTP/1.1","headers":{...}},
//! "response":{"status":403},"audit_data":{"messages":["Access denied ... [id ...]"],
//! "action":{"intercepted":true}}}`

use std::borrow::Cow;
use std::collections::BTreeMap;

use jiff::tz::TimeZone;
use jiff::Timestamp;
use serde::Deserialize;

use super::super::event::{Action, Format, WafEvent};
use super::fields;
use super::time::{self, Cache};
use super::{host_without_port, parse_addr, rule_id, severity, Outcome, RuleActions};

/// Messages read from one transaction at most.
const MAX_JSON_MESSAGES: usize = 64;

#[derive(Deserialize)]
struct Root<'a> {
    #[serde(borrow)]
    transaction: Tx<'a>,
    #[serde(borrow, default)]
    request: Option<Request<'a>>,
    #[serde(default)]
    response: Option<Response>,
    #[serde(borrow, default)]
    audit_data: Option<AuditData<'a>>,
}

#[derive(Deserialize)]
struct Tx<'a> {
    // ModSecurity 3.
    #[serde(borrow, default)]
    client_ip: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    time_stamp: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    unique_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    request: Option<Request<'a>>,
    #[serde(default)]
    response: Option<Response>,
    #[serde(borrow, default)]
    messages: Vec<Message3<'a>>,
    // ModSecurity 2.
    #[serde(borrow, default)]
    remote_address: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    time: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    transaction_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uri: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    request_line: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    headers: BTreeMap<Cow<'a, str>, serde_json::Value>,
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    http_code: Option<u16>,
    #[serde(default)]
    status: Option<u16>,
}

#[derive(Deserialize)]
struct Message3<'a> {
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    details: Option<Details<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Details<'a> {
    #[serde(borrow, default)]
    rule_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    severity: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "match")]
    matched: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct AuditData<'a> {
    #[serde(borrow, default)]
    messages: Vec<Cow<'a, str>>,
    #[serde(default)]
    action: Option<AuditAction>,
}

#[derive(Deserialize)]
struct AuditAction {
    #[serde(default)]
    intercepted: bool,
}

fn host_header(req: Option<&Request<'_>>) -> String {
    req.and_then(|r| {
        r.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("host"))
            .and_then(|(_, v)| v.as_str())
            .map(|h| host_without_port(h).to_string())
    })
    .unwrap_or_default()
}

pub(crate) fn line(
    line: &str,
    tz: &TimeZone,
    times: &mut Cache,
    now: Timestamp,
    actions: &dyn RuleActions,
    out: &mut Vec<WafEvent>,
) -> Outcome {
    if !line.starts_with("{\"transaction\"") {
        return Outcome::NotMine;
    }
    let Ok(root) = serde_json::from_str::<Root<'_>>(line) else {
        return Outcome::Unreadable;
    };
    let tx = &root.transaction;
    let Some(ip) = tx
        .client_ip
        .as_deref()
        .or(tx.remote_address.as_deref())
        .and_then(parse_addr)
    else {
        return Outcome::Unreadable;
    };
    let request = tx.request.as_ref().or(root.request.as_ref());
    let (method, uri) = match request {
        Some(r) if r.method.is_some() || r.uri.is_some() => (
            r.method.as_deref().unwrap_or("").to_string(),
            r.uri.as_deref().unwrap_or("").to_string(),
        ),
        Some(r) => {
            let mut parts = r.request_line.as_deref().unwrap_or("").split(' ');
            (
                parts.next().unwrap_or("").to_string(),
                parts.next().unwrap_or("").to_string(),
            )
        }
        None => (String::new(), String::new()),
    };
    let host = host_header(request);
    let status = tx
        .response
        .as_ref()
        .or(root.response.as_ref())
        .and_then(|r| r.http_code.or(r.status));
    let unique_id = tx
        .unique_id
        .as_deref()
        .or(tx.transaction_id.as_deref())
        .filter(|u| !u.is_empty())
        .map(str::to_string);
    let at = match (tx.time_stamp.as_deref(), tx.time.as_deref()) {
        (Some(ts), _) => times.ctime(ts, tz),
        (None, Some(t)) => time::audit(t),
        _ => None,
    }
    .unwrap_or(now);
    let refused = status.is_some_and(|s| (400..600).contains(&s));
    let base = |rule: Option<u32>, message: String, sev: crate::findings::Severity, action| {
        WafEvent {
            at,
            ip,
            host: host.clone(),
            uri: uri.clone(),
            method: method.clone(),
            rule_id: rule,
            message,
            severity: sev,
            action,
            format: Format::JsonAudit,
            unique_id: unique_id.clone(),
            status,
        }
        .bounded()
    };
    if let Some(audit) = &root.audit_data {
        // ModSecurity 2: each message is the error-log text.
        let intercepted = audit.action.as_ref().is_some_and(|a| a.intercepted);
        for text in audit.messages.iter().take(MAX_JSON_MESSAGES) {
            let m = fields::message(text);
            let rule = m.fields.id.as_deref().and_then(rule_id);
            let action = match m.disposition {
                Some(a) => a,
                None if intercepted && refused => Action::Deny,
                None => Action::Pass,
            };
            if rule.is_none() && action == Action::Pass {
                continue;
            }
            let msg = m
                .fields
                .msg
                .as_deref()
                .filter(|s| !s.is_empty())
                .unwrap_or(m.head)
                .to_string();
            out.push(base(
                rule,
                msg,
                severity(m.fields.severity.as_deref(), action),
                action,
            ));
        }
        return Outcome::Read;
    }
    // ModSecurity 3: messages carry no disposition; the registry decides, else a refused
    // answer marks its last message as the deny.
    let n = tx.messages.len().min(MAX_JSON_MESSAGES);
    for (i, m) in tx.messages.iter().take(MAX_JSON_MESSAGES).enumerate() {
        let d = m.details.as_ref();
        let rule = d.and_then(|d| d.rule_id.as_deref()).and_then(rule_id);
        let action = match rule.and_then(|r| actions.action(r)) {
            Some(a) => a,
            None if refused && i + 1 == n => Action::Deny,
            None => Action::Pass,
        };
        if rule.is_none() && action == Action::Pass {
            continue;
        }
        let msg = m
            .message
            .as_deref()
            .filter(|s| !s.is_empty())
            .or(d.and_then(|d| d.matched.as_deref()))
            .unwrap_or("")
            .to_string();
        out.push(base(
            rule,
            msg,
            severity(d.and_then(|d| d.severity.as_deref()), action),
            action,
        ));
    }
    Outcome::Read
}
