use super::*;

use std::collections::HashMap;

fn q(pairs: &[(&str, &str)], tz: &str, paging: bool) -> Result<Query, ParamError> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let tz = TimeZone::get(tz).unwrap();
    parse_query(|k| map.get(k).cloned(), &tz, paging)
}

fn ok(pairs: &[(&str, &str)]) -> Query {
    q(pairs, "UTC", true).unwrap()
}

fn err(pairs: &[(&str, &str)]) -> ParamError {
    q(pairs, "UTC", true).unwrap_err()
}

fn ts(s: &str) -> i64 {
    s.parse::<Timestamp>().unwrap().as_microsecond()
}

#[test]
fn defaults() {
    let got = ok(&[]);
    assert_eq!(got.limit, DEFAULT_LIMIT);
    assert_eq!(got.offset, 0);
    assert_eq!(got.filter, Filter::default());
    // Blank values are absent (numbers: only the exactly empty value).
    let blank = ok(&[
        ("limit", ""),
        ("offset", ""),
        ("from", "  "),
        ("to", ""),
        ("severity", " "),
        ("checks", " , "),
        ("search", "   "),
    ]);
    assert_eq!(blank, got);
}

#[test]
fn limit_and_offset() {
    assert_eq!(ok(&[("limit", "0")]).limit, 0);
    assert_eq!(ok(&[("limit", "1000")]).limit, 1000);
    assert_eq!(
        ok(&[("offset", "9223372036854775807")]).offset,
        i64::MAX as u64
    );
    for bad in [
        "1001",
        "-1",
        "+5",
        " 7",
        "7 ",
        " ",
        "007",
        "00",
        "1.5",
        "1e3",
        "ten",
        "0x10",
        "99999999999999999999",
        "１",
    ] {
        let e = err(&[("limit", bad)]);
        assert_eq!(e.param, "limit", "{bad}");
        assert!(e.message.starts_with("limit: "), "{}", e.message);
    }
    for bad in ["-1", "9223372036854775808", "x", "01", " 0"] {
        assert_eq!(err(&[("offset", bad)]).param, "offset", "{bad}");
    }
    // The CSV export does not read them.
    let csv = q(&[("limit", "x"), ("offset", "-1")], "UTC", false).unwrap();
    assert_eq!((csv.offset, csv.limit), (0, CSV_ROWS));
}

#[test]
fn first_invalid_parameter_wins() {
    let e = err(&[("limit", "x"), ("from", "x"), ("severity", "x")]);
    assert_eq!(e.param, "limit");
    let e = err(&[("to", "x"), ("severity", "x")]);
    assert_eq!(e.param, "to");
    let e = err(&[("from", "2026-02-30"), ("to", "x")]);
    assert_eq!(e.param, "from");
    let e = err(&[
        ("checks", "a"),
        ("severity", "nope"),
        ("search", &"x".repeat(300)),
    ]);
    assert_eq!(e.param, "severity");
}

#[test]
fn severity_lists() {
    let f = ok(&[("severity", "high")]).filter;
    assert_eq!(f.severities, vec![Severity::High]);
    let f = ok(&[("severity", "CRITICAL, 0,High,,critical")]).filter;
    assert_eq!(
        f.severities,
        vec![Severity::Warning, Severity::High, Severity::Critical]
    );
    for bad in ["info", "3", "high;critical", "HIGH,x"] {
        let e = err(&[("severity", bad)]);
        assert_eq!(e.param, "severity");
    }
}

#[test]
fn checks_and_search() {
    let f = ok(&[("checks", "webshell, ssh_bruteforce,webshell,")]).filter;
    assert_eq!(
        f.checks,
        vec!["ssh_bruteforce".to_string(), "webshell".into()]
    );
    assert_eq!(err(&[("checks", &"c".repeat(129))]).param, "checks");
    let many: Vec<String> = (0..65).map(|i| format!("c{i}")).collect();
    assert_eq!(err(&[("checks", &many.join(","))]).param, "checks");
    assert_eq!(
        ok(&[("checks", &many[..64].join(","))]).filter.checks.len(),
        64
    );
    assert_eq!(
        ok(&[("search", "  Failed Login ")])
            .filter
            .search
            .as_deref(),
        Some("Failed Login")
    );
    assert!(ok(&[("search", &"ü".repeat(256))]).filter.search.is_some());
    assert_eq!(err(&[("search", "a\0b")]).param, "search");
    let e = err(&[("search", &"ü".repeat(257))]);
    assert_eq!(e.param, "search");
    // The echo is cut and escaped.
    assert!(e.message.len() < 300, "{}", e.message);
    let e = err(&[("limit", "a\nb\u{202e}")]);
    assert!(
        !e.message.contains('\n') && !e.message.contains('\u{202e}'),
        "{}",
        e.message
    );
}

#[test]
fn date_ranges_follow_the_server_zone() {
    // A date `to` includes its whole day; midnight skipped in Santiago on 2022-09-11.
    let f = q(
        &[("from", "2022-09-11"), ("to", "2022-09-11")],
        "America/Santiago",
        true,
    )
    .unwrap()
    .filter;
    assert_eq!(f.from, Some(ts("2022-09-11T04:00:00Z")));
    assert_eq!(f.to, Some(ts("2022-09-12T03:00:00Z")));
    // Apia skipped 2011-12-30: an empty range.
    let f = q(
        &[("from", "2011-12-30"), ("to", "2011-12-30")],
        "Pacific/Apia",
        true,
    )
    .unwrap()
    .filter;
    assert!(f.empty_range());
    // RFC 3339 bounds: `to` exclusive, fractions rounded up to whole microseconds.
    let f = ok(&[
        ("from", "2026-01-01T00:00:00.0000001Z"),
        ("to", "2026-01-01T01:00:00.5+01:00"),
    ])
    .filter;
    assert_eq!(f.from, Some(ts("2026-01-01T00:00:00.000001Z")));
    assert_eq!(f.to, Some(ts("2026-01-01T00:00:00.5Z")));
    for (param, bad) in [
        ("from", "2026-01-01T00:00:00"),
        ("to", "yesterday"),
        ("from", "2026-13-01"),
        ("to", &"9".repeat(100)),
    ] {
        let e = err(&[(param, bad)]);
        assert_eq!(e.param, param);
        assert!(
            e.message.starts_with(&format!("{param}: ")),
            "{}",
            e.message
        );
    }
}

#[test]
fn csv_encoding_neutralises_formulas() {
    let rows = vec![Row {
        id: 7,
        at: 1_767_225_600_000_001,
        check: "webshell".into(),
        severity: Severity::Critical,
        message: "=HYPERLINK(\"http://x\")".into(),
        details: "a,b\nc".into(),
        account: None,
        ip: Some("203.0.113.9".into()),
        path: Some("-p".into()),
    }];
    let text = String::from_utf8(encode_csv(&rows).unwrap()).unwrap();
    assert_eq!(
        text,
        "id,at,severity,check,message,details,account,ip,path\r\n\
         7,2026-01-01T00:00:00.000001Z,CRITICAL,webshell,\"'=HYPERLINK(\"\"http://x\"\")\",\"a,b\nc\",,203.0.113.9,'-p\r\n"
    );
    assert_eq!(
        String::from_utf8(encode_csv(&[]).unwrap()).unwrap(),
        "id,at,severity,check,message,details,account,ip,path\r\n"
    );
}

#[test]
fn stats_body_keeps_empty_lists_and_maps() {
    let now: Timestamp = "2026-01-02T00:00:00Z".parse().unwrap();
    let v = stats_body(
        now,
        StatsData {
            severities: [0; 3],
            accounts: Vec::new(),
            quarantined: 0,
            blocks: BTreeMap::new(),
        },
    );
    assert_eq!(v["start"], "2026-01-01T00:00:00.000000Z");
    assert_eq!(v["end"], "2026-01-02T00:00:00.000000Z");
    assert_eq!(v["accounts_at_risk"]["items"], json!([]));
    assert_eq!(v["auto_response"]["blocked_ips_by_source"], json!({}));
    assert_eq!(
        v["severity_counts"],
        json!({"critical": 0, "high": 0, "warning": 0, "total": 0})
    );
    let accounts: Vec<store::AccountCounts> = (0..MAX_ACCOUNTS_LISTED + 1)
        .map(|i| store::AccountCounts {
            account: format!("u{i}"),
            counts: [1, 0, 0],
        })
        .collect();
    let v = stats_body(
        now,
        StatsData {
            severities: [1, 2, 3],
            accounts,
            quarantined: 4,
            blocks: BTreeMap::from([("auto".to_string(), 2), ("manual".to_string(), 1)]),
        },
    );
    assert_eq!(v["severity_counts"]["total"], 6);
    assert_eq!(v["severity_counts"]["critical"], 3);
    assert_eq!(v["accounts_at_risk"]["total"], MAX_ACCOUNTS_LISTED + 1);
    assert_eq!(v["accounts_at_risk"]["truncated"], true);
    assert_eq!(
        v["accounts_at_risk"]["items"].as_array().unwrap().len(),
        MAX_ACCOUNTS_LISTED
    );
    assert_eq!(v["accounts_at_risk"]["items"][0]["warning"], 1);
    assert_eq!(v["auto_response"]["blocked_ips"], 3);
}

#[test]
fn trend_days_in_a_zone_that_skips_a_date() {
    let tz = TimeZone::get("Pacific/Apia").unwrap();
    let now: Timestamp = "2012-01-05T12:00:00Z".parse().unwrap();
    let days = daterange::trend_days(now, TREND_DAYS, &tz);
    let counts = vec![[0u64; 3]; days.len()];
    let v = trend_body(&days, &counts, &tz);
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), TREND_DAYS);
    assert_eq!(v["time_zone"], "Pacific/Apia");
    let skipped = items.iter().find(|d| d["date"] == "2011-12-30").unwrap();
    assert_eq!(skipped["start"], skipped["end"]);
    assert_eq!(skipped["start"], "2011-12-30T10:00:00.000000Z");
    // Oldest first, contiguous.
    for w in items.windows(2) {
        assert_eq!(w[0]["end"], w[1]["start"]);
        assert!(w[0]["date"].as_str() < w[1]["date"].as_str());
    }
}

#[test]
fn timeline_has_24_contiguous_hours_ending_with_now() {
    let now: Timestamp = "2026-03-29T01:30:00.5Z".parse().unwrap();
    let b = timeline_buckets(now);
    assert_eq!(b.len(), TIMELINE_HOURS);
    assert_eq!(
        b[23].0,
        "2026-03-29T01:00:00Z".parse::<Timestamp>().unwrap()
    );
    assert!(b[23].0 <= now && now < b[23].1);
    for w in b.windows(2) {
        assert_eq!(w[0].1, w[1].0);
    }
}

#[test]
fn server_zone_lookup_fits_a_worker_stack() {
    // HTTP workers run on 256 KiB stacks; the zone database read happens elsewhere.
    let name = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let tz = server_tz();
            let again = server_tz();
            assert_eq!(tz.iana_name(), again.iana_name());
            daterange::trend_days(Timestamp::now(), TREND_DAYS, &tz).len()
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(name, TREND_DAYS);
}
