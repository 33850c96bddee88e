//! The verdict: every enabled source asked in parallel, weighted into one answer.
//!
//! Guarantees:
//! - A source is one [`Source`] (a lookup by address answering a score and a reason);
//!   adding one touches no other.
//! - Local sources (memory only) answer on the caller's thread; so does a remote source
//!   whose answer is in its cache. Other remote lookups run on the lookup pool (row
//!   `checks.reputation_queries`: 64 waiting, 2 running), all at once; the caller waits at
//!   most the deadline (`threat.verdict_deadline_ms`, default 2 s). A source that has not
//!   answered by then is reported with status `timeout` and never holds the verdict up; its
//!   lookup still finishes on the pool and fills the source's cache for the next call.
//! - Weighting: each answered score `s` (0-100) with weight `w` (0-1, `[threat.weights]`)
//!   counts as an independent indication `p = w * s / 100`; the composite score is
//!   `100 * (1 - prod(1 - p))`, so one strong source decides, agreeing sources add up, and
//!   a source without an opinion (no score) changes nothing.
//! - Values: `blocked` when the firewall or the permanent blocklist drops the address;
//!   else `malicious` at a composite of 80 or more, `suspicious` at 40 or more, else
//!   `clean`.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::sources::SourceError;

use crossbeam_channel::{bounded, Receiver, Sender};
use jiff::Timestamp;
use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};

use crate::clock::SharedClock;
use crate::queue::{BoundedQueue, PopError, Registry, RowConfig, RowHandle};

/// Row of the lookup pool.
pub const POOL_ROW: &str = "checks.reputation_queries";
/// Lookups waiting for the pool at most.
pub const POOL_CAPACITY: usize = 64;
/// Pool threads.
pub const POOL_THREADS: usize = 2;

/// How a source answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Answered (a score, or `score: null` when it has information but no opinion).
    Ok,
    /// Nothing known about the address.
    NoData,
    /// Not asked this time (quota, back-off, an open circuit breaker, the per-scan cap).
    Skipped,
    /// The lookup failed.
    Error,
    /// No answer within the deadline.
    Timeout,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::NoData => "no_data",
            Status::Skipped => "skipped",
            Status::Error => "error",
            Status::Timeout => "timeout",
        }
    }
}

/// A source's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub score: Option<u8>,
    pub reason: String,
    pub status: Status,
    /// The address is dropped by the firewall (firewall and blocklist sources).
    pub blocked: bool,
    /// Structured details (GeoIP location, RDAP network).
    pub data: Option<Value>,
}

impl Answer {
    pub fn score(score: u8, reason: impl Into<String>) -> Answer {
        Answer {
            score: Some(score.min(100)),
            reason: reason.into(),
            status: Status::Ok,
            blocked: false,
            data: None,
        }
    }

    pub fn info(reason: impl Into<String>) -> Answer {
        Answer {
            score: None,
            reason: reason.into(),
            status: Status::Ok,
            blocked: false,
            data: None,
        }
    }

    pub fn status(status: Status, reason: impl Into<String>) -> Answer {
        Answer {
            score: None,
            reason: reason.into(),
            status,
            blocked: false,
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Answer {
        self.data = Some(data);
        self
    }
}

/// The uncached lookups an automatic scan cycle may still make (`checks.reputation_queries`
/// per-scan cap).
#[derive(Debug)]
pub struct ScanBudget(AtomicU32);

impl ScanBudget {
    pub fn new(n: u32) -> Arc<ScanBudget> {
        Arc::new(ScanBudget(AtomicU32::new(n)))
    }

    /// Takes one lookup; false when none is left.
    pub fn take(&self) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    pub fn left(&self) -> u32 {
        self.0.load(Ordering::Acquire)
    }
}

/// What a lookup is for.
#[derive(Clone, Debug)]
pub struct Query {
    pub now: Timestamp,
    /// Set for automatic scans: uncached remote lookups draw on it.
    pub scan: Option<Arc<ScanBudget>>,
}

/// One verdict source.
pub trait Source: Send + Sync {
    /// Name in answers and in `[threat.weights]`.
    fn name(&self) -> &'static str;
    /// True when [`Source::lookup`] may wait on the network (it then runs on the pool).
    fn remote(&self) -> bool {
        false
    }
    /// An answer from memory when one is at hand (a warm cache); remote sources only.
    fn cached(&self, _ip: IpAddr, _q: &Query) -> Option<Answer> {
        None
    }
    /// Looks `ip` up.
    fn lookup(&self, ip: IpAddr, q: &Query) -> Answer;
}

/// One source's line in a verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub name: &'static str,
    pub weight: f64,
    pub answer: Answer,
}

impl Line {
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "score": self.answer.score,
            "reason": self.answer.reason,
            "status": self.answer.status.as_str(),
            "weight": (self.weight * 100.0).round() as u64,
        })
    }
}

/// A verdict.
#[derive(Clone, Debug)]
pub struct Verdict {
    pub ip: IpAddr,
    pub verdict: &'static str,
    pub score: u8,
    pub blocked: bool,
    pub lines: Vec<Line>,
}

impl Verdict {
    /// The line of source `name`.
    pub fn line(&self, name: &str) -> Option<&Line> {
        self.lines.iter().find(|l| l.name == name)
    }
}

/// Combines answered scores (see the module doc).
pub fn combine(lines: &[Line]) -> (u8, bool, &'static str) {
    let mut keep = 1.0f64;
    let mut blocked = false;
    for l in lines {
        blocked |= l.answer.blocked;
        if l.answer.status != Status::Ok {
            continue;
        }
        if let Some(s) = l.answer.score {
            let p = (l.weight.clamp(0.0, 1.0) * f64::from(s) / 100.0).clamp(0.0, 1.0);
            keep *= 1.0 - p;
        }
    }
    let score = (100.0 * (1.0 - keep)).round().clamp(0.0, 100.0) as u8;
    let v = if blocked {
        "blocked"
    } else if score >= 80 {
        "malicious"
    } else if score >= 40 {
        "suspicious"
    } else {
        "clean"
    };
    (score, blocked, v)
}

struct Job {
    source: Arc<dyn Source>,
    ip: IpAddr,
    query: Query,
    reply: Sender<Answer>,
}

/// The lookup pool (exists while a remote source is configured).
struct Pool {
    queue: Arc<BoundedQueue<Job>>,
    _row: RowHandle,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Pool {
    fn start(clock: SharedClock, registry: &Arc<Registry>) -> Result<Pool, SourceError> {
        let queue: Arc<BoundedQueue<Job>> = Arc::new(
            BoundedQueue::new(
                clock,
                RowConfig::new("operations")
                    .capacity(POOL_CAPACITY as u64)
                    .running_slots(POOL_THREADS),
            )
            .map_err(crate::queue::RowError::at(POOL_ROW))
            .map_err(SourceError::Queue)?,
        );
        let row = registry
            .register(POOL_ROW, queue.health().clone())
            .map_err(crate::queue::RowError::at(POOL_ROW))
            .map_err(SourceError::Queue)?;
        let mut threads = Vec::new();
        for n in 0..POOL_THREADS {
            let q = queue.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("threat-lookup-{n}"))
                    .spawn(move || loop {
                        match q.pop_timeout(Duration::from_millis(500)) {
                            Ok(g) => {
                                let running = q.health().start_running();
                                let job = g.finish();
                                let source = job.source.clone();
                                let ip = job.ip;
                                let answer =
                                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                        source.lookup(ip, &job.query)
                                    }));
                                match answer {
                                    Ok(a) => {
                                        let _ = job.reply.send(a);
                                        running.finish();
                                    }
                                    Err(_) => {
                                        let _ = job.reply.send(Answer::status(
                                            Status::Error,
                                            "the lookup failed unexpectedly",
                                        ));
                                        running.lose();
                                    }
                                }
                            }
                            Err(PopError::Timeout) => {}
                            Err(PopError::Closed) => return,
                        }
                    })
                    .map_err(SourceError::Spawn)?,
            );
        }
        Ok(Pool {
            queue,
            _row: row,
            threads: Mutex::new(threads),
        })
    }

    fn stop(&self) {
        self.queue.close();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }
}

/// The weight of a source by name.
pub type Weights = Arc<dyn Fn(&str) -> f64 + Send + Sync>;

/// The aggregator: the configured sources, their weights, the pool and the deadline.
pub struct Aggregator {
    clock: SharedClock,
    registry: Arc<Registry>,
    sources: RwLock<Arc<Vec<Arc<dyn Source>>>>,
    weights: RwLock<Weights>,
    deadline: RwLock<Duration>,
    pool: Mutex<Option<Arc<Pool>>>,
}

impl Aggregator {
    pub fn new(clock: SharedClock, registry: &Arc<Registry>) -> Aggregator {
        Aggregator {
            clock,
            registry: registry.clone(),
            sources: RwLock::new(Arc::new(Vec::new())),
            weights: RwLock::new(Arc::new(|_| 1.0)),
            deadline: RwLock::new(Duration::from_secs(2)),
            pool: Mutex::new(None),
        }
    }

    /// Replaces the sources (a reload); starts the pool when a remote one appears, stops it
    /// when none is left.
    pub fn set_sources(
        &self,
        sources: Vec<Arc<dyn Source>>,
        weights: Weights,
        deadline: Duration,
    ) -> Result<(), SourceError> {
        let remote = sources.iter().any(|s| s.remote());
        {
            let mut pool = self.pool.lock();
            match (remote, pool.is_some()) {
                (true, false) => {
                    *pool = Some(Arc::new(Pool::start(self.clock.clone(), &self.registry)?))
                }
                (false, true) => {
                    if let Some(p) = pool.take() {
                        p.stop();
                    }
                }
                _ => {}
            }
        }
        *self.sources.write() = Arc::new(sources);
        *self.weights.write() = weights;
        *self.deadline.write() = deadline;
        Ok(())
    }

    pub fn sources(&self) -> Arc<Vec<Arc<dyn Source>>> {
        self.sources.read().clone()
    }

    /// Asks every source about `ip`.
    pub fn verdict(&self, ip: IpAddr, scan: Option<Arc<ScanBudget>>) -> Verdict {
        let ip = ip.to_canonical();
        let sources = self.sources();
        let weights = self.weights.read().clone();
        let deadline = Instant::now() + *self.deadline.read();
        let q = Query {
            now: self.clock.now(),
            scan,
        };
        let pool = self.pool.lock().clone();
        let mut answers: Vec<Option<Answer>> = vec![None; sources.len()];
        let mut waiting: Vec<(usize, Receiver<Answer>)> = Vec::new();
        for (i, s) in sources.iter().enumerate() {
            if !s.remote() {
                answers[i] = Some(s.lookup(ip, &q));
                continue;
            }
            if let Some(a) = s.cached(ip, &q) {
                answers[i] = Some(a);
                continue;
            }
            let Some(pool) = &pool else {
                answers[i] = Some(Answer::status(Status::Error, "no lookup pool"));
                continue;
            };
            let (tx, rx) = bounded(1);
            let job = Job {
                source: s.clone(),
                ip,
                query: q.clone(),
                reply: tx,
            };
            match pool.queue.try_push(job) {
                Ok(()) => waiting.push((i, rx)),
                Err(_) => {
                    answers[i] = Some(Answer::status(
                        Status::Skipped,
                        "the lookup pool is full; try again",
                    ))
                }
            }
        }
        for (i, rx) in waiting {
            answers[i] = Some(match rx.recv_deadline(deadline) {
                Ok(a) => a,
                Err(_) => Answer::status(Status::Timeout, "no answer within the verdict deadline"),
            });
        }
        let lines: Vec<Line> = sources
            .iter()
            .zip(answers)
            .map(|(s, a)| Line {
                name: s.name(),
                weight: weights(s.name()),
                answer: a.unwrap_or_else(|| Answer::status(Status::Error, "no answer")),
            })
            .collect();
        let (score, blocked, verdict) = combine(&lines);
        Verdict {
            ip,
            verdict,
            score,
            blocked,
            lines,
        }
    }

    /// Stops the pool.
    pub fn shutdown(&self) {
        if let Some(p) = self.pool.lock().take() {
            p.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;

    struct Fixed(&'static str, Answer, bool, Duration);

    impl Source for Fixed {
        fn name(&self) -> &'static str {
            self.0
        }
        fn remote(&self) -> bool {
            self.2
        }
        fn lookup(&self, _ip: IpAddr, _q: &Query) -> Answer {
            std::thread::sleep(self.3);
            self.1.clone()
        }
    }

    fn line(name: &'static str, weight: f64, score: Option<u8>) -> Line {
        Line {
            name,
            weight,
            answer: Answer {
                score,
                reason: String::new(),
                status: Status::Ok,
                blocked: false,
                data: None,
            },
        }
    }

    #[test]
    fn weighting_thresholds_and_blocked() {
        assert_eq!(
            combine(&[line("a", 1.0, Some(90))]),
            (90, false, "malicious")
        );
        assert_eq!(
            combine(&[line("a", 1.0, Some(0)), line("b", 1.0, Some(40))]).2,
            "suspicious"
        );
        // No opinion changes nothing; a zero weight neither.
        assert_eq!(
            combine(&[line("a", 1.0, None), line("b", 0.0, Some(100))]).0,
            0
        );
        // Two moderate sources agree.
        let (s, _, v) = combine(&[line("a", 1.0, Some(50)), line("b", 0.8, Some(75))]);
        assert_eq!((s, v), (80, "malicious"));
        let mut b = line("firewall", 1.0, Some(0));
        b.answer.blocked = true;
        assert_eq!(combine(&[b]).2, "blocked");
    }

    #[test]
    fn a_late_source_is_a_timeout_and_does_not_hold_the_verdict() {
        let reg = Registry::new();
        let agg = Aggregator::new(SystemClock::shared(), &reg);
        let fast: Arc<dyn Source> = Arc::new(Fixed(
            "local_db",
            Answer::score(50, "x"),
            false,
            Duration::ZERO,
        ));
        let slow: Arc<dyn Source> = Arc::new(Fixed(
            "upstream",
            Answer::score(100, "late"),
            true,
            Duration::from_millis(800),
        ));
        agg.set_sources(
            vec![fast, slow],
            Arc::new(|_| 1.0),
            Duration::from_millis(100),
        )
        .unwrap();
        assert!(reg.snapshot().contains_key(POOL_ROW));
        let t = Instant::now();
        let v = agg.verdict("192.0.2.1".parse().unwrap(), None);
        assert!(t.elapsed() < Duration::from_millis(700));
        assert_eq!(v.line("upstream").unwrap().answer.status, Status::Timeout);
        assert_eq!((v.score, v.verdict), (50, "suspicious"));
        agg.set_sources(Vec::new(), Arc::new(|_| 1.0), Duration::from_secs(2))
            .unwrap();
        assert!(!reg.snapshot().contains_key(POOL_ROW));
    }

    #[test]
    fn scan_budget_runs_out() {
        let b = ScanBudget::new(2);
        assert!(b.take() && b.take());
        assert!(!b.take());
        assert_eq!(b.left(), 0);
    }
}
