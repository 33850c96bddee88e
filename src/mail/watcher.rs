//! The spool watcher: inotify on the spool's queue directories and every hash
//! subdirectory, plus a sweep every [`SWEEP`] that adds hash directories created since (so
//! they are watched within a minute even when an event was missed) and admits messages not
//! seen yet.
//!
//! Exim: a message is admitted once its `-H` file exists (Exim writes `-D` first and
//! renames `-H` into place last). Postfix: a queue file is admitted once its owner-execute
//! bit is set (Postfix's mark of a complete queue file).

use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use inotify::{Inotify, WatchDescriptor, WatchMask};

use super::spool::{self, Mta};
use crate::sys::dir::{Dir, Kind};

/// How often the spool is swept for new hash directories and unseen messages.
pub const SWEEP: Duration = Duration::from_secs(30);

/// One message to scan: its directory relative to the spool root and its id (Exim) or
/// queue file name (Postfix).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Job {
    pub dir: String,
    pub id: String,
}

/// What the watcher reports to its owner.
pub trait Admit: Send + Sync {
    /// A message is ready; returns false when it could not be queued (counted there).
    fn admit(&self, job: Job) -> bool;
    /// After each sweep: the messages present now (to forget the others), the directories
    /// watched, and whether it happened.
    fn swept(&self, present: &HashSet<String>, watched: usize);
    /// Periodic work of the owner (clamd probe, recovery), once per sweep.
    fn tick(&self);
}

/// The queue directories of a spool (relative to its root).
pub fn queue_dirs(mta: Mta) -> Vec<&'static str> {
    match mta {
        Mta::Exim => vec!["input"],
        Mta::Postfix => spool::POSTFIX_QUEUES.to_vec(),
    }
}

struct State {
    root: PathBuf,
    mta: Mta,
    /// `None` when inotify is unavailable: the sweep alone finds messages.
    inotify: Option<Inotify>,
    /// Watch descriptor -> directory relative to the root.
    watches: Vec<(WatchDescriptor, String)>,
    watched: HashSet<String>,
}

impl State {
    fn watch(&mut self, rel: &str) {
        if self.watched.contains(rel) {
            return;
        }
        let mask = WatchMask::CREATE
            | WatchMask::MOVED_TO
            | WatchMask::CLOSE_WRITE
            | WatchMask::ATTRIB
            | WatchMask::DONT_FOLLOW
            | WatchMask::ONLYDIR;
        let Some(ino) = self.inotify.as_mut() else {
            return;
        };
        match ino.watches().add(self.root.join(rel), mask) {
            Ok(wd) => {
                self.watches.push((wd, rel.to_string()));
                self.watched.insert(rel.to_string());
            }
            Err(e) => log::warn!(
                "mail spool: cannot watch {}: {e}",
                crate::text::escape_path(&self.root.join(rel))
            ),
        }
    }

    /// The message a file name in `dir` stands for, when it is ready.
    fn ready(&self, d: &Dir, dir: &str, name: &str) -> Option<Job> {
        match self.mta {
            Mta::Exim => spool::exim_id_of(name, "-H").map(|id| Job {
                dir: dir.to_string(),
                id,
            }),
            Mta::Postfix => {
                if !spool::is_postfix_id(name) {
                    return None;
                }
                let i = d.lstat(OsStr::new(name)).ok().flatten()?;
                (i.kind == Kind::File && i.mode & 0o100 != 0).then(|| Job {
                    dir: dir.to_string(),
                    id: name.to_string(),
                })
            }
        }
    }

    /// Watches every queue directory and hash subdirectory; returns the ready messages.
    fn sweep(&mut self) -> Vec<Job> {
        let mut jobs = Vec::new();
        let Ok(root) = Dir::walk_trusted(&self.root) else {
            return jobs;
        };
        let mut dirs: Vec<String> = Vec::new();
        for q in queue_dirs(self.mta) {
            if root
                .lstat(OsStr::new(q))
                .ok()
                .flatten()
                .is_some_and(|i| i.kind == Kind::Dir)
            {
                dirs.push(q.to_string());
            }
        }
        let mut i = 0;
        while i < dirs.len() {
            let rel = dirs[i].clone();
            i += 1;
            self.watch(&rel);
            let Ok(d) = root.open_beneath(Path::new(&rel)) else {
                continue;
            };
            let Ok((entries, _)) = d.entries(1_000_000) else {
                continue;
            };
            for e in entries {
                let name = e.name.to_string_lossy().into_owned();
                let is_dir = match e.kind {
                    Some(k) => k == Kind::Dir,
                    None => d
                        .lstat(&e.name)
                        .ok()
                        .flatten()
                        .is_some_and(|i| i.kind == Kind::Dir),
                };
                // Hash directories are one level below a queue directory (Postfix may
                // nest two).
                if is_dir {
                    if rel.matches('/').count() < 2 && !name.starts_with('.') {
                        dirs.push(format!("{rel}/{name}"));
                    }
                    continue;
                }
                if let Some(j) = self.ready(&d, &rel, &name) {
                    jobs.push(j);
                }
            }
        }
        jobs
    }
}

/// Runs the watcher until `stop`; `admit` receives ready messages.
pub fn run(root: PathBuf, mta: Mta, admit: Arc<dyn Admit>, stop: Arc<AtomicBool>) {
    let inotify = match Inotify::init() {
        Ok(i) => Some(i),
        Err(e) => {
            log::error!("mail spool: inotify unavailable: {e}; sweeping every 5 s instead");
            None
        }
    };
    let sweep_every = if inotify.is_some() {
        SWEEP
    } else {
        Duration::from_secs(5)
    };
    let mut st = State {
        root,
        mta,
        inotify,
        watches: Vec::new(),
        watched: HashSet::new(),
    };
    let mut buf = vec![0u8; 64 * 1024];
    let mut next_sweep = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        if Instant::now() >= next_sweep {
            let jobs = st.sweep();
            let present: HashSet<String> = jobs.iter().map(|j| j.id.clone()).collect();
            for j in jobs {
                admit.admit(j);
            }
            admit.swept(&present, st.watched.len());
            admit.tick();
            next_sweep = Instant::now() + sweep_every;
        }
        let read = match st.inotify.as_mut() {
            Some(i) => i.read_events(&mut buf).map(|evs| {
                evs.filter_map(|ev| Some((ev.wd, ev.name?.to_string_lossy().into_owned(), ev.mask)))
                    .collect::<Vec<_>>()
            }),
            None => Ok(Vec::new()),
        };
        let events: Vec<(String, String, bool)> = match read {
            Ok(evs) => evs
                .into_iter()
                .filter_map(|(wd, name, mask)| {
                    let dir = st
                        .watches
                        .iter()
                        .find(|(w, _)| *w == wd)
                        .map(|(_, r)| r.clone())?;
                    Some((dir, name, mask.contains(inotify::EventMask::ISDIR)))
                })
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Vec::new(),
            Err(e) => {
                log::warn!("mail spool: reading inotify events: {e}");
                Vec::new()
            }
        };
        if events.is_empty() {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        let Ok(root) = Dir::walk_trusted(&st.root) else {
            continue;
        };
        for (dir, name, is_dir) in events {
            if is_dir {
                // A new hash directory: watch it and pick up what is already in it.
                next_sweep = Instant::now();
                continue;
            }
            if let Ok(d) = root.open_beneath(Path::new(&dir)) {
                if let Some(j) = st.ready(&d, &dir, &name) {
                    admit.admit(j);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods, reason = "test fixtures")]
    use super::*;
    use parking_lot::Mutex;

    #[derive(Default)]
    struct Seen {
        jobs: Mutex<Vec<Job>>,
        sweeps: Mutex<usize>,
    }

    impl Admit for Seen {
        fn admit(&self, job: Job) -> bool {
            self.jobs.lock().push(job);
            true
        }
        fn swept(&self, _: &HashSet<String>, _: usize) {
            *self.sweeps.lock() += 1;
        }
        fn tick(&self) {}
    }

    fn wait(what: &str, f: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Exim: a message counts once its -H exists; a hash directory created after the
    /// watcher started is watched (here through its inotify event, long before the sweep).
    #[test]
    fn new_hash_directories_and_header_files_are_picked_up() {
        let root = std::env::temp_dir().join(format!("svc-mail-watch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("input/A")).unwrap();
        std::fs::write(root.join("input/A/1xVYBW-0008Ep-1v-D"), "x").unwrap();
        std::fs::write(root.join("input/A/1xVYBW-0008Ep-1v-H"), "x").unwrap();
        let seen = Arc::new(Seen::default());
        let stop = Arc::new(AtomicBool::new(false));
        let t = {
            let (root, seen, stop) = (root.clone(), seen.clone(), stop.clone());
            let admit: Arc<dyn Admit> = seen;
            std::thread::spawn(move || run(root, Mta::Exim, admit, stop))
        };
        wait("the first sweep", || *seen.sweeps.lock() >= 1);
        assert_eq!(seen.jobs.lock()[0].id, "1xVYBW-0008Ep-1v");
        assert_eq!(seen.jobs.lock()[0].dir, "input/A");
        // A new hash directory, then a body alone (not admitted), then its header.
        std::fs::create_dir_all(root.join("input/Q")).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        std::fs::write(root.join("input/Q/1xVYBW-0008Eq-2Q-D"), "x").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert!(!seen.jobs.lock().iter().any(|j| j.id == "1xVYBW-0008Eq-2Q"));
        std::fs::write(root.join("input/Q/1xVYBW-0008Eq-2Q-H.tmp"), "x").unwrap();
        std::fs::rename(
            root.join("input/Q/1xVYBW-0008Eq-2Q-H.tmp"),
            root.join("input/Q/1xVYBW-0008Eq-2Q-H"),
        )
        .unwrap();
        wait("the message in the new hash directory", || {
            seen.jobs
                .lock()
                .iter()
                .any(|j| j.id == "1xVYBW-0008Eq-2Q" && j.dir == "input/Q")
        });
        stop.store(true, Ordering::SeqCst);
        t.join().unwrap();
        let _ = std::fs::remove_dir_all(&root);
    }
}
