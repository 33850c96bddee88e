//! Addresses and CIDR ranges as the firewall keeps them, and port lists.
//!
//! Guarantees:
//! - [`Net::parse`] accepts an IPv4 or IPv6 address, or a CIDR range whose host bits are
//!   zero; it never panics on any input (fuzz target `firewall_input`). IPv4-mapped IPv6
//!   addresses (`::ffff:192.0.2.7`) are the IPv4 address: one address has one key.
//! - A [`Net`] of a full-length prefix is an address and prints without a prefix
//!   (`192.0.2.7`); other ranges print as `198.51.100.0/24`. Printing and parsing round-trip.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Longest text accepted for an address or range.
pub const MAX_TEXT: usize = 64;

/// An address (full-length prefix) or a CIDR range with its host bits zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Net {
    addr: IpAddr,
    prefix: u8,
}

/// Why a text is not an address or range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetError {
    Empty,
    TooLong,
    Invalid(String),
    Prefix(String),
    HostBits { given: String, network: String },
}

impl fmt::Display for NetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetError::Empty => f.write_str("empty address"),
            NetError::TooLong => write!(f, "address longer than {MAX_TEXT} characters"),
            NetError::Invalid(s) => write!(f, "{s:?} is not an IP address or CIDR range"),
            NetError::Prefix(s) => write!(f, "invalid prefix length in {s:?}"),
            NetError::HostBits { given, network } => {
                write!(f, "{given:?} has host bits set; did you mean {network}?")
            }
        }
    }
}

impl std::error::Error for NetError {}

fn bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u32::from(a) as u128,
        IpAddr::V6(a) => u128::from(a),
    }
}

fn width(ip: IpAddr) -> u8 {
    if ip.is_ipv4() {
        32
    } else {
        128
    }
}

fn from_bits(v4: bool, b: u128) -> IpAddr {
    if v4 {
        IpAddr::V4(Ipv4Addr::from(b as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(b))
    }
}

fn mask(w: u8, prefix: u8) -> u128 {
    let all: u128 = if w == 32 { u32::MAX as u128 } else { u128::MAX };
    if prefix == 0 {
        0
    } else if prefix >= w {
        all
    } else {
        all & !(all >> prefix)
    }
}

/// A CIDR prefix length as written after `/`: ASCII digits without sign or leading zero
/// (`024` is refused, not read as 24: decision 288), at most `max`. The one reader of prefix
/// lengths (firewall ranges, crawler ranges).
pub fn prefix_len(text: &str, max: u8) -> Option<u8> {
    let b = text.as_bytes();
    if b.is_empty() || b.len() > 3 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if b.len() > 1 && b[0] == b'0' {
        return None;
    }
    text.parse::<u8>().ok().filter(|&n| n <= max)
}

impl Net {
    /// One address (IPv4-mapped IPv6 becomes IPv4).
    pub fn host(ip: IpAddr) -> Net {
        let ip = ip.to_canonical();
        Net {
            addr: ip,
            prefix: width(ip),
        }
    }

    /// A range; `addr` must have its host bits zero.
    pub fn new(addr: IpAddr, prefix: u8) -> Result<Net, NetError> {
        let (addr, prefix) = match addr {
            IpAddr::V6(a) if a.to_ipv4_mapped().is_some() && prefix >= 96 => {
                (addr.to_canonical(), prefix - 96)
            }
            _ => (addr, prefix),
        };
        let w = width(addr);
        if prefix > w {
            return Err(NetError::Prefix(format!("{addr}/{prefix}")));
        }
        let b = bits(addr);
        let m = mask(w, prefix);
        if b & !m != 0 {
            let network = Net {
                addr: from_bits(w == 32, b & m),
                prefix,
            };
            return Err(NetError::HostBits {
                given: format!("{addr}/{prefix}"),
                network: network.to_string(),
            });
        }
        Ok(Net { addr, prefix })
    }

    /// Parses `192.0.2.7`, `192.0.2.0/24`, `2001:db8::/32` (surrounding blanks ignored).
    pub fn parse(text: &str) -> Result<Net, NetError> {
        let s = text.trim();
        if s.is_empty() {
            return Err(NetError::Empty);
        }
        if s.len() > MAX_TEXT {
            return Err(NetError::TooLong);
        }
        match s.split_once('/') {
            None => s
                .parse::<IpAddr>()
                .map(Net::host)
                .map_err(|_| NetError::Invalid(s.to_string())),
            Some((a, p)) => {
                let addr = a
                    .parse::<IpAddr>()
                    .map_err(|_| NetError::Invalid(s.to_string()))?;
                let prefix =
                    prefix_len(p, width(addr)).ok_or_else(|| NetError::Prefix(s.to_string()))?;
                Net::new(addr, prefix)
            }
        }
    }

    /// The range of length `prefix` that contains `ip` (prefix capped at the family's width).
    pub fn covering(ip: IpAddr, prefix: u8) -> Net {
        let ip = ip.to_canonical();
        let w = width(ip);
        let prefix = prefix.min(w);
        Net {
            addr: from_bits(w == 32, bits(ip) & mask(w, prefix)),
            prefix,
        }
    }

    /// The network address (the address itself for a host).
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    pub fn is_v4(&self) -> bool {
        self.addr.is_ipv4()
    }

    /// True for a single address.
    pub fn is_host(&self) -> bool {
        self.prefix == width(self.addr)
    }

    /// True for `0.0.0.0/0` and `::/0`.
    pub fn is_default_route(&self) -> bool {
        self.prefix == 0
    }

    /// Whether `ip` lies in this range.
    pub fn contains_ip(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        if ip.is_ipv4() != self.is_v4() {
            return false;
        }
        let m = mask(width(ip), self.prefix);
        bits(ip) & m == bits(self.addr)
    }

    /// Whether `other` lies entirely in this range.
    pub fn contains(&self, other: &Net) -> bool {
        other.prefix >= self.prefix && self.contains_ip(other.addr)
    }

    /// Whether the two ranges share an address (one then contains the other).
    pub fn overlaps(&self, other: &Net) -> bool {
        self.contains(other) || other.contains(self)
    }

    /// First address of the range.
    pub fn first(&self) -> IpAddr {
        self.addr
    }

    /// Last address of the range.
    pub fn last(&self) -> IpAddr {
        let w = width(self.addr);
        let all: u128 = if w == 32 { u32::MAX as u128 } else { u128::MAX };
        from_bits(w == 32, bits(self.addr) | (all & !mask(w, self.prefix)))
    }

    /// The address after the range, `None` when the range ends at the top of the family.
    pub fn end_exclusive(&self) -> Option<IpAddr> {
        let w = width(self.addr);
        let all: u128 = if w == 32 { u32::MAX as u128 } else { u128::MAX };
        let last = bits(self.last());
        (last != all).then(|| from_bits(w == 32, last + 1))
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_host() {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.prefix)
        }
    }
}

impl serde::Serialize for Net {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Addresses of the loopback ranges, unspecified addresses: never blocked.
pub fn is_loopback_or_unspecified(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    ip.is_loopback() || ip.is_unspecified()
}

/// One port or an inclusive range of ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

/// Why a text is not a port or a port range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortRangeError {
    /// A part that is not a number from 1 to 65535.
    Port(String),
    /// `high-low`.
    Downwards(String),
}

impl fmt::Display for PortRangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortRangeError::Port(t) => write!(f, "{t:?} is not a port from 1 to 65535"),
            PortRangeError::Downwards(s) => write!(f, "{s:?}: the range must go upwards"),
        }
    }
}

impl std::error::Error for PortRangeError {}

impl PortRange {
    /// Parses `443` or `30000-35000`.
    pub fn parse(s: &str) -> Result<PortRange, PortRangeError> {
        let s = s.trim();
        let one = |t: &str| match t.trim().parse::<u16>() {
            Ok(p) if p > 0 => Ok(p),
            _ => Err(PortRangeError::Port(t.to_string())),
        };
        match s.split_once('-') {
            None => one(s).map(|p| PortRange { lo: p, hi: p }),
            Some((a, b)) => {
                let (lo, hi) = (one(a)?, one(b)?);
                if lo > hi {
                    return Err(PortRangeError::Downwards(s.to_string()));
                }
                Ok(PortRange { lo, hi })
            }
        }
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Net {
        Net::parse(s).unwrap()
    }

    #[test]
    fn parse_and_print_round_trip() {
        for s in [
            "192.0.2.7",
            "198.51.100.0/24",
            "0.0.0.0/0",
            "2001:db8::/32",
            "2001:db8::1",
            "::/0",
            "255.255.255.255",
        ] {
            assert_eq!(n(s).to_string(), s);
        }
        assert_eq!(n(" 192.0.2.7/32 ").to_string(), "192.0.2.7");
        assert_eq!(n("::ffff:192.0.2.7").to_string(), "192.0.2.7");
        assert_eq!(n("::ffff:192.0.2.0/120").to_string(), "192.0.2.0/24");
        assert!(n("192.0.2.7").is_host());
        assert!(!n("192.0.2.0/31").is_host());
    }

    /// Issue 23 item 12: `1.2.3.0/024` was read as /24.
    #[test]
    fn prefix_lengths_and_octets_are_canonical_digits() {
        for bad in [
            "1.2.3.0/024",
            "1.2.3.0/00",
            "2001:db8::/032",
            "1.2.3.0/+24",
            "1.2.3.0/ 24",
            "1.2.3.0/",
            "01.2.3.0/24",
            "1.2.3.010",
        ] {
            assert!(Net::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(n("0.0.0.0/0").to_string(), "0.0.0.0/0");
        assert_eq!(n("1.2.3.0/24").to_string(), "1.2.3.0/24");
        assert_eq!(prefix_len("0", 32), Some(0));
        assert_eq!(prefix_len("32", 32), Some(32));
        assert_eq!(prefix_len("33", 32), None);
        assert_eq!(prefix_len("128", 128), Some(128));
        assert_eq!(prefix_len("0128", 128), None);
    }

    #[test]
    fn bad_text_is_refused_with_a_reason() {
        assert_eq!(Net::parse(""), Err(NetError::Empty));
        assert!(matches!(Net::parse("192.0.2"), Err(NetError::Invalid(_))));
        assert!(matches!(
            Net::parse("192.0.2.0/33"),
            Err(NetError::Prefix(_))
        ));
        assert!(matches!(Net::parse("192.0.2.0/"), Err(NetError::Prefix(_))));
        assert!(matches!(
            Net::parse("192.0.2.0/+8"),
            Err(NetError::Prefix(_))
        ));
        assert!(matches!(
            Net::parse("fe80::1%eth0"),
            Err(NetError::Invalid(_))
        ));
        let e = Net::parse("192.0.2.7/24").unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"192.0.2.7/24\" has host bits set; did you mean 192.0.2.0/24?"
        );
        assert_eq!(Net::parse(&"1".repeat(65)), Err(NetError::TooLong));
    }

    #[test]
    fn containment_and_bounds() {
        let net = n("198.51.100.0/24");
        assert!(net.contains_ip("198.51.100.255".parse().unwrap()));
        assert!(!net.contains_ip("198.51.101.0".parse().unwrap()));
        assert!(!net.contains_ip("2001:db8::1".parse().unwrap()));
        assert!(net.contains(&n("198.51.100.128/25")));
        assert!(!n("198.51.100.128/25").contains(&net));
        assert!(net.overlaps(&n("198.51.100.7")) && n("198.51.100.7").overlaps(&net));
        assert!(!net.overlaps(&n("198.51.101.0/24")));
        assert_eq!(net.last().to_string(), "198.51.100.255");
        assert_eq!(net.end_exclusive().unwrap().to_string(), "198.51.101.0");
        assert_eq!(n("255.255.255.0/24").end_exclusive(), None);
        assert_eq!(n("ffff::/16").end_exclusive(), None);
        assert!(n("0.0.0.0/0").is_default_route());
        assert!(n("0.0.0.0/0").contains_ip("203.0.113.9".parse().unwrap()));
        assert!(n("::/0").contains(&n("2001:db8::/64")));
        assert!(n("192.0.2.0/24").contains_ip("::ffff:192.0.2.9".parse().unwrap()));
        assert_eq!(
            Net::covering("192.0.2.77".parse().unwrap(), 25).to_string(),
            "192.0.2.0/25"
        );
        assert_eq!(
            Net::covering("2001:db8::1".parse().unwrap(), 200).to_string(),
            "2001:db8::1"
        );
    }

    #[test]
    fn ports() {
        assert_eq!(PortRange::parse("22").unwrap().to_string(), "22");
        assert_eq!(
            PortRange::parse("30000-35000").unwrap().to_string(),
            "30000-35000"
        );
        assert!(PortRange::parse("0").is_err());
        assert!(PortRange::parse("70000").is_err());
        assert!(PortRange::parse("9-3").is_err());
        assert!(PortRange::parse("x").is_err());
        assert_eq!(
            PortRange::parse("0").unwrap_err().to_string(),
            "\"0\" is not a port from 1 to 65535"
        );
        assert_eq!(
            PortRange::parse(" 9-3 ").unwrap_err().to_string(),
            "\"9-3\": the range must go upwards"
        );
    }
}
