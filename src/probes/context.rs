//! Process context: the chain's argv from `/proc` and the account from the uid.
//!
//! Rows (spec "Protection queue health rows", "Limits"):
//! - `processctx.proc_reads`: 64 slots shared by every `/proc` file and symlink read; a read
//!   that finds every slot busy is refused (a loss) and the chain keeps what the kernel
//!   recorded. Each read is bounded ([`MAX_CMDLINE`]) and deadline-limited ([`READ_DEADLINE`]:
//!   a read that overruns is discarded and counted).
//! - `processctx.enrichment` (in `mod.rs`): 1,024 waiting, 2 workers, overflow replaces the
//!   oldest.
//!
//! `/proc` content is hostile (a process writes its own argv): bounded reads, lossy text,
//! no panic; a pid whose comm no longer matches the record (reused) is not read.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::clock::SharedClock;
use crate::queue::{LagBasis, QueueHealth, RowConfig};

use super::record::{split_argv, Head, Proc};

/// Slots of `processctx.proc_reads`.
pub const PROC_READ_SLOTS: usize = 64;
/// Bytes read of one `/proc/<pid>/cmdline`.
pub const MAX_CMDLINE: u64 = 4096;
/// Bytes read of `/proc/<pid>/comm`.
const MAX_COMM: u64 = 64;
/// A `/proc` read that takes longer is discarded (counted as a loss).
pub const READ_DEADLINE: Duration = Duration::from_millis(250);
/// How long the uid -> account map is kept before `/etc/passwd` is read again.
const ACCOUNTS_TTL: Duration = Duration::from_secs(60);
/// Bytes read of the passwd file.
const MAX_PASSWD: u64 = 16 * 1024 * 1024;

/// The `processctx.proc_reads` slots and the account map.
pub struct ProcContext {
    proc_root: PathBuf,
    passwd: PathBuf,
    pub reads: Arc<QueueHealth>,
    busy: AtomicUsize,
    accounts: Mutex<(Option<Instant>, HashMap<u32, String>)>,
}

impl ProcContext {
    pub fn new(clock: SharedClock, proc_root: PathBuf, passwd: PathBuf) -> ProcContext {
        let cfg = RowConfig::new("reads")
            .capacity(PROC_READ_SLOTS as u64)
            .running_slots(PROC_READ_SLOTS)
            .lag_basis(LagBasis::OperationProgress);
        ProcContext {
            proc_root,
            passwd,
            reads: QueueHealth::new(clock, cfg),
            busy: AtomicUsize::new(0),
            accounts: Mutex::new((None, HashMap::new())),
        }
    }

    /// One bounded, deadline-limited read of `/proc/<pid>/<name>` in a slot; `None` when no
    /// slot is free, the process is gone or the deadline passed.
    fn read(&self, pid: u32, name: &str, limit: u64) -> Option<Vec<u8>> {
        if self.busy.fetch_add(1, Ordering::AcqRel) >= PROC_READ_SLOTS {
            self.busy.fetch_sub(1, Ordering::AcqRel);
            self.reads.record_loss();
            return None;
        }
        let running = self.reads.start_running();
        let started = Instant::now();
        let path = self.proc_root.join(pid.to_string()).join(name);
        let out = crate::fsutil::open_daemon_file(&path).ok().and_then(|f| {
            let mut buf = Vec::new();
            f.take(limit).read_to_end(&mut buf).ok().map(|_| buf)
        });
        let late = started.elapsed() > READ_DEADLINE;
        running.finish();
        self.reads.note_progress();
        self.busy.fetch_sub(1, Ordering::AcqRel);
        if late {
            self.reads.record_loss();
            return None;
        }
        out
    }

    /// The target of `/proc/<pid>/fd/<fd>` (the full path of an open file), in a slot.
    pub fn fd_path(&self, pid: u32, fd: u32) -> Option<String> {
        if self.busy.fetch_add(1, Ordering::AcqRel) >= PROC_READ_SLOTS {
            self.busy.fetch_sub(1, Ordering::AcqRel);
            self.reads.record_loss();
            return None;
        }
        let running = self.reads.start_running();
        let link = self
            .proc_root
            .join(pid.to_string())
            .join("fd")
            .join(fd.to_string());
        let out = std::fs::read_link(link).ok();
        running.finish();
        self.reads.note_progress();
        self.busy.fetch_sub(1, Ordering::AcqRel);
        let p = out?;
        p.is_absolute()
            .then(|| crate::hostfs::display_path(&p))
            .filter(|s| !s.ends_with(" (deleted)"))
    }

    /// Fills the argv of each process of `head` that is still running as recorded (same
    /// comm), actor first.
    pub fn enrich(&self, head: &mut Head) {
        for p in std::iter::once(&mut head.actor).chain(head.parents.iter_mut()) {
            if p.argv.is_empty() {
                self.fill_argv(p);
            }
        }
    }

    fn fill_argv(&self, p: &mut Proc) {
        let Some(comm) = self.read(p.pid, "comm", MAX_COMM) else {
            return;
        };
        if String::from_utf8_lossy(&comm).trim_end() != p.comm {
            return;
        }
        if let Some(cmdline) = self.read(p.pid, "cmdline", MAX_CMDLINE) {
            p.argv = split_argv(&cmdline);
        }
    }

    /// The account name of `uid` from the passwd file (re-read at most once a minute).
    pub fn account(&self, uid: u32) -> Option<String> {
        let mut g = self.accounts.lock();
        if g.0.is_none_or(|at| at.elapsed() > ACCOUNTS_TTL) {
            g.1 = read_accounts(&self.passwd);
            g.0 = Some(Instant::now());
        }
        g.1.get(&uid).cloned()
    }
}

fn read_accounts(passwd: &Path) -> HashMap<u32, String> {
    let Ok(bytes) = crate::hostfs::read_bounded(passwd, MAX_PASSWD, false) else {
        return HashMap::new();
    };
    let (entries, _bad) = crate::checks::accounts::parse_passwd(&bytes);
    let mut out = HashMap::new();
    for e in entries {
        out.entry(e.uid).or_insert(e.name);
    }
    out
}

/// The chain as a finding shows it: one line per process, actor first, up to init.
pub fn chain_text(head: &Head, account_of: &dyn Fn(u32) -> Option<String>) -> String {
    let mut out = String::new();
    for (i, p) in std::iter::once(&head.actor)
        .chain(head.parents.iter())
        .enumerate()
    {
        let who = account_of(p.uid).unwrap_or_else(|| format!("uid {}", p.uid));
        let argv = if p.argv.is_empty() {
            String::new()
        } else {
            format!(" {}", crate::hostfs::sanitize(&p.argv.join(" "), 256))
        };
        out.push_str(&format!(
            "{}pid {} {} ({who}){argv}\n",
            "  ".repeat(i.min(8)),
            p.pid,
            crate::hostfs::sanitize(&p.comm, 16),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(dir: &Path, pid: u32, comm: &str, cmdline: &[u8]) {
        let d = dir.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
        std::fs::write(d.join("cmdline"), cmdline).unwrap();
    }

    fn head() -> Head {
        let p = |pid, comm: &str| Proc {
            pid,
            uid: 33,
            comm: comm.into(),
            argv: Vec::new(),
        };
        Head {
            actor: p(20, "sh"),
            ppid: 10,
            cgroup: 0,
            parents: vec![p(10, "php-fpm"), p(1, "init")],
        }
    }

    #[test]
    fn enrich_reads_argv_of_matching_processes_only_and_bounded() {
        let t = tempfile_dir("enrich");
        fake_proc(&t, 20, "sh", b"sh\0-c\0curl x\0");
        // pid 10 was reused by another program: not read.
        fake_proc(&t, 10, "bash", b"bash\0");
        // Hostile: an endless argv without NULs, cut at the bound.
        fake_proc(&t, 1, "init", &vec![b'A'; 100_000]);
        std::fs::write(
            t.join("passwd"),
            "www-data:x:33:33::/var/www:/bin/sh\nbad line\n",
        )
        .unwrap();
        let ctx = ProcContext::new(
            crate::clock::SystemClock::shared(),
            t.clone(),
            t.join("passwd"),
        );
        let mut h = head();
        ctx.enrich(&mut h);
        assert_eq!(h.actor.argv, ["sh", "-c", "curl x"]);
        assert!(h.parents[0].argv.is_empty());
        assert_eq!(h.parents[1].argv[0].len(), MAX_CMDLINE as usize);
        assert_eq!(ctx.account(33).as_deref(), Some("www-data"));
        assert_eq!(ctx.account(5), None);
        let text = chain_text(&h, &|u| ctx.account(u));
        assert!(
            text.starts_with("pid 20 sh (www-data) sh -c curl x\n  pid 10 php-fpm"),
            "{text}"
        );
        assert_eq!(ctx.fd_path(20, 3), None);
        let _ = std::fs::remove_dir_all(&t);
    }

    fn tempfile_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("svc-probes-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
