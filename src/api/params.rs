//! Numbers and addresses from clients, parsed one way for every route.
//!
//! Guarantees:
//! - [`parse_uint`] accepts only plain ASCII digits: no sign, no spaces, no leading zeros
//!   (`0` itself is fine), nothing that overflows `u64`. `+5`, ` 5`, `5 `, `05`, `0x5`, `5.0`
//!   and `５` (fullwidth) are refused. Every numeric query parameter and every numeric path
//!   segment of the API goes through it, so `/api/v1/suppressions/+5` never addresses rule 5.
//! - [`uint_param`] treats a parameter that is absent or exactly empty (`?limit=`) as
//!   absent; any other value must pass [`parse_uint`] and fall within the route's range,
//!   else the answer is 400 naming the parameter.
//! - [`parse_ip`] answers the canonical form of an address: an IPv4-mapped IPv6 address
//!   (`::ffff:203.0.113.9`) becomes the IPv4 address, so it finds the same findings,
//!   incidents and rules as its IPv4 spelling. Every `ip` input of the API (query parameter
//!   or body field) goes through it.
//! - Echoed values in error messages are cut to [`ECHO_CHARS`] characters and escaped.

use std::fmt;
use std::net::IpAddr;

use crate::http::{Request, Response};

/// Characters of a refused value quoted back in an error message at most.
pub const ECHO_CHARS: usize = 64;

/// Why a number was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumError {
    /// Empty text.
    Empty,
    /// A character other than `0`-`9` (sign, space, dot, letter, non-ASCII digit).
    NotDigits,
    /// More than one digit starting with `0`.
    LeadingZero,
    /// Larger than `u64::MAX`.
    TooLarge,
}

impl fmt::Display for NumError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NumError::Empty => "empty",
            NumError::NotDigits => "only the digits 0-9 are allowed (no sign or spaces)",
            NumError::LeadingZero => "leading zeros are not allowed",
            NumError::TooLarge => "too large",
        })
    }
}

impl std::error::Error for NumError {}

/// A non-negative integer written as plain ASCII digits without sign, spaces or leading
/// zeros.
pub fn parse_uint(s: &str) -> Result<u64, NumError> {
    let b = s.as_bytes();
    if b.is_empty() {
        return Err(NumError::Empty);
    }
    if !b.iter().all(u8::is_ascii_digit) {
        return Err(NumError::NotDigits);
    }
    if b.len() > 1 && b[0] == b'0' {
        return Err(NumError::LeadingZero);
    }
    let mut n: u64 = 0;
    for &d in b {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or(NumError::TooLarge)?;
    }
    Ok(n)
}

/// `raw` quoted for an error message: at most [`ECHO_CHARS`] characters, escaped.
pub fn echo(raw: &str) -> String {
    format!("\"{}\"", crate::text::for_log(raw, ECHO_CHARS))
}

/// An optional integer query parameter within `min..=max`. Absent or exactly empty is
/// `Ok(None)`; anything else that is not a canonical number in range is a 400 naming the
/// parameter.
pub fn uint_param(req: &Request, name: &str, min: u64, max: u64) -> Result<Option<u64>, Response> {
    match req.query_param(name) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => uint_in(name, &v, min, max).map(Some),
    }
}

/// `raw` as a canonical number within `min..=max`, or a 400 naming `name`.
pub fn uint_in(name: &str, raw: &str, min: u64, max: u64) -> Result<u64, Response> {
    match parse_uint(raw) {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        Ok(_) => Err(bad(name, &format!("must be from {min} to {max}"), raw)),
        Err(e) => Err(bad(
            name,
            &format!("must be an integer from {min} to {max}: {e}"),
            raw,
        )),
    }
}

fn bad(name: &str, reason: &str, raw: &str) -> Response {
    Response::json(
        400,
        &serde_json::json!({
            "error": format!("{name}: {reason}, got {}", echo(raw)),
            "param": name,
        }),
    )
}

/// Why an address was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpError;

impl fmt::Display for IpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a valid IP address")
    }
}

impl std::error::Error for IpError {}

/// An IP address (surrounding whitespace ignored), IPv4-mapped IPv6 normalised to IPv4.
pub fn parse_ip(s: &str) -> Result<IpAddr, IpError> {
    s.trim()
        .parse::<IpAddr>()
        .map(|a| a.to_canonical())
        .map_err(|_| IpError)
}

/// An optional `ip` query parameter: absent or blank is `Ok(None)`; an invalid address is a
/// 400 naming the parameter.
pub fn ip_param(req: &Request, name: &str) -> Result<Option<IpAddr>, Response> {
    match req.query_param(name) {
        None => Ok(None),
        Some(v) if v.trim().is_empty() => Ok(None),
        Some(v) => parse_ip(&v)
            .map(Some)
            .map_err(|e| bad(name, &e.to_string(), &v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_digits_only() {
        assert_eq!(parse_uint("0"), Ok(0));
        assert_eq!(parse_uint("5"), Ok(5));
        assert_eq!(parse_uint("5300"), Ok(5300));
        assert_eq!(parse_uint("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_uint("18446744073709551616"), Err(NumError::TooLarge));
        assert_eq!(parse_uint(""), Err(NumError::Empty));
        for bad in [
            "+5", "-5", " 5", "5 ", "\t5", "5\n", "0x5", "5.0", "1e3", "５", "5_000", "٥",
        ] {
            assert_eq!(parse_uint(bad), Err(NumError::NotDigits), "{bad:?}");
        }
        for bad in ["00", "05", "00005300", "0000"] {
            assert_eq!(parse_uint(bad), Err(NumError::LeadingZero), "{bad:?}");
        }
    }

    #[test]
    fn mapped_addresses_become_ipv4() {
        assert_eq!(
            parse_ip("::ffff:203.0.113.9").unwrap().to_string(),
            "203.0.113.9"
        );
        assert_eq!(
            parse_ip(" 203.0.113.9 ").unwrap().to_string(),
            "203.0.113.9"
        );
        assert_eq!(parse_ip("2001:db8::1").unwrap().to_string(), "2001:db8::1");
        assert!(parse_ip("203.0.113.256").is_err());
        assert!(parse_ip("").is_err());
    }

    #[test]
    fn echo_is_cut_and_escaped() {
        let e = echo(&format!("a\u{1b}[31m{}", "x".repeat(500)));
        assert!(e.len() < 90, "{e}");
        assert!(!e.contains('\u{1b}'));
    }

    #[test]
    fn garbage_never_panics() {
        let mut x: u64 = 0x2545F4914F6CDD1D;
        for n in 0..5000usize {
            let mut s = String::new();
            for _ in 0..(n % 30) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                s.push(char::from_u32((x % 0x3000) as u32).unwrap_or('0'));
            }
            let _ = parse_uint(&s);
            let _ = parse_ip(&s);
        }
    }
}
