//! A small stub resolver: PTR, A and AAAA questions over UDP to one configured server
//! (`ip:port`) or to the nameservers of `/etc/resolv.conf`.
//!
//! Guarantees:
//! - Every call ends by its deadline: each attempt waits at most its share of the time left,
//!   and no call blocks past the deadline it was given.
//! - A response is believed only when it comes from the server asked (connected socket), carries
//!   the query's random ID and exactly the question asked ([`wire::parse_response`]); other
//!   packets are dropped and the wait goes on until the deadline.
//! - NXDOMAIN and an empty answer are ordinary results ([`Lookup::NxDomain`],
//!   [`Lookup::NoData`]), not errors; SERVFAIL, REFUSED, truncation, timeouts and socket errors
//!   are [`DnsError`]s. A failed server is followed by the next configured one while time is
//!   left.
//! - Hostile packets never panic (fuzz target `fuzz/fuzz_targets/dns_response.rs`).
//!
//! No cache: callers keep results (the crawler verifier stores them in SQLite). No TCP: a
//! truncated answer is an error; queries announce EDNS(0) with 1232 bytes, more than the
//! PTR, A and AAAA answers for one crawler host need.

pub mod wire;

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

pub use wire::{Qtype, Rdata};

/// The result of one successful exchange.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup<T> {
    /// The records of the asked type (never empty).
    Records(Vec<T>),
    /// The name does not exist (RCODE 3).
    NxDomain,
    /// The name exists but has no record of the asked type.
    NoData,
}

impl<T> Lookup<T> {
    /// The records, empty for NXDOMAIN and no data.
    pub fn records(&self) -> &[T] {
        match self {
            Lookup::Records(v) => v,
            _ => &[],
        }
    }
}

/// Why a lookup produced no answer. None of these says anything about the name.
#[derive(Debug)]
pub enum DnsError {
    /// No server answered before the deadline.
    Timeout,
    /// The server answered with this RCODE (2 SERVFAIL, 5 REFUSED, ...).
    Rcode(u8),
    /// The answer did not fit UDP (TC set).
    Truncated,
    /// Socket error.
    Io(io::Error),
    /// The name asked for is not a valid domain name.
    BadName,
    /// No nameserver is configured.
    NoServers,
}

impl fmt::Display for DnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnsError::Timeout => f.write_str("no answer before the deadline"),
            DnsError::Rcode(c) => write!(f, "server answered with rcode {c}"),
            DnsError::Truncated => f.write_str("answer truncated"),
            DnsError::Io(e) => write!(f, "socket error: {e}"),
            DnsError::BadName => f.write_str("not a valid domain name"),
            DnsError::NoServers => f.write_str("no nameserver configured"),
        }
    }
}

impl std::error::Error for DnsError {}

/// Counters of what the resolver dropped, for callers that report them.
#[derive(Debug, Default)]
pub struct Stats {
    /// Packets that were not a response to the query asked (wrong ID, question, malformed).
    pub rejected_packets: std::sync::atomic::AtomicU64,
}

/// The stub resolver. Cheap to share (`&self` methods; each call opens its own socket).
#[derive(Debug)]
pub struct Resolver {
    servers: Vec<SocketAddr>,
    stats: Stats,
}

/// Where `/etc/resolv.conf` is.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";
/// At most this many nameservers are used (as glibc does).
const MAX_SERVERS: usize = 3;
/// Rounds over the server list within one call's deadline.
const ROUNDS: usize = 2;

impl Resolver {
    /// A resolver asking `servers` in order. Empty is allowed; every lookup then fails with
    /// [`DnsError::NoServers`].
    pub fn new(servers: Vec<SocketAddr>) -> Resolver {
        Resolver {
            servers,
            stats: Stats::default(),
        }
    }

    /// `server` when given (the `reputation.dns_server` key), else the nameservers of
    /// `/etc/resolv.conf`.
    pub fn from_config(server: Option<SocketAddr>) -> Resolver {
        match server {
            Some(s) => Resolver::new(vec![s]),
            None => Resolver::new(
                crate::fsutil::read_daemon_string(Path::new(RESOLV_CONF))
                    .map(|t| parse_resolv_conf(&t))
                    .unwrap_or_default(),
            ),
        }
    }

    pub fn servers(&self) -> &[SocketAddr] {
        &self.servers
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The PTR names of `ip` (lower-case, no trailing dot).
    pub fn ptr(&self, ip: IpAddr, deadline: Instant) -> Result<Lookup<String>, DnsError> {
        let name = wire::reverse_name(ip);
        self.query(&name, Qtype::Ptr, deadline).map(|l| {
            map_lookup(l, |r| match r {
                Rdata::Ptr(n) => Some(n),
                _ => None,
            })
        })
    }

    /// The IPv4 addresses of `name`.
    pub fn a(&self, name: &str, deadline: Instant) -> Result<Lookup<Ipv4Addr>, DnsError> {
        self.query(name, Qtype::A, deadline).map(|l| {
            map_lookup(l, |r| match r {
                Rdata::A(a) => Some(a),
                _ => None,
            })
        })
    }

    /// The IPv6 addresses of `name`.
    pub fn aaaa(&self, name: &str, deadline: Instant) -> Result<Lookup<Ipv6Addr>, DnsError> {
        self.query(name, Qtype::Aaaa, deadline).map(|l| {
            map_lookup(l, |r| match r {
                Rdata::Aaaa(a) => Some(a),
                _ => None,
            })
        })
    }

    /// The addresses of `name` of the same family as `like` (A for IPv4, AAAA for IPv6):
    /// what a forward confirmation of a PTR needs.
    pub fn forward(
        &self,
        name: &str,
        like: IpAddr,
        deadline: Instant,
    ) -> Result<Lookup<IpAddr>, DnsError> {
        match like {
            IpAddr::V4(_) => self.a(name, deadline).map(|l| match l {
                Lookup::Records(v) => Lookup::Records(v.into_iter().map(IpAddr::V4).collect()),
                Lookup::NxDomain => Lookup::NxDomain,
                Lookup::NoData => Lookup::NoData,
            }),
            IpAddr::V6(_) => self.aaaa(name, deadline).map(|l| match l {
                Lookup::Records(v) => Lookup::Records(v.into_iter().map(IpAddr::V6).collect()),
                Lookup::NxDomain => Lookup::NxDomain,
                Lookup::NoData => Lookup::NoData,
            }),
        }
    }

    /// One question, asked of each server in turn (two rounds) until one gives a usable
    /// answer or the deadline passes.
    pub fn query(
        &self,
        name: &str,
        qtype: Qtype,
        deadline: Instant,
    ) -> Result<Lookup<Rdata>, DnsError> {
        if self.servers.is_empty() {
            return Err(DnsError::NoServers);
        }
        let mut last = DnsError::Timeout;
        let attempts = self.servers.len() * ROUNDS;
        for n in 0..attempts {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let left = u32::try_from(attempts - n).unwrap_or(1);
            let slice = (deadline - now) / left;
            let until = now + slice.max(Duration::from_millis(1));
            let server = self.servers[n % self.servers.len()];
            match self.exchange(server, name, qtype, until.min(deadline)) {
                Ok(r) => return Ok(r),
                Err(DnsError::BadName) => return Err(DnsError::BadName),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn exchange(
        &self,
        server: SocketAddr,
        name: &str,
        qtype: Qtype,
        deadline: Instant,
    ) -> Result<Lookup<Rdata>, DnsError> {
        let id = random_id();
        let query = wire::build_query(id, name, qtype).map_err(|_| DnsError::BadName)?;
        let bind: SocketAddr = match server {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let sock = UdpSocket::bind(bind).map_err(DnsError::Io)?;
        sock.connect(server).map_err(DnsError::Io)?;
        sock.send(&query).map_err(DnsError::Io)?;
        let mut buf = [0u8; wire::EDNS_PAYLOAD as usize];
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(DnsError::Timeout);
            }
            sock.set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))))
                .map_err(DnsError::Io)?;
            let n = match sock.recv(&mut buf) {
                Ok(n) => n,
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::TimedOut =>
                {
                    return Err(DnsError::Timeout)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(DnsError::Io(e)),
            };
            let resp = match wire::parse_response(&buf[..n], id, name, qtype) {
                Ok(r) => r,
                Err(_) => {
                    self.stats
                        .rejected_packets
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    continue;
                }
            };
            if resp.truncated {
                return Err(DnsError::Truncated);
            }
            return match resp.rcode {
                0 if resp.answers.is_empty() => Ok(Lookup::NoData),
                0 => Ok(Lookup::Records(resp.answers)),
                3 => Ok(Lookup::NxDomain),
                c => Err(DnsError::Rcode(c)),
            };
        }
    }
}

fn map_lookup<T>(l: Lookup<Rdata>, f: impl Fn(Rdata) -> Option<T>) -> Lookup<T> {
    match l {
        Lookup::Records(v) => {
            let v: Vec<T> = v.into_iter().filter_map(f).collect();
            if v.is_empty() {
                Lookup::NoData
            } else {
                Lookup::Records(v)
            }
        }
        Lookup::NxDomain => Lookup::NxDomain,
        Lookup::NoData => Lookup::NoData,
    }
}

fn random_id() -> u16 {
    let mut b = [0u8; 2];
    if getrandom::getrandom(&mut b).is_err() {
        // Fall back to the clock's low bits; the connected socket and question check still
        // guard the answer.
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        return (n ^ (n >> 16)) as u16;
    }
    u16::from_ne_bytes(b)
}

/// The `nameserver` lines of a resolv.conf text (port 53), at most three; lines that do not
/// parse are skipped. IPv6 zone suffixes (`%eth0`) are not supported and skipped.
pub fn parse_resolv_conf(text: &str) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if words.next() != Some("nameserver") {
            continue;
        }
        if let Some(Ok(ip)) = words.next().map(str::parse::<IpAddr>) {
            if out.len() < MAX_SERVERS {
                out.push(SocketAddr::new(ip, 53));
            }
        }
    }
    out
}

/// Parses the `reputation.dns_server` value: `ip:port`, `[v6]:port`, or a bare address
/// (port 53).
pub fn parse_server(s: &str) -> Option<SocketAddr> {
    s.parse::<SocketAddr>()
        .ok()
        .or_else(|| s.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 53)))
}

#[cfg(test)]
#[path = "../../tests/it/common/dnsserver.rs"]
pub(crate) mod testserver;

#[cfg(test)]
mod tests {
    use super::testserver::{Behavior, DnsServer};
    use super::*;

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(2)
    }

    #[test]
    fn resolv_conf_lines() {
        let t = "# c\nsearch x\nnameserver 127.0.0.53\nnameserver ::1\nnameserver fe80::1%eth0\n\
                 nameserver 1.1.1.1\nnameserver 8.8.8.8\noptions edns0\n";
        let s = parse_resolv_conf(t);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0], "127.0.0.53:53".parse().unwrap());
        assert_eq!(s[1], "[::1]:53".parse().unwrap());
        assert_eq!(
            parse_server("127.0.0.1:5353"),
            Some("127.0.0.1:5353".parse().unwrap())
        );
        assert_eq!(parse_server("::1"), Some("[::1]:53".parse().unwrap()));
        assert_eq!(parse_server("localhost"), None);
    }

    #[test]
    fn ptr_a_aaaa_nxdomain_and_nodata_against_a_loopback_server() {
        let srv = DnsServer::start();
        srv.ptr("192.0.2.10".parse().unwrap(), "crawl-1.googlebot.com");
        srv.a("crawl-1.googlebot.com", "192.0.2.10".parse().unwrap());
        srv.aaaa("crawl-1.googlebot.com", "2001:db8::10".parse().unwrap());
        let r = Resolver::new(vec![srv.addr()]);
        let ip: IpAddr = "192.0.2.10".parse().unwrap();
        assert_eq!(
            r.ptr(ip, soon()).unwrap(),
            Lookup::Records(vec!["crawl-1.googlebot.com".to_string()])
        );
        assert_eq!(
            r.forward("crawl-1.googlebot.com", ip, soon())
                .unwrap()
                .records(),
            &[ip]
        );
        assert_eq!(
            r.aaaa("CRAWL-1.googlebot.com.", soon()).unwrap().records(),
            &["2001:db8::10".parse::<Ipv6Addr>().unwrap()]
        );
        assert_eq!(
            r.ptr("192.0.2.11".parse().unwrap(), soon()).unwrap(),
            Lookup::NxDomain
        );
        // The name exists (it has A) but has no PTR of its own: no data.
        assert_eq!(
            r.query("crawl-1.googlebot.com", Qtype::Ptr, soon())
                .unwrap(),
            Lookup::NoData
        );
    }

    #[test]
    fn timeouts_servfail_and_spoofed_ids_fail_by_the_deadline() {
        let srv = DnsServer::start();
        srv.set("7.2.0.192.in-addr.arpa", Behavior::Drop);
        srv.set("8.2.0.192.in-addr.arpa", Behavior::ServFail);
        srv.set("9.2.0.192.in-addr.arpa", Behavior::WrongId);
        let r = Resolver::new(vec![srv.addr()]);
        let t0 = Instant::now();
        let e = r
            .ptr(
                "192.0.2.7".parse().unwrap(),
                t0 + Duration::from_millis(300),
            )
            .unwrap_err();
        assert!(matches!(e, DnsError::Timeout), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(2));
        let e = r.ptr("192.0.2.8".parse().unwrap(), soon()).unwrap_err();
        assert!(matches!(e, DnsError::Rcode(2)), "{e}");
        let e = r.ptr(
            "192.0.2.9".parse().unwrap(),
            Instant::now() + Duration::from_millis(300),
        );
        assert!(matches!(e, Err(DnsError::Timeout)));
        assert!(
            r.stats()
                .rejected_packets
                .load(std::sync::atomic::Ordering::Relaxed)
                >= 1
        );
        assert!(matches!(
            Resolver::new(vec![]).ptr("192.0.2.1".parse().unwrap(), soon()),
            Err(DnsError::NoServers)
        ));
    }

    #[test]
    fn a_dead_first_server_is_followed_by_the_next() {
        let srv = DnsServer::start();
        srv.ptr("192.0.2.10".parse().unwrap(), "a.example.com");
        let dead = DnsServer::start();
        dead.set_default(Behavior::Drop);
        let r = Resolver::new(vec![dead.addr(), srv.addr()]);
        let got = r.ptr("192.0.2.10".parse().unwrap(), soon()).unwrap();
        assert_eq!(got.records(), &["a.example.com".to_string()]);
    }
}
