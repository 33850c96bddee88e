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
        let (nonce, bits) = self.c.issue(ip).unwrap();
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
        assert!(!r.c.divert(ip("192.0.2.1"), check));
    }
    let mut s = r.c.settings();
    s.scanner_challenge = true;
    r.c.set_settings(s);
    assert!(r.c.divert(ip("192.0.2.1"), "http_scanner_profile"));
}

#[test]
fn unsolved_routes_escalate_after_thirty_minutes_and_leave_the_map() {
    let r = Rig::new("escalate");
    let a = ip("192.0.2.10");
    assert!(r.c.divert(a, "wp_login_bruteforce"));
    r.c.tick();
    assert_eq!(r.map(), vec![a]);
    assert_eq!(r.c.pending_count(), 1);
    // A second route does not renew the deadline.
    r.clock.advance_secs(20 * 60);
    assert!(r.c.divert(a, "xmlrpc_abuse"));
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
    assert!(r.c.divert(a, "http_claimed_bot_unverified"));
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
fn a_solved_challenge_ends_the_route_and_allows_for_four_hours() {
    let r = Rig::new("solve");
    let a = ip("203.0.113.5");
    assert!(r.c.divert(a, "local_threat_score"));
    r.c.tick();
    let (cookie, max_age) = r.solve(a).unwrap();
    assert_eq!(max_age, 4 * 3600);
    assert!(r.c.cookie_ok(a, &cookie));
    assert!(!r.c.cookie_ok(ip("203.0.113.6"), &cookie));
    r.c.tick();
    assert!(r.map().is_empty());
    assert_eq!(r.c.stats()["recent"][0]["outcome"], "solved");
    let ex = SolvedExemption(r.c.clone());
    use crate::threat::Exemption;
    assert!(ex.exempt(a).unwrap().contains("solved"));
    r.clock.advance_secs(31 * 60);
    r.c.tick();
    assert!(
        r.escalated.lock().is_empty(),
        "a solved route never escalates"
    );
    r.clock.advance_secs(4 * 3600);
    assert!(ex.exempt(a).is_none());
    assert!(!r.c.cookie_ok(a, &cookie));
}

#[test]
fn nonces_are_single_use_bound_and_expire() {
    let r = Rig::new("nonce");
    let a = ip("192.0.2.20");
    let (nonce, bits) = r.c.issue(a).unwrap();
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
    let (nonce, bits) = r.c.issue(a).unwrap();
    let counter = pow::solve(&nonce, bits).to_string();
    let p = pow::Proof { nonce, counter };
    assert!(r.c.verify(a, &p).is_ok());
    assert_eq!(
        r.c.verify(a, &p),
        Err(VerifyError::UnknownNonce),
        "single use"
    );
    let (nonce, bits) = r.c.issue(a).unwrap();
    let counter = pow::solve(&nonce, bits).to_string();
    r.clock.advance_secs(NONCE_LIFETIME_SECS as u64);
    assert_eq!(
        r.c.verify(a, &pow::Proof { nonce, counter }),
        Err(VerifyError::Expired)
    );
    // A wrong counter: find one that fails.
    let (nonce, bits) = r.c.issue(a).unwrap();
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
    let first = r.c.issue(a).unwrap().0;
    for _ in 0..MAX_NONCES_PER_CLIENT {
        r.c.issue(a).unwrap();
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
        .issue(ip(&format!("2001:db8:0:{:x}::1", n / 8)))
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
            r.c.issue(ip(&format!("2001:db8:ffff:1::{i:x}"))).is_some(),
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
        assert!(r
            .c
            .divert(ip(&format!("192.0.2.{}", i + 1)), "xmlrpc_abuse"));
    }
    assert!(
        !r.c.divert(ip("192.0.2.100"), "xmlrpc_abuse"),
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
    assert!(r.c.allowed_until(a).is_some());
    assert!(r.c.allowed_until(b).is_none());
    r.clock.advance_secs(30 * 60);
    r.c.tick();
    assert_eq!(r.escalated.lock().len(), 15);
    r.restart();
    assert_eq!(r.c.stats()["escalated"], 15);
}
