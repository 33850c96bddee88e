//! The live event stream and alerts through the real binary: findings come from the file
//! watcher (webshell files under a watched root), streams are real TLS clients, webhooks go
//! to a small HTTP server inside the test.

use crate::common::*;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

const WEBSHELL: &str = "<?php\n// innocent looking header\n@eval($_POST['cmd']);\n?>\n";

/// Starts a daemon whose file watcher covers `{dir}/www`; scheduled checks are off.
fn start(tag: &str, extra: &str) -> Daemon {
    let dir = temp_dir(tag);
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::create_dir_all(dir.join("fixture")).unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let engine = format!(
        "[files]\nwatch = [{www:?}]\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\nroot = {root:?}\n",
        www = dir.join("www").display().to_string(),
        root = dir.join("fixture").display().to_string(),
    );
    std::fs::write(&config, format!("{}{engine}{extra}", base_config(&state))).unwrap();
    Daemon::start_with(dir, config, state, &[])
}

/// Opens `/api/v1/events` and reads the response head.
fn subscribe_with(mut c: Client, token: &str) -> (Client, Resp) {
    let auth = format!("Bearer {token}");
    c.write_request("GET", "/api/v1/events", &[("Authorization", &auth)], b"");
    let head = c.read_head();
    (c, head)
}

fn subscribe(d: &Daemon) -> Client {
    let (c, head) = subscribe_with(d.client(), READ);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some("text/event-stream"));
    c
}

/// A TCP connection whose receive buffer is set small before connecting, so a client that
/// does not read stalls the server's writes quickly.
fn connect_small_rcvbuf(addr: SocketAddr) -> TcpStream {
    use std::os::fd::FromRawFd;
    let SocketAddr::V4(v4) = addr else {
        panic!("the daemon listens on IPv4 loopback")
    };
    // SAFETY: plain socket calls on a descriptor this function owns; arguments point to live
    // locals of the sizes passed. The descriptor is handed to TcpStream exactly once.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let size: libc::c_int = 4096;
        let rc = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &size as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        assert_eq!(rc, 0, "setsockopt: {}", std::io::Error::last_os_error());
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*v4.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        let rc = libc::connect(
            fd,
            &sin as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(rc, 0, "connect: {}", std::io::Error::last_os_error());
        TcpStream::from_raw_fd(fd)
    }
}

/// One parsed SSE block.
#[derive(Debug)]
struct Event {
    id: u64,
    name: String,
    data: Value,
}

fn parse_events(text: &str) -> Vec<Event> {
    text.split("\n\n")
        .filter(|b| b.lines().any(|l| l.starts_with("data: ")))
        .filter_map(|b| {
            let mut ev = Event {
                id: 0,
                name: String::new(),
                data: Value::Null,
            };
            for line in b.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    ev.id = v.parse().ok()?;
                } else if let Some(v) = line.strip_prefix("event: ") {
                    ev.name = v.to_string();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    // The last block may still be arriving.
                    ev.data = serde_json::from_str(v).ok()?;
                }
            }
            Some(ev)
        })
        .collect()
}

fn webshell_paths(events: &[Event]) -> BTreeSet<String> {
    events
        .iter()
        .filter(|e| e.data["check"] == "webshell")
        .filter_map(|e| e.data["path"].as_str().map(String::from))
        .collect()
}

/// Writes `n` distinct webshell files, a few at a time (the dispatcher batches what
/// arrives while it commits; the pause keeps bursts within one subscriber buffer).
fn write_webshells(www: &Path, tag: &str, n: usize) -> BTreeSet<String> {
    let dir = www.join(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let mut paths = BTreeSet::new();
    for i in 0..n {
        let p = dir.join(format!("shell{i:04}.php"));
        std::fs::write(&p, format!("{WEBSHELL}// {i}\n")).unwrap();
        paths.insert(p.display().to_string());
        if i % 8 == 7 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    paths
}

/// [`write_webshells`] in groups of 8, each written once the reader has received all but 8
/// of the files before it. At most 16 files are outstanding, so even a file reported twice
/// (the watcher may see it created with content and then closed) keeps the reader's buffer
/// (64) from filling. Waits at most 60 s per group.
fn write_webshells_paced(www: &Path, tag: &str, n: usize, seen: &AtomicUsize) -> BTreeSet<String> {
    let dir = www.join(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let mut paths = BTreeSet::new();
    for i in 0..n {
        if i % 8 == 0 && i >= 16 {
            let started = Instant::now();
            while seen.load(Ordering::Relaxed) < i - 8
                && started.elapsed() < Duration::from_secs(60)
            {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let p = dir.join(format!("shell{i:04}.php"));
        std::fs::write(&p, format!("{WEBSHELL}// {i}\n")).unwrap();
        paths.insert(p.display().to_string());
    }
    paths
}

fn status(d: &Daemon) -> Value {
    d.get("/api/v1/status", READ).expect(200).json()
}

/// Polls status until `pred` holds (or panics after `secs`).
fn wait_status(d: &Daemon, secs: u64, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    wait_until(secs, what, || {
        let s = status(d);
        pred(&s).then_some(s)
    })
}

#[test]
fn a_stalled_subscriber_slows_neither_the_dispatcher_nor_other_subscribers() {
    const N: usize = 600;
    let d = start("sse-stall", "");
    // The stalled subscriber: small receive buffer, never reads after the head.
    let (stalled, head) = subscribe_with(
        Client::from_tcp(connect_small_rcvbuf(d.addr), d.cert()),
        READ,
    );
    assert_eq!(head.status, 200);
    let mut reader = subscribe(&d);
    let s = status(&d);
    assert_eq!(s["events"]["subscribers"], 2);
    // A subscription counts from the request; its stream's thread counts as running once it
    // starts the body, which may be just after the head reached the client.
    let s = wait_status(&d, 10, "both streams running", |s| {
        s["queues"]["events.deliveries"]["running"] == 2
    });
    let row = &s["queues"]["events.deliveries"];
    assert_eq!(row["depth_unit"], "findings");
    assert_eq!(row["capacity"], 128);
    assert_eq!(row["running"], 2);

    let www = d.dir.join("www");
    let (tx, rx) = std::sync::mpsc::channel();
    // Distinct webshell files the reading subscriber has received so far: the burst is paced
    // by it, so on a loaded machine this test process's own reader never falls a buffer (64)
    // behind, while the stalled subscriber, which reads nothing, still overflows. Files, not
    // events: a file reported twice must not count as two.
    let seen = Arc::new(AtomicUsize::new(0));
    let seen_by_reader = seen.clone();
    let reading = std::thread::spawn(move || {
        // Complete events are parsed once: (bytes parsed, paths among them).
        let parsed = std::cell::RefCell::new((0usize, BTreeSet::new()));
        let text = reader.read_until(|t| {
            let (done, paths) = &mut *parsed.borrow_mut();
            let end = t.rfind("\n\n").map_or(0, |i| i + 2);
            if end > *done {
                paths.extend(webshell_paths(&parse_events(&t[*done..end])));
                *done = end;
            }
            seen_by_reader.store(paths.len(), Ordering::Relaxed);
            paths.len() >= N
        });
        let _ = tx.send(());
        (text, reader)
    });
    let expected = write_webshells_paced(&www, "burst", N, &seen);
    // The API keeps answering while one stream is stalled and findings pour in.
    let started = Instant::now();
    while rx.try_recv().is_err() && started.elapsed() < Duration::from_secs(60) {
        let t0 = Instant::now();
        status(&d);
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "status took {:?}",
            t0.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (text, _reader) = reading.join().unwrap();
    let events = parse_events(&text);
    let got = webshell_paths(&events);
    let missing: Vec<&String> = expected.difference(&got).collect();
    assert!(
        missing.is_empty() && got.len() == expected.len(),
        "the reading subscriber got every finding; {} missing, first {:?}; {}",
        missing.len(),
        &missing[..missing.len().min(5)],
        status(&d)["queues"]["events.deliveries"]
    );
    // Event shape: id, name, one JSON finding per data line.
    let e = events
        .iter()
        .find(|e| e.data["check"] == "webshell")
        .unwrap();
    assert_eq!(e.name, "finding");
    assert!(e.id >= 1);
    assert_eq!(e.data["severity"], "CRITICAL");
    for key in ["first_seen", "last_seen"] {
        let t = e.data[key].as_str().unwrap();
        assert_eq!(t.len(), "2026-01-01T00:00:00.000000Z".len(), "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[19] == b'.', "{t}");
    }
    assert!(e.data["message"].is_string() && e.data["count"].is_u64());
    let ids: Vec<u64> = events.iter().map(|e| e.id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase");
    assert!(
        text.starts_with(": svc event stream\nretry: 5000\n\n"),
        "{}",
        &text[..60.min(text.len())]
    );

    // The stalled one lost findings (counted) and its slot is freed after the write deadline.
    let s = wait_status(&d, 20, "stalled subscriber dropped", |s| {
        s["events"]["subscribers"] == 1
    });
    let row = &s["queues"]["events.deliveries"];
    assert!(
        row["dropped_total"].as_u64().unwrap() >= 64,
        "losses of the stalled subscriber counted: {row}"
    );
    assert_eq!(row["capacity"], 64);
    assert_eq!(row["running"], 1);
    assert_eq!(
        s["queues"]["findings.ingest"]["dropped_total"], 0,
        "the dispatcher lost nothing"
    );
    let h = d.get("/api/v1/health", READ).expect(200).json();
    assert_eq!(h["http"]["sse_streams"], 1);
    let m = d.get("/metrics", METRICS).text();
    assert!(
        m.contains("svc_queue_dropped_total{queue=\"events.deliveries\"}"),
        "{m}"
    );
    drop(stalled);
}

#[test]
fn stream_scopes_limit_and_capability() {
    let d = start("sse-limit", "[webui.limits]\nmax_sse_subscribers = 2\n");
    // Without a credential, with the metrics token, or a bad token: 401 JSON.
    d.req("GET", "/api/v1/events", &[], b"").expect(401);
    d.get("/api/v1/events", METRICS).expect(401);
    d.get("/api/v1/events", "not-a-valid-token-at-all")
        .expect(401);
    let auth = format!("Bearer {READ}");
    d.req("POST", "/api/v1/events", &[("Authorization", &auth)], b"")
        .expect(405);
    let caps = d.get("/api/v1/capabilities", READ).expect(200).json();
    assert!(
        caps["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "events.sse.v1"),
        "{caps}"
    );
    let _a = subscribe(&d);
    let (_b, head) = subscribe_with(d.client(), ADMIN);
    assert_eq!(head.status, 200, "admin tokens may subscribe too");
    // Over the limit: 503 JSON, not a stream.
    let mut c = d.client();
    let r = c.send("GET", "/api/v1/events", &[("Authorization", &auth)], b"");
    r.expect(503);
    assert!(r.json()["error"].as_str().unwrap().contains("limit 2"));
    assert_eq!(r.header("retry-after"), Some("5"));
    // Other routes are unaffected.
    d.get("/api/v1/status", READ).expect(200);
    let m = d.get("/metrics", METRICS).text();
    assert!(m.contains("svc_events_refused_subscribers_total 1"), "{m}");
}

#[test]
fn sigterm_ends_open_streams_and_exits_zero_promptly() {
    let mut d = start("sse-term", "");
    let mut a = subscribe(&d);
    let _b = subscribe(&d);
    let text = a.read_until(|t| t.contains("retry: 5000\n\n"));
    assert!(text.starts_with(": svc event stream"));
    let t0 = Instant::now();
    assert_eq!(d.stop(), 0);
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "stopped in {:?}",
        t0.elapsed()
    );
}

/// A one-route HTTP server: records each POST body, answers 200.
fn webhook_server() -> (u16, Arc<parking_lot::Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let sink = got.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            conn.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let mut len = 0usize;
            let mut request_line = String::new();
            if r.read_line(&mut request_line).is_err() {
                continue;
            }
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            if r.read_exact(&mut body).is_err() {
                continue;
            }
            assert!(request_line.starts_with("POST /hook "), "{request_line}");
            sink.lock().push(serde_json::from_slice(&body).unwrap());
            let mut w = conn;
            let _ =
                w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    (port, got)
}

#[test]
fn alert_budget_sends_two_and_holds_three_back_visibly() {
    let (port, got) = webhook_server();
    let d = start(
        "alerts",
        &format!(
            "[alerts]\nmax_per_hour = 2\n[alerts.webhook]\nurl = \"http://127.0.0.1:{port}/hook\"\ntimeout_seconds = 5\nmax_attempts = 3\n"
        ),
    );
    let s = status(&d);
    assert_eq!(s["queues"]["panel.spool"]["depth_unit"], "records");
    assert_eq!(s["alerts"]["max_per_hour"], 2);
    let www = d.dir.join("www");
    let paths = write_webshells(&www, "alerts", 5);
    let s = wait_status(&d, 30, "five alert-worthy findings", |s| {
        s["alerts"]["selected_total"].as_u64() >= Some(5)
    });
    let active = d.get("/api/v1/findings", READ).expect(200).json();
    let worthy = active["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "CRITICAL" || f["severity"] == "HIGH")
        .count() as u64;
    assert_eq!(worthy, 5, "one alert-worthy finding per file: {active}");
    assert_eq!(s["alerts"]["sent_in_window"], 2);
    assert_eq!(s["alerts"]["held_back_in_window"], 3);
    assert_eq!(s["alerts"]["held_back_total"], 3);
    assert!(s["alerts"]["window_started_at"]
        .as_str()
        .unwrap()
        .ends_with('Z'));
    wait_status(&d, 20, "two webhook deliveries", |s| {
        s["alerts"]["notifiers"]["webhook"]["delivered_total"] == 2
    });
    // Nothing else arrives: the other three wait for the window's summary.
    std::thread::sleep(Duration::from_millis(500));
    let got = got.lock().clone();
    assert_eq!(got.len(), 2, "{got:?}");
    for n in &got {
        assert_eq!(n["type"], "finding");
        assert_eq!(n["finding"]["check"], "webshell");
        assert!(paths.contains(n["finding"]["path"].as_str().unwrap()));
    }
    let m = d.get("/metrics", METRICS).text();
    assert!(m.contains("svc_alerts_held_back_total 3"), "{m}");
    assert!(m.contains("svc_alerts_held_back_window 3"), "{m}");
    let row = &status(&d)["queues"]["panel.spool"];
    assert_eq!(row["dropped_total"], 0);
    assert_eq!(row["status"], "ok");
}

#[test]
fn webhook_urls_other_than_https_or_loopback_http_are_refused() {
    let dir = temp_dir("alerts-url");
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        format!(
            "{}[alerts.webhook]\nurl = \"http://203.0.113.5/hook\"\n",
            base_config(&dir.join("state"))
        ),
    )
    .unwrap();
    let out = std::process::Command::new(svc_bin())
        .args(["validate", "-c", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("alerts.webhook.url: plain http://"), "{text}");
}

/// Issue 35 item 9 (decision 60 knew it): a stream opened with a token that a reload
/// removes ends promptly; a stream of a token that stays keeps delivering.
#[test]
fn a_stream_ends_when_a_reload_removes_its_token() {
    let d = start("events-token-removed", "");
    let (mut kept, head) = subscribe_with(d.client(), ADMIN);
    assert_eq!(head.status, 200);
    let (mut removed, head) = subscribe_with(d.client(), READ);
    assert_eq!(head.status, 200);
    let admin_status = || d.get("/api/v1/status", ADMIN).expect(200).json();
    wait_until(30, "two subscribers", || {
        (admin_status()["events"]["subscribers"] == 2).then_some(())
    });
    let text = std::fs::read_to_string(&d.config).unwrap();
    let read_entry =
        format!("[[webui.tokens]]\nname = \"dash-read\"\ntoken = {READ:?}\nscope = \"read\"\n");
    assert!(text.contains(&read_entry), "{text}");
    std::fs::write(&d.config, text.replace(&read_entry, "")).unwrap();
    let out = d.cli(&["reload"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    d.get("/api/v1/status", READ).expect(401);
    wait_until(30, "the removed token's stream to end", || {
        (admin_status()["events"]["subscribers"] == 1).then_some(())
    });
    // Its connection is closed: reading ends without an event.
    let rest = removed.read_until(|_| false);
    assert!(!rest.contains("webshell"), "{rest}");
    let www = d.dir.join("www");
    let paths = write_webshells(&www, "kept", 1);
    let path = paths.iter().next().unwrap().clone();
    let got = kept.read_until(|t| t.contains(&path));
    assert!(
        got.contains(&path),
        "the kept token's stream delivers: {got}"
    );
}
