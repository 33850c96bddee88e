//! clamd client: `INSTREAM` scans, `PING` and `VERSION`, over clamd's local socket or a
//! loopback TCP port (`mail.clamd_socket`).
//!
//! Guarantees:
//! - Only a unix socket path or a loopback `host:port` is accepted ([`Endpoint::parse`]):
//!   mail content never leaves the host.
//! - Every call has a connect and an I/O deadline; a stalled clamd costs at most the
//!   deadline per part.
//! - Answers are read up to 4 KiB; a signature name is kept as clamd sent it (its own
//!   rating), escaped for logs by the caller.
//! - [`Health`] is updated by every call and by the periodic probe; reading it takes a
//!   short lock on memory only.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use jiff::Timestamp;
use parking_lot::Mutex;
use serde::Serialize;

pub use crate::config::mail::Endpoint;

/// Why a clamd call failed.
#[derive(Debug)]
pub enum ClamdError {
    /// clamd is not reachable (no socket, refused, connect timeout).
    Unreachable(io::Error),
    /// The connection broke or timed out mid-call.
    Io(io::Error),
    /// clamd refused the stream as larger than its `StreamMaxLength`.
    SizeLimit,
    /// An answer that is not one of clamd's.
    Protocol(String),
}

impl std::fmt::Display for ClamdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClamdError::Unreachable(e) => write!(f, "unreachable: {e}"),
            ClamdError::Io(e) => write!(f, "I/O error: {e}"),
            ClamdError::SizeLimit => f.write_str("stream larger than clamd's StreamMaxLength"),
            ClamdError::Protocol(m) => {
                write!(f, "unexpected answer: {}", crate::text::for_log(m, 200))
            }
        }
    }
}

/// The verdict on one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Clean,
    /// Signature name as clamd reported it.
    Found(String),
}

/// `VERSION` answer: `ClamAV 1.4.6/27600/Tue Mar  4 08:30:00 2025`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Version {
    pub engine: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signatures: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signatures_date: Option<String>,
}

impl Version {
    pub fn parse(s: &str) -> Version {
        let s = s.trim().trim_end_matches('\0');
        let mut it = s.splitn(3, '/');
        Version {
            engine: it.next().unwrap_or("").trim().to_string(),
            signatures: it.next().and_then(|v| v.trim().parse().ok()),
            signatures_date: it.next().map(|d| d.trim().to_string()),
        }
    }
}

enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Read for Conn {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(b),
            Conn::Tcp(s) => s.read(b),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Unix(s) => s.write(b),
            Conn::Tcp(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Unix(s) => s.flush(),
            Conn::Tcp(s) => s.flush(),
        }
    }
}

/// Longest answer read.
const MAX_ANSWER: usize = 4096;
/// Bytes per INSTREAM chunk.
const CHUNK: usize = 64 * 1024;

/// A clamd endpoint with deadlines.
#[derive(Clone, Debug)]
pub struct Clamd {
    pub endpoint: Endpoint,
    pub connect_timeout: Duration,
    pub io_timeout: Duration,
}

impl Clamd {
    pub fn new(endpoint: Endpoint, io_timeout: Duration) -> Clamd {
        Clamd {
            endpoint,
            connect_timeout: Duration::from_secs(2),
            io_timeout,
        }
    }

    fn connect(&self) -> Result<Conn, ClamdError> {
        let c = match &self.endpoint {
            Endpoint::Unix(p) => {
                let s = UnixStream::connect(p).map_err(ClamdError::Unreachable)?;
                s.set_read_timeout(Some(self.io_timeout))
                    .and_then(|()| s.set_write_timeout(Some(self.io_timeout)))
                    .map_err(ClamdError::Io)?;
                Conn::Unix(s)
            }
            Endpoint::Tcp(a) => {
                let addr = a
                    .to_socket_addrs()
                    .map_err(ClamdError::Unreachable)?
                    .next()
                    .ok_or_else(|| ClamdError::Unreachable(io::ErrorKind::NotFound.into()))?;
                let s = TcpStream::connect_timeout(&addr, self.connect_timeout)
                    .map_err(ClamdError::Unreachable)?;
                s.set_read_timeout(Some(self.io_timeout))
                    .and_then(|()| s.set_write_timeout(Some(self.io_timeout)))
                    .map_err(ClamdError::Io)?;
                let _ = s.set_nodelay(true);
                Conn::Tcp(s)
            }
        };
        Ok(c)
    }

    fn answer(c: &mut Conn) -> Result<String, ClamdError> {
        let mut out = Vec::with_capacity(64);
        let mut buf = [0u8; 512];
        loop {
            let n = c.read(&mut buf).map_err(ClamdError::Io)?;
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
            if out.contains(&0) || out.len() >= MAX_ANSWER {
                break;
            }
        }
        if let Some(i) = out.iter().position(|&b| b == 0) {
            out.truncate(i);
        }
        out.truncate(MAX_ANSWER);
        Ok(String::from_utf8_lossy(&out).trim().to_string())
    }

    fn simple(&self, cmd: &[u8]) -> Result<String, ClamdError> {
        let mut c = self.connect()?;
        c.write_all(cmd).map_err(ClamdError::Io)?;
        Self::answer(&mut c)
    }

    pub fn ping(&self) -> Result<(), ClamdError> {
        let a = self.simple(b"zPING\0")?;
        if a == "PONG" {
            Ok(())
        } else {
            Err(ClamdError::Protocol(a))
        }
    }

    pub fn version(&self) -> Result<Version, ClamdError> {
        let a = self.simple(b"zVERSION\0")?;
        if a.starts_with("ClamAV") {
            Ok(Version::parse(&a))
        } else {
            Err(ClamdError::Protocol(a))
        }
    }

    /// Streams `r` to clamd with `INSTREAM` and returns its verdict.
    pub fn scan(&self, r: &mut dyn Read) -> Result<Verdict, ClamdError> {
        let mut c = self.connect()?;
        let mut buf = vec![0u8; CHUNK + 4];
        let sent = (|| -> io::Result<()> {
            c.write_all(b"zINSTREAM\0")?;
            loop {
                let n = read_full(r, &mut buf[4..])?;
                if n == 0 {
                    break;
                }
                buf[..4].copy_from_slice(&(n as u32).to_be_bytes());
                c.write_all(&buf[..4 + n])?;
            }
            c.write_all(&[0, 0, 0, 0])
        })();
        // clamd answers and closes when the stream exceeds its limit, which the sender
        // sees as a broken pipe: the answer says why.
        let answer = match (sent, Self::answer(&mut c)) {
            (_, Ok(a)) if !a.is_empty() => a,
            (Err(e), _) => return Err(ClamdError::Io(e)),
            (Ok(()), Err(e)) => return Err(e),
            (Ok(()), Ok(a)) => a,
        };
        parse_scan_answer(&answer)
    }
}

fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// `stream: OK`, `stream: <name> FOUND`, or an error answer.
pub fn parse_scan_answer(a: &str) -> Result<Verdict, ClamdError> {
    let body = a.strip_prefix("stream:").map(str::trim).unwrap_or(a);
    if body == "OK" {
        return Ok(Verdict::Clean);
    }
    if let Some(name) = body.strip_suffix(" FOUND") {
        return Ok(Verdict::Found(name.trim().to_string()));
    }
    if a.contains("size limit exceeded") {
        return Err(ClamdError::SizeLimit);
    }
    Err(ClamdError::Protocol(a.to_string()))
}

/// What the daemon knows about clamd (memory only).
#[derive(Clone, Debug, Default, Serialize)]
pub struct HealthSnapshot {
    pub configured: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// `null` until the first probe.
    pub reachable: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<Version>,
    #[serde(
        serialize_with = "crate::timefmt::ser_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_ok: Option<Timestamp>,
    #[serde(
        serialize_with = "crate::timefmt::ser_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_error_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub scans: u64,
    pub found: u64,
    pub errors: u64,
}

/// Shared clamd health.
#[derive(Default)]
pub struct Health(Mutex<HealthSnapshot>);

impl Health {
    pub fn snapshot(&self) -> HealthSnapshot {
        self.0.lock().clone()
    }

    pub fn configure(&self, endpoint: Option<&Endpoint>) {
        let mut h = self.0.lock();
        h.configured = endpoint.is_some();
        h.endpoint = endpoint.map(|e| e.to_string());
    }

    /// Records a successful call; returns true when clamd was unreachable before.
    pub fn ok(&self, now: Timestamp, version: Option<Version>) -> bool {
        let mut h = self.0.lock();
        let was_down = h.reachable == Some(false);
        h.reachable = Some(true);
        h.last_ok = Some(now);
        if version.is_some() {
            h.version = version;
        }
        was_down
    }

    /// Records a failure; returns true when clamd was reachable (or unknown) before.
    pub fn failed(&self, now: Timestamp, e: &ClamdError) -> bool {
        let mut h = self.0.lock();
        h.errors += 1;
        h.last_error_at = Some(now);
        h.last_error = Some(e.to_string());
        let unreachable = matches!(e, ClamdError::Unreachable(_) | ClamdError::Io(_));
        if unreachable {
            let was_up = h.reachable != Some(false);
            h.reachable = Some(false);
            return was_up;
        }
        false
    }

    pub fn scanned(&self, found: bool) {
        let mut h = self.0.lock();
        h.scans += 1;
        if found {
            h.found += 1;
        }
    }

    pub fn reachable(&self) -> Option<bool> {
        self.0.lock().reachable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_local_only() {
        assert_eq!(
            Endpoint::parse("/run/clamav/clamd.ctl").unwrap(),
            Endpoint::Unix("/run/clamav/clamd.ctl".into())
        );
        assert!(matches!(
            Endpoint::parse("127.0.0.1:3310").unwrap(),
            Endpoint::Tcp(_)
        ));
        assert!(matches!(
            Endpoint::parse("[::1]:3310").unwrap(),
            Endpoint::Tcp(_)
        ));
        assert!(Endpoint::parse("localhost:3310").is_ok());
        assert!(Endpoint::parse("192.0.2.1:3310").is_err());
        assert!(Endpoint::parse("clamd.example.com:3310").is_err());
        assert!(Endpoint::parse("relative/path").is_err());
    }

    #[test]
    fn answers() {
        assert_eq!(parse_scan_answer("stream: OK").unwrap(), Verdict::Clean);
        assert_eq!(
            parse_scan_answer("stream: Eicar-Signature FOUND").unwrap(),
            Verdict::Found("Eicar-Signature".into())
        );
        assert!(matches!(
            parse_scan_answer("INSTREAM size limit exceeded. ERROR"),
            Err(ClamdError::SizeLimit)
        ));
        assert!(parse_scan_answer("garbage").is_err());
        let v = Version::parse("ClamAV 1.4.6/27600/Tue Mar  4 08:30:00 2025\n");
        assert_eq!(v.engine, "ClamAV 1.4.6");
        assert_eq!(v.signatures, Some(27600));
        assert_eq!(Version::parse("ClamAV 1.4.6").signatures, None);
    }

    #[test]
    fn unreachable_socket_is_reported_as_such() {
        let c = Clamd::new(
            Endpoint::Unix("/nonexistent/svc-test/clamd.sock".into()),
            Duration::from_secs(1),
        );
        assert!(matches!(c.ping(), Err(ClamdError::Unreachable(_))));
        let mut r: &[u8] = b"data";
        assert!(matches!(c.scan(&mut r), Err(ClamdError::Unreachable(_))));
    }
}
