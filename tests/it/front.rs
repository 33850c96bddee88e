//! The HTTP front under attack, through the real binary: floods of silent, trickling and
//! single-address connections, IP-address SNI floods, slow readers at SIGTERM, and the
//! strict request-head rules.

use crate::common::*;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::socket::{
    bind, connect, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, SockaddrIn,
};
use serde_json::Value;

/// A TCP connection from `local` (any 127.0.0.0/8 address works on loopback), optionally
/// with a small receive buffer set before connecting (a reader that stalls quickly).
pub(crate) fn connect_from(
    local: Ipv4Addr,
    to: SocketAddr,
    rcvbuf: Option<usize>,
) -> std::io::Result<TcpStream> {
    let SocketAddr::V4(to) = to else {
        panic!("the daemon listens on IPv4 loopback")
    };
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    if let Some(size) = rcvbuf {
        setsockopt(&fd, sockopt::RcvBuf, &size)?;
    }
    bind(
        fd.as_raw_fd(),
        &SockaddrIn::from(SocketAddrV4::new(local, 0)),
    )?;
    connect(fd.as_raw_fd(), &SockaddrIn::from(to))?;
    Ok(TcpStream::from(fd))
}

/// Raises this process's open-file soft limit to the hard limit and checks `need` fit.
fn ensure_open_files(need: u64) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    }
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    assert!(
        soft >= need,
        "this test opens about {need} sockets but the open-file limit is {soft} (hard {hard}); raise `ulimit -Hn`"
    );
}

fn status(d: &Daemon) -> Value {
    d.get("/api/v1/status", READ).expect(200).json()
}

fn http(d: &Daemon) -> Value {
    status(d)["http"].clone()
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// The first bytes of a TLS ClientHello record (any will do: the server waits for the rest).
const HELLO_START: [u8; 12] = [
    0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 0x00,
];

#[test]
fn silent_trickling_and_single_address_floods_leave_a_legitimate_client_served() {
    const SILENT: usize = 2000;
    const TRICKLE: usize = 2000;
    const SINGLE: usize = 300;
    const PER_FLOOD_ADDRESS: usize = 50;
    ensure_open_files((SILENT + TRICKLE + SINGLE + 500) as u64);
    let d = Daemon::start("flood", "[logs]\nauth = []\n[files]\nwatch = []\n");
    // The daemon raised its own limit and said so.
    wait_until(10, "the open-file limit line", || {
        d.stderr().contains("open-file limit:").then_some(())
    });
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", d.pid())).unwrap();
    let max_files: u64 = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(max_files >= 4096 + 64, "daemon open-file limit {max_files}");

    // A legitimate keep-alive client, connected before the flood.
    let auth = format!("Bearer {READ}");
    let mut keep = d.client();
    keep.send("GET", "/api/v1/health", &[("Authorization", &auth)], b"")
        .expect(200);

    // The flood: 2,000 silent and 2,000 trickling connections spread over flood addresses
    // (50 each, under the per-address limit), and 300 from one address.
    let flood_addr = |group: u8, i: usize| {
        Ipv4Addr::new(
            127,
            group,
            (i / PER_FLOOD_ADDRESS / 250) as u8,
            (i / PER_FLOOD_ADDRESS % 250) as u8 + 1,
        )
    };
    let started = Instant::now();
    let silent: Vec<TcpStream> = (0..SILENT)
        .map(|i| connect_from(flood_addr(1, i), d.addr, None).expect("silent connect"))
        .collect();
    let trickle: Vec<TcpStream> = (0..TRICKLE)
        .map(|i| connect_from(flood_addr(2, i), d.addr, None).expect("trickle connect"))
        .collect();
    let mut single = Vec::new();
    for _ in 0..SINGLE {
        // Refused connections may already be reset by the time we write: that is fine.
        if let Ok(mut s) = connect_from(Ipv4Addr::new(127, 3, 0, 1), d.addr, None) {
            let _ = s.write_all(&HELLO_START[..5]);
            single.push(s);
        }
    }
    println!(
        "flood of {} connections opened in {:?}",
        SILENT + TRICKLE + single.len(),
        started.elapsed()
    );
    // Trickle one byte of a TLS record every 5 s on each trickling connection.
    let stop = Arc::new(AtomicBool::new(false));
    let trickler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut trickle = trickle;
            let mut next = 0;
            while !stop.load(Ordering::SeqCst) {
                for s in &mut trickle {
                    let _ = s.write_all(&HELLO_START[next % HELLO_START.len()..][..1]);
                }
                next += 1;
                for _ in 0..50 {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            trickle
        })
    };

    // While the flood lasts (until the handshake deadline closes it), keep-alive and
    // new-connection requests both answer 200.
    let mut latencies = Vec::new();
    let mut peak = Value::Null;
    let mut peak_open = 0;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let t = Instant::now();
        keep.send("GET", "/api/v1/health", &[("Authorization", &auth)], b"")
            .expect(200);
        latencies.push(t.elapsed());
        let t = Instant::now();
        let h = http(&d);
        latencies.push(t.elapsed());
        let open = h["open_connections"].as_u64().unwrap();
        if open > peak_open {
            peak_open = open;
            peak = h.clone();
        }
        if h["timeouts"]["handshake"].as_u64().unwrap() >= (SILENT + TRICKLE + 64) as u64 {
            break;
        }
        assert!(Instant::now() < deadline, "flood never timed out: {h}");
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    let _trickle = trickler.join().unwrap();
    latencies.sort();
    println!(
        "legitimate requests during the flood: {} answered 200, p50 {:?}, p99 {:?}, max {:?}",
        latencies.len(),
        pct(&latencies, 0.5),
        pct(&latencies, 0.99),
        latencies.last().unwrap()
    );
    println!("busiest status seen: {peak}");
    // The flood really was there: thousands of connections in the handshake phase at
    // once, and the single address held to its limit.
    assert!(peak_open >= 4000, "peak {peak}");
    assert!(
        peak["phases"]["handshake"].as_u64().unwrap() >= 4000,
        "{peak}"
    );
    let end = http(&d);
    assert!(
        end["refused"]["per_address"].as_u64().unwrap() >= (SINGLE - 64) as u64,
        "{end}"
    );
    drop(silent);
    drop(single);
    // Afterwards: everything closed, the client still served.
    wait_until(30, "flood connections gone", || {
        (http(&d)["open_connections"].as_u64().unwrap() <= 2).then_some(())
    });
    keep.send("GET", "/api/v1/health", &[("Authorization", &auth)], b"")
        .expect(200);
}

/// A ClientHello that names an IP address in SNI, as `wrk` and browsers opened on an
/// address send: rustls's own client never does, so the name is patched in.
fn ip_sni_hello(d: &Daemon) -> Vec<u8> {
    let mut conn = rustls::ClientConnection::new(
        client_config(d.cert()),
        rustls::pki_types::ServerName::try_from("localhost").unwrap(),
    )
    .unwrap();
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).unwrap();
    let at = hello
        .windows(9)
        .position(|w| w == b"localhost")
        .expect("SNI in the ClientHello");
    hello[at..at + 9].copy_from_slice(b"127.0.0.1");
    hello
}

#[test]
fn a_flood_of_ip_address_sni_handshakes_writes_a_few_log_lines() {
    let d = Daemon::start("ipsni", "[logs]\nauth = []\n[files]\nwatch = []\n");
    let hello = ip_sni_hello(&d);
    let before = d.stderr().lines().count();
    for _ in 0..500 {
        let mut s = TcpStream::connect(d.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(&hello).unwrap();
        // Wait for the server's first flight: the ClientHello has been processed.
        let mut b = [0u8; 1];
        let _ = s.read(&mut b);
    }
    let m = wait_until(10, "500 client warnings counted", || {
        let m = d.get("/metrics", METRICS).text();
        let n: u64 = m
            .lines()
            .find(|l| l.starts_with("svc_log_client_warnings_total "))?
            .split(' ')
            .nth(1)?
            .parse()
            .ok()?;
        (n >= 500).then_some(m)
    });
    assert!(m.contains("svc_log_client_warnings_total"));
    let log = d.stderr();
    let sni_lines = log.lines().filter(|l| l.contains("SNI")).count();
    let new_lines = log.lines().count() - before;
    assert!(
        (1..=2).contains(&sni_lines),
        "{sni_lines} SNI lines:\n{log}"
    );
    assert!(new_lines <= 5, "{new_lines} new log lines:\n{log}");
    assert!(log.contains("caused by a client"), "{log}");
    // The service is unaffected.
    d.get("/api/v1/health", READ).expect(200);
}

#[test]
fn sigterm_with_slow_readers_of_large_responses_exits_promptly() {
    // Large CSV exports: history rows written straight into the store (WAL lets the daemon
    // read them), 5,000 rows of 4 KiB details: about 20 MB per export.
    let dir = temp_dir("slowterm");
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        format!(
            "{}[files]\nwatch = []\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n",
            base_config(&state)
        ),
    )
    .unwrap();
    let mut d = Daemon::start_with(dir, config, state, &[]);
    {
        let c = rusqlite::Connection::open(d.state.join("svc.db")).unwrap();
        c.busy_timeout(Duration::from_secs(10)).unwrap();
        let details = "d".repeat(4096);
        c.execute_batch("BEGIN").unwrap();
        let now = jiff::Timestamp::now().as_microsecond();
        for i in 0..5000i64 {
            c.execute(
                "INSERT INTO history(at, check_name, severity, message, details) VALUES (?1,'big_check',1,?2,?3)",
                rusqlite::params![now - i, format!("row {i}"), details],
            )
            .unwrap();
        }
        // Mark the rows as already in the search index: indexing 20 MB of details is CPU
        // work of the store writer (at raised priority) that this test does not measure, and
        // on a loaded machine it starved the workers that build the exports.
        c.execute_batch("UPDATE history_derived SET fts_upto = (SELECT max(id) FROM history) WHERE id = 1; COMMIT")
            .unwrap();
    }
    // Rows written by another connection are counted (and served) once the daemon's
    // writer has derived them, within about a second: exports before that are empty.
    wait_until(30, "the written rows in history", || {
        let r = d.get("/api/v1/history/csv?limit=1", READ);
        (r.header("x-total-count") == Some("5000")).then_some(())
    });
    let readers = 6;
    let auth = format!("Bearer {READ}");
    let mut slow = Vec::new();
    for _ in 0..readers {
        let tcp = connect_from(Ipv4Addr::LOCALHOST, d.addr, Some(4096)).unwrap();
        let mut c = Client::from_tcp(tcp, d.cert());
        c.write_request(
            "GET",
            "/api/v1/history/csv",
            &[("Authorization", &auth)],
            b"",
        );
        slow.push(c);
    }
    // Every export is generated and parked at the front, waiting for its reader.
    wait_until(120, "every export waiting for its slow reader", || {
        (http(&d)["phases"]["write"].as_u64().unwrap() >= readers).then_some(())
    });
    let t = Instant::now();
    // `stop` fails the test if the daemon is still running after 20 s; a server that
    // waited for these readers would need the 30 s write deadline at least.
    assert_eq!(d.stop(), 0);
    println!(
        "SIGTERM with {readers} slow readers: exited after {:?}",
        t.elapsed()
    );
    drop(slow);
}

#[test]
fn strict_request_heads() {
    let d = Daemon::start("strict", "[logs]\nauth = []\n[files]\nwatch = []\n");
    let raw = |bytes: &[u8]| -> Resp {
        let mut c = d.client();
        c.stream.write_all(bytes).unwrap();
        c.stream.flush().unwrap();
        c.read_response()
    };
    for bad in ["+26", "00026", "2 6", "-1", "0x1a"] {
        let req = format!(
            "POST /login HTTP/1.1\r\nHost: localhost\r\nContent-Length: {bad}\r\n\r\n{}",
            "t".repeat(26)
        );
        raw(req.as_bytes()).expect(400);
    }
    let padded = format!(
        "POST /login HTTP/1.1\r\nHost: localhost\r\nContent-Length:    26   \r\n\r\n{}",
        "t".repeat(26)
    );
    raw(padded.as_bytes()).expect(400);
    // HTTP/1.1 without Host; two Hosts.
    raw(b"GET /api/v1/health HTTP/1.1\r\n\r\n").expect(400);
    raw(b"GET /api/v1/health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").expect(400);
    // Two Authorization headers, even both valid.
    let two = format!(
        "GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {READ}\r\nAuthorization: Bearer {READ}\r\n\r\n"
    );
    raw(two.as_bytes()).expect(400);
    // Expect: 100-continue gets the interim answer before the body is sent.
    let mut c = d.client();
    c.stream
        .write_all(b"POST /login HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 11\r\n\r\n")
        .unwrap();
    c.stream.flush().unwrap();
    assert_eq!(c.read_response().status, 100);
    c.stream.write_all(b"token=wrong").unwrap();
    c.stream.flush().unwrap();
    let r = c.read_response();
    assert!(r.status >= 300, "{}", r.status);
    // Any other expectation: 417.
    raw(b"POST /login HTTP/1.1\r\nHost: localhost\r\nExpect: later\r\nContent-Length: 1\r\n\r\nx")
        .expect(417);
    // A plain valid request still works, and the refusals are counted.
    d.get("/api/v1/health", READ).expect(200);
    let h = http(&d);
    assert!(h["rejected_requests"]["400"].as_u64().unwrap() >= 9, "{h}");
    assert_eq!(h["rejected_requests"]["417"].as_u64().unwrap(), 1, "{h}");
    let m = d.get("/metrics", METRICS).text();
    assert!(m.contains("svc_http_panics_total 0"), "{m}");
}

#[test]
fn status_health_and_cli_show_connections_by_phase_and_refusals() {
    let d = Daemon::start(
        "frontstatus",
        "[logs]\nauth = []\n[files]\nwatch = []\n[webui.limits]\nmax_connections_per_address = 3\n",
    );
    // Two connections waiting in the handshake from one flood address, two refused.
    let flood = Ipv4Addr::new(127, 9, 0, 1);
    let held: Vec<TcpStream> = (0..5)
        .filter_map(|_| connect_from(flood, d.addr, None).ok())
        .collect();
    let h = wait_until(10, "the refusals counted", || {
        let h = http(&d);
        (h["refused"]["per_address"] == 2 && h["phases"]["handshake"] == 3).then_some(h)
    });
    for key in [
        "open_connections",
        "max_connections",
        "phases",
        "refused",
        "timeouts",
        "sse_streams",
        "workers",
    ] {
        assert!(h.get(key).is_some(), "missing http.{key}: {h}");
    }
    assert_eq!(h["max_connections"], 4096);
    assert_eq!(h["max_connections_per_address"], 3);
    let health = d.get("/api/v1/health", READ).expect(200).json();
    assert_eq!(health["http"]["refused"]["per_address"], 2, "{health}");
    let out = d.cli(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("http: ") && text.contains("handshake 3"),
        "{text}"
    );
    assert!(text.contains("2 over the per-address limit"), "{text}");
    let json: Value = serde_json::from_slice(&d.cli(&["status", "--json"]).stdout).unwrap();
    assert_eq!(json["snapshot"]["http"]["refused"]["per_address"], 2);
    let m = d.get("/metrics", METRICS).text();
    assert!(
        m.contains("svc_http_refused_connections_total{reason=\"per_address\"} 2"),
        "{m}"
    );
    assert!(
        m.contains("svc_http_connections{phase=\"handshake\"} 3"),
        "{m}"
    );
    drop(held);
}

/// Everything the server sends until it ends the stream (an error ends it too: on a reset
/// the bytes read before it are what the client got).
fn read_to_close(c: &mut Client) -> Vec<u8> {
    let mut got = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        match c.stream.read(&mut chunk) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return got,
        }
    }
}

/// Status and JSON body of the one response in `got`, if it is complete.
fn answer_of(got: &[u8]) -> Option<(u16, Value)> {
    let mut hs = [httparse::EMPTY_HEADER; 64];
    let mut r = httparse::Response::new(&mut hs);
    let httparse::Status::Complete(n) = r.parse(got).ok()? else {
        return None;
    };
    Some((r.code?, serde_json::from_slice(&got[n..]).ok()?))
}

fn metric(d: &Daemon, line_start: &str) -> u64 {
    let m = d.get("/metrics", METRICS).expect(200).text();
    m.lines()
        .find_map(|l| l.strip_prefix(line_start)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {line_start} in {m}"))
}

/// Issue 35 item 4: a client that sends its whole body without `Expect: 100-continue`
/// reads the refusal instead of a reset (the server closes after a lingering read).
#[test]
fn refused_bodies_sent_without_waiting_still_read_their_answer() {
    let d = Daemon::start("linger", "[logs]\nauth = []\n[files]\nwatch = []\n");
    let body = vec![b'x'; 2 * 1024 * 1024];
    let cases: [(u16, String); 3] = [
        (
            413,
            format!("POST /login HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n", body.len()),
        ),
        (
            411,
            "POST /login HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n200000\r\n"
                .to_string(),
        ),
        (
            400,
            format!("POST /login HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: {}\r\n\r\n", body.len()),
        ),
    ];
    for (status, head) in &cases {
        // A small send buffer: the body cannot hide in the kernel, the client is still
        // writing when the answer comes (as over a real network).
        let tcp = TcpStream::connect(d.addr).unwrap();
        setsockopt(&tcp, sockopt::SndBuf, &4096).unwrap();
        let mut c = Client::from_tcp(tcp, d.cert());
        let mut bytes = head.clone().into_bytes();
        bytes.extend_from_slice(&body);
        // In one go, not waiting for an answer, as http.client and Go do: a reset fails
        // the write, and such a client never reads the answer.
        let wrote = c.stream.write_all(&bytes).and_then(|_| c.stream.flush());
        let got = read_to_close(&mut c);
        assert!(
            wrote.is_ok(),
            "{status}: the body write failed ({wrote:?}); read {:?}",
            String::from_utf8_lossy(&got)
        );
        let (code, json) = answer_of(&got).unwrap_or_else(|| {
            panic!(
                "expected {status}, read {} bytes: {:?}",
                got.len(),
                String::from_utf8_lossy(&got)
            )
        });
        assert_eq!(code, *status, "{json}");
        assert!(json["error"].is_string(), "{json}");
    }
    wait_until(30, "three lingering closes counted", || {
        (metric(&d, "svc_http_lingering_closes_total ") >= 3).then_some(())
    });
    // A client that sends more than the linger limit is cut at the limit, and counted.
    let mut c = d.client();
    let big = vec![b'y'; 12 * 1024 * 1024];
    let mut bytes = cases[0].1.clone().into_bytes();
    bytes.extend_from_slice(&big);
    let _ = c.stream.write_all(&bytes);
    drop(c);
    wait_until(30, "a lingering close cut by its byte limit", || {
        (metric(&d, "svc_http_lingering_cut_total{reason=\"bytes\"} ") >= 1).then_some(())
    });
    assert_eq!(
        metric(&d, "svc_http_lingering_cut_total{reason=\"deadline\"} "),
        0
    );
    d.get("/api/v1/health", READ).expect(200);
}

/// Issue 35 item 4: lingering happens on the front thread without stalling it: while a
/// refused client keeps trickling its body, others are served.
#[test]
fn a_client_trickling_after_its_refusal_stalls_no_one() {
    let d = Daemon::start("lingertrickle", "[logs]\nauth = []\n[files]\nwatch = []\n");
    let mut c = d.client();
    c.write_request(
        "POST",
        "/login",
        &[
            ("Content-Length", "2097152"),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        b"",
    );
    let r = c.read_response();
    assert_eq!(r.status, 413);
    assert!(r.json()["error"].is_string());
    let stop = Arc::new(AtomicBool::new(false));
    let trickler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut sent = 0usize;
            while !stop.load(Ordering::SeqCst) {
                if c.stream
                    .write_all(&[b'z'; 512])
                    .and_then(|_| c.stream.flush())
                    .is_err()
                {
                    break;
                }
                sent += 512;
                std::thread::sleep(Duration::from_millis(20));
            }
            sent
        })
    };
    for _ in 0..20 {
        d.get("/api/v1/health", READ).expect(200);
        let mut k = d.client();
        k.write_request("POST", "/login", &[("Content-Length", "2097152")], b"");
        assert_eq!(k.read_response().status, 413);
    }
    stop.store(true, Ordering::SeqCst);
    let sent = trickler.join().unwrap();
    assert!(sent > 0);
    assert!(metric(&d, "svc_http_lingering_closes_total ") >= 21);
}
