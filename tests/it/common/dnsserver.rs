//! A small authoritative-style DNS server on loopback UDP for tests and benches: answers PTR,
//! A and AAAA from records the test sets, NXDOMAIN for unknown names, no data for a known
//! name without the asked type, and per-name misbehaviour (no answer, SERVFAIL, a wrong ID,
//! a delay). Counts the questions it gets per name. Only `std`; included by path from unit
//! tests (`src/dns`), integration tests (`tests/it/common`) and benches.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How the server treats questions for one name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behavior {
    /// Answer from the records (NXDOMAIN or no data when there are none).
    Answer,
    /// Never answer (the client times out).
    Drop,
    /// RCODE 2.
    ServFail,
    /// A well-formed answer with another ID (a spoofing attempt the client must ignore).
    WrongId,
    /// Answer after this many milliseconds.
    Delay(u64),
}

#[derive(Default)]
struct Zone {
    /// name -> (qtype, rdata)
    records: HashMap<String, Vec<(u16, Vec<u8>)>>,
    behavior: HashMap<String, Behavior>,
    default: Option<Behavior>,
    asked: HashMap<String, u64>,
}

/// The server; stops when dropped.
pub struct DnsServer {
    addr: SocketAddr,
    zone: Arc<Mutex<Zone>>,
    stop: Arc<AtomicBool>,
    total: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

fn lower(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

fn encode_name(name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for label in lower(name).split('.').filter(|l| !l.is_empty()) {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out
}

/// The reverse-lookup name of an address.
pub fn reverse_name(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            format!("{}.{}.{}.{}.in-addr.arpa", o[3], o[2], o[1], o[0])
        }
        IpAddr::V6(v6) => {
            let mut s = String::new();
            for b in v6.octets().iter().rev() {
                s.push_str(&format!("{:x}.{:x}.", b & 0xf, b >> 4));
            }
            s.push_str("ip6.arpa");
            s
        }
    }
}

impl DnsServer {
    /// Binds 127.0.0.1 on a free port and serves until dropped.
    pub fn start() -> DnsServer {
        let sock = UdpSocket::bind("127.0.0.1:0").expect("bind loopback dns");
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        let addr = sock.local_addr().expect("addr");
        let zone = Arc::new(Mutex::new(Zone::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let total = Arc::new(AtomicU64::new(0));
        let (z, s, t) = (zone.clone(), stop.clone(), total.clone());
        let thread = std::thread::spawn(move || serve(sock, z, s, t));
        DnsServer {
            addr,
            zone,
            stop,
            total,
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn add(&self, name: &str, qtype: u16, rdata: Vec<u8>) {
        let mut z = self.zone.lock().unwrap_or_else(|e| e.into_inner());
        z.records
            .entry(lower(name))
            .or_default()
            .push((qtype, rdata));
    }

    /// A PTR record for `ip`.
    pub fn ptr(&self, ip: IpAddr, target: &str) {
        self.add(&reverse_name(ip), 12, encode_name(target));
    }

    pub fn a(&self, name: &str, ip: Ipv4Addr) {
        self.add(name, 1, ip.octets().to_vec());
    }

    pub fn aaaa(&self, name: &str, ip: Ipv6Addr) {
        self.add(name, 28, ip.octets().to_vec());
    }

    /// A or AAAA by the address family.
    pub fn addr_record(&self, name: &str, ip: IpAddr) {
        match ip {
            IpAddr::V4(v4) => self.a(name, v4),
            IpAddr::V6(v6) => self.aaaa(name, v6),
        }
    }

    /// Removes every record of `name`.
    pub fn clear(&self, name: &str) {
        let mut z = self.zone.lock().unwrap_or_else(|e| e.into_inner());
        z.records.remove(&lower(name));
    }

    /// How questions for `name` are treated.
    pub fn set(&self, name: &str, b: Behavior) {
        let mut z = self.zone.lock().unwrap_or_else(|e| e.into_inner());
        z.behavior.insert(lower(name), b);
    }

    /// How questions for names without their own behaviour are treated.
    pub fn set_default(&self, b: Behavior) {
        let mut z = self.zone.lock().unwrap_or_else(|e| e.into_inner());
        z.default = Some(b);
    }

    /// Questions received for `name`.
    pub fn asked(&self, name: &str) -> u64 {
        let z = self.zone.lock().unwrap_or_else(|e| e.into_inner());
        z.asked.get(&lower(name)).copied().unwrap_or(0)
    }

    /// Questions received in all.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Parses the question of a query: (id, rd flag, name, qtype, end of question).
fn parse_query(p: &[u8]) -> Option<(u16, String, u16, usize)> {
    if p.len() < 12 || p[2] & 0x80 != 0 {
        return None;
    }
    let id = u16::from_be_bytes([p[0], p[1]]);
    let mut pos = 12;
    let mut name = String::new();
    loop {
        let len = usize::from(*p.get(pos)?);
        if len == 0 {
            pos += 1;
            break;
        }
        if len > 63 {
            return None;
        }
        let label = p.get(pos + 1..pos + 1 + len)?;
        if !name.is_empty() {
            name.push('.');
        }
        name.push_str(&String::from_utf8_lossy(label).to_ascii_lowercase());
        pos += 1 + len;
    }
    let qtype = u16::from_be_bytes([*p.get(pos)?, *p.get(pos + 1)?]);
    Some((id, name, qtype, pos + 4))
}

fn serve(sock: UdpSocket, zone: Arc<Mutex<Zone>>, stop: Arc<AtomicBool>, total: Arc<AtomicU64>) {
    let mut buf = [0u8; 1500];
    while !stop.load(Ordering::Relaxed) {
        let (n, peer) = match sock.recv_from(&mut buf) {
            Ok(v) => v,
            Err(_) => continue,
        };
        let q = &buf[..n];
        let Some((id, name, qtype, qend)) = parse_query(q) else {
            continue;
        };
        if qend > q.len() {
            continue;
        }
        total.fetch_add(1, Ordering::Relaxed);
        let (behavior, answers, exists) = {
            let mut z = zone.lock().unwrap_or_else(|e| e.into_inner());
            *z.asked.entry(name.clone()).or_default() += 1;
            let b = z
                .behavior
                .get(&name)
                .copied()
                .or(z.default)
                .unwrap_or(Behavior::Answer);
            let recs = z.records.get(&name);
            let answers: Vec<Vec<u8>> = recs
                .map(|r| {
                    r.iter()
                        .filter(|(t, _)| *t == qtype)
                        .map(|(_, d)| d.clone())
                        .collect()
                })
                .unwrap_or_default();
            (b, answers, recs.is_some())
        };
        let rcode = match behavior {
            Behavior::ServFail => 2,
            _ if !exists => 3,
            _ => 0,
        };
        let mut out = Vec::with_capacity(512);
        let rid = if behavior == Behavior::WrongId {
            id.wrapping_add(1)
        } else {
            id
        };
        out.extend_from_slice(&rid.to_be_bytes());
        out.extend_from_slice(&(0x8580u16 | rcode).to_be_bytes()); // QR AA RD RA
        out.extend_from_slice(&[0, 1]);
        let an = if rcode == 0 { answers.len() as u16 } else { 0 };
        out.extend_from_slice(&an.to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(&q[12..qend]);
        if rcode == 0 {
            for rd in &answers {
                out.extend_from_slice(&[0xc0, 12]);
                out.extend_from_slice(&qtype.to_be_bytes());
                out.extend_from_slice(&[0, 1, 0, 0, 0x0e, 0x10]);
                out.extend_from_slice(&(rd.len() as u16).to_be_bytes());
                out.extend_from_slice(rd);
            }
        }
        match behavior {
            Behavior::Drop => {}
            Behavior::Delay(ms) => {
                let s = sock.try_clone().expect("clone socket");
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(ms));
                    let _ = s.send_to(&out, peer);
                });
            }
            _ => {
                let _ = sock.send_to(&out, peer);
            }
        }
    }
}
