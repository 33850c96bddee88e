//! Access-log lines (Apache, Nginx, LiteSpeed) -> [`AccessLine`].
//!
//! Accepted layouts (fields after the user agent are ignored, so formats that append
//! fields to `combined`, such as `$http_x_forwarded_for` or `%D`, parse too):
//! - `common`: `client ident user [time] "request" status bytes`;
//! - `combined`: `common` + ` "referer" "user-agent"` (Apache, Nginx and LiteSpeed default;
//!   cPanel, Plesk and DirectAdmin per-domain logs);
//! - vhost-prefixed: `vhost[:port] ` before either (Apache `vhost_combined`,
//!   `other_vhosts_access.log`, Nginx `$host $remote_addr ...`).
//!
//! The layout is decided per file ([`Layout`], decision 278), from the file's first line
//! that shows one, and every later line is read in it: a line that does not fit is
//! unparsed. A vhost or `Host` header field never names the client, even when it holds an
//! address. IPv4-mapped IPv6 clients are reported as IPv4.
//!
//! Guarantees:
//! - No regex, no allocation: every field borrows from the line.
//! - Never panics on any input (slicing is checked); garbage is an [`Error`] naming the
//!   first field that did not parse.
//! - Quoted fields end at the first `"` not escaped by `\` (Apache writes `\"` and `\\`;
//!   Nginx writes `\x22`), so a user agent or request holding quotes cannot shift fields.
//! - A request line that is not `METHOD target [protocol]` (a TLS handshake on the plain
//!   port, `-`, binary junk) still parses, with an empty `method` and `target`.

use std::fmt;
use std::net::IpAddr;

/// Longest vhost or client token accepted.
const MAX_TOKEN: usize = 255;
/// Longest method accepted.
const MAX_METHOD: usize = 24;

/// One parsed access-log line; every field borrows from the line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessLine<'a> {
    /// The vhost prefix (`example.com:443`) when the line has one.
    pub vhost: Option<&'a str>,
    /// The client address.
    pub client: IpAddr,
    /// `GET`, `POST`, ...; empty when the request line is not a request.
    pub method: &'a str,
    /// The request target as logged (path and query, still escaped); empty when the
    /// request line is not a request.
    pub target: &'a str,
    /// The response status.
    pub status: u16,
    /// The referer (`combined` only; `-` as logged).
    pub referer: Option<&'a str>,
    /// The user agent (`combined` only; `-` as logged).
    pub user_agent: Option<&'a str>,
}

impl AccessLine<'_> {
    /// The target's path (before `?`).
    pub fn path(&self) -> &str {
        match self.target.split_once('?') {
            Some((p, _)) => p,
            None => self.target,
        }
    }

    /// The target's query (after `?`), if any.
    pub fn query(&self) -> Option<&str> {
        self.target.split_once('?').map(|(_, q)| q)
    }
}

/// Why a line is not an access-log line: the first field that did not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    Empty,
    Client,
    Time,
    Request,
    Status,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Empty => "empty line",
            Error::Client => "no client address",
            Error::Time => "no [time] field",
            Error::Request => "no quoted request",
            Error::Status => "no status code",
        })
    }
}

impl std::error::Error for Error {}

/// How a file lays out the fields before `ident user [time]`, decided once per file
/// (decision 278): a line's own first field never decides whether it names the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `client ident user [time] ...` (`common`, `combined`).
    Plain,
    /// `vhost client ident user [time] ...`: the first field is a virtual host, a
    /// `host:port`, or the client's `Host` header (`$host $remote_addr ...`), never the
    /// client.
    Vhost,
}

impl Layout {
    /// The layout a file's line shows: `Vhost` when its second field is an address (in
    /// `common`/`combined` the second field is the identd answer, `-`), `Plain` when only
    /// the first is, `None` when neither (not an access-log line). A Host header (any
    /// client text, an address included) can only be the first of two addresses, so it
    /// never turns a vhost file into a plain one.
    pub fn of_line(line: &str) -> Option<Layout> {
        let b = line.as_bytes();
        let (t1, i) = token(b, 0);
        let (t2, _) = token(b, i);
        if parse_ip(line, t2).is_some() && (1..=MAX_TOKEN).contains(&(t1.1 - t1.0)) {
            Some(Layout::Vhost)
        } else if parse_ip(line, t1).is_some() {
            Some(Layout::Plain)
        } else {
            None
        }
    }
}

/// Parses one line on its own, its layout taken from the line ([`Layout::of_line`]). A
/// follower of a file uses [`parse_line_as`] with the layout decided for the file.
pub fn parse_line(line: &str) -> Result<AccessLine<'_>, Error> {
    if line.is_empty() {
        return Err(Error::Empty);
    }
    parse_line_as(line, Layout::of_line(line).ok_or(Error::Client)?)
}

/// Parses one line (without its newline) in `layout`. See the module documentation.
pub fn parse_line_as(line: &str, layout: Layout) -> Result<AccessLine<'_>, Error> {
    let b = line.as_bytes();
    if b.is_empty() {
        return Err(Error::Empty);
    }
    let (t1, mut i) = token(b, 0);
    let mut vhost = None;
    let client = match layout {
        Layout::Plain => parse_ip(line, t1).ok_or(Error::Client)?,
        Layout::Vhost => {
            if t1.1 - t1.0 == 0 || t1.1 - t1.0 > MAX_TOKEN {
                return Err(Error::Client);
            }
            vhost = line.get(t1.0..t1.1);
            let (t2, next) = token(b, i);
            i = next;
            parse_ip(line, t2).ok_or(Error::Client)?
        }
    };
    // ident user [time]: the first `[` after the client, then its `]`.
    let open = memchr::memchr(b'[', b.get(i..).unwrap_or(&[])).ok_or(Error::Time)? + i;
    let close_rel = memchr::memchr(b']', b.get(open..).unwrap_or(&[])).ok_or(Error::Time)?;
    if !(8..=64).contains(&close_rel) {
        return Err(Error::Time);
    }
    i = open + close_rel + 1;
    // "request"
    if b.get(i) != Some(&b' ') || b.get(i + 1) != Some(&b'"') {
        return Err(Error::Request);
    }
    let (req, next) = quoted(b, i + 1).ok_or(Error::Request)?;
    i = next;
    let (method, target) = request(line, req);
    // status
    if b.get(i) != Some(&b' ') {
        return Err(Error::Status);
    }
    let status = match (b.get(i + 1), b.get(i + 2), b.get(i + 3), b.get(i + 4)) {
        (Some(&d1), Some(&d2), Some(&d3), end)
            if d1.is_ascii_digit()
                && d2.is_ascii_digit()
                && d3.is_ascii_digit()
                && matches!(end, None | Some(b' ')) =>
        {
            u16::from(d1 - b'0') * 100 + u16::from(d2 - b'0') * 10 + u16::from(d3 - b'0')
        }
        _ => return Err(Error::Status),
    };
    i += 4;
    // bytes (digits or `-`), then optional "referer" "user-agent".
    let (_, next) = token(b, i + 1);
    i = next;
    let mut referer = None;
    let mut user_agent = None;
    if b.get(i) == Some(&b'"') {
        if let Some((r, next)) = quoted(b, i) {
            referer = line.get(r.0..r.1);
            if b.get(next) == Some(&b' ') && b.get(next + 1) == Some(&b'"') {
                if let Some((u, _)) = quoted(b, next + 1) {
                    user_agent = line.get(u.0..u.1);
                }
            }
        }
    }
    Ok(AccessLine {
        vhost,
        client,
        method,
        target,
        status,
        referer,
        user_agent,
    })
}

/// The token starting at `from` (up to a space or the end) as (start, end), and the index
/// after the space that ends it.
fn token(b: &[u8], from: usize) -> ((usize, usize), usize) {
    let rest = b.get(from..).unwrap_or(&[]);
    match memchr::memchr(b' ', rest) {
        Some(n) => ((from, from + n), from + n + 1),
        None => ((from, b.len().max(from)), b.len().max(from)),
    }
}

fn parse_ip(line: &str, (s, e): (usize, usize)) -> Option<IpAddr> {
    if e <= s || e - s > 45 {
        return None;
    }
    let t = line.get(s..e)?;
    // Quick reject before the std parser: an address starts with a hex digit or `:`.
    let c = *t.as_bytes().first()?;
    if !(c.is_ascii_hexdigit() || c == b':') {
        return None;
    }
    // An IPv4-mapped IPv6 client (`::ffff:192.0.2.1`, a dual-stack listener) is the IPv4
    // address the firewall blocks.
    Some(match t.parse().ok()? {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    })
}

/// The quoted field whose opening `"` is at `open`: its content as (start, end) and the
/// index after the closing quote. A `\` escapes the next byte.
fn quoted(b: &[u8], open: usize) -> Option<((usize, usize), usize)> {
    if b.get(open) != Some(&b'"') {
        return None;
    }
    let start = open + 1;
    let mut i = start;
    loop {
        let rest = b.get(i..)?;
        let n = memchr::memchr2(b'"', b'\\', rest)?;
        let at = i + n;
        if b.get(at) == Some(&b'"') {
            return Some(((start, at), at + 1));
        }
        i = at + 2;
    }
}

/// (method, target) of a request line, or two empty strings when it is not a request.
fn request(line: &str, (s, e): (usize, usize)) -> (&str, &str) {
    let Some(req) = line.get(s..e) else {
        return ("", "");
    };
    let Some((method, rest)) = req.split_once(' ') else {
        return ("", "");
    };
    if method.is_empty()
        || method.len() > MAX_METHOD
        || !method
            .bytes()
            .all(|c| c.is_ascii_uppercase() || c == b'-' || c == b'_')
    {
        return ("", "");
    }
    let target = match rest.rsplit_once(' ') {
        Some((t, proto)) if proto.starts_with("HTTP/") => t,
        _ => rest,
    };
    (method, target)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NGINX: &str = r#"192.0.2.10 - - [26/Nov/2026:21:00:01 +0000] "POST /wp-login.php HTTP/1.1" 200 4523 "https://example.com/wp-login.php" "Mozilla/5.0 (X11; Linux x86_64)""#;

    #[test]
    fn combined_common_and_vhost_lines() {
        let l = parse_line(NGINX).unwrap();
        assert_eq!(l.client.to_string(), "192.0.2.10");
        assert_eq!(
            (l.method, l.target, l.status),
            ("POST", "/wp-login.php", 200)
        );
        assert_eq!(l.referer, Some("https://example.com/wp-login.php"));
        assert_eq!(l.user_agent, Some("Mozilla/5.0 (X11; Linux x86_64)"));
        assert_eq!(l.vhost, None);

        let c = parse_line(
            "2001:db8::7 - bob [26/Nov/2026:21:00:01 +0000] \"GET /?author=2 HTTP/1.0\" 404 -",
        )
        .unwrap();
        assert_eq!(c.client.to_string(), "2001:db8::7");
        assert_eq!((c.path(), c.query()), ("/", Some("author=2")));
        assert_eq!((c.status, c.user_agent), (404, None));

        let line = format!("example.com:443 {NGINX}");
        let v = parse_line(&line).unwrap();
        assert_eq!(v.vhost, Some("example.com:443"));
        assert_eq!(v.client.to_string(), "192.0.2.10");
        let line = format!("192.0.2.1:80 {NGINX}");
        let v = parse_line(&line).unwrap();
        assert_eq!(v.vhost, Some("192.0.2.1:80"));
    }

    /// Issue 23 items 7 and 13: a `Host` header or vhost field never names the client,
    /// even when it is an address without a port; a file keeps the layout its first line
    /// showed; IPv4-mapped clients are IPv4.
    #[test]
    fn a_host_field_never_names_the_client() {
        let line = format!("41.0.0.2 {NGINX}");
        assert_eq!(Layout::of_line(&line), Some(Layout::Vhost));
        let l = parse_line(&line).unwrap();
        assert_eq!(
            (l.vhost, l.client.to_string()),
            (Some("41.0.0.2"), "192.0.2.10".into())
        );
        let l = parse_line_as(&line, Layout::Vhost).unwrap();
        assert_eq!(l.client.to_string(), "192.0.2.10");
        assert_eq!(Layout::of_line(NGINX), Some(Layout::Plain));
        assert_eq!(Layout::of_line("example.com - - [x]"), None);
        // Lines that do not fit the file's layout are errors, not another layout.
        assert_eq!(
            parse_line_as(&format!("example.com {NGINX}"), Layout::Plain),
            Err(Error::Client)
        );
        assert_eq!(parse_line_as(NGINX, Layout::Vhost), Err(Error::Client));
        let mapped = NGINX.replacen("192.0.2.10", "::ffff:43.0.0.1", 1);
        assert_eq!(parse_line(&mapped).unwrap().client.to_string(), "43.0.0.1");
        let mapped = format!("example.com:443 {mapped}");
        assert_eq!(parse_line(&mapped).unwrap().client.to_string(), "43.0.0.1");
    }

    #[test]
    fn escaped_quotes_do_not_shift_fields() {
        let apache = r#"198.51.100.4 - - [26/Nov/2026:21:00:01 +0000] "GET /a\"b HTTP/1.1" 404 12 "-" "evil \"quoted\" agent\\" tail""#;
        let l = parse_line(apache).unwrap();
        assert_eq!(l.target, r#"/a\"b"#);
        assert_eq!(l.status, 404);
        assert_eq!(l.user_agent, Some(r#"evil \"quoted\" agent\\"#));
        let nginx = r#"198.51.100.4 - - [26/Nov/2026:21:00:01 +0000] "\x16\x03\x01\x00\xA5\x01" 400 157 "-" "-""#;
        let l = parse_line(nginx).unwrap();
        assert_eq!((l.method, l.target, l.status), ("", "", 400));
        let dash = r#"198.51.100.4 - - [26/Nov/2026:21:00:01 +0000] "-" 408 0 "-" "-""#;
        assert_eq!(parse_line(dash).unwrap().status, 408);
    }

    #[test]
    fn garbage_is_an_error_naming_the_field() {
        assert_eq!(parse_line(""), Err(Error::Empty));
        assert_eq!(parse_line("hello world"), Err(Error::Client));
        assert_eq!(parse_line("192.0.2.1 - -"), Err(Error::Time));
        assert_eq!(
            parse_line("192.0.2.1 - - [26/Nov/2026:21:00:01 +0000] GET"),
            Err(Error::Request)
        );
        assert_eq!(
            parse_line("192.0.2.1 - - [26/Nov/2026:21:00:01 +0000] \"GET / HTTP/1.1\" 2x0 1"),
            Err(Error::Status)
        );
        assert_eq!(
            parse_line("192.0.2.1 - - [26/Nov/2026:21:00:01 +0000] \"GET / HTTP/1.1"),
            Err(Error::Request)
        );
        // Truncated after the status, or inside the user agent: still the request.
        let t = parse_line("192.0.2.1 - - [26/Nov/2026:21:00:01 +0000] \"GET / HTTP/1.1\" 200")
            .unwrap();
        assert_eq!(t.status, 200);
        let t = parse_line(
            "192.0.2.1 - - [26/Nov/2026:21:00:01 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"Mozi",
        )
        .unwrap();
        assert_eq!(t.user_agent, None);
    }

    #[test]
    fn every_prefix_and_hostile_byte_never_panics() {
        let mut s = String::new();
        for c in NGINX.chars() {
            s.push(c);
            let _ = parse_line(&s);
        }
        for junk in [
            "\\",
            "\"\\",
            "1 [",
            "1 []",
            "::1 - - [aaaaaaaaaaa] \"\\",
            "é é é",
        ] {
            let _ = parse_line(junk);
            let _ = parse_line(&format!(
                "192.0.2.1 - - [26/Nov/2026:21:00:01 +0000] \"{junk}"
            ));
        }
        let huge = format!(
            "192.0.2.1 - - [x] \"GET /{} HTTP/1.1\" 200 1",
            "a".repeat(1 << 20)
        );
        let _ = parse_line(&huge);
    }
}
