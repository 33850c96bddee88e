//! Parser of MTA log lines: Exim `mainlog` and Postfix `mail.log` (syslog).
//!
//! [`parse_line`] returns a [`MailEvent`] borrowing from the line, or `None` for lines that
//! say nothing about a message, an SMTP authentication or a relay refusal (daemon start,
//! queue runs, connection notices, other programs in a shared syslog file).
//!
//! Guarantees:
//! - never panics, whatever the input (no indexing, only `get`/`split_*`/`find`);
//! - no regex, no allocation: fields are located with `find` and `split`, so a line is
//!   parsed in a few hundred nanoseconds (the reader's goal is 500,000 lines/s);
//! - fields written by the client (sender and recipient addresses, HELO names, subjects)
//!   cannot forge a field the MTA writes: Exim's `<=` line is cut before ` T="` (the
//!   subject) and before ` for ` (the recipients), and `H=`, `A=`, `U=` are taken only from
//!   that prefix, after the sender; a sender address cannot contain a space. The client
//!   address of every Exim line kind (`<=`, authenticator failures, relay refusals) is read
//!   by one function, `exim_host_ip`, which never takes a HELO's text (decision 275).
//!   Postfix fields
//!   are taken from the `key=value, ` list the daemon writes, left to right;
//! - addresses are the standard library's; IPv4-mapped IPv6 is reported as IPv4.
//!
//! Exim lines: `YYYY-MM-DD HH:MM:SS[.mmm] [+ZZZZ] [[pid]] <id> <= sender ...` (message
//! arrival), `=>` (delivery), `->` (further address delivered in the same transaction),
//! `==` (deferral), `**` (bounce), `Completed`, `<authenticator> authenticator failed for
//! ...` and `... rejected RCPT <addr>: ...`. Postfix lines: syslog header, then
//! `postfix[-instance]/<daemon>[pid]: <id>: client=..., sasl_username=...`, `from=<...>,
//! size=..., nrcpt=N`, `uid=N from=<...>` (pickup), `to=<...>[, orig_to=<...>], relay=...,
//! status=sent|deferred|bounced`, `removed`, `warning: ...: SASL ... authentication
//! failed`, and `NOQUEUE: reject: RCPT from ...: ... Relay access denied; from=<..> to=<..>`.

use std::net::IpAddr;

/// Which MTA wrote the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mta {
    Exim,
    Postfix,
}

impl Mta {
    pub fn label(self) -> &'static str {
        match self {
            Mta::Exim => "exim",
            Mta::Postfix => "postfix",
        }
    }
}

/// The time written at the start of a line, in the log's local time (no zone) unless
/// `offset_secs` is given (Exim with `log_timezone`, RFC 3339 syslog headers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineTime {
    /// Year, or `None` for a BSD syslog header (which has none).
    pub year: Option<i16>,
    pub month: i8,
    pub day: i8,
    pub hour: i8,
    pub minute: i8,
    pub second: i8,
    pub micros: i32,
    pub offset_secs: Option<i32>,
}

/// How a delivery went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Sent,
    Deferred,
    Bounced,
}

/// What a line says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MailEvent<'a> {
    /// A message entered the queue (Exim `<=`; Postfix `client=` from smtpd, `uid=` from
    /// pickup and `from=` from qmgr each carry part of it: the ledger merges them by queue
    /// id).
    Received {
        queue_id: &'a str,
        /// Envelope sender (`""` for a bounce, `<>`); `None` when the line does not say.
        sender: Option<&'a str>,
        /// SMTP AUTH identity (Exim `A=name:id`, Postfix `sasl_username=`).
        auth: Option<&'a str>,
        /// Client address of an SMTP submission.
        client: Option<IpAddr>,
        /// Local submitter (Exim `U=user`, Postfix pickup `uid=N`).
        local_user: Option<&'a str>,
        /// Recipient count when the line gives it (Postfix `nrcpt=`, Exim `for a b c` with
        /// `+received_recipients`).
        recipients: Option<u32>,
        /// Exim `R=<id>`: a bounce generated for another message.
        bounce_of: Option<&'a str>,
    },
    /// The outcome of one recipient.
    Delivery {
        queue_id: &'a str,
        outcome: Outcome,
        recipient: &'a str,
        /// The address the message was sent to before a redirect (Exim `a <b>`, Postfix
        /// `orig_to=`), when it differs from `recipient`: a forward.
        original: Option<&'a str>,
        /// Delivered to another host over SMTP (Exim `T=...smtp` or an `H=` host, Postfix a
        /// relay other than local, virtual, lmtp to a local socket or a pipe).
        remote: bool,
    },
    /// The message left the queue (Exim `Completed`, Postfix `removed`).
    Completed { queue_id: &'a str },
    /// An SMTP AUTH attempt failed.
    AuthFailed {
        client: Option<IpAddr>,
        /// The identity tried, when the MTA logs it.
        user: Option<&'a str>,
    },
    /// A recipient was refused because relaying is not allowed.
    RelayDenied {
        client: Option<IpAddr>,
        sender: Option<&'a str>,
        recipient: Option<&'a str>,
    },
}

/// A parsed line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed<'a> {
    pub mta: Mta,
    pub time: Option<LineTime>,
    pub event: MailEvent<'a>,
}

/// Parses one line (see the module documentation).
pub fn parse_line(line: &str) -> Option<Parsed<'_>> {
    let line = line.trim_end_matches(['\n', '\r']);
    if let Some((time, rest)) = exim_header(line) {
        let event = exim_event(rest)?;
        return Some(Parsed {
            mta: Mta::Exim,
            time: Some(time),
            event,
        });
    }
    let (time, prog, msg) = syslog_header(line)?;
    let (base, daemon) = prog.split_once('/')?;
    if !base.starts_with("postfix") {
        return None;
    }
    let event = postfix_event(daemon, msg)?;
    Some(Parsed {
        mta: Mta::Postfix,
        time,
        event,
    })
}

// ---------------------------------------------------------------------------------------
// Headers

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `YYYY-MM-DD HH:MM:SS[.mmm]` at the start of `s`.
fn iso_time(s: &str, sep: u8) -> Option<(LineTime, &str)> {
    let b = s.as_bytes();
    if b.len() < 19 || b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    if b.get(10) != Some(&sep) || b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return None;
    }
    let mut t = LineTime {
        year: Some(num(s.get(0..4)?)?),
        month: num(s.get(5..7)?)?,
        day: num(s.get(8..10)?)?,
        hour: num(s.get(11..13)?)?,
        minute: num(s.get(14..16)?)?,
        second: num(s.get(17..19)?)?,
        micros: 0,
        offset_secs: None,
    };
    let mut rest = s.get(19..)?;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        let digits = frac.get(..n.min(6))?;
        let mut micros: i32 = num(digits)?;
        for _ in digits.len()..6 {
            micros *= 10;
        }
        t.micros = micros;
        rest = frac.get(n..)?;
    }
    Some((t, rest))
}

/// `+HHMM` / `+HH:MM` / `Z`.
fn offset(s: &str) -> Option<(i32, &str)> {
    if let Some(r) = s.strip_prefix(['Z', 'z']) {
        return Some((0, r));
    }
    let sign = match s.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let h: i32 = num(s.get(1..3)?)?;
    let (m, rest) = if s.as_bytes().get(3) == Some(&b':') {
        (num::<i32>(s.get(4..6)?)?, s.get(6..)?)
    } else {
        (num::<i32>(s.get(3..5)?)?, s.get(5..)?)
    };
    if h > 23 || m > 59 {
        return None;
    }
    Some((sign * (h * 3600 + m * 60), rest))
}

/// Exim's header: time, optional zone, optional `[pid]`; returns the message part.
fn exim_header(line: &str) -> Option<(LineTime, &str)> {
    let (mut t, rest) = iso_time(line, b' ')?;
    let mut rest = rest.strip_prefix(' ')?;
    if let Some((off, r)) = offset(rest).filter(|(_, r)| r.starts_with(' ')) {
        t.offset_secs = Some(off);
        rest = r.get(1..)?;
    }
    if let Some(r) = rest.strip_prefix('[') {
        let end = r.find("] ")?;
        num::<u32>(r.get(..end)?)?;
        rest = r.get(end + 2..)?;
    }
    Some((t, rest))
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Syslog header (BSD `Mmm dd hh:mm:ss host prog[pid]: ` or RFC 3339
/// `YYYY-MM-DDThh:mm:ss[.f]±zz:zz host prog[pid]: `): time, program, message.
fn syslog_header(line: &str) -> Option<(Option<LineTime>, &str, &str)> {
    let (time, rest) = if let Some((mut t, rest)) = iso_time(line, b'T') {
        let (off, rest) = offset(rest)?;
        t.offset_secs = Some(off);
        (Some(t), rest.strip_prefix(' ')?)
    } else {
        let month = MONTHS.iter().position(|m| line.starts_with(m))?;
        let rest = line.get(4..)?;
        let rest = rest.trim_start_matches(' ');
        let (day, rest) = rest.split_once(' ')?;
        let hms = rest.get(..8)?;
        let mut it = hms.split(':');
        let t = LineTime {
            year: None,
            month: i8::try_from(month + 1).ok()?,
            day: num(day)?,
            hour: num(it.next()?)?,
            minute: num(it.next()?)?,
            second: num(it.next()?)?,
            micros: 0,
            offset_secs: None,
        };
        (Some(t), rest.get(8..)?.strip_prefix(' ')?)
    };
    let (_host, rest) = rest.split_once(' ')?;
    let (prog, msg) = rest.split_once(": ")?;
    let prog = match prog.find('[') {
        Some(i) => prog.get(..i)?,
        None => prog,
    };
    Some((time, prog, msg))
}

// ---------------------------------------------------------------------------------------
// Exim

/// An Exim message id: `1xVY9a-0006zp-2x` (4.97+: 6-11-4) or `1xVY9a-0006zp-2x`
/// (older: 6-6-2). Letters, digits and two dashes.
fn is_exim_id(s: &str) -> bool {
    let mut parts = s.split('-');
    let (Some(a), Some(b), Some(c), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    a.len() == 6
        && (6..=11).contains(&b.len())
        && (2..=4).contains(&c.len())
        && s.bytes().all(|x| x.is_ascii_alphanumeric() || x == b'-')
}

/// The value of `KEY=` in `s` (up to the next space); the key must start `s` or follow a
/// space.
fn field<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(i) = s.get(from..)?.find(key) {
        let at = from + i;
        if at == 0 || s.as_bytes().get(at - 1) == Some(&b' ') {
            let v = s.get(at + key.len()..)?;
            return Some(v.split(' ').next().unwrap_or(""));
        }
        from = at + key.len();
    }
    None
}

/// The client address of an Exim host part. `s` starts where Exim writes the host (after
/// `H=` or `authenticator failed for `, with or without `H=`) and runs to the end of the
/// line. Exim writes `[name ][(helo) ][ip][:port]`, then server fields (` I=[ip]:port`,
/// ` U=ident`, ` P=...`, `: 535 ...`), and only then more client text (sender, subject,
/// `set_id=`). This one function reads the host for every line kind.
///
/// Rule (decision 275): tokens separated by single spaces, in this order only: an optional
/// host name (no brackets or parentheses: a DNS name Exim verified), an optional HELO in
/// parentheses, then the address token `[ip]`, `[ip]:port` (either may end in `:`). The
/// HELO is the client's word and, with HELO checking on (Exim's default), holds no space,
/// so the address is the token right after it and an IP-literal HELO (`([192.0.2.1])`) is
/// never read. With `helo_accept_junk_hosts` a HELO may hold spaces, such as
/// `x) [192.0.2.1]:1 (y`: the token after `(x)` would then be the HELO's text. Exim writes
/// the real address after the HELO's closing `) `, so a later token `[ip]` that follows a
/// token ending in `)` means the HELO was not what it seemed: no address (nobody is
/// blamed) rather than a guess. Text after the host (a `set_id` or sender holding
/// `) [ip]`) can make the line blame nobody, never someone else.
fn exim_host_ip(s: &str) -> Option<IpAddr> {
    let s = s.strip_prefix("H=").unwrap_or(s);
    let mut tokens = s.split(' ');
    // 0: nothing read, 1: a name read, 2: a HELO read.
    let mut seen = 0;
    for tok in tokens.by_ref().take(3) {
        if let Some(addr) = exim_addr_token(tok) {
            if seen == 2 && helo_was_junk(tokens) {
                return None;
            }
            return Some(addr);
        }
        if seen < 2 && tok.len() >= 2 && tok.starts_with('(') && tok.ends_with(')') {
            seen = 2;
        } else if seen == 0 && !tok.is_empty() && !tok.contains(['(', ')', '[', ']']) {
            seen = 1;
        } else {
            return None;
        }
    }
    None
}

/// Whether the tokens after the address hold another `[ip]` token right after a token
/// ending in `)`: the shape Exim writes after a HELO, so the first address read was inside
/// a HELO holding spaces.
fn helo_was_junk<'a>(tokens: impl Iterator<Item = &'a str>) -> bool {
    let mut after_paren = false;
    for tok in tokens {
        if after_paren && exim_addr_token(tok).is_some() {
            return true;
        }
        after_paren = tok.ends_with(')');
    }
    false
}

/// `[ip]`, `[ip]:port`, `[ip]:` or `[ip]:port:` as Exim writes a client address.
fn exim_addr_token(tok: &str) -> Option<IpAddr> {
    let inner = tok.strip_prefix('[')?;
    let close = inner.find(']')?;
    let tail = inner.get(close + 1..)?;
    let tail = tail.strip_suffix(':').unwrap_or(tail);
    if let Some(port) = tail.strip_prefix(':') {
        num::<u16>(port)?;
    } else if !tail.is_empty() {
        return None;
    }
    ip(inner.get(..close)?)
}

fn ip(s: &str) -> Option<IpAddr> {
    let s = s.strip_prefix("IPv6:").unwrap_or(s);
    match s.parse::<IpAddr>().ok()? {
        IpAddr::V6(v6) => Some(match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }),
        v4 => Some(v4),
    }
}

fn exim_event(rest: &str) -> Option<MailEvent<'_>> {
    let (first, tail) = rest.split_once(' ').unwrap_or((rest, ""));
    if is_exim_id(first) {
        return exim_message_line(first, tail);
    }
    if let Some(i) = rest.find(" authenticator failed for ") {
        // `... for [H=][name ](helo) [ip]:port I=...: 535 ... (set_id=user)`
        let client = rest.get(i + 26..).and_then(exim_host_ip);
        let user = rest
            .rfind("(set_id=")
            .and_then(|j| rest.get(j + 8..))
            .and_then(|v| v.strip_suffix(')'));
        return Some(MailEvent::AuthFailed { client, user });
    }
    if rest.starts_with("H=") {
        // `H=(helo) [ip] F=<sender> rejected RCPT <rcpt>: relay not permitted`
        let r = rest.find(" rejected RCPT <")?;
        let reason = rest.get(r..)?;
        let close = reason.find(">: ")?;
        let why = reason.get(close + 3..)?;
        if !why.to_ascii_lowercase().contains("relay") {
            return None;
        }
        let head = rest.get(..r)?;
        let recipient = reason.get(16..close);
        let sender = head
            .rfind(" F=<")
            .and_then(|f| head.get(f + 4..))
            .and_then(|v| v.strip_suffix('>'));
        let client = exim_host_ip(rest);
        return Some(MailEvent::RelayDenied {
            client,
            sender,
            recipient,
        });
    }
    None
}

fn exim_message_line<'a>(id: &'a str, tail: &'a str) -> Option<MailEvent<'a>> {
    let (flag, rest) = tail.split_once(' ').unwrap_or((tail, ""));
    match flag {
        "<=" => {
            // A quoted local part may hold spaces: `"a b"@example.com`.
            let split = if rest.starts_with('"') {
                let close = rest.get(1..)?.find('"')? + 1;
                rest.get(close..)?.find(' ').map(|i| i + close)
            } else {
                rest.find(' ')
            };
            let (sender, fields) = match split {
                Some(i) => (rest.get(..i)?, rest.get(i + 1..)?),
                None => (rest, ""),
            };
            let sender = if sender == "<>" { "" } else { sender };
            // Cut off client-written parts: the subject and the recipient list.
            let cut = [" T=\"", " for ", " from <"]
                .iter()
                .filter_map(|k| fields.find(k))
                .min()
                .unwrap_or(fields.len());
            let own = fields.get(..cut)?;
            let auth = field(own, "A=").and_then(|a| {
                // `A=plain:alice@example.com`, `A=dovecot_login:alice`
                a.split_once(':')
                    .map(|(_, id)| id)
                    .filter(|id| !id.is_empty())
            });
            let recipients = fields.rfind(" for ").and_then(|f| {
                let list = fields.get(f + 5..)?;
                u32::try_from(list.split(' ').filter(|x| !x.is_empty()).count()).ok()
            });
            Some(MailEvent::Received {
                queue_id: id,
                sender: Some(sender),
                auth,
                client: own
                    .find(" H=")
                    .and_then(|h| fields.get(h + 1..))
                    .or_else(|| fields.strip_prefix("H=").map(|_| fields))
                    .and_then(exim_host_ip),
                local_user: field(own, "U="),
                recipients,
                bounce_of: field(own, "R=").filter(|r| is_exim_id(r)),
            })
        }
        "=>" | "->" | "==" | "**" => {
            let outcome = match flag {
                "==" => Outcome::Deferred,
                "**" => Outcome::Bounced,
                _ => Outcome::Sent,
            };
            let (recipient, after) = rest.split_once(' ').unwrap_or((rest, ""));
            if recipient.is_empty() {
                return None;
            }
            // `someone@example.org <fwd@example.com> R=...`: the parent address.
            let parent = after
                .strip_prefix('<')
                .and_then(|p| p.split_once('>'))
                .map(|(p, _)| p);
            let fields = after;
            let transport = field(fields, "T=").unwrap_or("");
            let remote = transport.contains("smtp")
                || field(fields, "H=").is_some()
                || transport.contains("remote");
            // `user <user@example.com>` is a local delivery to the local part of the
            // address in brackets, not a forward.
            let (recipient, original) = match parent {
                Some(p) if !recipient.contains('@') => (p, None),
                Some(p) if !p.eq_ignore_ascii_case(recipient) => (recipient, Some(p)),
                _ => (recipient, None),
            };
            // A pipe or file delivery (`|/usr/bin/x`, `/var/mail/x`) is local.
            Some(MailEvent::Delivery {
                queue_id: id,
                outcome,
                recipient,
                original,
                remote: remote && !recipient.starts_with(['|', '/']),
            })
        }
        "Completed" => Some(MailEvent::Completed { queue_id: id }),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------
// Postfix

/// Postfix queue ids: short (hex, 10-12) or long (`4Fabc...` base-52, up to 20).
fn is_postfix_id(s: &str) -> bool {
    (5..=20).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// The value of `key=` (with `=`) in a Postfix `k=v, k=v` (or `k=v k=v`) list that
/// starts `s`, read left to right: a `<...>` value is taken whole (so a client-written
/// address cannot hide a later field), others end at `,` or a space. The walk stops at the
/// first token that is not `k=v`.
fn pf_field<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let mut rest = s;
    loop {
        let eq = rest.find('=')?;
        let k = rest.get(..=eq)?;
        if k.contains([' ', ',']) {
            return None;
        }
        let v = rest.get(eq + 1..)?;
        let (value, after) = if let Some(inner) = v.strip_prefix('<') {
            let e = inner.find('>')?;
            (inner.get(..e)?, inner.get(e + 1..)?)
        } else {
            let e = v.find([',', ' ']).unwrap_or(v.len());
            (v.get(..e)?, v.get(e..)?)
        };
        if k == key {
            return Some(value);
        }
        rest = after.trim_start_matches([',', ' ']);
    }
}

/// The value of `key=` anywhere in `s` after a space (first occurrence: used for fields
/// the daemon writes before any client text, such as `sasl_username=` in a warning).
fn pf_find<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let i = s.find(key)?;
    let v = s.get(i + key.len()..)?;
    let e = v.find([',', ' ']).unwrap_or(v.len());
    v.get(..e)
}

/// `host[ip]` -> ip.
fn bracket_ip(s: &str) -> Option<IpAddr> {
    let open = s.find('[')?;
    let close = s.get(open..)?.find(']')? + open;
    ip(s.get(open + 1..close)?)
}

fn postfix_event<'a>(daemon: &str, msg: &'a str) -> Option<MailEvent<'a>> {
    if let Some(w) = msg.strip_prefix("warning: ") {
        // `warning: unknown[203.0.113.5]: SASL LOGIN authentication failed: ..., sasl_username=bob`
        if w.contains("SASL") && w.contains("authentication failed") {
            let (host, _) = w.split_once(": ")?;
            return Some(MailEvent::AuthFailed {
                client: bracket_ip(host),
                user: pf_find(w, " sasl_username="),
            });
        }
        return None;
    }
    if let Some(r) = msg.strip_prefix("NOQUEUE: reject: RCPT from ") {
        if !r.contains("Relay access denied") {
            return None;
        }
        let (host, _) = r.split_once(": ")?;
        // `...; from=<a> to=<b> proto=ESMTP helo=<x>`: the trailer after the last `; `.
        let trailer = r
            .rfind("; from=")
            .and_then(|i| r.get(i + 2..))
            .unwrap_or("");
        return Some(MailEvent::RelayDenied {
            client: bracket_ip(host),
            sender: pf_field(trailer, "from="),
            recipient: pf_field(trailer, "to="),
        });
    }
    let (id, rest) = msg.split_once(": ")?;
    if !is_postfix_id(id) {
        return None;
    }
    if rest == "removed" {
        return Some(MailEvent::Completed { queue_id: id });
    }
    if rest.starts_with("client=") {
        return Some(MailEvent::Received {
            queue_id: id,
            sender: None,
            auth: pf_field(rest, "sasl_username="),
            client: pf_field(rest, "client=").and_then(bracket_ip),
            local_user: None,
            recipients: None,
            bounce_of: None,
        });
    }
    if rest.starts_with("uid=") {
        return Some(MailEvent::Received {
            queue_id: id,
            sender: pf_field(rest, "from="),
            auth: None,
            client: None,
            local_user: pf_field(rest, "uid="),
            recipients: None,
            bounce_of: None,
        });
    }
    if rest.starts_with("from=") {
        if daemon != "qmgr" {
            return None;
        }
        return Some(MailEvent::Received {
            queue_id: id,
            sender: pf_field(rest, "from="),
            auth: None,
            client: None,
            local_user: None,
            recipients: pf_field(rest, "nrcpt=").and_then(num),
            bounce_of: None,
        });
    }
    if rest.starts_with("to=") {
        let outcome = match pf_field(rest, "status=")? {
            "sent" => Outcome::Sent,
            "deferred" => Outcome::Deferred,
            "bounced" | "expired" => Outcome::Bounced,
            _ => return None,
        };
        let recipient = pf_field(rest, "to=")?;
        // `orig_to=<user>` for `to=<user@host>` is an alias expansion, not a forward.
        let local_part = recipient.rsplit_once('@').map_or(recipient, |(l, _)| l);
        let original = pf_field(rest, "orig_to=").filter(|o| {
            !o.eq_ignore_ascii_case(recipient)
                && (o.contains('@') || !o.eq_ignore_ascii_case(local_part))
        });
        let relay = pf_field(rest, "relay=").unwrap_or("none");
        let local = [
            "local", "virtual", "none", "dovecot", "maildrop", "procmail",
        ]
        .iter()
        .any(|l| relay.eq_ignore_ascii_case(l))
            || relay.starts_with("private/")
            || relay.contains("[127.0.0.1]")
            || relay.contains("[::1]")
            || matches!(daemon, "local" | "virtual" | "pipe");
        return Some(MailEvent::Delivery {
            queue_id: id,
            outcome,
            recipient,
            original,
            remote: !local,
        });
    }
    None
}

#[cfg(test)]
mod tests;
