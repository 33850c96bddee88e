//! Date ranges for the `from` / `to` query parameters (spec `api-core.md`, "Date ranges"),
//! and the calendar-day and hour buckets the trend and timeline routes use.
//!
//! Guarantees:
//! - A bound is a calendar date `YYYY-MM-DD` or a strict RFC 3339 time
//!   (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, `t` and `z` also accepted, seconds required, no
//!   space separator). Anything else is a [`RangeError`] naming the parameter; parsing never
//!   panics, whatever the input.
//! - Surrounding whitespace is ignored; an empty or whitespace-only bound is absent.
//! - A date is a calendar day in the server's time zone: a date `from` is the start of that day,
//!   a date `to` includes the whole day (the exclusive bound is the start of the next day).
//!   An RFC 3339 `from` is inclusive, an RFC 3339 `to` exclusive.
//! - A day starts at the earliest instant whose local time is at or after its midnight: the
//!   first occurrence of a repeated midnight, the end of a gap that skips midnight. A date the
//!   zone skips entirely (Pacific/Apia 2011-12-30) starts where the next day starts, so it
//!   covers an empty range.
//! - RFC 3339 fractions keep nanosecond precision; digits beyond the ninth round the bound up
//!   to the next nanosecond, which selects exactly the same whole-nanosecond instants. Use
//!   [`DateRange::ceil_micros`] (never truncation) to compare with microsecond data.
//! - `from` at or after `to` is not an error: the range is marked `empty` and matches nothing.
//! - A bound beyond the instants [`Timestamp`] can hold saturates to `Timestamp::MIN`/`MAX`
//!   (so `to=9999-12-31` means "no upper bound" in practice).
//! - A leap second (`:60`) is read as the start of the following second, which keeps bound
//!   order (`…:59.9` < `…:60.5`).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::{AmbiguousOffset, Offset, TimeZone};
use jiff::{SignedDuration, Timestamp};

/// Longest bound accepted, in bytes after trimming. The longest useful form,
/// `2026-11-21T20:18:06.123456789+05:30`, has 35; longer input is refused and counted.
pub const MAX_BOUND_LEN: usize = 64;
/// How many characters of a refused bound an error message echoes.
pub const ECHO_MAX_CHARS: usize = 64;
/// Most buckets [`hour_buckets`] returns (366 days of hours).
pub const MAX_HOUR_BUCKETS: usize = 24 * 366;
/// Most days [`trend_days`] returns.
pub const MAX_TREND_DAYS: usize = 366;

const EXPECTED: &str = "expected a date YYYY-MM-DD or an RFC 3339 time";
const NANOS_PER_SECOND: i128 = 1_000_000_000;

/// A parsed `from` / `to` pair. `None` bounds are open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DateRange {
    /// Inclusive lower bound.
    pub from: Option<Timestamp>,
    /// Exclusive upper bound.
    pub to_exclusive: Option<Timestamp>,
    /// True when both bounds are set and `from >= to_exclusive`: the range matches nothing
    /// (also the case for a skipped date given as both bounds).
    pub empty: bool,
}

impl DateRange {
    /// The range without bounds.
    pub const UNBOUNDED: DateRange = DateRange {
        from: None,
        to_exclusive: None,
        empty: false,
    };

    /// Builds a range from two bounds, setting `empty` when `from >= to_exclusive`.
    pub fn new(from: Option<Timestamp>, to_exclusive: Option<Timestamp>) -> DateRange {
        let empty = matches!((from, to_exclusive), (Some(f), Some(t)) if f >= t);
        DateRange {
            from,
            to_exclusive,
            empty,
        }
    }

    /// Whether `ts` lies in the range.
    pub fn contains(&self, ts: Timestamp) -> bool {
        let after_from = match self.from {
            Some(f) => f <= ts,
            None => true,
        };
        let before_to = match self.to_exclusive {
            Some(t) => ts < t,
            None => true,
        };
        !self.empty && after_from && before_to
    }

    /// The same range for data stored at microsecond precision: both bounds rounded up to a
    /// whole microsecond. For whole-microsecond `t`, `t >= from` and `t < to` keep their
    /// answers, so filtering stored values with these bounds is exact.
    pub fn ceil_micros(&self) -> DateRange {
        DateRange::new(
            self.from.map(ceil_to_micros),
            self.to_exclusive.map(ceil_to_micros),
        )
    }
}

/// Rounds an instant up to a whole microsecond (saturating at `Timestamp::MAX`).
pub fn ceil_to_micros(ts: Timestamp) -> Timestamp {
    let ns = ts.as_nanosecond();
    let rem = ns.rem_euclid(1_000);
    if rem == 0 {
        return ts;
    }
    Timestamp::from_nanosecond(ns - rem + 1_000).unwrap_or(Timestamp::MAX)
}

/// Why a bound was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RangeErrorKind {
    /// Longer than [`MAX_BOUND_LEN`] bytes.
    TooLong,
    /// Neither form's syntax.
    Syntax,
    /// Right syntax, but a field is out of range (month 13, February 30, hour 25, ...).
    InvalidField,
}

/// A refused bound: answer 400 with this as the `error` message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeError {
    /// `"from"` or `"to"`.
    pub param: &'static str,
    pub kind: RangeErrorKind,
    /// Human-readable reason; echoes at most [`ECHO_MAX_CHARS`] characters of the input,
    /// control and bidirectional-formatting characters escaped.
    pub message: String,
}

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.param, self.message)
    }
}

impl std::error::Error for RangeError {}

/// Counts refused bounds by kind. The route owns one and calls [`RangeRejections::record`]
/// for every [`RangeError`] it answers with 400.
#[derive(Debug, Default)]
pub struct RangeRejections {
    too_long: AtomicU64,
    syntax: AtomicU64,
    invalid_field: AtomicU64,
}

/// A snapshot of [`RangeRejections`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RejectionCounts {
    pub too_long: u64,
    pub syntax: u64,
    pub invalid_field: u64,
}

impl RangeRejections {
    pub fn record(&self, err: &RangeError) {
        let counter = match err.kind {
            RangeErrorKind::TooLong => &self.too_long,
            RangeErrorKind::Syntax => &self.syntax,
            RangeErrorKind::InvalidField => &self.invalid_field,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> RejectionCounts {
        RejectionCounts {
            too_long: self.too_long.load(Ordering::Relaxed),
            syntax: self.syntax.load(Ordering::Relaxed),
            invalid_field: self.invalid_field.load(Ordering::Relaxed),
        }
    }
}

/// Parses the `from` and `to` query values (already percent-decoded; `None` when the
/// parameter is missing) with calendar dates read in `tz`, the server's time zone
/// (`TimeZone::system()` in production). `from` is checked first, so its error wins.
pub fn parse_range(
    from: Option<&str>,
    to: Option<&str>,
    tz: &TimeZone,
) -> Result<DateRange, RangeError> {
    let from = match parse_bound("from", from)? {
        None => None,
        Some(Bound::Day(d)) => Some(day_start(d, tz)),
        Some(Bound::Instant(t)) => Some(t),
    };
    let to = match parse_bound("to", to)? {
        None => None,
        Some(Bound::Day(d)) => Some(day_bounds(d, tz).1),
        Some(Bound::Instant(t)) => Some(t),
    };
    Ok(DateRange::new(from, to))
}

/// The instants of calendar day `date` in `tz`: start inclusive, end exclusive (the next
/// day's start). Equal when the zone skips the whole date. Saturates at the `Timestamp`
/// range, so `start <= end` always holds.
pub fn day_bounds(date: Date, tz: &TimeZone) -> (Timestamp, Timestamp) {
    let start = day_start(date, tz);
    let end = match date.tomorrow() {
        Ok(next) => day_start(next, tz),
        Err(_) => Timestamp::MAX,
    };
    (start, end.max(start))
}

/// The calendar date of `now` in `tz` (the "today" of the trend route).
pub fn local_date(now: Timestamp, tz: &TimeZone) -> Date {
    tz.to_datetime(now).date()
}

/// One calendar day of the trend route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DayBucket {
    pub date: Date,
    /// Inclusive.
    pub start: Timestamp,
    /// Exclusive; equals `start` for a skipped date.
    pub end: Timestamp,
}

/// The last `days` calendar days in `tz` ending with the day containing `now`, oldest first.
/// `days` is capped at [`MAX_TREND_DAYS`]; days before the earliest representable date are
/// left out.
pub fn trend_days(now: Timestamp, days: usize, tz: &TimeZone) -> Vec<DayBucket> {
    let days = days.min(MAX_TREND_DAYS);
    let mut out = Vec::with_capacity(days);
    let mut date = local_date(now, tz);
    for _ in 0..days {
        let (start, end) = day_bounds(date, tz);
        out.push(DayBucket { date, start, end });
        match date.yesterday() {
            Ok(d) => date = d,
            Err(_) => break,
        }
    }
    out.reverse();
    out
}

/// Starts of `count` one-hour buckets aligned to whole UTC hours, oldest first, the last one
/// containing `now` (for the 24-hour timeline, `count` = 24). `count` is capped at
/// [`MAX_HOUR_BUCKETS`]; buckets before the earliest representable instant are left out.
pub fn hour_buckets(now: Timestamp, count: usize) -> Vec<Timestamp> {
    let count = count.min(MAX_HOUR_BUCKETS);
    let current = now.as_second().div_euclid(3600);
    let mut out = Vec::with_capacity(count);
    for back in (0..count).rev() {
        let hour = current.saturating_sub(back as i64);
        if let Some(ts) = hour
            .checked_mul(3600)
            .and_then(|s| Timestamp::from_second(s).ok())
        {
            out.push(ts);
        }
    }
    out
}

/// The first instant of `date` in `tz`.
fn day_start(date: Date, tz: &TimeZone) -> Timestamp {
    first_instant_at_or_after(date.to_datetime(Time::midnight()), tz)
}

/// The earliest instant whose local time in `tz` is at or after `dt`.
fn first_instant_at_or_after(dt: DateTime, tz: &TimeZone) -> Timestamp {
    let saturated = if dt.year() > 0 {
        Timestamp::MAX
    } else {
        Timestamp::MIN
    };
    match tz.to_ambiguous_timestamp(dt).offset() {
        AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(dt).unwrap_or(saturated),
        // `dt` occurs twice; the offset before the transition gives the first occurrence.
        AmbiguousOffset::Fold { before, .. } => before.to_timestamp(dt).unwrap_or(saturated),
        // `dt` does not occur. Read with the later offset it lies just before the transition,
        // so the next transition is the end of the gap: the first local time after `dt`.
        // (Read with the earlier offset, jiff's "compatible" choice, it would land `dt - gap
        // start` past the transition when the gap began before `dt`.)
        AmbiguousOffset::Gap { before, after } => {
            let fallback = before.to_timestamp(dt).unwrap_or(saturated);
            after
                .to_timestamp(dt)
                .ok()
                .and_then(|lo| tz.following(lo).next())
                .map(|t| t.timestamp())
                .filter(|t| *t <= fallback)
                .unwrap_or(fallback)
        }
    }
}

enum Bound {
    Day(Date),
    Instant(Timestamp),
}

fn parse_bound(param: &'static str, raw: Option<&str>) -> Result<Option<Bound>, RangeError> {
    let s = match raw.map(str::trim) {
        None | Some("") => return Ok(None),
        Some(s) => s,
    };
    let (echoed, truncated) = echo(s);
    let err = |kind, detail: &str| RangeError {
        param,
        kind,
        message: format!("{EXPECTED}, got {echoed}{detail}"),
    };
    if s.len() > MAX_BOUND_LEN {
        let cut = if truncated { "truncated; " } else { "" };
        let detail = format!(" ({cut}{} bytes, at most {MAX_BOUND_LEN})", s.len());
        return Err(err(RangeErrorKind::TooLong, &detail));
    }
    let fields = match lex(s.as_bytes()) {
        Some(f) => f,
        None => return Err(err(RangeErrorKind::Syntax, "")),
    };
    match to_bound(&fields) {
        Ok(b) => Ok(Some(b)),
        Err(detail) => Err(err(RangeErrorKind::InvalidField, &format!(" ({detail})"))),
    }
}

/// Echoes input for an error message: quoted, at most [`ECHO_MAX_CHARS`] characters, quotes,
/// backslashes, control and bidi/line-separator characters escaped. The flag tells whether
/// characters were left off (only possible for input over [`MAX_BOUND_LEN`]).
fn echo(s: &str) -> (String, bool) {
    let mut out = String::with_capacity(ECHO_MAX_CHARS + 8);
    out.push('"');
    for c in s.chars().take(ECHO_MAX_CHARS) {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control()
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}')
                || matches!(c, '\u{2066}'..='\u{2069}' | '\u{feff}') =>
            {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    (out, s.chars().nth(ECHO_MAX_CHARS).is_some())
}

/// The fields of a syntactically valid bound, not yet range-checked.
#[derive(Debug, Default)]
struct Fields {
    year: u32,
    month: u32,
    day: u32,
    time: Option<TimeFields>,
}

#[derive(Debug, Default)]
struct TimeFields {
    hour: u32,
    minute: u32,
    second: u32,
    /// First nine fraction digits as nanoseconds.
    nanos: u32,
    /// A non-zero digit beyond the ninth: round up one nanosecond.
    round_up: bool,
    /// Offset east of UTC: sign (+1/-1), hours, minutes.
    offset: (i32, u32, u32),
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn eat(&mut self, set: &[u8]) -> Option<u8> {
        let c = self.peek().filter(|c| set.contains(c))?;
        self.pos += 1;
        Some(c)
    }

    fn digit(&mut self) -> Option<u32> {
        let c = self.peek().filter(u8::is_ascii_digit)?;
        self.pos += 1;
        Some(u32::from(c - b'0'))
    }

    fn digits(&mut self, n: usize) -> Option<u32> {
        let mut v = 0u32;
        for _ in 0..n {
            v = v * 10 + self.digit()?;
        }
        Some(v)
    }
}

/// Strict syntax of `full-date` or RFC 3339 `date-time`; `None` when neither.
fn lex(b: &[u8]) -> Option<Fields> {
    let mut c = Cursor { b, pos: 0 };
    let mut f = Fields {
        year: c.digits(4)?,
        ..Fields::default()
    };
    c.eat(b"-")?;
    f.month = c.digits(2)?;
    c.eat(b"-")?;
    f.day = c.digits(2)?;
    if c.peek().is_none() {
        return Some(f);
    }
    c.eat(b"Tt")?;
    let mut t = TimeFields {
        hour: c.digits(2)?,
        ..TimeFields::default()
    };
    c.eat(b":")?;
    t.minute = c.digits(2)?;
    c.eat(b":")?;
    t.second = c.digits(2)?;
    if c.eat(b".").is_some() {
        let mut n = 0usize;
        while let Some(d) = c.digit() {
            if n < 9 {
                t.nanos = t.nanos * 10 + d;
            } else if d != 0 {
                t.round_up = true;
            }
            n += 1;
        }
        if n == 0 {
            return None;
        }
        for _ in n..9 {
            t.nanos *= 10;
        }
    }
    match c.eat(b"Zz+-")? {
        b'Z' | b'z' => {}
        sign => {
            let h = c.digits(2)?;
            c.eat(b":")?;
            let m = c.digits(2)?;
            t.offset = (if sign == b'-' { -1 } else { 1 }, h, m);
        }
    }
    if c.peek().is_some() {
        return None;
    }
    f.time = Some(t);
    Some(f)
}

/// A field out of its range (the detail in parentheses of an `InvalidField` message).
#[derive(Debug, PartialEq, Eq)]
enum FieldError {
    Month(u32),
    Day {
        year: u32,
        month: u32,
        day: u32,
    },
    Time {
        hour: u32,
        minute: u32,
        second: u32,
    },
    Offset {
        hours: u32,
        minutes: u32,
    },
    /// jiff refused the civil time (not expected after the range checks).
    InvalidTime,
    /// jiff refused the offset (not expected after the range checks).
    InvalidOffset,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldError::Month(m) => write!(f, "month {m:02} is not 01-12"),
            FieldError::Day { year, month, day } => {
                write!(f, "day {day:02} does not exist in {year:04}-{month:02}")
            }
            FieldError::Time {
                hour,
                minute,
                second,
            } => write!(
                f,
                "time {hour:02}:{minute:02}:{second:02} is not 00:00:00-23:59:60"
            ),
            FieldError::Offset { hours, minutes } => {
                write!(f, "offset {hours:02}:{minutes:02} is not 00:00-23:59")
            }
            FieldError::InvalidTime => f.write_str("invalid time"),
            FieldError::InvalidOffset => f.write_str("invalid offset"),
        }
    }
}

/// Range-checks the fields and builds the bound; `Err` names the field out of range.
fn to_bound(f: &Fields) -> Result<Bound, FieldError> {
    if !(1..=12).contains(&f.month) {
        return Err(FieldError::Month(f.month));
    }
    let date = small(f.year)
        .zip(small(f.month))
        .zip(small(f.day))
        .and_then(|((y, m), d)| Date::new(y, m as i8, d as i8).ok())
        .ok_or(FieldError::Day {
            year: f.year,
            month: f.month,
            day: f.day,
        })?;
    let t = match &f.time {
        None => return Ok(Bound::Day(date)),
        Some(t) => t,
    };
    if t.hour > 23 || t.minute > 59 || t.second > 60 {
        return Err(FieldError::Time {
            hour: t.hour,
            minute: t.minute,
            second: t.second,
        });
    }
    let (sign, oh, om) = t.offset;
    if oh > 23 || om > 59 {
        return Err(FieldError::Offset {
            hours: oh,
            minutes: om,
        });
    }
    let secs = t.second.min(59);
    let dt = DateTime::new(
        date.year(),
        date.month(),
        date.day(),
        t.hour as i8,
        t.minute as i8,
        secs as i8,
        0,
    )
    .map_err(|_| FieldError::InvalidTime)?;
    let offset = Offset::from_seconds(sign * (oh as i32 * 3600 + om as i32 * 60))
        .map_err(|_| FieldError::InvalidOffset)?;
    let saturated = if f.year >= 1970 {
        Timestamp::MAX
    } else {
        Timestamp::MIN
    };
    let base = match offset.to_timestamp(dt) {
        Ok(ts) => ts,
        Err(_) => return Ok(Bound::Instant(saturated)),
    };
    let mut extra = i128::from(t.nanos) + i128::from(t.round_up);
    if t.second == 60 {
        extra += NANOS_PER_SECOND;
    }
    let ts = i64::try_from(extra)
        .ok()
        .map(SignedDuration::from_nanos)
        .and_then(|d| base.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX);
    Ok(Bound::Instant(ts))
}

/// Narrows a lexed field (at most four digits) to the width jiff takes.
fn small(v: u32) -> Option<i16> {
    i16::try_from(v).ok()
}

#[cfg(test)]
mod tests;
