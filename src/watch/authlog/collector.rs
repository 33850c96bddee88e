//! The authentication-log collector: a [`Follower`] over the configured logs with one
//! [`AuthDetector`] (an address failing on SSH and IMAP is one address) as its line handler,
//! on its own thread `auth-log`, with the `auth.file_source` row and the `auth_log` watcher
//! row.
//!
//! [`AuthCollector::start`] loads the checkpoints, replays the open detection windows and
//! attaches to every log before it returns, so lines written after the daemon reports
//! itself started are read. [`AuthCollector::stop`] stops the thread at once (it is woken,
//! not polled), waits until what it submitted is committed, and removes the row, so a
//! reload can start a new collector with the same names that resumes where this one
//! stopped.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::components::Components;
use crate::findings::{Engine, Finding};
use crate::queue::{Registry, RowHandle};
use crate::store::Store;
pub use crate::watch::tail::StartError;
use crate::watch::tail::{file_source_row, Follower, LineHandler, Running};

use super::detect::AuthDetector;
use super::thresholds::{AuthThresholds, SharedThresholds};

/// Name of the queue row.
pub const ROW: &str = "auth.file_source";
/// Name of the watcher row.
pub const COMPONENT: &str = "auth_log";
/// Prefix of the checkpoint keys (`auth:<path>`, `auth-replay:<path>`, `auth-fp:<path>`).
pub const KEY_PREFIX: &str = "auth";

impl LineHandler for AuthDetector {
    fn line(&mut self, line: &str, emit: &mut dyn FnMut(Finding)) {
        self.process_line(line, emit);
    }

    fn replay(&mut self, line: &str) {
        self.process_line(line, &mut |_| {});
    }

    fn maintain(&mut self) {
        AuthDetector::maintain(self);
    }
}

/// A running auth-log collector.
pub struct AuthCollector {
    /// First field: dropped (the thread stopped and joined) before the row is removed.
    running: Running,
    /// The running detector's thresholds (a configuration reload sets them).
    thresholds: Arc<SharedThresholds>,
    _row: RowHandle,
}

impl AuthCollector {
    /// Starts following `paths` (see the module documentation).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        paths: &[PathBuf],
        thresholds: AuthThresholds,
        clock: SharedClock,
        engine: &Arc<Engine>,
        registry: &Arc<Registry>,
        components: &Components,
        store: &Store,
    ) -> Result<AuthCollector, StartError> {
        let health = file_source_row(clock.clone());
        let row = registry
            .register(ROW, health.clone())
            .map_err(|e| StartError::Row(ROW, e))?;
        let component = components.add(COMPONENT, "log_watcher");
        component.set_detail(
            paths
                .iter()
                .map(|p| crate::text::escape_path(p).into_owned())
                .collect::<Vec<_>>()
                .join(", "),
        );
        let window = Duration::from_secs(thresholds.clamped().window_secs);
        let detector = AuthDetector::new(thresholds, clock.clone());
        let shared = detector.shared_thresholds();
        let follower = Follower::new(
            "auth log",
            KEY_PREFIX,
            paths,
            window,
            detector,
            store,
            engine.clone(),
            health,
            component,
            clock,
        )
        .map_err(|e| StartError::Io("auth-log", e))?;
        let running = Running::spawn("auth-log", follower, |f, stop| {
            f.run(stop);
        })
        .map_err(|e| StartError::Io("auth-log", e))?;
        Ok(AuthCollector {
            running,
            thresholds: shared,
            _row: row,
        })
    }

    /// The running detector's thresholds, shared with a configuration reload.
    pub fn shared_thresholds(&self) -> Arc<SharedThresholds> {
        self.thresholds.clone()
    }

    /// Asks the thread to stop without waiting (see [`AuthCollector::stop`]).
    pub fn request_stop(&self) {
        self.running.request_stop();
    }

    /// Stops the thread (it finishes the round it is in, submitting what it read), waits
    /// (up to 5 s) until what it submitted is committed, so that a collector started next
    /// (a reload) resumes from its last position, and removes the row.
    pub fn stop(self) {
        self.running.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::components::Component;
    use crate::queue::QueueHealth;
    use crate::watch::tail::testutil::TempDir;
    use std::io::Write;
    use std::path::Path;
    use std::sync::atomic::Ordering;

    fn append(path: &Path, s: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(s.as_bytes()).unwrap();
    }

    fn fail(p: u16) -> String {
        format!(
            "Nov 21 20:14:01 h sshd[1]: Failed password for root from 203.0.113.9 port {p} ssh2\n"
        )
    }

    struct Rig {
        dir: TempDir,
        store: Store,
        engine: Arc<Engine>,
        _reg: Arc<Registry>,
        clock: Arc<ManualClock>,
    }

    impl Rig {
        fn new(tag: &str) -> Rig {
            let dir = TempDir::new(tag);
            let store = Store::open(&dir.path().join("svc.db")).unwrap();
            let reg = Registry::new();
            let clock = ManualClock::at_epoch_2026();
            let engine = Engine::new(clock.clone(), store.clone(), &reg, dir.path()).unwrap();
            engine.start().unwrap();
            Rig {
                dir,
                store,
                engine,
                _reg: reg,
                clock,
            }
        }

        fn follower(
            &self,
            paths: &[PathBuf],
        ) -> (Follower<AuthDetector>, Arc<QueueHealth>, Arc<Component>) {
            let row = file_source_row(self.clock.clone());
            let comps = Components::default();
            let comp = comps.add(COMPONENT, "log_watcher");
            let f = Follower::new(
                "auth log",
                KEY_PREFIX,
                paths,
                Duration::from_secs(600),
                AuthDetector::new(AuthThresholds::default(), self.clock.clone()),
                &self.store,
                self.engine.clone(),
                row.clone(),
                comp.clone(),
                self.clock.clone(),
            )
            .unwrap();
            (f, row, comp)
        }

        fn findings(&self) -> Vec<Finding> {
            assert!(self.engine.flush(Duration::from_secs(10)));
            self.store
                .read(|c| {
                    let mut st = c.prepare("SELECT check_name, ip FROM history ORDER BY id")?;
                    let rows = st.query_map([], |r| {
                        Ok(Finding::new(
                            &r.get::<_, String>(0)?,
                            crate::findings::Severity::High,
                            r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                            jiff::Timestamp::UNIX_EPOCH,
                        ))
                    })?;
                    rows.collect()
                })
                .unwrap()
        }
    }

    impl Drop for Rig {
        fn drop(&mut self) {
            self.engine.shutdown();
            self.store.close();
        }
    }

    #[test]
    fn one_detector_over_several_files_with_rotation() {
        let rig = Rig::new("coll-rot");
        let auth = rig.dir.path().join("auth.log");
        let mail = rig.dir.path().join("mail.log");
        append(&auth, &fail(1));
        let (mut f, row, comp) = rig.follower(&[auth.clone(), mail.clone()]);
        assert!(!f.round());
        assert!(rig.findings().is_empty(), "history is skipped");
        append(&auth, &(fail(2) + &fail(3)));
        std::fs::rename(&auth, rig.dir.path().join("auth.log.1")).unwrap();
        append(
            &auth,
            &(fail(4) + "Nov 21 20:17:01 h CRON[9]: (root) CMD (true)\n"),
        );
        append(&mail, "Nov 21 20:14:01 m dovecot: imap-login: Disconnected (auth failed, 5 attempts in 9 secs): user=<a>, method=PLAIN, rip=203.0.113.9, lip=10.0.0.1\n");
        f.round();
        let got = rig.findings();
        assert_eq!(
            got.len(),
            1,
            "3 ssh failures: none; 5 dovecot: pam_bruteforce"
        );
        assert_eq!(got[0].check, "pam_bruteforce");
        append(&auth, &(fail(5) + &fail(6)));
        f.round();
        let got = rig.findings();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].check, "ssh_bruteforce");
        assert_eq!(comp.events.load(Ordering::Relaxed), 7, "lines read");
        assert_eq!(comp.counter("rotations_total").load(Ordering::Relaxed), 1);
        assert!(comp.attached.load(Ordering::Relaxed));
        assert_eq!(row.snapshot().waiting, Some(0));
        // Both positions are committed, with fingerprints.
        let keys = crate::watch::tail::Keys::new(KEY_PREFIX, &auth);
        let (cp, replay) = keys.load(&rig.store);
        let cp = cp.expect("position committed");
        assert_eq!(cp.offset, std::fs::metadata(&auth).unwrap().len());
        assert!(cp.fingerprint.is_some());
        assert_eq!(replay, Some(0), "the whole new file is within the window");
    }

    #[test]
    fn a_restart_replays_the_open_window_and_emits_once() {
        let rig = Rig::new("coll-replay");
        let auth = rig.dir.path().join("auth.log");
        append(&auth, "");
        {
            let (mut f, _, _) = rig.follower(std::slice::from_ref(&auth));
            f.round();
            append(&auth, &(fail(1) + &fail(2) + &fail(3)));
            f.round();
        }
        assert!(rig.findings().is_empty());
        // Restart: the three failures are replayed (not emitted), two more complete the
        // attack: exactly one finding.
        append(&auth, &(fail(4) + &fail(5) + &fail(6)));
        let (mut f, _, _) = rig.follower(std::slice::from_ref(&auth));
        f.round();
        let got = rig.findings();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].check, "ssh_bruteforce");
        // And another restart with nothing new emits nothing.
        drop(f);
        let (mut f, _, _) = rig.follower(std::slice::from_ref(&auth));
        f.round();
        assert_eq!(rig.findings().len(), 1);
    }

    #[test]
    fn an_overlong_line_is_counted_and_the_watcher_stays_attached() {
        let rig = Rig::new("coll-long");
        let auth = rig.dir.path().join("auth.log");
        append(&auth, "");
        let (mut f, _, comp) = rig.follower(std::slice::from_ref(&auth));
        f.round();
        // An over-long line, still without its newline.
        append(&auth, &"x".repeat(crate::watch::tail::MAX_LINE_BYTES + 100));
        f.round();
        assert!(
            comp.attached.load(Ordering::Relaxed),
            "attached while it is pending"
        );
        assert_eq!(
            comp.counter("overlong_lines_total").load(Ordering::Relaxed),
            1
        );
        append(&auth, &format!("{}\n", "y".repeat(50)));
        append(
            &auth,
            &(fail(1) + &fail(2) + &fail(3) + &fail(4) + &fail(5)),
        );
        f.round();
        assert_eq!(
            comp.counter("overlong_lines_total").load(Ordering::Relaxed),
            1
        );
        assert!(comp.attached.load(Ordering::Relaxed));
        assert_eq!(rig.findings().len(), 1, "lines after it are read");
    }

    #[test]
    fn a_stopped_collector_can_be_started_again_and_resumes_where_it_stopped() {
        let rig = Rig::new("coll-restart");
        let auth = rig.dir.path().join("auth.log");
        append(&auth, "");
        let comps = Components::default();
        let start = || {
            AuthCollector::start(
                std::slice::from_ref(&auth),
                AuthThresholds::default(),
                rig.clock.clone(),
                &rig.engine,
                &rig._reg,
                &comps,
                &rig.store,
            )
            .unwrap()
        };
        let wait_findings = |n: usize| {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            loop {
                let got = rig.findings().len();
                if got >= n {
                    return got;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{got} of {n} findings"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let c = start();
        assert!(rig._reg.snapshot().contains_key(ROW));
        append(
            &auth,
            &(fail(1) + &fail(2) + &fail(3) + &fail(4) + &fail(5)),
        );
        assert_eq!(wait_findings(1), 1);
        append(&auth, &fail(6));
        c.stop();
        assert!(
            !rig._reg.snapshot().contains_key(ROW),
            "the row leaves with it"
        );
        // Written while stopped: read by the next collector (a reload), nothing twice.
        append(
            &auth,
            "Nov 21 20:15:01 h sshd[2]: Accepted password for root from 198.51.100.9 port 9 ssh2\n",
        );
        let c = start();
        assert_eq!(wait_findings(2), 2);
        c.stop();
        let got = rig.findings();
        assert_eq!(
            got.iter().map(|f| f.check.as_str()).collect::<Vec<_>>(),
            ["ssh_bruteforce", "ssh_root_login"]
        );
    }
}
