//! OpenSSH messages. The first byte of the message selects at most two prefix compares.
//!
//! sshd writes the user name (attacker-controlled, up to 100 bytes) before the address, so
//! the address is always located from the right: `rfind(" from ")` or `rfind(" port ")`.

use super::text::{contains, find_byte, rfind, rsplit_byte, split_byte, split_once};
use super::{non_empty, parse_ip, parse_port, AuthEvent, AuthKind, AuthService, SyslogHeader};

pub(super) fn parse<'a>(h: &SyslogHeader<'a>) -> Option<AuthEvent<'a>> {
    let msg = h.message;
    match msg.as_bytes().first()? {
        b'F' => {
            let rest = msg.strip_prefix("Failed ")?;
            method_for_from(h, AuthKind::Failure, rest)
        }
        b'A' => {
            let rest = msg.strip_prefix("Accepted ")?;
            method_for_from(h, AuthKind::Success, rest)
        }
        b'I' => {
            let rest = msg
                .strip_prefix("Invalid user ")
                .or_else(|| msg.strip_prefix("Illegal user "))?;
            let mut ev = user_from(h, AuthKind::InvalidUser, rest)?;
            ev.invalid_user = true;
            Some(ev)
        }
        b'U' => {
            // "User X from IP not allowed because ..."
            let rest = msg.strip_prefix("User ")?;
            let cut = rfind(rest, " not allowed because ")?;
            user_from(h, AuthKind::NotAllowed, rest.get(..cut)?)
        }
        b'C' => {
            let rest = msg.strip_prefix("Connection closed by ")?;
            closed(h, AuthKind::ConnectionClosed, rest)
        }
        b'D' => {
            if let Some(rest) = msg.strip_prefix("Disconnected from ") {
                closed(h, AuthKind::ConnectionClosed, rest)
            } else {
                // "Disconnecting authenticating user root 192.0.2.1 port 22: Too many
                // authentication failures [preauth]"
                let rest = msg.strip_prefix("Disconnecting ")?;
                if !contains(rest, "Too many authentication failures") {
                    return None;
                }
                closed(h, AuthKind::MaxAttempts, rest)
            }
        }
        b'e' => {
            let rest = msg.strip_prefix("error: maximum authentication attempts exceeded for ")?;
            let (invalid, rest) = strip_invalid(rest);
            let mut ev = user_from(h, AuthKind::MaxAttempts, rest)?;
            ev.invalid_user = invalid;
            Some(ev)
        }
        _ => None,
    }
}

/// `METHOD for [invalid user ]USER from IP port N ssh2[: KEY]`
fn method_for_from<'a>(
    h: &SyslogHeader<'a>,
    kind: AuthKind,
    rest: &'a str,
) -> Option<AuthEvent<'a>> {
    let (method, rest) = split_once(rest, " for ")?;
    if method.is_empty() || find_byte(method, b' ').is_some() {
        return None;
    }
    let (invalid, rest) = strip_invalid(rest);
    let mut ev = user_from(h, kind, rest)?;
    ev.method = Some(method);
    ev.invalid_user = invalid;
    Some(ev)
}

fn strip_invalid(rest: &str) -> (bool, &str) {
    match rest.strip_prefix("invalid user ") {
        Some(r) => (true, r),
        None => (false, rest),
    }
}

/// `USER from IP[ port N][ ...]`: the last " from " wins, so a user name containing
/// " from X" cannot choose the address.
fn user_from<'a>(h: &SyslogHeader<'a>, kind: AuthKind, rest: &'a str) -> Option<AuthEvent<'a>> {
    let at = rfind(rest, " from ")?;
    let user = rest.get(..at)?;
    let after = rest.get(at + 6..)?;
    let (ip_text, tail) = match split_byte(after, b' ') {
        Some((ip, tail)) => (ip, tail),
        None => (after, ""),
    };
    let ip = parse_ip(ip_text)?;
    let port = tail.strip_prefix("port ").and_then(parse_port);
    let mut ev = AuthEvent::from_header(h, kind, AuthService::Sshd, h.program);
    ev.user = non_empty(user);
    ev.ip = Some(ip);
    ev.port = port;
    Some(ev)
}

/// `(authenticating|invalid) user USER IP port N[...]` (the connection-end messages).
fn closed<'a>(h: &SyslogHeader<'a>, kind: AuthKind, rest: &'a str) -> Option<AuthEvent<'a>> {
    let (invalid, rest) = if let Some(r) = rest.strip_prefix("authenticating user ") {
        (false, r)
    } else {
        (true, rest.strip_prefix("invalid user ")?)
    };
    let at = rfind(rest, " port ")?;
    let before = rest.get(..at)?;
    let port = rest.get(at + 6..).and_then(parse_port);
    let (user, ip_text) = rsplit_byte(before, b' ')?;
    let ip = parse_ip(ip_text)?;
    let mut ev = AuthEvent::from_header(h, kind, AuthService::Sshd, h.program);
    ev.user = non_empty(user);
    ev.ip = Some(ip);
    ev.port = port;
    ev.invalid_user = invalid;
    Some(ev)
}
