//! The daemon's side of systemd (`Type=notify`, `WatchdogSec=`): `READY=1` once the HTTPS
//! front turns (the API answers), `RELOADING=1` and `READY=1` around a SIGHUP reload,
//! `STOPPING=1` at shutdown, and the watchdog supervisor.
//!
//! The supervisor sends `WATCHDOG=1` every half `WATCHDOG_USEC`, but only while every thread
//! registered in [`crate::queue::heartbeat`] beat within `WATCHDOG_USEC`: a wedged subsystem
//! stops the pings, and systemd restarts the daemon one interval later. It logs once which
//! thread is stuck (and tells systemd in `STATUS=`; again only if the stalest thread changes),
//! and once when all beat again.
//!
//! Without `NOTIFY_SOCKET` nothing here runs: no thread, no log line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::queue::heartbeat::Heartbeats;
use crate::sys::notify::{self, Notifier};

use super::StartError;

/// The thread whose first turn means the API answers.
const FRONT: &str = "http-front";

/// How long [`Systemd::ready`] waits for the front's first turn.
const FRONT_WAIT: Duration = Duration::from_secs(30);

/// Notifications to the service manager, when there is one.
pub struct Systemd {
    notifier: Option<Arc<Notifier>>,
    watchdog: Option<Supervisor>,
}

impl Systemd {
    /// Reads `NOTIFY_SOCKET`; nothing is sent without it.
    pub fn from_env() -> Systemd {
        let notifier = match Notifier::from_env() {
            Ok(n) => n.map(Arc::new),
            Err(e) => {
                log::warn!("NOTIFY_SOCKET not usable, systemd is not notified: {e}");
                None
            }
        };
        Systemd {
            notifier,
            watchdog: None,
        }
    }

    fn send(&self, state: &str) {
        if let Some(n) = &self.notifier {
            if let Err(e) = n.notify(state) {
                log::warn!("systemd notification {state:?} not sent: {e}");
            }
        }
    }

    /// `READY=1` once the HTTPS front has entered its loop (it polls the bound listener),
    /// then the watchdog supervisor when `WATCHDOG_USEC` asks for one (systemd's watchdog
    /// runs from the end of start-up).
    pub fn ready(&mut self) -> Result<(), StartError> {
        let Some(notifier) = self.notifier.clone() else {
            return Ok(());
        };
        let until = Instant::now() + FRONT_WAIT;
        while !Heartbeats::global().has(FRONT) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.send("READY=1\nSTATUS=running");
        if let Some(interval) = notify::watchdog_interval() {
            self.watchdog = Some(Supervisor::start(notifier, interval)?);
        }
        Ok(())
    }

    /// Around a reload by signal.
    pub fn reloading(&self) {
        self.send("RELOADING=1");
    }

    /// After a reload by signal, whatever its outcome (a refused one changed nothing).
    pub fn reloaded(&self) {
        self.send("READY=1");
    }

    /// `STOPPING=1` and the supervisor's end.
    pub fn stopping(self) {
        self.send("STOPPING=1");
        if let Some(w) = self.watchdog {
            w.stop();
        }
    }
}

/// The pinging thread.
struct Supervisor {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: std::thread::JoinHandle<()>,
}

impl Supervisor {
    fn start(notifier: Arc<Notifier>, interval: Duration) -> Result<Supervisor, StartError> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || supervise(&notifier, interval, &stop2))
            .map_err(|source| StartError::Spawn {
                thread: "watchdog",
                source,
            })?;
        log::info!(
            "systemd watchdog: pinging every {:.1} s while every subsystem thread beats within {:.1} s",
            interval.as_secs_f64() / 2.0,
            interval.as_secs_f64()
        );
        Ok(Supervisor { stop, thread })
    }

    fn stop(self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        let _ = self.thread.join();
    }
}

fn supervise(notifier: &Notifier, interval: Duration, stop: &(Mutex<bool>, Condvar)) {
    let every = interval / 2;
    let mut stuck: Option<&'static str> = None;
    // A failing ping is logged once until one goes through.
    let mut failing = false;
    loop {
        match Heartbeats::global().stalest() {
            Some((name, age)) if age >= interval => {
                // Once per stuck thread (the stalest one), not once per turn.
                if stuck != Some(name) {
                    log::error!(
                        "watchdog: thread {name} has not turned for {:.1} s; systemd watchdog pings stop, so the service manager restarts the daemon",
                        age.as_secs_f64()
                    );
                    let _ = notifier.notify(&format!("STATUS=thread {name} is stuck"));
                    stuck = Some(name);
                }
            }
            _ => {
                if let Some(name) = stuck.take() {
                    log::warn!("watchdog: every thread turns again ({name} was stuck)");
                    let _ = notifier.notify("STATUS=running");
                }
                match notifier.notify("WATCHDOG=1") {
                    Ok(()) => failing = false,
                    Err(e) if !failing => {
                        log::warn!("watchdog ping not sent: {e}");
                        failing = true;
                    }
                    Err(_) => {}
                }
            }
        }
        let mut stopped = stop.0.lock();
        if !*stopped {
            stop.1.wait_for(&mut stopped, every);
        }
        if *stopped {
            return;
        }
    }
}
