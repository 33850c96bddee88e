use super::*;
use std::net::{Ipv4Addr, Ipv6Addr};

fn v4(s: &str) -> Option<IpAddr> {
    Some(IpAddr::V4(s.parse::<Ipv4Addr>().unwrap()))
}

fn p(line: &str) -> AuthEvent<'_> {
    parse_line(line).unwrap_or_else(|| panic!("not parsed: {line}"))
}

#[test]
fn header_classic_and_rfc3339() {
    let h = split_header("Nov  1 20:14:01 web1 sshd[123]: Failed x").unwrap();
    assert_eq!(h.timestamp, "Nov  1 20:14:01");
    assert_eq!((h.host, h.program, h.message), ("web1", "sshd", "Failed x"));
    let h = split_header("2026-11-21T20:14:01.123456+00:00 web1 dovecot: imap-login: x").unwrap();
    assert_eq!(h.timestamp, "2026-11-21T20:14:01.123456+00:00");
    assert_eq!((h.program, h.message), ("dovecot", "imap-login: x"));
    for ts in [
        "2026-11-21T20:14:01Z",
        "2026-11-21T20:14:01+01:00",
        "2026-11-21T20:14:01.5-05:00",
        "2026-11-21T20:14:01.123456+00:00",
        "2026-11-21T20:14:01.123456789012345678+00:00",
        "2026-11-21X20:14:01+01:00",
        "2026-11-2a T20:14:01+01:00",
        "2026",
    ] {
        let line = format!("{ts} host sshd[1]: x");
        let h = split_header(&line).unwrap();
        let want = line.split_once(' ').unwrap().0;
        assert_eq!(h.timestamp, want, "{line}");
    }
    assert!(split_header("").is_none());
    assert!(split_header("Nov 21").is_none());
    assert!(split_header(" leading space").is_none());
    assert!(split_header("2026-11-21T20:14:01Z host no-colon-tag message").is_none());
}

#[test]
fn sshd_failed_password_both_formats() {
    for line in [
        "Nov 21 20:14:01 host sshd[123]: Failed password for root from 203.0.113.9 port 52144 ssh2",
        "2026-11-21T20:14:01.123456+00:00 host sshd[123]: Failed password for root from 203.0.113.9 port 52144 ssh2",
    ] {
        let e = p(line);
        assert_eq!(e.kind, AuthKind::Failure);
        assert_eq!(e.service, AuthService::Sshd);
        assert_eq!(e.user, Some("root"));
        assert_eq!(e.ip, v4("203.0.113.9"));
        assert_eq!(e.port, Some(52144));
        assert_eq!(e.method, Some("password"));
        assert!(!e.invalid_user);
        assert_eq!(e.raw_service, "sshd");
        assert_eq!(e.host, "host");
    }
}

#[test]
fn sshd_invalid_user_variants() {
    let e = p("Nov 21 20:14:01 h sshd[1]: Failed password for invalid user admin from 198.51.100.4 port 4000 ssh2");
    assert_eq!(
        (e.kind, e.user, e.invalid_user),
        (AuthKind::Failure, Some("admin"), true)
    );
    let e = p("Nov 21 20:14:01 h sshd[1]: Invalid user admin from 198.51.100.4 port 4000");
    assert_eq!(
        (e.kind, e.user, e.port),
        (AuthKind::InvalidUser, Some("admin"), Some(4000))
    );
    let e = p("Nov 21 20:14:01 h sshd[1]: Invalid user  from 198.51.100.4");
    assert_eq!((e.user, e.port), (None, None));
    let e = p(
        "Nov 21 20:14:01 h sshd[1]: Failed none for invalid user x from 2001:db8::7 port 1 ssh2",
    );
    assert_eq!(
        e.ip,
        Some(IpAddr::V6("2001:db8::7".parse::<Ipv6Addr>().unwrap()))
    );
    assert_eq!(e.method, Some("none"));
    let e = p("Nov 21 20:14:01 h sshd[1]: User bob from 192.0.2.5 not allowed because not listed in AllowUsers");
    assert_eq!(
        (e.kind, e.user, e.ip),
        (AuthKind::NotAllowed, Some("bob"), v4("192.0.2.5"))
    );
}

#[test]
fn sshd_accepted_and_modern_program_names() {
    let e = p("2026-11-21T20:14:01+00:00 h sshd-session[9]: Accepted publickey for deploy from 192.0.2.10 port 50000 ssh2: ED25519 SHA256:AbCdEf");
    assert_eq!(e.kind, AuthKind::Success);
    assert_eq!(
        (e.user, e.method, e.raw_service),
        (Some("deploy"), Some("publickey"), "sshd-session")
    );
    let e = p(
        "Nov 21 20:14:01 h sshd[1]: Accepted password for root from ::ffff:192.0.2.11 port 1 ssh2",
    );
    assert_eq!(e.ip, v4("192.0.2.11"), "IPv4-mapped becomes IPv4");
    let e = p("Nov 21 20:14:01 h sshd[1]: Accepted keyboard-interactive/pam for u from 192.0.2.1 port 2 ssh2");
    assert_eq!(e.method, Some("keyboard-interactive/pam"));
}

#[test]
fn sshd_connection_end_and_max_attempts() {
    let e = p("Nov 21 20:14:01 h sshd[1]: Connection closed by authenticating user root 203.0.113.9 port 40022 [preauth]");
    assert_eq!(
        (e.kind, e.user, e.port),
        (AuthKind::ConnectionClosed, Some("root"), Some(40022))
    );
    assert!(!e.invalid_user);
    let e = p("Nov 21 20:14:01 h sshd[1]: Disconnected from invalid user test 203.0.113.9 port 40022 [preauth]");
    assert_eq!(
        (e.kind, e.user, e.invalid_user),
        (AuthKind::ConnectionClosed, Some("test"), true)
    );
    let e = p("Nov 21 20:14:01 h sshd[1]: error: maximum authentication attempts exceeded for root from 203.0.113.9 port 4 ssh2 [preauth]");
    assert_eq!(
        (e.kind, e.user, e.port),
        (AuthKind::MaxAttempts, Some("root"), Some(4))
    );
    let e = p("Nov 21 20:14:01 h sshd[1]: error: maximum authentication attempts exceeded for invalid user a b from 203.0.113.9 port 4 ssh2 [preauth]");
    assert_eq!((e.user, e.invalid_user), (Some("a b"), true));
    let e = p("Nov 21 20:14:01 h sshd[1]: Disconnecting authenticating user root 203.0.113.9 port 22: Too many authentication failures [preauth]");
    assert_eq!((e.kind, e.port), (AuthKind::MaxAttempts, Some(22)));
    // Plain connection noise is not an auth event.
    for noise in [
        "Nov 21 20:14:01 h sshd[1]: Connection closed by 203.0.113.9 port 40022 [preauth]",
        "Nov 21 20:14:01 h sshd[1]: Received disconnect from 203.0.113.9 port 1:11: Bye Bye [preauth]",
        "Nov 21 20:14:01 h sshd[1]: Disconnecting: Change of username",
        "Nov 21 20:14:01 h sshd[1]: Server listening on 0.0.0.0 port 22.",
    ] {
        assert!(parse_line(noise).is_none(), "{noise}");
    }
}

#[test]
fn sshd_user_name_cannot_spoof_address() {
    let e = p("Nov 21 20:14:01 h sshd[1]: Failed password for invalid user x from 9.9.9.9 port 22 ssh2 from 203.0.113.9 port 5 ssh2");
    assert_eq!(e.ip, v4("203.0.113.9"));
    assert_eq!(e.user, Some("x from 9.9.9.9 port 22 ssh2"));
    let e = p("Nov 21 20:14:01 h sshd[1]: Connection closed by invalid user a 9.9.9.9 port 1 b 203.0.113.9 port 5 [preauth]");
    assert_eq!(e.ip, v4("203.0.113.9"));
    // A line that ends inside a user name yields no address, hence no event.
    assert!(parse_line(
        "Nov 21 20:14:01 h sshd[1]: Failed password for invalid user x from 9.9.9."
    )
    .is_none());
}

#[test]
fn pam_failure_and_session() {
    let e = p("Nov 21 20:14:01 h vsftpd[5]: pam_unix(vsftpd:auth): authentication failure; logname= uid=0 euid=0 tty=ftp ruser=bob rhost=203.0.113.7  user=bob");
    assert_eq!(
        (e.kind, e.service, e.raw_service),
        (AuthKind::Failure, AuthService::Pam, "vsftpd")
    );
    assert_eq!((e.user, e.ip), (Some("bob"), v4("203.0.113.7")));
    let e = p("Nov 21 20:14:01 h sshd[5]: pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=2001:db8::1");
    assert_eq!(
        (e.service, e.raw_service, e.user),
        (AuthService::Pam, "sshd", None)
    );
    assert!(e.ip.is_some());
    let e = p("Nov 21 20:14:01 h su[5]: pam_unix(su:auth): authentication failure; logname=a uid=1000 euid=0 tty=/dev/pts/0 ruser=a rhost=  user=root");
    assert_eq!((e.ip, e.user), (None, Some("root")));
    let e = p("Nov 21 20:14:01 h sshd[5]: pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=scanner.example.net user=root");
    assert_eq!(e.ip, None, "host names are not addresses");
    let e = p("2026-11-21T20:17:01.000001+00:00 h CRON[77]: pam_unix(cron:session): session opened for user root(uid=0) by (uid=0)");
    assert_eq!(
        (e.kind, e.user, e.raw_service),
        (AuthKind::SessionOpened, Some("root"), "cron")
    );
    let e = p("Nov 21 20:14:01 h sshd[5]: pam_unix(sshd:session): session opened for user root by (uid=0)");
    assert_eq!(e.user, Some("root"));
    assert!(parse_line(
        "Nov 21 20:14:01 h sudo[5]: pam_unix(sudo:session): session closed for user root"
    )
    .is_none());
    assert!(
        parse_line("Nov 21 20:14:01 h sshd[5]: pam_unix(sshd:auth): check pass; user unknown")
            .is_none()
    );
}

#[test]
fn dovecot_login_lines() {
    let e = p("Nov 21 20:14:01 mail dovecot: imap-login: Login: user=<alice@example.com>, method=PLAIN, rip=198.51.100.20, lip=10.0.0.1, mpid=4242, TLS, session=<abc>");
    assert_eq!(
        (e.kind, e.service, e.raw_service),
        (AuthKind::Success, AuthService::Dovecot, "imap-login")
    );
    assert_eq!(
        (e.user, e.method, e.ip),
        (
            Some("alice@example.com"),
            Some("PLAIN"),
            v4("198.51.100.20")
        )
    );
    let e = p("Nov 21 20:14:01 mail dovecot[9]: imap-login: Disconnected (auth failed, 3 attempts in 14 secs): user=<admin>, method=PLAIN, rip=203.0.113.50, lip=10.0.0.1, TLS, session=<x>");
    assert_eq!(
        (e.kind, e.attempts, e.user),
        (AuthKind::Failure, 3, Some("admin"))
    );
    let e = p("Nov 21 20:14:01 mail dovecot: pop3-login: Aborted login (auth failed, 1 attempts in 2 secs): user=<>, method=PLAIN, rip=2001:db8::50, lip=::1, session=<x>");
    assert_eq!((e.user, e.raw_service, e.attempts), (None, "pop3-login", 1));
    let e = p("2026-11-21T20:14:01+00:00 mail dovecot[9]: imap-login: Login aborted: Connection closed (auth failed, 2 attempts in 10 secs) (auth_failed): user=<a>, method=LOGIN, rip=203.0.113.51, lip=10.0.0.1, session=<x>");
    assert_eq!((e.attempts, e.method), (2, Some("LOGIN")));
    let e = p("Nov 21 20:14:01 mail imap-login: Login: user=<bob>, method=PLAIN, rip=192.0.2.1, lip=192.0.2.2");
    assert_eq!((e.kind, e.raw_service), (AuthKind::Success, "imap-login"));
    // Spoof attempt inside the user name.
    let e = p("Nov 21 20:14:01 mail dovecot: imap-login: Disconnected (auth failed, 1 attempts in 2 secs): user=<x>, method=PLAIN, rip=9.9.9.9>, method=PLAIN, rip=203.0.113.52, lip=10.0.0.1");
    assert_eq!(e.ip, v4("203.0.113.52"));
    assert!(parse_line("Nov 21 20:14:01 mail dovecot: imap-login: Disconnected (no auth attempts in 0 secs): user=<>, rip=203.0.113.5, lip=10.0.0.1").is_none());
    assert!(
        parse_line("Nov 21 20:14:01 mail dovecot: imap(alice): Logged out in=1 out=2").is_none()
    );
}

#[test]
fn dovecot_auth_process_lines() {
    let e = p("Nov 21 20:14:01 mail dovecot: auth: pam(admin,203.0.113.60,<Y0abc>): pam_authenticate() failed: Authentication failure (password mismatch?)");
    assert_eq!(
        (e.kind, e.user, e.raw_service),
        (AuthKind::Failure, Some("admin"), "auth")
    );
    assert_eq!(e.ip, v4("203.0.113.60"));
    let e = p("Nov 21 20:14:01 mail dovecot: auth-worker(4321): sql(a,b@example.com,203.0.113.61,<s>): Password mismatch");
    assert_eq!(
        (e.user, e.raw_service),
        (Some("a,b@example.com"), "auth-worker")
    );
    let e = p("Nov 21 20:14:01 mail dovecot: auth: passwd-file(ghost,2001:db8::61): unknown user");
    assert_eq!((e.kind, e.invalid_user), (AuthKind::InvalidUser, true));
    assert!(parse_line("Nov 21 20:14:01 mail dovecot: auth: Warning: auth client 0 disconnected with 1 pending requests").is_none());
}

#[test]
fn noise_is_rejected() {
    for noise in [
        "Nov 21 20:17:01 h CRON[1]: (root) CMD (   cd / && run-parts --report /etc/cron.hourly)",
        "2026-11-21T20:17:01.5+00:00 h systemd-logind[600]: New session 12 of user root.",
        "Nov 21 20:17:01 h sudo:   alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; COMMAND=/usr/bin/id",
        "Nov 21 20:17:01 h systemd[1]: Started session-12.scope - Session 12 of User root.",
        "Nov 21 20:17:01 h kernel: [UFW BLOCK] IN=eth0 SRC=203.0.113.9",
        "Nov 21 20:17:01 h sshd-like-but-not: Failed",
        "Nov 21 20:17:01 h dovecot: master: Dovecot v2.3 starting up",
    ] {
        assert!(parse_line(noise).is_none(), "{noise}");
    }
}

/// xorshift64*: deterministic pseudo-random bytes without a dependency.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed >> 12;
    *seed ^= *seed << 25;
    *seed ^= *seed >> 27;
    seed.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

#[test]
fn garbage_and_mutated_lines_never_panic() {
    let seeds = [
        "Nov 21 20:14:01 host sshd[123]: Failed password for invalid user admin from 203.0.113.9 port 52144 ssh2",
        "2026-11-21T20:14:01.1+00:00 h sshd[1]: Connection closed by authenticating user root 203.0.113.9 port 40022 [preauth]",
        "Nov 21 20:14:01 h vsftpd[5]: pam_unix(vsftpd:auth): authentication failure; logname= uid=0 euid=0 tty=ftp ruser=bob rhost=203.0.113.7  user=bob",
        "Nov 21 20:14:01 mail dovecot: imap-login: Disconnected (auth failed, 3 attempts in 14 secs): user=<admin>, method=PLAIN, rip=203.0.113.50, lip=10.0.0.1",
        "Nov 21 20:14:01 mail dovecot: auth: pam(admin,203.0.113.60,<Y0abc>): pam_authenticate() failed: x",
        "Nov 21 20:14:01 h sshd[1]: error: maximum authentication attempts exceeded for root from 203.0.113.9 port 4 ssh2 [preauth]",
    ];
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let mut parsed = 0u32;
    // Pure random bytes.
    for _ in 0..20_000 {
        let len = (rng(&mut s) % 200) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng(&mut s) as u8).collect();
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_line(&text);
    }
    // Mutations of valid lines: truncation, byte flips, insertions of separators.
    let alphabet = b" :()<>,=[]fromport.0123456789abcdef\xff";
    for _ in 0..60_000 {
        let base = seeds[(rng(&mut s) % seeds.len() as u64) as usize].as_bytes();
        let mut b = base.to_vec();
        for _ in 0..(rng(&mut s) % 4) {
            if b.is_empty() {
                break;
            }
            let i = (rng(&mut s) % b.len() as u64) as usize;
            let c = alphabet[(rng(&mut s) % alphabet.len() as u64) as usize];
            match rng(&mut s) % 3 {
                0 => b[i] = c,
                1 => b.insert(i, c),
                _ => b.truncate(i),
            }
        }
        let text = String::from_utf8_lossy(&b);
        if parse_line(&text).is_some() {
            parsed += 1;
        }
    }
    assert!(
        parsed > 1_000,
        "mutations should still parse often: {parsed}"
    );
}

/// Issue 23 item 2: client text in `ruser=`/`user=` never chooses the PAM address. vsftpd
/// writes the FTP `USER` text in both; a second fitting ` rhost=` split blames nobody
/// unless exactly one split has ruser == user.
#[test]
fn pam_user_text_never_names_the_address() {
    let pre = "Nov 21 20:14:01 h vsftpd[5]: pam_unix(vsftpd:auth): authentication failure; logname= uid=0 euid=0 tty=ftp";
    for (tail, ip, user) in [
        // vsftpd: the injected name in both fields; the real split is the one where they agree.
        (
            "ruser=x rhost=41.0.0.1 rhost=203.0.113.120  user=x rhost=41.0.0.1",
            v4("203.0.113.120"),
            Some("x rhost=41.0.0.1"),
        ),
        (
            "ruser=x rhost=41.0.0.1  user=x rhost=203.0.113.121  user=x rhost=41.0.0.1  user=x",
            v4("203.0.113.121"),
            Some("x rhost=41.0.0.1  user=x"),
        ),
        // Only in user= (sshd leaves ruser empty): two fitting splits, none agreeing.
        (
            "ruser= rhost=203.0.113.122  user=x rhost=41.0.0.1",
            None,
            None,
        ),
        (
            "ruser= rhost=203.0.113.123  user=x rhost=41.0.0.1  user=y",
            None,
            None,
        ),
        // A name that does not fit the layout after the host is no split at all.
        (
            "ruser=x rhost=41.0.0.1y rhost=203.0.113.124  user=x rhost=41.0.0.1y",
            v4("203.0.113.124"),
            Some("x rhost=41.0.0.1y"),
        ),
        // Ordinary lines, pam_unix (two spaces) and pam_sss (one).
        (
            "ruser= rhost=203.0.113.125  user=bob",
            v4("203.0.113.125"),
            Some("bob"),
        ),
        (
            "ruser= rhost=203.0.113.126 user=bob",
            v4("203.0.113.126"),
            Some("bob"),
        ),
        ("ruser= rhost=203.0.113.127 ", v4("203.0.113.127"), None),
    ] {
        let line = format!("{pre} {tail}");
        let e = p(&line);
        assert_eq!((e.ip, e.user), (ip, user), "{line}");
        assert_eq!(e.ambiguous_address, ip.is_none(), "{line}");
        assert_ne!(e.ip, v4("41.0.0.1"), "{line}");
    }
}

/// The same class of injection in sshd and Dovecot: user names (and Dovecot's logged
/// passwords) holding the text the daemon writes around the address.
#[test]
fn sshd_and_dovecot_user_text_never_names_the_address() {
    for line in [
        "Nov 21 20:14:01 h sshd[1]: Failed password for x from 41.0.0.1 port 1 ssh2 from 203.0.113.130 port 2 ssh2",
        "Nov 21 20:14:01 h sshd[1]: Failed password for invalid user x from 41.0.0.1 port 1 from 203.0.113.130 port 2 ssh2",
        "Nov 21 20:14:01 h sshd[1]: Invalid user x from 41.0.0.1 port 1 from 203.0.113.130 port 2",
        "Nov 21 20:14:01 h sshd[1]: User x from 41.0.0.1 not allowed because y from 203.0.113.130 not allowed because not listed in AllowUsers",
        "Nov 21 20:14:01 h sshd[1]: Connection closed by invalid user x 41.0.0.1 port 1 203.0.113.130 port 2 [preauth]",
        "Nov 21 20:14:01 h sshd[1]: error: maximum authentication attempts exceeded for x from 41.0.0.1 port 1 from 203.0.113.130 port 2 ssh2 [preauth]",
        "Nov 21 20:14:01 mail dovecot: imap-login: Disconnected (auth failed, 1 attempts in 2 secs): user=<x, rip=41.0.0.1, lip=1>, method=PLAIN, rip=203.0.113.130, lip=192.0.2.1, session=<abc>",
    ] {
        assert_eq!(p(line).ip, v4("203.0.113.130"), "{line}");
    }
    // A Dovecot auth user name holding `,IP): ` makes two readings: nobody is blamed.
    let e = p("Nov 21 20:14:01 mail dovecot: auth: passwd-file(x,41.0.0.1): unknown user,203.0.113.130,<Y0abc>): unknown user");
    assert_eq!((e.kind, e.ip), (AuthKind::InvalidUser, None));
    // auth_verbose_passwords logs the given password after the address: a password
    // holding `,IP): ` makes a second reading, so nobody is blamed (it was the last one).
    let e = p("Nov 21 20:14:01 mail dovecot: auth: passwd-file(bob,203.0.113.131,<Y0abc>): Password mismatch (given password: x,41.0.0.1): Password mismatch)");
    assert_eq!((e.kind, e.ip), (AuthKind::Failure, None));
    let e = p("Nov 21 20:14:01 mail dovecot: auth: passwd-file(bob,203.0.113.131,<Y0abc>): Password mismatch (given password: x): y)");
    assert_eq!((e.ip, e.user), (v4("203.0.113.131"), Some("bob")));
}
