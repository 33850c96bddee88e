//! The production loop: tail every path, parse, detect, emit.
//!
//! [`AuthWatcher::poll_once`] does one round (tested with real files and a manual clock);
//! [`run_auth_watcher`] repeats it until `stop`, sleeping `poll_interval` between rounds
//! (in slices of at most 100 ms so a stop request is seen quickly).

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::SharedClock;
use crate::findings::Finding;

use super::detect::{AuthDetector, AuthDetectorStats};
use super::tail::Tailer;
use super::thresholds::AuthThresholds;

/// Default candidates: Debian/Ubuntu and RHEL-family names of the auth and mail logs.
pub const DEFAULT_AUTH_LOG_PATHS: &[&str] = &[
    "/var/log/auth.log",
    "/var/log/secure",
    "/var/log/mail.log",
    "/var/log/maillog",
];

/// Counters for the health row, written by the watcher thread, read lock-free.
#[derive(Debug, Default)]
pub struct AuthWatchHealth {
    /// Lines read from all files.
    pub lines: AtomicU64,
    /// Lines recognised as auth events.
    pub events: AtomicU64,
    /// Findings emitted.
    pub findings: AtomicU64,
    /// Over-long lines discarded by the tailers.
    pub truncated_lines: AtomicU64,
    /// Rotations followed.
    pub rotations: AtomicU64,
    /// Poll errors (other than a missing file).
    pub read_errors: AtomicU64,
    /// Sum over paths of bytes not read yet.
    pub bytes_behind: AtomicU64,
    /// Addresses with failure state now.
    pub addresses_tracked: AtomicU64,
    /// Live address state lost to the cap.
    pub addresses_evicted: AtomicU64,
    /// Known (user, address) pairs forgotten because of the cap.
    pub known_logins_evicted: AtomicU64,
    /// Monotonic nanoseconds of the last completed round (progress for lag).
    pub last_round_nanos: AtomicU64,
}

struct Source {
    tailer: Tailer,
    last_error: Option<io::ErrorKind>,
}

/// Tailers plus one detector shared by all paths (an address failing on SSH and IMAP is
/// one address).
pub struct AuthWatcher {
    sources: Vec<Source>,
    detector: AuthDetector,
    clock: SharedClock,
}

impl AuthWatcher {
    /// Each path is followed from its current end (see [`Tailer::new`]).
    pub fn new(paths: Vec<PathBuf>, thresholds: AuthThresholds, clock: SharedClock) -> Self {
        AuthWatcher {
            sources: paths
                .into_iter()
                .map(|p| Source {
                    tailer: Tailer::new(p),
                    last_error: None,
                })
                .collect(),
            detector: AuthDetector::new(thresholds, clock.clone()),
            clock,
        }
    }

    pub fn detector(&self) -> &AuthDetector {
        &self.detector
    }

    pub fn detector_mut(&mut self) -> &mut AuthDetector {
        &mut self.detector
    }

    /// One round over every path. Returns true when a tailer hit its per-poll budget and
    /// the caller should poll again without sleeping. A poll error is logged once per
    /// distinct kind per path (and again after recovery), and counted.
    pub fn poll_once(&mut self, emit: &mut dyn FnMut(Finding), health: &AuthWatchHealth) -> bool {
        let mut more = false;
        let mut behind = 0u64;
        for src in &mut self.sources {
            let mut events = 0u64;
            let mut findings = 0u64;
            let detector = &mut self.detector;
            let result = src.tailer.poll_with(&mut |line| {
                if detector.process_line(line, &mut |f| {
                    findings += 1;
                    emit(f)
                }) {
                    events += 1;
                }
            });
            health.events.fetch_add(events, Ordering::Relaxed);
            health.findings.fetch_add(findings, Ordering::Relaxed);
            match result {
                Ok(st) => {
                    more |= st.more;
                    if src.last_error.take().is_some() {
                        log::info!("auth log {}: readable again", src.tailer.path().display());
                    }
                    health.lines.fetch_add(st.lines, Ordering::Relaxed);
                    health
                        .truncated_lines
                        .fetch_add(st.truncated_lines, Ordering::Relaxed);
                    if st.rotated {
                        health.rotations.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(e) => {
                    health.read_errors.fetch_add(1, Ordering::Relaxed);
                    if src.last_error != Some(e.kind()) {
                        log::warn!("auth log {}: {e}", src.tailer.path().display());
                        src.last_error = Some(e.kind());
                    }
                }
            }
            behind = behind.saturating_add(src.tailer.bytes_behind());
        }
        self.detector.maintain();
        let s: AuthDetectorStats = self.detector.stats();
        health.bytes_behind.store(behind, Ordering::Relaxed);
        health
            .addresses_tracked
            .store(s.addresses_tracked, Ordering::Relaxed);
        health
            .addresses_evicted
            .store(s.addresses_evicted, Ordering::Relaxed);
        health
            .known_logins_evicted
            .store(s.known_logins_evicted, Ordering::Relaxed);
        let now = u64::try_from(self.clock.monotonic_nanos()).unwrap_or(0);
        health.last_round_nanos.store(now, Ordering::Relaxed);
        more
    }
}

/// Runs the watcher until `stop` is set; returns the detector's final counters.
pub fn run_auth_watcher(
    paths: Vec<PathBuf>,
    thresholds: AuthThresholds,
    clock: SharedClock,
    emit: &mut dyn FnMut(Finding),
    stop: &AtomicBool,
    poll_interval: Duration,
) -> AuthDetectorStats {
    let health = AuthWatchHealth::default();
    run_auth_watcher_with_health(paths, thresholds, clock, emit, stop, poll_interval, &health)
}

/// [`run_auth_watcher`] publishing its counters into `health` after every round.
pub fn run_auth_watcher_with_health(
    paths: Vec<PathBuf>,
    thresholds: AuthThresholds,
    clock: SharedClock,
    emit: &mut dyn FnMut(Finding),
    stop: &AtomicBool,
    poll_interval: Duration,
    health: &AuthWatchHealth,
) -> AuthDetectorStats {
    let mut w = AuthWatcher::new(paths, thresholds, clock);
    while !stop.load(Ordering::Acquire) {
        let more = w.poll_once(emit, health);
        if !more {
            sleep_unless_stopped(poll_interval, stop);
        }
    }
    w.detector().stats()
}

fn sleep_unless_stopped(total: Duration, stop: &AtomicBool) {
    let slice = Duration::from_millis(100);
    let mut left = total;
    while !left.is_zero() && !stop.load(Ordering::Acquire) {
        let d = left.min(slice);
        std::thread::sleep(d);
        left = left.saturating_sub(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::watch::authlog::testutil::TempDir;
    use std::io::Write;
    use std::path::Path;

    fn append(path: &Path, s: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(s.as_bytes()).unwrap();
    }

    #[test]
    fn one_detector_over_several_files_with_rotation() {
        let d = TempDir::new("run");
        let auth = d.path().join("auth.log");
        let mail = d.path().join("mail.log");
        append(
            &auth,
            "Nov 21 20:14:01 h sshd[1]: Failed password for root from 203.0.113.9 port 1 ssh2\n",
        );
        let clock = ManualClock::at_epoch_2026();
        let mut w = AuthWatcher::new(
            vec![auth.clone(), mail.clone()],
            AuthThresholds::default(),
            clock,
        );
        let health = AuthWatchHealth::default();
        let mut out = Vec::new();
        assert!(!w.poll_once(&mut |f| out.push(f), &health));
        assert_eq!(
            health.lines.load(Ordering::Relaxed),
            0,
            "history is skipped"
        );
        let fail = |p: u16| {
            format!("Nov 21 20:14:01 h sshd[1]: Failed password for root from 203.0.113.9 port {p} ssh2\n")
        };
        append(&auth, &(fail(2) + &fail(3)));
        std::fs::rename(&auth, d.path().join("auth.log.1")).unwrap();
        append(
            &auth,
            &(fail(4) + "Nov 21 20:17:01 h CRON[9]: (root) CMD (true)\n"),
        );
        append(&mail, "Nov 21 20:14:01 m dovecot: imap-login: Disconnected (auth failed, 5 attempts in 9 secs): user=<a>, method=PLAIN, rip=203.0.113.9, lip=10.0.0.1\n");
        w.poll_once(&mut |f| out.push(f), &health);
        assert_eq!(
            out.len(),
            1,
            "3 ssh failures: none; 5 dovecot: pam_bruteforce"
        );
        assert_eq!(out[0].check, "pam_bruteforce");
        append(&auth, &(fail(5) + &fail(6)));
        w.poll_once(&mut |f| out.push(f), &health);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].check, "ssh_bruteforce");
        assert_eq!(health.lines.load(Ordering::Relaxed), 7);
        assert_eq!(health.events.load(Ordering::Relaxed), 6);
        assert_eq!(health.findings.load(Ordering::Relaxed), 2);
        assert_eq!(health.rotations.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn runner_returns_when_stopped() {
        let d = TempDir::new("stop");
        let stop = AtomicBool::new(true);
        let stats = run_auth_watcher(
            vec![d.path().join("missing.log")],
            AuthThresholds::default(),
            ManualClock::at_epoch_2026(),
            &mut |_| {},
            &stop,
            Duration::from_secs(3600),
        );
        assert_eq!(stats.events, 0);
    }
}
