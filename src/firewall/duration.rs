//! Block and allow lifetimes as operators type them (`4s`, `90s`, `15m`, `24h`, `7d`,
//! `1h30m`) and the expiry phrase of `/api/v1/firewall/check` (`expires in 23h59m`).
//!
//! [`parse`] never panics on any input (fuzz target `firewall_input`).

use std::time::Duration;

/// Longest lifetime accepted: ten years.
pub const MAX: Duration = Duration::from_secs(3650 * 86_400);

/// Why a lifetime text was refused; each variant carries the (trimmed) text and its
/// message names the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    Empty,
    /// Over 32 bytes, or a number or total that overflows.
    TooLong(String),
    /// A character that is neither a digit nor a unit.
    UnknownUnit(String),
    /// A unit with no number before it.
    UnitWithoutNumber(String),
    /// A unit repeated or out of order (`1h1h`, `30m1h`; decision 288).
    UnitOrder(String),
    /// A number with no unit after it.
    NoUnit(String),
    /// Zero seconds in all.
    Zero(String),
    /// Longer than [`MAX`].
    OverMax(String),
}

impl std::fmt::Display for DurationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DurationError::Empty => f.write_str("empty duration"),
            DurationError::TooLong(s) => write!(f, "duration {s:?} is too long"),
            DurationError::UnknownUnit(s) => write!(
                f,
                "invalid duration {s:?}: use a number and a unit s, m, h or d (4s, 90s, 15m, 24h, 7d)"
            ),
            DurationError::UnitWithoutNumber(s) => write!(
                f,
                "invalid duration {s:?}: a unit must follow a number (4s, 15m, 24h, 7d)"
            ),
            DurationError::UnitOrder(s) => write!(
                f,
                "invalid duration {s:?}: each unit at most once, largest first (1d2h, 1h30m)"
            ),
            DurationError::NoUnit(s) => write!(
                f,
                "invalid duration {s:?}: the last number has no unit (s, m, h or d)"
            ),
            DurationError::Zero(s) => write!(f, "duration {s:?} must be at least one second"),
            DurationError::OverMax(s) => write!(f, "duration {s:?} is longer than ten years"),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses one or more `<number><unit>` parts, unit `s`, `m`, `h` or `d` (any case), each
/// unit at most once and in decreasing order (`1d2h`, `1h30m`; `1h1h` and `30m1h` are
/// refused, decision 288), between one second and ten years. The one reader of lifetimes
/// (API `for`, `svc firewall ... --for`).
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let too_long = || DurationError::TooLong(s.to_string());
    if s.len() > 32 {
        return Err(too_long());
    }
    let mut total: u64 = 0;
    let mut num: Option<u64> = None;
    // The last unit's length in seconds: the next one must be shorter.
    let mut previous: u64 = u64::MAX;
    for c in s.chars() {
        if let Some(d) = c.to_digit(10) {
            let n = num.unwrap_or(0);
            num = Some(
                n.checked_mul(10)
                    .and_then(|n| n.checked_add(d as u64))
                    .ok_or_else(too_long)?,
            );
            continue;
        }
        let unit = match c.to_ascii_lowercase() {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(DurationError::UnknownUnit(s.to_string())),
        };
        let n = num
            .take()
            .ok_or_else(|| DurationError::UnitWithoutNumber(s.to_string()))?;
        if unit >= previous {
            return Err(DurationError::UnitOrder(s.to_string()));
        }
        previous = unit;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(too_long)?;
    }
    if num.is_some() {
        return Err(DurationError::NoUnit(s.to_string()));
    }
    let d = Duration::from_secs(total);
    if d.is_zero() {
        return Err(DurationError::Zero(s.to_string()));
    }
    if d > MAX {
        return Err(DurationError::OverMax(s.to_string()));
    }
    Ok(d)
}

/// Remaining time in two units at most, rounded down: `2d3h`, `23h59m`, `14m5s`, `9s`.
pub fn phrase(secs: u64) -> String {
    let (d, h, m, s) = (
        secs / 86_400,
        secs % 86_400 / 3600,
        secs % 3600 / 60,
        secs % 60,
    );
    if d > 0 {
        format!("{d}d{h}h")
    } else if h > 0 {
        format!("{h}h{m}m")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_forms() {
        let secs = |s: &str| parse(s).unwrap().as_secs();
        assert_eq!(secs("4s"), 4);
        assert_eq!(secs("90s"), 90);
        assert_eq!(secs("15m"), 900);
        assert_eq!(secs("24h"), 86_400);
        assert_eq!(secs("7d"), 604_800);
        assert_eq!(secs("1h30m"), 5400);
        assert_eq!(secs(" 2D "), 172_800);
    }

    #[test]
    fn refusals_say_why() {
        assert!(parse("").unwrap_err().to_string().contains("empty"));
        assert!(parse("10").unwrap_err().to_string().contains("no unit"));
        assert!(parse("h").unwrap_err().to_string().contains("must follow"));
        assert!(parse("5w").unwrap_err().to_string().contains("unit"));
        assert!(parse("0s").unwrap_err().to_string().contains("at least"));
        assert!(parse("3651d")
            .unwrap_err()
            .to_string()
            .contains("ten years"));
        assert!(parse("99999999999999999999s").is_err());
        assert!(parse("-5s").is_err());
        // Issue 23 item 12: `1h1h` was two hours.
        for bad in ["1h1h", "30m1h", "1s1d", "1m2m", "1h30m1h"] {
            assert!(
                parse(bad).unwrap_err().to_string().contains("at most once"),
                "{bad}"
            );
        }
        assert_eq!(parse("1d2h3m4s").unwrap().as_secs(), 93_784);
        assert_eq!(parse("1H30m").unwrap().as_secs(), 5400);
    }

    #[test]
    fn each_refusal_is_its_own_variant_with_the_old_text() {
        let cases = [
            ("", DurationError::Empty, "empty duration"),
            (
                "1h1h",
                DurationError::UnitOrder("1h1h".into()),
                "invalid duration \"1h1h\": each unit at most once, largest first (1d2h, 1h30m)",
            ),
            (
                "5w",
                DurationError::UnknownUnit("5w".into()),
                "invalid duration \"5w\": use a number and a unit s, m, h or d (4s, 90s, 15m, 24h, 7d)",
            ),
            (
                "h",
                DurationError::UnitWithoutNumber("h".into()),
                "invalid duration \"h\": a unit must follow a number (4s, 15m, 24h, 7d)",
            ),
            (
                " 10 ",
                DurationError::NoUnit("10".into()),
                "invalid duration \"10\": the last number has no unit (s, m, h or d)",
            ),
            (
                "0s",
                DurationError::Zero("0s".into()),
                "duration \"0s\" must be at least one second",
            ),
            (
                "3651d",
                DurationError::OverMax("3651d".into()),
                "duration \"3651d\" is longer than ten years",
            ),
            (
                "99999999999999999999s",
                DurationError::TooLong("99999999999999999999s".into()),
                "duration \"99999999999999999999s\" is too long",
            ),
        ];
        for (text, variant, message) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!((&e, e.to_string().as_str()), (&variant, message), "{text}");
        }
    }

    #[test]
    fn phrases() {
        assert_eq!(phrase(86_399), "23h59m");
        assert_eq!(phrase(86_400 * 2 + 3 * 3600 + 5), "2d3h");
        assert_eq!(phrase(845), "14m5s");
        assert_eq!(phrase(9), "9s");
        assert_eq!(phrase(0), "0s");
    }
}
