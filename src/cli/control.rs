//! The one client of the control socket `{state_path}/svc.sock`: every CLI command that
//! talks to the daemon (`status`, `doctor`, `check`, `quarantine`, ...) goes through
//! [`request`].
//!
//! Guarantees:
//! - "Not running" ([`ControlError::NotRunning`]) is reported only when nothing listens:
//!   the socket file is missing or the connection is refused.
//! - A daemon that accepts the connection but does not answer within the command's time
//!   budget is [`ControlError::NotResponding`], its own message; the budget covers the whole
//!   exchange (connect, send, answer), not each read.
//! - The answer is read up to [`MAX_REPLY`] bytes; a longer one is refused
//!   ([`ControlError::TooLarge`]) without reading further.
//! - Messages never print raw daemon text: what is shown is escaped
//!   ([`crate::text::escape_controls`]).

use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Largest answer read from the daemon, in bytes.
pub const MAX_REPLY: usize = 16 * 1024 * 1024;

/// Why a control request failed.
#[derive(Debug)]
pub enum ControlError {
    /// Nothing listens on the socket: no socket file, or the connection was refused.
    NotRunning { socket: PathBuf, cause: io::Error },
    /// The socket exists but may not be opened (run as the daemon's user, usually root).
    PermissionDenied { socket: PathBuf },
    /// The daemon accepted the connection but did not answer within the budget.
    NotResponding { socket: PathBuf, budget: Duration },
    /// The answer exceeded [`MAX_REPLY`] bytes.
    TooLarge { socket: PathBuf },
    /// The connection closed before a complete answer, or the answer is not JSON.
    BadAnswer { socket: PathBuf, detail: String },
    /// Any other I/O failure talking to the socket.
    Io { socket: PathBuf, cause: io::Error },
}

impl ControlError {
    /// Whether the daemon is simply not running (as opposed to failing).
    pub fn is_not_running(&self) -> bool {
        matches!(self, ControlError::NotRunning { .. })
    }
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlError::NotRunning { socket, cause } => write!(
                f,
                "the daemon is not running (nothing listens on {}: {cause})",
                socket.display()
            ),
            ControlError::PermissionDenied { socket } => write!(
                f,
                "permission denied on {}: run as the daemon's user (usually root)",
                socket.display()
            ),
            ControlError::NotResponding { socket, budget } => write!(
                f,
                "the daemon is not responding: {} accepted the connection but no answer came within {} s",
                socket.display(),
                budget.as_secs_f64()
            ),
            ControlError::TooLarge { socket } => write!(
                f,
                "the daemon's answer on {} exceeds {} MiB; refused",
                socket.display(),
                MAX_REPLY / (1024 * 1024)
            ),
            ControlError::BadAnswer { socket, detail } => write!(
                f,
                "unreadable answer on {}: {}",
                socket.display(),
                crate::text::escape_controls(detail)
            ),
            ControlError::Io { socket, cause } => {
                write!(f, "cannot talk to the daemon on {}: {cause}", socket.display())
            }
        }
    }
}

impl std::error::Error for ControlError {}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Sends `command` (with `args`, an object whose keys are sent alongside `command`) and
/// returns the daemon's JSON answer, all within `budget`.
pub fn request(
    socket: &Path,
    command: &str,
    args: Value,
    budget: Duration,
) -> Result<Value, ControlError> {
    let deadline = Instant::now() + budget;
    let sock = || socket.to_path_buf();
    let not_responding = || ControlError::NotResponding {
        socket: sock(),
        budget,
    };
    let mut conn = UnixStream::connect(socket).map_err(|cause| match cause.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => ControlError::NotRunning {
            socket: sock(),
            cause,
        },
        io::ErrorKind::PermissionDenied => ControlError::PermissionDenied { socket: sock() },
        _ => ControlError::Io {
            socket: sock(),
            cause,
        },
    })?;
    let mut req = args;
    if let Value::Object(m) = &mut req {
        m.insert("command".into(), json!(command));
    } else {
        req = json!({ "command": command });
    }
    let mut line = req.to_string().into_bytes();
    line.push(b'\n');
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(not_responding());
    }
    let io_err = |cause: io::Error| {
        if is_timeout(&cause) {
            not_responding()
        } else {
            ControlError::Io {
                socket: sock(),
                cause,
            }
        }
    };
    conn.set_write_timeout(Some(left)).map_err(io_err)?;
    conn.write_all(&line).map_err(io_err)?;
    let mut answer: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(not_responding());
        }
        conn.set_read_timeout(Some(left)).map_err(io_err)?;
        let n = match conn.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(e)),
        };
        if n == 0 {
            break;
        }
        let part = &chunk[..n];
        if let Some(end) = part.iter().position(|&b| b == b'\n') {
            if answer.len() + end > MAX_REPLY {
                return Err(ControlError::TooLarge { socket: sock() });
            }
            answer.extend_from_slice(&part[..end]);
            return parse(&answer, socket);
        }
        if answer.len() + n > MAX_REPLY {
            return Err(ControlError::TooLarge { socket: sock() });
        }
        answer.extend_from_slice(part);
    }
    if answer.is_empty() {
        return Err(ControlError::BadAnswer {
            socket: sock(),
            detail: "the connection closed without an answer".into(),
        });
    }
    parse(&answer, socket)
}

fn parse(answer: &[u8], socket: &Path) -> Result<Value, ControlError> {
    serde_json::from_slice(answer).map_err(|e| ControlError::BadAnswer {
        socket: socket.to_path_buf(),
        detail: format!("not JSON ({e})"),
    })
}

/// Sends one command to the daemon of the configuration `config` (or of `--dev` in this
/// directory): finds its state directory and socket, asks, and on failure prints
/// `{what}: {reason}` to standard error and returns `Err(1)` (the exit code). The answer may
/// still carry the daemon's own `error`; callers print that their way.
pub fn ask_daemon(
    config: Option<PathBuf>,
    dev: bool,
    what: &str,
    command: &str,
    args: Value,
    budget: Duration,
) -> Result<Value, i32> {
    let flags = super::Args::for_config(config, dev);
    let state = super::status::state_path(&flags).map_err(|e| {
        eprintln!("{what}: {e}");
        1
    })?;
    request(&state.join("svc.sock"), command, args, budget).map_err(|e| {
        eprintln!("{what}: {e}");
        1
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixListener;

    fn sock(tag: &str) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("svc-ctl-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        (dir.join("svc.sock"), dir)
    }

    #[test]
    fn missing_socket_is_not_running() {
        let (path, dir) = sock("missing");
        let e = request(&path, "status", json!({}), Duration::from_secs(1)).unwrap_err();
        assert!(e.is_not_running(), "{e}");
        // A stale socket file nobody listens on is refused: not running either.
        drop(UnixListener::bind(&path).unwrap());
        let e = request(&path, "status", json!({}), Duration::from_secs(1)).unwrap_err();
        assert!(e.is_not_running(), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn silent_listener_is_not_responding() {
        let (path, dir) = sock("silent");
        // Bound and listening, never accepted: the kernel queues the connection.
        let _l = UnixListener::bind(&path).unwrap();
        let e = request(&path, "status", json!({}), Duration::from_millis(300)).unwrap_err();
        assert!(matches!(e, ControlError::NotResponding { .. }), "{e}");
        assert!(e.to_string().contains("not responding"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn answers_are_read_and_oversized_ones_refused() {
        let (path, dir) = sock("answer");
        let l = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            for reply in [b"{\"ok\":true}\n".to_vec(), vec![b'x'; MAX_REPLY + 10]] {
                let (c, _) = l.accept().unwrap();
                let mut line = String::new();
                BufReader::new(&c).read_line(&mut line).unwrap();
                assert!(line.contains("\"command\":\"status\""));
                let _ = (&c).write_all(&reply);
            }
        });
        let v = request(&path, "status", json!({}), Duration::from_secs(5)).unwrap();
        assert_eq!(v["ok"], true);
        let e = request(&path, "status", json!({}), Duration::from_secs(5)).unwrap_err();
        assert!(matches!(e, ControlError::TooLarge { .. }), "{e}");
        server.join().unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
