//! Throughput of the authentication-log detector on one core.
//!
//! Generates a 1,000,000-line auth log with a realistic mix (about 60% CRON / systemd /
//! sudo / kernel noise; sshd failures, invalid users, preauth closes and logins; PAM;
//! Dovecot), writes it to a file, then measures:
//! - `e2e`: Tailer reading the file from its start + parse + detect (the production path);
//! - `parse+detect`: the same lines from memory;
//! - `parse`: the parser alone; `noise`: the parser on CRON/systemd/sudo/kernel lines that
//!   are not PAM messages (ns/line, contiguous text).
//!
//! `AUTHLOG_BENCH_FILE=/path` keeps the generated file there (used by
//! `benches/authlog-vs-fail2ban.sh`); otherwise it goes to a private temp directory that is
//! removed afterwards. `AUTHLOG_BENCH_LINES` changes the line count.
//! Run: `cargo bench --bench authlog`.

#![allow(
    clippy::disallowed_methods,
    reason = "test and benchmark fixtures are built with plain std::fs calls, as an attacker would"
)]

// In the main crate this is `svc::watch::authlog`.
use svc::clock::SystemClock;
use svc::watch::authlog::{parse_line, AuthDetector, AuthThresholds, Tailer};

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
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

fn timestamp(i: u64) -> String {
    let s = i / 20; // about 20 lines a second
    let (h, m, sec) = ((s / 3600) % 24, (s / 60) % 60, s % 60);
    format!(
        "2026-11-21T{h:02}:{m:02}:{sec:02}.{:06}+00:00",
        (i * 7919) % 1_000_000
    )
}

/// One line of the mix (without newline). Returns whether it is noise.
fn line(r: &mut Rng, i: u64, out: &mut String) -> bool {
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

fn per_sec(n: usize, secs: f64) -> f64 {
    n as f64 / secs.max(1e-9)
}

fn main() {
    let n: u64 = std::env::var("AUTHLOG_BENCH_LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let (path, keep) = match std::env::var_os("AUTHLOG_BENCH_FILE") {
        Some(p) => (PathBuf::from(p), true),
        None => {
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("authlog-bench-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("bench dir");
            (dir.join("auth.log"), false)
        }
    };

    // Generate.
    let mut r = Rng(0x5EED_1234_ABCD_0001);
    let mut buf = String::new();
    let mut text = String::with_capacity(n as usize * 120);
    let mut noise_lines = Vec::new();
    let mut noise_total = 0usize;
    for i in 0..n {
        if line(&mut r, i, &mut buf) {
            noise_total += 1;
            if noise_lines.len() < 200_000 {
                noise_lines.push(buf.clone());
            }
        }
        text.push_str(&buf);
        text.push('\n');
    }
    let mut f = std::fs::File::create(&path).expect("create bench file");
    f.write_all(text.as_bytes()).expect("write bench file");
    f.sync_all().ok();
    drop(f);
    let lines: Vec<&str> = text.lines().collect();
    // Noise lines that are not PAM session lines (those parse into SessionOpened events).
    let noise_lines: Vec<String> = noise_lines
        .into_iter()
        .filter(|l| !l.contains("pam_unix"))
        .collect();
    let noise_text = noise_lines.join("\n");
    let noise_refs: Vec<&str> = noise_text.split('\n').collect();
    println!(
        "generated {} lines ({:.1} MB), {:.1}% noise, file {}",
        lines.len(),
        text.len() as f64 / 1e6,
        100.0 * noise_total as f64 / lines.len().max(1) as f64,
        path.display()
    );

    let th = AuthThresholds::default();
    let runs = 3;
    let mut best = [f64::MAX; 4];
    let mut findings = 0usize;
    let mut events = 0usize;
    for _ in 0..runs {
        // e2e: file -> tailer -> parse -> detect.
        let t0 = Instant::now();
        let mut tailer = Tailer::from_start(&path);
        let mut det = AuthDetector::new(th.clone(), SystemClock::shared());
        let mut count = 0usize;
        let mut fnd = 0usize;
        loop {
            let st = tailer
                .poll_with(&mut |l| {
                    count += 1;
                    det.process_line(l, &mut |_| fnd += 1);
                })
                .expect("poll");
            if !st.more {
                break;
            }
        }
        best[0] = best[0].min(t0.elapsed().as_secs_f64());
        assert_eq!(count, lines.len());
        findings = fnd;

        // parse+detect from memory.
        let t0 = Instant::now();
        let mut det = AuthDetector::new(th.clone(), SystemClock::shared());
        let mut ev = 0usize;
        for l in &lines {
            if det.process_line(l, &mut |_| {}) {
                ev += 1;
            }
        }
        best[1] = best[1].min(t0.elapsed().as_secs_f64());
        events = ev;

        // parse only.
        let t0 = Instant::now();
        let mut k = 0usize;
        for l in &lines {
            if let Some(e) = parse_line(std::hint::black_box(l)) {
                k += e.attempts as usize;
            }
        }
        std::hint::black_box(k);
        best[2] = best[2].min(t0.elapsed().as_secs_f64());

        // noise rejection, on contiguous text like the tailer's read buffer.
        let t0 = Instant::now();
        let mut k = 0usize;
        for l in &noise_refs {
            if parse_line(std::hint::black_box(l)).is_some() {
                k += 1;
            }
        }
        std::hint::black_box(k);
        best[3] = best[3].min(t0.elapsed().as_secs_f64());
    }
    let nl = lines.len();
    println!("events {events}, findings {findings} (best of {runs} runs, one core)");
    println!(
        "e2e (tail+parse+detect): {:>8.3} s  {:>12.0} lines/s",
        best[0],
        per_sec(nl, best[0])
    );
    println!(
        "parse+detect (memory):   {:>8.3} s  {:>12.0} lines/s",
        best[1],
        per_sec(nl, best[1])
    );
    println!(
        "parse only (memory):     {:>8.3} s  {:>12.0} lines/s",
        best[2],
        per_sec(nl, best[2])
    );
    println!(
        "non-PAM noise (parse):   {:>8.1} ns/line over {} lines",
        best[3] * 1e9 / noise_lines.len().max(1) as f64,
        noise_lines.len()
    );
    // Machine-readable lines for the comparison script.
    println!("RESULT lines {nl}");
    println!("RESULT e2e_lines_per_sec {:.0}", per_sec(nl, best[0]));
    println!(
        "RESULT parse_detect_lines_per_sec {:.0}",
        per_sec(nl, best[1])
    );
    if !keep {
        if let Some(dir) = path.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
