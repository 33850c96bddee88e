//! The stored-value parser: a Dovecot password field (`{SCHEME}value`, or an unprefixed
//! crypt string) -> [`Stored`], with every audit limit of the spec's scheme table enforced
//! here, before any hash is calculated.
//!
//! Guarantees:
//! - Never panics and never allocates more than the value's length (at most
//!   [`MAX_STORED_BYTES`]); a longer value is refused without being looked at.
//! - Errors ([`FormatError`]) carry numbers and static words only, never a byte of the
//!   stored value, so they may go into a finding or a log line.
//! - Scheme names and the `.hex`, `.b64`, `.base64` suffixes are case-insensitive; an
//!   unprefixed value (or `{CRYPT}`) is autodetected by its crypt prefix; unsalted digests
//!   without a suffix are read as hex when they are exactly the digest's hex length of hex
//!   digits, else as base64.
//!
//! | Scheme | Accepted | Limits |
//! |---|---|---|
//! | CRYPT, SHA512-CRYPT, SHA256-CRYPT | `$6$` / `$5$` `[rounds=N$]salt$hash` | salt 1-16 chars; rounds 1,000-1,000,000, 5,000 when omitted |
//! | CRYPT, MD5-CRYPT | `$1$salt$hash` | salt 1-8 chars |
//! | CRYPT, BLF-CRYPT | `$2a$`, `$2b$`, `$2y$` `cc$` + 53 chars | cost 4-14 |
//! | ARGON2I, ARGON2ID | `$argon2i(d)$v=19$m=M,t=T,p=P$salt$hash` | m <= 65,536 KiB, t <= 4, p <= 4, salt 8-64 bytes, digest 16-64 bytes |
//! | PLAIN | plaintext | |
//! | PLAIN-MD5, LDAP-MD5, SMD5 | MD5 digest (SMD5: digest + salt) | salt 1-64 bytes |
//! | SHA, SHA1, SSHA, SHA256, SSHA256, SHA512, SSHA512 | SHA digests (S*: digest + salt) | salt 1-64 bytes |
//!
//! Not audited ([`FormatError::Unsupported`]): DES crypt (and BSDi extended DES), bcrypt
//! `$2x$`, yescrypt and scrypt, PBKDF2, SCRAM and other mechanism-specific schemes, Argon2d,
//! Argon2 versions other than 19, and every scheme name not in the table.

use std::fmt;

use base64::Engine as _;

/// Longest stored value audited (4 KiB).
pub const MAX_STORED_BYTES: usize = 4096;
/// SHA-crypt salt length limit (characters).
pub const SHA_CRYPT_MAX_SALT: usize = 16;
/// SHA-crypt rounds accepted.
pub const SHA_CRYPT_ROUNDS: std::ops::RangeInclusive<u32> = 1_000..=1_000_000;
/// SHA-crypt rounds when the value does not say.
pub const SHA_CRYPT_DEFAULT_ROUNDS: u32 = 5_000;
/// MD5-crypt salt length limit (characters).
pub const MD5_CRYPT_MAX_SALT: usize = 8;
/// bcrypt costs accepted.
pub const BCRYPT_COST: std::ops::RangeInclusive<u32> = 4..=14;
/// Argon2 memory limit (KiB): 64 MiB.
pub const ARGON2_MAX_MEMORY_KIB: u32 = 64 * 1024;
/// Argon2 passes limit.
pub const ARGON2_MAX_PASSES: u32 = 4;
/// Argon2 lanes limit.
pub const ARGON2_MAX_LANES: u32 = 4;
/// Argon2 salt lengths accepted (bytes).
pub const ARGON2_SALT: std::ops::RangeInclusive<usize> = 8..=64;
/// Argon2 digest lengths accepted (bytes).
pub const ARGON2_DIGEST: std::ops::RangeInclusive<usize> = 16..=64;
/// Salt lengths of the salted digest schemes (bytes).
pub const DIGEST_SALT: std::ops::RangeInclusive<usize> = 1..=64;

/// Digest algorithm of the digest schemes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Digest {
    Md5,
    Sha1,
    Sha256,
    Sha512,
}

impl Digest {
    /// Output length in bytes.
    pub fn output_len(self) -> usize {
        match self {
            Digest::Md5 => 16,
            Digest::Sha1 => 20,
            Digest::Sha256 => 32,
            Digest::Sha512 => 64,
        }
    }
}

/// Argon2 variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Argon2Variant {
    I,
    Id,
}

/// A parsed stored value, within the audit limits. Its `Debug` prints the scheme and its
/// parameters only, never salt, digest or plaintext.
#[derive(Clone, PartialEq, Eq)]
pub enum Stored {
    /// SHA-crypt (`$5$` sha256 or `$6$` sha512).
    ShaCrypt {
        sha512: bool,
        rounds: u32,
        salt: Vec<u8>,
        /// The crypt-base64 hash part as stored.
        hash: Vec<u8>,
    },
    /// MD5-crypt (`$1$`).
    Md5Crypt { salt: Vec<u8>, hash: Vec<u8> },
    /// bcrypt `$2a$`/`$2b$`/`$2y$`.
    Bcrypt {
        cost: u32,
        salt: [u8; 16],
        hash: [u8; 23],
    },
    /// Argon2i or Argon2id, version 19.
    Argon2 {
        variant: Argon2Variant,
        memory_kib: u32,
        passes: u32,
        lanes: u32,
        salt: Vec<u8>,
        hash: Vec<u8>,
    },
    /// Plaintext.
    Plain(Vec<u8>),
    /// A digest of password + salt (salt empty for the unsalted schemes).
    Digest {
        algo: Digest,
        salt: Vec<u8>,
        digest: Vec<u8>,
    },
}

impl Stored {
    /// The scheme family, for logs, findings and benchmarks.
    pub fn family(&self) -> &'static str {
        match self {
            Stored::ShaCrypt { sha512: true, .. } => "SHA512-CRYPT",
            Stored::ShaCrypt { sha512: false, .. } => "SHA256-CRYPT",
            Stored::Md5Crypt { .. } => "MD5-CRYPT",
            Stored::Bcrypt { .. } => "BLF-CRYPT",
            Stored::Argon2 {
                variant: Argon2Variant::I,
                ..
            } => "ARGON2I",
            Stored::Argon2 {
                variant: Argon2Variant::Id,
                ..
            } => "ARGON2ID",
            Stored::Plain(_) => "PLAIN",
            Stored::Digest {
                algo: Digest::Md5,
                salt,
                ..
            } => {
                if salt.is_empty() {
                    "MD5"
                } else {
                    "SMD5"
                }
            }
            Stored::Digest {
                algo: Digest::Sha1,
                salt,
                ..
            } => {
                if salt.is_empty() {
                    "SHA1"
                } else {
                    "SSHA"
                }
            }
            Stored::Digest {
                algo: Digest::Sha256,
                salt,
                ..
            } => {
                if salt.is_empty() {
                    "SHA256"
                } else {
                    "SSHA256"
                }
            }
            Stored::Digest {
                algo: Digest::Sha512,
                salt,
                ..
            } => {
                if salt.is_empty() {
                    "SHA512"
                } else {
                    "SSHA512"
                }
            }
        }
    }

    /// Relative cost of one verification, in units of roughly one microsecond of work
    /// (used to size calculation batches and the candidate list of slow schemes).
    pub fn cost_units(&self) -> u64 {
        match self {
            Stored::Plain(_) | Stored::Digest { .. } => 1,
            Stored::Md5Crypt { .. } => 300,
            Stored::ShaCrypt { rounds, .. } => u64::from(*rounds) / 4,
            Stored::Bcrypt { cost, .. } => 50u64 << cost,
            Stored::Argon2 {
                memory_kib, passes, ..
            } => u64::from(*memory_kib) * u64::from(*passes),
        }
    }
}

impl fmt::Debug for Stored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stored::ShaCrypt { rounds, .. } => write!(f, "{}(rounds={rounds})", self.family()),
            Stored::Bcrypt { cost, .. } => write!(f, "{}(cost={cost})", self.family()),
            Stored::Argon2 {
                memory_kib,
                passes,
                lanes,
                ..
            } => write!(f, "{}(m={memory_kib},t={passes},p={lanes})", self.family()),
            _ => f.write_str(self.family()),
        }
    }
}

/// Why a stored value is not audited. Carries no byte of the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormatError {
    /// A scheme or format the audit does not support (named).
    Unsupported(&'static str),
    /// The value does not have its scheme's format (what is wrong).
    Malformed(&'static str),
    /// A parameter is beyond the audit limit: (parameter, value, limit text).
    OverLimit(&'static str, u64, &'static str),
    /// The stored value is longer than [`MAX_STORED_BYTES`].
    TooLong(usize),
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Unsupported(what) => write!(f, "unsupported scheme: {what}"),
            FormatError::Malformed(what) => write!(f, "malformed stored value: {what}"),
            FormatError::OverLimit(param, value, limit) => {
                write!(f, "{param} {value} is outside the audit limit ({limit})")
            }
            FormatError::TooLong(n) => write!(
                f,
                "stored value of {n} bytes is longer than the {MAX_STORED_BYTES}-byte limit"
            ),
        }
    }
}

impl std::error::Error for FormatError {}

/// How a digest scheme's value is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    Auto,
    Hex,
    Base64,
}

/// What a stored value holds before it is audited: a value, or a locked account (`!`,
/// `*` prefixes of shadow files: nothing to audit).
#[derive(Debug, PartialEq, Eq)]
pub enum Field {
    Value(Stored),
    Locked,
}

/// Parses one stored password field.
pub fn parse(value: &[u8]) -> Result<Field, FormatError> {
    if value.len() > MAX_STORED_BYTES {
        return Err(FormatError::TooLong(value.len()));
    }
    if value.first() == Some(&b'{') {
        let close = memchr::memchr(b'}', value).ok_or(FormatError::Malformed("scheme name"))?;
        let name = value.get(1..close).unwrap_or(&[]);
        let rest = value.get(close + 1..).unwrap_or(&[]);
        return parse_scheme(name, rest).map(Field::Value);
    }
    if value.first().is_some_and(|&c| c == b'!' || c == b'*') {
        return Ok(Field::Locked);
    }
    parse_crypt(value).map(Field::Value)
}

fn parse_scheme(name: &[u8], rest: &[u8]) -> Result<Stored, FormatError> {
    if name.len() > 32 {
        return Err(FormatError::Unsupported("unknown scheme"));
    }
    let upper: Vec<u8> = name.to_ascii_uppercase();
    let (base, enc) = match upper.iter().rposition(|&c| c == b'.') {
        Some(dot) => {
            let enc = match upper.get(dot + 1..).unwrap_or(&[]) {
                b"HEX" => Encoding::Hex,
                b"B64" | b"BASE64" => Encoding::Base64,
                _ => return Err(FormatError::Unsupported("unknown encoding suffix")),
            };
            (upper.get(..dot).unwrap_or(&[]), enc)
        }
        None => (upper.as_slice(), Encoding::Auto),
    };
    let crypt_only = |s: Result<Stored, FormatError>| {
        if enc == Encoding::Auto {
            s
        } else {
            Err(FormatError::Malformed("encoding suffix on a crypt scheme"))
        }
    };
    match base {
        b"CRYPT" => crypt_only(parse_crypt(rest)),
        b"SHA512-CRYPT" => crypt_only(expect_prefix(rest, b"$6$").and_then(|_| parse_crypt(rest))),
        b"SHA256-CRYPT" => crypt_only(expect_prefix(rest, b"$5$").and_then(|_| parse_crypt(rest))),
        b"MD5-CRYPT" => crypt_only(expect_prefix(rest, b"$1$").and_then(|_| parse_crypt(rest))),
        b"BLF-CRYPT" => crypt_only(if rest.starts_with(b"$2") {
            parse_crypt(rest)
        } else {
            Err(FormatError::Malformed(
                "BLF-CRYPT value without a $2 prefix",
            ))
        }),
        b"ARGON2I" => crypt_only(parse_argon2(rest, Argon2Variant::I)),
        b"ARGON2ID" => crypt_only(parse_argon2(rest, Argon2Variant::Id)),
        b"PLAIN" => match enc {
            Encoding::Auto => Ok(Stored::Plain(rest.to_vec())),
            Encoding::Hex => decode_hex(rest)
                .map(Stored::Plain)
                .ok_or(FormatError::Malformed("invalid hex")),
            Encoding::Base64 => decode_b64(rest)
                .map(Stored::Plain)
                .ok_or(FormatError::Malformed("invalid base64")),
        },
        b"PLAIN-MD5" | b"LDAP-MD5" => unsalted(Digest::Md5, rest, enc),
        b"SMD5" => salted(Digest::Md5, rest, enc),
        b"SHA" | b"SHA1" => unsalted(Digest::Sha1, rest, enc),
        b"SSHA" => salted(Digest::Sha1, rest, enc),
        b"SHA256" => unsalted(Digest::Sha256, rest, enc),
        b"SSHA256" => salted(Digest::Sha256, rest, enc),
        b"SHA512" => unsalted(Digest::Sha512, rest, enc),
        b"SSHA512" => salted(Digest::Sha512, rest, enc),
        b"PBKDF2" => Err(FormatError::Unsupported("PBKDF2")),
        b"SCRAM-SHA-1" | b"SCRAM-SHA-256" => Err(FormatError::Unsupported("SCRAM")),
        b"CRAM-MD5" | b"DIGEST-MD5" | b"NTLM" | b"LANMAN" | b"RPA" | b"OTP" | b"SKEY" => {
            Err(FormatError::Unsupported("mechanism-specific scheme"))
        }
        b"DES-CRYPT" => Err(FormatError::Unsupported("DES crypt")),
        _ => Err(FormatError::Unsupported("unknown scheme")),
    }
}

fn expect_prefix(rest: &[u8], prefix: &[u8]) -> Result<(), FormatError> {
    if rest.starts_with(prefix) {
        Ok(())
    } else {
        Err(FormatError::Malformed(
            "value does not match its scheme name",
        ))
    }
}

const CRYPT_ALPHABET: &[u8; 64] =
    b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BCRYPT_ALPHABET: &[u8; 64] =
    b"./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

fn is_crypt_b64(s: &[u8]) -> bool {
    s.iter().all(|c| CRYPT_ALPHABET.contains(c))
}

/// Autodetects a crypt string by its prefix.
fn parse_crypt(v: &[u8]) -> Result<Stored, FormatError> {
    if v.is_empty() {
        return Err(FormatError::Malformed("empty stored value"));
    }
    if let Some(rest) = v.strip_prefix(b"$6$") {
        return parse_sha_crypt(rest, true);
    }
    if let Some(rest) = v.strip_prefix(b"$5$") {
        return parse_sha_crypt(rest, false);
    }
    if let Some(rest) = v.strip_prefix(b"$1$") {
        return parse_md5_crypt(rest);
    }
    for (p, _) in [(b"$2a$", ()), (b"$2b$", ()), (b"$2y$", ())] {
        if let Some(rest) = v.strip_prefix(p) {
            return parse_bcrypt(rest);
        }
    }
    if v.starts_with(b"$2x$") {
        return Err(FormatError::Unsupported("bcrypt 2x"));
    }
    if v.starts_with(b"$2$") || v.starts_with(b"$2") {
        return Err(FormatError::Unsupported("bcrypt variant"));
    }
    if v.starts_with(b"$y$") || v.starts_with(b"$gy$") || v.starts_with(b"$7$") {
        return Err(FormatError::Unsupported("yescrypt"));
    }
    if v.starts_with(b"$argon2") {
        return Err(FormatError::Unsupported("Argon2 under CRYPT"));
    }
    if v.starts_with(b"$pbkdf2") {
        return Err(FormatError::Unsupported("PBKDF2"));
    }
    if v.first() == Some(&b'_') {
        return Err(FormatError::Unsupported("DES crypt"));
    }
    if v.len() == 13 && is_crypt_b64(v) {
        return Err(FormatError::Unsupported("DES crypt"));
    }
    if v.first() == Some(&b'$') {
        return Err(FormatError::Unsupported("unknown crypt method"));
    }
    Err(FormatError::Malformed("not a crypt string"))
}

fn parse_sha_crypt(rest: &[u8], sha512: bool) -> Result<Stored, FormatError> {
    let mut rest = rest;
    let mut rounds = SHA_CRYPT_DEFAULT_ROUNDS;
    if let Some(r) = rest.strip_prefix(b"rounds=") {
        let end = memchr::memchr(b'$', r).ok_or(FormatError::Malformed("rounds"))?;
        let digits = r.get(..end).unwrap_or(&[]);
        if digits.is_empty() || digits.len() > 10 || !digits.iter().all(u8::is_ascii_digit) {
            return Err(FormatError::Malformed("rounds"));
        }
        let n = digits
            .iter()
            .fold(0u64, |a, d| a * 10 + u64::from(d - b'0'));
        if !(u64::from(*SHA_CRYPT_ROUNDS.start())..=u64::from(*SHA_CRYPT_ROUNDS.end())).contains(&n)
        {
            return Err(FormatError::OverLimit(
                "SHA-crypt rounds",
                n,
                "1,000 to 1,000,000",
            ));
        }
        rounds = n as u32;
        rest = r.get(end + 1..).unwrap_or(&[]);
    }
    let end = memchr::memchr(b'$', rest).ok_or(FormatError::Malformed("missing hash"))?;
    let salt = rest.get(..end).unwrap_or(&[]);
    let hash = rest.get(end + 1..).unwrap_or(&[]);
    if salt.is_empty() {
        return Err(FormatError::Malformed("empty salt"));
    }
    if salt.len() > SHA_CRYPT_MAX_SALT {
        return Err(FormatError::OverLimit(
            "SHA-crypt salt length",
            salt.len() as u64,
            "1 to 16 characters",
        ));
    }
    if salt.contains(&b':') || salt.contains(&b'\n') {
        return Err(FormatError::Malformed("salt"));
    }
    let want = if sha512 { 86 } else { 43 };
    if hash.len() != want || !is_crypt_b64(hash) {
        return Err(FormatError::Malformed("hash length or alphabet"));
    }
    Ok(Stored::ShaCrypt {
        sha512,
        rounds,
        salt: salt.to_vec(),
        hash: hash.to_vec(),
    })
}

fn parse_md5_crypt(rest: &[u8]) -> Result<Stored, FormatError> {
    let end = memchr::memchr(b'$', rest).ok_or(FormatError::Malformed("missing hash"))?;
    let salt = rest.get(..end).unwrap_or(&[]);
    let hash = rest.get(end + 1..).unwrap_or(&[]);
    if salt.is_empty() {
        return Err(FormatError::Malformed("empty salt"));
    }
    if salt.len() > MD5_CRYPT_MAX_SALT {
        return Err(FormatError::OverLimit(
            "MD5-crypt salt length",
            salt.len() as u64,
            "1 to 8 characters",
        ));
    }
    if hash.len() != 22 || !is_crypt_b64(hash) {
        return Err(FormatError::Malformed("hash length or alphabet"));
    }
    Ok(Stored::Md5Crypt {
        salt: salt.to_vec(),
        hash: hash.to_vec(),
    })
}

/// Decodes bcrypt's base64 (its own alphabet, no padding) into `out`; trailing bits of the
/// last character are ignored, as OpenBSD does.
fn bcrypt_b64(s: &[u8], out: &mut [u8]) -> bool {
    let mut acc: u32 = 0;
    let mut bits = 0;
    let mut n = 0;
    for &c in s {
        let Some(v) = BCRYPT_ALPHABET.iter().position(|&a| a == c) else {
            return false;
        };
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            if let Some(slot) = out.get_mut(n) {
                *slot = (acc >> bits) as u8;
                n += 1;
            }
            acc &= (1 << bits) - 1;
        }
    }
    n == out.len()
}

fn parse_bcrypt(rest: &[u8]) -> Result<Stored, FormatError> {
    // cc$ + 22 salt + 31 hash
    let (cost, tail) = match rest {
        [a, b, b'$', tail @ ..] if a.is_ascii_digit() && b.is_ascii_digit() => {
            (u32::from(a - b'0') * 10 + u32::from(b - b'0'), tail)
        }
        _ => return Err(FormatError::Malformed("cost")),
    };
    if !BCRYPT_COST.contains(&cost) {
        return Err(FormatError::OverLimit(
            "bcrypt cost",
            u64::from(cost),
            "4 to 14",
        ));
    }
    if tail.len() != 53 {
        return Err(FormatError::Malformed("salt and hash length"));
    }
    let mut salt = [0u8; 16];
    let mut hash = [0u8; 23];
    if !bcrypt_b64(tail.get(..22).unwrap_or(&[]), &mut salt)
        || !bcrypt_b64(tail.get(22..).unwrap_or(&[]), &mut hash)
    {
        return Err(FormatError::Malformed("salt or hash alphabet"));
    }
    Ok(Stored::Bcrypt { cost, salt, hash })
}

fn parse_argon2(v: &[u8], want: Argon2Variant) -> Result<Stored, FormatError> {
    let text = std::str::from_utf8(v).map_err(|_| FormatError::Malformed("not text"))?;
    let mut parts = text.split('$');
    if parts.next() != Some("") {
        return Err(FormatError::Malformed("Argon2 string"));
    }
    let variant = match parts.next() {
        Some("argon2i") => Argon2Variant::I,
        Some("argon2id") => Argon2Variant::Id,
        Some("argon2d") => return Err(FormatError::Unsupported("Argon2d")),
        _ => return Err(FormatError::Malformed("Argon2 variant")),
    };
    if variant != want {
        return Err(FormatError::Malformed(
            "value does not match its scheme name",
        ));
    }
    let mut next = parts
        .next()
        .ok_or(FormatError::Malformed("Argon2 string"))?;
    let version = match next.strip_prefix("v=") {
        Some(n) => {
            let v = small_number(n).ok_or(FormatError::Malformed("Argon2 version"))?;
            next = parts
                .next()
                .ok_or(FormatError::Malformed("Argon2 string"))?;
            v
        }
        // Without `v=`, the value is of version 16 (0x10).
        None => 16,
    };
    if version != 19 {
        return Err(FormatError::Unsupported("Argon2 version other than 19"));
    }
    let (mut m, mut t, mut p) = (None, None, None);
    for kv in next.split(',') {
        let (k, val) = kv
            .split_once('=')
            .ok_or(FormatError::Malformed("Argon2 parameters"))?;
        let n = small_number(val).ok_or(FormatError::Malformed("Argon2 parameters"))?;
        let slot = match k {
            "m" => &mut m,
            "t" => &mut t,
            "p" => &mut p,
            _ => return Err(FormatError::Malformed("Argon2 parameters")),
        };
        if slot.replace(n).is_some() {
            return Err(FormatError::Malformed("Argon2 parameters"));
        }
    }
    let (Some(m), Some(t), Some(p)) = (m, t, p) else {
        return Err(FormatError::Malformed("Argon2 parameters"));
    };
    if m > u64::from(ARGON2_MAX_MEMORY_KIB) {
        return Err(FormatError::OverLimit(
            "Argon2 memory (KiB)",
            m,
            "at most 65,536 KiB (64 MiB)",
        ));
    }
    if t > u64::from(ARGON2_MAX_PASSES) {
        return Err(FormatError::OverLimit("Argon2 passes", t, "at most 4"));
    }
    if p > u64::from(ARGON2_MAX_LANES) {
        return Err(FormatError::OverLimit("Argon2 lanes", p, "at most 4"));
    }
    if t == 0 || p == 0 || m < 8 * p {
        return Err(FormatError::Malformed("Argon2 parameters"));
    }
    let salt = parts.next().ok_or(FormatError::Malformed("Argon2 salt"))?;
    let hash = parts.next().ok_or(FormatError::Malformed("Argon2 hash"))?;
    if parts.next().is_some() {
        return Err(FormatError::Malformed("Argon2 string"));
    }
    let salt = decode_b64(salt.as_bytes()).ok_or(FormatError::Malformed("Argon2 salt"))?;
    let hash = decode_b64(hash.as_bytes()).ok_or(FormatError::Malformed("Argon2 hash"))?;
    if !ARGON2_SALT.contains(&salt.len()) {
        return Err(FormatError::OverLimit(
            "Argon2 salt length (bytes)",
            salt.len() as u64,
            "8 to 64",
        ));
    }
    if !ARGON2_DIGEST.contains(&hash.len()) {
        return Err(FormatError::OverLimit(
            "Argon2 digest length (bytes)",
            hash.len() as u64,
            "16 to 64",
        ));
    }
    Ok(Stored::Argon2 {
        variant,
        memory_kib: m as u32,
        passes: t as u32,
        lanes: p as u32,
        salt,
        hash,
    })
}

/// A decimal number of at most 10 digits.
fn small_number(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn decode_hex(s: &[u8]) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    hex::decode(s).ok()
}

/// Standard base64, padded or not.
fn decode_b64(s: &[u8]) -> Option<Vec<u8>> {
    let trimmed: &[u8] = {
        let mut end = s.len();
        while end > 0 && s.get(end - 1) == Some(&b'=') {
            end -= 1;
        }
        s.get(..end).unwrap_or(&[])
    };
    if s.len() - trimmed.len() > 2 {
        return None;
    }
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(trimmed)
        .ok()
}

fn unsalted(algo: Digest, v: &[u8], enc: Encoding) -> Result<Stored, FormatError> {
    let n = algo.output_len();
    let digest = match enc {
        Encoding::Hex => decode_hex(v).ok_or(FormatError::Malformed("invalid hex"))?,
        Encoding::Base64 => decode_b64(v).ok_or(FormatError::Malformed("invalid base64"))?,
        Encoding::Auto => {
            if v.len() == 2 * n && v.iter().all(u8::is_ascii_hexdigit) {
                decode_hex(v).ok_or(FormatError::Malformed("invalid hex"))?
            } else {
                decode_b64(v).ok_or(FormatError::Malformed("neither hex nor base64"))?
            }
        }
    };
    if digest.len() != n {
        return Err(FormatError::Malformed("digest length"));
    }
    Ok(Stored::Digest {
        algo,
        salt: Vec::new(),
        digest,
    })
}

fn salted(algo: Digest, v: &[u8], enc: Encoding) -> Result<Stored, FormatError> {
    let n = algo.output_len();
    let raw = match enc {
        Encoding::Hex => decode_hex(v).ok_or(FormatError::Malformed("invalid hex"))?,
        Encoding::Base64 | Encoding::Auto => {
            decode_b64(v).ok_or(FormatError::Malformed("invalid base64"))?
        }
    };
    if raw.len() <= n {
        return Err(FormatError::Malformed("salted digest without salt"));
    }
    let salt_len = raw.len() - n;
    if !DIGEST_SALT.contains(&salt_len) {
        return Err(FormatError::OverLimit(
            "salt length (bytes)",
            salt_len as u64,
            "1 to 64",
        ));
    }
    let (digest, salt) = raw.split_at(n);
    Ok(Stored::Digest {
        algo,
        salt: salt.to_vec(),
        digest: digest.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(v: &str) -> Stored {
        match parse(v.as_bytes()) {
            Ok(Field::Value(s)) => s,
            other => panic!("{v}: {other:?}"),
        }
    }

    #[test]
    fn prefixes_suffixes_and_autodetection() {
        assert_eq!(ok("{plain}secret"), Stored::Plain(b"secret".to_vec()));
        assert_eq!(ok("{PLAIN.b64}c2VjcmV0"), Stored::Plain(b"secret".to_vec()));
        assert_eq!(
            ok("{Plain.HEX}736563726574"),
            Stored::Plain(b"secret".to_vec())
        );
        // PLAIN-MD5 hex autodetected, LDAP-MD5 base64 autodetected.
        assert_eq!(
            ok("{PLAIN-MD5}5ebe2294ecd0e0f08eab7690d2a6ee69").family(),
            "MD5"
        );
        assert_eq!(ok("{ldap-md5}Xr4ilOzQ4PCOq3aQ0qbuaQ==").family(), "MD5");
        assert_eq!(
            ok("{sha.HEX}e5e9fa1ba31ecd1ae84f75caaa474f3a663f05f4").family(),
            "SHA1"
        );
        assert!(matches!(
            parse(b"{SHA.hex}5e"),
            Err(FormatError::Malformed(_))
        ));
        assert!(matches!(parse(b"{FOO}x"), Err(FormatError::Unsupported(_))));
        assert!(matches!(
            parse(b"{PBKDF2}$1$abc$1000$def"),
            Err(FormatError::Unsupported("PBKDF2"))
        ));
        assert!(matches!(
            parse(b"{SCRAM-SHA-256}4096,abc,def"),
            Err(FormatError::Unsupported("SCRAM"))
        ));
        assert!(matches!(
            parse(b"{SHA.zip}abc"),
            Err(FormatError::Unsupported(_))
        ));
        assert_eq!(parse(b"!$6$x$y").unwrap(), Field::Locked);
        assert_eq!(parse(b"*").unwrap(), Field::Locked);
    }

    #[test]
    fn crypt_autodetection_and_unsupported_kinds() {
        assert!(matches!(
            parse(b"abJnggxhB/yWI"),
            Err(FormatError::Unsupported("DES crypt"))
        ));
        assert!(matches!(
            parse(b"_J9..rasm"),
            Err(FormatError::Unsupported("DES crypt"))
        ));
        assert!(matches!(
            parse(b"$y$j9T$salt$hash"),
            Err(FormatError::Unsupported("yescrypt"))
        ));
        assert!(matches!(
            parse(b"$2x$10$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234"),
            Err(FormatError::Unsupported("bcrypt 2x"))
        ));
        assert!(matches!(parse(b""), Err(FormatError::Malformed(_))));
        // The scheme must match the value.
        assert!(matches!(
            parse(b"{SHA256-CRYPT}$6$abc$def"),
            Err(FormatError::Malformed(_))
        ));
        assert!(matches!(
            parse(b"{SHA512-CRYPT.hex}$6$abc$def"),
            Err(FormatError::Malformed(_))
        ));
    }

    #[test]
    fn the_size_limit_is_checked_first() {
        let v = vec![b'a'; MAX_STORED_BYTES + 1];
        assert_eq!(parse(&v), Err(FormatError::TooLong(MAX_STORED_BYTES + 1)));
        let mut v = b"{PLAIN}".to_vec();
        v.resize(MAX_STORED_BYTES, b'a');
        assert!(matches!(parse(&v), Ok(Field::Value(Stored::Plain(_)))));
    }

    #[test]
    fn errors_and_debug_never_show_the_value() {
        let secret = "{SSHA}c2VjcmV0LXNhbHQtYW5kLWRpZ2VzdC1jb250ZW50";
        let s = ok(secret);
        let shown = format!("{s:?}");
        assert_eq!(shown, "SSHA");
        for bad in [
            "$6$rounds=999$salt$x",
            "{SHA}not!base64",
            "$1$toolongsalt$x",
        ] {
            let e = parse(bad.as_bytes()).unwrap_err().to_string();
            assert!(!e.contains("salt$") && !e.contains("base64!"), "{e}");
        }
    }
}
