use super::*;
use crate::clock::ManualClock;
use std::sync::Arc;

struct Rig {
    clock: Arc<ManualClock>,
    det: AuthDetector,
    out: Vec<Finding>,
}

impl Rig {
    fn new(th: AuthThresholds) -> Rig {
        let clock = ManualClock::at_epoch_2026();
        let det = AuthDetector::new(th, clock.clone());
        Rig {
            clock,
            det,
            out: Vec::new(),
        }
    }

    fn line(&mut self, l: &str) {
        let out = &mut self.out;
        assert!(
            self.det.process_line(l, &mut |f| out.push(f)),
            "not parsed: {l}"
        );
    }

    fn checks(&self) -> Vec<&str> {
        self.out.iter().map(|f| f.check.as_str()).collect()
    }
}

fn failed(ip: &str, port: u16, user: &str) -> String {
    format!("Nov 21 20:14:01 h sshd[1]: Failed password for {user} from {ip} port {port} ssh2")
}

#[test]
fn five_ssh_failures_make_one_finding_per_window() {
    let mut r = Rig::new(AuthThresholds::default());
    for i in 0..4 {
        r.line(&failed("203.0.113.9", 1000 + i, "root"));
    }
    assert!(r.out.is_empty());
    r.line(&failed("203.0.113.9", 2000, "admin"));
    assert_eq!(r.checks(), ["ssh_bruteforce"]);
    let f = &r.out[0];
    assert_eq!(f.severity, Severity::High);
    assert_eq!(f.message, "SSH brute force from 203.0.113.9");
    assert_eq!(f.ip, Some("203.0.113.9".parse().unwrap()));
    assert!(f.details.starts_with("5 failed logins"), "{}", f.details);
    assert!(f.details.contains("root, admin"), "{}", f.details);
    // More failures in the same window: no new finding.
    for i in 0..20 {
        r.line(&failed("203.0.113.9", 3000 + i, "root"));
    }
    assert_eq!(r.out.len(), 1);
    // After the window a new crossing emits again with the same message.
    r.clock.advance_secs(601);
    for i in 0..5 {
        r.line(&failed("203.0.113.9", 4000 + i, "root"));
    }
    assert_eq!(r.out.len(), 2);
    assert_eq!(r.out[1].message, r.out[0].message);
}

#[test]
fn failures_spread_beyond_the_window_do_not_trigger() {
    let mut r = Rig::new(AuthThresholds::default());
    for i in 0..12 {
        r.line(&failed("198.51.100.1", 100 + i, "root"));
        r.clock.advance_secs(200); // 3 per window at most
    }
    assert!(r.out.is_empty());
}

#[test]
fn thresholds_are_honoured() {
    let th = AuthThresholds {
        failures: 2,
        window_secs: 10,
        ..AuthThresholds::default()
    };
    let mut r = Rig::new(th);
    r.line(&failed("192.0.2.1", 1, "a"));
    r.clock.advance_secs(11);
    r.line(&failed("192.0.2.1", 2, "a"));
    assert!(r.out.is_empty());
    r.line(&failed("192.0.2.1", 3, "a"));
    assert_eq!(r.out.len(), 1);
    assert!(r.out[0].details.contains("within 10 s (threshold 2)"));
}

#[test]
fn one_connection_is_counted_by_attempts_not_lines() {
    let mut r = Rig::new(AuthThresholds::default());
    let ip = "203.0.113.20";
    // One invalid-user connection with two password attempts: 2, not 5 lines.
    for l in [
        format!("Nov 21 20:14:01 h sshd[1]: Invalid user x from {ip} port 7"),
        format!("Nov 21 20:14:01 h sshd[1]: Failed none for invalid user x from {ip} port 7 ssh2"),
        format!("Nov 21 20:14:01 h sshd[1]: Failed password for invalid user x from {ip} port 7 ssh2"),
        format!("Nov 21 20:14:01 h sshd[1]: Failed password for invalid user x from {ip} port 7 ssh2"),
        format!("Nov 21 20:14:01 h sshd[1]: Connection closed by invalid user x {ip} port 7 [preauth]"),
        format!("Nov 21 20:14:01 h sshd[1]: pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost={ip}"),
    ] {
        r.line(&l);
    }
    assert_eq!(r.det.stats().failures_counted, 2);
    // Key-only scanners: one per connection.
    for port in 10..13 {
        r.line(&format!("Nov 21 20:14:01 h sshd[1]: Connection closed by authenticating user root {ip} port {port} [preauth]"));
    }
    assert_eq!(r.det.stats().failures_counted, 5);
    assert_eq!(r.checks(), ["ssh_bruteforce"]);
}

#[test]
fn pam_and_dovecot_make_pam_bruteforce_without_double_counting() {
    let mut r = Rig::new(AuthThresholds::default());
    let ip = "2001:db8::66";
    // auth_verbose: both the auth process and the login process report each attempt.
    for _ in 0..2 {
        r.line(&format!("Nov 21 20:14:01 m dovecot: auth: pam(a,{ip},<s>): pam_authenticate() failed: Authentication failure"));
        r.line(&format!("Nov 21 20:14:01 m dovecot: auth: pam(a,{ip},<s>): pam_authenticate() failed: Authentication failure"));
        r.line(&format!("Nov 21 20:14:01 m dovecot: imap-login: Disconnected (auth failed, 2 attempts in 4 secs): user=<a>, method=PLAIN, rip={ip}, lip=::1"));
    }
    assert!(r.out.is_empty(), "4 attempts < 5");
    r.line(&format!("Nov 21 20:14:01 h vsftpd[2]: pam_unix(vsftpd:auth): authentication failure; logname= uid=0 euid=0 tty=ftp ruser= rhost={ip}  user=b"));
    assert_eq!(r.checks(), ["pam_bruteforce"]);
    let f = &r.out[0];
    assert_eq!(f.message, "Authentication brute force from 2001:db8::66");
    assert!(
        f.details.contains("services: auth, imap-login, vsftpd"),
        "{}",
        f.details
    );
    assert!(f.details.contains("users: a, b"), "{}", f.details);
}

#[test]
fn failures_without_address_are_only_counted() {
    let mut r = Rig::new(AuthThresholds::default());
    for _ in 0..10 {
        r.line("Nov 21 20:14:01 h su[5]: pam_unix(su:auth): authentication failure; logname=a uid=1000 euid=0 tty=/dev/pts/0 ruser=a rhost=  user=root");
    }
    assert!(r.out.is_empty());
    assert_eq!(r.det.stats().unattributed_failures, 10);
    assert_eq!(r.det.stats().ambiguous_addresses, 0);
    // A user name imitating the layout twice over: counted as ambiguous, nobody blamed.
    for _ in 0..10 {
        r.line("Nov 21 20:14:01 h sshd[5]: pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=203.0.113.9  user=x rhost=198.51.100.9");
    }
    assert!(r.out.is_empty());
    assert_eq!(
        r.det.stats().ambiguous_addresses,
        0,
        "sshd's PAM lines are skipped"
    );
    for _ in 0..10 {
        r.line("Nov 21 20:14:01 h vsftpd[5]: pam_unix(vsftpd:auth): authentication failure; logname= uid=0 euid=0 tty=ftp ruser= rhost=203.0.113.9  user=x rhost=198.51.100.9");
    }
    assert!(r.out.is_empty());
    assert_eq!(r.det.stats().unattributed_failures, 20);
    assert_eq!(r.det.stats().ambiguous_addresses, 10);
}

#[test]
fn root_login_and_new_address_login() {
    let mut r = Rig::new(AuthThresholds::default());
    r.line("Nov 21 20:14:01 h sshd[1]: Accepted publickey for root from 192.0.2.7 port 5 ssh2: ED25519 SHA256:x");
    assert_eq!(r.checks(), ["ssh_root_login"]);
    assert_eq!(r.out[0].message, "SSH root login from 192.0.2.7");
    assert_eq!(r.out[0].severity, Severity::Warning);
    // First login of a user: baseline only.
    r.line("Nov 21 20:14:01 h sshd[1]: Accepted password for deploy from 192.0.2.8 port 5 ssh2");
    r.line("Nov 21 20:14:01 h sshd[1]: Accepted password for deploy from 192.0.2.8 port 6 ssh2");
    assert_eq!(r.out.len(), 1);
    r.line("Nov 21 20:14:01 h sshd[1]: Accepted password for deploy from 198.51.100.9 port 5 ssh2");
    assert_eq!(r.checks(), ["ssh_root_login", "auth_new_address_login"]);
    let f = &r.out[1];
    assert_eq!(f.message, "Login as deploy from new address 198.51.100.9");
    assert!(
        f.details.contains("1 other known address)"),
        "{}",
        f.details
    );
    // Root from a second address: both checks.
    r.line("Nov 21 20:14:01 h sshd[1]: Accepted publickey for root from 192.0.2.99 port 5 ssh2");
    assert_eq!(
        &r.checks()[2..],
        ["ssh_root_login", "auth_new_address_login"]
    );
}

#[test]
fn mail_logins_only_when_enabled() {
    let line = |ip: &str| {
        format!("Nov 21 20:14:01 m dovecot: imap-login: Login: user=<alice>, method=PLAIN, rip={ip}, lip=10.0.0.1")
    };
    let mut r = Rig::new(AuthThresholds::default());
    r.line(&line("192.0.2.1"));
    r.line(&line("192.0.2.2"));
    assert!(r.out.is_empty());
    let mut r = Rig::new(AuthThresholds {
        new_address_mail: true,
        ..AuthThresholds::default()
    });
    r.line(&line("192.0.2.1"));
    r.line(&line("192.0.2.2"));
    assert_eq!(r.checks(), ["auth_new_address_login"]);
}

#[test]
fn known_logins_survive_snapshot_and_restore() {
    let mut r = Rig::new(AuthThresholds::default());
    r.line("Nov 21 20:14:01 h sshd[1]: Accepted password for deploy from 192.0.2.8 port 5 ssh2");
    let saved = r.det.known_logins();
    let mut r2 = Rig::new(AuthThresholds::default());
    r2.det
        .restore_known_logins(saved.iter().map(|(u, ip)| (u.as_str(), *ip)));
    r2.line("Nov 21 20:14:01 h sshd[1]: Accepted password for deploy from 192.0.2.9 port 5 ssh2");
    assert_eq!(r2.checks(), ["auth_new_address_login"]);
}

#[test]
fn tracked_addresses_are_capped_and_evictions_counted() {
    let th = AuthThresholds {
        max_tracked_addresses: 100,
        ..AuthThresholds::default()
    };
    let mut r = Rig::new(th);
    for n in 0..1_000u32 {
        let ip = std::net::Ipv4Addr::from(0xC000_0200 + n);
        r.line(&failed(&ip.to_string(), 1, "root"));
    }
    let s = r.det.stats();
    assert_eq!(s.addresses_tracked, 100);
    assert_eq!(s.addresses_evicted, 900);
    // Expired state is purged by maintain and is not an eviction.
    r.clock.advance_secs(700);
    r.det.maintain();
    assert_eq!(r.det.stats().addresses_tracked, 0);
}

#[test]
fn user_names_in_findings_are_bounded_and_cleaned() {
    let mut r = Rig::new(AuthThresholds::default());
    for i in 0..8 {
        let user = format!("u{i}\u{1b}[31m{}", "x".repeat(200));
        r.line(&failed("203.0.113.77", 10 + i, &user));
    }
    let f = &r.out[0];
    assert!(!f.details.contains('\u{1b}'));
    assert!(f.details.len() < 1_000, "{}", f.details.len());
    assert!(r.det.stats().users_not_recorded >= 1 || f.details.contains("more"));
}

/// xorshift64*.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed >> 12;
    *seed ^= *seed << 25;
    *seed ^= *seed >> 27;
    seed.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// True with probability 1/n (written without `%` == 0 to keep the MSRV-friendly form).
fn one_in(s: &mut u64, n: u64) -> bool {
    rng(s) % n < 1
}

#[test]
fn random_events_never_panic_and_stay_bounded() {
    let th = AuthThresholds {
        max_tracked_addresses: 64,
        max_known_logins: 32,
        failures: 3,
        window_secs: 30,
        ..AuthThresholds::default()
    };
    let mut r = Rig::new(th);
    let kinds = [
        AuthKind::Failure,
        AuthKind::InvalidUser,
        AuthKind::NotAllowed,
        AuthKind::Success,
        AuthKind::ConnectionClosed,
        AuthKind::MaxAttempts,
        AuthKind::SessionOpened,
    ];
    let services = [AuthService::Sshd, AuthService::Pam, AuthService::Dovecot];
    let raws = ["sshd", "imap-login", "auth", "dovecot", "vsftpd", ""];
    let users = ["root", "a", "", "b\u{0}"];
    let mut s = 42u64;
    let mut n = 0usize;
    for _ in 0..50_000 {
        let ip = std::net::IpAddr::V4(std::net::Ipv4Addr::from((rng(&mut s) % 300) as u32));
        let ev = AuthEvent {
            kind: kinds[(rng(&mut s) % 7) as usize],
            service: services[(rng(&mut s) % 3) as usize],
            user: Some(users[(rng(&mut s) % 4) as usize]).filter(|_| !one_in(&mut s, 5)),
            ip: Some(ip).filter(|_| !one_in(&mut s, 9)),
            ambiguous_address: false,
            port: Some((rng(&mut s) % 4) as u16).filter(|_| !one_in(&mut s, 3)),
            invalid_user: one_in(&mut s, 2),
            attempts: (rng(&mut s) % 2000) as u32,
            method: Some("password"),
            raw_service: raws[(rng(&mut s) % 6) as usize],
            program: "x",
            host: "h",
            timestamp: "t",
        };
        r.det.observe(&ev, &mut |_| n += 1);
        if one_in(&mut s, 100) {
            r.clock.advance_secs(rng(&mut s) % 40);
            r.det.maintain();
        }
    }
    let st = r.det.stats();
    assert!(st.addresses_tracked <= 64 && st.known_logins <= 32);
    assert!(n > 0);
}

#[test]
fn shared_thresholds_apply_before_the_next_event_keeping_open_windows() {
    let mut r = Rig::new(AuthThresholds::default());
    let shared = r.det.shared_thresholds();
    for i in 0..3 {
        r.line(&failed("198.51.100.4", 1000 + i, "root"));
    }
    assert!(r.out.is_empty(), "3 of 5");
    shared.set(AuthThresholds {
        failures: 4,
        ..AuthThresholds::default()
    });
    r.line(&failed("198.51.100.4", 2000, "root"));
    assert_eq!(r.checks(), ["ssh_bruteforce"], "the open window counted on");
    assert_eq!(r.det.thresholds().failures, 4);
    // Out-of-range values are forced into range, never disabling the detector.
    shared.set(AuthThresholds {
        failures: 0,
        ..AuthThresholds::default()
    });
    r.det.maintain();
    assert_eq!(r.det.thresholds().failures, 1);
}

#[test]
fn ipv4_mapped_addresses_become_ipv4_in_every_finding() {
    let mut r = Rig::new(AuthThresholds::default());
    // sshd, PAM (rhost) and Dovecot (rip) forms of the same mapped address are one address.
    for port in 1..=3 {
        r.line(&failed("::ffff:203.0.113.9", port, "root"));
    }
    r.line("Nov 21 20:14:01 h vsftpd[7]: pam_unix(vsftpd:auth): authentication failure; logname= uid=0 euid=0 tty=ftp ruser=a rhost=::ffff:203.0.113.9  user=a");
    r.line("Nov 21 20:14:01 m dovecot: imap-login: Disconnected (auth failed, 5 attempts in 9 secs): user=<a>, method=PLAIN, rip=::FFFF:203.0.113.9, lip=10.0.0.1");
    for port in 4..=5 {
        r.line(&failed("203.0.113.9", port, "root"));
    }
    r.line("Nov 21 20:15:01 h sshd[2]: Accepted password for root from ::ffff:198.51.100.9 port 9 ssh2");
    assert_eq!(
        r.checks(),
        ["pam_bruteforce", "ssh_bruteforce", "ssh_root_login"]
    );
    let want: [std::net::IpAddr; 3] = [
        "203.0.113.9".parse().unwrap(),
        "203.0.113.9".parse().unwrap(),
        "198.51.100.9".parse().unwrap(),
    ];
    for (f, ip) in r.out.iter().zip(want) {
        assert_eq!(f.ip, Some(ip), "{f:?}");
        assert!(
            !f.message.contains("::ffff") && !f.details.to_string().contains("::ffff"),
            "{f:?}"
        );
    }
}
