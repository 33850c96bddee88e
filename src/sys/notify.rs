//! The systemd notification protocol (`sd_notify(3)`) without libsystemd: one datagram of
//! `KEY=VALUE` lines to the Unix socket named by `NOTIFY_SOCKET`, a path or, with a leading
//! `@`, an abstract name. Read once at start; without the variable nothing is sent and
//! nothing else changes (the daemon runs the same without systemd).

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// Where notifications go: the service manager's socket, from `NOTIFY_SOCKET`.
#[derive(Debug)]
pub struct Notifier {
    addr: SocketAddr,
    sock: UnixDatagram,
}

impl Notifier {
    /// The notifier `NOTIFY_SOCKET` names; `Ok(None)` when it is unset or empty.
    pub fn from_env() -> io::Result<Option<Notifier>> {
        match std::env::var_os("NOTIFY_SOCKET") {
            Some(v) if !v.is_empty() => Notifier::new(&v.to_string_lossy()).map(Some),
            _ => Ok(None),
        }
    }

    /// A notifier for `socket`: a path, or `@name` for an abstract socket.
    pub fn new(socket: &str) -> io::Result<Notifier> {
        let addr = match socket.strip_prefix('@') {
            Some(name) => SocketAddr::from_abstract_name(name.as_bytes())?,
            None if socket.starts_with('/') => SocketAddr::from_pathname(socket)?,
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "NOTIFY_SOCKET is neither an absolute path nor an @abstract name",
                ))
            }
        };
        let sock = UnixDatagram::unbound()?;
        // A manager that stopped reading must not stall the caller (the watchdog thread).
        sock.set_write_timeout(Some(Duration::from_secs(1)))?;
        Ok(Notifier { addr, sock })
    }

    /// Sends `state` (`READY=1`, `WATCHDOG=1`, `STATUS=...`, lines joined by `\n`).
    pub fn notify(&self, state: &str) -> io::Result<()> {
        let sent = self.sock.send_to_addr(state.as_bytes(), &self.addr)?;
        if sent != state.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "notification datagram cut short",
            ));
        }
        Ok(())
    }
}

/// Microseconds in `WATCHDOG_USEC` as a duration when the watchdog is on for this process
/// (`WATCHDOG_PID` unset or this process's id); `None` otherwise.
pub fn watchdog_interval() -> Option<Duration> {
    let usec = std::env::var("WATCHDOG_USEC").ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID") {
        if pid.trim().parse::<u32>().ok()? != std::process::id() {
            return None;
        }
    }
    match usec.trim().parse::<u64>() {
        Ok(n) if n > 0 => Some(Duration::from_micros(n)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notification_reaches_a_path_socket() {
        let dir = std::env::temp_dir().join(format!("svc-notify-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let server = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::new(path.to_str().unwrap()).unwrap();
        n.notify("READY=1\nSTATUS=up").unwrap();
        let mut buf = [0u8; 64];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=up");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_notification_reaches_an_abstract_socket() {
        let name = format!("svc-notify-test-{}", std::process::id());
        let server =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        let n = Notifier::new(&format!("@{name}")).unwrap();
        n.notify("WATCHDOG=1").unwrap();
        let mut buf = [0u8; 16];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"WATCHDOG=1");
    }

    #[test]
    fn a_relative_socket_name_is_refused() {
        assert!(Notifier::new("notify.sock").is_err());
        assert!(Notifier::new("").is_err());
    }
}
