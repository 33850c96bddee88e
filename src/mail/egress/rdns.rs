//! Reverse-DNS lookups of direct SMTP egress destinations: row `smtp_rdns.resolves`
//! (64 slots, two resolver threads), a 1-second caller deadline.
//!
//! Guarantees:
//! - A caller waits at most [`CALLER_DEADLINE`] from admission; the lookup itself is given
//!   the same deadline, so a late answer is never waited for. A full queue refuses at once
//!   (a counted loss of the row) and the caller gets [`Rdns::Unavailable`].
//! - NXDOMAIN and an empty answer are normal results ([`Rdns::NoName`]), not failures.
//! - Nothing but the address is sent; answers are names only.

use std::net::IpAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Sender};
use parking_lot::Mutex;

use crate::clock::SharedClock;
use crate::dns::{DnsError, Lookup, Resolver};
use crate::queue::{BoundedQueue, LagBasis, PopError, Registry, RowConfig, RowHandle};

/// The row.
pub const ROW: &str = "smtp_rdns.resolves";
/// Slots of the row.
pub const SLOTS: u64 = 64;
/// How long a caller waits for an answer.
pub const CALLER_DEADLINE: Duration = Duration::from_secs(1);
/// Resolver threads.
pub const THREADS: usize = 2;

/// What a PTR lookup can answer (the resolver, or a test's stand-in).
pub trait PtrLookup: Send + Sync {
    fn ptr(&self, ip: IpAddr, deadline: Instant) -> Result<Lookup<String>, DnsError>;
}

impl PtrLookup for Resolver {
    fn ptr(&self, ip: IpAddr, deadline: Instant) -> Result<Lookup<String>, DnsError> {
        Resolver::ptr(self, ip, deadline)
    }
}

/// The outcome of one reverse lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rdns {
    /// The PTR names (first few).
    Names(Vec<String>),
    /// NXDOMAIN or no PTR record: a normal result.
    NoName,
    /// No answer in time, a server failure, or the queue was full.
    Unavailable(String),
}

impl Rdns {
    /// Short text for a finding's details.
    pub fn describe(&self) -> String {
        match self {
            Rdns::Names(n) => n.join(", "),
            Rdns::NoName => "no reverse DNS name".to_string(),
            Rdns::Unavailable(why) => format!("reverse DNS unavailable ({why})"),
        }
    }
}

struct Job {
    ip: IpAddr,
    deadline: Instant,
    reply: Sender<Rdns>,
}

/// The lookup queue and its threads.
pub struct RdnsPool {
    queue: BoundedQueue<Job>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    _row: RowHandle,
}

impl RdnsPool {
    pub fn start(
        lookup: Arc<dyn PtrLookup>,
        clock: SharedClock,
        registry: &Arc<Registry>,
    ) -> Result<Arc<RdnsPool>, super::EgressError> {
        let queue = BoundedQueue::new(
            clock,
            RowConfig::new("lookups")
                .capacity(SLOTS)
                .lag_basis(LagBasis::OperationProgress)
                .running_slots(THREADS),
        )
        .map_err(crate::queue::RowError::at(ROW))
        .map_err(super::EgressError::Queue)?;
        let row = registry
            .register(ROW, queue.health().clone())
            .map_err(crate::queue::RowError::at(ROW))
            .map_err(super::EgressError::Queue)?;
        let mut threads = Vec::new();
        for i in 0..THREADS {
            let (q, l) = (queue.clone(), lookup.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("smtp-rdns-{i}"))
                    .spawn(move || work(&q, l.as_ref()))
                    .map_err(super::EgressError::Spawn)?,
            );
        }
        Ok(Arc::new(RdnsPool {
            queue,
            threads: Mutex::new(threads),
            _row: row,
        }))
    }

    /// Looks `ip` up, waiting at most [`CALLER_DEADLINE`].
    pub fn resolve(&self, ip: IpAddr) -> Rdns {
        let deadline = Instant::now() + CALLER_DEADLINE;
        let (tx, rx) = bounded(1);
        if self
            .queue
            .try_push(Job {
                ip,
                deadline,
                reply: tx,
            })
            .is_err()
        {
            return Rdns::Unavailable("lookup queue full".into());
        }
        match rx.recv_deadline(deadline) {
            Ok(r) => r,
            Err(_) => Rdns::Unavailable("no answer within 1 s".into()),
        }
    }

    /// Stops the threads (queued lookups are dropped; their callers time out).
    pub fn stop(&self) {
        self.queue.close();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for RdnsPool {
    fn drop(&mut self) {
        self.queue.close();
    }
}

fn work(queue: &BoundedQueue<Job>, lookup: &dyn PtrLookup) {
    loop {
        let guard = match queue.pop_timeout(Duration::from_millis(500)) {
            Ok(g) => g,
            Err(PopError::Timeout) => continue,
            Err(PopError::Closed) => return,
        };
        let (ip, deadline) = (guard.ip, guard.deadline);
        let result = if Instant::now() >= deadline {
            Rdns::Unavailable("expired in the queue".into())
        } else {
            match lookup.ptr(ip, deadline) {
                Ok(Lookup::Records(mut names)) => {
                    names.truncate(4);
                    Rdns::Names(names)
                }
                Ok(Lookup::NxDomain | Lookup::NoData) => Rdns::NoName,
                Err(e) => Rdns::Unavailable(e.to_string()),
            }
        };
        let job = guard.finish();
        let _ = job.reply.send(result);
    }
}
