//! Front unit tests: real sockets and TLS on loopback, a manual clock for every deadline.
//!
//! The front runs on its own thread, polling every few milliseconds of real time; deadlines
//! only pass when a test advances the manual clock, so no test sleeps through a timeout.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};

use super::phase::Phase;
use super::*;
use crate::clock::ManualClock;

struct TestHandler;

impl Handler for TestHandler {
    fn handle(&self, req: &Request) -> Response {
        match req.path.as_str() {
            "/panic" => panic!("handler failure for a test"),
            "/big" => Response::new(200, "text/plain", vec![b'x'; 16 << 20]),
            _ => Response::json(
                200,
                &serde_json::json!({ "path": req.path, "body": req.body.len() }),
            ),
        }
    }
}

struct Harness {
    addr: SocketAddr,
    clock: Arc<ManualClock>,
    stats: Arc<ServerStats>,
    stopper: Stopper,
    front: Option<JoinHandle<()>>,
}

impl Harness {
    fn start(limits: HttpLimits) -> Harness {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
        let clock = ManualClock::at_epoch_2026();
        let server = Server::bind("127.0.0.1:0".parse().unwrap(), Arc::new(cfg), limits)
            .unwrap()
            .with_clock(clock.clone());
        let addr = server.local_addr().unwrap();
        let stats = server.stats();
        let stopper = server.stopper().unwrap();
        let mut front = server.start(Arc::new(TestHandler)).unwrap();
        let thread = std::thread::spawn(move || loop {
            front.turn(Some(Duration::from_millis(5)));
            if front.finished() {
                front.close_all();
                return;
            }
        });
        Harness {
            addr,
            clock,
            stats,
            stopper,
            front: Some(thread),
        }
    }

    fn phase(&self, p: Phase) -> usize {
        self.stats.phases[p.index()].load(Ordering::SeqCst)
    }

    fn timeouts(&self, p: Phase) -> u64 {
        self.stats.timeouts[p.index()].load(Ordering::SeqCst)
    }

    /// Waits (real time, bounded) until `f` holds: the front runs on its own thread.
    fn wait(&self, what: &str, f: impl Fn(&Harness) -> bool) {
        let until = Instant::now() + Duration::from_secs(10);
        while !f(self) {
            assert!(Instant::now() < until, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Advances the manual clock and lets the front run a sweep.
    fn advance(&self, secs: u64) {
        self.clock.advance(Duration::from_secs(secs));
        std::thread::sleep(Duration::from_millis(30));
    }

    fn tls(&self) -> StreamOwned<ClientConnection, TcpStream> {
        let tcp = TcpStream::connect(self.addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let conn =
            ClientConnection::new(client_config(), ServerName::try_from("localhost").unwrap())
                .unwrap();
        let mut s = StreamOwned::new(conn, tcp);
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock).unwrap();
        }
        s
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.stopper.stop();
        self.clock.advance(Duration::from_secs(60));
        if let Some(t) = self.front.take() {
            let _ = t.join();
        }
    }
}

fn limits() -> HttpLimits {
    HttpLimits {
        workers: 2,
        ..HttpLimits::default()
    }
}

#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _e: &CertificateDer<'_>,
        _i: &[CertificateDer<'_>],
        _n: &ServerName<'_>,
        _o: &[u8],
        _t: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn client_config() -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
            .with_no_client_auth(),
    )
}

/// Reads one response (head and Content-Length body); `None` when the connection ended.
fn read_response(s: &mut impl Read) -> Option<(u16, String)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let mut hs = [httparse::EMPTY_HEADER; 32];
        let mut r = httparse::Response::new(&mut hs);
        if let Ok(httparse::Status::Complete(n)) = r.parse(&buf) {
            let status = r.code.unwrap();
            let len: usize = r
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
                .unwrap_or(0);
            while buf.len() < n + len {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => return None,
                    Ok(k) => buf.extend_from_slice(&chunk[..k]),
                }
            }
            return Some((
                status,
                String::from_utf8_lossy(&buf[n..n + len]).into_owned(),
            ));
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
        }
    }
}

/// True once the peer closed (end of stream or reset) within the socket's read timeout.
fn closed(s: &mut impl Read) -> bool {
    let mut b = [0u8; 256];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
}

fn get(s: &mut StreamOwned<ClientConnection, TcpStream>, path: &str) -> Option<(u16, String)> {
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .ok()?;
    s.flush().ok()?;
    read_response(s)
}

#[test]
fn a_silent_connection_is_closed_at_the_handshake_deadline_and_not_before() {
    let h = Harness::start(limits());
    let mut raw = TcpStream::connect(h.addr).unwrap();
    raw.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    h.wait("the connection in handshake", |h| {
        h.phase(Phase::Handshake) == 1
    });
    h.advance(9);
    assert!(!closed(&mut raw), "closed before the deadline");
    assert_eq!(h.phase(Phase::Handshake), 1);
    h.advance(2);
    h.wait("the handshake timeout", |h| {
        h.timeouts(Phase::Handshake) == 1
    });
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(closed(&mut raw));
    assert_eq!(h.stats.handshake_failures.load(Ordering::SeqCst), 1);
    assert_eq!(h.stats.open_connections.load(Ordering::SeqCst), 0);
}

#[test]
fn trickled_bytes_do_not_move_the_handshake_deadline() {
    let h = Harness::start(limits());
    let mut raw = TcpStream::connect(h.addr).unwrap();
    raw.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    h.wait("the connection", |h| h.phase(Phase::Handshake) == 1);
    // A TLS handshake record header, one byte every 3 (manual) seconds.
    for (i, b) in [0x16u8, 0x03, 0x01].into_iter().enumerate() {
        raw.write_all(&[b]).unwrap();
        h.advance(3);
        assert_eq!(h.timeouts(Phase::Handshake), 0, "byte {i}");
    }
    raw.write_all(&[0x02]).unwrap();
    h.advance(2);
    h.wait("the whole-phase deadline", |h| {
        h.timeouts(Phase::Handshake) == 1
    });
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(closed(&mut raw));
}

#[test]
fn a_trickled_head_gets_408_at_the_head_deadline_counted_from_its_first_byte() {
    let h = Harness::start(limits());
    let mut s = h.tls();
    h.wait("idle after the handshake", |h| h.phase(Phase::Idle) == 1);
    // Idle (keep-alive) time is not head time.
    h.advance(20);
    assert_eq!(h.phase(Phase::Idle), 1);
    s.write_all(b"G").unwrap();
    s.flush().unwrap();
    h.wait("the head phase", |h| h.phase(Phase::Head) == 1);
    for b in [b"E", b"T"] {
        h.advance(4);
        s.write_all(b).unwrap();
        s.flush().unwrap();
    }
    h.advance(3);
    h.wait("the head timeout", |h| h.timeouts(Phase::Head) == 1);
    let (status, body) = read_response(&mut s).expect("a 408");
    assert_eq!(status, 408);
    assert!(body.contains("error"), "{body}");
    assert_eq!(h.stats.rejected[1].load(Ordering::SeqCst), 1);
}

#[test]
fn keep_alive_idle_ends_at_the_idle_deadline() {
    let h = Harness::start(limits());
    let mut s = h.tls();
    assert_eq!(get(&mut s, "/a").unwrap().0, 200);
    h.wait("idle again", |h| h.phase(Phase::Idle) == 1);
    h.advance(29);
    assert_eq!(
        get(&mut s, "/b").unwrap().0,
        200,
        "idle restarts per request"
    );
    h.wait("idle again", |h| h.phase(Phase::Idle) == 1);
    h.advance(31);
    h.wait("the idle timeout", |h| h.timeouts(Phase::Idle) == 1);
    assert!(closed(&mut s));
}

#[test]
fn the_body_deadline_grows_with_the_announced_length() {
    let h = Harness::start(limits());
    let mut s = h.tls();
    // 20 KiB at 1 KiB/s: 10 s for the head time plus 20 s.
    s.write_all(b"POST /up HTTP/1.1\r\nHost: localhost\r\nContent-Length: 20480\r\n\r\nabc")
        .unwrap();
    s.flush().unwrap();
    h.wait("the body phase", |h| h.phase(Phase::Body) == 1);
    h.advance(25);
    assert_eq!(h.timeouts(Phase::Body), 0);
    s.write_all(&[b'x'; 1000]).unwrap();
    s.flush().unwrap();
    h.advance(6);
    h.wait("the body timeout", |h| h.timeouts(Phase::Body) == 1);
    assert_eq!(read_response(&mut s).unwrap().0, 408);
}

#[test]
fn expect_100_continue_is_answered_before_the_body() {
    let h = Harness::start(limits());
    let mut s = h.tls();
    s.write_all(
        b"POST /up HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
    )
    .unwrap();
    s.flush().unwrap();
    let (status, _) = read_response(&mut s).unwrap();
    assert_eq!(status, 100);
    s.write_all(b"hello").unwrap();
    s.flush().unwrap();
    let (status, body) = read_response(&mut s).unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("\"body\":5"), "{body}");
    // Any other expectation: 417 and the connection closes.
    s.write_all(b"POST /up HTTP/1.1\r\nHost: localhost\r\nExpect: x\r\nContent-Length: 1\r\n\r\n")
        .unwrap();
    s.flush().unwrap();
    assert_eq!(read_response(&mut s).unwrap().0, 417);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let h = Harness::start(limits());
    let mut s = h.tls();
    s.write_all(
        b"GET /one HTTP/1.1\r\nHost: x\r\n\r\nPOST /two HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhiGET /three HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .unwrap();
    s.flush().unwrap();
    // The answers may arrive in one read: keep what follows each response for the next.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    for path in ["/one", "/two", "/three"] {
        let (status, body) = loop {
            if let Some((status, body, used)) = parse_response(&buf) {
                buf.drain(..used);
                break (status, body);
            }
            let k = s.read(&mut chunk).unwrap();
            assert!(k > 0, "closed before the answer to {path}");
            buf.extend_from_slice(&chunk[..k]);
        };
        assert_eq!(status, 200);
        assert!(body.contains(path), "{body}");
    }
}

/// One complete response at the start of `buf`: status, body and the bytes it used.
fn parse_response(buf: &[u8]) -> Option<(u16, String, usize)> {
    let mut hs = [httparse::EMPTY_HEADER; 32];
    let mut r = httparse::Response::new(&mut hs);
    let httparse::Status::Complete(n) = r.parse(buf).ok()? else {
        return None;
    };
    let len: usize = r
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
        .unwrap_or(0);
    (buf.len() >= n + len).then(|| {
        let body = String::from_utf8_lossy(&buf[n..n + len]).into_owned();
        (r.code.unwrap(), body, n + len)
    })
}

#[test]
fn a_panicking_handler_answers_500_and_costs_no_capacity() {
    let h = Harness::start(HttpLimits {
        workers: 1,
        ..HttpLimits::default()
    });
    for _ in 0..3 {
        let mut s = h.tls();
        let (status, body) = get(&mut s, "/panic").unwrap();
        assert_eq!(status, 500);
        assert!(body.contains("\"error\""), "{body}");
        assert!(closed(&mut s), "the connection of a panic is closed");
    }
    // The only worker still serves.
    let mut s = h.tls();
    assert_eq!(get(&mut s, "/ok").unwrap().0, 200);
    assert_eq!(h.stats.panics.load(Ordering::SeqCst), 3);
    h.wait("slots freed", |h| {
        h.stats.open_connections.load(Ordering::SeqCst) == 1
    });
}

#[test]
fn a_slow_reader_holds_no_worker_and_is_closed_at_the_write_deadline() {
    let h = Harness::start(HttpLimits {
        workers: 1,
        ..HttpLimits::default()
    });
    let mut slow = h.tls();
    slow.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    slow.flush().unwrap();
    h.wait("the response parked at the front", |h| {
        h.phase(Phase::Write) == 1
    });
    // The single worker is free for others meanwhile.
    let mut other = h.tls();
    assert_eq!(get(&mut other, "/ok").unwrap().0, 200);
    h.advance(31);
    h.wait("the write timeout", |h| h.timeouts(Phase::Write) == 1);
    assert_eq!(h.phase(Phase::Write), 0);
}

#[test]
fn per_address_and_total_limits_close_at_once_and_count() {
    let h = Harness::start(HttpLimits {
        workers: 1,
        max_connections: 5,
        max_connections_per_address: 3,
        ..HttpLimits::default()
    });
    let mut from_one: Vec<TcpStream> = (0..5)
        .map(|_| TcpStream::connect(h.addr).unwrap())
        .collect();
    h.wait("five accepts", |h| {
        h.stats.accepted.load(Ordering::SeqCst) == 5
    });
    assert_eq!(h.stats.refused_per_address.load(Ordering::SeqCst), 2);
    assert_eq!(h.stats.open_connections.load(Ordering::SeqCst), 3);
    let mut refused = 0;
    for s in &mut from_one {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        if closed(s) {
            refused += 1;
        }
    }
    assert_eq!(refused, 2, "the two over the limit were closed at once");
    // Another address fills the total.
    let other = |_| {
        let s = nix::sys::socket::socket(
            nix::sys::socket::AddressFamily::Inet,
            nix::sys::socket::SockType::Stream,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC,
            None,
        )
        .unwrap();
        let local: std::net::SocketAddrV4 = "127.0.0.2:0".parse().unwrap();
        nix::sys::socket::bind(
            std::os::fd::AsRawFd::as_raw_fd(&s),
            &nix::sys::socket::SockaddrIn::from(local),
        )
        .unwrap();
        let SocketAddr::V4(remote) = h.addr else {
            unreachable!()
        };
        nix::sys::socket::connect(
            std::os::fd::AsRawFd::as_raw_fd(&s),
            &nix::sys::socket::SockaddrIn::from(remote),
        )
        .unwrap();
        TcpStream::from(s)
    };
    let _more: Vec<TcpStream> = (0..3).map(other).collect();
    h.wait("eight accepts", |h| {
        h.stats.accepted.load(Ordering::SeqCst) == 8
    });
    assert_eq!(h.stats.open_connections.load(Ordering::SeqCst), 5);
    assert_eq!(h.stats.refused_max_connections.load(Ordering::SeqCst), 1);
    // Closing frees the counts.
    drop(from_one);
    h.advance(11);
    h.wait("all closed", |h| {
        h.stats.open_connections.load(Ordering::SeqCst) == 0
    });
}

#[test]
fn a_stop_returns_within_the_grace_whatever_peers_do() {
    let mut h = Harness::start(HttpLimits {
        workers: 1,
        ..HttpLimits::default()
    });
    let _silent = TcpStream::connect(h.addr).unwrap();
    let mut slow = h.tls();
    slow.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    slow.flush().unwrap();
    h.wait("the slow reader parked", |h| h.phase(Phase::Write) == 1);
    h.stopper.stop();
    h.wait("waiting connections closed", |h| {
        h.phase(Phase::Handshake) == 0
    });
    let front = h.front.take().unwrap();
    assert!(
        !front.is_finished(),
        "the response in flight gets the grace"
    );
    h.clock
        .advance(front::SHUTDOWN_GRACE + Duration::from_millis(1));
    let until = Instant::now() + Duration::from_secs(10);
    while !front.is_finished() {
        assert!(
            Instant::now() < until,
            "front did not return after the grace"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    front.join().unwrap();
}
