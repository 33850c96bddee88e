//! Tests for [`super`]. Real zones come from the system tz database (Debian `tzdata`).

use super::*;

fn zone(name: &str) -> TimeZone {
    TimeZone::get(name)
        .unwrap_or_else(|e| panic!("time zone {name} unavailable ({e}); install tzdata"))
}

fn ts(s: &str) -> Timestamp {
    s.parse()
        .unwrap_or_else(|e| panic!("bad test instant {s}: {e}"))
}

fn date(s: &str) -> Date {
    s.parse()
        .unwrap_or_else(|e| panic!("bad test date {s}: {e}"))
}

fn range(from: &str, to: &str, tz: &TimeZone) -> DateRange {
    parse_range(Some(from), Some(to), tz).unwrap_or_else(|e| panic!("{from}/{to}: {e}"))
}

fn one(value: &str) -> Result<Option<Timestamp>, RangeError> {
    parse_range(Some(value), None, &TimeZone::UTC).map(|r| r.from)
}

fn bounds(d: &str, tz: &str) -> (Timestamp, Timestamp) {
    day_bounds(date(d), &zone(tz))
}

// ---- accepted forms and bound semantics ----

#[test]
fn utc_date_bounds_cover_whole_days() {
    let r = range("2026-01-15", "2026-01-15", &TimeZone::UTC);
    assert_eq!(r.from, Some(ts("2026-01-15T00:00:00Z")));
    assert_eq!(r.to_exclusive, Some(ts("2026-01-16T00:00:00Z")));
    assert!(!r.empty);
    assert!(r.contains(ts("2026-01-15T23:59:59.999999999Z")));
    assert!(!r.contains(ts("2026-01-16T00:00:00Z")));
    assert!(r.contains(ts("2026-01-15T00:00:00Z")));
    assert!(!r.contains(ts("2026-01-14T23:59:59.999999Z")));
}

#[test]
fn rfc3339_from_inclusive_to_exclusive() {
    let r = range(
        "2026-01-15T10:00:00Z",
        "2026-01-15T11:00:00+01:00",
        &zone("Europe/Berlin"),
    );
    assert_eq!(r.from, Some(ts("2026-01-15T10:00:00Z")));
    assert_eq!(r.to_exclusive, Some(ts("2026-01-15T10:00:00Z")));
    assert!(r.empty, "from == to is an empty range");
    let r = range(
        "2026-01-15T10:00:00Z",
        "2026-01-15T10:00:01Z",
        &TimeZone::UTC,
    );
    assert!(r.contains(ts("2026-01-15T10:00:00Z")));
    assert!(!r.contains(ts("2026-01-15T10:00:01Z")));
}

#[test]
fn rfc3339_bound_ignores_server_zone() {
    for name in ["UTC", "Europe/Berlin", "America/Santiago", "Pacific/Apia"] {
        let r = range(
            "2026-03-29T02:30:00+02:00",
            "2026-03-29T03:30:00Z",
            &zone(name),
        );
        assert_eq!(r.from, Some(ts("2026-03-29T00:30:00Z")));
        assert_eq!(r.to_exclusive, Some(ts("2026-03-29T03:30:00Z")));
    }
}

#[test]
fn mixed_date_and_time_bounds() {
    let tz = zone("Europe/Berlin");
    let r = range("2026-01-15", "2026-01-16T12:00:00Z", &tz);
    assert_eq!(r.from, Some(ts("2026-01-14T23:00:00Z")));
    assert_eq!(r.to_exclusive, Some(ts("2026-01-16T12:00:00Z")));
    let r = range("2026-01-15T12:00:00Z", "2026-01-15", &tz);
    assert_eq!(r.to_exclusive, Some(ts("2026-01-15T23:00:00Z")));
}

#[test]
fn lowercase_t_and_z_and_offsets() {
    assert_eq!(
        one("2026-01-01t00:00:00z").unwrap(),
        Some(ts("2026-01-01T00:00:00Z"))
    );
    assert_eq!(
        one("2026-01-01T00:00:00-00:00").unwrap(),
        Some(ts("2026-01-01T00:00:00Z"))
    );
    assert_eq!(
        one("2026-01-01T00:00:00+23:59").unwrap(),
        Some(ts("2025-12-31T00:01:00Z"))
    );
    assert_eq!(
        one("2026-01-01T00:00:00-05:30").unwrap(),
        Some(ts("2026-01-01T05:30:00Z"))
    );
}

#[test]
fn empty_and_whitespace_bounds_are_absent() {
    let tz = TimeZone::UTC;
    for v in ["", " ", "\t", "\r\n", " \u{a0}\u{2003} "] {
        assert_eq!(
            parse_range(Some(v), Some(v), &tz).unwrap(),
            DateRange::UNBOUNDED,
            "{v:?}"
        );
    }
    assert_eq!(parse_range(None, None, &tz).unwrap(), DateRange::UNBOUNDED);
    let r = parse_range(Some(" 2026-01-01 "), Some(""), &tz).unwrap();
    assert_eq!(r.from, Some(ts("2026-01-01T00:00:00Z")));
    assert_eq!(r.to_exclusive, None);
    assert!(DateRange::UNBOUNDED.contains(Timestamp::MIN));
    assert!(DateRange::UNBOUNDED.contains(Timestamp::MAX));
}

#[test]
fn from_after_to_is_empty_not_error() {
    let r = range("2026-02-01", "2026-01-01", &TimeZone::UTC);
    assert!(r.empty);
    assert_eq!(r.from, Some(ts("2026-02-01T00:00:00Z")));
    assert!(!r.contains(ts("2026-01-15T00:00:00Z")));
    assert!(!r.contains(ts("2026-02-15T00:00:00Z")));
    let open = parse_range(Some("2026-02-01"), None, &TimeZone::UTC).unwrap();
    assert!(!open.empty);
}

#[test]
fn leap_years() {
    assert!(one("2024-02-29").is_ok());
    assert!(one("2000-02-29").is_ok());
    assert!(one("2023-02-29").is_err());
    assert!(one("1900-02-29").is_err());
    assert!(one("2026-04-31").is_err());
    assert!(one("2026-12-31").is_ok());
}

#[test]
fn leap_second_is_start_of_next_second() {
    assert_eq!(
        one("2016-12-31T23:59:60Z").unwrap(),
        Some(ts("2017-01-01T00:00:00Z"))
    );
    assert_eq!(
        one("2016-12-31T23:59:60.5Z").unwrap(),
        Some(ts("2017-01-01T00:00:00.5Z"))
    );
    let r = range(
        "2016-12-31T23:59:59.9Z",
        "2016-12-31T23:59:60.5Z",
        &TimeZone::UTC,
    );
    assert!(!r.empty, "order is kept across a leap second");
}

#[test]
fn extreme_years_saturate() {
    let tz = zone("Europe/Berlin");
    let r = range("0000-01-01", "9999-12-31", &tz);
    assert!(r.from.is_some());
    assert_eq!(r.to_exclusive, Some(Timestamp::MAX));
    assert!(r.contains(ts("2026-01-01T00:00:00Z")));
    assert_eq!(one("9999-12-31T23:59:59Z").unwrap(), Some(Timestamp::MAX));
    assert_eq!(
        one("9999-12-30T22:00:00.999999999Z").unwrap(),
        Some(Timestamp::MAX)
    );
    assert!(one("0000-01-01T00:00:00Z").is_ok());
    let (s, e) = day_bounds(date("9999-12-31"), &TimeZone::UTC);
    assert_eq!((s, e), (Timestamp::MAX, Timestamp::MAX));
    let (s, e) = day_bounds(Date::MIN, &tz);
    assert!(s <= e);
}

// ---- fractions ----

#[test]
fn fractions_keep_nanoseconds() {
    let t = one("2026-11-21T20:18:06.123456789Z").unwrap().unwrap();
    assert_eq!(t.subsec_nanosecond(), 123_456_789);
    let t = one("2026-11-21T20:18:06.1Z").unwrap().unwrap();
    assert_eq!(t.subsec_nanosecond(), 100_000_000);
    let t = one("2026-11-21T20:18:06.000001+05:30").unwrap().unwrap();
    assert_eq!(t, ts("2026-11-21T14:48:06.000001Z"));
    let t = one("2026-11-21T20:18:06.1234567890000Z").unwrap().unwrap();
    assert_eq!(
        t.subsec_nanosecond(),
        123_456_789,
        "trailing zeros change nothing"
    );
}

#[test]
fn digits_past_nanoseconds_round_up() {
    let t = one("2026-11-21T20:18:06.1234567891Z").unwrap().unwrap();
    assert_eq!(t.subsec_nanosecond(), 123_456_790);
    let t = one("2026-11-21T20:18:06.9999999999Z").unwrap().unwrap();
    assert_eq!(t, ts("2026-11-21T20:18:07Z"));
}

#[test]
fn ceil_micros_is_exact_for_microsecond_data() {
    let r = range(
        "2026-01-01T00:00:00.0000005Z",
        "2026-01-01T00:00:00.0000025Z",
        &TimeZone::UTC,
    )
    .ceil_micros();
    assert_eq!(r.from, Some(ts("2026-01-01T00:00:00.000001Z")));
    assert_eq!(r.to_exclusive, Some(ts("2026-01-01T00:00:00.000003Z")));
    let raw = range(
        "2026-01-01T00:00:00.0000005Z",
        "2026-01-01T00:00:00.0000025Z",
        &TimeZone::UTC,
    );
    for us in 0..5 {
        let t = ts("2026-01-01T00:00:00Z")
            .checked_add(SignedDuration::from_micros(us))
            .unwrap();
        assert_eq!(raw.contains(t), r.contains(t), "{t}");
    }
    assert_eq!(ceil_to_micros(Timestamp::MAX), Timestamp::MAX);
    let neg = ts("1969-12-31T23:59:59.9999995Z");
    assert_eq!(ceil_to_micros(neg), ts("1970-01-01T00:00:00Z"));
}

// ---- time zones ----

#[test]
fn berlin_normal_and_dst_days() {
    assert_eq!(
        bounds("2026-01-15", "Europe/Berlin"),
        (ts("2026-01-14T23:00:00Z"), ts("2026-01-15T23:00:00Z"))
    );
    // 23-hour spring-forward day.
    assert_eq!(
        bounds("2026-03-29", "Europe/Berlin"),
        (ts("2026-03-28T23:00:00Z"), ts("2026-03-29T22:00:00Z"))
    );
    // 25-hour fall-back day.
    assert_eq!(
        bounds("2026-10-25", "Europe/Berlin"),
        (ts("2026-10-24T22:00:00Z"), ts("2026-10-25T23:00:00Z"))
    );
}

#[test]
fn santiago_midnight_skipped_day_starts_at_one() {
    let (s, e) = bounds("2022-09-11", "America/Santiago");
    assert_eq!(s, ts("2022-09-11T04:00:00Z")); // 01:00 -03
    assert_eq!(e, ts("2022-09-12T03:00:00Z"));
    assert_eq!(bounds("2022-09-10", "America/Santiago").1, s);
    let r = range("2022-09-11", "2022-09-11", &zone("America/Santiago"));
    assert_eq!((r.from, r.to_exclusive), (Some(s), Some(e)));
}

#[test]
fn santiago_repeated_hour_before_midnight() {
    // 2022-04-02 23:00-24:00 is repeated: a 25-hour day.
    assert_eq!(
        bounds("2022-04-02", "America/Santiago"),
        (ts("2022-04-02T03:00:00Z"), ts("2022-04-03T04:00:00Z"))
    );
}

#[test]
fn havana_repeated_midnight_starts_at_first_occurrence() {
    // 2022-11-06 00:59:59 CDT -> 00:00:00 CST: midnight happens twice.
    let (s, e) = bounds("2022-11-06", "America/Havana");
    assert_eq!(s, ts("2022-11-06T04:00:00Z"));
    assert_eq!(e, ts("2022-11-07T05:00:00Z"));
    assert_eq!(bounds("2022-11-05", "America/Havana").1, s);
}

#[test]
fn havana_and_beirut_skipped_midnight() {
    assert_eq!(
        bounds("2022-03-13", "America/Havana").0,
        ts("2022-03-13T05:00:00Z")
    );
    assert_eq!(
        bounds("2022-03-27", "Asia/Beirut").0,
        ts("2022-03-26T22:00:00Z")
    );
    assert_eq!(
        bounds("2018-11-04", "America/Sao_Paulo").0,
        ts("2018-11-04T03:00:00Z")
    );
}

#[test]
fn apia_skipped_date_is_empty() {
    let tz = zone("Pacific/Apia");
    let jump = ts("2011-12-30T10:00:00Z");
    assert_eq!(day_bounds(date("2011-12-30"), &tz), (jump, jump));
    assert_eq!(
        day_bounds(date("2011-12-29"), &tz),
        (ts("2011-12-29T10:00:00Z"), jump)
    );
    assert_eq!(
        day_bounds(date("2011-12-31"), &tz),
        (jump, ts("2011-12-31T10:00:00Z"))
    );
    let r = range("2011-12-30", "2011-12-30", &tz);
    assert!(r.empty);
    assert!(!r.contains(jump));
    // As one bound of a wider range it is simply the jump instant.
    let r = range("2011-12-29", "2011-12-30", &tz);
    assert!(!r.empty);
    assert_eq!(r.to_exclusive, Some(jump));
}

#[test]
fn kwajalein_skipped_date_is_empty() {
    let jump = ts("1993-08-21T12:00:00Z");
    assert_eq!(bounds("1993-08-21", "Pacific/Kwajalein"), (jump, jump));
    assert!(range("1993-08-21", "1993-08-21", &zone("Pacific/Kwajalein")).empty);
}

#[test]
fn gap_spanning_midnight_starts_at_gap_end() {
    // UTC-3, DST UTC-2 from the first Sunday of September 23:30 (-> Monday 00:30) to the
    // first Sunday of April 24:30 DST (-> Sunday 23:30 standard).
    let tz = TimeZone::posix("AAA3BBB,M9.1.0/23:30,M4.1.0/24:30").unwrap();
    // Sunday 2026-09-06 23:30 -03 = 02:30Z jumps to Monday 00:30 -02. jiff's compatible
    // choice would give 01:00 -02 = 03:00Z.
    assert_eq!(
        day_bounds(date("2026-09-07"), &tz).0,
        ts("2026-09-07T02:30:00Z")
    );
    assert_eq!(
        day_bounds(date("2026-09-06"), &tz),
        (ts("2026-09-06T03:00:00Z"), ts("2026-09-07T02:30:00Z"))
    );
    // Monday 2026-04-06 00:30 -02 falls back to Sunday 23:30 -03: Monday's 00:00-00:30
    // happens twice; the day starts at the first.
    assert_eq!(
        day_bounds(date("2026-04-06"), &tz).0,
        ts("2026-04-06T02:00:00Z")
    );
}

#[test]
fn montreal_1919_gap_from_2330_to_0030() {
    // Real case of a gap spanning midnight: Sun 23:29:59 EST -> Mon 00:30:00 EDT.
    assert_eq!(
        bounds("1919-03-31", "America/Montreal").0,
        ts("1919-03-31T04:30:00Z")
    );
}

/// Every day start is the earliest instant whose local time is at or after midnight, and
/// consecutive days tile the timeline, checked around every transition of every zone in the
/// system database between 1900 and 2040, plus every day of 1990-2030 in a few zones.
#[test]
fn day_start_is_first_instant_at_or_after_midnight_in_all_zones() {
    let names: Vec<String> = jiff::tz::db().available().map(|n| n.to_string()).collect();
    assert!(names.len() > 100, "system tz database looks empty");
    let stop = ts("2040-01-01T00:00:00Z");
    let mut checked = 0usize;
    for name in &names {
        let tz = match TimeZone::get(name) {
            Ok(tz) => tz,
            Err(_) => continue,
        };
        for tr in tz.following(ts("1900-01-01T00:00:00Z")) {
            if tr.timestamp() > stop {
                break;
            }
            let d = tz.to_datetime(tr.timestamp()).date();
            let mut day = d.yesterday().unwrap().yesterday().unwrap();
            for _ in 0..5 {
                check_day(day, &tz, name);
                checked += 1;
                day = day.tomorrow().unwrap();
            }
        }
    }
    for name in [
        "Europe/Berlin",
        "America/Santiago",
        "America/Havana",
        "Pacific/Apia",
    ] {
        let tz = zone(name);
        let mut day = date("1990-01-01");
        while day < date("2030-01-01") {
            check_day(day, &tz, name);
            day = day.tomorrow().unwrap();
        }
    }
    assert!(checked > 10_000, "only {checked} days checked");
}

fn check_day(day: Date, tz: &TimeZone, name: &str) {
    let midnight = day.to_datetime(Time::midnight());
    let (start, end) = day_bounds(day, tz);
    assert!(start <= end, "{name} {day}");
    assert!(
        tz.to_datetime(start) >= midnight,
        "{name} {day} start {start}"
    );
    let before = start.checked_sub(SignedDuration::from_nanos(1)).unwrap();
    assert!(
        tz.to_datetime(before) < midnight,
        "{name} {day} start {start}"
    );
    assert_eq!(
        end,
        day_bounds(day.tomorrow().unwrap(), tz).0,
        "{name} {day}"
    );
    if start < end {
        assert_eq!(tz.to_datetime(start).date(), day, "{name} {day}");
    }
}

// ---- buckets ----

#[test]
fn hour_buckets_align_to_utc_hours() {
    let now = ts("2026-01-01T10:30:15.5Z");
    let b = hour_buckets(now, 24);
    assert_eq!(b.len(), 24);
    assert_eq!(b[0], ts("2025-12-31T11:00:00Z"));
    assert_eq!(b[23], ts("2026-01-01T10:00:00Z"));
    for w in b.windows(2) {
        assert_eq!(w[1].as_second() - w[0].as_second(), 3600);
    }
    let on_hour = ts("2026-01-01T10:00:00Z");
    assert_eq!(hour_buckets(on_hour, 24)[23], on_hour);
    assert!(hour_buckets(now, 0).is_empty());
    assert_eq!(hour_buckets(now, usize::MAX).len(), MAX_HOUR_BUCKETS);
    // Half-hour zones do not matter: buckets are UTC hours.
    let pre_epoch = hour_buckets(ts("1969-12-31T23:59:59Z"), 1);
    assert_eq!(pre_epoch, vec![ts("1969-12-31T23:00:00Z")]);
    assert!(hour_buckets(Timestamp::MIN, 24).len() < 24);
}

#[test]
fn trend_days_are_consecutive_local_days() {
    let tz = zone("Europe/Berlin");
    let now = ts("2026-04-10T22:30:00Z"); // 2026-04-11 00:30 in Berlin
    let days = trend_days(now, 30, &tz);
    assert_eq!(days.len(), 30);
    assert_eq!(days[29].date, date("2026-04-11"));
    assert_eq!(days[0].date, date("2026-03-13"));
    assert!(days[29].start <= now && now < days[29].end);
    for w in days.windows(2) {
        assert_eq!(w[0].end, w[1].start);
        assert_eq!(w[0].date.tomorrow().unwrap(), w[1].date);
    }
    let short = days.iter().find(|d| d.date == date("2026-03-29")).unwrap();
    assert_eq!(short.end.as_second() - short.start.as_second(), 23 * 3600);
    assert_eq!(trend_days(now, 10_000, &tz).len(), MAX_TREND_DAYS);
    let apia = trend_days(ts("2012-01-05T00:00:00Z"), 30, &zone("Pacific/Apia"));
    let skipped = apia.iter().find(|d| d.date == date("2011-12-30")).unwrap();
    assert_eq!(skipped.start, skipped.end);
}

// ---- errors ----

#[test]
fn error_names_param_and_echoes_input() {
    let e = parse_range(Some("yesterday"), None, &TimeZone::UTC).unwrap_err();
    assert_eq!(
        e.to_string(),
        "from: expected a date YYYY-MM-DD or an RFC 3339 time, got \"yesterday\""
    );
    assert_eq!(e.param, "from");
    assert_eq!(e.kind, RangeErrorKind::Syntax);
    let e = parse_range(Some("2026-01-01"), Some("soon"), &TimeZone::UTC).unwrap_err();
    assert_eq!(e.param, "to");
    assert!(e.to_string().starts_with("to: expected"));
    // `from` is checked first.
    let e = parse_range(Some("x"), Some("y"), &TimeZone::UTC).unwrap_err();
    assert_eq!(e.param, "from");
}

#[test]
fn invalid_fields_say_why() {
    let cases = [
        ("2026-13-01", "month 13 is not 01-12"),
        ("2026-00-10", "month 00 is not 01-12"),
        ("2026-02-30", "day 30 does not exist in 2026-02"),
        ("2026-01-00", "day 00 does not exist in 2026-01"),
        (
            "2026-11-21T25:00:00Z",
            "time 25:00:00 is not 00:00:00-23:59:60",
        ),
        ("2026-11-21T23:60:00Z", "time 23:60:00"),
        ("2026-11-21T23:59:61Z", "time 23:59:61"),
        (
            "2026-11-21T23:00:00+24:00",
            "offset 24:00 is not 00:00-23:59",
        ),
        ("2026-11-21T23:00:00-01:60", "offset 01:60"),
        ("2026-02-30T00:00:00Z", "day 30 does not exist"),
    ];
    for (input, why) in cases {
        let e = one(input).unwrap_err();
        assert_eq!(e.kind, RangeErrorKind::InvalidField, "{input}");
        assert!(e.message.contains(why), "{input}: {}", e.message);
        assert!(e.message.contains(&format!("\"{input}\"")), "{}", e.message);
    }
}

#[test]
fn non_rfc3339_forms_are_refused() {
    let bad = [
        "yesterday",
        "now",
        "-1d",
        "1767225600",
        "2026-01-01 00:00:00Z",
        "2026-01-01T00:00Z",
        "2026-01-01T00:00:00",
        "2026-01-01T00:00:00+0100",
        "2026-01-01T00:00:00+01",
        "2026-01-01T00:00:00.Z",
        "2026-01-01T00:00:00,5Z",
        "2026-01-01T00:00:00Z[UTC]",
        "2026-01-01[Europe/Berlin]",
        "2026-01-01T",
        "2026-1-01",
        "2026-01-1",
        "26-01-01",
        "+2026-01-01",
        "-2026-01-01",
        "+002026-01-01",
        "20260101",
        "20260101T000000Z",
        "2026/01/01",
        "2026-01",
        "2026-W01-1",
        "2026-001",
        "x2026-01-01",
        "2026-01-01x",
        "2026-01-01T00:00:00Zx",
        "2026-01-01\u{0}",
        "\u{feff}2026-01-01",
        "２０２６-01-01",
        "2026-01-01T00:00:00ZZ",
        "2026-01-01T0:00:00Z",
        "2026-01-01T00:00:00+01:00:00",
        "Thu, 01 Jan 2026 00:00:00 +0000",
        "2026-01-01TZ",
    ];
    for input in bad {
        let e = parse_range(None, Some(input), &TimeZone::UTC).unwrap_err();
        assert_eq!(e.param, "to", "{input}");
        assert_ne!(e.kind, RangeErrorKind::InvalidField, "{input}");
    }
}

#[test]
fn echo_escapes_controls_and_truncates() {
    let e = one("a\u{1b}[31m\"b\\\n\u{202e}").unwrap_err();
    assert!(
        e.message.ends_with(r#"got "a\u{1b}[31m\"b\\\n\u{202e}""#),
        "{}",
        e.message
    );
    let long = "x".repeat(100);
    let e = one(&long).unwrap_err();
    assert_eq!(e.kind, RangeErrorKind::TooLong);
    assert_eq!(
        e.message,
        format!(
            "{EXPECTED}, got \"{}\" (truncated; 100 bytes, at most 64)",
            "x".repeat(64)
        )
    );
    // Over the byte limit but within the echo limit: not truncated.
    let wide = "é".repeat(40);
    let e = one(&wide).unwrap_err();
    assert!(
        e.message.ends_with("\" (80 bytes, at most 64)"),
        "{}",
        e.message
    );
    let huge = "2026-01-01".repeat(100_000);
    let e = one(&huge).unwrap_err();
    assert_eq!(e.kind, RangeErrorKind::TooLong);
    assert!(e.message.len() < 200);
}

#[test]
fn long_fraction_within_limit_is_accepted() {
    let s = format!("2026-01-01T00:00:00.{}Z", "1".repeat(38));
    assert_eq!(s.len(), 59);
    let t = one(&s).unwrap().unwrap();
    assert_eq!(t.subsec_nanosecond(), 111_111_112);
}

#[test]
fn rejections_are_counted() {
    let counts = RangeRejections::default();
    for v in ["x", "2026-13-01", &"9".repeat(70), "nope"] {
        counts.record(&one(v).unwrap_err());
    }
    assert_eq!(
        counts.snapshot(),
        RejectionCounts {
            too_long: 1,
            syntax: 2,
            invalid_field: 1
        }
    );
}

// ---- garbage ----

/// xorshift64*: tiny deterministic generator, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const ALPHABET: &[u8] = b"0123456789--::TtZz+.  \t\n0123456789";

fn random_string(rng: &mut Rng) -> String {
    let len = rng.below(80) as usize;
    match rng.below(4) {
        // Random bytes, lossily decoded.
        0 => {
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        // Date-ish alphabet.
        1 => (0..len)
            .map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize] as char)
            .collect(),
        // A valid form with one byte mutated.
        2 => {
            let mut b = random_valid(rng).into_bytes();
            if !b.is_empty() {
                let i = rng.below(b.len() as u64) as usize;
                b[i] = ALPHABET[rng.below(ALPHABET.len() as u64) as usize];
            }
            String::from_utf8_lossy(&b).into_owned()
        }
        // Random unicode scalars.
        _ => (0..len / 4)
            .filter_map(|_| char::from_u32(rng.below(0x11_0000) as u32))
            .collect(),
    }
}

fn random_valid(rng: &mut Rng) -> String {
    let y = rng.below(10_000);
    let m = 1 + rng.below(12);
    let d = 1 + rng.below(28);
    if rng.below(3) == 0 {
        return format!("{y:04}-{m:02}-{d:02}");
    }
    let (h, mi, s) = (rng.below(24), rng.below(60), rng.below(60));
    let frac = match rng.below(3) {
        0 => String::new(),
        _ => {
            let n = 1 + rng.below(9) as usize;
            let digits: String = (0..n)
                .map(|_| char::from(b'0' + rng.below(10) as u8))
                .collect();
            format!(".{digits}")
        }
    };
    let off = match rng.below(3) {
        0 => "Z".to_string(),
        _ => format!(
            "{}{:02}:{:02}",
            if rng.below(2) == 0 { '+' } else { '-' },
            rng.below(24),
            rng.below(60)
        ),
    };
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}{frac}{off}")
}

#[test]
fn random_strings_never_panic() {
    let zones = [
        TimeZone::UTC,
        zone("America/Santiago"),
        zone("Pacific/Apia"),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut accepted = 0usize;
    for i in 0..100_000usize {
        let a = random_string(&mut rng);
        let b = random_string(&mut rng);
        let tz = &zones[i % zones.len()];
        if let Ok(r) = parse_range(Some(&a), Some(&b), tz) {
            accepted += 1;
            if let (Some(f), Some(t)) = (r.from, r.to_exclusive) {
                assert_eq!(r.empty, f >= t);
            }
        }
        if let Err(e) = parse_range(Some(&a), None, tz) {
            assert!(e.to_string().starts_with("from: expected"));
        }
    }
    assert!(accepted > 1_000, "generator too weak: {accepted} accepted");
}

/// Valid RFC 3339 times (nine fraction digits or fewer, no leap second) agree with jiff's
/// own, more lenient, parser.
#[test]
fn valid_times_agree_with_jiff() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    for _ in 0..20_000 {
        let s = random_valid(&mut rng);
        let ours = parse_range(Some(&s), None, &TimeZone::UTC)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .from
            .unwrap();
        if s.len() == 10 {
            assert_eq!(ours, date(&s).to_zoned(TimeZone::UTC).unwrap().timestamp());
            continue;
        }
        match s.parse::<Timestamp>() {
            Ok(theirs) => assert_eq!(ours, theirs, "{s}"),
            // Outside jiff's range near year 0 / 9999: ours saturates or is in range.
            Err(_) => assert!(s.starts_with("9999") || s.starts_with("0000"), "{s}"),
        }
    }
}
