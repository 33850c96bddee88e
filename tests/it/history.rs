//! History and stats routes through the real binary over TLS: envelopes, scopes, paging,
//! filters, the date-range rules in zones that skip or repeat midnight, the CSV export.
//! Rows are written straight into svc.db (WAL lets the running daemon read them).

use crate::common::*;

use jiff::Timestamp;
use rusqlite::{params, Connection};
use serde_json::Value;

/// A daemon with every detector off, so history holds only what a test writes (the WAF
/// integration off too: it would look at this host's web servers and may raise `waf_status`).
fn start(tag: &str, tz: &str) -> Daemon {
    let dir = temp_dir(tag);
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        format!(
            "{}[files]\nwatch = []\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[waf]\nenabled = false\n",
            base_config(&state)
        ),
    )
    .unwrap();
    Daemon::start_with(dir, config, state, &[("TZ", tz)])
}

fn db(d: &Daemon) -> Connection {
    let c = Connection::open(d.state.join("svc.db")).unwrap();
    c.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    c
}

fn micros(instant: &str) -> i64 {
    instant.parse::<Timestamp>().unwrap().as_microsecond()
}

/// One history row; returns its id.
#[derive(Clone, Default)]
struct H<'a> {
    at: &'a str,
    check: &'a str,
    sev: u8,
    message: &'a str,
    details: &'a str,
    account: Option<&'a str>,
    ip: Option<&'a str>,
    path: Option<&'a str>,
}

fn add(c: &Connection, h: H<'_>) -> i64 {
    // One write transaction for the row and its count (unless the caller holds one), as
    // the store's writer does: in autocommit mode each statement of derive_pending commits
    // alone, and a derive by the daemon between them counted the row twice (total above
    // the rows listed, under load).
    let own = c.is_autocommit();
    if own {
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
    }
    c.execute(
        "INSERT INTO history(at, check_name, severity, message, details, account, ip, path) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)",
        params![
            micros(h.at),
            if h.check.is_empty() { "test_check" } else { h.check },
            h.sev,
            if h.message.is_empty() { "m" } else { h.message },
            h.details,
            h.account,
            h.ip,
            h.path
        ],
    )
    .unwrap();
    let id = c.last_insert_rowid();
    // Count the row as the store's writer does for its own rows.
    svc::store::history::derive_pending(c).unwrap();
    if own {
        c.execute_batch("COMMIT").unwrap();
    }
    id
}

fn at(c: &Connection, instant: &str) -> i64 {
    add(
        c,
        H {
            at: instant,
            ..H::default()
        },
    )
}

/// Percent-encodes a query value.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn query(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn history(d: &Daemon, pairs: &[(&str, &str)]) -> Value {
    d.get(&format!("/api/v1/history?{}", query(pairs)), READ)
        .expect(200)
        .json()
}

fn ids(v: &Value) -> Vec<i64> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_i64().unwrap())
        .collect()
}

/// Ids in a range, newest first.
fn range_ids(d: &Daemon, from: &str, to: &str) -> Vec<i64> {
    let v = history(d, &[("from", from), ("to", to), ("limit", "1000")]);
    let got = ids(&v);
    assert_eq!(v["total"].as_u64().unwrap(), got.len() as u64, "{v}");
    got
}

fn bad_request(d: &Daemon, path: &str, param: &str) {
    let r = d.get(path, READ);
    r.expect(400);
    let v = r.json();
    assert_eq!(v["param"], param, "{path}: {v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{param}: ")),
        "{v}"
    );
}

fn is_instant(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.ends_with('Z')
            && s.len() == "2026-01-01T00:00:00.000000Z".len()
            && s.parse::<Timestamp>().is_ok()
    })
}

#[test]
fn envelopes_keys_and_types() {
    let d = start("hist-env", "UTC");
    let c = db(&d);
    let now = Timestamp::now();
    let recent = (now - jiff::SignedDuration::from_mins(30)).to_string();
    let full = add(
        &c,
        H {
            at: &recent,
            check: "webshell",
            sev: 2,
            message: "Webshell signature in /home/bob/x.php",
            details: "rule 7",
            account: Some("bob"),
            ip: Some("203.0.113.9"),
            path: Some("/home/bob/x.php"),
        },
    );
    let bare = at(&c, "2026-01-01T00:00:00.000001Z");

    let v = history(&d, &[]);
    for key in ["items", "total", "offset", "limit", "truncated"] {
        assert!(v.get(key).is_some(), "{key} missing: {v}");
    }
    assert!(v.get("search_capped").is_none());
    assert_eq!(v["total"], 2);
    assert_eq!(v["offset"], 0);
    assert_eq!(v["limit"], 100);
    assert_eq!(v["truncated"], false);
    assert_eq!(ids(&v), vec![full, bare]);
    let item = &v["items"][0];
    assert_eq!(item["check"], "webshell");
    assert_eq!(item["severity"], "CRITICAL");
    assert_eq!(item["message"], "Webshell signature in /home/bob/x.php");
    assert_eq!(item["details"], "rule 7");
    assert_eq!(item["account"], "bob");
    assert_eq!(item["ip"], "203.0.113.9");
    assert_eq!(item["path"], "/home/bob/x.php");
    assert!(is_instant(&item["at"]), "{item}");
    let item = &v["items"][1];
    assert_eq!(item["at"], "2026-01-01T00:00:00.000001Z");
    assert_eq!(item["severity"], "WARNING");
    for unset in ["account", "ip", "path"] {
        assert!(item.get(unset).is_none(), "{item}");
    }
    let searched = history(&d, &[("search", "BOB")]);
    assert_eq!(searched["search_capped"], false);
    assert_eq!(ids(&searched), vec![full]);

    let r = d.get("/api/v1/history/csv", READ);
    r.expect(200);
    assert_eq!(r.header("content-type"), Some("text/csv; charset=utf-8"));
    assert_eq!(
        r.header("content-disposition"),
        Some("attachment; filename=\"svc-history.csv\"")
    );
    assert_eq!(r.header("x-total-count"), Some("2"));
    assert_eq!(r.header("x-truncated"), Some("false"));
    assert!(r
        .text()
        .starts_with("id,at,severity,check,message,details,account,ip,path\r\n"));

    let s = d.get("/api/v1/stats", READ).expect(200).json();
    assert_eq!(s["window_seconds"], 86400);
    assert!(is_instant(&s["start"]) && is_instant(&s["end"]), "{s}");
    assert_eq!(
        s["severity_counts"],
        serde_json::json!({"critical": 1, "high": 0, "warning": 0, "total": 1})
    );
    assert_eq!(s["accounts_at_risk"]["total"], 1);
    assert_eq!(s["accounts_at_risk"]["truncated"], false);
    assert_eq!(s["accounts_at_risk"]["items"][0]["account"], "bob");
    assert_eq!(s["accounts_at_risk"]["items"][0]["critical"], 1);
    assert_eq!(s["auto_response"]["quarantined"], 0);
    assert_eq!(s["auto_response"]["blocked_ips"], 0);
    assert_eq!(
        s["auto_response"]["blocked_ips_by_source"],
        serde_json::json!({})
    );

    let t = d.get("/api/v1/stats/trend", READ).expect(200).json();
    let days = t["items"].as_array().unwrap();
    assert_eq!(days.len(), 30);
    assert_eq!(t["total"], 30);
    assert_eq!(t["time_zone"], "UTC");
    for day in days {
        for key in ["date", "start", "end", "critical", "high", "warning"] {
            assert!(day.get(key).is_some(), "{key}: {day}");
        }
        assert!(is_instant(&day["start"]) && is_instant(&day["end"]));
        assert_eq!(day["date"].as_str().unwrap().len(), 10);
        assert!(day["critical"].is_u64() && day["high"].is_u64() && day["warning"].is_u64());
    }
    let today = now.to_zoned(jiff::tz::TimeZone::UTC).date().to_string();
    let last = days.last().unwrap();
    if last["date"] == today.as_str() {
        assert_eq!(
            last["critical"].as_u64().unwrap() + days[28]["critical"].as_u64().unwrap(),
            1
        );
    }

    let tl = d.get("/api/v1/stats/timeline", READ).expect(200).json();
    let hours = tl["items"].as_array().unwrap();
    assert_eq!(hours.len(), 24);
    assert_eq!(tl["total"], 24);
    for h in hours {
        for key in ["start", "end", "critical", "high", "warning"] {
            assert!(h.get(key).is_some(), "{key}: {h}");
        }
        assert!(is_instant(&h["start"]) && is_instant(&h["end"]));
    }
    let crit: u64 = hours.iter().map(|h| h["critical"].as_u64().unwrap()).sum();
    assert_eq!(crit, 1);
}

#[test]
fn scopes_and_methods() {
    let d = start("hist-scope", "UTC");
    for path in [
        "/api/v1/history",
        "/api/v1/history/csv",
        "/api/v1/stats",
        "/api/v1/stats/trend",
        "/api/v1/stats/timeline",
    ] {
        d.req("GET", path, &[], b"").expect(401);
        d.get(path, READ).expect(200);
        d.get(path, ADMIN).expect(200);
        d.get(path, METRICS).expect(401);
        for method in ["POST", "PUT", "DELETE", "PATCH"] {
            let r = d.req(
                method,
                path,
                &[("Authorization", &format!("Bearer {READ}"))],
                b"",
            );
            r.expect(405);
            assert_eq!(r.header("allow"), Some("GET, HEAD"));
        }
    }
    // Refused bounds are counted in /metrics.
    bad_request(&d, "/api/v1/history?from=soon", "from");
    bad_request(&d, "/api/v1/history/csv?to=2026-02-30", "to");
    let m = d.get("/metrics", METRICS).expect(200).text();
    assert!(
        m.contains("svc_history_range_rejections_total{reason=\"syntax\"} 1"),
        "{m}"
    );
    assert!(m.contains("svc_history_range_rejections_total{reason=\"invalid_field\"} 1"));
}

#[test]
fn limit_offset_and_truncated() {
    let d = start("hist-page", "UTC");
    let c = db(&d);
    let mut all: Vec<i64> = (0..25)
        .map(|i| at(&c, &format!("2026-01-01T00:00:{i:02}Z")))
        .collect();
    all.reverse();

    let v = history(&d, &[("limit", "10")]);
    assert_eq!(
        (v["total"].as_u64(), v["truncated"].as_bool()),
        (Some(25), Some(true))
    );
    assert_eq!(ids(&v), all[..10]);
    let v = history(&d, &[("limit", "10"), ("offset", "10")]);
    assert_eq!(ids(&v), all[10..20]);
    assert_eq!(v["offset"], 10);
    assert_eq!(v["truncated"], true);
    let v = history(&d, &[("limit", "10"), ("offset", "20")]);
    assert_eq!(ids(&v), all[20..]);
    assert_eq!(v["truncated"], false);
    let v = history(&d, &[("offset", "30")]);
    assert_eq!(v["items"], serde_json::json!([]));
    assert_eq!(
        (v["total"].as_u64(), v["truncated"].as_bool()),
        (Some(25), Some(false))
    );
    let v = history(&d, &[("limit", "0")]);
    assert_eq!(v["items"], serde_json::json!([]));
    assert_eq!(
        (v["total"].as_u64(), v["truncated"].as_bool()),
        (Some(25), Some(true))
    );
    let v = history(&d, &[("limit", "1000")]);
    assert_eq!(ids(&v), all);
    assert_eq!(v["limit"], 1000);

    for bad in ["1001", "-1", "abc", "1.5", "+1", "99999999999999999999999"] {
        bad_request(&d, &format!("/api/v1/history?limit={}", enc(bad)), "limit");
    }
    for bad in ["-5", "x", "9223372036854775808"] {
        bad_request(
            &d,
            &format!("/api/v1/history?offset={}", enc(bad)),
            "offset",
        );
    }
    // The CSV export ignores paging: always the newest 5,000.
    let r = d.get("/api/v1/history/csv?limit=abc&offset=-1", READ);
    r.expect(200);
    assert_eq!(r.text().lines().count(), 26);
}

#[test]
fn severity_checks_and_search_filters() {
    let d = start("hist-filter", "UTC");
    let c = db(&d);
    let w = add(
        &c,
        H {
            at: "2026-01-01T00:00:01Z",
            check: "wp_login",
            sev: 0,
            message: "Failed login burst",
            details: "user ADMIN",
            ..H::default()
        },
    );
    let h = add(
        &c,
        H {
            at: "2026-01-01T00:00:02Z",
            check: "ssh_bruteforce",
            sev: 1,
            message: "SSH brute force",
            details: "",
            ip: Some("198.51.100.23"),
            ..H::default()
        },
    );
    let cr = add(
        &c,
        H {
            at: "2026-01-01T00:00:03Z",
            check: "webshell",
            sev: 2,
            message: "Webshell signature",
            details: "rule 100%_match",
            account: Some("Carol"),
            path: Some("/home/carol/public_html/Shell.PHP"),
            ..H::default()
        },
    );
    let sev = |s: &str| ids(&history(&d, &[("severity", s)]));
    assert_eq!(sev("high"), vec![h]);
    assert_eq!(sev("CRITICAL"), vec![cr]);
    assert_eq!(sev("0"), vec![w]);
    assert_eq!(sev("2,warning"), vec![cr, w]);
    assert_eq!(sev(" High , 1 "), vec![h]);
    for bad in ["info", "3", "high;low", "HIGH,x"] {
        bad_request(
            &d,
            &format!("/api/v1/history?severity={}", enc(bad)),
            "severity",
        );
    }
    let checks = |s: &str| ids(&history(&d, &[("checks", s)]));
    assert_eq!(checks("webshell"), vec![cr]);
    assert_eq!(checks("webshell,wp_login"), vec![cr, w]);
    assert_eq!(checks("nope"), Vec::<i64>::new());
    assert_eq!(
        ids(&history(
            &d,
            &[("checks", "webshell,wp_login"), ("severity", "warning")]
        )),
        vec![w]
    );
    let search = |s: &str| ids(&history(&d, &[("search", s)]));
    // Message, details, check, account, ip, path; any ASCII letter case.
    assert_eq!(search("failed LOGIN"), vec![w]);
    assert_eq!(search("admin"), vec![w]);
    assert_eq!(search("BRUTEFORCE"), vec![h]);
    assert_eq!(search("carol"), vec![cr]);
    assert_eq!(search("100.23"), vec![h]);
    assert_eq!(search("shell.php"), vec![cr]);
    assert_eq!(search("%_m"), vec![cr]);
    assert_eq!(search("s"), vec![cr, h, w]);
    assert_eq!(search("zz"), Vec::<i64>::new());
    assert_eq!(
        ids(&history(&d, &[("search", "sh"), ("severity", "critical")])),
        vec![cr]
    );
    bad_request(
        &d,
        &format!("/api/v1/history?search={}", "x".repeat(257)),
        "search",
    );
}

#[test]
fn date_range_rules_in_utc() {
    let d = start("hist-utc", "UTC");
    let c = db(&d);
    let before = at(&c, "2026-03-01T23:59:59.999999Z");
    let first = at(&c, "2026-03-02T00:00:00Z");
    let last = at(&c, "2026-03-02T23:59:59.999999Z");
    let next = at(&c, "2026-03-03T00:00:00Z");
    // Rule 2: a date `to` includes its whole day; an RFC 3339 `to` is exclusive.
    assert_eq!(range_ids(&d, "2026-03-02", "2026-03-02"), vec![last, first]);
    assert_eq!(
        range_ids(&d, "2026-03-02T00:00:00Z", "2026-03-02T23:59:59.999999Z"),
        vec![first]
    );
    assert_eq!(
        range_ids(&d, "2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z"),
        vec![last, first]
    );
    assert_eq!(range_ids(&d, "", "2026-03-01"), vec![before]);
    assert_eq!(range_ids(&d, "2026-03-03", ""), vec![next]);
    // Offsets count: 01:00+01:00 is midnight UTC.
    assert_eq!(
        range_ids(
            &d,
            "2026-03-02T01:00:00+01:00",
            "2026-03-02T01:00:00.000001+01:00"
        ),
        vec![first]
    );
    // Rule 3: blank bounds are absent.
    assert_eq!(range_ids(&d, " ", "\t"), vec![next, last, first, before]);
    assert_eq!(ids(&history(&d, &[("from", ""), ("to", "")])).len(), 4);
    // `from` after `to`: nothing, not an error.
    assert_eq!(range_ids(&d, "2026-03-03", "2026-03-01"), Vec::<i64>::new());
    // Rule 1: anything else is 400 naming the parameter.
    for (param, bad) in [
        ("from", "2026-03-02T00:00:00"),
        ("from", "2026-03-02 00:00:00Z"),
        ("to", "2026-3-2"),
        ("to", "yesterday"),
        ("from", "2026-02-29"),
        ("to", "2026-03-02T24:00:00Z"),
        ("from", "1772409600"),
        ("to", &"2".repeat(80)),
    ] {
        bad_request(&d, &format!("/api/v1/history?{param}={}", enc(bad)), param);
        bad_request(
            &d,
            &format!("/api/v1/history/csv?{param}={}", enc(bad)),
            param,
        );
    }
    // An unencoded `+` arrives as a space: refused, not misread.
    bad_request(&d, "/api/v1/history?from=2026-03-02T01:00:00+01:00", "from");
}

#[test]
fn fractional_second_bounds_are_kept() {
    let d = start("hist-frac", "UTC");
    let c = db(&d);
    let a = at(&c, "2026-05-05T10:00:00.123456Z");
    let b = at(&c, "2026-05-05T10:00:00.123457Z");
    assert_eq!(range_ids(&d, "2026-05-05T10:00:00.123456Z", ""), vec![b, a]);
    assert_eq!(range_ids(&d, "2026-05-05T10:00:00.1234561Z", ""), vec![b]);
    assert_eq!(range_ids(&d, "2026-05-05T10:00:00.123457Z", ""), vec![b]);
    assert_eq!(range_ids(&d, "", "2026-05-05T10:00:00.1234565Z"), vec![a]);
    assert_eq!(range_ids(&d, "", "2026-05-05T10:00:00.123457Z"), vec![a]);
    assert_eq!(
        range_ids(&d, "", "2026-05-05T10:00:00.123457000001Z"),
        vec![b, a]
    );
    assert_eq!(
        range_ids(
            &d,
            "2026-05-05T12:00:00.1234565+02:00",
            "2026-05-05T10:00:00.2Z"
        ),
        vec![b]
    );
}

#[test]
fn santiago_day_that_skips_midnight() {
    // 2022-09-11 00:00 -04 did not happen; the day starts at 01:00 -03 (04:00Z).
    let d = start("hist-scl", "America/Santiago");
    let c = db(&d);
    let day10_first = at(&c, "2022-09-10T04:00:00Z");
    let day10_last = at(&c, "2022-09-11T03:59:59.999999Z");
    let day11_first = at(&c, "2022-09-11T04:00:00Z");
    let day11_last = at(&c, "2022-09-12T02:59:59.999999Z");
    let day12_first = at(&c, "2022-09-12T03:00:00Z");
    let day09_last = at(&c, "2022-09-10T03:59:59.999999Z");
    assert_eq!(
        range_ids(&d, "2022-09-11", "2022-09-11"),
        vec![day11_last, day11_first]
    );
    assert_eq!(
        range_ids(&d, "2022-09-10", "2022-09-10"),
        vec![day10_last, day10_first]
    );
    assert_eq!(range_ids(&d, "2022-09-12", ""), vec![day12_first]);
    assert_eq!(range_ids(&d, "", "2022-09-09"), vec![day09_last]);
    // A local-time RFC 3339 bound means the instant it names.
    assert_eq!(
        range_ids(
            &d,
            "2022-09-11T01:00:00-03:00",
            "2022-09-11T01:00:00.000001-03:00"
        ),
        vec![day11_first]
    );
    let v = d.get("/api/v1/stats/trend", READ).expect(200).json();
    assert_eq!(v["time_zone"], "America/Santiago");
}

#[test]
fn havana_skipped_and_repeated_midnight() {
    let d = start("hist-hav", "America/Havana");
    let c = db(&d);
    // 2022-03-13: midnight skipped, the day starts at 01:00 -04 (05:00Z).
    let mar12_last = at(&c, "2022-03-13T04:59:59.999999Z");
    let mar13_first = at(&c, "2022-03-13T05:00:00Z");
    assert_eq!(range_ids(&d, "2022-03-13", "2022-03-13"), vec![mar13_first]);
    assert_eq!(range_ids(&d, "2022-03-12", "2022-03-12"), vec![mar12_last]);
    // 2022-11-06: 00:00-01:00 happens twice; the day starts at the first midnight (04:00Z)
    // and lasts 25 hours, to 2022-11-07 00:00 -05 (05:00Z).
    let nov05_last = at(&c, "2022-11-06T03:59:59.999999Z");
    let first_midnight = at(&c, "2022-11-06T04:00:00Z");
    let first_half = at(&c, "2022-11-06T04:30:00Z");
    let second_midnight = at(&c, "2022-11-06T05:00:00Z");
    let nov06_last = at(&c, "2022-11-07T04:59:59.999999Z");
    let nov07_first = at(&c, "2022-11-07T05:00:00Z");
    assert_eq!(
        range_ids(&d, "2022-11-06", "2022-11-06"),
        vec![nov06_last, second_midnight, first_half, first_midnight]
    );
    assert_eq!(range_ids(&d, "2022-11-05", "2022-11-05"), vec![nov05_last]);
    assert_eq!(range_ids(&d, "2022-11-07", "2022-11-07"), vec![nov07_first]);
    // The second 00:30 is 05:30Z.
    assert_eq!(
        range_ids(&d, "2022-11-06T00:00:00-05:00", "2022-11-06T00:30:00-05:00"),
        vec![second_midnight]
    );
}

#[test]
fn apia_skipped_date_is_an_empty_range() {
    // Samoa skipped 2011-12-30: 2011-12-29 23:59:59 -10 was followed by 2011-12-31 00:00 +14.
    let d = start("hist-apia", "Pacific/Apia");
    let c = db(&d);
    let dec29_last = at(&c, "2011-12-30T09:59:59.999999Z");
    let dec31_first = at(&c, "2011-12-30T10:00:00Z");
    let v = history(&d, &[("from", "2011-12-30"), ("to", "2011-12-30")]);
    assert_eq!(v["total"], 0);
    assert_eq!(v["items"], serde_json::json!([]));
    assert_eq!(v["truncated"], false);
    let r = d.get("/api/v1/history/csv?from=2011-12-30&to=2011-12-30", READ);
    r.expect(200);
    assert_eq!(
        r.text(),
        "id,at,severity,check,message,details,account,ip,path\r\n"
    );
    assert_eq!(range_ids(&d, "2011-12-29", "2011-12-29"), vec![dec29_last]);
    assert_eq!(range_ids(&d, "2011-12-30", "2011-12-31"), vec![dec31_first]);
    assert_eq!(range_ids(&d, "2011-12-29", "2011-12-30"), vec![dec29_last]);
    assert_eq!(range_ids(&d, "", "2011-12-30"), vec![dec29_last]);
    assert_eq!(range_ids(&d, "2011-12-30", ""), vec![dec31_first]);
}

/// A minimal RFC 4180 reader.
fn parse_csv(s: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut chars = s.chars().peekable();
    let mut quoted = false;
    while let Some(ch) = chars.next() {
        match (quoted, ch) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, ch) => field.push(ch),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') => {
                assert_eq!(chars.next(), Some('\n'));
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, ch) => field.push(ch),
        }
    }
    assert!(
        !quoted && field.is_empty() && row.is_empty(),
        "unterminated CSV"
    );
    rows
}

/// A JSON item as the CSV shows it (formula-like cells get a leading apostrophe).
fn csv_cells(item: &Value) -> Vec<String> {
    let text = |k: &str| {
        item.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let cell = |s: String| {
        if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
            format!("'{s}")
        } else {
            s
        }
    };
    vec![
        item["id"].as_i64().unwrap().to_string(),
        text("at"),
        text("severity"),
        cell(text("check")),
        cell(text("message")),
        cell(text("details")),
        cell(text("account")),
        cell(text("ip")),
        cell(text("path")),
    ]
}

#[test]
fn csv_equals_history_with_the_same_filters() {
    let d = start("hist-csv", "Europe/Berlin");
    let c = db(&d);
    let messages = [
        "=HYPERLINK(\"http://evil\",\"x\")",
        "+1+1",
        "-2",
        "@SUM(A1)",
        "plain, with comma",
        "quote \" inside",
        "line\nbreak",
        "tab\tinside",
        "Zürich ✓",
    ];
    for i in 0..60u32 {
        let instant = format!(
            "2026-02-{:02}T{:02}:{:02}:00.{:06}Z",
            1 + i % 20,
            i % 24,
            i,
            i
        );
        add(
            &c,
            H {
                at: &instant,
                check: ["webshell", "ssh_bruteforce", "cron_job"][(i % 3) as usize],
                sev: (i % 3) as u8,
                message: messages[(i as usize) % messages.len()],
                details: if i % 4 == 0 {
                    "=cmd|' /C calc'!A0"
                } else {
                    "d"
                },
                account: (i % 2 == 0).then_some("alice"),
                ip: (i % 5 == 0).then_some("192.0.2.1"),
                path: (i % 7 == 0).then_some("-/tmp/x"),
            },
        );
    }
    for filters in [
        vec![],
        vec![("severity", "critical,high")],
        vec![("checks", "webshell")],
        vec![("from", "2026-02-03"), ("to", "2026-02-10")],
        vec![("search", "zürich")],
        vec![("search", "i"), ("severity", "warning")],
        vec![
            ("from", "2026-02-02T05:00:00+01:00"),
            ("to", "2026-02-15T00:00:00Z"),
            ("checks", "cron_job,ssh_bruteforce"),
        ],
    ] {
        let mut json_filters = filters.clone();
        json_filters.push(("limit", "1000"));
        let v = history(&d, &json_filters);
        let r = d.get(&format!("/api/v1/history/csv?{}", query(&filters)), READ);
        r.expect(200);
        let rows = parse_csv(&r.text());
        assert_eq!(
            rows[0],
            ["id", "at", "severity", "check", "message", "details", "account", "ip", "path"]
        );
        let expect: Vec<Vec<String>> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(csv_cells)
            .collect();
        assert_eq!(rows[1..].to_vec(), expect, "{filters:?}");
        assert_eq!(
            r.header("x-total-count"),
            Some(v["total"].to_string().as_str())
        );
        assert!(!expect.is_empty(), "{filters:?}");
    }
    // Neutralised cells, raw text.
    let text = d.get("/api/v1/history/csv", READ).text();
    assert!(
        text.contains("\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\""),
        "{text}"
    );
    assert!(text.contains(",'+1+1,") && text.contains(",'-2,") && text.contains(",'@SUM(A1),"));
    assert!(text.contains("\"'=cmd|' /C calc'!A0\"") || text.contains(",'=cmd|' /C calc'!A0,"));
    assert!(text.contains("\"line\nbreak\"") && text.contains("\"quote \"\" inside\""));
    assert!(!text.contains(",=") && !text.contains("\n="));
}

#[test]
fn stats_count_the_last_24_hours() {
    let d = start("hist-stats", "Asia/Kolkata");
    let c = db(&d);
    let now = Timestamp::now();
    let ago = |mins: i64| (now - jiff::SignedDuration::from_mins(mins)).to_string();
    let rows: [(i64, u8, Option<&str>); 7] = [
        (5, 2, Some("alice")),
        (65, 2, Some("alice")),
        (125, 1, Some("bob")),
        (185, 0, Some("carol")),
        (245, 0, None),
        (23 * 60, 1, Some("dave")),
        (25 * 60, 2, Some("old")),
    ];
    for (mins, sev, account) in rows {
        let instant = ago(mins);
        add(
            &c,
            H {
                at: &instant,
                sev,
                account,
                ..H::default()
            },
        );
    }
    c.execute(
        "INSERT INTO quarantine(id, record, original_path, check_name, reason, at) VALUES ('q1', '{}', '/a', 'webshell', 'r', ?1), ('q2', '{}', '/b', 'webshell', 'r', ?2)",
        params![micros(&ago(10)), micros(&ago(26 * 60))],
    )
    .unwrap();
    c.execute(
        "INSERT INTO blocked_ips(ip, reason, source, created) VALUES ('192.0.2.1', 'r', 'auto', ?1), ('192.0.2.2', 'r', 'auto', ?1), ('192.0.2.3', 'r', 'manual', ?1), ('192.0.2.4', 'r', 'auto', ?2)",
        params![micros(&ago(30)), micros(&ago(48 * 60))],
    )
    .unwrap();
    let s = d.get("/api/v1/stats", READ).expect(200).json();
    assert_eq!(
        s["severity_counts"],
        serde_json::json!({"critical": 2, "high": 2, "warning": 2, "total": 6})
    );
    let acc = &s["accounts_at_risk"];
    assert_eq!(acc["total"], 4);
    let names: Vec<&str> = acc["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["account"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alice", "bob", "dave", "carol"]);
    assert_eq!(acc["items"][0]["critical"], 2);
    assert_eq!(acc["items"][0]["total"], 2);
    assert_eq!(s["auto_response"]["quarantined"], 1);
    assert_eq!(s["auto_response"]["blocked_ips"], 3);
    assert_eq!(
        s["auto_response"]["blocked_ips_by_source"],
        serde_json::json!({"auto": 2, "manual": 1})
    );

    let tl = d.get("/api/v1/stats/timeline", READ).expect(200).json();
    let hours = tl["items"].as_array().unwrap();
    let end: Timestamp = hours[23]["end"].as_str().unwrap().parse().unwrap();
    assert!(end > now);
    let sum = |k: &str| -> u64 { hours.iter().map(|h| h[k].as_u64().unwrap()).sum() };
    // The first bucket starts at most 24 hours before now: the 23-hour-old row is in, the
    // 25-hour-old one is not.
    assert_eq!(sum("critical"), 2);
    assert_eq!(sum("high"), 2);
    assert_eq!(sum("warning"), 2);

    let tz = jiff::tz::TimeZone::get("Asia/Kolkata").unwrap();
    let t = d.get("/api/v1/stats/trend", READ).expect(200).json();
    let days = t["items"].as_array().unwrap();
    assert_eq!(t["time_zone"], "Asia/Kolkata");
    let today = now.to_zoned(tz.clone()).date();
    let last = days.last().unwrap();
    if last["date"] == today.to_string().as_str() {
        let start = today.to_zoned(tz.clone()).unwrap().timestamp();
        assert_eq!(last["start"], format!("{start:.6}"));
        let total: u64 = days
            .iter()
            .map(|d| {
                d["critical"].as_u64().unwrap()
                    + d["high"].as_u64().unwrap()
                    + d["warning"].as_u64().unwrap()
            })
            .sum();
        assert_eq!(total, 7);
    }
    for w in days.windows(2) {
        assert_eq!(w[0]["end"], w[1]["start"]);
    }
}

#[test]
fn search_examines_at_most_5000_candidates() {
    let d = start("hist-cap", "UTC");
    let mut c = db(&d);
    let tx = c.transaction().unwrap();
    for i in 0..5_100i64 {
        let instant = jiff::Timestamp::from_second(1_767_225_600 + i * 60)
            .unwrap()
            .to_string();
        add(
            &tx,
            H {
                at: &instant,
                message: "SSH login failed",
                ..H::default()
            },
        );
    }
    tx.commit().unwrap();
    let v = history(&d, &[("search", "Login Failed")]);
    assert_eq!(v["search_capped"], true);
    assert_eq!(v["truncated"], true);
    assert_eq!(v["total"], 5000);
    assert_eq!(v["items"].as_array().unwrap().len(), 100);
    // The newest rows were examined.
    assert_eq!(v["items"][0]["at"], "2026-01-04T12:59:00.000000Z");
    // A narrower range examines everything in it: an exact total.
    let v = history(
        &d,
        &[
            ("search", "login failed"),
            ("from", "2026-01-01"),
            ("to", "2026-01-01"),
        ],
    );
    assert_eq!(v["search_capped"], false);
    assert_eq!(v["total"], 1440);
    // Without search the total is exact.
    assert_eq!(history(&d, &[("limit", "0")])["total"], 5100);
    let r = d.get("/api/v1/history/csv?search=login", READ);
    assert_eq!(r.header("x-truncated"), Some("true"));
    assert_eq!(r.header("x-total-count"), Some("5000"));
    assert_eq!(r.text().lines().count(), 5001);
    let m = d.get("/metrics", READ).expect(200).text();
    assert!(m.contains("svc_history_search_capped_total 2"), "{m}");
}
