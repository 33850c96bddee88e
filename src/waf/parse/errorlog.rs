//! Error-log lines: Apache (mod_security2), nginx (libmodsecurity 3 connector), LiteSpeed.

use jiff::tz::TimeZone;
use jiff::Timestamp;
use memchr::memmem;

use super::super::event::{Action, Format, WafEvent};
use super::fields::{self, ModsecMessage};
use super::time::Cache;
use super::{host_without_port, parse_addr, rule_id, severity, Outcome, RuleActions};

const MARKER: &str = "ModSecurity: ";

pub(crate) fn line(
    line: &str,
    tz: &TimeZone,
    times: &mut Cache,
    now: Timestamp,
    actions: &dyn RuleActions,
    out: &mut Vec<WafEvent>,
) -> Outcome {
    match line.as_bytes().first() {
        Some(b'[') => apache(line, tz, times, now, out),
        Some(b'0'..=b'9') => {
            // nginx `2026/11/23 ...`, LiteSpeed `2026-11-23 ...`.
            match line.as_bytes().get(4) {
                Some(b'/') => nginx(line, tz, times, now, out),
                Some(b'-') => litespeed(line, tz, times, now, actions, out),
                _ => Outcome::NotMine,
            }
        }
        _ => Outcome::NotMine,
    }
}

/// The last `[client A]` in `prefix` (Apache writes `[client A:port] [client A]`: the
/// second, ModSecurity's, has no port, which keeps IPv6 unambiguous). It must end the
/// prefix (only spaces after it): the marker of a genuine ModSecurity line follows the
/// client field directly, while the same words inside another module's message (a PHP
/// warning quoting them) follow other text.
fn last_client(prefix: &str) -> Option<&str> {
    let mut found = None;
    let mut rest = prefix;
    while let Some(i) = rest.find("[client ") {
        let after = rest.get(i + 8..)?;
        let end = after.find(']')?;
        found = after.get(..end);
        rest = after.get(end + 1..)?;
    }
    if !rest.trim().is_empty() {
        return None;
    }
    found
}

/// Builds the event of one message; `None` for engine notices (no rule and no deny).
#[allow(clippy::too_many_arguments)]
fn event(
    m: &ModsecMessage<'_>,
    action: Action,
    ip: std::net::IpAddr,
    at: Timestamp,
    format: Format,
    host: Option<&str>,
    uri: Option<&str>,
    method: Option<&str>,
) -> Option<WafEvent> {
    let f = &m.fields;
    let rule = f.id.as_deref().and_then(rule_id);
    if rule.is_none() && action == Action::Pass {
        return None;
    }
    let message = f
        .msg
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or(m.head)
        .to_string();
    Some(
        WafEvent {
            at,
            ip,
            host: host
                .or(f.hostname.as_deref())
                .map(host_without_port)
                .unwrap_or("")
                .to_string(),
            uri: uri.or(f.uri.as_deref()).unwrap_or("").to_string(),
            method: method
                .or_else(|| fields::method_of(f.data.as_deref()))
                .unwrap_or("")
                .to_string(),
            rule_id: rule,
            message,
            severity: severity(f.severity.as_deref(), action),
            action,
            format,
            unique_id: f
                .unique_id
                .as_deref()
                .filter(|u| !u.is_empty())
                .map(str::to_string),
            status: None,
        }
        .bounded(),
    )
}

/// `[Mon Nov 23 17:10:25.516645 2026] [security2:error] [pid 1:tid 2] [client A:p]
/// [client A] ModSecurity: Access denied ... [id "900112"] ...`
fn apache(
    line: &str,
    tz: &TimeZone,
    times: &mut Cache,
    now: Timestamp,
    out: &mut Vec<WafEvent>,
) -> Outcome {
    let Some(at_marker) = memmem::find(line.as_bytes(), MARKER.as_bytes()) else {
        return Outcome::NotMine;
    };
    let (Some(prefix), Some(text)) = (line.get(..at_marker), line.get(at_marker + MARKER.len()..))
    else {
        return Outcome::NotMine;
    };
    let m = fields::message(text);
    let Some(action) = m.disposition else {
        // Engine notices ("ModSecurity: APR compiled version ...").
        return Outcome::Read;
    };
    let Some(ip) = last_client(prefix).and_then(parse_addr) else {
        return if m.fields.id.is_some() {
            Outcome::Unreadable
        } else {
            Outcome::Read
        };
    };
    let at = prefix
        .get(1..)
        .and_then(|p| p.split(']').next())
        .and_then(|t| times.ctime(t, tz))
        .unwrap_or(now);
    if let Some(e) = event(&m, action, ip, at, Format::ApacheError, None, None, None) {
        out.push(e);
    }
    Outcome::Read
}

/// The value of `, name: "value"` near the end of an nginx line.
fn nginx_quoted<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(", {name}: \"");
    let i = line.rfind(&key)?;
    let rest = line.get(i + key.len()..)?;
    rest.get(..rest.find('"')?)
}

/// `2026/11/23 17:10:27 [error] 1#1: *1 [client A] ModSecurity: Access denied ... [id
/// "900112"] ..., client: A, server: S, request: "GET /u HTTP/1.1", host: "H"`
fn nginx(
    line: &str,
    tz: &TimeZone,
    times: &mut Cache,
    now: Timestamp,
    out: &mut Vec<WafEvent>,
) -> Outcome {
    let Some(at_marker) = memmem::find(line.as_bytes(), MARKER.as_bytes()) else {
        return Outcome::NotMine;
    };
    let (Some(prefix), Some(text)) = (line.get(..at_marker), line.get(at_marker + MARKER.len()..))
    else {
        return Outcome::NotMine;
    };
    let m = fields::message(text);
    let Some(action) = m.disposition else {
        return Outcome::Read;
    };
    let Some(ip) = last_client(prefix).and_then(parse_addr) else {
        return if m.fields.id.is_some() {
            Outcome::Unreadable
        } else {
            Outcome::Read
        };
    };
    let mut words = prefix.split(' ');
    let at = match (words.next(), words.next()) {
        (Some(d), Some(t)) => times.ymd(d, t, tz),
        _ => None,
    }
    .unwrap_or(now);
    let request = nginx_quoted(line, "request");
    let (method, uri) = match request.map(|r| r.split(' ')) {
        Some(mut parts) => (parts.next(), parts.next()),
        None => (None, None),
    };
    let host = nginx_quoted(line, "host");
    if let Some(e) = event(&m, action, ip, at, Format::NginxError, host, uri, method) {
        out.push(e);
    }
    Outcome::Read
}

/// The LiteSpeed client field `A:port-conn#APVH_vhost` (also `A:port:HTTP2-n#...`,
/// `A:port-H3:...#...`, `[v6]:port-...`): (address, vhost).
fn litespeed_client(field: &str) -> Option<(std::net::IpAddr, &str)> {
    let (client, vhost) = field.split_once('#')?;
    let ip = if client.starts_with('[') {
        parse_addr(client.split('-').next()?)?
    } else {
        let upto = client.split('-').next()?;
        let upto = upto.split(":HTTP").next()?;
        parse_addr(upto)?
    };
    let vhost = vhost.strip_prefix("APVH_").unwrap_or(vhost);
    let vhost = vhost.rsplit('_').next().unwrap_or(vhost);
    Some((ip, host_without_port(vhost)))
}

/// Text with `[...]` groups removed (to read LiteSpeed's disposition outside field
/// values a client may have chosen).
fn outside_brackets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    let mut in_quote = false;
    let mut escaped = false;
    for c in text.chars() {
        if depth > 0 {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_quote = !in_quote;
            } else if !in_quote && c == ']' {
                depth -= 1;
            } else if !in_quote && c == '[' {
                depth += 1;
            }
        } else if c == '[' {
            depth = 1;
            in_quote = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// `2026-04-01 17:13:53.887905 [NOTICE] [2288689] [T1] [A:41920-13#APVH_host] [MODSEC]
/// mod_security rule [id "920170"] at [/path.conf:180] triggered!` and the
/// `[Module:mod_security] ... Access denied with code 403 ...` form.
fn litespeed(
    line: &str,
    tz: &TimeZone,
    times: &mut Cache,
    now: Timestamp,
    actions: &dyn RuleActions,
    out: &mut Vec<WafEvent>,
) -> Outcome {
    let b = line.as_bytes();
    let is_modsec = memmem::find(b, b"mod_security").is_some()
        || memmem::find(b, b"[MODSEC]").is_some()
        || memmem::find(b, b"ModSecurity").is_some();
    if !is_modsec {
        return Outcome::NotMine;
    }
    // Client: the bracketed group holding the first '#' before any quoted field
    // (`[A:port-n#APVH_host]`, `[[v6]:port-n#...]`).
    let quoted = line.find('"').unwrap_or(line.len());
    let Some(hash) = line.get(..quoted).and_then(|p| p.find('#')) else {
        return Outcome::Unreadable;
    };
    let start = line
        .get(..hash)
        .and_then(|p| p.rfind(" ["))
        .map(|i| i + 2)
        .unwrap_or(0);
    let Some(end) = line.get(hash..).and_then(|r| r.find(']')).map(|i| hash + i) else {
        return Outcome::Unreadable;
    };
    let client = line.get(start..end).and_then(litespeed_client);
    let Some((ip, vhost)) = client else {
        return Outcome::Unreadable;
    };
    let rest_at = end + 1;
    let text = line.get(rest_at..).unwrap_or("");
    let m = fields::message(text);
    let rule = m.fields.id.as_deref().and_then(rule_id);
    let plain = outside_brackets(text);
    let action = if plain.contains("Access denied") {
        Action::Deny
    } else if plain.contains("Warning.") || plain.contains("Access allowed") {
        Action::Pass
    } else if plain.contains("triggered") {
        // LiteSpeed logs every match alike: the rule's declared action decides; a rule the
        // registry does not know counts as a deny (the safe side for escalation review).
        rule.and_then(|r| actions.action(r)).unwrap_or(Action::Deny)
    } else {
        return Outcome::Read;
    };
    let at = {
        let mut w = line.split(' ');
        match (w.next(), w.next()) {
            (Some(d), Some(t)) => times.ymd(d, t, tz),
            _ => None,
        }
    }
    .unwrap_or(now);
    let mut m = m;
    if m.fields.msg.is_none() {
        if let Some(r) = rule {
            m.fields.msg = Some(format!("ModSecurity rule {r} triggered").into());
        }
    }
    let host = (!vhost.is_empty() && vhost != "*").then_some(vhost);
    if let Some(e) = event(&m, action, ip, at, Format::LiteSpeed, host, None, None) {
        out.push(e);
    }
    Outcome::Read
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn litespeed_client_forms() {
        let c = |s| litespeed_client(s).map(|(ip, h)| (ip.to_string(), h.to_string()));
        assert_eq!(
            c("203.0.113.9:51234-3#APVH_www.example.com:443"),
            Some(("203.0.113.9".into(), "www.example.com".into()))
        );
        assert_eq!(
            c("203.0.113.61:62060-H3:1FDA31C803B1F23A-44#APVH_test.example.com:443"),
            Some(("203.0.113.61".into(), "test.example.com".into()))
        );
        assert_eq!(
            c("203.0.113.9:33886:HTTP2-1#APVH_*_cluster6.example.net"),
            Some(("203.0.113.9".into(), "cluster6.example.net".into()))
        );
        assert_eq!(
            c("[2001:db8::7]:443-1#APVH_a.example"),
            Some(("2001:db8::7".into(), "a.example".into()))
        );
        assert_eq!(
            c("::ffff:198.51.100.4:1234-1#APVH_b"),
            Some(("198.51.100.4".into(), "b".into()))
        );
        assert_eq!(c("nope#x"), None);
    }

    #[test]
    fn outside_brackets_skips_quoted_brackets() {
        assert_eq!(
            outside_brackets(r#"[uri "/a]Access denied"] triggered! [x]"#),
            " triggered! "
        );
    }

    #[test]
    fn last_client_prefers_modsecurity_s() {
        assert_eq!(
            last_client("[x] [client ::1:54472] [client ::1] "),
            Some("::1")
        );
        assert_eq!(last_client("[client 203.0.113.9:5] PHP Warning: x "), None);
        assert_eq!(last_client("[client 2001:db8::1] "), Some("2001:db8::1"));
        assert_eq!(last_client("no client"), None);
    }
}
