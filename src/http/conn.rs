//! One connection: TLS handshake, keep-alive request loop, deadlines.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rustls::{ServerConnection, StreamOwned};

use super::request::{parse_head, HeadError, Request};
use super::response::{Body, Response};
use super::Shared;

/// Deadline for each write and flush of a streaming body.
pub const STREAM_WRITE_DEADLINE: Duration = Duration::from_secs(3);
/// Socket send buffer of a streaming connection (the kernel doubles it). A fixed size turns
/// off send-buffer autotuning, which would otherwise let one stalled peer park megabytes
/// of events in the kernel before its writes block and the deadline can notice.
pub const STREAM_SEND_BUFFER: usize = 32 * 1024;
/// A streaming peer that leaves sent data unacknowledged this long (vanished without a
/// reset) is closed by the kernel, so the next heartbeat write fails and frees its slot.
pub const STREAM_USER_TIMEOUT_MILLIS: u32 = 30_000;

fn handshake(
    tcp: &mut TcpStream,
    conn: &mut ServerConnection,
    timeout: Duration,
) -> io::Result<()> {
    let deadline = Instant::now() + timeout;
    while conn.is_handshaking() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "handshake deadline",
            ));
        }
        tcp.set_read_timeout(Some(left))?;
        tcp.set_write_timeout(Some(left))?;
        conn.complete_io(tcp)?;
    }
    Ok(())
}

/// Performs the handshake and answers every request until the client goes away, a
/// deadline passes, or the server stops.
pub(crate) fn serve(mut tcp: TcpStream, shared: &Shared) {
    let remote = match tcp.peer_addr() {
        Ok(a) => a,
        Err(_) => return,
    };
    let _ = tcp.set_nodelay(true);
    let limits = &shared.limits;
    let Ok(mut conn) = ServerConnection::new(shared.tls.clone()) else {
        return;
    };
    if handshake(
        &mut tcp,
        &mut conn,
        Duration::from_secs(limits.handshake_timeout_seconds),
    )
    .is_err()
    {
        shared
            .stats
            .handshake_failures
            .fetch_add(1, Ordering::Relaxed);
        return;
    }
    let mut tls = StreamOwned::new(conn, tcp);
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let idle = Duration::from_secs(limits.idle_timeout_seconds);
    let head_timeout = Duration::from_secs(limits.head_timeout_seconds);
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        // Wait for the first byte of the next request within the idle timeout.
        if buf.is_empty() && fill(&mut tls, &mut buf, idle).unwrap_or(0) == 0 {
            break;
        }
        let deadline = Instant::now() + head_timeout;
        let head = loop {
            match parse_head(&buf, limits.max_headers, limits.max_body_bytes) {
                Ok(Some(h)) => break Ok(h),
                Ok(None) if buf.len() >= limits.max_head_bytes => break Err(HeadError::TooLarge),
                Ok(None) => {}
                Err(e) => break Err(e),
            }
            if !fill_or_408(&mut tls, &mut buf, deadline, shared, "request head") {
                return;
            }
        };
        let head = match head {
            Ok(h) if h.len > limits.max_head_bytes => {
                refuse_head(&mut tls, shared, HeadError::TooLarge);
                return;
            }
            Ok(h) => h,
            Err(e) => {
                refuse_head(&mut tls, shared, e);
                return;
            }
        };
        buf.drain(..head.len);
        // Body: exactly Content-Length bytes.
        let body_deadline = Instant::now() + idle;
        while buf.len() < head.content_length {
            if !fill_or_408(&mut tls, &mut buf, body_deadline, shared, "request body") {
                return;
            }
        }
        let body: Vec<u8> = buf.drain(..head.content_length).collect();
        let (path, query) = match head.target.split_once('?') {
            Some((p, q)) => (p.to_string(), q.to_string()),
            None => (head.target.clone(), String::new()),
        };
        let req = Request {
            method: head.method,
            path,
            query,
            headers: head.headers,
            body,
            remote,
            wants_close: head.wants_close,
        };
        let resp = shared.handler.handle(&req);
        if resp.is_stream() {
            stream(&mut tls, resp, shared);
            return;
        }
        let keep_alive = !req.wants_close && !shared.stop.load(Ordering::SeqCst);
        if !send_full(&mut tls, resp, keep_alive, req.method == "HEAD") || !keep_alive {
            break;
        }
    }
    tls.conn.send_close_notify();
    let _ = tls.conn.complete_io(&mut tls.sock);
}

/// Reads more of a request before `deadline`. False when the connection must close: the
/// peer went away, a read failed, or the deadline passed (answered with 408 first).
fn fill_or_408(
    tls: &mut StreamOwned<ServerConnection, TcpStream>,
    buf: &mut Vec<u8>,
    deadline: Instant,
    shared: &Shared,
    what: &str,
) -> bool {
    let left = deadline.saturating_duration_since(Instant::now());
    match fill(tls, buf, left) {
        Ok(n) => n > 0,
        Err(e) if is_timeout(&e) => {
            shared.handler.on_refused(408);
            let msg = format!("{what} not received in time");
            send(tls, Response::error(408, &msg), false);
            false
        }
        Err(_) => false,
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Reads more bytes into `buf`, waiting at most `timeout`. Returns 0 at end of stream.
fn fill(
    tls: &mut StreamOwned<ServerConnection, TcpStream>,
    buf: &mut Vec<u8>,
    timeout: Duration,
) -> io::Result<usize> {
    if timeout.is_zero() {
        return Err(io::Error::new(io::ErrorKind::TimedOut, "deadline"));
    }
    tls.sock.set_read_timeout(Some(timeout))?;
    let mut chunk = [0u8; 8192];
    let n = tls.read(&mut chunk)?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n)
}

fn refuse_head(tls: &mut StreamOwned<ServerConnection, TcpStream>, shared: &Shared, e: HeadError) {
    let (status, msg) = match e {
        HeadError::Malformed(m) => (400, m.to_string()),
        HeadError::TooLarge => (
            431,
            format!(
                "request head exceeds {} bytes or {} headers",
                shared.limits.max_head_bytes, shared.limits.max_headers
            ),
        ),
        HeadError::LengthRequired => (
            411,
            "request bodies must carry Content-Length; chunked bodies are refused".to_string(),
        ),
        HeadError::BodyTooLarge => (
            413,
            format!(
                "request body exceeds {} bytes",
                shared.limits.max_body_bytes
            ),
        ),
    };
    shared.handler.on_refused(status);
    send(tls, Response::error(status, &msg), false);
}

/// Writes a full response. Returns false when the connection failed.
fn send(
    tls: &mut StreamOwned<ServerConnection, TcpStream>,
    resp: Response,
    keep_alive: bool,
) -> bool {
    send_full(tls, resp, keep_alive, false)
}

/// Writes a response; `head_only` (HEAD requests) keeps the Content-Length but sends no body.
fn send_full(
    tls: &mut StreamOwned<ServerConnection, TcpStream>,
    resp: Response,
    keep_alive: bool,
    head_only: bool,
) -> bool {
    let _ = tls.sock.set_write_timeout(Some(Duration::from_secs(10)));
    let mut out = resp.head_bytes(keep_alive);
    if let (Body::Full(b), false) = (&resp.body, head_only) {
        out.extend_from_slice(b);
    }
    tls.write_all(&out).and_then(|_| tls.flush()).is_ok()
}

fn stream(tls: &mut StreamOwned<ServerConnection, TcpStream>, resp: Response, shared: &Shared) {
    let _ = tls.sock.set_write_timeout(Some(STREAM_WRITE_DEADLINE));
    if let Err(e) = nix::sys::socket::setsockopt(
        &tls.sock,
        nix::sys::socket::sockopt::SndBuf,
        &STREAM_SEND_BUFFER,
    ) {
        log::debug!("http: cannot size the stream's send buffer: {e}");
    }
    if let Err(e) = nix::sys::socket::setsockopt(
        &tls.sock,
        nix::sys::socket::sockopt::TcpUserTimeout,
        &STREAM_USER_TIMEOUT_MILLIS,
    ) {
        log::debug!("http: cannot set the stream's TCP user timeout: {e}");
    }
    let head = resp.head_bytes(false);
    if tls.write_all(&head).and_then(|_| tls.flush()).is_err() {
        return;
    }
    if let Body::Stream(f) = resp.body {
        // An SSE stream does not count against max_connections.
        shared.stats.open_connections.fetch_sub(1, Ordering::SeqCst);
        shared.stats.sse_streams.fetch_add(1, Ordering::SeqCst);
        let _ = f(&mut DeadlineWriter {
            tls,
            deadline: STREAM_WRITE_DEADLINE,
        });
        shared.stats.sse_streams.fetch_sub(1, Ordering::SeqCst);
        shared.stats.open_connections.fetch_add(1, Ordering::SeqCst);
    }
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

/// Answers a connection over the limit with 503 (bounded by `timeout`).
pub(crate) fn refuse(mut tcp: TcpStream, shared: &Shared, timeout: Duration) {
    let Ok(mut conn) = ServerConnection::new(shared.tls.clone()) else {
        return;
    };
    if handshake(&mut tcp, &mut conn, timeout).is_err() {
        return;
    }
    let mut tls = StreamOwned::new(conn, tcp);
    send(
        &mut tls,
        Response::error(503, "too many connections; try again later")
            .with_header("Retry-After", "1"),
        false,
    );
    tls.conn.send_close_notify();
    let _ = tls.conn.complete_io(&mut tls.sock);
}
