//! Thread heartbeats: each long-lived subsystem thread whose loop wakes at least every
//! second (findings dispatcher, store writer, incident writer, file-event forwarder, scan
//! scheduler, HTTPS front) holds a [`Beat`] and calls [`Beat::beat`] once per turn. The
//! daemon's watchdog supervisor (`daemon::watchdog`) reads [`Heartbeats::stalest`] and stops
//! pinging systemd while a thread has not beaten within the watchdog interval, so a wedged
//! subsystem gets the daemon restarted. A beat is one atomic store; time comes from the
//! thread's injected [`SharedClock`]. A dropped [`Beat`] (its thread ended) is forgotten.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use crate::clock::SharedClock;

struct Entry {
    name: &'static str,
    clock: SharedClock,
    /// Monotonic nanoseconds (of `clock`) of the last beat.
    last: AtomicI64,
}

impl Entry {
    fn age(&self) -> Duration {
        let nanos = self
            .clock
            .monotonic_nanos()
            .saturating_sub(self.last.load(Ordering::Relaxed));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(0))
    }
}

/// The threads that beat, by name.
#[derive(Default)]
pub struct Heartbeats {
    entries: Mutex<Vec<Weak<Entry>>>,
}

/// A registered thread's handle; its loop calls [`Beat::beat`] once per turn.
pub struct Beat(Arc<Entry>);

impl Heartbeats {
    /// The process's registry, the one [`Beat::register`] adds to.
    pub fn global() -> &'static Heartbeats {
        static GLOBAL: OnceLock<Heartbeats> = OnceLock::new();
        GLOBAL.get_or_init(Heartbeats::default)
    }

    /// Registers the thread `name`, beating now.
    pub fn register(&self, name: &'static str, clock: SharedClock) -> Beat {
        let last = AtomicI64::new(clock.monotonic_nanos());
        let entry = Arc::new(Entry { name, clock, last });
        let mut entries = self.entries.lock();
        entries.retain(|w| w.strong_count() > 0);
        entries.push(Arc::downgrade(&entry));
        Beat(entry)
    }

    /// The live thread that beat longest ago, with the time since its beat.
    pub fn stalest(&self) -> Option<(&'static str, Duration)> {
        self.entries
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .map(|e| (e.name, e.age()))
            .max_by_key(|(_, age)| *age)
    }

    /// Whether a live thread named `name` is registered (it has entered its loop).
    pub fn has(&self, name: &str) -> bool {
        self.entries
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .any(|e| e.name == name)
    }
}

impl Beat {
    /// Registers the calling thread's loop as `name` in [`Heartbeats::global`].
    pub fn register(name: &'static str, clock: SharedClock) -> Beat {
        Heartbeats::global().register(name, clock)
    }

    /// The thread is alive and turning.
    pub fn beat(&self) {
        #[cfg(debug_assertions)]
        test_wedge::hold(self.0.name);
        let now = self.0.clock.monotonic_nanos();
        self.0.last.store(now, Ordering::Relaxed);
    }
}

/// Debug builds only (integration tests run them; compiled out of release builds): with
/// `SVC_TEST_WEDGE=<file>` in the daemon's environment, a thread whose name is the file's
/// content stops in its next beat until the file names another thread or is removed, so a
/// test can wedge a real subsystem thread in its own loop (decision 329).
#[cfg(debug_assertions)]
mod test_wedge {
    use std::path::PathBuf;
    use std::sync::OnceLock;

    fn file() -> Option<&'static PathBuf> {
        static FILE: OnceLock<Option<PathBuf>> = OnceLock::new();
        FILE.get_or_init(|| std::env::var_os("SVC_TEST_WEDGE").map(PathBuf::from))
            .as_ref()
    }

    fn named(path: &std::path::Path, name: &str) -> bool {
        crate::fsutil::read_daemon_string(path).is_ok_and(|t| t.trim() == name)
    }

    pub(super) fn hold(name: &str) {
        let Some(path) = file() else { return };
        if !named(path, name) {
            return;
        }
        log::warn!("SVC_TEST_WEDGE: thread {name} wedged");
        while named(path, name) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        log::warn!("SVC_TEST_WEDGE: thread {name} released");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn the_stalest_thread_is_the_one_that_beat_longest_ago() {
        let clock = ManualClock::at_epoch_2026();
        let shared: SharedClock = clock.clone();
        let hb = Heartbeats::default();
        assert!(hb.stalest().is_none());
        let a = hb.register("a", shared.clone());
        clock.advance(Duration::from_secs(2));
        let b = hb.register("b", shared.clone());
        assert_eq!(hb.stalest(), Some(("a", Duration::from_secs(2))));
        clock.advance(Duration::from_secs(1));
        a.beat();
        assert_eq!(hb.stalest(), Some(("b", Duration::from_secs(1))));
        assert!(hb.has("a") && hb.has("b") && !hb.has("c"));
        drop(b);
        // A thread that ended is no longer watched.
        assert!(!hb.has("b"));
        assert_eq!(hb.stalest(), Some(("a", Duration::ZERO)));
    }
}
