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
    /// Malformed request line or header.
    Malformed(&'static str),
    /// Head larger than the byte limit, or more headers than allowed (431).
    TooLarge,
    /// `Transfer-Encoding` on a request body (411: Content-Length required).
    LengthRequired,
    /// Content-Length over the body limit (413).
    BodyTooLarge,
}

/// What the head said about the request, before the body is read.
#[derive(Debug)]
pub struct Head {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub content_length: usize,
    pub wants_close: bool,
    /// Bytes of the buffer the head used.
    pub len: usize,
}

/// Parses a request head from `buf`. `Ok(None)` means more bytes are needed.
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
    let mut content_length: Option<usize> = None;
    let mut connection = String::new();
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        let value = std::str::from_utf8(h.value)
            .map_err(|_| HeadError::Malformed("header value is not UTF-8"))?
            .trim()
            .to_string();
        match name.as_str() {
            "content-length" => {
                let n: usize = value
                    .parse()
                    .map_err(|_| HeadError::Malformed("invalid Content-Length"))?;
                if content_length.is_some_and(|prev| prev != n) {
                    return Err(HeadError::Malformed("conflicting Content-Length headers"));
                }
                content_length = Some(n);
            }
            "transfer-encoding" => return Err(HeadError::LengthRequired),
            "connection" => connection = value.to_ascii_lowercase(),
            _ => {}
        }
        headers.push((name, value));
    }
    if !target.starts_with('/') {
        return Err(HeadError::Malformed(
            "request target must be an absolute path",
        ));
    }
    let content_length = content_length.unwrap_or(0);
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
            parse_head(b"POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 64, 100).unwrap_err(),
            HeadError::BodyTooLarge
        );
        let many: String = (0..10).map(|i| format!("X-{i}: 1\r\n")).collect();
        assert_eq!(
            parse_head(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes(), 8, 100).unwrap_err(),
            HeadError::TooLarge
        );
        assert!(parse_head(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 64, 100).is_err());
        assert!(parse_head(b"\x00\x01garbage\r\n\r\n", 64, 100).is_err());
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
