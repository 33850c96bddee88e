//! The time formats of WAF logs, read without allocation. Local times are converted in the
//! parser's time zone; the conversion of the last second seen is cached (log lines come in
//! order, many per second).

use jiff::civil::DateTime;
use jiff::tz::{Offset, TimeZone};
use jiff::Timestamp;

/// Civil fields of a time as written (nanoseconds of the second apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Civil {
    year: i16,
    month: i8,
    day: i8,
    hour: i8,
    minute: i8,
    second: i8,
}

/// The last local conversion.
#[derive(Default)]
pub struct Cache {
    last: Option<(Civil, Timestamp)>,
}

fn num(s: &str) -> Option<i64> {
    if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `.ffffff` -> nanoseconds (up to 9 digits; more are ignored).
fn fraction(s: &str) -> Option<i32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = s.get(..s.len().min(9))?;
    let mut n: i32 = digits.parse().ok()?;
    for _ in digits.len()..9 {
        n *= 10;
    }
    Some(n)
}

fn month(s: &str) -> Option<i8> {
    Some(match s {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    })
}

/// `HH:MM:SS[.ffffff]` -> (h, m, s, nanos).
fn clock(s: &str) -> Option<(i8, i8, i8, i32)> {
    let (hms, frac) = match s.split_once('.') {
        Some((a, f)) => (a, fraction(f)?),
        None => (s, 0),
    };
    let mut it = hms.split(':');
    let h = num(it.next()?)?;
    let m = num(it.next()?)?;
    let sec = num(it.next()?)?;
    if it.next().is_some() {
        return None;
    }
    Some((
        i8::try_from(h).ok()?,
        i8::try_from(m).ok()?,
        i8::try_from(sec).ok()?,
        frac,
    ))
}

fn civil(year: i64, month: i8, day: i64, hms: (i8, i8, i8, i32)) -> Option<(Civil, i32)> {
    Some((
        Civil {
            year: i16::try_from(year).ok()?,
            month,
            day: i8::try_from(day).ok()?,
            hour: hms.0,
            minute: hms.1,
            second: hms.2,
        },
        hms.3,
    ))
}

fn datetime(c: Civil) -> Option<DateTime> {
    DateTime::new(c.year, c.month, c.day, c.hour, c.minute, c.second, 0).ok()
}

impl Cache {
    fn local(&mut self, c: Civil, nanos: i32, tz: &TimeZone) -> Option<Timestamp> {
        let base = match self.last {
            Some((k, t)) if k == c => t,
            _ => {
                let t = tz.to_timestamp(datetime(c)?).ok()?;
                self.last = Some((c, t));
                t
            }
        };
        base.checked_add(jiff::SignedDuration::new(0, nanos)).ok()
    }

    /// Apache error log and ctime: `Mon Nov 23 17:10:25[.516645] 2026` (weekday optional,
    /// day zero- or space-padded), local time.
    pub fn ctime(&mut self, s: &str, tz: &TimeZone) -> Option<Timestamp> {
        let mut it = s.split_ascii_whitespace();
        let mut first = it.next()?;
        if month(first).is_none() {
            first = it.next()?;
        }
        let mo = month(first)?;
        let day = num(it.next()?)?;
        let hms = clock(it.next()?)?;
        let year = num(it.next()?)?;
        let (c, n) = civil(year, mo, day, hms)?;
        self.local(c, n, tz)
    }

    /// nginx `2026/11/23 17:10:27` and LiteSpeed `2026-11-23 17:10:27.123456`, local time.
    pub fn ymd(&mut self, date: &str, time: &str, tz: &TimeZone) -> Option<Timestamp> {
        let sep = if date.contains('/') { '/' } else { '-' };
        let mut it = date.split(sep);
        let year = num(it.next()?)?;
        let mo = i8::try_from(num(it.next()?)?).ok()?;
        let day = num(it.next()?)?;
        if it.next().is_some() {
            return None;
        }
        let (c, n) = civil(year, mo, day, clock(time)?)?;
        self.local(c, n, tz)
    }
}

/// Audit log: `23/Nov/2026:17:10:25[.628043] +0000` (the offset is part of the value).
pub fn audit(s: &str) -> Option<Timestamp> {
    let s = s.trim().trim_start_matches('[').trim_end_matches(']');
    let (dt, off) = s.split_once(' ')?;
    let mut it = dt.splitn(3, '/');
    let day = num(it.next()?)?;
    let mo = month(it.next()?)?;
    let rest = it.next()?;
    let (year, time) = rest.split_once(':')?;
    let (c, nanos) = civil(num(year)?, mo, day, clock(time)?)?;
    let off = off.trim();
    let sign = match off.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits = off.get(1..)?;
    if digits.len() != 4 {
        return None;
    }
    let hh = num(digits.get(..2)?)?;
    let mm = num(digits.get(2..)?)?;
    let secs = i32::try_from(sign * (hh * 3600 + mm * 60)).ok()?;
    let offset = Offset::from_seconds(secs).ok()?;
    let t = offset.to_timestamp(datetime(c)?).ok()?;
    t.checked_add(jiff::SignedDuration::new(0, nanos)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let utc = TimeZone::UTC;
        let mut c = Cache::default();
        let t = c.ctime("Mon Nov 23 17:10:25.516645 2026", &utc).unwrap();
        assert_eq!(t.to_string(), "2026-11-23T17:10:25.516645Z");
        assert_eq!(
            c.ctime("Mon Nov  3 07:00:01 2026", &utc)
                .unwrap()
                .to_string(),
            "2026-11-03T07:00:01Z"
        );
        assert_eq!(
            c.ymd("2026/11/23", "17:10:27", &utc).unwrap().to_string(),
            "2026-11-23T17:10:27Z"
        );
        assert_eq!(
            c.ymd("2026-04-01", "17:13:53.887905", &utc)
                .unwrap()
                .to_string(),
            "2026-04-01T17:13:53.887905Z"
        );
        assert_eq!(
            audit("[23/Nov/2026:17:10:25.628043 +0130]")
                .unwrap()
                .to_string(),
            "2026-11-23T15:40:25.628043Z"
        );
        assert_eq!(
            audit("23/Nov/2026:17:10:28 -0500").unwrap().to_string(),
            "2026-11-23T22:10:28Z"
        );
        let paris = TimeZone::get("Europe/Paris").unwrap();
        assert_eq!(
            c.ymd("2026/07/01", "12:00:00", &paris).unwrap().to_string(),
            "2026-07-01T10:00:00Z"
        );
        for bad in [
            "",
            "Mon Foo 23 17:10:25 2026",
            "Mon Nov 99 17:10:25 2026",
            "Mon Nov 23 17:10 2026",
            "Mon Nov 23 17:10:25.x 2026",
        ] {
            assert!(c.ctime(bad, &utc).is_none(), "{bad}");
        }
        assert!(audit("23/Nov/2026:17:10:28 +00").is_none());
        assert!(audit("23/Nov/2026:17:10:28").is_none());
    }
}
