//! Slow-client flood and a legitimate client's latency, against any HTTPS server.
//!
//! Driven by `benches/slow-clients.sh`, which runs it against svc and against nginx with the
//! same certificate in the same run. Alone:
//!
//! `SVC_BENCH_TARGET=127.0.0.1:9443 SVC_BENCH_CERT=state/tls/cert.pem
//!  SVC_BENCH_AUTH='Bearer TOKEN' cargo bench --bench slow_clients`
//!
//! Knobs: `SVC_BENCH_PATH` (default `/api/v1/health`), `SVC_BENCH_SECONDS` (measuring time,
//! default 20), `SVC_BENCH_FLOOD` (0 to measure without the flood), `SVC_BENCH_LABEL`.
//!
//! The flood, kept up for the whole measurement (every connection the server closes is
//! opened again, at most once a second): 2,000 connections that send nothing and 2,000 that
//! send one byte of a TLS record every 5 s, spread over 80 loopback addresses (50 each), and
//! 300 from a single address that each send the first five bytes of a TLS record. Meanwhile
//! a legitimate client from 127.0.0.1 alternates a request on its keep-alive connection and
//! one on a new connection (TLS handshake included), every 10 ms. Prints p50/p99/max and
//! failures for both kinds. Asserts nothing.

#![allow(
    clippy::disallowed_methods,
    reason = "benchmark fixtures are read with plain std::fs calls"
)]

#[allow(dead_code)] // the benchmark uses part of the test harness
#[path = "../tests/it/common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::socket::{bind, connect, socket, AddressFamily, SockFlag, SockType, SockaddrIn};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConnection, StreamOwned};

const SILENT: usize = 2000;
const TRICKLE: usize = 2000;
const SINGLE: usize = 300;
const PER_ADDRESS: usize = 50;
const HELLO_START: [u8; 12] = [
    0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 0x00,
];

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn connect_from(local: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let SocketAddr::V4(to) = to else {
        return Err(std::io::Error::other("IPv4 targets only"));
    };
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    bind(
        fd.as_raw_fd(),
        &SockaddrIn::from(SocketAddrV4::new(local, 0)),
    )?;
    connect(fd.as_raw_fd(), &SockaddrIn::from(to))?;
    let s = TcpStream::from(fd);
    s.set_nonblocking(true)?;
    Ok(s)
}

/// True when the peer has closed `s` (non-blocking peek).
fn peer_closed(s: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    match s.peek(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(_) => true,
    }
}

struct FloodConn {
    from: Ipv4Addr,
    kind: u8, // 0 silent, 1 trickle, 2 single address
    sock: Option<TcpStream>,
}

impl FloodConn {
    fn open(&mut self, to: SocketAddr) -> bool {
        match connect_from(self.from, to) {
            Ok(mut s) => {
                if self.kind == 2 {
                    let _ = s.write_all(&HELLO_START[..5]);
                }
                self.sock = Some(s);
                true
            }
            Err(_) => false,
        }
    }
}

/// Keeps the flood up until `stop`; counts reconnections.
fn flood(to: SocketAddr, stop: Arc<AtomicBool>, ready: Arc<AtomicBool>, reopened: Arc<AtomicU64>) {
    let addr = |group: u8, i: usize| {
        Ipv4Addr::new(
            127,
            group,
            (i / PER_ADDRESS / 250) as u8,
            (i / PER_ADDRESS % 250) as u8 + 1,
        )
    };
    let mut conns: Vec<FloodConn> = (0..SILENT)
        .map(|i| FloodConn {
            from: addr(101, i),
            kind: 0,
            sock: None,
        })
        .chain((0..TRICKLE).map(|i| FloodConn {
            from: addr(102, i),
            kind: 1,
            sock: None,
        }))
        .chain((0..SINGLE).map(|_| FloodConn {
            from: Ipv4Addr::new(127, 103, 0, 1),
            kind: 2,
            sock: None,
        }))
        .collect();
    for c in &mut conns {
        c.open(to);
    }
    ready.store(true, Ordering::SeqCst);
    let mut tick: usize = 0;
    while !stop.load(Ordering::SeqCst) {
        let trickle_now = tick % 5 == 0;
        for c in &mut conns {
            let closed = match &mut c.sock {
                None => true,
                Some(s) => {
                    if c.kind == 1 && trickle_now {
                        let b = HELLO_START[(tick / 5) % HELLO_START.len()];
                        s.write_all(&[b]).is_err() || peer_closed(s)
                    } else {
                        peer_closed(s)
                    }
                }
            };
            if closed {
                c.sock = None;
                if c.open(to) {
                    reopened.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        tick += 1;
        for _ in 0..10 {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

fn open_tls(to: SocketAddr, cfg: &Arc<rustls::ClientConfig>) -> std::io::Result<Tls> {
    let tcp = TcpStream::connect_timeout(&to, Duration::from_secs(5))?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
    tcp.set_write_timeout(Some(Duration::from_secs(5)))?;
    tcp.set_nodelay(true)?;
    let conn = ClientConnection::new(cfg.clone(), ServerName::try_from("localhost").unwrap())
        .map_err(std::io::Error::other)?;
    let mut s = StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// One GET; the status code.
fn request(s: &mut Tls, path: &str, auth: &str) -> std::io::Result<u16> {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n");
    if !auth.is_empty() {
        req.push_str(&format!("Authorization: {auth}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    s.flush()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        let mut hs = [httparse::EMPTY_HEADER; 64];
        let mut r = httparse::Response::new(&mut hs);
        if let Ok(httparse::Status::Complete(n)) = r.parse(&buf) {
            let len: usize = r
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| std::str::from_utf8(h.value).ok()?.parse().ok())
                .unwrap_or(0);
            let code = r.code.unwrap_or(0);
            while buf.len() < n + len {
                let k = s.read(&mut chunk)?;
                if k == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                buf.extend_from_slice(&chunk[..k]);
            }
            return Ok(code);
        }
        let k = s.read(&mut chunk)?;
        if k == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..k]);
    }
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1000.0
}

fn main() {
    let target: SocketAddr = env("SVC_BENCH_TARGET", "127.0.0.1:9443")
        .parse()
        .expect("SVC_BENCH_TARGET host:port");
    let cert_path = env("SVC_BENCH_CERT", "");
    let pem = std::fs::read(&cert_path).expect("SVC_BENCH_CERT: the server's PEM certificate");
    let cert: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .expect("PEM");
    let cfg = common::client_config(cert[0].as_ref().to_vec());
    let path = env("SVC_BENCH_PATH", "/api/v1/health");
    let auth = env("SVC_BENCH_AUTH", "");
    let secs: u64 = env("SVC_BENCH_SECONDS", "20").parse().unwrap_or(20);
    let with_flood = env("SVC_BENCH_FLOOD", "1") != "0";
    let label = env("SVC_BENCH_LABEL", &target.to_string());
    {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
            if soft < hard {
                let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
            }
        }
    }

    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(!with_flood));
    let reopened = Arc::new(AtomicU64::new(0));
    let flooder = with_flood.then(|| {
        let (stop, ready, reopened) = (stop.clone(), ready.clone(), reopened.clone());
        std::thread::spawn(move || flood(target, stop, ready, reopened))
    });
    while !ready.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }

    let mut keep: Option<Tls> = None;
    let (mut ka, mut fresh) = (Vec::new(), Vec::new());
    let (mut ka_fail, mut fresh_fail) = (0u64, 0u64);
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        let t = Instant::now();
        let ok = (|| {
            if keep.is_none() {
                keep = Some(open_tls(target, &cfg)?);
            }
            request(keep.as_mut().unwrap(), &path, &auth)
        })();
        match ok {
            Ok(200) => ka.push(t.elapsed()),
            _ => {
                ka_fail += 1;
                keep = None;
            }
        }
        let t = Instant::now();
        match open_tls(target, &cfg).and_then(|mut s| request(&mut s, &path, &auth)) {
            Ok(200) => fresh.push(t.elapsed()),
            _ => fresh_fail += 1,
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::SeqCst);
    if let Some(f) = flooder {
        let _ = f.join();
    }
    ka.sort();
    fresh.sort();
    println!(
        "{label:<6} flood={:<3} keep-alive: {:>5} ok {:>4} failed  p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>8.2} ms | new connection: {:>5} ok {:>4} failed  p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>8.2} ms | flood reconnects {}",
        if with_flood { "on" } else { "off" },
        ka.len(),
        ka_fail,
        pct(&ka, 0.5),
        pct(&ka, 0.99),
        ka.last().map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0),
        fresh.len(),
        fresh_fail,
        pct(&fresh, 0.5),
        pct(&fresh, 0.99),
        fresh.last().map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0),
        reopened.load(Ordering::Relaxed),
    );
}
