//! Parser for authentication lines of a syslog file (`auth.log`, `secure`, `mail.log`).
//!
//! [`parse_line`] recognises sshd, PAM and Dovecot authentication messages and returns an
//! [`AuthEvent`] borrowing from the line. Everything else (CRON, systemd, sudo commands,
//! kernel, ...) returns `None` after splitting the syslog header and comparing the program
//! name or the message's first bytes: no regex is involved at any stage.
//!
//! Guarantees:
//! - never panics, whatever the input (no indexing, only `get`/`split_*`/`find`);
//! - addresses are parsed with the standard library; an IPv4-mapped IPv6 address
//!   (`::ffff:192.0.2.1`) is reported as IPv4;
//! - attacker-controlled fields (user names) are located so that text inside them cannot
//!   change the reported address: the address is taken from the right of the message
//!   (`rfind`), after the user field, where only the daemon writes.
//!
//! Header formats accepted: classic BSD syslog (`Nov 21 20:14:01 host prog[123]: msg`) and
//! RFC 3339 (`2026-11-21T20:14:01.123456+00:00 host prog[123]: msg`).

mod dovecot;
mod pam;
mod sshd;
mod text;

use std::fmt;
use std::net::IpAddr;

/// What an authentication line says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthKind {
    /// A credential was tried and refused (`Failed password for ...`, PAM
    /// `authentication failure`, Dovecot `auth failed` / `Password mismatch`).
    Failure,
    /// The user name does not exist (`Invalid user X from ...`, Dovecot `unknown user`).
    InvalidUser,
    /// The user exists but is not allowed to log in (`User X from IP not allowed because ...`).
    NotAllowed,
    /// A login succeeded (`Accepted ...`, Dovecot `Login:`).
    Success,
    /// sshd: a connection that had started authenticating ended before success
    /// (`Connection closed by authenticating user ...`, `Disconnected from invalid user ...`).
    ConnectionClosed,
    /// sshd: too many attempts on one connection (`maximum authentication attempts
    /// exceeded`, `Disconnecting ...: Too many authentication failures`).
    MaxAttempts,
    /// PAM: `session opened for user X` (no address; informational).
    SessionOpened,
}

impl AuthKind {
    pub fn label(self) -> &'static str {
        match self {
            AuthKind::Failure => "failure",
            AuthKind::InvalidUser => "invalid_user",
            AuthKind::NotAllowed => "not_allowed",
            AuthKind::Success => "success",
            AuthKind::ConnectionClosed => "connection_closed",
            AuthKind::MaxAttempts => "max_attempts",
            AuthKind::SessionOpened => "session_opened",
        }
    }
}

/// Which family of daemon wrote the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthService {
    /// OpenSSH (`sshd`, `sshd-session`, `sshd-auth`).
    Sshd,
    /// A PAM module message (`pam_unix(SERVICE:TYPE): ...`) from any program.
    Pam,
    /// Dovecot login processes (`imap-login`, `pop3-login`, ...) and auth processes.
    Dovecot,
}

impl AuthService {
    pub fn label(self) -> &'static str {
        match self {
            AuthService::Sshd => "sshd",
            AuthService::Pam => "pam",
            AuthService::Dovecot => "dovecot",
        }
    }
}

impl fmt::Display for AuthService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One recognised authentication line. Strings borrow from the parsed line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthEvent<'a> {
    pub kind: AuthKind,
    pub service: AuthService,
    /// The user name as logged (attacker-controlled for failures). `None` when absent/empty.
    pub user: Option<&'a str>,
    /// Remote address. `None` when the line has none or it is a host name (PAM `rhost=`).
    pub ip: Option<IpAddr>,
    /// The line could be read with more than one address because client text (a user
    /// name) imitates the daemon's layout; `ip` is then `None`: nobody is blamed.
    pub ambiguous_address: bool,
    /// Remote port when logged (sshd).
    pub port: Option<u16>,
    /// sshd/Dovecot said the user does not exist (`... for invalid user X ...`).
    pub invalid_user: bool,
    /// How many attempts the line stands for (Dovecot `auth failed, N attempts`); else 1.
    pub attempts: u32,
    /// Authentication method when logged (`password`, `publickey`, `PLAIN`, ...).
    pub method: Option<&'a str>,
    /// The daemon-specific service name: the sshd program name, the PAM service
    /// (`pam_unix(vsftpd:auth)` gives `vsftpd`), or the Dovecot process (`imap-login`, `auth`,
    /// `auth-worker` without its pid).
    pub raw_service: &'a str,
    /// The syslog program (tag without `[pid]`).
    pub program: &'a str,
    /// The syslog host field.
    pub host: &'a str,
    /// The timestamp text as written (not interpreted).
    pub timestamp: &'a str,
}

/// The syslog header split off a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyslogHeader<'a> {
    pub timestamp: &'a str,
    pub host: &'a str,
    pub program: &'a str,
    pub message: &'a str,
}

/// Longest syslog tag looked at; longer tags are not auth daemons.
const MAX_TAG: usize = 64;
/// Longest host field accepted.
const MAX_HOST: usize = 256;

/// Splits `timestamp host tag: message`. Returns `None` for anything else.
///
/// Works on bytes and slices the `str` only at the ASCII separators it found (always
/// character boundaries), so the common case costs a few word-sized compares.
pub fn split_header(line: &str) -> Option<SyslogHeader<'_>> {
    let b = line.as_bytes();
    let ts_end = match *b.first()? {
        // RFC 3339: the timestamp has no space.
        c if c.is_ascii_digit() => rfc3339_end(b).or_else(|| memchr::memchr(b' ', b))?,
        // "Mmm dd hh:mm:ss " is exactly 15 bytes and a space.
        c if c.is_ascii_alphabetic() && b.get(15) == Some(&b' ') => 15,
        _ => return None,
    };
    let host_start = ts_end + 1;
    let after_ts = b.get(host_start..)?;
    let host_len = text::find_byte_short(after_ts.get(..after_ts.len().min(MAX_HOST))?, b' ')?;
    let tag_start = host_start + host_len + 1;
    let tag_area = b.get(tag_start..)?;
    let colon = text::find_byte_short(tag_area.get(..tag_area.len().min(MAX_TAG + 1))?, b':')?;
    if tag_area.get(colon + 1) != Some(&b' ') {
        return None;
    }
    let prog_len = text::find_byte_short(tag_area.get(..colon)?, b'[').unwrap_or(colon);
    Some(SyslogHeader {
        timestamp: line.get(..ts_end)?,
        host: line.get(host_start..host_start + host_len)?,
        program: line.get(tag_start..tag_start + prog_len)?,
        message: line.get(tag_start + colon + 2..)?,
    })
}

/// Index of the space ending an RFC 3339 timestamp, recognised by its fixed separators
/// so the search for the space starts at byte 19 instead of 0. `None` when the shape
/// differs; the caller then searches from the start.
fn rfc3339_end(b: &[u8]) -> Option<usize> {
    // A fixed-size array: constant indexes below are checked at compile time.
    let head: [u8; 20] = b.get(..20)?.try_into().ok()?;
    let shape = head[4] == b'-'
        && head[7] == b'-'
        && head[10] == b'T'
        && head[13] == b':'
        && head[16] == b':'
        && matches!(head[19], b'.' | b'Z' | b'+' | b'-');
    if !shape {
        return None;
    }
    // Positions 0..19 hold the fixed shape; the first space after it ends the stamp.
    let tail = b.get(19..b.len().min(48))?;
    Some(19 + text::find_byte_short(tail, b' ')?)
}

/// Parses one syslog line. `None` when the line is not an authentication event this module
/// knows, or is malformed. Never panics.
pub fn parse_line(line: &str) -> Option<AuthEvent<'_>> {
    let h = split_header(line)?;
    let msg = h.message;
    let prog = h.program.as_bytes();
    match prog.first()? {
        b's' if prog.starts_with(b"sshd") => {
            if msg.starts_with("pam_") {
                pam::parse(&h)
            } else {
                sshd::parse(&h)
            }
        }
        b'd' if prog == b"dovecot" => dovecot::parse(&h),
        _ if prog.ends_with(b"-login") => dovecot::parse_login(&h, h.program, msg),
        _ if msg.starts_with("pam_") => pam::parse(&h),
        _ => None,
    }
}

/// Parses an address; IPv4-mapped IPv6 becomes IPv4. Rejects over-long text cheaply.
pub(crate) fn parse_ip(s: &str) -> Option<IpAddr> {
    if s.is_empty() || s.len() > 45 {
        return None;
    }
    let ip: IpAddr = s.parse().ok()?;
    Some(match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    })
}

/// Leading decimal digits of `s` as a port.
pub(crate) fn parse_port(s: &str) -> Option<u16> {
    let end = s
        .as_bytes()
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len());
    s.get(..end)?.parse().ok()
}

/// `Some(s)` unless empty.
pub(crate) fn non_empty(s: &str) -> Option<&str> {
    if s.is_empty() {
        None
    } else {
        Some(s)
    }
}

impl<'a> AuthEvent<'a> {
    /// An event with the header's fields and defaults for the rest.
    pub(crate) fn from_header(
        h: &SyslogHeader<'a>,
        kind: AuthKind,
        service: AuthService,
        raw_service: &'a str,
    ) -> Self {
        AuthEvent {
            kind,
            service,
            user: None,
            ip: None,
            ambiguous_address: false,
            port: None,
            invalid_user: false,
            attempts: 1,
            method: None,
            raw_service,
            program: h.program,
            host: h.host,
            timestamp: h.timestamp,
        }
    }
}

#[cfg(test)]
mod tests;
