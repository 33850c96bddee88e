//! PAM module messages: `pam_MODULE(SERVICE:TYPE): TEXT`, written by any program.
//!
//! Recognised texts:
//! - `authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=IP  user=X`
//!   (Failure; `rhost` may be a host name or absent, then `ip` is `None`; client text in
//!   `ruser=`/`user=` never chooses the address, see `failure`);
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

/// `logname= uid=0 euid=0 tty=ssh ruser=R rhost=H  user=U` (pam_unix writes
/// `ruser=%s rhost=%s %s%s` with ` user=` only for a known name; pam_sss and others write
/// one space). R and U are whatever the program passed: vsftpd puts the FTP `USER` text in
/// both, so they may hold ` rhost=`; H is the program's (the peer address). Decision 276:
/// every ` rhost=` after `ruser=` is a possible split; a split fits when H is one token
/// followed by nothing, a space, or ` user=`/`  user=`. One fitting split is the address.
/// Several: only the split where R equals U (the copy vsftpd writes) is taken, as client
/// text cannot make a second such split; otherwise the address is `None` (nobody is
/// blamed; the detector counts it as an unattributed failure).
fn failure<'a>(h: &SyslogHeader<'a>, service: &'a str, fields: &'a str) -> Option<AuthEvent<'a>> {
    let mut ev = AuthEvent::from_header(h, AuthKind::Failure, AuthService::Pam, service);
    // The fixed layout: `ruser=` after `tty=` (both written by the program, before any
    // client text). Without it, the whole text is searched.
    let tail = find(fields, " tty=")
        .and_then(|t| {
            let after = fields.get(t..)?;
            let r = find(after, " ruser=")?;
            after.get(r + 7..)
        })
        .unwrap_or(fields);
    let mut first: Option<Split<'a>> = None;
    let mut count = 0usize;
    let mut agreeing: Option<Split<'a>> = None;
    let mut agree_count = 0usize;
    let mut from = 0;
    while let Some(i) = tail.get(from..).and_then(|t| find(t, " rhost=")) {
        let at = from + i;
        from = at + 7;
        let Some(split) = split_at(tail, at) else {
            continue;
        };
        count += 1;
        first = first.or(Some(split));
        if split.user.is_some_and(|u| u == split.ruser) {
            agree_count += 1;
            agreeing = Some(split);
        }
    }
    let chosen = match (count, agree_count) {
        (1, _) => first,
        (_, 1) => agreeing,
        _ => None,
    };
    if let Some(c) = chosen {
        ev.ip = parse_ip(c.rhost);
        ev.user = c.user.and_then(|u| non_empty(u.trim()));
    } else if count > 1 {
        // Several splits and no single agreeing one: the user is as unknown as the address.
        ev.user = None;
        ev.ambiguous_address = true;
    } else if let Some(i) = find(fields, " user=") {
        ev.user = non_empty(fields.get(i + 6..)?.trim());
    }
    Some(ev)
}

/// One reading of `ruser=R rhost=H[  user=U]`.
#[derive(Clone, Copy)]
struct Split<'a> {
    ruser: &'a str,
    rhost: &'a str,
    user: Option<&'a str>,
}

/// The reading with ` rhost=` at `at` of `tail` (the text after `ruser=`), if the text
/// after the host is what the program writes there.
fn split_at(tail: &str, at: usize) -> Option<Split<'_>> {
    let ruser = tail.get(..at)?;
    let v = tail.get(at + 7..)?;
    let end = find_byte(v, b' ').unwrap_or(v.len());
    let rhost = v.get(..end)?;
    let after = v.get(end..)?;
    let user = if after.is_empty() || after == " " {
        None
    } else if let Some(u) = after
        .strip_prefix("  user=")
        .or_else(|| after.strip_prefix(" user="))
    {
        Some(u)
    } else {
        return None;
    };
    Some(Split { ruser, rhost, user })
}
