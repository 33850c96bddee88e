//! The front: one thread that owns every connection not running a handler.
//!
//! Non-blocking sockets in one epoll set (edge-triggered for connections, level-triggered
//! for the listener and the wake-up eventfd). The front accepts, applies the connection
//! limits, performs TLS handshakes, waits through keep-alive idle time, reads heads and
//! bodies, and finishes responses a worker could not send at once. Only a complete request
//! is handed to the worker pool, so no client can hold a worker by being slow.
//!
//! Guarantees:
//! - At most `max_connections` connections are open, and at most
//!   `max_connections_per_address` per client address (IPv6 per /64); a connection over
//!   either limit is closed at once, before any read, and counted by reason.
//! - Every phase ends by its whole-phase deadline ([`super::phase`]); deadlines are checked
//!   at least every [`SWEEP_EVERY_NANOS`] by a sweep over the open connections.
//! - One connection gets at most [`READ_BUDGET`] reads per turn; the rest of its input waits
//!   for the next turn, so a fast sender cannot starve the others.
//! - After a stop the listener closes at once, connections waiting for a request close at
//!   once, and responses in flight get [`SHUTDOWN_GRACE`] to finish; then the front returns
//!   whatever is left.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use rustls::ServerConnection;

use super::addr::{AddrKey, PerAddress};
use super::conn::{Conn, Io, Read1, Token};
use super::phase::Phase;
use super::request::{parse_head, HeadError, Request};
use super::response::Response;
use super::worker::{Back, Job};
use super::Shared;

const LISTENER: u64 = u64::MAX;
const WAKE: u64 = u64::MAX - 1;
/// Deadlines are looked at no more often than this (and so fire at most this late).
pub const SWEEP_EVERY_NANOS: i64 = 100_000_000;
/// Accepts per turn before other work gets its share.
const ACCEPT_BATCH: usize = 256;
/// Pause of accepting after the process ran out of descriptors or memory.
const ACCEPT_PAUSE_NANOS: i64 = 100_000_000;
/// Socket reads per connection per turn.
pub const READ_BUDGET: usize = 64;
/// How long responses in flight may take to finish after a stop.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);
const EVENTS: usize = 1024;
/// The longest an idle front sleeps in its poll: it beats its heartbeat once per turn.
const BEAT_EVERY: Duration = Duration::from_secs(1);
/// A refused connection reads and discards at most this much of what the client still
/// sends before it is closed (nginx's `lingering_close`), ...
pub const LINGER_MAX_BYTES: usize = 4 * 1024 * 1024;
/// ... and lingers at most this long after its answer went out.
pub const LINGER_NANOS: i64 = 5_000_000_000;
/// Capacity of a request buffer an idle connection may keep.
const IDLE_BUFFER_KEEP: usize = 16 * 1024;

enum SlotState {
    Free,
    /// The front holds the connection.
    Here(Box<Conn>),
    /// A worker (or the front itself, for the length of one call) holds it. `woke`: the
    /// socket reported an event meanwhile (edge-triggered: it will not be reported again).
    Away {
        key: AddrKey,
        woke: bool,
    },
}

struct Slot {
    gen: u32,
    state: SlotState,
}

/// What to do with a connection after driving it.
enum Next {
    Keep,
    /// Close with close_notify (a polite end).
    Close,
    /// Close without another byte.
    Drop,
    Dispatch(Request),
}

/// What the buffered plaintext amounts to.
enum Step {
    More,
    Request(Request),
    Refuse(HeadError),
    Fail,
}

pub(crate) struct Front {
    epoll: Epoll,
    listener: Option<TcpListener>,
    accept_paused_until: Option<i64>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    open: usize,
    per_addr: PerAddress,
    phase_counts: [usize; 6],
    /// The workers' lanes: (state-changing requests, reads); see `worker::Lanes`.
    jobs: Option<(Sender<Job>, Sender<Job>)>,
    backs: Receiver<Back>,
    shared: Arc<Shared>,
    next_sweep: i64,
    last_sweep: i64,
    stopping: Option<i64>,
    /// Connections that used up their read budget and have input left.
    again: Vec<Token>,
    events: Vec<EpollEvent>,
    /// Connections closed since memory was last handed back (see [`TRIM_AFTER_CLOSES`]).
    closed_since_trim: usize,
}

/// After this many closed connections (a flood ending), the allocator is asked to return
/// the free pages their TLS and read buffers left (`sys::malloc::note_large`, at most once a
/// second), so RSS falls back near idle instead of staying at its flood peak.
const TRIM_AFTER_CLOSES: usize = 1024;

fn conn_interest(out: bool) -> EpollFlags {
    let mut f = EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP | EpollFlags::EPOLLET;
    if out {
        f |= EpollFlags::EPOLLOUT;
    }
    f
}

impl Front {
    pub fn new(
        listener: TcpListener,
        shared: Arc<Shared>,
        jobs: (Sender<Job>, Sender<Job>),
        backs: Receiver<Back>,
    ) -> std::io::Result<Front> {
        listener.set_nonblocking(true)?;
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        epoll.add(&listener, EpollEvent::new(EpollFlags::EPOLLIN, LISTENER))?;
        epoll.add(
            shared.waker.fd(),
            EpollEvent::new(EpollFlags::EPOLLIN, WAKE),
        )?;
        let now = shared.clock.monotonic_nanos();
        Ok(Front {
            epoll,
            listener: Some(listener),
            accept_paused_until: None,
            slots: Vec::new(),
            free: Vec::new(),
            open: 0,
            per_addr: PerAddress::default(),
            phase_counts: [0; 6],
            jobs: Some(jobs),
            backs,
            shared,
            next_sweep: i64::MAX,
            last_sweep: now,
            stopping: None,
            again: Vec::new(),
            events: vec![EpollEvent::empty(); EVENTS],
            closed_since_trim: 0,
        })
    }

    /// Runs until stopped and drained (or the grace period is over).
    ///
    /// A panic inside one turn (a bug: outside input reaches only the fuzzed head parser and
    /// rustls) is logged and counted, and the front goes on: losing the one connection it
    /// was handling beats losing the server.
    pub fn run(mut self) {
        let beat = crate::queue::heartbeat::Beat::register("http-front", self.shared.clock.clone());
        loop {
            beat.beat();
            // An idle front still turns every second, so its beat says it is alive.
            let turned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.turn(Some(BEAT_EVERY))
            }));
            if turned.is_err() {
                self.shared.stats.panics.fetch_add(1, Ordering::Relaxed);
                crate::warn_limited!(
                    self.shared.log,
                    "http_front_panic",
                    "",
                    "http: the front thread recovered from a panic (see the line above)"
                );
            }
            if self.finished() {
                break;
            }
        }
        self.close_all();
    }

    fn now(&self) -> i64 {
        self.shared.clock.monotonic_nanos()
    }

    /// True once a stop was seen and nothing is left (or the grace period ran out).
    pub fn finished(&self) -> bool {
        match self.stopping {
            Some(until) => self.open == 0 || self.now() >= until,
            None => false,
        }
    }

    /// How long the next poll may sleep.
    fn wait_for(&self, now: i64, cap: Option<Duration>) -> EpollTimeout {
        if !self.again.is_empty() {
            return EpollTimeout::ZERO;
        }
        let mut until = i64::MAX;
        if self.next_sweep != i64::MAX {
            until = self
                .next_sweep
                .max(self.last_sweep.saturating_add(SWEEP_EVERY_NANOS));
        }
        if let Some(p) = self.accept_paused_until {
            until = until.min(p);
        }
        if let Some(s) = self.stopping {
            until = until.min(s);
        }
        let mut ms: Option<i64> =
            (until != i64::MAX).then(|| (until.saturating_sub(now).max(0) + 999_999) / 1_000_000);
        if let Some(c) = cap {
            let c = i64::try_from(c.as_millis()).unwrap_or(i64::MAX);
            ms = Some(ms.map_or(c, |m| m.min(c)));
        }
        match ms {
            None => EpollTimeout::NONE,
            Some(m) => EpollTimeout::try_from(m.min(60_000)).unwrap_or(EpollTimeout::ZERO),
        }
    }

    /// One poll and everything it brought: accepts, connection I/O, connections coming
    /// back from workers, the stop, and (when due) the deadline sweep. `cap` bounds the
    /// sleep (tests use zero).
    pub fn turn(&mut self, cap: Option<Duration>) {
        let timeout = self.wait_for(self.now(), cap);
        let mut events = std::mem::take(&mut self.events);
        if events.is_empty() {
            // A turn that panicked did not put the buffer back.
            events = vec![EpollEvent::empty(); EVENTS];
        }
        let n = match self.epoll.wait(&mut events, timeout) {
            Ok(n) => n,
            Err(Errno::EINTR) => 0,
            Err(e) => {
                crate::warn_limited!(self.shared.log, "http_poll", "", "http: poll failed: {e}");
                std::thread::sleep(Duration::from_millis(10));
                0
            }
        };
        let now = self.now();
        for ev in &events[..n] {
            match ev.data() {
                LISTENER => self.accept_batch(now),
                WAKE => self.shared.waker.reset(),
                t => self.on_event(Token::from_u64(t), now),
            }
        }
        self.events = events;
        for t in std::mem::take(&mut self.again) {
            self.on_event(t, now);
        }
        self.drain_backs(now);
        if self.stopping.is_none() && self.shared.stop.load(Ordering::SeqCst) {
            self.begin_stop(now);
        }
        if self.accept_paused_until.is_some_and(|p| now >= p) {
            self.accept_paused_until = None;
            if let Some(l) = &self.listener {
                if let Err(e) = self
                    .epoll
                    .add(l, EpollEvent::new(EpollFlags::EPOLLIN, LISTENER))
                {
                    log::error!("http: cannot resume accepting: {e}");
                }
            }
        }
        if now >= self.next_sweep && now >= self.last_sweep.saturating_add(SWEEP_EVERY_NANOS) {
            self.sweep(now);
        }
    }

    // ---- accepting ------------------------------------------------------------------

    fn accept_batch(&mut self, now: i64) {
        for _ in 0..ACCEPT_BATCH {
            let Some(l) = &self.listener else { return };
            match l.accept() {
                Ok((tcp, remote)) => self.admit(tcp, remote, now),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::Interrupted | std::io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => {
                    // Out of descriptors or memory: the pending connection stays queued,
                    // so a level-triggered listener would wake us at once, forever.
                    crate::warn_limited!(
                        self.shared.log,
                        "http_accept",
                        "",
                        "http: accept failed: {e}; accepting paused for 100 ms"
                    );
                    let _ = self.epoll.delete(l);
                    self.accept_paused_until = Some(now + ACCEPT_PAUSE_NANOS);
                    return;
                }
            }
        }
    }

    fn admit(&mut self, tcp: TcpStream, remote: SocketAddr, now: i64) {
        let stats = self.shared.stats.clone();
        stats.accepted.fetch_add(1, Ordering::Relaxed);
        let (max_conns, max_per_addr) = (
            self.shared.limits.max_connections,
            self.shared.limits.max_connections_per_address,
        );
        if self.open >= max_conns {
            stats
                .refused_max_connections
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        let key = AddrKey::of(remote.ip());
        if !self.per_addr.try_add(key, max_per_addr) {
            stats.refused_per_address.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let setup = tcp
            .set_nonblocking(true)
            .and_then(|_| tcp.set_nodelay(true))
            .and_then(|_| {
                ServerConnection::new(self.shared.tls.clone()).map_err(std::io::Error::other)
            });
        let tls = match setup {
            Ok(t) => t,
            Err(e) => {
                log::debug!("http: cannot set up a connection: {e}");
                self.per_addr.remove(key);
                return;
            }
        };
        let token = self.alloc();
        if let Err(e) = self
            .epoll
            .add(&tcp, EpollEvent::new(conn_interest(false), token.to_u64()))
        {
            log::debug!("http: cannot poll a connection: {e}");
            self.per_addr.remove(key);
            self.slots[token.index as usize].state = SlotState::Free;
            self.free.push(token.index);
            return;
        }
        let mut conn = Box::new(Conn::new(tcp, tls, remote, token));
        self.open += 1;
        stats.open_connections.store(self.open, Ordering::Relaxed);
        self.count(Phase::Handshake, 1);
        conn.deadline = self.shared.deadlines.of(Phase::Handshake, now, 0);
        self.note_deadline(conn.deadline);
        self.slots[token.index as usize].state = SlotState::Here(conn);
        // Readable data already queued is reported by the next poll (epoll checks
        // readiness when a descriptor is added).
    }

    fn alloc(&mut self) -> Token {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    gen: 0,
                    state: SlotState::Free,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.state = SlotState::Away {
            key: AddrKey::V4(0),
            woke: false,
        };
        Token {
            index,
            gen: slot.gen,
        }
    }

    // ---- bookkeeping ----------------------------------------------------------------

    fn count(&mut self, phase: Phase, delta: isize) {
        let i = phase.index();
        self.phase_counts[i] = self.phase_counts[i].saturating_add_signed(delta);
        self.shared.stats.phases[i].store(self.phase_counts[i], Ordering::Relaxed);
    }

    fn note_deadline(&mut self, d: Option<i64>) {
        if let Some(d) = d {
            self.next_sweep = self.next_sweep.min(d);
        }
    }

    /// Moves `conn` into `phase`, whose whole-phase deadline starts now.
    fn enter(&mut self, conn: &mut Conn, phase: Phase, now: i64) {
        self.count(conn.phase, -1);
        self.count(phase, 1);
        conn.phase = phase;
        if phase == Phase::Idle && conn.buf.capacity() > IDLE_BUFFER_KEEP {
            // A body of up to 1 MiB grew it: an idle keep-alive connection keeps little.
            conn.buf.shrink_to(conn.buf.len().max(IDLE_BUFFER_KEEP / 4));
        }
        let len = match phase {
            Phase::Body => conn.head.as_ref().map_or(0, |h| h.content_length),
            _ => 0,
        };
        conn.deadline = self.shared.deadlines.of(phase, now, len);
        self.note_deadline(conn.deadline);
    }

    /// Takes the connection of `token` out of its slot (which stays reserved).
    fn take(&mut self, token: Token) -> Option<Box<Conn>> {
        let slot = self.slots.get_mut(token.index as usize)?;
        if slot.gen != token.gen {
            return None;
        }
        match std::mem::replace(&mut slot.state, SlotState::Free) {
            SlotState::Here(c) => {
                slot.state = SlotState::Away {
                    key: c.key,
                    woke: false,
                };
                Some(c)
            }
            other => {
                slot.state = other;
                None
            }
        }
    }

    fn put_back(&mut self, conn: Box<Conn>) {
        let i = conn.token.index as usize;
        self.slots[i].state = SlotState::Here(conn);
    }

    /// Frees the slot of a connection that is gone.
    fn release(&mut self, token: Token, key: AddrKey, phase: Phase) {
        let Some(slot) = self.slots.get_mut(token.index as usize) else {
            return;
        };
        if slot.gen != token.gen {
            return;
        }
        slot.state = SlotState::Free;
        slot.gen = slot.gen.wrapping_add(1);
        self.free.push(token.index);
        self.open = self.open.saturating_sub(1);
        self.shared
            .stats
            .open_connections
            .store(self.open, Ordering::Relaxed);
        self.per_addr.remove(key);
        self.count(phase, -1);
        self.closed_since_trim += 1;
        if self.closed_since_trim >= TRIM_AFTER_CLOSES {
            self.closed_since_trim = 0;
            crate::sys::malloc::note_large();
        }
    }

    fn close(&mut self, mut conn: Box<Conn>, polite: bool) {
        if conn.phase == Phase::Handshake && self.stopping.is_none() {
            self.shared
                .stats
                .handshake_failures
                .fetch_add(1, Ordering::Relaxed);
        }
        if polite && conn.phase != Phase::Handshake && !conn.write_shut {
            conn.close_gracefully();
        }
        self.release(conn.token, conn.key, conn.phase);
        // Dropping the socket closes it, which also removes it from the epoll set.
    }

    fn apply(&mut self, mut conn: Box<Conn>, next: Next, now: i64) {
        match next {
            Next::Keep => {
                let out =
                    conn.tls.wants_write() || (conn.phase == Phase::Write && conn.linger.is_none());
                self.set_interest(&mut conn, out);
                self.put_back(conn);
            }
            Next::Close => self.close(conn, true),
            Next::Drop => self.close(conn, false),
            Next::Dispatch(req) => self.dispatch(conn, req, now),
        }
    }

    fn set_interest(&mut self, conn: &mut Conn, out: bool) {
        if conn.want_out == out {
            return;
        }
        let mut ev = EpollEvent::new(conn_interest(out), conn.token.to_u64());
        if self.epoll.modify(&conn.tcp, &mut ev).is_ok() {
            conn.want_out = out;
        }
    }

    fn dispatch(&mut self, mut conn: Box<Conn>, req: Request, now: i64) {
        self.enter(&mut conn, Phase::Worker, now);
        let Some(jobs) = &self.jobs else {
            self.close(conn, false);
            return;
        };
        let lane = if super::worker::is_urgent(&req) {
            &jobs.0
        } else {
            &jobs.1
        };
        match lane.try_send(Job { conn, req }) {
            Ok(()) => {}
            // The lanes are unbounded (at most one request per connection waits there);
            // a disconnected pool means the server is stopping.
            Err(TrySendError::Full(job)) | Err(TrySendError::Disconnected(job)) => {
                let mut conn = job.conn;
                self.enter(&mut conn, Phase::Head, now);
                let next = self.refuse(
                    &mut conn,
                    503,
                    "the server is busy or stopping; try again later",
                    false,
                    now,
                );
                self.apply(conn, next, now);
            }
        }
    }

    // ---- connection I/O ------------------------------------------------------------

    fn on_event(&mut self, token: Token, now: i64) {
        if let Some(Slot {
            gen,
            state: SlotState::Away { woke, .. },
        }) = self.slots.get_mut(token.index as usize)
        {
            if *gen == token.gen {
                *woke = true;
            }
            return;
        }
        let Some(mut conn) = self.take(token) else {
            return;
        };
        let next = self.drive(&mut conn, now);
        self.apply(conn, next, now);
    }

    /// Moves a connection forward as far as it goes without blocking.
    fn drive(&mut self, conn: &mut Conn, now: i64) -> Next {
        if conn.linger.is_some() {
            return self.linger(conn);
        }
        if conn.phase == Phase::Write {
            match conn.pump_out() {
                Io::Blocked => return Next::Keep,
                Io::Failed => return Next::Drop,
                Io::Done if conn.linger_after => return self.begin_linger(conn, now),
                Io::Done if conn.close_after || self.stopping.is_some() => return Next::Close,
                Io::Done => self.enter(conn, Phase::Idle, now),
            }
        }
        if conn.flush_tls() == Io::Failed {
            return Next::Drop;
        }
        let mut budget = READ_BUDGET;
        loop {
            if conn.phase != Phase::Handshake {
                match self.next_request(conn, now) {
                    Step::More => {}
                    Step::Request(req) => return Next::Dispatch(req),
                    Step::Refuse(e) => {
                        let msg = self.refusal_message(&e);
                        return self.refuse(conn, e.status(), &msg, true, now);
                    }
                    Step::Fail => return Next::Drop,
                }
            }
            if conn.peer_closed {
                return Next::Drop;
            }
            if budget == 0 {
                self.again.push(conn.token);
                return Next::Keep;
            }
            budget -= 1;
            match conn.read_once() {
                Read1::Progress => {
                    if conn.phase == Phase::Handshake && !conn.tls.is_handshaking() {
                        self.enter(conn, Phase::Idle, now);
                    }
                    if conn.flush_tls() == Io::Failed {
                        return Next::Drop;
                    }
                }
                Read1::WouldBlock => return Next::Keep,
                // Serve what is buffered first (a client may send a request and half-close).
                Read1::Closed => {}
                Read1::TlsError | Read1::Failed => return Next::Drop,
            }
        }
    }

    /// Looks at the buffered plaintext: a complete request, a refusal, or more to read.
    fn next_request(&mut self, conn: &mut Conn, now: i64) -> Step {
        let (max_head, max_headers, max_body) = {
            let l = &self.shared.limits;
            (l.max_head_bytes, l.max_headers, l.max_body_bytes)
        };
        if conn.phase == Phase::Idle {
            if conn.buf.is_empty() {
                return Step::More;
            }
            self.enter(conn, Phase::Head, now);
        }
        if conn.phase == Phase::Head {
            let from = conn.scanned.saturating_sub(3);
            if !has_head_end(&conn.buf[from..]) {
                conn.scanned = conn.buf.len();
                if conn.buf.len() > max_head {
                    return Step::Refuse(HeadError::TooLarge);
                }
                return Step::More;
            }
            let head = match parse_head(&conn.buf, max_headers, max_body) {
                Ok(Some(h)) if h.len > max_head => return Step::Refuse(HeadError::TooLarge),
                Ok(Some(h)) => h,
                Ok(None) => {
                    conn.scanned = conn.buf.len();
                    if conn.buf.len() > max_head {
                        return Step::Refuse(HeadError::TooLarge);
                    }
                    return Step::More;
                }
                Err(e) => return Step::Refuse(e),
            };
            conn.buf.drain(..head.len);
            conn.scanned = 0;
            let missing = head.content_length > conn.buf.len();
            let expect = head.expect_continue;
            conn.head = Some(head);
            if missing {
                if expect && conn.queue_interim(b"HTTP/1.1 100 Continue\r\n\r\n") == Io::Failed {
                    return Step::Fail;
                }
                self.enter(conn, Phase::Body, now);
            }
        }
        let Some(head) = conn.head.as_ref() else {
            return Step::More;
        };
        if conn.buf.len() < head.content_length {
            return Step::More;
        }
        let Some(head) = conn.head.take() else {
            return Step::More;
        };
        let body: Vec<u8> = conn.buf.drain(..head.content_length).collect();
        let (path, query) = match head.target.split_once('?') {
            Some((p, q)) => (p.to_string(), q.to_string()),
            None => (head.target, String::new()),
        };
        Step::Request(Request {
            method: head.method,
            path,
            query,
            headers: head.headers,
            body,
            remote: conn.remote,
            wants_close: head.wants_close,
        })
    }

    fn refusal_message(&self, e: &HeadError) -> String {
        let l = &self.shared.limits;
        match e {
            HeadError::Malformed(m) => (*m).to_string(),
            HeadError::TooLarge => format!(
                "request head exceeds {} bytes or {} headers",
                l.max_head_bytes, l.max_headers
            ),
            HeadError::LengthRequired => {
                "request bodies must carry Content-Length; chunked bodies are refused".to_string()
            }
            HeadError::BodyTooLarge => format!("request body exceeds {} bytes", l.max_body_bytes),
            HeadError::ExpectationFailed => {
                "only the expectation 100-continue is supported".to_string()
            }
        }
    }

    /// Answers a refusal and closes once it is out. With `linger` (a refusal made while the
    /// client may still be sending: a head refused before its body) the close is lingering
    /// ([`Front::begin_linger`]), so a client that sends its body without waiting reads the
    /// answer instead of a reset; the rest of the input is never parsed.
    fn refuse(&mut self, conn: &mut Conn, status: u16, msg: &str, linger: bool, now: i64) -> Next {
        self.shared.handler.on_refused(status);
        self.shared.stats.count_rejected(status);
        conn.head = None;
        conn.queue_response(Response::error(status, msg), false, false);
        conn.linger_after = linger;
        self.enter(conn, Phase::Write, now);
        match conn.pump_out() {
            Io::Done if linger => self.begin_linger(conn, now),
            Io::Done => Next::Close,
            Io::Blocked => Next::Keep,
            Io::Failed => Next::Drop,
        }
    }

    /// The refusal is out: send close_notify, shut the write side down once it is flushed,
    /// then read and discard until the client ends its stream, [`LINGER_MAX_BYTES`] or
    /// [`LINGER_NANOS`] (on the server's clock), whichever comes first. Closing a socket
    /// with unread input makes the kernel send a reset, which can destroy the answer in the
    /// client's receive buffer before it was read. Counted; cuts counted by reason.
    fn begin_linger(&mut self, conn: &mut Conn, now: i64) -> Next {
        conn.linger_after = false;
        if self.stopping.is_some() {
            return Next::Close;
        }
        self.shared.stats.lingering.fetch_add(1, Ordering::Relaxed);
        conn.linger = Some(0);
        conn.deadline = Some(now.saturating_add(LINGER_NANOS));
        self.note_deadline(conn.deadline);
        conn.tls.send_close_notify();
        self.linger(conn)
    }

    /// One turn of a lingering close; never waits.
    fn linger(&mut self, conn: &mut Conn) -> Next {
        if !conn.write_shut {
            match conn.flush_tls() {
                Io::Blocked => return Next::Keep,
                Io::Failed => return Next::Drop,
                Io::Done => {}
            }
            // The FIN after close_notify; an error means the peer is gone already.
            let _ = conn.tcp.shutdown(std::net::Shutdown::Write);
            conn.write_shut = true;
        }
        for _ in 0..READ_BUDGET {
            match conn.discard_once() {
                (Read1::Progress, n) => {
                    let total = conn.linger.unwrap_or(0).saturating_add(n);
                    conn.linger = Some(total);
                    if total >= LINGER_MAX_BYTES {
                        self.shared
                            .stats
                            .linger_cut_bytes
                            .fetch_add(1, Ordering::Relaxed);
                        return Next::Drop;
                    }
                }
                (Read1::WouldBlock, _) => return Next::Keep,
                _ => return Next::Drop,
            }
        }
        self.again.push(conn.token);
        Next::Keep
    }

    // ---- workers, deadlines, stop ---------------------------------------------------

    fn drain_backs(&mut self, now: i64) {
        while let Ok(back) = self.backs.try_recv() {
            match back {
                Back::Gone(token) => {
                    let key = match self.slots.get(token.index as usize) {
                        Some(Slot {
                            gen,
                            state: SlotState::Away { key, .. },
                        }) if *gen == token.gen => *key,
                        _ => continue,
                    };
                    self.release(token, key, Phase::Worker);
                }
                Back::Ready(mut conn) => {
                    self.enter(&mut conn, Phase::Idle, now);
                    if self.stopping.is_some() {
                        self.close(conn, true);
                        continue;
                    }
                    // Read at once only when there is something to read: pipelined bytes
                    // already buffered, or an event that came while a worker held it (an
                    // edge is reported once). Otherwise the next edge brings it here.
                    let woke = matches!(
                        self.slots.get(conn.token.index as usize),
                        Some(Slot {
                            state: SlotState::Away { woke: true, .. },
                            ..
                        })
                    );
                    let next = if woke || !conn.buf.is_empty() || conn.peer_closed {
                        self.drive(&mut conn, now)
                    } else {
                        Next::Keep
                    };
                    self.apply(conn, next, now);
                }
                Back::Write(mut conn) => {
                    let deadline = conn.deadline;
                    self.enter(&mut conn, Phase::Write, now);
                    if deadline.is_some() {
                        conn.deadline = deadline;
                    }
                    let next = self.drive(&mut conn, now);
                    self.apply(conn, next, now);
                }
            }
        }
    }

    /// Closes every connection whose phase deadline has passed.
    pub fn sweep(&mut self, now: i64) {
        self.last_sweep = now;
        let mut next = i64::MAX;
        let mut expired = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            if let SlotState::Here(c) = &slot.state {
                match c.deadline {
                    Some(d) if d <= now => expired.push(Token {
                        index: i as u32,
                        gen: slot.gen,
                    }),
                    Some(d) => next = next.min(d),
                    None => {}
                }
            }
        }
        self.next_sweep = next;
        for t in expired {
            if let Some(mut conn) = self.take(t) {
                let next = self.expire(&mut conn, now);
                self.apply(conn, next, now);
            }
        }
    }

    fn expire(&mut self, conn: &mut Conn, now: i64) -> Next {
        if conn.linger.is_some() {
            self.shared
                .stats
                .linger_cut_deadline
                .fetch_add(1, Ordering::Relaxed);
            return Next::Drop;
        }
        let phase = conn.phase;
        self.shared.stats.timeouts[phase.index()].fetch_add(1, Ordering::Relaxed);
        match phase {
            Phase::Handshake | Phase::Write => Next::Drop,
            Phase::Idle => Next::Close,
            Phase::Head | Phase::Body => {
                let what = if phase == Phase::Head {
                    "request head not received in time"
                } else {
                    "request body not received in time"
                };
                // One attempt to say why, then close whatever the socket took.
                let _ = self.refuse(conn, 408, what, false, now);
                Next::Close
            }
            Phase::Worker => Next::Keep,
        }
    }

    fn begin_stop(&mut self, now: i64) {
        self.stopping =
            Some(now.saturating_add(i64::try_from(SHUTDOWN_GRACE.as_nanos()).unwrap_or(i64::MAX)));
        if let Some(l) = self.listener.take() {
            let _ = self.epoll.delete(&l);
        }
        let waiting: Vec<Token> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match &s.state {
                SlotState::Here(c) if c.phase != Phase::Write || c.linger.is_some() => {
                    Some(Token {
                        index: i as u32,
                        gen: s.gen,
                    })
                }
                _ => None,
            })
            .collect();
        for t in waiting {
            if let Some(conn) = self.take(t) {
                self.close(conn, true);
            }
        }
    }

    pub fn close_all(&mut self) {
        self.jobs = None;
        for i in 0..self.slots.len() {
            let gen = self.slots[i].gen;
            if let Some(conn) = self.take(Token {
                index: i as u32,
                gen,
            }) {
                self.close(conn, false);
            }
        }
    }
}

/// True when `b` contains the blank line that ends a head (`\n\n` or `\n\r\n`).
fn has_head_end(b: &[u8]) -> bool {
    memchr::memchr_iter(b'\n', b).any(|i| match b.get(i + 1) {
        Some(b'\n') => true,
        Some(b'\r') => b.get(i + 2) == Some(&b'\n'),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_end_detection() {
        assert!(has_head_end(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert!(has_head_end(b"GET / HTTP/1.1\nHost: x\n\n"));
        assert!(!has_head_end(b"GET / HTTP/1.1\r\nHost: x\r\n"));
        assert!(!has_head_end(b"GET / HTTP/1.1\r\nHost: x\r\n\r"));
        assert!(!has_head_end(b""));
    }
}
