//! Request heads: parsing with limits, query and form decoding.

use std::net::SocketAddr;

/// A parsed request. Header names are lower-cased.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Path without the query string, percent-decoding not applied.
    pub path: String,
    /// Raw query string (after `?`), may be empty.
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub remote: SocketAddr,
    /// HTTP/1.0 without keep-alive, or `Connection: close`.
    pub wants_close: bool,
}

impl Request {
    /// First value of a header (name in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// First value of a query parameter, percent-decoded.
    pub fn query_param(&self, name: &str) -> Option<String> {
        form_pairs(self.query.as_bytes())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// A form field from an `application/x-www-form-urlencoded` body (never the query).
    pub fn form_field(&self, name: &str) -> Option<String> {
        let ct = self.header("content-type").unwrap_or("");
        if !ct
            .to_ascii_lowercase()
            .starts_with("application/x-www-form-urlencoded")
        {
            return None;
        }
        form_pairs(&self.body)
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// Value of one cookie.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        for (n, v) in &self.headers {
            if n != "cookie" {
                continue;
            }
            for part in v.split(';') {
                let part = part.trim();
                if let Some((k, val)) = part.split_once('=') {
                    if k.trim() == name {
                        return Some(val.trim());
                    }
                }
            }
        }
        None
    }
}

/// Why a request head was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum HeadError {
    /// Malformed request line or header (400).
    Malformed(&'static str),
    /// Head larger than the byte limit, or more headers than allowed (431).
    TooLarge,
    /// `Transfer-Encoding` on a request body (411: Content-Length required).
    LengthRequired,
    /// Content-Length over the body limit (413).
    BodyTooLarge,
    /// An `Expect` other than `100-continue` (417).
    ExpectationFailed,
}

impl HeadError {
    /// The status code the refusal answers with.
    pub fn status(&self) -> u16 {
        match self {
            HeadError::Malformed(_) => 400,
            HeadError::TooLarge => 431,
            HeadError::LengthRequired => 411,
            HeadError::BodyTooLarge => 413,
            HeadError::ExpectationFailed => 417,
        }
    }
}

/// What the head said about the request, before the body is read.
#[derive(Debug)]
pub struct Head {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub content_length: usize,
    pub wants_close: bool,
    /// `Expect: 100-continue` on an HTTP/1.1 request: answer `100 Continue` before
    /// waiting for the body.
    pub expect_continue: bool,
    /// Bytes of the buffer the head used.
    pub len: usize,
}

/// Longest accepted Content-Length value in digits (enough for any `usize` body limit).
const MAX_LENGTH_DIGITS: usize = 19;

/// A Content-Length value: ASCII digits only, no sign, no leading zero (except `0` itself).
/// `Err(None)` is malformed (400), `Err(Some(()))` too large to be a real body (413).
fn content_length(value: &[u8]) -> Result<usize, Option<()>> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return Err(None);
    }
    if value.len() > 1 && value[0] == b'0' {
        return Err(None);
    }
    if value.len() > MAX_LENGTH_DIGITS {
        return Err(Some(()));
    }
    let mut n: usize = 0;
    for &d in value {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(usize::from(d - b'0')))
            .ok_or(Some(()))?;
    }
    Ok(n)
}

/// True when `value` (a slice of `buf` that httparse returned) was written exactly as
/// `Name: value` or `Name:value` with no other whitespace around it. httparse trims the
/// optional whitespace RFC 9110 allows; for Content-Length this server refuses it, since
/// padded lengths are a request-smuggling device and no real client sends them.
fn written_plainly(buf: &[u8], value: &[u8]) -> bool {
    let start = (value.as_ptr() as usize).wrapping_sub(buf.as_ptr() as usize);
    let end = start.wrapping_add(value.len());
    if start > buf.len() || end > buf.len() || start == 0 {
        return false;
    }
    let before_ok = match buf[start - 1] {
        b':' => true,
        b' ' => start >= 2 && buf[start - 2] == b':',
        _ => false,
    };
    before_ok && matches!(buf.get(end), Some(b'\r') | Some(b'\n'))
}

/// A Host value: empty, or a host name, IPv4 or bracketed IPv6 literal with an optional port
/// (RFC 3986 reg-name characters).
fn valid_host(v: &str) -> bool {
    v.bytes().all(|b| {
        b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b'%'
                    | b':'
                    | b'['
                    | b']'
            )
    })
}

/// Parses a request head from `buf`. `Ok(None)` means more bytes are needed.
///
/// Strict where smuggling or ambiguity could follow: Content-Length must be plain digits
/// (no sign, padding or leading zeros) and appear once; an HTTP/1.1 request needs exactly
/// one valid `Host` (RFC 9112 section 3.2); `Authorization` may appear once; any
/// `Transfer-Encoding` is refused (411); an `Expect` other than `100-continue` gets 417.
pub fn parse_head(
    buf: &[u8],
    max_headers: usize,
    max_body: usize,
) -> Result<Option<Head>, HeadError> {
    let mut storage = vec![httparse::EMPTY_HEADER; max_headers];
    let mut req = httparse::Request::new(&mut storage);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
        Err(_) => return Err(HeadError::Malformed("malformed request head")),
    };
    let method = req.method.unwrap_or("").to_string();
    let target = req.path.unwrap_or("").to_string();
    let version = req.version.unwrap_or(1);
    let mut headers = Vec::with_capacity(req.headers.len());
    let mut length: Option<usize> = None;
    let mut too_large = false;
    let mut connection = String::new();
    let mut hosts = 0usize;
    let mut authorizations = 0usize;
    let mut expect_continue = false;
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        let value = std::str::from_utf8(h.value)
            .map_err(|_| HeadError::Malformed("header value is not UTF-8"))?
            .trim()
            .to_string();
        match name.as_str() {
            "content-length" => {
                if length.is_some() || too_large {
                    return Err(HeadError::Malformed("more than one Content-Length header"));
                }
                if !written_plainly(buf, h.value) {
                    return Err(HeadError::Malformed(
                        "invalid Content-Length: whitespace around the value",
                    ));
                }
                match content_length(h.value) {
                    Ok(n) => length = Some(n),
                    Err(Some(())) => too_large = true,
                    Err(None) => {
                        return Err(HeadError::Malformed(
                            "invalid Content-Length: expected ASCII digits without sign or leading zeros",
                        ))
                    }
                }
            }
            "transfer-encoding" => return Err(HeadError::LengthRequired),
            "connection" => connection = value.to_ascii_lowercase(),
            "host" => {
                hosts += 1;
                if !valid_host(&value) {
                    return Err(HeadError::Malformed("invalid Host header"));
                }
            }
            "authorization" => authorizations += 1,
            // RFC 9110 10.1.1: an HTTP/1.0 request's expectation is ignored.
            "expect" if version >= 1 => {
                if value.eq_ignore_ascii_case("100-continue") {
                    expect_continue = true;
                } else {
                    return Err(HeadError::ExpectationFailed);
                }
            }
            _ => {}
        }
        headers.push((name, value));
    }
    if !target.starts_with('/') {
        return Err(HeadError::Malformed(
            "request target must be an absolute path",
        ));
    }
    if hosts > 1 {
        return Err(HeadError::Malformed("more than one Host header"));
    }
    if hosts == 0 && version >= 1 {
        return Err(HeadError::Malformed(
            "HTTP/1.1 request without a Host header",
        ));
    }
    if authorizations > 1 {
        return Err(HeadError::Malformed("more than one Authorization header"));
    }
    if too_large {
        return Err(HeadError::BodyTooLarge);
    }
    let content_length = length.unwrap_or(0);
    if content_length > max_body {
        return Err(HeadError::BodyTooLarge);
    }
    let wants_close = connection.split(',').any(|t| t.trim() == "close")
        || (version == 0 && !connection.split(',').any(|t| t.trim() == "keep-alive"));
    Ok(Some(Head {
        method,
        target,
        headers,
        content_length,
        wants_close,
        expect_continue: expect_continue && content_length > 0,
        len,
    }))
}

/// Percent-decodes `s` (`+` as space); invalid escapes are kept literally.
pub fn percent_decode(s: &[u8]) -> String {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < s.len() => {
                let hi = (s[i + 1] as char).to_digit(16);
                let lo = (s[i + 2] as char).to_digit(16);
                match (hi, lo) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Iterates decoded `key=value` pairs of a query string or form body.
pub fn form_pairs(s: &[u8]) -> impl Iterator<Item = (String, String)> + '_ {
    s.split(|&b| b == b'&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = match pair.iter().position(|&b| b == b'=') {
                Some(i) => (&pair[..i], &pair[i + 1..]),
                None => (pair, &b""[..]),
            };
            (percent_decode(k), percent_decode(v))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_complete_and_partial_heads() {
        assert!(parse_head(b"GET / HTTP/1.1\r\nHost: x\r\n", 64, 100)
            .unwrap()
            .is_none());
        let h = parse_head(
            b"GET /a?b=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
            64,
            100,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.method, "GET");
        assert_eq!(h.target, "/a?b=1");
        assert_eq!(h.content_length, 3);
        assert!(!h.wants_close);
        let h = parse_head(b"GET / HTTP/1.0\r\n\r\n", 64, 100)
            .unwrap()
            .unwrap();
        assert!(h.wants_close);
    }

    #[test]
    fn refuses_what_limits_forbid() {
        assert_eq!(
            parse_head(
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                64,
                100
            )
            .unwrap_err(),
            HeadError::LengthRequired
        );
        assert_eq!(
            parse_head(
                b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n",
                64,
                100
            )
            .unwrap_err(),
            HeadError::BodyTooLarge
        );
        let many: String = (0..10).map(|i| format!("X-{i}: 1\r\n")).collect();
        assert_eq!(
            parse_head(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes(), 8, 100).unwrap_err(),
            HeadError::TooLarge
        );
        assert!(parse_head(
            b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n",
            64,
            100
        )
        .is_err());
        assert!(parse_head(b"\x00\x01garbage\r\n\r\n", 64, 100).is_err());
    }

    fn head(extra: &str) -> Result<Option<Head>, HeadError> {
        let text = format!("POST /x HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n");
        parse_head(text.as_bytes(), 64, 1 << 20)
    }

    #[test]
    fn content_length_is_plain_digits() {
        assert_eq!(
            head("Content-Length: 26\r\n")
                .unwrap()
                .unwrap()
                .content_length,
            26
        );
        assert_eq!(
            head("Content-Length:26\r\n")
                .unwrap()
                .unwrap()
                .content_length,
            26
        );
        assert_eq!(
            head("Content-Length: 0\r\n")
                .unwrap()
                .unwrap()
                .content_length,
            0
        );
        for bad in [
            "+26", "-1", "00026", "0x1a", "2 6", "26,26", "", "1e3", "\u{661}",
        ] {
            let e = head(&format!("Content-Length: {bad}\r\n")).unwrap_err();
            assert!(matches!(e, HeadError::Malformed(_)), "{bad:?}: {e:?}");
        }
        // Padding around the value (httparse would trim it) is refused too.
        for padded in [
            "Content-Length:    26   ",
            "Content-Length: 26 ",
            "Content-Length:\t26",
        ] {
            let e = head(&format!("{padded}\r\n")).unwrap_err();
            assert!(matches!(e, HeadError::Malformed(_)), "{padded:?}: {e:?}");
        }
        // Twice, even with the same value.
        assert!(matches!(
            head("Content-Length: 3\r\nContent-Length: 3\r\n").unwrap_err(),
            HeadError::Malformed(_)
        ));
        // Digits beyond any body limit: 413, not a wrapped number.
        assert_eq!(
            head("Content-Length: 99999999999999999999999\r\n").unwrap_err(),
            HeadError::BodyTooLarge
        );
        assert_eq!(
            head("Content-Length: 18446744073709551616\r\n").unwrap_err(),
            HeadError::BodyTooLarge
        );
    }

    #[test]
    fn host_and_authorization_rules() {
        let e = parse_head(b"GET / HTTP/1.1\r\n\r\n", 64, 100).unwrap_err();
        assert_eq!(e.status(), 400);
        // HTTP/1.0 may omit Host.
        assert!(parse_head(b"GET / HTTP/1.0\r\n\r\n", 64, 100)
            .unwrap()
            .is_some());
        assert!(head("Host: y\r\n").is_err());
        assert!(head("").unwrap().is_some());
        let e = parse_head(b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 64, 100).unwrap_err();
        assert_eq!(e.status(), 400);
        assert!(
            parse_head(b"GET / HTTP/1.1\r\nHost: [::1]:9443\r\n\r\n", 64, 100)
                .unwrap()
                .is_some()
        );
        assert!(parse_head(b"GET / HTTP/1.1\r\nHost:\r\n\r\n", 64, 100)
            .unwrap()
            .is_some());
        let e = head("Authorization: Bearer a\r\nauthorization: Bearer b\r\n").unwrap_err();
        assert_eq!(e.status(), 400);
        assert!(head("Authorization: Bearer a\r\n").unwrap().is_some());
    }

    #[test]
    fn expectations() {
        let h = head("Expect: 100-continue\r\nContent-Length: 5\r\n")
            .unwrap()
            .unwrap();
        assert!(h.expect_continue);
        let h = head("Expect: 100-Continue\r\n").unwrap().unwrap();
        assert!(!h.expect_continue, "no body, nothing to wait for");
        assert_eq!(
            head("Expect: something-else\r\n").unwrap_err(),
            HeadError::ExpectationFailed
        );
        assert_eq!(HeadError::ExpectationFailed.status(), 417);
        let h = parse_head(
            b"POST / HTTP/1.0\r\nExpect: whatever\r\nContent-Length: 1\r\n\r\n",
            64,
            100,
        )
        .unwrap()
        .unwrap();
        assert!(!h.expect_continue, "HTTP/1.0 expectations are ignored");
    }

    #[test]
    fn decodes_queries_and_forms() {
        let pairs: Vec<_> = form_pairs(b"a=1&b=x%20y+z&c&d=%zz&e=%4").collect();
        assert_eq!(pairs[1], ("b".into(), "x y z".into()));
        assert_eq!(pairs[2], ("c".into(), "".into()));
        assert_eq!(pairs[3], ("d".into(), "%zz".into()));
        assert_eq!(pairs[4], ("e".into(), "%4".into()));
    }

    #[test]
    fn garbage_never_panics() {
        let mut x: u64 = 88172645463325252;
        for n in 0..5000usize {
            let mut buf = b"GET / HTTP/1.1\r\n".to_vec();
            for _ in 0..(n % 200) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf.push((x & 0xff) as u8);
            }
            let _ = parse_head(&buf, 64, 1024);
            let _ = parse_head(&buf[16..], 64, 1024);
            let _ = percent_decode(&buf);
        }
    }
}
