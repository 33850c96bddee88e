//! The access-log collector through the real binary: a real nginx (the Debian package, on
//! loopback) writes its access log, the daemon tails it (found by a `logs.access` glob) and
//! reports the WordPress login flood with the client's address, which feeds the attack
//! database; a domain log created later is picked up after a reload; the rows are there.
//!
//! nginx logs the documentation address each request names in `X-Forwarded-For`
//! (`ngx_http_realip_module`, trusted from 127.0.0.1 only), as behind a proxy.

use crate::common::*;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;

/// A private nginx writing `logs/<name>.log` under `dir`, stopped on drop.
struct Nginx {
    pid_file: std::path::PathBuf,
    port: u16,
}

impl Nginx {
    fn start(dir: &Path, name: &str) -> Nginx {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let www = dir.join("www");
        std::fs::create_dir_all(&www).unwrap();
        std::fs::write(www.join("index.html"), "ok\n").unwrap();
        let tmp = dir.join("nginx-tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let pid_file = dir.join(format!("nginx-{name}.pid"));
        let conf = dir.join(format!("nginx-{name}.conf"));
        let d = dir.display();
        std::fs::write(
            &conf,
            format!(
                "pid {pid};\nerror_log {d}/nginx-error.log;\nevents {{}}\nhttp {{\n  access_log {d}/logs/{name}.log combined;\n  client_body_temp_path {t};\n  proxy_temp_path {t};\n  fastcgi_temp_path {t};\n  uwsgi_temp_path {t};\n  scgi_temp_path {t};\n  set_real_ip_from 127.0.0.1;\n  real_ip_header X-Forwarded-For;\n  server {{\n    listen 127.0.0.1:{port};\n    root {w};\n  }}\n}}\n",
                pid = pid_file.display(),
                t = tmp.display(),
                w = www.display(),
            ),
        )
        .unwrap();
        let st = Command::new("nginx")
            .arg("-c")
            .arg(&conf)
            .status()
            .expect("nginx");
        assert!(st.success(), "nginx did not start");
        wait_until(10, "nginx pid file", || {
            std::fs::read_to_string(&pid_file)
                .ok()
                .filter(|s| !s.trim().is_empty())
                .map(|_| ())
        });
        Nginx { pid_file, port }
    }

    /// One request from `client` (as nginx will log it); returns the status line.
    fn request(&self, client: &str, method: &str, path: &str, ua: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let body = if method == "POST" {
            "log=admin&pwd=guess"
        } else {
            ""
        };
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: example.test\r\nUser-Agent: {ua}\r\nX-Forwarded-For: {client}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.lines().next().unwrap_or("").to_string()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.pid_file) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
    }
}

fn active(d: &Daemon) -> Vec<serde_json::Value> {
    d.get("/api/v1/findings", READ).expect(200).json()["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn has(items: &[serde_json::Value], check: &str, ip: &str) -> bool {
    items.iter().any(|f| f["check"] == check && f["ip"] == ip)
}

fn watcher(d: &Daemon) -> serde_json::Value {
    d.get("/api/v1/components", READ).expect(200).json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "access_log")
        .cloned()
        .expect("access_log component")
}

#[test]
fn a_real_nginx_log_is_tailed_and_a_login_flood_reported() {
    let dir = temp_dir("access-nginx");
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let nginx = Nginx::start(&dir, "a.test");
    // History before the daemon starts is skipped.
    for _ in 0..6 {
        nginx.request("198.51.100.50", "POST", "/wp-login.php", "Mozilla/5.0");
    }
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let extra = format!(
        "[logs]\naccess = [\"{}/logs/*.log\"]\n[files]\nwatch = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[thresholds]\nhttp_wp_login_posts = 5\n",
        dir.display()
    );
    std::fs::write(&config, format!("{}{extra}", base_config(&state))).unwrap();
    let d = Daemon::start_with(dir.clone(), config.clone(), state, &[]);
    assert_eq!(watcher(&d)["state"], "attached");

    let status = nginx.request("192.0.2.77", "GET", "/", "Mozilla/5.0");
    assert!(status.contains(" 200 "), "{status}");
    for _ in 0..4 {
        nginx.request("192.0.2.77", "POST", "/wp-login.php", "Mozilla/5.0");
    }
    wait_until(20, "5 lines read", || {
        (watcher(&d)["events_total"].as_u64() >= Some(5)).then_some(())
    });
    assert!(!has(&active(&d), "wp_login_bruteforce", "192.0.2.77"));
    nginx.request("192.0.2.77", "POST", "/wp-login.php", "Mozilla/5.0");
    let items = wait_until(20, "wp_login_bruteforce", || {
        let items = active(&d);
        has(&items, "wp_login_bruteforce", "192.0.2.77").then_some(items)
    });
    assert!(
        !has(&items, "wp_login_bruteforce", "198.51.100.50"),
        "history skipped"
    );
    let f = items
        .iter()
        .find(|f| f["check"] == "wp_login_bruteforce")
        .unwrap();
    assert_eq!(f["severity"], "HIGH");
    assert_eq!(f["message"], "WordPress login brute force from 192.0.2.77");
    // The finding feeds the attack database.
    let v = wait_until(20, "attack record", || {
        let v = d
            .get("/api/v1/threat/ip?ip=192.0.2.77", ADMIN)
            .expect(200)
            .json();
        (!v["events"].as_array().unwrap().is_empty()).then_some(v)
    });
    assert_eq!(v["events"][0]["type"], "brute_force");
    // Rows: the file source in bytes, and the watcher with its counters.
    let s = d.get("/api/v1/status", READ).json();
    let row = &s["queues"]["access_log.file_source"];
    assert_eq!(row["depth_unit"], "bytes", "{}", s["queues"]);
    assert_eq!(row["capacity_unavailable"], true);

    // A new domain's log, then a reload that changes `logs.access` and a threshold: the new
    // collector follows both files (the old one from its committed position, the new one
    // from its end) and applies the threshold.
    let b = Nginx::start(&dir, "b.test");
    b.request("203.0.113.77", "GET", "/", "Mozilla/5.0");
    let extra2 = extra
        .replace("http_wp_login_posts = 5", "http_user_enum_requests = 2")
        .replace("/logs/*.log\"]", "/logs/*.log\", \"/srv/none/*.log\"]");
    std::fs::write(&config, format!("{}{extra2}", base_config(&d.state))).unwrap();
    let out = d.cli(&["reload"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in 1..=2 {
        b.request(
            "203.0.113.77",
            "GET",
            &format!("/?author={n}"),
            "Mozilla/5.0",
        );
    }
    wait_until(20, "wp_user_enumeration from the new log", || {
        has(&active(&d), "wp_user_enumeration", "203.0.113.77").then_some(())
    });
    let w = watcher(&d);
    assert!(
        w["detail"].as_str().unwrap_or("").contains("b.test.log"),
        "{w}"
    );
}
