//! Parser tests on real log lines captured from Apache (mod_security2) and nginx
//! (libmodsecurity 3) running svc's shipped rules (`tests/fixtures/waf/capture.sh`), and on
//! LiteSpeed lines in the formats LiteSpeed writes.

use std::collections::HashMap;

use super::*;
use crate::findings::Severity;
use crate::waf::event::Format;

const APACHE_ERROR: &str = include_str!("../../../tests/fixtures/waf/apache-error.log");
const APACHE_NATIVE: &str = include_str!("../../../tests/fixtures/waf/apache-audit-native.log");
const APACHE_JSON: &str = include_str!("../../../tests/fixtures/waf/apache-audit.json");
const NGINX_ERROR: &str = include_str!("../../../tests/fixtures/waf/nginx-error.log");
const NGINX_JSON: &str = include_str!("../../../tests/fixtures/waf/nginx-audit.json");
const NGINX_NATIVE: &str = include_str!("../../../tests/fixtures/waf/nginx-audit-native.log");
const LITESPEED: &str = include_str!("../../../tests/fixtures/waf/litespeed-error.log");

struct Map(HashMap<u32, Action>);

impl RuleActions for Map {
    fn action(&self, id: u32) -> Option<Action> {
        self.0.get(&id).copied()
    }
}

fn registry() -> Map {
    Map(HashMap::from([
        (900109, Action::Deny),
        (900112, Action::Deny),
        (990001, Action::Pass),
        (920170, Action::Pass),
        (949110, Action::Deny),
    ]))
}

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn parse_with(text: &str, actions: &dyn RuleActions) -> (Vec<WafEvent>, ParseCounters) {
    let mut p = Parser::new(TimeZone::UTC);
    let mut out = Vec::new();
    for line in text.lines() {
        p.line(line, now(), actions, &mut out);
    }
    p.finish(now(), actions, &mut out);
    (out, p.counters)
}

fn parse(text: &str) -> Vec<WafEvent> {
    parse_with(text, &registry()).0
}

fn summary(events: &[WafEvent]) -> Vec<(String, Option<u32>, &'static str, Severity)> {
    events
        .iter()
        .map(|e| (e.ip.to_string(), e.rule_id, e.action.as_str(), e.severity))
        .collect()
}

const SEQ: [(&str, Option<u32>); 7] = [
    ("127.0.0.1", Some(900112)),
    ("127.0.0.1", Some(900112)),
    ("127.0.0.1", Some(900109)),
    ("127.0.0.1", Some(900109)),
    ("127.0.0.1", Some(990001)),
    ("::1", Some(900112)),
    ("::1", Some(900109)),
];

fn sev(rule: Option<u32>) -> Severity {
    match rule {
        Some(900109) => Severity::Critical,
        _ => Severity::Warning,
    }
}

fn expected(skip_warning: bool) -> Vec<(String, Option<u32>, &'static str, Severity)> {
    SEQ.iter()
        .filter(|(_, r)| !(skip_warning && *r == Some(990001)))
        .map(|(ip, r)| {
            let action = if *r == Some(990001) { "pass" } else { "deny" };
            (ip.to_string(), *r, action, sev(*r))
        })
        .collect()
}

#[test]
fn apache_error_log() {
    let (ev, c) = parse_with(APACHE_ERROR, &NoActions);
    assert_eq!(summary(&ev), expected(false));
    assert_eq!(c.unparsed, 0);
    let first = &ev[0];
    assert_eq!(first.format, Format::ApacheError);
    assert_eq!(first.uri, "/wp-json/wp/v2/users");
    assert_eq!(first.host, "127.0.0.1");
    assert_eq!(
        first.message,
        "REST API user enumeration blocked (anonymous request to wp/v2/users)"
    );
    assert_eq!(first.at.to_string(), "2026-11-23T17:10:25.516645Z");
    assert!(first.unique_id.as_deref().is_some_and(|u| u.len() > 10));
    assert_eq!(ev[2].method, "GET", "svc's rules log the method in [data]");
    assert_eq!(ev[3].method, "POST");
    assert_eq!(ev[5].host, "::1");
}

#[test]
fn apache_native_audit_log() {
    let (ev, c) = parse_with(APACHE_NATIVE, &NoActions);
    assert_eq!(summary(&ev), expected(false));
    assert_eq!((c.native_entries, c.native_cut), (7, 0));
    assert!(ev.iter().all(|e| e.format == Format::NativeAudit));
    assert_eq!(ev[1].uri, "/?rest_route=%2Fwp%2Fv2%2Fusers");
    assert_eq!(ev[1].method, "GET");
    assert_eq!(ev[3].method, "POST");
    assert_eq!(ev[0].status, Some(403));
    assert_eq!(ev[4].status, Some(404));
    assert_eq!(ev[5].host, "::1");
    // Apache-Error lines repeat each message: not counted twice.
    assert_eq!(ev.len(), 7);
}

#[test]
fn apache_json_audit_log() {
    let ev = parse(APACHE_JSON);
    assert_eq!(summary(&ev), expected(false));
    assert_eq!(ev[1].uri, "/?rest_route=%2Fwp%2Fv2%2Fusers");
    assert_eq!(ev[6].host, "::1");
    assert!(ev[0].at.to_string().starts_with("2026-11-23T17:10:"));
}

#[test]
fn nginx_error_log() {
    let ev = parse(NGINX_ERROR);
    assert_eq!(summary(&ev), expected(true));
    assert!(ev.iter().all(|e| e.format == Format::NginxError));
    assert_eq!(
        ev[1].uri, "/?rest_route=%2Fwp%2Fv2%2Fusers",
        "from request:"
    );
    assert_eq!(ev[1].method, "GET");
    assert_eq!(ev[0].host, "127.0.0.1");
    assert_eq!(ev[4].host, "::1");
    assert_eq!(ev[0].at.to_string(), "2026-11-23T17:10:27Z");
}

#[test]
fn nginx_json_audit_log_uses_the_registry() {
    let ev = parse(NGINX_JSON);
    assert_eq!(summary(&ev), expected(false));
    assert_eq!(ev[3].method, "POST");
    // Without a registry, a refused answer marks its last message a deny (the probe's
    // request got 403 from nginx itself: a directory without an index).
    let (ev, _) = parse_with(NGINX_JSON, &NoActions);
    assert_eq!(ev[4].action, Action::Deny);
}

#[test]
fn nginx_native_audit_log() {
    let ev = parse(NGINX_NATIVE);
    assert_eq!(summary(&ev), expected(false));
    assert_eq!(ev[6].ip.to_string(), "::1");
    assert_eq!(ev[1].uri, "/?rest_route=%2Fwp%2Fv2%2Fusers");
}

#[test]
fn litespeed_lines() {
    let (ev, c) = parse_with(LITESPEED, &registry());
    let got: Vec<_> = ev
        .iter()
        .map(|e| {
            (
                e.ip.to_string(),
                e.rule_id,
                e.action.as_str(),
                e.host.clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "203.0.113.9".into(),
                Some(920170),
                "pass",
                "cluster6.example.net".into()
            ),
            (
                "203.0.113.61".into(),
                Some(949110),
                "deny",
                "test.example.com".into()
            ),
            (
                "203.0.113.7".into(),
                Some(900112),
                "deny",
                "www.example.com".into()
            ),
            (
                "2001:db8::7".into(),
                Some(900109),
                "deny",
                "shop.example.org".into()
            ),
            (
                "198.51.100.4".into(),
                Some(977777),
                "deny",
                "b.example".into()
            ),
            (
                "203.0.113.8".into(),
                Some(990001),
                "pass",
                "www.example.com".into()
            ),
        ]
    );
    assert_eq!(ev[2].uri, "/wp-json/wp/v2/users");
    assert_eq!(ev[2].message, "REST API user enumeration blocked");
    assert_eq!(ev[0].message, "ModSecurity rule 920170 triggered");
    assert_eq!(ev[0].at.to_string(), "2026-04-01T17:13:53.887905Z");
    assert_eq!(c.unparsed, 1, "the line without a client");
}

#[test]
fn interleaved_formats_in_one_stream() {
    // Error-log lines between native sections do not disturb the entry.
    let mut text = String::new();
    let mut native = APACHE_NATIVE.lines();
    for err in APACHE_ERROR.lines() {
        for _ in 0..4 {
            if let Some(l) = native.next() {
                text.push_str(l);
                text.push('\n');
            }
        }
        text.push_str(err);
        text.push('\n');
    }
    for l in native {
        text.push_str(l);
        text.push('\n');
    }
    let ev = parse(&text);
    assert_eq!(ev.len(), 14);
    assert_eq!(
        ev.iter()
            .filter(|e| e.format == Format::NativeAudit)
            .count(),
        7
    );
}

#[test]
fn mapped_addresses_and_forged_markers() {
    let line = r#"2026/11/23 17:10:27 [error] 1#1: *1 [client ::ffff:203.0.113.5] ModSecurity: Access denied with code 403 (phase 1). Matched "x" [file "/r.conf"] [line "1"] [id "900112"] [msg "m"] [severity "4"] [hostname "h"] [uri "/u"] [unique_id "1.2"] [ref ""], client: ::ffff:203.0.113.5, server: , request: "GET /u HTTP/1.1", host: "h""#;
    let ev = parse(line);
    assert_eq!(ev[0].ip.to_string(), "203.0.113.5");
    // A PHP warning that quotes ModSecurity's words is not a ModSecurity line.
    let php = r#"[Mon Nov 23 17:10:25.5 2026] [php:warn] [pid 1] [client 203.0.113.9:5] PHP Warning: ModSecurity: Access denied with code 403 [id "900112"]"#;
    assert!(parse(php).is_empty());
    // A quote inside a field value cannot end it early (ModSecurity escapes it).
    let forged = r#"[Mon Nov 23 17:10:25.5 2026] [security2:error] [pid 1] [client 203.0.113.9:5] [client 203.0.113.9] ModSecurity: Access denied with code 403 (phase 2). Pattern match "x" at ARGS:a. [file "/r"] [id "942100"] [data "Matched Data: \"] [id \"1\"] found"] [severity "CRITICAL"] [uri "/\"] [id \"2\"]"] [unique_id "u"]"#;
    assert_eq!(parse(forged)[0].rule_id, Some(942100));
}

#[test]
fn engine_notices_and_other_lines_are_not_events() {
    for line in [
        "[Mon Nov 23 17:08:33.276864 2026] [security2:notice] [pid 1:tid 1] ModSecurity for Apache/2.9.7 (http://www.modsecurity.org/) configured.",
        "[Mon Nov 23 17:08:33.276932 2026] [security2:notice] [pid 1:tid 1] ModSecurity: APR compiled version=\"1.7.2\"; loaded version=\"1.7.2\"",
        "2026/11/23 17:08:47 [notice] 1#1: ModSecurity-nginx v1.0.3 (rules loaded inline/local/remote: 0/11/0)",
        "",
        "random text",
        "{\"not\": \"an audit line\"}",
    ] {
        assert!(parse(line).is_empty(), "{line}");
    }
    let (_, c) = parse_with("{\"transaction\": broken", &NoActions);
    assert_eq!(c.unparsed, 1);
}

#[test]
fn a_cut_native_entry_still_yields_its_events() {
    let mut text = String::new();
    for l in APACHE_NATIVE.lines().take_while(|l| !l.ends_with("-Z--")) {
        text.push_str(l);
        text.push('\n');
    }
    let (ev, c) = parse_with(&text, &NoActions);
    assert_eq!(ev.len(), 1);
    assert_eq!(c.native_cut, 1);
}

#[test]
fn garbage_never_panics() {
    let fixtures = [
        APACHE_ERROR,
        APACHE_NATIVE,
        APACHE_JSON,
        NGINX_ERROR,
        NGINX_JSON,
        NGINX_NATIVE,
        LITESPEED,
    ];
    let mut p = Parser::new(TimeZone::UTC);
    let mut out = Vec::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for (n, f) in fixtures.iter().enumerate() {
        for line in f.lines() {
            // Every prefix and a mutated copy of every line.
            for cut in (0..line.len()).step_by(7) {
                if let Some(prefix) = line.get(..cut) {
                    p.line(prefix, now(), &registry(), &mut out);
                }
            }
            let mut bytes = line.as_bytes().to_vec();
            for _ in 0..8 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if !bytes.is_empty() {
                    let i = (x as usize) % bytes.len();
                    bytes[i] = b"[]\"\\-: #{}"[(x >> 32) as usize % 10];
                }
            }
            p.line(
                &String::from_utf8_lossy(&bytes),
                now(),
                &NoActions,
                &mut out,
            );
            out.clear();
        }
        assert!(n < 10);
    }
}
