//! [`Waker`]: sleeps until a followed log may have changed.
//!
//! One inotify instance per collector watches each followed file for `IN_MODIFY` (new
//! bytes, a truncation) and each file's directory for `IN_CREATE`, `IN_MOVED_TO`,
//! `IN_MOVED_FROM` and `IN_DELETE` of that file's name (rotation by rename, deletion,
//! (re)appearance). [`Waker::wait`] returns as soon as one of them fires, when a
//! [`WakeHandle`] is triggered (stop, reload), or when the safety-net interval passes:
//! polling stays only as a slow net for what inotify cannot see (a directory that did not
//! exist yet, a watch limit reached, a file system without inotify support such as some
//! network mounts).
//!
//! Guarantees:
//! - A write to a watched file that happens after [`Waker::arm`] was called for its current
//!   inode wakes the next (or the current) `wait` at once.
//! - Without inotify (initialisation failed, watch limits), `wait` falls back to the
//!   [`FALLBACK_POLL`] interval and the reason is kept in [`Waker::degraded`].
//! - Memory is one watch per file and per distinct directory, and a 4 KiB event buffer.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use inotify::{Inotify, WatchDescriptor, WatchMask};
use nix::fcntl::OFlag;

/// Poll interval when inotify is unavailable.
pub const FALLBACK_POLL: Duration = Duration::from_millis(250);

/// Why a wait returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wakeup {
    /// A watched file or directory changed (or the inotify queue overflowed).
    Changed,
    /// A [`WakeHandle`] was triggered.
    Woken,
    /// The timeout passed.
    Timeout,
}

/// Wakes a [`Waker`] from another thread (for example to stop its collector at once).
#[derive(Clone, Debug)]
pub struct WakeHandle {
    tx: Arc<OwnedFd>,
}

impl WakeHandle {
    /// Makes the current or next [`Waker::wait`] return [`Wakeup::Woken`].
    pub fn wake(&self) {
        // A full pipe already holds a pending wakeup: nothing to add.
        let _ = nix::unistd::write(self.tx.as_fd(), b"w");
    }
}

struct FileWatch {
    path: PathBuf,
    name: Option<OsString>,
    /// Watch on the file's current inode, and that inode.
    armed: Option<(WatchDescriptor, (u64, u64))>,
}

/// Sleeps until a followed file may have changed. See the module documentation.
pub struct Waker {
    inotify: Option<Inotify>,
    rx: OwnedFd,
    tx: Arc<OwnedFd>,
    files: Vec<FileWatch>,
    dirs: HashMap<PathBuf, WatchDescriptor>,
    /// Directory watch -> names of followed files in it.
    dir_names: HashMap<WatchDescriptor, Vec<OsString>>,
    degraded: Option<String>,
    buf: Vec<u8>,
}

impl Waker {
    /// A waker for `paths` (indexes in [`Waker::arm`] follow this order). Directories are
    /// watched now when they exist; files once [`Waker::arm`] names their open inode.
    pub fn new(paths: &[PathBuf]) -> io::Result<Waker> {
        let (rx, tx) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        let mut w = Waker {
            inotify: None,
            rx,
            tx: Arc::new(tx),
            files: paths
                .iter()
                .map(|p| FileWatch {
                    path: p.clone(),
                    name: p.file_name().map(|n| n.to_os_string()),
                    armed: None,
                })
                .collect(),
            dirs: HashMap::new(),
            dir_names: HashMap::new(),
            degraded: None,
            buf: vec![0u8; 4096],
        };
        match Inotify::init() {
            Ok(i) => w.inotify = Some(i),
            Err(e) => w.degraded = Some(format!("inotify unavailable ({e}); polling")),
        }
        w.watch_dirs();
        Ok(w)
    }

    /// Watches one more path; its index in [`Waker::arm`] is the number of paths before it.
    pub fn add(&mut self, path: &Path) {
        self.files.push(FileWatch {
            path: path.to_path_buf(),
            name: path.file_name().map(|n| n.to_os_string()),
            armed: None,
        });
        self.watch_dirs();
    }

    /// A handle that wakes this waker.
    pub fn handle(&self) -> WakeHandle {
        WakeHandle {
            tx: self.tx.clone(),
        }
    }

    /// Why waiting falls back to polling, if it does.
    pub fn degraded(&self) -> Option<&str> {
        self.degraded.as_deref()
    }

    /// Watches the parent directories not watched yet (they may appear later).
    fn watch_dirs(&mut self) {
        let Some(ino) = self.inotify.as_mut() else {
            return;
        };
        for f in &self.files {
            let Some(dir) = f.path.parent() else { continue };
            if self.dirs.contains_key(dir) {
                continue;
            }
            let mask = WatchMask::CREATE
                | WatchMask::MOVED_TO
                | WatchMask::MOVED_FROM
                | WatchMask::DELETE
                | WatchMask::ONLYDIR;
            match ino.watches().add(dir, mask) {
                Ok(wd) => {
                    self.dirs.insert(dir.to_path_buf(), wd.clone());
                    let names = self.dir_names.entry(wd).or_default();
                    if let Some(n) = &f.name {
                        if !names.contains(n) {
                            names.push(n.clone());
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    if self.degraded.is_none() {
                        self.degraded = Some(format!(
                            "cannot watch {} ({e}); polling it",
                            crate::text::escape_path(dir)
                        ));
                    }
                }
            }
        }
        // Names for directories shared by several files.
        for f in &self.files {
            if let (Some(dir), Some(n)) = (f.path.parent(), &f.name) {
                if let Some(wd) = self.dirs.get(dir) {
                    let names = self.dir_names.entry(wd.clone()).or_default();
                    if !names.contains(n) {
                        names.push(n.clone());
                    }
                }
            }
        }
    }

    /// Watches file `index` for modifications of its open inode `identity` (device, inode),
    /// replacing the watch of a previous inode. `None` (no file open) removes the watch.
    /// Call after every poll; it does nothing when the inode did not change.
    pub fn arm(&mut self, index: usize, identity: Option<(u64, u64)>) {
        let Some(ino) = self.inotify.as_mut() else {
            return;
        };
        let Some(f) = self.files.get_mut(index) else {
            return;
        };
        if f.armed.as_ref().map(|(_, id)| *id) == identity {
            return;
        }
        if let Some((wd, _)) = f.armed.take() {
            // The watch may be gone already (file deleted): nothing to do then.
            let _ = ino.watches().remove(wd);
        }
        let Some(id) = identity else { return };
        // The path may already name another file than the open one (rotated meanwhile); the
        // directory watch wakes the next wait for that, and the next arm corrects it.
        match ino.watches().add(&f.path, WatchMask::MODIFY) {
            Ok(wd) => f.armed = Some((wd, id)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                if self.degraded.is_none() {
                    self.degraded = Some(format!(
                        "cannot watch {} ({e}); polling it",
                        crate::text::escape_path(&f.path)
                    ));
                }
            }
        }
    }

    /// Sleeps until a watched file changes, [`WakeHandle::wake`], or `timeout` (shortened to
    /// [`FALLBACK_POLL`] while degraded).
    pub fn wait(&mut self, timeout: Duration) -> io::Result<Wakeup> {
        if self
            .files
            .iter()
            .any(|f| f.path.parent().is_some_and(|d| !self.dirs.contains_key(d)))
        {
            // A directory may have appeared since (or come back after a deletion).
            self.watch_dirs();
        }
        let timeout = if self.inotify.is_none() || self.degraded.is_some() {
            timeout.min(FALLBACK_POLL)
        } else {
            timeout
        };
        let ready = match &self.inotify {
            Some(i) => crate::sys::poll::poll_readable(&[self.rx.as_fd(), i.as_fd()], timeout)?,
            None => crate::sys::poll::poll_readable(&[self.rx.as_fd()], timeout)?,
        };
        let woken = ready.first().copied().unwrap_or(false);
        if woken {
            let mut sink = [0u8; 64];
            while matches!(nix::unistd::read(self.rx.as_raw_fd(), &mut sink), Ok(n) if n > 0) {}
        }
        let changed = ready.get(1).copied().unwrap_or(false) && self.drain_events()?;
        Ok(if woken {
            Wakeup::Woken
        } else if changed {
            Wakeup::Changed
        } else {
            Wakeup::Timeout
        })
    }

    /// Reads every queued event; true when one concerns a followed file.
    fn drain_events(&mut self) -> io::Result<bool> {
        let Some(ino) = self.inotify.as_mut() else {
            return Ok(false);
        };
        let mut relevant = false;
        loop {
            let events = match ino.read_events(&mut self.buf) {
                Ok(ev) => ev,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let mut any = false;
            for ev in events {
                any = true;
                if ev.mask.contains(inotify::EventMask::Q_OVERFLOW) {
                    relevant = true;
                    continue;
                }
                if ev.mask.contains(inotify::EventMask::IGNORED)
                    && self.dir_names.contains_key(&ev.wd)
                {
                    // A watched directory went away: watch it again once it is back.
                    self.dir_names.remove(&ev.wd);
                    self.dirs.retain(|_, wd| *wd != ev.wd);
                    relevant = true;
                    continue;
                }
                match (&ev.name, self.dir_names.get(&ev.wd)) {
                    // A directory event: only the followed names matter.
                    (Some(name), Some(names)) => {
                        relevant |= names.iter().any(|n| n.as_os_str() == *name);
                    }
                    (_, Some(_)) => relevant = true,
                    // A file event (modification, or IN_IGNORED after deletion).
                    (_, None) => relevant = true,
                }
            }
            if !any {
                break;
            }
        }
        Ok(relevant)
    }

    /// Paths followed, in index order.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|f| f.path.as_path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    fn id(p: &Path) -> Option<(u64, u64)> {
        std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
    }

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("svc-wake-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn writes_renames_and_creations_wake_at_once() {
        let d = temp("events");
        let log = d.join("auth.log");
        std::fs::write(&log, "x\n").unwrap();
        let mut w = Waker::new(std::slice::from_ref(&log)).unwrap();
        assert!(w.degraded().is_none(), "{:?}", w.degraded());
        w.arm(0, id(&log));
        assert_eq!(w.wait(Duration::ZERO).unwrap(), Wakeup::Timeout);
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        f.write_all(b"y\n").unwrap();
        assert_eq!(w.wait(Duration::from_secs(10)).unwrap(), Wakeup::Changed);
        assert_eq!(w.wait(Duration::ZERO).unwrap(), Wakeup::Timeout);
        // Rotation by rename: the directory watch sees the name move away and come back.
        std::fs::rename(&log, d.join("auth.log.1")).unwrap();
        assert_eq!(w.wait(Duration::from_secs(10)).unwrap(), Wakeup::Changed);
        std::fs::write(&log, "new\n").unwrap();
        assert_eq!(w.wait(Duration::from_secs(10)).unwrap(), Wakeup::Changed);
        // Re-armed on the new inode, writes to it wake; the old inode's watch is gone.
        w.arm(0, id(&log));
        while w.wait(Duration::ZERO).unwrap() != Wakeup::Timeout {}
        std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .unwrap()
            .write_all(b"more\n")
            .unwrap();
        assert_eq!(w.wait(Duration::from_secs(10)).unwrap(), Wakeup::Changed);
        // Other names in the directory do not wake.
        std::fs::write(d.join("other.log"), "z\n").unwrap();
        assert_eq!(w.wait(Duration::ZERO).unwrap(), Wakeup::Timeout);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_handle_wakes_a_waiting_thread() {
        let d = temp("handle");
        let mut w = Waker::new(&[d.join("missing.log")]).unwrap();
        let h = w.handle();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            h.wake();
        });
        assert_eq!(w.wait(Duration::from_secs(30)).unwrap(), Wakeup::Woken);
        t.join().unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }
}
