//! Streaming bodies (the event stream): each on its own thread with per-write deadlines.
//!
//! A stream leaves the front for good: its socket turns blocking, its slot and its
//! per-address count are given back, and it is counted in `sse_streams` instead (the event
//! bus caps subscribers at `max_sse_subscribers`).

use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rustls::{ServerConnection, StreamOwned};

use super::conn::Conn;
use super::response::{Body, Response};
use super::ServerStats;

/// Deadline for each write and flush of a streaming body.
pub const STREAM_WRITE_DEADLINE: Duration = Duration::from_secs(3);
/// Socket send buffer of a streaming connection (the kernel doubles it). A fixed size turns
/// off send-buffer autotuning, which would otherwise let one stalled peer park megabytes
/// of events in the kernel before its writes block and the deadline can notice.
pub const STREAM_SEND_BUFFER: usize = 32 * 1024;
/// A streaming peer that leaves sent data unacknowledged this long (vanished without a
/// reset) is closed by the kernel, so the next heartbeat write fails and frees its slot.
pub const STREAM_USER_TIMEOUT_MILLIS: u32 = 30_000;

/// Runs a streaming response to its end on the calling thread.
pub(crate) fn run(conn: Conn, resp: Response, stats: &ServerStats) {
    let Conn { tcp, tls, .. } = conn;
    if tcp.set_nonblocking(false).is_err() {
        return;
    }
    let _ = tcp.set_write_timeout(Some(STREAM_WRITE_DEADLINE));
    if let Err(e) =
        nix::sys::socket::setsockopt(&tcp, nix::sys::socket::sockopt::SndBuf, &STREAM_SEND_BUFFER)
    {
        log::debug!("http: cannot size the stream's send buffer: {e}");
    }
    if let Err(e) = nix::sys::socket::setsockopt(
        &tcp,
        nix::sys::socket::sockopt::TcpUserTimeout,
        &STREAM_USER_TIMEOUT_MILLIS,
    ) {
        log::debug!("http: cannot set the stream's TCP user timeout: {e}");
    }
    let mut tls = StreamOwned::new(tls, tcp);
    stats.sse_streams.fetch_add(1, Ordering::SeqCst);
    let head = resp.head_bytes(false);
    let mut w = DeadlineWriter {
        tls: &mut tls,
        deadline: STREAM_WRITE_DEADLINE,
    };
    if w.write_all(&head).and_then(|_| w.flush()).is_ok() {
        if let Body::Stream(f) = resp.body {
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut w)));
            if out.is_err() {
                stats.panics.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    stats.sse_streams.fetch_sub(1, Ordering::SeqCst);
    tls.conn.send_close_notify();
    let until = Instant::now() + Duration::from_millis(500);
    let _ = DeadlineWriter {
        tls: &mut tls,
        deadline: STREAM_WRITE_DEADLINE,
    }
    .send_pending(until);
}

/// The writer a streaming body gets: every `write` and every `flush` must complete within
/// `deadline`. Before each send the socket's send timeout is set to what is left of the
/// call's deadline, so a peer that reads slowly (or not at all) cannot stretch one call past
/// it; a call that runs out fails with `TimedOut` (or `WouldBlock` from the socket).
struct DeadlineWriter<'a> {
    tls: &'a mut StreamOwned<ServerConnection, TcpStream>,
    deadline: Duration,
}

impl DeadlineWriter<'_> {
    /// Sends every pending TLS record before `until`.
    fn send_pending(&mut self, until: Instant) -> io::Result<()> {
        while self.tls.conn.wants_write() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "stream write deadline passed",
                ));
            }
            self.tls.sock.set_write_timeout(Some(left))?;
            match self.tls.conn.write_tls(&mut self.tls.sock) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Write for DeadlineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let until = Instant::now() + self.deadline;
        self.send_pending(until)?;
        let n = self.tls.conn.writer().write(buf)?;
        self.send_pending(until)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        let until = Instant::now() + self.deadline;
        self.tls.conn.writer().flush()?;
        self.send_pending(until)
    }
}
