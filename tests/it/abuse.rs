//! Abuse reporting through the real binary: real automatic blocks (an auth-log brute force,
//! real nftables in the namespaces of `tests/it/firewall.rs`) reach a loopback collector the
//! test runs, in the central service's form format with the API key from the environment,
//! exactly once per address and category, across a collector outage and a daemon restart.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::common::*;
use crate::firewall::{post, require};

const KEY: &str = "it-abuse-key-7f3a9c";

/// One report as the collector saw it.
#[derive(Clone, Debug)]
struct Got {
    path: String,
    key: Option<String>,
    form: Vec<(String, String)>,
}

impl Got {
    fn get(&self, k: &str) -> &str {
        self.form
            .iter()
            .find(|(n, _)| n == k)
            .map_or("", |(_, v)| v.as_str())
    }
}

fn unpercent(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let hex = s
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(if c == b'+' { b' ' } else { c });
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A loopback HTTP collector answering 200 to every request.
struct Collector {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Collector {
    fn start(port: u16, seen: Arc<Mutex<Vec<Got>>>) -> Collector {
        let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match l.accept() {
                        Ok((s, _)) => serve(s, &seen),
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        Collector {
            port,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops and closes the port.
    fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn serve(s: TcpStream, seen: &Mutex<Vec<Got>>) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut r = BufReader::new(s);
    let mut line = String::new();
    if r.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let (mut len, mut key) = (0usize, None);
    loop {
        let mut l = String::new();
        if r.read_line(&mut l).is_err() {
            return;
        }
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            match k.trim().to_ascii_lowercase().as_str() {
                "content-length" => len = v.trim().parse().unwrap_or(0),
                "key" => key = Some(v.trim().to_string()),
                _ => {}
            }
        }
    }
    let mut body = vec![0; len];
    if r.read_exact(&mut body).is_err() {
        return;
    }
    let form = String::from_utf8_lossy(&body)
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (unpercent(k), unpercent(v)))
        .collect();
    seen.lock().push(Got { path, key, form });
    let s = r.get_mut();
    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
    let _ = s.flush();
}

fn ssh_failures(ip: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("Nov 21 10:00:{i:02} web1 sshd[{}]: Failed password for root from {ip} port {} ssh2", 4000 + i, 50000 + i))
        .collect()
}

fn pam_failures(ip: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("Nov 21 10:01:{i:02} web1 vsftpd[{}]: pam_unix(vsftpd:auth): authentication failure; logname= uid=0 euid=0 tty=ftp ruser=bob rhost={ip}  user=bob", 5000 + i))
        .collect()
}

fn blocked(d: &Daemon, ip: &str) -> bool {
    d.get(&format!("/api/v1/firewall/check?ip={ip}"), ADMIN)
        .json()["blocked"]
        == true
}

fn wait_blocked(d: &Daemon, ip: &str) {
    wait_until(30, &format!("the automatic block of {ip}"), || {
        blocked(d, ip).then_some(())
    });
}

fn reports_for(seen: &Mutex<Vec<Got>>, ip: &str) -> Vec<Got> {
    seen.lock()
        .iter()
        .filter(|g| g.get("ip") == ip)
        .cloned()
        .collect()
}

fn queue(d: &Daemon, row: &str) -> Value {
    d.get("/api/v1/status", READ).json()["queues"][row].clone()
}

#[test]
fn confirmed_blocks_reach_a_loopback_collector_once_across_an_outage_and_a_restart() {
    let Some(net) = require("abuse") else {
        return;
    };
    // The collector and the daemon share srv's loopback.
    net.enter_srv();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let collector = Collector::start(0, seen.clone());
    let port = collector.port;
    let dir = temp_dir("abuse");
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let log = dir.join("auth.log");
    std::fs::write(
        &log,
        "Nov 21 00:00:00 host sshd[1]: Server listening on 0.0.0.0 port 22.\n",
    )
    .unwrap();
    let text = base_config(&state).replace(
        "[firewall]\nenabled = false\n",
        "[firewall]\nenabled = true\ncheck_interval_seconds = 1\n",
    );
    std::fs::write(
        &config,
        format!(
            "{text}[logs]\nauth = [{log:?}]\n[files]\nwatch = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[thresholds]\nauth_failures = 5\n[auto_response]\ndry_run = false\n[reputation.report]\nenabled = true\nspool_limit = 500\n[[reputation.report.destinations]]\nname = \"central\"\nurl = \"http://127.0.0.1:{port}/api/v2/report\"\nformat = \"abuseipdb\"\napi_key_env = \"SVC_IT_ABUSE_KEY\"\ndedup_window_hours = 24\n",
            log = log.display().to_string()
        ),
    )
    .unwrap();
    let env = [("SVC_IT_ABUSE_KEY", KEY)];
    let mut d = Daemon::start_with(dir.clone(), config.clone(), state.clone(), &env);

    // 1. A brute force is blocked and reported: address, categories, evidence, time, key.
    append_lines(&log, &ssh_failures("203.0.113.10", 8));
    wait_blocked(&d, "203.0.113.10");
    let got = wait_until(30, "the first report", || {
        let r = reports_for(&seen, "203.0.113.10");
        (!r.is_empty()).then_some(r)
    });
    let g = &got[0];
    assert_eq!(g.path, "/api/v2/report");
    assert_eq!(g.key.as_deref(), Some(KEY));
    assert_eq!(g.get("categories"), "18,22", "{g:?}");
    assert!(
        g.get("comment")
            .starts_with("Blocked automatically by svc: ssh_bruteforce"),
        "{g:?}"
    );
    assert!(
        g.get("comment").contains("; events: brute_force 1"),
        "{g:?}"
    );
    assert!(g.get("timestamp").ends_with('Z'), "{g:?}");
    let ingress = queue(&d, "abuse_reporting.ingress");
    assert_eq!(ingress["capacity"], 500, "{ingress}");
    assert_eq!(ingress["depth_unit"], "reports");
    let spool = queue(&d, "abuse_reporting.spool");
    assert_eq!(spool["capacity"], 500, "{spool}");
    assert_eq!(spool["lag_basis"], "observed_age");

    // 2. The collector is down: the next report waits in the durable spool.
    collector.stop();
    append_lines(&log, &ssh_failures("203.0.113.11", 8));
    wait_blocked(&d, "203.0.113.11");
    let spool = wait_until(30, "a failed delivery", || {
        let q = queue(&d, "abuse_reporting.spool");
        q["conditions"]
            .as_array()
            .is_some_and(|c| c.contains(&json!("delivery_failed")))
            .then_some(q)
    });
    // Waiting for its next attempt, or in one.
    let held = spool["waiting"].as_u64().unwrap_or(0) + spool["running"].as_u64().unwrap_or(0);
    assert_eq!(held, 1, "{spool}");
    assert_eq!(spool["dropped_total"], 0, "{spool}");
    assert!(
        spool["status"] == "warning" || spool["status"] == "degraded",
        "{spool}"
    );

    // 3. Restarted, then the collector comes back: the spooled report is delivered.
    assert_eq!(d.stop(), 0);
    d = Daemon::start_with(dir.clone(), config.clone(), state.clone(), &env);
    let q = queue(&d, "abuse_reporting.spool");
    let held = q["waiting"].as_u64().unwrap_or(0) + q["running"].as_u64().unwrap_or(0);
    assert_eq!(held, 1, "the report waits across the restart: {q}");
    let collector = Collector::start(port, seen.clone());
    wait_until(40, "the spooled report after the restart", || {
        (!reports_for(&seen, "203.0.113.11").is_empty()).then_some(())
    });
    wait_until(10, "an empty spool", || {
        (queue(&d, "abuse_reporting.spool")["waiting"] == 0).then_some(())
    });

    // 4. Both addresses are unblocked and attack again (a different check with the same
    //    category): blocked again, but within the dedup window nothing new is reported.
    for ip in ["203.0.113.10", "203.0.113.11"] {
        post(&d, "/api/v1/firewall/unban", ADMIN, json!({ "ip": ip })).expect(200);
        assert!(!blocked(&d, ip));
        append_lines(&log, &pam_failures(ip, 8));
        wait_blocked(&d, ip);
    }
    // A fresh address afterwards: reports keep their order, so once its report is in, any
    // report of the two earlier blocks would have been too.
    append_lines(&log, &ssh_failures("198.51.100.20", 8));
    wait_blocked(&d, "198.51.100.20");
    wait_until(30, "the fresh address's report", || {
        (!reports_for(&seen, "198.51.100.20").is_empty()).then_some(())
    });
    for ip in ["203.0.113.10", "203.0.113.11", "198.51.100.20"] {
        let r = reports_for(&seen, ip);
        assert_eq!(r.len(), 1, "{ip}: {r:?}");
        assert_eq!(r[0].get("categories"), "18,22", "{ip}");
    }
    assert_eq!(seen.lock().len(), 3);
    let spool = queue(&d, "abuse_reporting.spool");
    assert_eq!(spool["dropped_total"], 0, "{spool}");
    assert!(
        !spool["conditions"]
            .as_array()
            .unwrap()
            .contains(&json!("delivery_failed")),
        "{spool}"
    );

    assert_eq!(d.stop(), 0);
    collector.stop();
    // The key never reaches the logs.
    let logs = format!(
        "{}{}",
        std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default(),
        d.stdout().join("\n")
    );
    assert!(!logs.contains(KEY));
    let _ = std::fs::remove_dir_all(dir);
}
