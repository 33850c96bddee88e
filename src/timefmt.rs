//! The API's instant format: RFC 3339, UTC, always six fractional digits.
//!
//! Instants are truncated to microseconds when created (see [`crate::clock`]), so a printed
//! instant parses back to exactly the stored value; clients can use it as a range bound.

use jiff::Timestamp;
use serde::Serializer;

/// Formats an instant as `2026-11-21T20:18:06.075924Z`.
pub fn rfc3339(ts: Timestamp) -> String {
    format!("{ts:.6}")
}

/// Serde helper: `#[serde(serialize_with = "crate::timefmt::ser")]`.
pub fn ser<S: Serializer>(ts: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*ts))
}

/// Serde helper for optional instants; pair with `skip_serializing_if = "Option::is_none"`
/// so an unset time is omitted rather than sent as null.
pub fn ser_opt<S: Serializer>(ts: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
    match ts {
        Some(t) => s.serialize_str(&rfc3339(*t)),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_six_fraction_digits_in_utc() {
        let t = Timestamp::from_second(1).unwrap();
        assert_eq!(rfc3339(t), "1970-01-01T00:00:01.000000Z");
        let t: Timestamp = "2026-03-29T01:30:00.5+01:00".parse().unwrap();
        assert_eq!(rfc3339(t), "2026-03-29T00:30:00.500000Z");
    }
}
