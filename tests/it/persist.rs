//! Persistence across a restart through the real binary: incidents (snapshots written by
//! the ordered writer, restored at start) and the durable webhook spool (`panel.spool`).

use crate::common::*;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

const WEBSHELL: &str = "<?php\n// innocent looking header\n@eval($_POST['cmd']);\n?>\n";

fn status(d: &Daemon) -> Value {
    d.get("/api/v1/status", READ).expect(200).json()
}

fn failures(ip: &str, from: usize, n: usize) -> Vec<String> {
    (from..from + n)
        .map(|i| {
            format!(
                "Nov 21 10:00:{:02} web1 sshd[{}]: Failed password for root from {ip} port {} ssh2",
                i % 60,
                4000 + i,
                50000 + i
            )
        })
        .collect()
}

fn incident(d: &Daemon, ip: &str) -> Option<Value> {
    let v = d
        .get(&format!("/api/v1/incident?ip={ip}"), ADMIN)
        .expect(200)
        .json();
    v["incidents"].as_array().and_then(|a| a.first().cloned())
}

/// The snapshot writer has nothing waiting and is not writing.
fn persisted(d: &Daemon) -> bool {
    let q = &status(d)["queues"];
    q["incident.persist.waiting"]["waiting"] == 0 && q["incident.persist.active"]["running"] == 0
}

fn auth_daemon(tag: &str) -> (Daemon, PathBuf) {
    let dir = temp_dir(tag);
    let log = dir.join("auth.log");
    std::fs::write(&log, "").unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let extra = format!(
        "[logs]\nauth = [{:?}]\n[files]\nwatch = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n",
        log.display().to_string()
    );
    std::fs::write(&config, format!("{}{extra}", base_config(&state))).unwrap();
    (Daemon::start_with(dir, config, state, &[]), log)
}

fn restart(d: &Daemon) -> Daemon {
    Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), &[])
}

#[test]
fn incidents_survive_a_clean_restart_and_a_sigkill() {
    let (mut d, log) = auth_daemon("persist-incidents");
    let s = status(&d);
    for row in [
        "incident.persist.waiting",
        "incident.persist.active",
        "incident.persist.deferred",
    ] {
        assert!(s["queues"][row].is_object(), "row {row}: {}", s["queues"]);
    }
    assert_eq!(
        s["queues"]["incident.persist.deferred"]["lag_basis"],
        "deferred_checkpoint"
    );
    let ip = "203.0.113.80";
    append_lines(&log, &failures(ip, 0, 5));
    append_lines(
        &log,
        &[format!(
            "Nov 21 10:00:09 web1 sshd[399]: Accepted password for root from {ip} port 41999 ssh2"
        )],
    );
    let before = wait_until(20, "one incident with both findings", || {
        incident(&d, ip).filter(|i| i["count"] == 2)
    });
    assert_eq!(before["state"], "open");
    // A clean stop flushes everything, deferred bookkeeping included.
    assert_eq!(d.stop(), 0);
    let mut d2 = restart(&d);
    let after = incident(&d2, ip).expect("restored after a clean restart");
    for k in [
        "id",
        "kind",
        "key",
        "state",
        "severity",
        "first_seen",
        "last_seen",
        "count",
        "checks",
    ] {
        assert_eq!(after[k], before[k], "{k}: {after} vs {before}");
    }
    let open = &status(&d2)["incidents_open_by_severity"];
    assert_eq!(open["high"], 1, "{open}");

    // A new incident, written by the ordered writer, survives SIGKILL.
    let other = "198.51.100.81";
    append_lines(&log, &failures(other, 10, 5));
    wait_until(20, "the second incident", || incident(&d2, other));
    wait_until(20, "the snapshot writer to catch up", || {
        persisted(&d2).then_some(())
    });
    d2.kill9();
    let d3 = restart(&d2);
    let again = incident(&d3, other).expect("restored after SIGKILL");
    assert_eq!(again["checks"], serde_json::json!(["ssh_bruteforce"]));
    assert!(incident(&d3, ip).is_some());
    let ids: Vec<u64> = [incident(&d3, ip).unwrap(), again]
        .iter()
        .map(|i| i["id"].as_u64().unwrap())
        .collect();
    assert_ne!(ids[0], ids[1], "ids stay distinct across restarts");
}

/// A one-route HTTP receiver on `listener`: records each POST body, answers 200.
fn receiver(listener: TcpListener) -> Arc<parking_lot::Mutex<Vec<Value>>> {
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
            if let Ok(v) = serde_json::from_slice(&body) {
                sink.lock().push(v);
            }
            let mut w = conn;
            let _ =
                w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    got
}

#[test]
fn a_spooled_webhook_is_delivered_after_a_restart_once_the_receiver_is_up() {
    // A loopback port nobody listens on (yet).
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = temp_dir("persist-spool");
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let extra = format!(
        "[files]\nwatch = [{:?}]\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[alerts.webhook]\nurl = \"http://127.0.0.1:{port}/hook\"\ntimeout_seconds = 2\nmax_attempts = 10\n",
        www.display().to_string()
    );
    std::fs::write(&config, format!("{}{extra}", base_config(&state))).unwrap();
    let mut d = Daemon::start_with(dir, config, state, &[]);
    let caps = d.get("/api/v1/capabilities", READ).expect(200).json();
    assert!(
        caps["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "webhook.panel.v1"),
        "{caps}"
    );
    let row = &status(&d)["queues"]["panel.spool"];
    assert_eq!(
        (row["depth_unit"].as_str(), row["capacity"].as_u64()),
        (Some("records"), Some(100_000))
    );
    let shell = www.join("shell.php");
    std::fs::write(&shell, WEBSHELL).unwrap();
    // The receiver is down: the first attempt fails and is retried.
    wait_until(30, "a failed delivery attempt", || {
        let s = status(&d);
        (s["alerts"]["notifiers"]["webhook"]["retries_total"].as_u64() >= Some(1)).then_some(())
    });
    let s = status(&d);
    let row = &s["queues"]["panel.spool"];
    assert_eq!(
        row["running"].as_u64().unwrap() + row["waiting"].as_u64().unwrap(),
        1,
        "{row}"
    );
    assert_eq!(row["dropped_total"], 0);
    assert_eq!(d.stop(), 0);

    // Restart with the receiver still down: the record is replayed from the spool.
    let d2 = restart(&d);
    let row = &status(&d2)["queues"]["panel.spool"];
    assert_eq!(
        row["running"].as_u64().unwrap() + row["waiting"].as_u64().unwrap(),
        1,
        "replayed: {row}"
    );
    wait_until(30, "a failed attempt after the restart", || {
        let s = status(&d2);
        (s["alerts"]["notifiers"]["webhook"]["retries_total"].as_u64() >= Some(1)).then_some(())
    });
    // The receiver comes up on that port: the retry delivers.
    let got = receiver(TcpListener::bind(("127.0.0.1", port)).unwrap());
    let s = wait_until(60, "delivery after the restart", || {
        let s = status(&d2);
        let row = &s["queues"]["panel.spool"];
        (s["alerts"]["notifiers"]["webhook"]["delivered_total"] == 1
            && row["running"] == 0
            && row["waiting"] == 0)
            .then_some(s)
    });
    let row = &s["queues"]["panel.spool"];
    assert_eq!(
        (row["waiting"].as_u64(), row["running"].as_u64()),
        (Some(0), Some(0)),
        "{row}"
    );
    assert_eq!(row["dropped_total"], 0);
    let bodies = got.lock().clone();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    assert_eq!(bodies[0]["type"], "finding");
    assert_eq!(bodies[0]["finding"]["check"], "webshell");
    assert_eq!(bodies[0]["finding"]["path"], shell.display().to_string());
    assert_eq!(bodies[0]["id"].as_str().unwrap().len(), 32);
}
