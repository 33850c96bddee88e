//! Dovecot messages (`dovecot[pid]: PROCESS: TEXT`, or a login process as the syslog tag).
//!
//! Login processes (`imap-login`, `pop3-login`, `submission-login`, `managesieve-login`):
//! - `Login: user=<X>, method=PLAIN, rip=IP, lip=..., ...` (Success);
//! - `Disconnected (auth failed, N attempts in S secs): user=<X>, method=PLAIN, rip=IP, ...`,
//!   `Aborted login (auth failed, ...)`, `Login aborted: ... (auth failed, ...)` (Failure,
//!   `attempts` = N).
//!
//! Auth processes (`auth`, `auth-worker(N)`), logged with `auth_verbose=yes`:
//! - `DRIVER(USER,IP[,<SESSION>]): Password mismatch` / `... failed ...` (Failure);
//! - `DRIVER(USER,IP[,<SESSION>]): unknown user` (InvalidUser).
//!
//! The login address is taken from the right (`rfind(", rip=")`), after the user-supplied
//! name. An auth process's address is the `,IP` before `): ` only when a single such
//! reading exists (a user name or a logged password may hold `,IP): `; decision 277).

use super::text::{contains, find, find_byte, rfind, rsplit_byte, split_once};
use std::net::IpAddr;

use super::{non_empty, parse_ip, AuthEvent, AuthKind, AuthService, SyslogHeader};

/// Cap on the attempts one line may stand for.
const MAX_ATTEMPTS_PER_LINE: u32 = 1_000;

pub(super) fn parse<'a>(h: &SyslogHeader<'a>) -> Option<AuthEvent<'a>> {
    let (process, text) = split_once(h.message, ": ")?;
    if process.is_empty() || process.len() > 48 || find_byte(process, b' ').is_some() {
        return None;
    }
    if process.ends_with("-login") {
        parse_login(h, process, text)
    } else if process.starts_with("auth") {
        parse_auth(h, process, text)
    } else {
        None
    }
}

/// A login process's text.
pub(super) fn parse_login<'a>(
    h: &SyslogHeader<'a>,
    process: &'a str,
    text: &'a str,
) -> Option<AuthEvent<'a>> {
    let (kind, attempts) = if text.starts_with("Login: ") {
        (AuthKind::Success, 1)
    } else {
        let at = find(text, "(auth failed, ")?;
        let n = text.get(at + 14..)?;
        let end = n
            .as_bytes()
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(n.len());
        let attempts = n
            .get(..end)
            .and_then(|d| d.get(..d.len().min(9)))
            .and_then(|d| d.parse::<u32>().ok())
            .unwrap_or(1)
            .clamp(1, MAX_ATTEMPTS_PER_LINE);
        (AuthKind::Failure, attempts)
    };
    let rip_at = rfind(text, ", rip=")?;
    let rip = text.get(rip_at + 6..)?;
    let rip_end = find_byte(rip, b',').unwrap_or(rip.len());
    let ip = parse_ip(rip.get(..rip_end)?)?;
    let head = text.get(..rip_at)?;
    let mut ev = AuthEvent::from_header(h, kind, AuthService::Dovecot, process);
    ev.ip = Some(ip);
    ev.attempts = attempts;
    if let Some(u) = find(head, "user=<") {
        let fields = head.get(u + 6..)?;
        // The last ">, method=" before rip ends the user name; else the last '>'.
        let (user, method) = match rfind(fields, ">, method=") {
            Some(m) => (fields.get(..m)?, fields.get(m + 10..)),
            None => (
                fields.get(..memchr::memrchr(b'>', fields.as_bytes())?)?,
                None,
            ),
        };
        ev.user = non_empty(user);
        ev.method = method.and_then(|m| non_empty(m.split(',').next().unwrap_or("")));
    }
    Some(ev)
}

/// An auth process's text: `[Info: ]DRIVER(USER,IP[,<SESSION>]): REASON`.
fn parse_auth<'a>(h: &SyslogHeader<'a>, process: &'a str, text: &'a str) -> Option<AuthEvent<'a>> {
    let text = strip_level(text);
    let open = find_byte(text, b'(')?;
    let driver = text.get(..open)?;
    if driver.is_empty() || driver.len() > 32 || find_byte(driver, b' ').is_some() {
        return None;
    }
    // The user name (before the address) and, with `auth_verbose_passwords`, the given
    // password (in the reason, after it) are client text that may hold `,IP): `. Every
    // `): ` whose arguments end in `,IP[,<session>]` is a reading; a client can add one on
    // either side of the real one, so only a single reading names an address (decision
    // 277): several blame nobody.
    let mut reading: Option<(&str, &str, IpAddr)> = None;
    let mut readings = 0usize;
    let mut from = open + 1;
    while let Some(i) = text.get(from..).and_then(|t| find(t, "): ")) {
        let close = from + i;
        from = close + 3;
        let Some((args, reason)) = text.get(open + 1..close).zip(text.get(close + 3..)) else {
            continue;
        };
        // Drop a trailing ",<session>" the daemon appends.
        let args = match (args.ends_with('>'), rfind(args, ",<")) {
            (true, Some(s)) => args.get(..s).unwrap_or(args),
            _ => args,
        };
        if let Some((user, ip)) = rsplit_byte(args, b',').and_then(|(u, t)| Some((u, parse_ip(t)?)))
        {
            readings += 1;
            reading = Some((user, reason, ip));
        }
    }
    let (user, reason, ip) = reading?;
    let kind = if contains(reason, "unknown user") {
        AuthKind::InvalidUser
    } else if contains(reason, "ismatch")
        || contains(reason, "failed")
        || contains(reason, "Authentication failure")
    {
        AuthKind::Failure
    } else {
        return None;
    };
    let (user, ip) = if readings == 1 {
        (user, Some(ip))
    } else {
        ("", None)
    };
    // `auth-worker(4321)` -> `auth-worker`: the pid is not part of the service name.
    let name = match find_byte(process, b'(') {
        Some(i) => process.get(..i)?,
        None => process,
    };
    let mut ev = AuthEvent::from_header(h, kind, AuthService::Dovecot, name);
    ev.user = non_empty(user);
    ev.ip = ip;
    ev.ambiguous_address = readings > 1;
    ev.invalid_user = kind == AuthKind::InvalidUser;
    Some(ev)
}

fn strip_level(text: &str) -> &str {
    for p in ["Info: ", "Error: ", "Warning: ", "Debug: "] {
        if let Some(r) = text.strip_prefix(p) {
            return r;
        }
    }
    text
}
