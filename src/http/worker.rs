//! The bounded worker pool: runs handlers on complete requests, never waits on a client.
//!
//! A worker gets a connection with a complete request, calls the handler (a panic is caught,
//! answered 500 with a JSON `error`, counted and logged), and writes the response with
//! non-blocking sends. What the socket takes at once is the common case; the rest goes back
//! to the front with a write deadline, so a peer that reads slowly holds no worker. After
//! the response the connection returns to the front for its next request. Event streams
//! leave for a thread of their own.
//!
//! Requests wait in two lanes ([`Lanes`]): state-changing ones (any method but GET and
//! HEAD: suppressions, blocks, logins) are taken before reads, at most
//! [`URGENT_STREAK`] in a row while reads wait, so a short write is not queued behind a
//! crowd of expensive reads (findings pages, exports) and a flood of writes cannot starve
//! reads either.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};

use crossbeam_channel::{Receiver, Sender};
use nix::sys::eventfd::{EfdFlags, EventFd};

use super::conn::{Conn, Io, Token};
use super::phase::Phase;
use super::request::Request;
use super::response::Response;
use super::Shared;

/// State-changing requests a worker takes in a row while reads wait.
pub const URGENT_STREAK: u32 = 8;

/// The two lanes of waiting requests (see the module documentation).
pub(crate) struct Lanes<T = Job> {
    pub urgent: Receiver<T>,
    pub normal: Receiver<T>,
}

impl<T> Clone for Lanes<T> {
    fn clone(&self) -> Self {
        Lanes {
            urgent: self.urgent.clone(),
            normal: self.normal.clone(),
        }
    }
}

impl<T> Lanes<T> {
    /// The next request: urgent first (up to [`URGENT_STREAK`] in a row while a read
    /// waits), else whichever comes. `None` once both senders are gone.
    fn next(&self, streak: &mut u32) -> Option<T> {
        if *streak < URGENT_STREAK {
            if let Ok(j) = self.urgent.try_recv() {
                *streak += 1;
                return Some(j);
            }
        }
        if let Ok(j) = self.normal.try_recv() {
            *streak = 0;
            return Some(j);
        }
        crossbeam_channel::select_biased! {
            recv(self.urgent) -> j => match j {
                Ok(j) => {
                    *streak += 1;
                    Some(j)
                }
                Err(_) => self.normal.recv().ok().inspect(|_| *streak = 0),
            },
            recv(self.normal) -> j => match j {
                Ok(j) => {
                    *streak = 0;
                    Some(j)
                }
                Err(_) => self.urgent.recv().ok().inspect(|_| *streak += 1),
            },
        }
    }
}

/// Whether a request goes to the urgent lane.
pub(crate) fn is_urgent(req: &Request) -> bool {
    !matches!(req.method.as_str(), "GET" | "HEAD")
}

/// A complete request and the connection it came on.
pub(crate) struct Job {
    pub conn: Box<Conn>,
    pub req: Request,
}

/// What a worker hands back to the front.
pub(crate) enum Back {
    /// The response is out; the connection waits for its next request.
    Ready(Box<Conn>),
    /// Part of the response is still queued; the front finishes it before the deadline.
    Write(Box<Conn>),
    /// The connection was closed, or became an event stream: its slot is free.
    Gone(Token),
}

/// Wakes the front's poll from other threads (workers, the stopper) through an eventfd.
/// Wake-ups are coalesced: one write until the front takes it.
pub(crate) struct Waker {
    fd: EventFd,
    pending: AtomicBool,
}

impl Waker {
    pub fn new() -> std::io::Result<Waker> {
        let fd = EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)?;
        Ok(Waker {
            fd,
            pending: AtomicBool::new(false),
        })
    }

    pub fn wake(&self) {
        if !self.pending.swap(true, Ordering::AcqRel) {
            let _ = self.fd.write(1);
        }
    }

    /// Called by the front when the eventfd is readable, before it looks for work.
    ///
    /// The counter is read before the flag is cleared: cleared first, a wake-up between the
    /// two would set the flag again and have its write consumed by this read, leaving the
    /// flag set with nothing to read, and every later wake-up silent. The swap (acquire)
    /// makes the messages of workers that found the flag set visible to the drain after it.
    pub fn reset(&self) {
        let _ = self.fd.read();
        self.pending.swap(false, Ordering::AcqRel);
    }

    pub fn fd(&self) -> &EventFd {
        &self.fd
    }
}

/// The way back to the front.
#[derive(Clone)]
pub(crate) struct Returns {
    pub tx: Sender<Back>,
    pub waker: Arc<Waker>,
}

impl Returns {
    pub fn send(&self, b: Back) {
        // A closed channel means the front has stopped: dropping the connection closes it.
        if self.tx.send(b).is_ok() {
            self.waker.wake();
        }
    }
}

thread_local! {
    /// Set while a handler runs on this thread: its panic is reported by the worker.
    static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Routes panics of request handlers to the worker (which logs them rate-limited) instead
/// of the default hook's line on stderr per panic; other panics keep the previous hook.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_HANDLER.with(Cell::get) {
                let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                    (*s).to_string()
                } else if let Some(s) = info.payload().downcast_ref::<String>() {
                    s.clone()
                } else {
                    "non-text panic payload".to_string()
                };
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{msg}{at}")));
            } else {
                previous(info);
            }
        }));
    });
}

/// Calls the handler; a panic becomes a 500 with a JSON `error` and closes the connection.
fn call(shared: &Shared, req: &Request) -> (Response, bool) {
    IN_HANDLER.with(|f| f.set(true));
    let out = catch_unwind(AssertUnwindSafe(|| shared.handler.handle(req)));
    IN_HANDLER.with(|f| f.set(false));
    match out {
        Ok(resp) => (resp, false),
        Err(_) => {
            shared.stats.panics.fetch_add(1, Ordering::Relaxed);
            let what = LAST_PANIC
                .with(|p| p.borrow_mut().take())
                .unwrap_or_else(|| "unknown panic".to_string());
            crate::warn_limited!(
                shared.log,
                "http_handler_panic",
                "",
                "http: the handler of {} {} panicked: {}",
                crate::text::for_log(&req.method, 16),
                crate::text::for_log(&req.path, 200),
                crate::text::for_log(&what, 500)
            );
            (
                Response::error(
                    500,
                    "internal error: the request handler failed (logged on the server)",
                ),
                true,
            )
        }
    }
}

/// Starts `n` workers; they exit when every sender of `jobs` is gone.
pub(crate) fn start(
    n: usize,
    jobs: Lanes,
    returns: Returns,
    shared: Arc<Shared>,
) -> std::io::Result<()> {
    install_panic_hook();
    for i in 0..n {
        let jobs = jobs.clone();
        let returns = returns.clone();
        let mine = shared.clone();
        std::thread::Builder::new()
            .name(format!("http-worker-{i}"))
            .stack_size(1024 * 1024)
            .spawn(move || {
                let mut streak = 0;
                while let Some(job) = jobs.next(&mut streak) {
                    mine.stats.workers_busy.fetch_add(1, Ordering::Relaxed);
                    serve(job, &mine, &returns);
                    mine.stats.workers_busy.fetch_sub(1, Ordering::Relaxed);
                }
            })?;
        shared.stats.workers.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

fn serve(job: Job, shared: &Shared, returns: &Returns) {
    let Job { mut conn, req } = job;
    let (resp, panicked) = call(shared, &req);
    if resp.is_stream() {
        let token = conn.token;
        returns.send(Back::Gone(token));
        let stats = shared.stats.clone();
        let spawned = std::thread::Builder::new()
            .name("http-stream".into())
            .stack_size(256 * 1024)
            .spawn(move || super::stream::run(*conn, resp, &stats));
        if spawned.is_err() {
            log::error!("http: cannot start an event-stream thread");
        }
        return;
    }
    let keep_alive =
        !req.wants_close && !panicked && !conn.peer_closed && !shared.stop.load(Ordering::Relaxed);
    conn.queue_response(resp, keep_alive, req.method == "HEAD");
    match conn.pump_out() {
        Io::Done if keep_alive => returns.send(Back::Ready(conn)),
        Io::Done => {
            conn.close_gracefully();
            let token = conn.token;
            drop(conn);
            returns.send(Back::Gone(token));
        }
        Io::Blocked => {
            let now = shared.clock.monotonic_nanos();
            conn.deadline = shared.deadlines.of(Phase::Write, now, 0);
            returns.send(Back::Write(conn));
        }
        Io::Failed => {
            let token = conn.token;
            drop(conn);
            returns.send(Back::Gone(token));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn writes_go_first_but_cannot_starve_reads() {
        let (utx, urx) = crossbeam_channel::unbounded();
        let (ntx, nrx) = crossbeam_channel::unbounded();
        let lanes = Lanes {
            urgent: urx,
            normal: nrx,
        };
        for i in 0..3 {
            ntx.send(100 + i).unwrap();
        }
        for i in 0..20 {
            utx.send(i).unwrap();
        }
        let mut streak = 0;
        let order: Vec<u32> = (0..23).map(|_| lanes.next(&mut streak).unwrap()).collect();
        let mut want: Vec<u32> = (0..8).collect();
        want.push(100);
        want.extend(8..16);
        want.push(101);
        want.extend(16..20);
        want.push(102);
        assert_eq!(order, want);
        // Blocking receive: whichever lane gets a job; none once both senders are gone.
        ntx.send(7).unwrap();
        assert_eq!(lanes.next(&mut streak), Some(7));
        drop(utx);
        ntx.send(8).unwrap();
        assert_eq!(lanes.next(&mut streak), Some(8));
        drop(ntx);
        assert_eq!(lanes.next(&mut streak), None);
    }

    use super::*;
    use std::os::fd::AsFd;
    use std::time::Duration;

    /// Many threads send and wake while the consumer only drains after a wake-up: every
    /// message must arrive (a lost wake-up would leave the consumer waiting forever).
    #[test]
    fn no_wake_up_is_lost_under_contention() {
        const THREADS: usize = 4;
        const EACH: usize = 20_000;
        let waker = Arc::new(Waker::new().unwrap());
        let (tx, rx) = crossbeam_channel::unbounded::<usize>();
        let senders: Vec<_> = (0..THREADS)
            .map(|_| {
                let (tx, waker) = (tx.clone(), waker.clone());
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        tx.send(i).unwrap();
                        waker.wake();
                    }
                })
            })
            .collect();
        let mut got = 0;
        while got < THREADS * EACH {
            let ready =
                crate::sys::poll::poll_readable(&[waker.fd().as_fd()], Duration::from_secs(10))
                    .unwrap();
            assert!(
                ready[0],
                "lost wake-up: {got} of {} received",
                THREADS * EACH
            );
            waker.reset();
            while rx.try_recv().is_ok() {
                got += 1;
            }
        }
        for s in senders {
            s.join().unwrap();
        }
    }
}
