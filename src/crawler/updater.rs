//! The published-range auto-updater (`reputation.bot_ranges`) and the refresh that
//! `svc update-bot-ranges` runs: fetch every feed, keep what fails, write the disk snapshot
//! atomically, apply it to the verifier, record the `svc_botranges_*` state.
//!
//! The updater runs every `interval_hours`; its first refresh is due `interval_hours` after
//! the disk snapshot was last written (at once when there is none). Settings are read at
//! start; changes need a restart.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;

use super::ranges::{self, RangeSet, Refresh, SnapshotError};
use super::verifier::Verifier;
use crate::net::https::Roots;

pub use crate::config::crawler::UpdaterSettings;

/// Fetches every feed and writes the disk snapshot when any feed was usable. Returns the
/// new set and what happened; `Err` only when the snapshot could not be written.
pub fn refresh_to_disk(
    state: &Path,
    settings: &UpdaterSettings,
    roots: &Roots,
    timeout: Duration,
    now_rfc3339: &str,
) -> Result<(RangeSet, Refresh), SnapshotError> {
    let (base, _) = RangeSet::load(state);
    let feeds = ranges::feed_list(&settings.urls);
    let (set, r) = ranges::refresh(&base, &feeds, roots, timeout, now_rfc3339);
    if !r.updated.is_empty() {
        set.save(state)
            .map_err(|e| SnapshotError::Io(ranges::snapshot_path(state), e))?;
    }
    Ok((set, r))
}

impl Verifier {
    /// Re-reads the disk snapshot (falling back to the embedded one) and applies it;
    /// `ok` records the outcome of the refresh that wrote it for the metrics.
    pub fn apply_snapshot(&self, state: &Path, ok: Option<bool>) -> Result<usize, SnapshotError> {
        let (set, err) = RangeSet::load(state);
        let n = set.crawlers.values().map(Vec::len).sum();
        self.set_ranges(set);
        if let Some(ok) = ok {
            self.note_refresh(ok);
        }
        match err {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    /// Records one refresh outcome.
    pub fn note_refresh(&self, ok: bool) {
        let s = &self.range_status;
        s.last_ok.store(i64::from(ok), Ordering::Relaxed);
        if ok {
            s.last_success.store(self.now_secs(), Ordering::Relaxed);
        } else {
            s.failures.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The running updater thread.
pub struct Updater {
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Updater {
    pub fn start(
        verifier: Arc<Verifier>,
        settings: UpdaterSettings,
        state: PathBuf,
        roots: Roots,
        timeout: Duration,
    ) -> std::io::Result<Updater> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let every = Duration::from_secs(settings.interval_hours.max(1) * 3600);
        let age = std::fs::metadata(ranges::snapshot_path(&state))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok());
        let first = match age {
            Some(a) if a < every => every - a,
            _ => Duration::ZERO,
        };
        let thread = std::thread::Builder::new()
            .name("bot-ranges".into())
            .spawn(move || {
                let mut due = Instant::now() + first;
                while !flag.load(Ordering::Relaxed) {
                    if Instant::now() < due {
                        std::thread::sleep(Duration::from_millis(250));
                        continue;
                    }
                    let now = jiff::Timestamp::now().to_string();
                    match refresh_to_disk(&state, &settings, &roots, timeout, &now) {
                        Ok((set, r)) => {
                            verifier.set_ranges(set);
                            verifier.note_refresh(r.ok());
                            for (name, why) in &r.failed {
                                log::warn!("bot ranges: feed {name} failed ({why}); its previous list stays");
                            }
                        }
                        Err(e) => {
                            verifier.note_refresh(false);
                            log::warn!("bot ranges: {e}");
                        }
                    }
                    due = Instant::now() + every;
                }
            })?;
        Ok(Updater {
            stop,
            thread: Mutex::new(Some(thread)),
        })
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}
