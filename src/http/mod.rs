//! HTTPS server: one front thread over non-blocking sockets, a bounded worker pool.
//!
//! ```text
//! accept --> front (epoll): limits, TLS handshake, keep-alive idle, head + body,
//!            each phase with a whole-phase deadline
//!        --> complete request --> worker pool (2 x cores, at least 4) --> handler
//!        --> response: written by the worker as far as the socket takes it, the rest by
//!            the front before the write deadline --> connection back to the front
//!        --> event streams: a thread of their own (per-write deadlines)
//! ```
//!
//! Guarantees:
//! - A worker never waits on a client: it gets only complete requests and writes only what
//!   the socket takes at once. A client that sends nothing, trickles its handshake or head,
//!   or reads its response slowly occupies one connection slot and nothing else.
//! - Limits: `max_connections` open connections, `max_connections_per_address` per client
//!   address (IPv6 per /64); over either the connection is closed at once and counted.
//!   Deadlines per phase as in [`phase`].
//! - Every refusal the server itself makes (400, 408, 411, 413, 417, 431, 503) carries a JSON
//!   `error` body and is reported to [`Handler::on_refused`].
//! - A panic in a handler answers 500 with a JSON `error`, closes that connection, is
//!   counted (`panics`) and logged at most once a minute; the worker lives on.
//! - [`Server::run`] returns within [`front::SHUTDOWN_GRACE`] of a stop, whatever peers do.

mod addr;
mod conn;
mod front;
pub mod logfilter;
pub mod phase;
pub mod request;
pub mod response;
pub mod startcheck;
mod stream;
pub mod tls;
mod worker;

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use serde::Serialize;

pub use phase::PhaseCounts;
pub use request::Request;
pub use response::{Body, Response};
pub use stream::STREAM_WRITE_DEADLINE;

use crate::clock::SharedClock;
use crate::config::HttpLimits;
use crate::lograte::LogLimiter;

/// What the server calls for each request.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, req: &Request) -> Response;
    /// Called for each refusal made before a request reached `handle`.
    fn on_refused(&self, _status: u16) {}
}

/// Status codes the server itself answers, in the order of [`ServerStats::rejected`].
pub const REJECTED_STATUSES: [u16; 8] = [400, 408, 411, 413, 417, 431, 500, 503];

/// Counters of the server (atomics only; the front writes the gauges).
#[derive(Default, Debug)]
pub struct ServerStats {
    pub open_connections: AtomicUsize,
    pub sse_streams: AtomicUsize,
    /// Size of the worker pool, and workers running a request now.
    pub workers: AtomicUsize,
    pub workers_busy: AtomicUsize,
    /// Open connections per phase, indexed by [`phase::Phase::index`].
    pub phases: [AtomicUsize; 6],
    pub accepted: AtomicU64,
    pub refused_max_connections: AtomicU64,
    pub refused_per_address: AtomicU64,
    /// Connections that ended before their TLS handshake completed (errors, timeouts,
    /// peers that left).
    pub handshake_failures: AtomicU64,
    /// Connections closed by their phase deadline, indexed by phase.
    pub timeouts: [AtomicU64; 6],
    /// Requests the server answered itself, by [`REJECTED_STATUSES`].
    pub rejected: [AtomicU64; 8],
    /// Handler panics caught (each answered 500).
    pub panics: AtomicU64,
    /// Refusals closed after a lingering read (4 MiB, 5 s), and those the
    /// byte limit or the deadline cut short.
    pub lingering: AtomicU64,
    pub linger_cut_bytes: AtomicU64,
    pub linger_cut_deadline: AtomicU64,
    pub max_connections: AtomicUsize,
    pub max_connections_per_address: AtomicUsize,
}

impl ServerStats {
    pub(crate) fn count_rejected(&self, status: u16) {
        if let Some(i) = REJECTED_STATUSES.iter().position(|&s| s == status) {
            self.rejected[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The figures `/api/v1/status`, `/api/v1/health` and `svc status` show.
    pub fn snapshot(&self) -> HttpSnapshot {
        let load = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        let load64 = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let phases: [usize; 6] = std::array::from_fn(|i| load(&self.phases[i]));
        let t = |p: phase::Phase| load64(&self.timeouts[p.index()]);
        HttpSnapshot {
            open_connections: load(&self.open_connections),
            max_connections: load(&self.max_connections),
            max_connections_per_address: load(&self.max_connections_per_address),
            phases: PhaseCounts::from_array(phases),
            sse_streams: load(&self.sse_streams),
            workers: load(&self.workers),
            workers_busy: load(&self.workers_busy),
            accepted_total: load64(&self.accepted),
            refused: Refused {
                max_connections: load64(&self.refused_max_connections),
                per_address: load64(&self.refused_per_address),
            },
            timeouts: Timeouts {
                handshake: t(phase::Phase::Handshake),
                idle: t(phase::Phase::Idle),
                head: t(phase::Phase::Head),
                body: t(phase::Phase::Body),
                write: t(phase::Phase::Write),
            },
            rejected_requests: REJECTED_STATUSES
                .iter()
                .zip(&self.rejected)
                .map(|(s, n)| (s.to_string(), load64(n)))
                .collect(),
            handshake_failures_total: load64(&self.handshake_failures),
            panics_total: load64(&self.panics),
            lingering: Lingering {
                closes_total: load64(&self.lingering),
                cut_bytes: load64(&self.linger_cut_bytes),
                cut_deadline: load64(&self.linger_cut_deadline),
            },
        }
    }
}

/// Connections refused at accept, by reason.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Refused {
    pub max_connections: u64,
    pub per_address: u64,
}

/// Connections closed by a phase deadline, by phase.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Timeouts {
    pub handshake: u64,
    pub idle: u64,
    pub head: u64,
    pub body: u64,
    pub write: u64,
}

/// Lingering closes after a refusal: all of them, and those cut by the byte limit or the
/// deadline (the rest ended with the client's end of stream).
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Lingering {
    pub closes_total: u64,
    pub cut_bytes: u64,
    pub cut_deadline: u64,
}

/// The server's part of the status snapshot (`http`).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct HttpSnapshot {
    pub open_connections: usize,
    pub max_connections: usize,
    pub max_connections_per_address: usize,
    pub phases: PhaseCounts,
    pub sse_streams: usize,
    pub workers: usize,
    pub workers_busy: usize,
    pub accepted_total: u64,
    pub refused: Refused,
    pub timeouts: Timeouts,
    /// Requests answered by the server itself (before a handler), by status code.
    pub rejected_requests: std::collections::BTreeMap<String, u64>,
    pub handshake_failures_total: u64,
    pub panics_total: u64,
    pub lingering: Lingering,
}

/// What the front and the workers share.
pub(crate) struct Shared {
    pub tls: Arc<rustls::ServerConfig>,
    pub limits: HttpLimits,
    pub deadlines: phase::Deadlines,
    pub stats: Arc<ServerStats>,
    pub stop: Arc<AtomicBool>,
    pub handler: Arc<dyn Handler>,
    pub clock: SharedClock,
    pub log: LogLimiter,
    pub waker: Arc<worker::Waker>,
}

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    limits: HttpLimits,
    stats: Arc<ServerStats>,
    stop: Arc<AtomicBool>,
    waker: Arc<worker::Waker>,
    clock: SharedClock,
}

/// Stops a running server from another thread.
#[derive(Clone)]
pub struct Stopper {
    stop: Arc<AtomicBool>,
    waker: Arc<worker::Waker>,
}

impl Stopper {
    /// Asks the server to stop; [`Server::run`] returns within the shutdown grace.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.waker.wake();
    }

    pub fn is_stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The shared stop flag (event streams poll it).
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }
}

/// Listen backlog: room for a burst of connections while the front is busy.
const BACKLOG: i32 = 4096;

/// Workers for a pool size of `configured` (0: twice the cores, at least 4).
pub fn worker_count(configured: usize) -> usize {
    if configured > 0 {
        return configured;
    }
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (cores * 2).max(4)
}

impl Server {
    pub fn bind(
        addr: SocketAddr,
        tls: Arc<rustls::ServerConfig>,
        limits: HttpLimits,
    ) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        // std listens with a backlog of 128; a flood of connects would overflow it and
        // make legitimate clients retry their SYN after a second.
        let backlog =
            nix::sys::socket::Backlog::new(BACKLOG).unwrap_or(nix::sys::socket::Backlog::MAXCONN);
        if let Err(e) = nix::sys::socket::listen(&listener, backlog) {
            log::debug!("http: cannot raise the listen backlog: {e}");
        }
        Ok(Server {
            listener,
            tls,
            limits,
            stats: Arc::new(ServerStats::default()),
            stop: Arc::new(AtomicBool::new(false)),
            waker: Arc::new(worker::Waker::new()?),
            clock: crate::clock::SystemClock::shared(),
        })
    }

    /// Uses `clock` for deadlines and log rate limits (tests).
    pub fn with_clock(mut self, clock: SharedClock) -> Server {
        self.clock = clock;
        self
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn stats(&self) -> Arc<ServerStats> {
        self.stats.clone()
    }

    pub fn stopper(&self) -> io::Result<Stopper> {
        Ok(Stopper {
            stop: self.stop.clone(),
            waker: self.waker.clone(),
        })
    }

    fn start(self, handler: Arc<dyn Handler>) -> io::Result<front::Front> {
        let workers = worker_count(self.limits.workers);
        self.stats
            .max_connections
            .store(self.limits.max_connections, Ordering::Relaxed);
        self.stats
            .max_connections_per_address
            .store(self.limits.max_connections_per_address, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            deadlines: phase::Deadlines::new(&self.limits),
            tls: self.tls,
            limits: self.limits,
            stats: self.stats,
            stop: self.stop,
            handler,
            log: LogLimiter::per_minute(self.clock.clone()),
            clock: self.clock,
            waker: self.waker,
        });
        // Each connection has at most one request at a worker, so the lanes hold at most
        // `max_connections` jobs without a bound of their own. Unbounded channels allocate
        // their slots as jobs arrive; bounded ones would preallocate room for every
        // connection the limit allows (1.4 MB at the default limit) on an idle daemon.
        let (urgent_tx, urgent_rx) = crossbeam_channel::unbounded();
        let (normal_tx, normal_rx) = crossbeam_channel::unbounded();
        let lanes = worker::Lanes {
            urgent: urgent_rx,
            normal: normal_rx,
        };
        // At most one message per connection away at a worker: bounded by the same figure.
        let (back_tx, back_rx) = crossbeam_channel::unbounded();
        let returns = worker::Returns {
            tx: back_tx,
            waker: shared.waker.clone(),
        };
        worker::start(workers, lanes, returns, shared.clone())?;
        front::Front::new(self.listener, shared, (urgent_tx, normal_tx), back_rx)
    }

    /// Serves until stopped; returns within the shutdown grace after the stop. Workers
    /// still inside a handler finish it on their own and exit.
    pub fn run(self, handler: Arc<dyn Handler>) {
        match self.start(handler) {
            Ok(front) => front.run(),
            Err(e) => log::error!("http: cannot start the server: {e}"),
        }
    }
}

/// Raises the open-file soft limit to the hard limit (each connection is a descriptor).
/// Returns the (previous soft, new soft) figures.
pub fn raise_open_file_limit() -> io::Result<(u64, u64)> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    let (now, _) = getrlimit(Resource::RLIMIT_NOFILE)?;
    Ok((soft, now))
}

#[cfg(test)]
mod tests;
