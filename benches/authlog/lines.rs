//! The generated auth log shared by `benches/authlog.rs` and `benches/logtail.rs`: a
//! realistic mix (about 60% CRON / systemd / sudo / kernel noise; sshd failures, invalid
//! users, preauth closes and logins; PAM; Dovecot), deterministic for a given seed.
//! Attackers come from 203.0.0.0/8-style documentation-like ranges and 2001:db8::/32;
//! legitimate users from 198.51.100.0/24.

#![allow(dead_code)] // each benchmark uses part of it

use std::fmt::Write as _;

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
}

const USERS: &[&str] = &[
    "root",
    "admin",
    "test",
    "user",
    "ubuntu",
    "oracle",
    "postgres",
    "git",
    "ftpuser",
    "guest",
    "deploy",
    "www-data",
    "support",
    "pi",
    "mysql",
    "hadoop",
    "minecraft",
    "steam",
    "a",
    "info",
];
const LEGIT: &[&str] = &["deploy", "alice", "bob", "backup"];
const MAIL: &[&str] = &[
    "alice@example.com",
    "bob@example.com",
    "info@example.org",
    "sales@example.net",
];

fn attacker(r: &mut Rng) -> String {
    let n = r.below(6_000);
    if n < 5_500 {
        format!("203.{}.{}.{}", n % 7 + 1, (n / 7) % 250, n % 253 + 1)
    } else {
        format!("2001:db8:{:x}::{:x}", n % 97, n)
    }
}

fn legit_ip(r: &mut Rng) -> String {
    format!("198.51.100.{}", r.below(50) + 1)
}

pub fn timestamp(i: u64) -> String {
    let s = i / 20; // about 20 lines a second
    let (h, m, sec) = ((s / 3600) % 24, (s / 60) % 60, s % 60);
    format!(
        "2026-11-21T{h:02}:{m:02}:{sec:02}.{:06}+00:00",
        (i * 7919) % 1_000_000
    )
}

/// One line of the mix (without newline). Returns whether it is noise.
pub fn line(r: &mut Rng, i: u64, out: &mut String) -> bool {
    out.clear();
    let ts = timestamp(i);
    let pid = 1000 + r.below(60_000);
    let roll = r.below(1000);
    let _ = write!(out, "{ts} web1 ");
    let noise = roll < 600;
    let w = match roll {
        0..=149 => write!(out, "CRON[{pid}]: (root) CMD (   cd / && run-parts --report /etc/cron.hourly)"),
        150..=249 => write!(out, "CRON[{pid}]: pam_unix(cron:session): session opened for user root(uid=0) by (uid=0)"),
        250..=329 => write!(out, "CRON[{pid}]: pam_unix(cron:session): session closed for user root"),
        330..=399 => write!(out, "systemd-logind[612]: New session {pid} of user deploy."),
        400..=459 => write!(out, "systemd[1]: Started session-{pid}.scope - Session {pid} of User deploy."),
        460..=509 => write!(out, "sudo[{pid}]:   deploy : TTY=pts/0 ; PWD=/home/deploy ; USER=root ; COMMAND=/usr/bin/systemctl reload nginx"),
        510..=549 => write!(out, "sudo[{pid}]: pam_unix(sudo:session): session closed for user root"),
        550..=579 => write!(out, "kernel: [123456.789012] [UFW BLOCK] IN=eth0 OUT= SRC={} DST=192.0.2.1 PROTO=TCP SPT=443 DPT=23", attacker(r)),
        580..=599 => write!(out, "sshd[{pid}]: Received disconnect from {} port {}:11: Bye Bye [preauth]", attacker(r), r.below(60_000) + 1024),
        600..=709 => {
            let u = r.pick(USERS);
            let inv = if u == "root" { "" } else { "invalid user " };
            write!(out, "sshd[{pid}]: Failed password for {inv}{u} from {} port {} ssh2", attacker(r), r.below(60_000) + 1024)
        }
        710..=759 => write!(out, "sshd[{pid}]: Invalid user {} from {} port {}", r.pick(USERS), attacker(r), r.below(60_000) + 1024),
        760..=799 => write!(out, "sshd[{pid}]: Connection closed by authenticating user root {} port {} [preauth]", attacker(r), r.below(60_000) + 1024),
        800..=819 => write!(out, "sshd[{pid}]: Disconnected from invalid user {} {} port {} [preauth]", r.pick(USERS), attacker(r), r.below(60_000) + 1024),
        820..=849 => write!(out, "sshd[{pid}]: pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost={}  user=root", attacker(r)),
        850..=854 => write!(out, "sshd[{pid}]: error: maximum authentication attempts exceeded for root from {} port {} ssh2 [preauth]", attacker(r), r.below(60_000) + 1024),
        855..=869 => write!(out, "sshd[{pid}]: Accepted publickey for {} from {} port {} ssh2: ED25519 SHA256:3q2+7wAbCdEfGhIjKlMnOpQrStUvWxYz0123456789", r.pick(LEGIT), legit_ip(r), r.below(60_000) + 1024),
        870..=879 => write!(out, "vsftpd[{pid}]: pam_unix(vsftpd:auth): authentication failure; logname= uid=0 euid=0 tty=ftp ruser={u} rhost={}  user={u}", attacker(r), u = r.pick(USERS)),
        880..=919 => write!(out, "dovecot[812]: imap-login: Login: user=<{}>, method=PLAIN, rip={}, lip=192.0.2.1, mpid={pid}, TLS, session=<AbCdEf12>", r.pick(MAIL), legit_ip(r)),
        920..=949 => write!(out, "dovecot[812]: imap-login: Disconnected (auth failed, {} attempts in 8 secs): user=<{}>, method=PLAIN, rip={}, lip=192.0.2.1, TLS, session=<AbCdEf12>", r.below(3) + 1, r.pick(MAIL), attacker(r)),
        950..=964 => write!(out, "dovecot[812]: auth-worker({pid}): pam({},{},<AbCdEf12>): pam_authenticate() failed: Authentication failure (password mismatch?)", r.pick(MAIL), attacker(r)),
        _ => write!(out, "dovecot[812]: imap({}): Logged out in={} out={} deleted=0 expunged=0 trashed=0 hdr_count=0 hdr_bytes=0 body_count=0 body_bytes=0", r.pick(MAIL), r.below(5000), r.below(90_000)),
    };
    let _ = w;
    noise
}

/// `n` lines of the mix, each ending in a newline (seed fixed: the same text every run).
pub fn generate(n: u64) -> String {
    let mut r = Rng(0x5EED_1234_ABCD_0001);
    let mut buf = String::new();
    let mut text = String::with_capacity(n as usize * 130);
    for i in 0..n {
        line(&mut r, i, &mut buf);
        text.push_str(&buf);
        text.push('\n');
    }
    text
}
