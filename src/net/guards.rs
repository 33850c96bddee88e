//! Rule 1 of "Verified crawlers": what a reverse-DNS suffix and an address range must be
//! before anything is verified against them. Applied to `reputation.verified_bots` at load
//! and reload and to every range a vendor feed or snapshot supplies.
//!
//! - A reverse-DNS suffix must be a syntactically valid host name that is a registrable
//!   domain or a name under one: not a public suffix (the Public Suffix List, shipped in
//!   `rules/crawlers/public_suffix_list.dat`, embedded), and neither one of the shared-hosting
//!   suffixes of `rules/crawlers/shared-hosting-suffixes.txt` nor a name under one.
//! - An address range must be a CIDR (`a.b.c.d/n`, `v6/n`; a bare address is a host route)
//!   with no host bits set, at least /8 for IPv4 and /24 for IPv6, and must not overlap
//!   unspecified, private, loopback, link-local, CGNAT, documentation, benchmarking,
//!   multicast or reserved space (IPv6: anything outside 2000::/3, and 2001:db8::/32).

use std::collections::HashSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use std::sync::OnceLock;

const PSL: &str = include_str!("../../rules/crawlers/public_suffix_list.dat");
const SHARED: &str = include_str!("../../rules/crawlers/shared-hosting-suffixes.txt");

/// Shortest accepted IPv4 prefix.
pub const MIN_V4_PREFIX: u8 = 8;
/// Shortest accepted IPv6 prefix.
pub const MIN_V6_PREFIX: u8 = 24;

/// An address range (network address with host bits clear, and prefix length).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Net {
    pub addr: IpAddr,
    pub len: u8,
}

/// Why a text is not a usable crawler range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RangeError {
    /// Not an address or `address/length`.
    NotCidr(String),
    /// A prefix length that is not canonical digits within the family's width.
    Prefix(String),
    /// Bits set after the prefix.
    HostBits(String),
    /// Broader than the shortest accepted prefix (the second field).
    Broad(Net, u8),
    /// IPv6 outside global unicast (2000::/3).
    NotPublic(Net),
    /// Overlaps the non-public range of the second field.
    Overlaps(Net, Net),
}

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RangeError::NotCidr(s) => write!(f, "{s:?} is not a CIDR range"),
            RangeError::Prefix(s) => write!(f, "{s:?} has an invalid prefix length"),
            RangeError::HostBits(s) => write!(f, "{s:?} has host bits set"),
            RangeError::Broad(net, min) => write!(f, "{net} is broader than /{min}"),
            RangeError::NotPublic(net) => write!(f, "{net} is not public address space"),
            RangeError::Overlaps(net, range) => {
                write!(f, "{net} overlaps non-public range {range}")
            }
        }
    }
}

impl std::error::Error for RangeError {}

/// Why a text is not a usable reverse-DNS suffix (the text as given in each).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SuffixError {
    NotHostName(String),
    PublicSuffix(String),
    SharedHosting { raw: String, suffix: String },
}

impl fmt::Display for SuffixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SuffixError::NotHostName(raw) => write!(f, "{raw:?} is not a host name"),
            SuffixError::PublicSuffix(raw) => {
                write!(f, "{raw:?} is a public suffix, not a registrable domain")
            }
            SuffixError::SharedHosting { raw, suffix } => {
                write!(f, "{raw:?} is under the shared-hosting suffix {suffix:?}")
            }
        }
    }
}

impl std::error::Error for SuffixError {}

fn mask_v4(a: Ipv4Addr, len: u8) -> u32 {
    let m = if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    };
    u32::from(a) & m
}

fn mask_v6(a: Ipv6Addr, len: u8) -> u128 {
    let m = if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    };
    u128::from(a) & m
}

impl Net {
    /// Whether `ip` is inside (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => mask_v4(a, self.len) == u32::from(n),
            (IpAddr::V6(n), IpAddr::V6(a)) => mask_v6(a, self.len) == u128::from(n),
            _ => false,
        }
    }

    /// Whether the two ranges share an address.
    pub fn overlaps(&self, other: &Net) -> bool {
        let shorter = if self.len <= other.len { self } else { other };
        let longer = if self.len <= other.len { other } else { self };
        shorter.contains(longer.addr)
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Net {
    type Err = RangeError;
    /// Syntax only: `addr/len` with host bits clear, or a bare address.
    fn from_str(s: &str) -> Result<Net, RangeError> {
        let s = s.trim();
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().map_err(|_| RangeError::NotCidr(s.to_string()))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) => match super::cidr::prefix_len(l, max) {
                Some(n) => n,
                None => return Err(RangeError::Prefix(s.to_string())),
            },
        };
        let clean = match addr {
            IpAddr::V4(v4) => mask_v4(v4, len) == u32::from(v4),
            IpAddr::V6(v6) => mask_v6(v6, len) == u128::from(v6),
        };
        if !clean {
            return Err(RangeError::HostBits(s.to_string()));
        }
        Ok(Net { addr, len })
    }
}

fn nets(list: &[&str]) -> Vec<Net> {
    list.iter().filter_map(|s| s.parse().ok()).collect()
}

/// Space no published crawler range may touch.
fn forbidden() -> &'static [Net] {
    static F: OnceLock<Vec<Net>> = OnceLock::new();
    F.get_or_init(|| {
        nets(&[
            "0.0.0.0/8",       // this network
            "10.0.0.0/8",      // private
            "100.64.0.0/10",   // CGNAT
            "127.0.0.0/8",     // loopback
            "169.254.0.0/16",  // link-local
            "172.16.0.0/12",   // private
            "192.0.0.0/24",    // IETF protocol assignments
            "192.0.2.0/24",    // documentation
            "192.168.0.0/16",  // private
            "198.18.0.0/15",   // benchmarking
            "198.51.100.0/24", // documentation
            "203.0.113.0/24",  // documentation
            "224.0.0.0/4",     // multicast
            "240.0.0.0/4",     // reserved, broadcast
            "2001:db8::/32",   // documentation
            "2001::/32",       // Teredo
            "2002::/16",       // 6to4
        ])
    })
}

/// Why a range is refused, or `None` when it may be used.
pub fn check_range(net: &Net) -> Result<(), RangeError> {
    match net.addr {
        IpAddr::V4(_) if net.len < MIN_V4_PREFIX => {
            return Err(RangeError::Broad(*net, MIN_V4_PREFIX))
        }
        IpAddr::V6(_) if net.len < MIN_V6_PREFIX => {
            return Err(RangeError::Broad(*net, MIN_V6_PREFIX))
        }
        IpAddr::V6(v6) => {
            // Global unicast only (2000::/3): excludes ::1, ::, mapped, ULA, link-local,
            // multicast.
            if v6.segments()[0] & 0xe000 != 0x2000 {
                return Err(RangeError::NotPublic(*net));
            }
        }
        IpAddr::V4(_) => {}
    }
    if let Some(f) = forbidden().iter().find(|f| f.overlaps(net)) {
        return Err(RangeError::Overlaps(*net, *f));
    }
    Ok(())
}

/// Parses and checks one range.
pub fn parse_range(s: &str) -> Result<Net, RangeError> {
    let n: Net = s.parse()?;
    check_range(&n)?;
    Ok(n)
}

struct Suffixes {
    rules: HashSet<&'static str>,
    wildcards: HashSet<&'static str>,
    exceptions: HashSet<&'static str>,
    shared: HashSet<&'static str>,
}

fn suffixes() -> &'static Suffixes {
    static S: OnceLock<Suffixes> = OnceLock::new();
    S.get_or_init(|| {
        let mut s = Suffixes {
            rules: HashSet::new(),
            wildcards: HashSet::new(),
            exceptions: HashSet::new(),
            shared: HashSet::new(),
        };
        for line in PSL.lines() {
            let w = line.split_whitespace().next().unwrap_or("");
            if w.is_empty() || w.starts_with("//") {
                continue;
            }
            if let Some(rest) = w.strip_prefix("*.") {
                s.wildcards.insert(rest);
            } else if let Some(rest) = w.strip_prefix('!') {
                s.exceptions.insert(rest);
            } else {
                s.rules.insert(w);
            }
        }
        for line in SHARED.lines() {
            let w = line.split('#').next().unwrap_or("").trim();
            if !w.is_empty() {
                s.shared.insert(w);
            }
        }
        s
    })
}

/// Whether `name` (lower case, ASCII) is a public suffix: a PSL rule, a label under a
/// wildcard rule that is not an exception, or an unlisted top-level label (the PSL's
/// default rule `*`).
pub fn is_public_suffix(name: &str) -> bool {
    let s = suffixes();
    if s.exceptions.contains(name) {
        return false;
    }
    if s.rules.contains(name) || !name.contains('.') {
        return true;
    }
    match name.split_once('.') {
        Some((_, parent)) => s.wildcards.contains(parent),
        None => false,
    }
}

/// Normalises and checks one `rdns_suffixes` entry: lower case, no leading or trailing dot.
pub fn check_rdns_suffix(raw: &str) -> Result<String, SuffixError> {
    let name = raw
        .trim()
        .trim_start_matches('.')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    if !valid {
        return Err(SuffixError::NotHostName(raw.to_string()));
    }
    if is_public_suffix(&name) {
        return Err(SuffixError::PublicSuffix(raw.to_string()));
    }
    let s = suffixes();
    let mut cur = name.as_str();
    loop {
        if s.shared.contains(cur) {
            return Err(SuffixError::SharedHosting {
                raw: raw.to_string(),
                suffix: cur.to_string(),
            });
        }
        match cur.split_once('.') {
            Some((_, parent)) => cur = parent,
            None => break,
        }
    }
    Ok(name)
}

/// Whether host name `host` is `suffix` or a name under it.
pub fn under(host: &str, suffix: &str) -> bool {
    host == suffix
        || (host.len() > suffix.len()
            && host.ends_with(suffix)
            && host.as_bytes()[host.len() - suffix.len() - 1] == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_read_as_before_the_error_types() {
        let range = |s: &str| parse_range(s).unwrap_err().to_string();
        assert_eq!(range("nonsense"), "\"nonsense\" is not a CIDR range");
        assert_eq!(
            range("66.249.64.0/33"),
            "\"66.249.64.0/33\" has an invalid prefix length"
        );
        assert_eq!(
            range("66.249.64.1/27"),
            "\"66.249.64.1/27\" has host bits set"
        );
        assert_eq!(range("2.0.0.0/7"), "2.0.0.0/7 is broader than /8");
        assert_eq!(range("fe80::/64"), "fe80::/64 is not public address space");
        assert_eq!(
            range("10.1.0.0/16"),
            "10.1.0.0/16 overlaps non-public range 10.0.0.0/8"
        );
        let suffix = |s: &str| check_rdns_suffix(s).unwrap_err().to_string();
        assert_eq!(suffix("a..b"), "\"a..b\" is not a host name");
        assert_eq!(
            suffix("co.uk"),
            "\"co.uk\" is a public suffix, not a registrable domain"
        );
        assert_eq!(
            suffix("me.github.io"),
            "\"me.github.io\" is under the shared-hosting suffix \"github.io\""
        );
    }

    #[test]
    fn suffixes_must_be_registrable_and_not_shared() {
        assert_eq!(
            check_rdns_suffix(".GoogleBot.com.").unwrap(),
            "googlebot.com"
        );
        assert!(check_rdns_suffix("crawl.yandex.net").is_ok());
        assert!(check_rdns_suffix("search.msn.com").is_ok());
        for bad in [
            "com",
            "co.uk",
            "github.io",
            "herokuapp.com",
            "x.ck",
            "",
            "a..b",
            "a_b.com",
        ] {
            assert!(check_rdns_suffix(bad).is_err(), "{bad}");
        }
        // A tenant under a PSL private suffix is registrable; under a shared-hosting
        // suffix only as far as the PSL says, and the shared list refuses it.
        assert!(check_rdns_suffix("me.github.io").is_err());
        assert!(check_rdns_suffix("ec2-1-2-3-4.compute-1.amazonaws.com").is_err());
        assert!(check_rdns_suffix("www.ck").is_ok());
        assert!(
            is_public_suffix("uk") && is_public_suffix("co.uk") && !is_public_suffix("bbc.co.uk")
        );
    }

    #[test]
    fn ranges_must_be_public_and_narrow_enough() {
        assert!(parse_range("66.249.64.0/27").is_ok());
        assert!(parse_range("2001:4860:4801:10::/64").is_ok());
        assert!(parse_range("8.8.8.8").is_ok());
        // One prefix reader with the firewall: no leading zeros (issue 23 item 12).
        assert!(parse_range("66.249.64.0/027").is_err());
        assert!(parse_range("66.249.64.0/+27").is_err());
        for bad in [
            "1.0.0.0/7",
            "2001:4800::/23",
            "10.1.0.0/16",
            "127.0.0.1",
            "169.254.1.0/24",
            "100.64.0.0/16",
            "192.0.2.0/24",
            "198.51.100.0/25",
            "203.0.113.7",
            "192.168.0.0/24",
            "172.20.0.0/16",
            "fe80::/64",
            "fc00::/48",
            "::1",
            "2001:db8::/48",
            "224.0.0.1",
            "66.249.64.1/27",
            "66.249.64.0/33",
            "nonsense",
        ] {
            assert!(parse_range(bad).is_err(), "{bad}");
        }
        let n: Net = "66.249.64.0/27".parse().unwrap();
        assert!(n.contains("66.249.64.31".parse().unwrap()));
        assert!(n.contains("::ffff:66.249.64.5".parse().unwrap()));
        assert!(!n.contains("66.249.64.32".parse().unwrap()));
    }

    #[test]
    fn under_matches_whole_labels() {
        assert!(under("crawl-1.googlebot.com", "googlebot.com"));
        assert!(under("googlebot.com", "googlebot.com"));
        assert!(!under("evilgooglebot.com", "googlebot.com"));
        assert!(!under("googlebot.com.evil.net", "googlebot.com"));
    }
}
