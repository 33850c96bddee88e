//! PAM module messages: `pam_MODULE(SERVICE:TYPE): TEXT`, written by any program.
//!
//! Recognised texts:
//! - `authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=IP  user=X`
//!   (Failure; `rhost` may be a host name or absent, then `ip` is `None`);
//! - `session opened for user X[(uid=N)] by ...` (SessionOpened, no address).

use super::text::{find, find_byte, rsplit_byte, split_once};
use super::{non_empty, parse_ip, AuthEvent, AuthKind, AuthService, SyslogHeader};

pub(super) fn parse<'a>(h: &SyslogHeader<'a>) -> Option<AuthEvent<'a>> {
    let msg = h.message;
    let open = find_byte(msg, b'(')?;
    let module = msg.get(..open)?;
    if !module.starts_with("pam_") || module.len() > 32 {
        return None;
    }
    let inner_and_rest = msg.get(open + 1..)?;
    let (inner, text) = split_once(inner_and_rest, "): ")?;
    let (service, _kind) = rsplit_byte(inner, b':')?;
    if service.is_empty() || service.len() > 64 {
        return None;
    }
    match text.as_bytes().first()? {
        b'a' => {
            let fields = text.strip_prefix("authentication failure;")?;
            failure(h, service, fields)
        }
        b's' => {
            let rest = text.strip_prefix("session opened for user ")?;
            let end = rest
                .as_bytes()
                .iter()
                .position(|&b| b == b'(' || b == b' ')
                .unwrap_or(rest.len());
            let mut ev =
                AuthEvent::from_header(h, AuthKind::SessionOpened, AuthService::Pam, service);
            ev.user = non_empty(rest.get(..end)?);
            Some(ev)
        }
        _ => None,
    }
}

/// `logname= uid=0 euid=0 tty=ssh ruser= rhost=IP  user=X`. The first ` rhost=` is used
/// (the daemon writes it before the user-supplied `user=`); `user=` is the rest of the line.
fn failure<'a>(h: &SyslogHeader<'a>, service: &'a str, fields: &'a str) -> Option<AuthEvent<'a>> {
    let mut ev = AuthEvent::from_header(h, AuthKind::Failure, AuthService::Pam, service);
    let after_rhost = match find(fields, " rhost=") {
        Some(i) => {
            let v = fields.get(i + 7..)?;
            let end = find_byte(v, b' ').unwrap_or(v.len());
            ev.ip = parse_ip(v.get(..end)?);
            v.get(end..)?
        }
        None => fields,
    };
    if let Some(i) = find(after_rhost, " user=") {
        ev.user = non_empty(after_rhost.get(i + 6..)?.trim());
    }
    Some(ev)
}
