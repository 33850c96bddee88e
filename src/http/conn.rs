//! One connection's state and its non-blocking TLS I/O.
//!
//! The socket stays non-blocking for its whole life (except when it becomes an event
//! stream): whoever holds the [`Conn`], the front or a worker, only ever makes calls that
//! return at once. Reading stops when a request is complete, so what a client pipelines
//! waits in the kernel and in rustls (16 KiB of plaintext at most) until the next request.

use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpStream};

use rustls::ServerConnection;

use super::addr::AddrKey;
use super::phase::Phase;
use super::request::Head;
use super::response::{Body, Response};

/// Names a connection slot of the front; the generation tells a reused slot apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub index: u32,
    pub gen: u32,
}

impl Token {
    pub fn to_u64(self) -> u64 {
        (u64::from(self.gen) << 32) | u64::from(self.index)
    }

    pub fn from_u64(v: u64) -> Token {
        Token {
            index: (v & 0xffff_ffff) as u32,
            gen: (v >> 32) as u32,
        }
    }
}

/// Result of moving bytes in one direction without blocking.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Io {
    /// Everything that was pending went out.
    Done,
    /// The socket would block; wait for it to become writable.
    Blocked,
    /// The connection is broken.
    Failed,
}

/// Result of one read from the socket.
#[derive(Debug)]
pub(crate) enum Read1 {
    /// Some TLS bytes arrived (perhaps no plaintext yet).
    Progress,
    /// Nothing more to read now.
    WouldBlock,
    /// The peer closed the connection (TCP end of stream or TLS close_notify).
    Closed,
    /// The TLS layer refused what the peer sent.
    TlsError,
    /// The socket failed.
    Failed,
}

/// A response on its way out: head and body, and how much of both rustls has taken.
#[derive(Default)]
pub(crate) struct Outgoing {
    head: Vec<u8>,
    body: Vec<u8>,
    taken: usize,
}

impl Outgoing {
    fn remaining(&self) -> (&[u8], &[u8]) {
        let h = self.head.len();
        if self.taken < h {
            (&self.head[self.taken..], &self.body[..])
        } else {
            (&[][..], &self.body[(self.taken - h).min(self.body.len())..])
        }
    }

    fn is_done(&self) -> bool {
        self.taken >= self.head.len() + self.body.len()
    }
}

/// One client connection.
pub(crate) struct Conn {
    pub tcp: TcpStream,
    pub tls: ServerConnection,
    pub remote: SocketAddr,
    pub key: AddrKey,
    pub token: Token,
    pub phase: Phase,
    /// Monotonic nanoseconds at which the current phase ends (none in the worker phase).
    pub deadline: Option<i64>,
    /// Plaintext received and not yet consumed by a request.
    pub buf: Vec<u8>,
    /// How much of `buf` was already searched for the end of a head.
    pub scanned: usize,
    /// The head of the request whose body is being read.
    pub head: Option<Head>,
    pub out: Outgoing,
    /// Close once the pending response is out.
    pub close_after: bool,
    /// The peer sent close_notify or ended the stream.
    pub peer_closed: bool,
    /// Registered for writability (only while output waits for the socket).
    pub want_out: bool,
    /// Once the pending response is out, close with a lingering read instead of at once
    /// (a refusal answered while the client may still be sending its body).
    pub linger_after: bool,
    /// Lingering: the bytes read and discarded so far (see `front::LINGER_MAX_BYTES`).
    pub linger: Option<usize>,
    /// The write side is shut down (close_notify sent and flushed).
    pub write_shut: bool,
}

impl Conn {
    pub fn new(tcp: TcpStream, tls: ServerConnection, remote: SocketAddr, token: Token) -> Conn {
        Conn {
            tcp,
            tls,
            remote,
            key: AddrKey::of(remote.ip()),
            token,
            phase: Phase::Handshake,
            deadline: None,
            buf: Vec::new(),
            scanned: 0,
            head: None,
            out: Outgoing::default(),
            close_after: false,
            peer_closed: false,
            want_out: false,
            linger_after: false,
            linger: None,
            write_shut: false,
        }
    }

    /// Sends the TLS records rustls holds, as far as the socket takes them.
    pub fn flush_tls(&mut self) -> Io {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.tcp) {
                Ok(0) => return Io::Failed,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Io::Blocked,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Io::Failed,
            }
        }
        Io::Done
    }

    /// Reads one batch of TLS bytes, processes them and moves any plaintext into `buf`.
    pub fn read_once(&mut self) -> Read1 {
        match self.tls.read_tls(&mut self.tcp) {
            Ok(0) => {
                self.peer_closed = true;
                return Read1::Closed;
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Read1::WouldBlock,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Read1::Progress,
            // Includes rustls refusing to buffer more: cannot happen, since every call
            // below drains what it decrypted.
            Err(_) => return Read1::Failed,
        }
        if self.tls.process_new_packets().is_err() {
            // rustls queued an alert; send it if the socket takes it.
            let _ = self.flush_tls();
            return Read1::TlsError;
        }
        let mut chunk = [0u8; 8192];
        loop {
            match self.tls.reader().read(&mut chunk) {
                Ok(0) => {
                    self.peer_closed = true;
                    return Read1::Closed;
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.peer_closed = true;
                    return Read1::Closed;
                }
            }
        }
        Read1::Progress
    }

    /// Queues a response (head and body; HEAD requests get the head only).
    pub fn queue_response(&mut self, resp: Response, keep_alive: bool, head_only: bool) {
        let head = resp.head_bytes(keep_alive);
        let body = match resp.body {
            Body::Full(b) if !head_only => b,
            _ => Vec::new(),
        };
        self.out = Outgoing {
            head,
            body,
            taken: 0,
        };
        self.close_after = !keep_alive;
    }

    /// Queues raw bytes (an interim `100 Continue`) ahead of anything else.
    pub fn queue_interim(&mut self, bytes: &[u8]) -> Io {
        match self.tls.writer().write_all(bytes) {
            Ok(()) => self.flush_tls(),
            Err(_) => Io::Failed,
        }
    }

    /// Moves the queued response into TLS records and onto the socket as far as it goes.
    /// rustls holds at most 64 KiB of records, so a large body is encrypted as the peer
    /// reads it, not all at once.
    pub fn pump_out(&mut self) -> Io {
        loop {
            match self.flush_tls() {
                Io::Done => {}
                other => return other,
            }
            if self.out.is_done() {
                self.out = Outgoing::default();
                return Io::Done;
            }
            let (h, b) = self.out.remaining();
            let n = match self
                .tls
                .writer()
                .write_vectored(&[IoSlice::new(h), IoSlice::new(b)])
            {
                Ok(n) => n,
                Err(_) => return Io::Failed,
            };
            if n == 0 {
                // rustls took nothing although its buffer was just emptied.
                return Io::Failed;
            }
            self.out.taken += n;
        }
    }

    /// Lingering: reads raw socket bytes and throws them away (nothing the peer sends now is
    /// looked at, not even by TLS). `Progress` when `n` bytes were discarded.
    pub fn discard_once(&mut self) -> (Read1, usize) {
        let mut chunk = [0u8; 16 * 1024];
        match self.tcp.read(&mut chunk) {
            Ok(0) => {
                self.peer_closed = true;
                (Read1::Closed, 0)
            }
            Ok(n) => (Read1::Progress, n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => (Read1::WouldBlock, 0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => (Read1::Progress, 0),
            Err(_) => (Read1::Failed, 0),
        }
    }

    /// Best-effort goodbye: close_notify and whatever the socket takes at once.
    pub fn close_gracefully(&mut self) {
        self.tls.send_close_notify();
        let _ = self.flush_tls();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        let t = Token {
            index: 4095,
            gen: u32::MAX,
        };
        assert_eq!(Token::from_u64(t.to_u64()), t);
    }

    #[test]
    fn outgoing_walks_head_then_body() {
        let mut o = Outgoing {
            head: b"HEAD".to_vec(),
            body: b"body".to_vec(),
            taken: 0,
        };
        assert_eq!(o.remaining(), (&b"HEAD"[..], &b"body"[..]));
        o.taken = 2;
        assert_eq!(o.remaining(), (&b"AD"[..], &b"body"[..]));
        o.taken = 6;
        assert_eq!(o.remaining(), (&b""[..], &b"dy"[..]));
        assert!(!o.is_done());
        o.taken = 8;
        assert!(o.is_done());
    }
}
