use super::super::parse::parse_line;
use super::*;
use crate::clock::ManualClock;
use parking_lot::Mutex;
use std::collections::HashMap;

/// A test oracle: answers per address from a table, counts its calls.
#[derive(Default)]
struct TableOracle {
    answers: Mutex<HashMap<IpAddr, BotCheck>>,
    calls: Mutex<u64>,
}

impl BotOracle for TableOracle {
    fn check(&self, ip: IpAddr, user_agent: &str) -> BotCheck {
        *self.calls.lock() += 1;
        if !user_agent.contains("Googlebot") {
            return BotCheck::NoClaim;
        }
        self.answers
            .lock()
            .get(&ip)
            .cloned()
            .unwrap_or(BotCheck::Unverified {
                name: "googlebot".into(),
            })
    }
}

struct Rig {
    clock: Arc<ManualClock>,
    oracle: Arc<TableOracle>,
    det: AccessDetector,
    out: Vec<Finding>,
}

impl Rig {
    fn new(th: AccessThresholds) -> Rig {
        let clock = ManualClock::at_epoch_2026();
        let oracle = Arc::new(TableOracle::default());
        let det = AccessDetector::new(th, clock.clone(), oracle.clone());
        Rig {
            clock,
            oracle,
            det,
            out: Vec::new(),
        }
    }

    fn req(&mut self, ip: &str, method: &str, target: &str, status: u16, ua: &str) {
        let l = format!(
            "{ip} - - [26/Nov/2026:21:00:01 +0000] \"{method} {target} HTTP/1.1\" {status} 512 \"-\" \"{ua}\""
        );
        let out = &mut self.out;
        assert!(self.det.process_line(&l, &mut |f| out.push(f)), "{l}");
    }

    fn checks(&self) -> Vec<&str> {
        self.out.iter().map(|f| f.check.as_str()).collect()
    }
}

const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0";
const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

#[test]
fn wp_login_posts_reach_the_threshold_once_per_window() {
    let mut r = Rig::new(AccessThresholds::default());
    for _ in 0..9 {
        r.req("192.0.2.7", "POST", "/wp-login.php", 200, FIREFOX);
        r.req("192.0.2.7", "GET", "/wp-login.php", 200, FIREFOX);
    }
    assert!(r.out.is_empty());
    r.req("192.0.2.7", "POST", "/wp-login.php", 200, FIREFOX);
    assert_eq!(r.checks(), ["wp_login_bruteforce"]);
    let f = &r.out[0];
    assert_eq!(f.ip.unwrap().to_string(), "192.0.2.7");
    assert_eq!(f.severity, Severity::High);
    assert_eq!(f.message, "WordPress login brute force from 192.0.2.7");
    assert!(
        f.details
            .starts_with("10 POSTs to wp-login.php from 192.0.2.7 within 300 s (threshold 10)"),
        "{}",
        f.details
    );
    for _ in 0..50 {
        r.req("192.0.2.7", "POST", "/wp-login.php", 200, FIREFOX);
    }
    assert_eq!(r.out.len(), 1, "once per window");
    // Another address is counted apart.
    for _ in 0..9 {
        r.req("192.0.2.8", "POST", "/wp-login.php", 200, FIREFOX);
    }
    assert_eq!(r.out.len(), 1);
    // After the window, a new window counts from zero.
    r.clock.advance_secs(301);
    for _ in 0..10 {
        r.req("192.0.2.7", "POST", "/wp-login.php", 200, FIREFOX);
    }
    assert_eq!(r.checks(), ["wp_login_bruteforce", "wp_login_bruteforce"]);
}

#[test]
fn xmlrpc_enumeration_and_scanner_checks() {
    let mut r = Rig::new(AccessThresholds::default());
    for _ in 0..10 {
        r.req(
            "198.51.100.3",
            "POST",
            "/xmlrpc.php",
            200,
            "Python-urllib/3.11",
        );
    }
    for n in 1..=5 {
        r.req(
            "198.51.100.4",
            "GET",
            &format!("/?author={n}"),
            301,
            FIREFOX,
        );
    }
    for p in [
        "/.env",
        "/.git/config",
        "/phpmyadmin/",
        "/wp-config.php.bak",
        "/vendor/phpunit/x",
    ] {
        for _ in 0..2 {
            r.req("203.0.113.5", "GET", p, 404, FIREFOX);
        }
    }
    for _ in 0..3 {
        r.req(
            "203.0.113.6",
            "GET",
            "/",
            200,
            "sqlmap/1.7.2#stable (https://sqlmap.org)",
        );
    }
    assert_eq!(
        r.checks(),
        [
            "xmlrpc_abuse",
            "wp_user_enumeration",
            "http_scanner_profile",
            "http_scanner_profile"
        ]
    );
    let scan = &r.out[2];
    assert_eq!(scan.ip.unwrap().to_string(), "203.0.113.5");
    assert!(
        scan.details
            .contains("probed: /.env, /.git/config, /phpmyadmin/"),
        "{}",
        scan.details
    );
    assert!(r.out[3].details.contains("scanner user agent"));
    // 404s on ordinary paths are not a scanner profile.
    for _ in 0..50 {
        r.req("203.0.113.7", "GET", "/favicon.ico", 404, FIREFOX);
    }
    assert_eq!(r.out.len(), 4);
    assert_eq!(r.det.stats().addresses_tracked, 4);
}

#[test]
fn crawler_verdicts_exempt_flag_or_count_and_the_oracle_is_cached() {
    let th = AccessThresholds {
        claimed_bot_requests: 20,
        ..AccessThresholds::default()
    };
    let mut r = Rig::new(th);
    let verified: IpAddr = "192.0.2.66".parse().unwrap();
    let spoofed: IpAddr = "198.51.100.66".parse().unwrap();
    {
        let mut a = r.oracle.answers.lock();
        a.insert(
            verified,
            BotCheck::Verified {
                name: "googlebot".into(),
            },
        );
        a.insert(
            spoofed,
            BotCheck::Spoofed {
                name: "googlebot".into(),
            },
        );
    }
    // A verified crawler probing paths is exempt from every check.
    for _ in 0..30 {
        r.req("192.0.2.66", "GET", "/.env", 404, GOOGLEBOT);
        r.req("192.0.2.66", "POST", "/wp-login.php", 200, GOOGLEBOT);
    }
    assert!(r.out.is_empty());
    assert_eq!(
        *r.oracle.calls.lock(),
        1,
        "one call per address and user agent"
    );
    assert_eq!(r.det.stats().verified_exempt, 60);
    // A spoofer: one http_ua_spoof, and its requests still count for the other checks.
    for _ in 0..10 {
        r.req("198.51.100.66", "POST", "/wp-login.php", 200, GOOGLEBOT);
    }
    assert_eq!(r.checks(), ["http_ua_spoof", "wp_login_bruteforce"]);
    assert_eq!(r.out[0].ip, Some(spoofed));
    assert_eq!(r.out[0].severity, Severity::High);
    // Unverified claims: counted; at the threshold, http_claimed_bot_unverified.
    for _ in 0..19 {
        r.req("203.0.113.66", "GET", "/page", 200, GOOGLEBOT);
    }
    assert_eq!(r.out.len(), 2);
    r.req("203.0.113.66", "GET", "/page", 200, GOOGLEBOT);
    assert_eq!(r.out[2].check, "http_claimed_bot_unverified");
    assert!(
        r.out[2].details.contains("verification unverified"),
        "{}",
        r.out[2].details
    );
    // Provisional answers are asked again after BOT_PROVISIONAL_SECS, final ones are not.
    let calls = *r.oracle.calls.lock();
    r.clock.advance_secs(BOT_PROVISIONAL_SECS as u64 + 1);
    r.req("203.0.113.66", "GET", "/page", 200, GOOGLEBOT);
    r.req("192.0.2.66", "GET", "/page", 200, GOOGLEBOT);
    assert_eq!(*r.oracle.calls.lock(), calls + 1);
    // Ordinary browsers never reach the oracle.
    r.req("203.0.113.99", "GET", "/", 200, FIREFOX);
    assert_eq!(*r.oracle.calls.lock(), calls + 1);
}

#[test]
fn no_verification_means_no_exemption_and_no_bot_findings() {
    let clock = ManualClock::at_epoch_2026();
    let mut det = AccessDetector::new(
        AccessThresholds::default(),
        clock,
        Arc::new(crate::crawler::NoVerification),
    );
    let mut out = Vec::new();
    for _ in 0..400 {
        let l = format!("192.0.2.5 - - [26/Nov/2026:21:00:01 +0000] \"POST /xmlrpc.php HTTP/1.1\" 200 1 \"-\" \"{GOOGLEBOT}\"");
        det.process_line(&l, &mut |f| out.push(f));
    }
    let checks: Vec<_> = out.iter().map(|f| f.check.as_str()).collect();
    assert_eq!(checks, ["xmlrpc_abuse"]);
}

#[test]
fn memory_is_capped_and_evictions_counted() {
    let th = AccessThresholds {
        max_tracked_addresses: 16,
        ..AccessThresholds::default()
    };
    let mut r = Rig::new(th);
    for i in 0..100 {
        r.req(
            &format!("192.0.2.{i}"),
            "POST",
            "/wp-login.php",
            200,
            FIREFOX,
        );
    }
    let s = r.det.stats();
    assert_eq!(s.addresses_tracked, 16);
    assert_eq!(s.addresses_evicted, 84);
    // Expired state is purged by maintain.
    r.clock.advance_secs(3600);
    r.det.maintain();
    assert_eq!(r.det.stats().addresses_tracked, 0);
}

#[test]
fn thresholds_apply_live_and_garbage_is_counted() {
    let mut r = Rig::new(AccessThresholds::default());
    let shared = r.det.shared_thresholds();
    shared.set(AccessThresholds {
        wp_login_posts: 2,
        ..AccessThresholds::default()
    });
    r.req("192.0.2.9", "POST", "/wp-login.php", 200, FIREFOX);
    r.req("192.0.2.9", "POST", "/wp-login.php", 200, FIREFOX);
    assert_eq!(r.checks(), ["wp_login_bruteforce"]);
    assert!(!r.det.process_line("not an access log line", &mut |_| {}));
    assert!(!r.det.process_line("\u{0}\u{1}\"\\[", &mut |_| {}));
    assert_eq!(r.det.stats().unparsed, 2);
}

#[test]
fn hostile_text_in_findings_is_cut_and_cleaned() {
    let mut r = Rig::new(AccessThresholds {
        user_enum_requests: 1,
        ..AccessThresholds::default()
    });
    let ua = format!("x\u{1b}[31m{}", "A".repeat(5000));
    r.req("192.0.2.1", "GET", "/?author=1", 200, &ua);
    let d = &r.out[0].details;
    assert!(!d.contains('\u{1b}'));
    assert!(d.len() < 600, "{}", d.len());
}

/// Lines captured from the real Debian nginx and apache2 on loopback
/// (tests/fixtures/accesslog/capture.sh): every line parses, and each attack in them is
/// reported once, from its address.
#[test]
fn real_nginx_and_apache_logs() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/accesslog/");
    let all = [
        "http_scanner_profile 203.0.113.5",
        "http_scanner_profile 203.0.113.6",
        "http_ua_spoof 192.0.2.66",
        "wp_login_bruteforce 192.0.2.10",
        "wp_user_enumeration 198.51.100.7",
        "xmlrpc_abuse 198.51.100.7",
    ];
    for (file, vhost, expect) in [
        ("nginx-combined.log", false, &all[..]),
        ("apache-combined.log", false, &all[..]),
        ("apache-vhost_combined.log", true, &all[..]),
        // No user agent in `common`: neither the scanner agent nor the crawler claim.
        (
            "apache-common.log",
            false,
            &[
                "http_scanner_profile 203.0.113.5",
                "wp_login_bruteforce 192.0.2.10",
                "wp_user_enumeration 198.51.100.7",
                "xmlrpc_abuse 198.51.100.7",
            ][..],
        ),
    ] {
        let text = std::fs::read_to_string(format!("{dir}{file}")).unwrap();
        let mut r = Rig::new(AccessThresholds::default());
        r.oracle.answers.lock().insert(
            "192.0.2.66".parse().unwrap(),
            BotCheck::Spoofed {
                name: "googlebot".into(),
            },
        );
        let mut lines = 0;
        for l in text.lines() {
            let parsed = parse_line(l).unwrap_or_else(|e| panic!("{file}: {e}: {l}"));
            assert_eq!(parsed.vhost.is_some(), vhost, "{l}");
            let out = &mut r.out;
            r.det.process_line(l, &mut |f| out.push(f));
            lines += 1;
        }
        assert!(lines >= 50, "{file}");
        let mut got: Vec<String> = r
            .out
            .iter()
            .map(|f| format!("{} {}", f.check, f.ip.unwrap()))
            .collect();
        got.sort();
        assert_eq!(got, expect, "{file}");
    }
}
