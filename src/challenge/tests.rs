//! The routing state machine with an injected clock: route, solve, escalate, expire,
//! restart, bounds.

use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;

use super::*;
use crate::clock::ManualClock;

struct Rig {
    c: Arc<Challenge>,
    clock: Arc<ManualClock>,
    store: Store,
    dir: std::path::PathBuf,
    escalated: Arc<Mutex<Vec<(IpAddr, String)>>>,
}

fn settings(dir: &Path) -> Settings {
    Settings {
        cfg: ChallengeConfig {
            enabled: true,
            difficulty: 8,
            map_dir: dir.join("maps"),
            max_pending: 16,
            ..ChallengeConfig::default()
        },
        scanner_challenge: false,
    }
}

impl Rig {
    fn new(tag: &str) -> Rig {
        let dir = std::env::temp_dir().join(format!("svc-challenge-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let clock = ManualClock::at_epoch_2026();
        let secret = load_secret(&dir).unwrap();
        let mut r = Rig {
            c: Challenge::new(clock.clone(), store.clone(), secret, settings(&dir)),
            clock,
            store,
            dir,
            escalated: Arc::new(Mutex::new(Vec::new())),
        };
        r.hook();
        r
    }

    fn hook(&mut self) {
        let e = self.escalated.clone();
        self.c.set_escalate(Arc::new(move |ip, check: &str| {
            e.lock().push((ip, check.to_string()))
        }));
    }

    fn restart(&mut self) {
        self.c.shutdown();
        let secret = load_secret(&self.dir).unwrap();
        self.c = Challenge::new(
            self.clock.clone(),
            self.store.clone(),
            secret,
            settings(&self.dir),
        );
        self.hook();
    }

    fn map(&self) -> Vec<IpAddr> {
        let text = std::fs::read_to_string(self.dir.join("maps/nginx.map")).unwrap_or_default();
        webserver::parse_map(&text)
    }

    fn solve(&self, ip: IpAddr) -> Result<(String, i64), VerifyError> {
        let (nonce, bits) = self.c.issue(ip, None).unwrap();
        let counter = pow::solve(&nonce, bits).to_string();
        self.c.verify(ip, &pow::Proof { nonce, counter })
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn routed_checks_and_the_scanner_setting() {
    let r = Rig::new("checks");
    for check in [
        "wp_login_bruteforce",
        "xmlrpc_abuse",
        "wp_user_enumeration",
        "ip_reputation",
        "local_threat_score",
        "http_claimed_bot_unverified",
    ] {
        assert!(r.c.routes(check), "{check}");
    }
    for check in [
        "ssh_bruteforce",
        "modsec_block_escalation",
        "mail_auth_bruteforce",
        "http_scanner_profile",
    ] {
        assert!(!r.c.routes(check), "{check}");
        assert_eq!(r.c.divert(ip("192.0.2.1"), check), Diverted::No);
    }
    let mut s = r.c.settings();
    s.scanner_challenge = true;
    r.c.set_settings(s);
    assert_eq!(
        r.c.divert(ip("192.0.2.1"), "http_scanner_profile"),
        Diverted::Taken
    );
}

#[test]
fn unsolved_routes_escalate_after_thirty_minutes_and_leave_the_map() {
    let r = Rig::new("escalate");
    let a = ip("192.0.2.10");
    assert_eq!(r.c.divert(a, "wp_login_bruteforce"), Diverted::Taken);
    r.c.tick();
    assert_eq!(r.map(), vec![a]);
    assert_eq!(r.c.pending_count(), 1);
    // A second route does not renew the deadline.
    r.clock.advance_secs(20 * 60);
    assert_eq!(r.c.divert(a, "xmlrpc_abuse"), Diverted::Taken);
    r.c.tick();
    assert!(r.escalated.lock().is_empty());
    r.clock.advance_secs(10 * 60 - 1);
    r.c.tick();
    assert!(r.escalated.lock().is_empty(), "not before 30 minutes");
    r.clock.advance_secs(1);
    r.c.tick();
    assert_eq!(
        *r.escalated.lock(),
        vec![(a, "wp_login_bruteforce".to_string())]
    );
    assert!(r.map().is_empty());
    let s = r.c.stats();
    assert_eq!(s["pending"], 0);
    assert_eq!(s["escalated"], 1);
    assert_eq!(s["routed_by_check"]["wp_login_bruteforce"], 1);
    assert_eq!(s["recent"][0]["outcome"], "escalated");
    assert_eq!(s["recent"][0]["ip"], "192.0.2.10");
    assert_eq!(s["recent"][0]["at"], "2026-01-01T00:00:00.000000Z");
}

#[test]
fn claimed_bot_routes_expire_instead() {
    let r = Rig::new("expire");
    let a = ip("198.51.100.7");
    assert_eq!(
        r.c.divert(a, "http_claimed_bot_unverified"),
        Diverted::Taken
    );
    r.clock.advance_secs(30 * 60);
    r.c.tick();
    assert!(r.escalated.lock().is_empty());
    let s = r.c.stats();
    assert_eq!(
        (s["pending"].as_u64(), s["expired"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(s["recent"][0]["outcome"], "expired");
}

#[test]
fn a_solved_challenge_ends_the_route_and_allows_only_its_checks_for_four_hours() {
    let r = Rig::new("solve");
    let a = ip("203.0.113.5");
    assert_eq!(r.c.divert(a, "local_threat_score"), Diverted::Taken);
    // A second routed check while pending joins the route.
    assert_eq!(r.c.divert(a, "wp_user_enumeration"), Diverted::Taken);
    r.c.tick();
    let (cookie, max_age) = r.solve(a).unwrap();
    assert_eq!(max_age, 4 * 3600);
    assert!(r.c.cookie_ok(a, &cookie));
    assert!(!r.c.cookie_ok(ip("203.0.113.6"), &cookie));
    r.c.tick();
    assert!(r.map().is_empty());
    assert_eq!(r.c.stats()["recent"][0]["outcome"], "solved");
    assert_eq!(r.c.stats()["allowed_routes"], 2);
    // The checks that routed it do not route (nor block) it again ...
    for check in ["local_threat_score", "wp_user_enumeration"] {
        let d = r.c.divert(a, check);
        assert!(
            matches!(&d, Diverted::Solved(why) if why.contains(check)),
            "{d:?}"
        );
    }
    // ... any other check routes it as usual, and a non-routed check is not diverted.
    assert_eq!(
        r.c.divert(ip("203.0.113.7"), "xmlrpc_abuse"),
        Diverted::Taken
    );
    assert_eq!(r.c.divert(a, "ssh_bruteforce"), Diverted::No);
    assert_eq!(
        r.c.divert(a, "xmlrpc_abuse"),
        Diverted::Taken,
        "routed again"
    );
    r.clock.advance_secs(31 * 60);
    r.c.tick();
    assert_eq!(
        *r.escalated.lock(),
        vec![
            (a, "xmlrpc_abuse".to_string()),
            (ip("203.0.113.7"), "xmlrpc_abuse".to_string())
        ],
        "only the new routes escalate"
    );
    r.clock.advance_secs(4 * 3600);
    assert!(r.c.allowed_until(a, "local_threat_score").is_none());
    assert_eq!(r.c.divert(a, "local_threat_score"), Diverted::Taken);
    assert!(!r.c.cookie_ok(a, &cookie));
}

#[test]
fn a_proof_without_a_route_allows_nothing() {
    let r = Rig::new("noroute");
    let a = ip("203.0.113.8");
    let (cookie, _) = r.solve(a).unwrap();
    assert!(r.c.cookie_ok(a, &cookie), "the page still says verified");
    assert_eq!(r.c.stats()["allowed_routes"], 0);
    assert_eq!(r.c.divert(a, "wp_login_bruteforce"), Diverted::Taken);
}

/// A state document of a version before decision 280 (address-only allows) loads: its
/// routes are kept, its allows (no check named) allow nothing; the document written now
/// still has `allows` (empty) for an older binary.
#[test]
fn an_older_state_document_loads_and_its_allows_name_no_check() {
    let mut r = Rig::new("compat");
    let now = crate::clock::Clock::now(&*r.clock).as_microsecond();
    let old = format!(
        r#"{{"pending":[["192.0.2.40",{{"check":"xmlrpc_abuse","at":{now},"deadline":{},"expire_only":false}}]],"allows":[["192.0.2.41",{}]],"escalated":3}}"#,
        now + 1_800_000_000,
        now + 3_600_000_000
    );
    r.store
        .write(move |c| crate::store::kv::put(c, STATE_KEY, Some(&old)))
        .unwrap();
    r.restart();
    assert_eq!(r.c.pending_addresses(), vec![ip("192.0.2.40")]);
    assert_eq!(r.c.stats()["escalated"], 3);
    assert_eq!(r.c.stats()["allowed_routes"], 0);
    for check in ROUTED_CHECKS {
        assert!(r.c.allowed_until(ip("192.0.2.41"), check).is_none());
    }
    assert_eq!(
        r.c.divert(ip("192.0.2.41"), "wp_login_bruteforce"),
        Diverted::Taken
    );
    // Solve the old route; the new document keeps the pair and an empty `allows`.
    r.solve(ip("192.0.2.40")).unwrap();
    r.c.tick();
    let text = r
        .store
        .read(|c| crate::store::kv::get(c, STATE_KEY))
        .unwrap()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["allows"], serde_json::json!([]), "{v}");
    assert_eq!(v["allowed_routes"][0][1], "xmlrpc_abuse", "{v}");
    r.restart();
    assert!(r
        .c
        .allowed_until(ip("192.0.2.40"), "xmlrpc_abuse")
        .is_some());
}

/// Issue 23 item 8: nonces issued through a trusted proxy are bounded per proxy (half the
/// table, the oldest gives way) as well as per forwarded client, so a proxy's flood
/// neither fills the table nor refuses its own next visitor.
#[test]
fn nonces_through_a_proxy_are_bounded_per_proxy() {
    let r = Rig::new("proxy");
    let proxy = Some(ip("127.0.0.1"));
    let first = r.c.issue(ip("192.0.2.1"), proxy).unwrap().0;
    for i in 0..MAX_NONCES as u32 {
        let client = ip(&format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255));
        assert!(r.c.issue(client, proxy).is_some(), "request {i}");
    }
    assert_eq!(
        r.c.counters.nonces_replaced_proxy.load(Ordering::Relaxed),
        (MAX_NONCES + 1 - MAX_NONCES_PER_PROXY) as u64
    );
    assert_eq!(r.c.counters.nonces_refused.load(Ordering::Relaxed), 0);
    // The proxy's oldest went; a direct client and a forwarded one still get nonces.
    let p = pow::Proof {
        counter: pow::solve(&first, 8).to_string(),
        nonce: first,
    };
    assert_eq!(
        r.c.verify(ip("192.0.2.1"), &p),
        Err(VerifyError::UnknownNonce)
    );
    assert!(r.c.issue(ip("198.51.100.1"), None).is_some());
    let (nonce, bits) = r.c.issue(ip("192.0.2.2"), proxy).unwrap();
    let counter = pow::solve(&nonce, bits).to_string();
    assert!(r
        .c
        .verify(ip("192.0.2.2"), &pow::Proof { nonce, counter })
        .is_ok());
    // The per-client bound still applies behind the proxy.
    let before = r.c.counters.nonces_replaced.load(Ordering::Relaxed);
    for _ in 0..=MAX_NONCES_PER_CLIENT {
        r.c.issue(ip("192.0.2.3"), proxy).unwrap();
    }
    assert_eq!(
        r.c.counters.nonces_replaced.load(Ordering::Relaxed),
        before + 1
    );
}

#[test]
fn nonces_are_single_use_bound_and_expire() {
    let r = Rig::new("nonce");
    let a = ip("192.0.2.20");
    let (nonce, bits) = r.c.issue(a, None).unwrap();
    let counter = pow::solve(&nonce, bits).to_string();
    let p = pow::Proof {
        nonce: nonce.clone(),
        counter,
    };
    assert_eq!(
        r.c.verify(ip("192.0.2.21"), &p),
        Err(VerifyError::OtherAddress)
    );
    // Consumed by the failed attempt.
    assert_eq!(r.c.verify(a, &p), Err(VerifyError::UnknownNonce));
    let (nonce, bits) = r.c.issue(a, None).unwrap();
    let counter = pow::solve(&nonce, bits).to_string();
    let p = pow::Proof { nonce, counter };
    assert!(r.c.verify(a, &p).is_ok());
    assert_eq!(
        r.c.verify(a, &p),
        Err(VerifyError::UnknownNonce),
        "single use"
    );
    let (nonce, bits) = r.c.issue(a, None).unwrap();
    let counter = pow::solve(&nonce, bits).to_string();
    r.clock.advance_secs(NONCE_LIFETIME_SECS as u64);
    assert_eq!(
        r.c.verify(a, &pow::Proof { nonce, counter }),
        Err(VerifyError::Expired)
    );
    // A wrong counter: find one that fails.
    let (nonce, bits) = r.c.issue(a, None).unwrap();
    let bad = (0u64..)
        .find(|c| !pow::proof_ok(&nonce, &c.to_string(), bits))
        .unwrap();
    assert_eq!(
        r.c.verify(
            a,
            &pow::Proof {
                nonce,
                counter: bad.to_string()
            }
        ),
        Err(VerifyError::WrongProof)
    );
    assert_eq!(r.c.counters.proofs_refused.load(Ordering::Relaxed), 5);
    // One client holds at most 8: a new nonce replaces its oldest.
    let first = r.c.issue(a, None).unwrap().0;
    for _ in 0..MAX_NONCES_PER_CLIENT {
        r.c.issue(a, None).unwrap();
    }
    assert_eq!(r.c.counters.nonces_replaced.load(Ordering::Relaxed), 1);
    let c = pow::solve(&first, 8).to_string();
    assert_eq!(
        r.c.verify(
            a,
            &pow::Proof {
                nonce: first,
                counter: c
            }
        ),
        Err(VerifyError::UnknownNonce)
    );
    // The table is bounded and refusals counted (clients by IPv6 /64).
    let mut n = 0u32;
    while r
        .c
        .issue(ip(&format!("2001:db8:0:{:x}::1", n / 8)), None)
        .is_some()
    {
        n += 1;
        assert!(n <= MAX_NONCES as u32 + 1);
    }
    assert!(r.c.counters.nonces_refused.load(Ordering::Relaxed) >= 1);
    // Two addresses of one /64 share its quota.
    let before = r.c.counters.nonces_replaced.load(Ordering::Relaxed);
    r.clock.advance_secs(NONCE_LIFETIME_SECS as u64 + 1);
    for i in 0..=MAX_NONCES_PER_CLIENT {
        assert!(
            r.c.issue(ip(&format!("2001:db8:ffff:1::{i:x}")), None)
                .is_some(),
            "expired nonces make room"
        );
    }
    assert_eq!(
        r.c.counters.nonces_replaced.load(Ordering::Relaxed),
        before + 1
    );
}

#[test]
fn pending_is_bounded_and_survives_a_restart() {
    let mut r = Rig::new("restart");
    for i in 0..16 {
        assert_eq!(
            r.c.divert(ip(&format!("192.0.2.{}", i + 1)), "xmlrpc_abuse"),
            Diverted::Taken
        );
    }
    assert_eq!(
        r.c.divert(ip("192.0.2.100"), "xmlrpc_abuse"),
        Diverted::No,
        "full: block instead"
    );
    assert_eq!(r.c.counters.refused_full.load(Ordering::Relaxed), 1);
    let b = ip("198.51.100.1");
    r.c.tick();
    r.restart();
    assert_eq!(r.c.pending_count(), 16);
    // Solve one, restart again: the allow is kept.
    let a = ip("192.0.2.1");
    r.solve(a).unwrap();
    r.c.tick();
    r.restart();
    assert_eq!(r.c.pending_count(), 15);
    assert!(r.c.allowed_until(a, "xmlrpc_abuse").is_some());
    assert!(r.c.allowed_until(b, "xmlrpc_abuse").is_none());
    r.clock.advance_secs(30 * 60);
    r.c.tick();
    assert_eq!(r.escalated.lock().len(), 15);
    r.restart();
    assert_eq!(r.c.stats()["escalated"], 15);
}

/// Issue 23 item 8: `X-Forwarded-For` names the client only from a trusted peer, and then
/// its last address of the last header line (the one the proxy wrote).
#[test]
fn forwarded_addresses_count_only_from_trusted_peers() {
    use super::listener::client_of;
    let req = |peer: &str, xff: &[&str]| crate::http::Request {
        method: "GET".into(),
        path: "/".into(),
        query: String::new(),
        headers: xff
            .iter()
            .map(|v| ("x-forwarded-for".to_string(), v.to_string()))
            .collect(),
        body: Vec::new(),
        remote: std::net::SocketAddr::new(ip(peer), 40000),
        wants_close: false,
    };
    let nobody = |_: IpAddr| false;
    let lo = |p: IpAddr| p.is_loopback();
    // Default (nobody trusted): loopback's header is ignored and flagged.
    let c = client_of(&req("127.0.0.1", &["192.0.2.50"]), nobody);
    assert_eq!(
        (c.ip, c.proxy, c.untrusted_forward),
        (ip("127.0.0.1"), None, true)
    );
    let c = client_of(&req("198.51.100.4", &[]), nobody);
    assert_eq!((c.ip, c.untrusted_forward), (ip("198.51.100.4"), false));
    // Trusted: the last address of the last line.
    let c = client_of(
        &req(
            "127.0.0.1",
            &["10.0.0.1, 192.0.2.9", "203.0.113.1, 192.0.2.50"],
        ),
        lo,
    );
    assert_eq!(
        (c.ip, c.proxy, c.untrusted_forward),
        (ip("192.0.2.50"), Some(ip("127.0.0.1")), false)
    );
    let c = client_of(&req("::ffff:127.0.0.1", &["::ffff:192.0.2.7"]), lo);
    assert_eq!(c.ip, ip("192.0.2.7"), "canonical on both sides");
    // Unreadable: the peer.
    for bad in ["", "x", "192.0.2.1, ", "192.0.2.1:80", "192.0.2.1\u{0}"] {
        let c = client_of(&req("127.0.0.1", &[bad]), lo);
        assert_eq!((c.ip, c.proxy), (ip("127.0.0.1"), None), "{bad:?}");
    }
}
