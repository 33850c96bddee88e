//! The optional breach-count range API (`mail.breach_api`, off by default): for a
//! confirmed weak password only, `GET <base><first 5 hex characters of the SHA-1>` and look
//! for the remaining 35 characters in the answer (`SUFFIX:COUNT` lines, the k-anonymity
//! range format of Pwned Passwords). Only the 5-character prefix leaves the host; the
//! password, its full SHA-1 and the mailbox never do.

use std::time::Duration;

use sha1::{Digest, Sha1};

/// Request deadline.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// Largest answer read.
pub const MAX_ANSWER_BYTES: u64 = 4 * 1024 * 1024;

/// The query a candidate makes: (prefix sent, suffix kept). Upper-case hex.
pub fn split_sha1(password: &[u8]) -> (String, String) {
    let h = hex::encode_upper(Sha1::digest(password));
    let (p, s) = h.split_at(5);
    (p.to_string(), s.to_string())
}

/// Finds `suffix` in a range answer; `Some(0)` when absent (padding lines have count 0).
pub fn count_in(answer: &str, suffix: &str) -> u64 {
    for line in answer.lines() {
        if let Some((s, n)) = line.trim().split_once(':') {
            if s.trim().eq_ignore_ascii_case(suffix) {
                return n.trim().parse().unwrap_or(0);
            }
        }
    }
    0
}

/// Why the range API gave no count (never naming the prefix or the password).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BreachError {
    /// The request failed: the client's message with the prefix masked.
    Call(String),
    /// An answer other than 200.
    Status(u16),
    /// The answer could not be read within [`MAX_ANSWER_BYTES`].
    Unreadable,
}

impl std::fmt::Display for BreachError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BreachError::Call(m) => write!(f, "breach API: {m}"),
            BreachError::Status(s) => write!(f, "breach API answered {s}"),
            BreachError::Unreadable => f.write_str("breach API: unreadable answer"),
        }
    }
}

impl std::error::Error for BreachError {}

/// A configured range API.
pub struct BreachApi {
    base: String,
    agent: ureq::Agent,
}

impl BreachApi {
    /// `base` is validated by the configuration (https, or http to loopback).
    pub fn new(base: &str) -> BreachApi {
        let loopback = base.starts_with("http://");
        let mut b = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .max_redirects(0)
            .http_status_as_error(false)
            .user_agent(format!("svc/{}", env!("CARGO_PKG_VERSION")));
        if loopback {
            b = b.proxy(None);
        }
        BreachApi {
            base: base.to_string(),
            agent: b.build().into(),
        }
    }

    /// How often `password` appears in the breach corpus; `None` when the API did not
    /// answer usefully (logged by the caller without any secret).
    pub fn count(&self, password: &[u8]) -> Result<u64, BreachError> {
        let (prefix, suffix) = split_sha1(password);
        let url = format!("{}{prefix}", self.base);
        let resp = self
            .agent
            .get(&url)
            .header("Add-Padding", "true")
            .call()
            .map_err(|e| BreachError::Call(e.to_string().replace(&prefix, "<prefix>")))?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(BreachError::Status(status));
        }
        let body = resp
            .into_body()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_string()
            .map_err(|_| BreachError::Unreadable)?;
        Ok(count_in(&body, &suffix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};

    #[test]
    fn only_the_prefix_is_sent_and_the_count_is_found() {
        let (p, s) = split_sha1(b"password");
        // SHA-1("password") = 5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8
        assert_eq!(p, "5BAA6");
        assert_eq!(s, "1E4C9B93F3F0682250B6CF8331B7EE68FD8");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let mut request = String::new();
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
                request.push_str(&line);
            }
            let body = "0018A45C4D1DEF81644B54AB7F969B88D65:10\r\n1E4C9B93F3F0682250B6CF8331B7EE68FD8:9545824\r\n";
            write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            request
        });
        let api = BreachApi::new(&format!("http://{addr}/range/"));
        assert_eq!(api.count(b"password").unwrap(), 9_545_824);
        let request = server.join().unwrap();
        assert!(
            request.starts_with("GET /range/5BAA6 HTTP/1.1"),
            "{request}"
        );
        assert!(!request.contains("1E4C9B"), "the suffix never leaves");
        assert!(!request.contains("password"));
        assert_eq!(count_in("ABC:1\n", "DEF"), 0);
    }
}
