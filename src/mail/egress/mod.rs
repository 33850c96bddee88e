//! Direct SMTP egress: outbound connections to a remote port 25 that the MTA did not make
//! (a script or a compromised account talking SMTP itself), per account, with the
//! destination named by reverse DNS ([`rdns`], row `smtp_rdns.resolves`).
//!
//! Every [`SAMPLE_EVERY`] the sampler reads the kernel's socket tables
//! (`/proc/net/tcp`, `/proc/net/tcp6`, [`procnet`]) and keeps the connections in state
//! ESTABLISHED or SYN_SENT to port 25 of a non-loopback address whose socket owner is not
//! an MTA user (`Debian-exim`, `exim`, `mailnull`, `postfix`). The owner uid is the
//! account (its name from `/etc/passwd`); the owning process is found by the socket inode
//! among `/proc/<pid>/fd` links (bounded) and named by its `comm`.
//!
//! Every new (account, destination) pair of a clock hour is looked up and recorded in
//! `mail_egress` (the `direct_smtp_egress` count of `/api/v1/email/groups?by=account`), and
//! raises one `mail_per_account` finding (HIGH) per account and hour, listing the
//! destinations with their reverse-DNS names (NXDOMAIN and empty answers are normal:
//! "no reverse DNS name"). Sampling misses
//! connections shorter than the interval; it is a detector of ongoing spam runs, not an
//! audit of every connection.

pub mod procnet;
pub mod rdns;

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::findings::{Finding, Severity};

use self::procnet::{parse_table, Socket, ESTABLISHED, SYN_SENT};
use self::rdns::{Rdns, RdnsPool};

/// Why the egress sampler or its lookup pool could not start.
#[derive(Debug)]
pub enum EgressError {
    /// The lookup pool's queue row could not be built or registered.
    Queue(crate::queue::RowError),
    /// A sampler or lookup thread could not be started.
    Spawn(std::io::Error),
}

impl std::fmt::Display for EgressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EgressError::Queue(e) => write!(f, "{e}"),
            EgressError::Spawn(e) => write!(f, "cannot start a thread: {e}"),
        }
    }
}

impl std::error::Error for EgressError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EgressError::Queue(e) => Some(e),
            EgressError::Spawn(e) => Some(e),
        }
    }
}

/// How often the socket tables are read.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// Users whose sockets are the MTA's.
pub const MTA_USERS: &[&str] = &["Debian-exim", "exim", "mailnull", "postfix"];
/// Processes looked at when finding a socket's owner, at most.
pub const MAX_PROCS: usize = 100_000;
/// Descriptors looked at per process, at most.
pub const MAX_FDS: usize = 65_536;
/// Destinations listed per finding.
pub const MAX_LISTED: usize = 10;
/// (account, destination) pairs remembered per hour (beyond: not reported again this hour).
pub const MAX_PAIRS: usize = 10_000;
/// The check the findings carry (decision 193: account mail abuse is `mail_per_account`).
pub const CHECK: &str = "mail_per_account";

/// What the sampler reads.
#[derive(Clone, Debug)]
pub struct EgressSettings {
    /// `/proc` (tests: the real one; the tables are the kernel's).
    pub proc_root: PathBuf,
    /// `/etc/passwd` (under `checks.root`).
    pub passwd: PathBuf,
    /// The SMTP port (25; tests use a port of their own).
    pub port: u16,
    /// Count loopback destinations (tests only: production ignores them).
    pub include_loopback: bool,
}

impl EgressSettings {
    pub fn system(checks_root: &Path) -> EgressSettings {
        EgressSettings {
            proc_root: PathBuf::from("/proc"),
            passwd: crate::hostfs::reroot(checks_root, Path::new("/etc/passwd")),
            port: 25,
            include_loopback: false,
        }
    }
}

/// One direct egress connection seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Egress {
    pub uid: u32,
    pub account: String,
    pub remote: SocketAddr,
    pub program: Option<String>,
    pub pid: Option<u32>,
}

/// Users by uid from a passwd file (bounded read).
fn users(passwd: &Path) -> HashMap<u32, String> {
    let Ok(bytes) = crate::hostfs::read_bounded(passwd, 16 * 1024 * 1024, false) else {
        return HashMap::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut f = line.split(':');
        let (Some(name), Some(_), Some(uid)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if let Ok(uid) = uid.parse::<u32>() {
            out.entry(uid).or_insert_with(|| name.to_string());
        }
    }
    out
}

/// The egress connections in the tables under `settings.proc_root`.
pub fn sample(settings: &EgressSettings, users: &HashMap<u32, String>) -> Vec<Egress> {
    let mut sockets: Vec<Socket> = Vec::new();
    for t in ["net/tcp", "net/tcp6"] {
        if let Ok(text) = crate::fsutil::read_daemon_string(&settings.proc_root.join(t)) {
            sockets.extend(parse_table(&text).0);
        }
    }
    let mta: HashSet<u32> = users
        .iter()
        .filter(|(_, n)| MTA_USERS.contains(&n.as_str()))
        .map(|(u, _)| *u)
        .collect();
    let hits: Vec<Socket> = sockets
        .into_iter()
        .filter(|s| matches!(s.state, ESTABLISHED | SYN_SENT))
        .filter(|s| s.remote.port() == settings.port)
        .filter(|s| settings.include_loopback || !is_local(s.remote.ip()))
        .filter(|s| !mta.contains(&s.uid))
        .collect();
    if hits.is_empty() {
        return Vec::new();
    }
    let inodes: HashSet<u64> = hits.iter().map(|s| s.inode).filter(|i| *i != 0).collect();
    let owners = owners(&settings.proc_root, &inodes);
    hits.into_iter()
        .map(|s| {
            let (pid, program) = match owners.get(&s.inode) {
                Some((p, c)) => (Some(*p), Some(c.clone())),
                None => (None, None),
            };
            Egress {
                uid: s.uid,
                account: users
                    .get(&s.uid)
                    .cloned()
                    .unwrap_or_else(|| format!("uid {}", s.uid)),
                remote: s.remote,
                program,
                pid,
            }
        })
        .collect()
}

fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_unspecified(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.is_unspecified(),
    }
}

/// Owning (pid, comm) of each socket inode, from `/proc/<pid>/fd` links (bounded).
fn owners(proc_root: &Path, inodes: &HashSet<u64>) -> HashMap<u64, (u32, String)> {
    let mut out = HashMap::new();
    let Ok(rd) = std::fs::read_dir(proc_root) else {
        return out;
    };
    for e in rd.filter_map(Result::ok).take(MAX_PROCS) {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        for fd in fds.filter_map(Result::ok).take(MAX_FDS) {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let t = target.to_string_lossy();
            let Some(inode) = t
                .strip_prefix("socket:[")
                .and_then(|r| r.strip_suffix(']'))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if inodes.contains(&inode) && !out.contains_key(&inode) {
                let comm = crate::fsutil::read_daemon_string(&e.path().join("comm"))
                    .map(|c| crate::hostfs::sanitize(c.trim(), 64))
                    .unwrap_or_else(|_| "?".to_string());
                out.insert(inode, (pid, comm));
            }
        }
        if out.len() == inodes.len() {
            break;
        }
    }
    out
}

/// A new (account, destination) pair of this hour with its reverse-DNS answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub egress: Egress,
    pub rdns: Rdns,
}

impl Observed {
    /// The store record (`mail_egress`): `confirmed` when the reverse lookup completed
    /// (a name, NXDOMAIN or an empty answer), `ptr` the first name.
    pub fn record(&self, at: i64) -> crate::store::mail_accounts::MailWrite {
        let (ptr, confirmed) = match &self.rdns {
            Rdns::Names(n) => (n.first().cloned(), true),
            Rdns::NoName => (None, true),
            Rdns::Unavailable(_) => (None, false),
        };
        crate::store::mail_accounts::MailWrite::Egress {
            at,
            account: self.egress.account.clone(),
            uid: self.egress.uid,
            remote_ip: self.egress.remote.ip().to_string(),
            remote_port: self.egress.remote.port(),
            ptr,
            confirmed,
        }
    }
}

/// Reverse lookups per sample at most (each waits up to a second); pairs beyond are
/// recorded as unavailable and not looked up again this hour.
pub const LOOKUPS_PER_SAMPLE: usize = 16;

/// Turns samples into records and findings: every new (account, destination) pair of a
/// clock hour is looked up and recorded once; one finding per account and hour.
pub struct Reporter {
    hour: i64,
    seen: HashSet<(u32, IpAddr)>,
    reported: HashSet<u32>,
}

impl Default for Reporter {
    fn default() -> Self {
        Reporter {
            hour: i64::MIN,
            seen: HashSet::new(),
            reported: HashSet::new(),
        }
    }
}

impl Reporter {
    /// The new pairs of one sample at `now` (with reverse DNS from `resolve`) and the
    /// findings they raise.
    pub fn report(
        &mut self,
        now: jiff::Timestamp,
        sample: &[Egress],
        resolve: &dyn Fn(IpAddr) -> Rdns,
    ) -> (Vec<Finding>, Vec<Observed>) {
        let hour = now.as_second().div_euclid(3600);
        if hour != self.hour {
            self.hour = hour;
            self.seen.clear();
            self.reported.clear();
        }
        let mut observed: Vec<Observed> = Vec::new();
        for e in sample {
            if self.seen.len() >= MAX_PAIRS || !self.seen.insert((e.uid, e.remote.ip())) {
                continue;
            }
            let rdns = if observed.len() < LOOKUPS_PER_SAMPLE {
                resolve(e.remote.ip())
            } else {
                Rdns::Unavailable("lookup budget of this sample spent".into())
            };
            observed.push(Observed {
                egress: e.clone(),
                rdns,
            });
        }
        let mut uids: Vec<u32> = Vec::new();
        for o in &observed {
            if !uids.contains(&o.egress.uid) {
                uids.push(o.egress.uid);
            }
        }
        let mut out = Vec::new();
        for uid in uids {
            if !self.reported.insert(uid) {
                continue;
            }
            let list: Vec<&Observed> = observed.iter().filter(|o| o.egress.uid == uid).collect();
            let Some(first) = list.first().map(|o| &o.egress) else {
                continue;
            };
            let dests: Vec<String> = list
                .iter()
                .take(MAX_LISTED)
                .map(|o| format!("{} ({})", o.egress.remote, o.rdns.describe()))
                .collect();
            let program = match (&first.program, first.pid) {
                (Some(p), Some(pid)) => format!("{p} (pid {pid})"),
                _ => "an unknown process".to_string(),
            };
            let account = crate::hostfs::sanitize(&first.account, 64);
            out.push(
                Finding::new(
                    CHECK,
                    Severity::High,
                    format!(
                        "account {account} connected directly to remote SMTP servers (bypassing the MTA)"
                    ),
                    now,
                )
                .with_account(account.clone())
                .with_details(format!(
                    "{program} opened SMTP connections that did not go through the local MTA, to: {}",
                    dests.join("; ")
                )),
            );
        }
        (out, observed)
    }
}

/// The running sampler.
pub struct EgressSampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pool: Arc<RdnsPool>,
}

impl EgressSampler {
    /// Starts sampling every `every`; findings go to `submit`.
    pub fn start(
        settings: EgressSettings,
        every: Duration,
        pool: Arc<RdnsPool>,
        clock: SharedClock,
        store: crate::store::Store,
        submit: Arc<dyn Fn(Finding) + Send + Sync>,
    ) -> Result<EgressSampler, EgressError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, p) = (stop.clone(), pool.clone());
        let thread = std::thread::Builder::new()
            .name("smtp-egress".into())
            .spawn(move || {
                let mut reporter = Reporter::default();
                while !flag.load(Ordering::Acquire) {
                    let u = users(&settings.passwd);
                    let s = sample(&settings, &u);
                    if !s.is_empty() {
                        let now = clock.now();
                        let (findings, observed) = reporter.report(now, &s, &|ip| p.resolve(ip));
                        if !observed.is_empty() {
                            let at = now.as_microsecond();
                            let writes: Vec<_> = observed.iter().map(|o| o.record(at)).collect();
                            if let Err(e) =
                                store.write(move |c| crate::store::mail_accounts::apply(c, &writes))
                            {
                                log::warn!("smtp egress: records not stored: {e}");
                            }
                        }
                        for f in findings {
                            submit(f);
                        }
                    }
                    let until = std::time::Instant::now() + every;
                    while std::time::Instant::now() < until && !flag.load(Ordering::Acquire) {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            })
            .map_err(EgressError::Spawn)?;
        Ok(EgressSampler {
            stop,
            thread: Some(thread),
            pool,
        })
    }

    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.pool.stop();
    }
}

impl Drop for EgressSampler {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Starts the sampler on the host (`/proc`, `/etc/passwd` under `checks.root`, port 25)
/// with the system resolver. `None` when it cannot start (logged).
pub fn start_system(
    checks_root: &Path,
    clock: SharedClock,
    registry: &Arc<crate::queue::Registry>,
    store: crate::store::Store,
    submit: Arc<dyn Fn(Finding) + Send + Sync>,
) -> Option<EgressSampler> {
    if !Path::new("/proc/net/tcp").exists() {
        log::info!("smtp egress: /proc/net/tcp is not readable; direct SMTP egress is not watched");
        return None;
    }
    let resolver: Arc<dyn rdns::PtrLookup> = Arc::new(crate::dns::Resolver::from_config(None));
    let started = RdnsPool::start(resolver, clock.clone(), registry).and_then(|pool| {
        EgressSampler::start(
            EgressSettings::system(checks_root),
            SAMPLE_EVERY,
            pool,
            clock,
            store,
            submit,
        )
    });
    match started {
        Ok(s) => Some(s),
        Err(e) => {
            log::warn!("smtp egress: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests;
