//! Proof-of-work primitives: nonces, the proof check, HMAC-SHA256 and the cookie, and the
//! parser of what a browser posts back. Everything here is pure (no clock, no I/O) so it
//! is tested and fuzzed directly.
//!
//! Guarantees:
//! - A proof is `SHA-256("<nonce>:<counter>")` with at least `bits` leading zero bits;
//!   `counter` is 1-20 ASCII digits, the nonce 32 lower-case hex digits.
//! - [`parse_proof`] takes at most [`MAX_BODY`] bytes of an
//!   `application/x-www-form-urlencoded` or JSON body and answers a typed error for
//!   anything else; it never panics.
//! - The cookie value is `<expiry>.<hex HMAC-SHA256(secret, "<ip>|<expiry>")>`; it is
//!   compared in constant time and is valid only for the address it was issued to and
//!   until its expiry.

use std::net::IpAddr;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Largest proof body accepted.
pub const MAX_BODY: usize = 1024;
/// Length of a nonce in hex digits.
pub const NONCE_HEX: usize = 32;
/// Name of the cookie a valid proof sets.
pub const COOKIE: &str = "svc_challenge";

/// Why a posted proof could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum ProofError {
    TooLarge,
    NotUtf8,
    MissingNonce,
    MissingCounter,
    BadNonce,
    BadCounter,
}

impl std::fmt::Display for ProofError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProofError::TooLarge => "proof body too large",
            ProofError::NotUtf8 => "proof body is not UTF-8",
            ProofError::MissingNonce => "missing nonce",
            ProofError::MissingCounter => "missing counter",
            ProofError::BadNonce => "nonce must be 32 lower-case hex digits",
            ProofError::BadCounter => "counter must be 1-20 decimal digits",
        })
    }
}

/// A proof as posted: the nonce it answers and the counter found.
#[derive(Debug, PartialEq, Eq, Clone)]
pub struct Proof {
    pub nonce: String,
    pub counter: String,
}

fn valid_nonce(s: &str) -> bool {
    s.len() == NONCE_HEX && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn valid_counter(s: &str) -> bool {
    !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit())
}

/// Reads `nonce` and `counter` from a form (`nonce=..&counter=..`) or a flat JSON object
/// (`{"nonce": "..", "counter": ".."}` or a number).
pub fn parse_proof(body: &[u8]) -> Result<Proof, ProofError> {
    if body.len() > MAX_BODY {
        return Err(ProofError::TooLarge);
    }
    let text = std::str::from_utf8(body).map_err(|_| ProofError::NotUtf8)?;
    let trimmed = text.trim();
    let (nonce, counter) = if trimmed.starts_with('{') {
        let v: serde_json::Value =
            serde_json::from_str(trimmed).map_err(|_| ProofError::MissingNonce)?;
        let get = |k: &str| match v.get(k) {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        (get("nonce"), get("counter"))
    } else {
        let mut nonce = None;
        let mut counter = None;
        for pair in trimmed.split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "nonce" if nonce.is_none() => nonce = Some(v.to_string()),
                "counter" if counter.is_none() => counter = Some(v.to_string()),
                _ => {}
            }
        }
        (nonce, counter)
    };
    let nonce = nonce.ok_or(ProofError::MissingNonce)?;
    let counter = counter.ok_or(ProofError::MissingCounter)?;
    if !valid_nonce(&nonce) {
        return Err(ProofError::BadNonce);
    }
    if !valid_counter(&counter) {
        return Err(ProofError::BadCounter);
    }
    Ok(Proof { nonce, counter })
}

/// Leading zero bits of a digest.
pub fn leading_zero_bits(d: &[u8]) -> u32 {
    let mut n = 0;
    for b in d {
        if *b == 0 {
            n += 8;
            continue;
        }
        return n + b.leading_zeros();
    }
    n
}

/// Whether `SHA-256("<nonce>:<counter>")` has at least `bits` leading zero bits.
pub fn proof_ok(nonce: &str, counter: &str, bits: u8) -> bool {
    let d = Sha256::digest(format!("{nonce}:{counter}").as_bytes());
    leading_zero_bits(&d) >= u32::from(bits)
}

/// Finds a counter for `nonce` (tests and the benchmark; browsers do this in JavaScript).
pub fn solve(nonce: &str, bits: u8) -> u64 {
    (0u64..)
        .find(|c| proof_ok(nonce, &c.to_string(), bits))
        .unwrap_or(0)
}

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut ipad = [0x36u8; 64];
    let mut opad = [0x5cu8; 64];
    for i in 0..64 {
        ipad[i] ^= k[i];
        opad[i] ^= k[i];
    }
    let inner = Sha256::new()
        .chain_update(ipad)
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(opad)
        .chain_update(inner)
        .finalize()
        .into()
}

/// The cookie value for `ip` valid until `expiry` (Unix seconds).
pub fn cookie_value(secret: &[u8], ip: IpAddr, expiry: i64) -> String {
    let mac = hmac_sha256(secret, format!("{ip}|{expiry}").as_bytes());
    format!("{expiry}.{}", hex::encode(mac))
}

/// Whether `value` is a cookie issued to `ip` that is still valid at `now` (Unix seconds).
pub fn cookie_valid(secret: &[u8], ip: IpAddr, value: &str, now: i64) -> bool {
    let Some((exp, mac)) = value.split_once('.') else {
        return false;
    };
    if exp.is_empty() || exp.len() > 19 || !exp.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let Ok(expiry) = exp.parse::<i64>() else {
        return false;
    };
    if expiry <= now || mac.len() != 64 {
        return false;
    }
    let want = cookie_value(secret, ip, expiry);
    want.as_bytes().ct_eq(value.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc4231_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Case 6: a key longer than the block.
        let mac = hmac_sha256(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        assert_eq!(
            hex::encode(mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn proofs_are_checked_by_leading_bits() {
        assert_eq!(leading_zero_bits(&[0, 0, 0x10]), 19);
        assert_eq!(leading_zero_bits(&[0x80]), 0);
        assert_eq!(leading_zero_bits(&[0, 0]), 16);
        let nonce = "0123456789abcdef0123456789abcdef";
        let c = solve(nonce, 12);
        assert!(proof_ok(nonce, &c.to_string(), 12));
        // The first counter that works is the first: every earlier one fails.
        assert!((0..c).all(|x| !proof_ok(nonce, &x.to_string(), 12)));
    }

    #[test]
    fn bodies_parse_or_fail_clearly() {
        let n = "0123456789abcdef0123456789abcdef";
        let p = parse_proof(format!("nonce={n}&counter=42").as_bytes()).unwrap();
        assert_eq!((p.nonce.as_str(), p.counter.as_str()), (n, "42"));
        let p = parse_proof(format!("{{\"nonce\":\"{n}\",\"counter\":7}}").as_bytes()).unwrap();
        assert_eq!(p.counter, "7");
        assert_eq!(parse_proof(b"counter=1"), Err(ProofError::MissingNonce));
        assert_eq!(
            parse_proof(format!("nonce={n}").as_bytes()),
            Err(ProofError::MissingCounter)
        );
        assert_eq!(
            parse_proof(b"nonce=XYZ&counter=1"),
            Err(ProofError::BadNonce)
        );
        assert_eq!(
            parse_proof(format!("nonce={n}&counter=-1").as_bytes()),
            Err(ProofError::BadCounter)
        );
        assert_eq!(parse_proof(&[b'a'; 2000]), Err(ProofError::TooLarge));
        assert_eq!(parse_proof(&[0xff, 0xfe]), Err(ProofError::NotUtf8));
        assert_eq!(parse_proof(b"{nonce"), Err(ProofError::MissingNonce));
    }

    #[test]
    fn cookies_bind_address_and_expiry() {
        let s = b"secret-secret-secret";
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let v = cookie_value(s, ip, 2_000);
        assert!(cookie_valid(s, ip, &v, 1_000));
        assert!(!cookie_valid(s, ip, &v, 2_000), "expired");
        assert!(!cookie_valid(s, "192.0.2.8".parse().unwrap(), &v, 1_000));
        assert!(!cookie_valid(b"other", ip, &v, 1_000));
        let forged = v.replacen("2000", "9000", 1);
        assert!(!cookie_valid(s, ip, &forged, 1_000));
        for junk in ["", ".", "x.y", "99999999999999999999.ab", "1."] {
            assert!(!cookie_valid(s, ip, junk, 0), "{junk}");
        }
    }
}
