//! The access-log collector: a [`Follower`] over the access logs with one
//! [`AccessDetector`] (an address probing two domains is one address) as its line handler,
//! on its own thread `access-log`, with the `access_log.file_source` row and the
//! `access_log` watcher row.
//!
//! Guarantees (beyond the shared tail's):
//! - [`AccessCollector::start`] resolves the patterns, loads the checkpoints, replays the
//!   open detection windows and attaches to every file before it returns.
//! - When a pattern has glob characters it is expanded again every [`RESCAN_EVERY`]; a
//!   newly matched file (a new domain's log) is followed from then on (from its start when
//!   small, see [`crate::watch::tail::NEW_FILE_FROM_START`]). Files that stop matching stay
//!   followed (absence is silent) until the collector restarts (reload).
//! - The watcher row carries the detector's counters (`unparsed_lines_total`,
//!   `requests_counted_total`, `verified_exempt_total`, `oracle_calls_total`,
//!   `addresses_tracked`, `addresses_evicted_total`, `files_refused_total`).
//! - [`AccessCollector::stop`] stops the thread at once, waits until what it submitted is
//!   committed, and removes the row, so a reload can start a new collector with the same
//!   names that resumes where this one stopped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::components::{Component, Components};
use crate::crawler::BotOracle;
use crate::findings::{Engine, Finding};
use crate::queue::{Registry, RowHandle};
use crate::store::Store;
pub use crate::watch::tail::StartError;
use crate::watch::tail::{file_source_row, Follower, LineHandler, Running};

use super::detect::AccessDetector;
use super::logs;
use super::parse::Layout;
use super::thresholds::{AccessThresholds, SharedThresholds};

/// Name of the queue row.
pub const ROW: &str = "access_log.file_source";
/// Name of the watcher row.
pub const COMPONENT: &str = "access_log";
/// Prefix of the checkpoint keys (`access:<path>`, `access-replay:<path>`, `access-fp:<path>`).
pub const KEY_PREFIX: &str = "access";
/// How often glob patterns are expanded again.
pub const RESCAN_EVERY: Duration = Duration::from_secs(60);
/// Paths named in the watcher row's detail at most.
const DETAIL_PATHS: usize = 8;

/// Published counters of the watcher row.
struct Published {
    unparsed: Arc<AtomicU64>,
    counted: Arc<AtomicU64>,
    exempt: Arc<AtomicU64>,
    oracle: Arc<AtomicU64>,
    tracked: Arc<AtomicU64>,
    evicted: Arc<AtomicU64>,
}

/// The line handler: the detector, publishing its counters on the watcher row.
pub struct AccessHandler {
    detector: AccessDetector,
    published: Option<Published>,
    /// Each followed file's layout, decided by its first line that shows one (at most
    /// [`logs::MAX_FILES`] files over the collector's life).
    layouts: Vec<Option<Layout>>,
    /// The entry of `layouts` of each file.
    index: HashMap<PathBuf, usize>,
    /// The entry of `layouts` whose lines come now.
    current: usize,
}

impl AccessHandler {
    /// A handler publishing on `component` (`None`: benchmarks, tests).
    pub fn new(detector: AccessDetector, component: Option<&Component>) -> AccessHandler {
        let published = component.map(|c| Published {
            unparsed: c.counter("unparsed_lines_total"),
            counted: c.counter("requests_counted_total"),
            exempt: c.counter("verified_exempt_total"),
            oracle: c.counter("oracle_calls_total"),
            tracked: c.counter("addresses_tracked"),
            evicted: c.counter("addresses_evicted_total"),
        });
        AccessHandler {
            detector,
            published,
            layouts: Vec::new(),
            index: HashMap::new(),
            current: usize::MAX,
        }
    }

    pub fn detector(&self) -> &AccessDetector {
        &self.detector
    }
}

impl AccessHandler {
    /// Parses and observes `line` in the layout of the current file (one stream of its own
    /// when no file was named).
    fn process(&mut self, line: &str, emit: &mut dyn FnMut(Finding)) {
        match self.layouts.get_mut(self.current) {
            Some(layout) => {
                self.detector.process_line_in(line, layout, emit);
            }
            None => {
                self.detector.process_line(line, emit);
            }
        }
    }
}

impl LineHandler for AccessHandler {
    fn line(&mut self, line: &str, emit: &mut dyn FnMut(Finding)) {
        self.process(line, emit);
    }

    fn replay(&mut self, line: &str) {
        self.process(line, &mut |_| {});
    }

    fn file(&mut self, path: &Path) {
        self.current = match self.index.get(path) {
            Some(&i) => i,
            None => {
                self.layouts.push(None);
                let i = self.layouts.len() - 1;
                self.index.insert(path.to_path_buf(), i);
                i
            }
        };
    }

    fn maintain(&mut self) {
        self.detector.maintain();
        if let Some(p) = &self.published {
            let s = self.detector.stats();
            p.unparsed.store(s.unparsed, Ordering::Relaxed);
            p.counted.store(s.counted, Ordering::Relaxed);
            p.exempt.store(s.verified_exempt, Ordering::Relaxed);
            p.oracle.store(s.oracle_calls, Ordering::Relaxed);
            p.tracked.store(s.addresses_tracked, Ordering::Relaxed);
            p.evicted.store(s.addresses_evicted, Ordering::Relaxed);
        }
    }
}

/// A running access-log collector.
pub struct AccessCollector {
    /// First field: dropped (the thread stopped and joined) before the row is removed.
    running: Running,
    thresholds: Arc<SharedThresholds>,
    files: usize,
    _row: RowHandle,
}

fn describe(paths: &[PathBuf]) -> String {
    let mut s = format!("{} file(s): ", paths.len());
    for (i, p) in paths.iter().take(DETAIL_PATHS).enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&crate::text::escape_path(p));
    }
    if paths.len() > DETAIL_PATHS {
        s.push_str(&format!(" (+{} more)", paths.len() - DETAIL_PATHS));
    }
    s
}

/// Expands `patterns` again and follows the files that match now and are not followed yet
/// (within [`logs::MAX_FILES`] over the collector's life; matches left out are counted in
/// `refused`). Returns how many files were added.
fn follow_new_files(
    f: &mut Follower<AccessHandler>,
    patterns: &[PathBuf],
    store: &Store,
    component: &Component,
    refused: &AtomicU64,
) -> usize {
    let now = logs::resolve(patterns);
    let before = f.paths().count();
    let mut left_out = now.refused;
    for p in &now.files {
        if f.paths().count() >= logs::MAX_FILES {
            // Files that stopped matching are still followed: the cap holds over the
            // collector's life.
            left_out += u64::from(!f.paths().any(|q| q == p));
            continue;
        }
        f.add_file(KEY_PREFIX, p, store);
    }
    refused.store(left_out, Ordering::Relaxed);
    let paths: Vec<PathBuf> = f.paths().map(|p| p.to_path_buf()).collect();
    let added = paths.len() - before;
    if added > 0 {
        log::info!("access log: following {added} new file(s) matched by logs.access");
        component.set_detail(describe(&paths));
    }
    added
}

impl AccessCollector {
    /// Starts following what `patterns` name (paths and glob patterns; see [`logs`]).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        patterns: &[PathBuf],
        thresholds: AccessThresholds,
        oracle: Arc<dyn BotOracle>,
        clock: SharedClock,
        engine: &Arc<Engine>,
        registry: &Arc<Registry>,
        components: &Components,
        store: &Store,
    ) -> Result<AccessCollector, StartError> {
        let resolved = logs::resolve(patterns);
        let health = file_source_row(clock.clone());
        let row = registry
            .register(ROW, health.clone())
            .map_err(|e| StartError::Row(ROW, e))?;
        let component = components.add(COMPONENT, "log_watcher");
        component.set_detail(describe(&resolved.files));
        let refused = component.counter("files_refused_total");
        refused.store(resolved.refused, Ordering::Relaxed);
        if resolved.refused > 0 {
            log::warn!(
                "logs.access: {} more files match; following the first {}",
                resolved.refused,
                logs::MAX_FILES
            );
        }
        let window = Duration::from_secs(thresholds.clamped().window_secs);
        let detector = AccessDetector::new(thresholds, clock.clone(), oracle);
        let shared = detector.shared_thresholds();
        let handler = AccessHandler::new(detector, Some(&component));
        let follower = Follower::new(
            "access log",
            KEY_PREFIX,
            &resolved.files,
            window,
            handler,
            store,
            engine.clone(),
            health,
            component.clone(),
            clock,
        )
        .map_err(|e| StartError::Io("access-log", e))?;
        let files = resolved.files.len();
        let patterns = patterns.to_vec();
        let rescan = if resolved.has_globs {
            RESCAN_EVERY
        } else {
            Duration::MAX
        };
        let store = store.clone();
        let running = Running::spawn("access-log", follower, move |f, stop| {
            f.run_with(stop, rescan, |f| {
                follow_new_files(f, &patterns, &store, &component, &refused);
            });
        })
        .map_err(|e| StartError::Io("access-log", e))?;
        Ok(AccessCollector {
            running,
            thresholds: shared,
            files,
            _row: row,
        })
    }

    /// Files followed at start.
    pub fn files(&self) -> usize {
        self.files
    }

    /// The running detector's thresholds, shared with a configuration reload.
    pub fn shared_thresholds(&self) -> Arc<SharedThresholds> {
        self.thresholds.clone()
    }

    /// Asks the thread to stop without waiting.
    pub fn request_stop(&self) {
        self.running.request_stop();
    }

    /// Stops the thread, waits (up to 5 s) until what it submitted is committed, and
    /// removes the row.
    pub fn stop(self) {
        self.running.stop();
    }
}

#[cfg(test)]
mod tests;
