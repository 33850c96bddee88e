//! systemd notification (issue 25): the daemon started with `NOTIFY_SOCKET` pointing at a
//! socket the test bound sends `READY=1` once the API answers, `WATCHDOG=1` every half
//! `WATCHDOG_USEC` while every subsystem thread turns, no ping while one is wedged (the
//! debug-build hook `SVC_TEST_WEDGE` stops the real findings dispatcher in its own loop),
//! `RELOADING=1`/`READY=1` around a SIGHUP and `STOPPING=1` at shutdown. Without
//! `NOTIFY_SOCKET` nothing changes: no watchdog thread, no line about it.

use crate::common::*;

use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `WATCHDOG_USEC` of the test: pings every 1.5 s, a thread is stuck after 3 s.
const WATCHDOG_USEC: &str = "3000000";

/// A datagram from the daemon, when the test received it, and whether the API answered a
/// request made the moment `READY=1` arrived.
struct Note {
    text: String,
    at: Instant,
    api_answered: Option<bool>,
}

/// A loopback port free a moment ago: the reader must know the address before the daemon
/// announces it, to ask the API the moment `READY=1` arrives.
fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// Reads datagrams into a channel; on `READY=1` it asks the API once at once.
fn reader(sock: UnixDatagram, addr: SocketAddr, state: std::path::PathBuf) -> mpsc::Receiver<Note> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let mut asked = false;
        while let Ok(n) = sock.recv(&mut buf) {
            let at = Instant::now();
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            let api_answered = (text.lines().any(|l| l == "READY=1") && !asked).then(|| {
                asked = true;
                let auth = format!("Bearer {READ}");
                Client::connect(addr, state_cert(&state))
                    .send("GET", "/api/v1/health", &[("Authorization", &auth)], b"")
                    .status
                    == 200
            });
            if tx
                .send(Note {
                    text,
                    at,
                    api_answered,
                })
                .is_err()
            {
                return;
            }
        }
    });
    rx
}

/// The next datagram with a line `line`, within `secs`; earlier ones are returned too.
fn next_with(rx: &mpsc::Receiver<Note>, line: &str, secs: u64) -> (Note, Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut before = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(n) if n.text.lines().any(|l| l == line) => return (n, before),
            Ok(n) => before.push(n.text),
            Err(_) => panic!("no {line:?} within {secs} s; saw {before:?}"),
        }
    }
}

#[test]
fn ready_after_the_api_answers_and_watchdog_pings_stop_while_a_thread_is_wedged() {
    let dir = temp_dir("notify");
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let addr = free_port();
    let text = base_config(&state).replace("127.0.0.1:0", &addr.to_string());
    std::fs::write(&config, text).unwrap();
    let socket = dir.join("notify.sock");
    let sock = UnixDatagram::bind(&socket).unwrap();
    let rx = reader(sock, addr, state.clone());
    let wedge = dir.join("wedge");

    let started = Instant::now();
    let mut d = Daemon::start_with(
        dir.clone(),
        config,
        state,
        &[
            ("NOTIFY_SOCKET", socket.to_str().unwrap()),
            ("WATCHDOG_USEC", WATCHDOG_USEC),
            ("SVC_TEST_WEDGE", wedge.to_str().unwrap()),
        ],
    );
    let (ready, before) = next_with(&rx, "READY=1", 30);
    assert!(before.is_empty(), "nothing before READY=1: {before:?}");
    assert_eq!(
        ready.api_answered,
        Some(true),
        "the API answers when READY=1 arrives"
    );
    println!(
        "start to READY=1: {} ms",
        ready.at.duration_since(started).as_millis()
    );

    // Pings while every thread turns.
    let (first, _) = next_with(&rx, "WATCHDOG=1", 30);
    let (second, _) = next_with(&rx, "WATCHDOG=1", 30);
    println!(
        "watchdog ping interval: {} ms",
        second.at.duration_since(first.at).as_millis()
    );

    // The real dispatcher thread stops in its own loop: the supervisor names it and the
    // pings stop, so systemd would restart the daemon.
    std::fs::write(&wedge, "findings-dispatch").unwrap();
    let (_, _) = next_with(&rx, "STATUS=thread findings-dispatch is stuck", 30);
    let quiet_for = Duration::from_secs(5);
    let quiet_until = Instant::now() + quiet_for;
    while let Ok(n) = rx.recv_timeout(quiet_until.saturating_duration_since(Instant::now())) {
        assert!(
            !n.text.contains("WATCHDOG=1"),
            "a ping while findings-dispatch is wedged"
        );
    }
    let log = d.stderr();
    assert_eq!(
        log.matches("thread findings-dispatch has not turned")
            .count(),
        1,
        "the stuck thread is logged once: {log}"
    );

    // Released, it turns again and the pings resume.
    std::fs::remove_file(&wedge).unwrap();
    next_with(&rx, "STATUS=running", 30);
    next_with(&rx, "WATCHDOG=1", 30);

    // A reload by signal is announced around it.
    let hup = Command::new("kill")
        .args(["-HUP", &d.pid().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    next_with(&rx, "RELOADING=1", 30);
    next_with(&rx, "READY=1", 30);

    assert_eq!(d.stop(), 0);
    next_with(&rx, "STOPPING=1", 30);
}

#[test]
fn without_notify_socket_nothing_changes() {
    let dir = temp_dir("notify-none");
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(&config, base_config(&state)).unwrap();
    // WATCHDOG_USEC alone (no NOTIFY_SOCKET; empty counts as unset) starts nothing.
    let mut d = Daemon::start_with(
        dir,
        config,
        state,
        &[("NOTIFY_SOCKET", ""), ("WATCHDOG_USEC", WATCHDOG_USEC)],
    );
    d.get("/api/v1/health", READ).expect(200);
    let threads: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", d.pid()))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .collect();
    assert!(
        threads.iter().any(|t| t == "findings-dispat"),
        "{threads:?}"
    );
    assert!(!threads.iter().any(|t| t == "watchdog"), "{threads:?}");
    assert_eq!(d.stop(), 0);
    let log = d.stderr();
    assert!(
        !log.contains("watchdog")
            && !log.contains("NOTIFY_SOCKET")
            && !log.contains("systemd notification"),
        "{log}"
    );
}
