//! Issue 15 end to end: the access-log collector asks the crawler verifier, which asks a
//! DNS server on loopback. A crawler that forward-confirms is exempt from the scanner
//! check; one whose PTR claims the crawler's domain but whose forward lookup does not
//! confirm is reported as `http_ua_spoof` (and still counts for the scanner check); an
//! ordinary client probing paths is `http_scanner_profile`.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use crate::common::dnsserver::DnsServer;
use crate::common::*;

const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

fn line(ip: &str, path: &str, status: u16, ua: &str) -> String {
    format!(
        "{ip} - - [26/Nov/2026:10:00:00 +0000] \"GET {path} HTTP/1.1\" {status} 153 \"-\" \"{ua}\"\n"
    )
}

fn append(log: &Path, lines: &[String]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    f.write_all(lines.concat().as_bytes()).unwrap();
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

fn metric(d: &Daemon, name: &str) -> u64 {
    let m = d.get("/metrics", METRICS).expect(200).text();
    m.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn access_log_requests_are_judged_by_forward_confirmed_reverse_dns() {
    let dns = DnsServer::start();
    let real: IpAddr = "198.51.100.10".parse().unwrap();
    let fake: IpAddr = "203.0.113.20".parse().unwrap();
    dns.ptr(real, "crawl-198-51-100-10.googlebot.com");
    dns.a(
        "crawl-198-51-100-10.googlebot.com",
        Ipv4Addr::new(198, 51, 100, 10),
    );
    // Spoofed: the PTR names Google's domain, the forward lookup does not confirm it.
    dns.ptr(fake, "crawl-1.googlebot.com");
    dns.a("crawl-1.googlebot.com", Ipv4Addr::new(192, 0, 2, 1));

    let dir = temp_dir("webtraffic");
    let log = dir.join("access.log");
    std::fs::write(&log, "").unwrap();
    let extra = format!(
        "[logs]\nauth = []\naccess = [{log:?}]\n[files]\nwatch = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[thresholds]\nhttp_scanner_probe_404s = 3\n[reputation]\nbot_verify_enabled = true\ndns_server = \"{}\"\n[reputation.bot_ranges]\nenabled = false\n",
        dns.addr(),
        log = log.display().to_string()
    );
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(&config, format!("{}{extra}", base_config(&state))).unwrap();
    let d = Daemon::start_with(dir.clone(), config, state, &[]);
    let s = d.get("/api/v1/status", READ).expect(200).json();
    assert!(
        s["queues"]["bot_verification.requests"].is_object(),
        "{}",
        s["queues"]
    );

    // The first request of each claimed crawler starts its verification.
    append(
        &log,
        &[
            line("198.51.100.10", "/", 200, "Googlebot/2.1 (first visit)"),
            line("203.0.113.20", "/", 200, "Googlebot/2.1 (first visit)"),
        ],
    );
    wait_until(30, "both verifications", || {
        let verified = metric(&d, "svc_bot_verifications_total{result=\"verified\"}");
        let negative = metric(&d, "svc_bot_verifications_total{result=\"negative\"}");
        (verified >= 1 && negative >= 1).then_some(())
    });
    assert!(
        dns.asked("crawl-1.googlebot.com") >= 1,
        "forward lookup made"
    );

    // Then each probes paths (a user agent not seen before: its answer is not cached by
    // the detector), and so does an ordinary client.
    let mut lines = Vec::new();
    for ip in ["198.51.100.10", "203.0.113.20", "192.0.2.30"] {
        let ua = if ip == "192.0.2.30" {
            "Mozilla/5.0"
        } else {
            GOOGLEBOT
        };
        for p in [
            "/.env",
            "/wp-config.php.bak",
            "/phpMyAdmin/index.php",
            "/.git/config",
        ] {
            lines.push(line(ip, p, 404, ua));
        }
    }
    append(&log, &lines);
    let items = wait_until(30, "the scanner and the spoof", || {
        let items = active(&d);
        (has(&items, "http_scanner_profile", "192.0.2.30")
            && has(&items, "http_ua_spoof", "203.0.113.20"))
        .then_some(items)
    });
    assert!(
        has(&items, "http_scanner_profile", "203.0.113.20"),
        "a spoofing crawler still counts for the other checks"
    );
    // Lines are read in order: the verified crawler's came first and raised nothing.
    assert!(
        !items.iter().any(|f| f["ip"] == "198.51.100.10"),
        "the verified crawler is exempt: {items:?}"
    );
    assert_eq!(
        metric(&d, "svc_bot_verifications_total{result=\"verified\"}"),
        1,
        "the verified result is cached, not looked up again"
    );
}
