//! HTTPS server: rustls over blocking sockets, `httparse` heads, a bounded worker pool.
//!
//! Guarantees:
//! - The accept thread never reads from a client: TLS handshakes, heads and bodies are read
//!   on workers, each bounded by a deadline, so a client that never sends a ClientHello, or
//!   sends its head byte by byte, only occupies its own worker.
//! - At most `max_connections` connections are served at once (plus SSE streams, counted
//!   separately); a connection over the limit gets a 503 from a separate refusal thread.
//! - Every refusal the server itself makes (400, 408, 411, 413, 431, 503) carries a JSON
//!   `error` body and is reported to [`Handler::on_refused`].

mod conn;
pub mod request;
pub mod response;
pub mod tls;

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

pub use request::Request;
pub use response::{Body, Response};

use crate::config::HttpLimits;

/// What the server calls for each request.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, req: &Request) -> Response;
    /// Called for each refusal made before a request reached `handle`.
    fn on_refused(&self, _status: u16) {}
}

/// Counters of the server (atomics only).
#[derive(Default, Debug)]
pub struct ServerStats {
    pub open_connections: AtomicUsize,
    pub sse_streams: AtomicUsize,
    pub workers: AtomicUsize,
    pub accepted: AtomicU64,
    pub refused_connections: AtomicU64,
    pub handshake_failures: AtomicU64,
}

pub(crate) struct Shared {
    pub tls: Arc<rustls::ServerConfig>,
    pub limits: HttpLimits,
    pub stats: Arc<ServerStats>,
    pub stop: Arc<AtomicBool>,
    pub handler: Arc<dyn Handler>,
}

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    limits: HttpLimits,
    stats: Arc<ServerStats>,
    stop: Arc<AtomicBool>,
}

/// Stops a running server from another thread.
#[derive(Clone)]
pub struct Stopper {
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
}

impl Stopper {
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept call.
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(if addr.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
        }
        let _ = TcpStream::connect_timeout(&addr, Duration::from_millis(500));
    }

    pub fn is_stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The shared stop flag (SSE streams poll it).
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }
}

impl Server {
    pub fn bind(
        addr: SocketAddr,
        tls: Arc<rustls::ServerConfig>,
        limits: HttpLimits,
    ) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        Ok(Server {
            listener,
            tls,
            limits,
            stats: Arc::new(ServerStats::default()),
            stop: Arc::new(AtomicBool::new(false)),
        })
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
            addr: self.local_addr()?,
        })
    }

    /// Accepts until stopped, then waits (up to 5 s) for open connections to finish.
    pub fn run(self, handler: Arc<dyn Handler>) {
        let shared = Arc::new(Shared {
            tls: self.tls,
            limits: self.limits,
            stats: self.stats,
            stop: self.stop,
            handler,
        });
        // Rendezvous channel: a send succeeds only when an idle worker is waiting.
        let (idle_tx, idle_rx) = bounded::<TcpStream>(0);
        let (refuse_tx, refuse_rx) = bounded::<TcpStream>(16);
        let refuser = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("http-refuse".into())
                .spawn(move || refuse_loop(refuse_rx, shared))
                .ok()
        };
        let max_workers = shared.limits.max_connections + shared.limits.max_sse_subscribers;
        for incoming in self.listener.incoming() {
            if shared.stop.load(Ordering::SeqCst) {
                break;
            }
            let stream = match incoming {
                Ok(s) => s,
                Err(e) => {
                    log::warn!("http: accept failed: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            shared.stats.accepted.fetch_add(1, Ordering::Relaxed);
            let open = shared.stats.open_connections.load(Ordering::SeqCst);
            if open >= shared.limits.max_connections {
                shared
                    .stats
                    .refused_connections
                    .fetch_add(1, Ordering::Relaxed);
                shared.handler.on_refused(503);
                if refuse_tx.try_send(stream).is_err() {
                    // Refusal thread busy: close without answer (counted above).
                }
                continue;
            }
            shared.stats.open_connections.fetch_add(1, Ordering::SeqCst);
            match idle_tx.try_send(stream) {
                Ok(()) => {}
                Err(TrySendError::Full(stream)) | Err(TrySendError::Disconnected(stream)) => {
                    if shared.stats.workers.load(Ordering::SeqCst) >= max_workers {
                        shared.stats.open_connections.fetch_sub(1, Ordering::SeqCst);
                        shared
                            .stats
                            .refused_connections
                            .fetch_add(1, Ordering::Relaxed);
                        shared.handler.on_refused(503);
                        let _ = refuse_tx.try_send(stream);
                        continue;
                    }
                    spawn_worker(shared.clone(), stream, idle_rx.clone());
                }
            }
        }
        drop(idle_tx);
        drop(refuse_tx);
        let deadline = Instant::now() + Duration::from_secs(5);
        while shared.stats.workers.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(r) = refuser {
            let _ = r.join();
        }
    }
}

fn spawn_worker(shared: Arc<Shared>, first: TcpStream, idle: Receiver<TcpStream>) {
    shared.stats.workers.fetch_add(1, Ordering::SeqCst);
    let s2 = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("http-worker".into())
        .stack_size(256 * 1024)
        .spawn(move || {
            let mut next = Some(first);
            while let Some(stream) = next.take() {
                conn::serve(stream, &s2);
                s2.stats.open_connections.fetch_sub(1, Ordering::SeqCst);
                if s2.stop.load(Ordering::SeqCst) {
                    break;
                }
                // Stay around for reuse for a while, then exit to give memory back.
                next = idle.recv_timeout(Duration::from_secs(60)).ok();
            }
            s2.stats.workers.fetch_sub(1, Ordering::SeqCst);
        });
    if spawned.is_err() {
        log::error!("http: cannot start a worker thread");
        shared.stats.workers.fetch_sub(1, Ordering::SeqCst);
        shared.stats.open_connections.fetch_sub(1, Ordering::SeqCst);
    }
}

fn refuse_loop(rx: Receiver<TcpStream>, shared: Arc<Shared>) {
    while let Ok(stream) = rx.recv() {
        conn::refuse(stream, &shared, Duration::from_secs(2));
    }
}

/// Sender type used by tests that want to feed connections directly.
pub type ConnSender = Sender<TcpStream>;
