//! HTTPS server limits and slow clients, through the real binary.

use crate::common::*;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn request_limits_answer_json() {
    let d = Daemon::start("limits", "");
    let auth = format!("Bearer {READ}");
    // Head over 16 KiB.
    let big = "x".repeat(17 * 1024);
    let r = d.req(
        "GET",
        "/api/v1/status",
        &[("Authorization", &auth), ("X-Big", &big)],
        b"",
    );
    r.expect(431);
    // More than 64 headers.
    let names: Vec<String> = (0..70).map(|i| format!("X-H{i}")).collect();
    let mut hs: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "1")).collect();
    hs.push(("Authorization", &auth));
    d.req("GET", "/api/v1/status", &hs, b"").expect(431);
    // Body over 1 MiB (refused from the head, before reading it).
    let mut c = d.client();
    c.write_request("POST", "/login", &[("Content-Length", "2000000")], b"");
    c.read_response().expect(413);
    // Chunked bodies: Content-Length required.
    let mut c = d.client();
    c.write_request(
        "POST",
        "/login",
        &[("Transfer-Encoding", "chunked")],
        b"0\r\n\r\n",
    );
    c.read_response().expect(411);
    // Garbage head.
    let mut c = d.client();
    c.stream.write_all(b"\x01\x02 nonsense\r\n\r\n").unwrap();
    c.stream.flush().unwrap();
    c.read_response().expect(400);
    // The daemon still serves.
    d.get("/api/v1/health", READ).expect(200);
    let m = d.get("/metrics", METRICS).text();
    for status in ["431", "413", "411", "400"] {
        assert!(
            m.contains(&format!("route=\"refused\",status=\"{status}\"")),
            "{status} not counted:\n{m}"
        );
    }
}

#[test]
fn keep_alive_serves_many_requests_on_one_connection() {
    let d = Daemon::start("keepalive", "");
    let mut c = d.client();
    let auth = format!("Bearer {READ}");
    for _ in 0..50 {
        c.send("GET", "/api/v1/health", &[("Authorization", &auth)], b"")
            .expect(200);
    }
}

#[test]
fn clients_that_stall_do_not_delay_others() {
    let d = Daemon::start(
        "slow",
        "[webui.limits]\nhandshake_timeout_seconds = 2\nhead_timeout_seconds = 3\n",
    );
    // Connections that never send a ClientHello.
    let silent: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(d.addr).unwrap())
        .collect();
    // A TLS client that sends its request head one byte at a time, slowly.
    let mut slow = d.client();
    slow.stream.write_all(b"G").unwrap();
    slow.stream.flush().unwrap();
    // Normal clients are served meanwhile (each on its own connection).
    for _ in 0..10 {
        d.get("/api/v1/health", READ).expect(200);
        // The server may already have answered 408; a failed write is fine here.
        let _ = slow
            .stream
            .write_all(b"E")
            .and_then(|_| slow.stream.flush());
    }
    // A half-written ClientHello from a raw socket does not block either.
    let mut partial = TcpStream::connect(d.addr).unwrap();
    partial.write_all(&[0x16, 0x03, 0x01, 0x00]).unwrap();
    d.get("/api/v1/status", READ).expect(200);
    // The silent connections are closed by the handshake deadline, and counted.
    std::thread::sleep(Duration::from_secs(4));
    let m = d.get("/metrics", METRICS).text();
    let failures: u64 = m
        .lines()
        .find(|l| l.starts_with("svc_http_handshake_failures_total "))
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(failures >= 20, "handshake failures counted: {failures}");
    // The slow head got 408.
    let r = slow.read_response();
    r.expect(408);
    drop(silent);
}

#[test]
fn sigterm_exits_zero_and_removes_socket() {
    let mut d = Daemon::start("sigterm", "");
    assert!(d.state.join("svc.sock").exists());
    let (cookie, _) = login(&d, ADMIN);
    assert!(!cookie.is_empty());
    assert_eq!(d.stop(), 0);
    assert!(!d.state.join("svc.sock").exists());
}
