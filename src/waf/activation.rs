//! Rule activation: the rule-action registry check (every [`CHECK_EVERY`]) and the reload
//! of the web server when the installed rules change.
//!
//! Each [`Activation::tick`]:
//! 1. On the hosting-panel platform, deploys svc's rules to `waf.rules_file` when its content
//!    differs from the rules built into this binary (an upgrade or a first install).
//! 2. Reads `waf.rules_file` and `waf.overrides_file`. A read failure leaves the registry
//!    as it was (uncached: the next check tries again). When the content hash differs from
//!    the last build, the registry is rebuilt (content, not mtime, decides; rules appended
//!    since the last check are picked up).
//! 3. When the content hash differs from the hash of the last successful reload (kept in the
//!    store, key `waf.loaded_hash`, so a restart does not reload again), runs the reload
//!    command once. A failure raises `waf_status` and is retried with back-off
//!    ([`backoff`]: 1, 2, 4, ... up to 60 minutes); without a command, the change waits for
//!    the next web-server restart: one warning is logged and `waf_status` raises a WARNING
//!    finding until the web server runs the rules.
//!
//! Only the daemon runs this; `svc check` and other standalone runs never reload.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use jiff::Timestamp;
use parking_lot::{Condvar, Mutex};
use sha2::{Digest, Sha256};

use super::registry::{Registry, SHIPPED_RULES};
use super::service::WafService;
use crate::clock::SharedClock;
use crate::store::Store;

/// How often the registry is checked.
pub const CHECK_EVERY: Duration = Duration::from_secs(300);
/// Longest back-off between failed reloads.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);
const KEY: &str = "waf.loaded_hash";

/// Back-off after `failures` consecutive failed reloads.
pub fn backoff(failures: u32) -> Duration {
    let mins = 1u64 << failures.saturating_sub(1).min(6);
    Duration::from_secs(mins * 60).min(MAX_BACKOFF)
}

/// What one tick did (tests, logs).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TickOutcome {
    pub deployed: bool,
    pub rebuilt: bool,
    pub reloaded: Option<bool>,
    pub read_failed: bool,
}

pub struct Activation {
    svc: Arc<WafService>,
    store: Store,
    clock: SharedClock,
    panel: bool,
    built_hash: Option<String>,
    failures: u32,
    retry_at: Option<Timestamp>,
    warned_no_command: bool,
}

impl Activation {
    pub fn new(svc: Arc<WafService>, store: Store, clock: SharedClock, panel: bool) -> Self {
        Activation {
            svc,
            store,
            clock,
            panel,
            built_hash: None,
            failures: 0,
            retry_at: None,
            warned_no_command: false,
        }
    }

    /// One check (see the module documentation).
    pub fn tick(&mut self) -> TickOutcome {
        let mut out = TickOutcome::default();
        let cfg = self.svc.cfg.read().clone();
        let Some(rules_file) = cfg.rules_file.clone() else {
            return out;
        };
        if self.panel {
            let current = crate::fsutil::read_daemon_string(&rules_file).ok();
            if current.as_deref() != Some(SHIPPED_RULES) {
                match crate::fsutil::write_atomic(
                    &rules_file,
                    SHIPPED_RULES.as_bytes(),
                    0o644,
                    None,
                ) {
                    Ok(()) => out.deployed = true,
                    Err(e) => log::warn!(
                        "waf: cannot deploy svc's rules to {}: {e}",
                        crate::text::escape_path(&rules_file)
                    ),
                }
            }
        }
        let rules = match crate::fsutil::read_daemon_string(&rules_file) {
            Ok(t) => t,
            Err(e) => {
                log::warn!(
                    "waf: cannot read {}: {e}; the rule registry is left as it was",
                    crate::text::escape_path(&rules_file)
                );
                out.read_failed = true;
                return out;
            }
        };
        let overrides = match &cfg.overrides_file {
            Some(p) => match crate::fsutil::read_daemon_string(p) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => {
                    log::warn!("waf: cannot read {}: {e}", crate::text::escape_path(p));
                    out.read_failed = true;
                    return out;
                }
            },
            None => String::new(),
        };
        let hash = hex::encode(
            Sha256::new()
                .chain_update(&rules)
                .chain_update([0u8])
                .chain_update(&overrides)
                .finalize(),
        );
        if self.built_hash.as_deref() != Some(&hash) {
            let mut reg = Registry::default();
            reg.add_text(SHIPPED_RULES);
            reg.add_text(&rules);
            if reg.over_limit > 0 {
                log::warn!(
                    "waf: {} is over the rule parser's limits; {} parts were not read",
                    crate::text::escape_path(&rules_file),
                    reg.over_limit
                );
            }
            self.svc.registry.replace(reg);
            self.built_hash = Some(hash.clone());
            out.rebuilt = true;
        }
        let loaded = self
            .store
            .read(|c| crate::store::kv::get(c, KEY))
            .ok()
            .flatten();
        if loaded.as_deref() == Some(&hash) {
            super::detect::set_unloaded_without_command(false);
            return out;
        }
        if cfg.reload_command.is_empty() {
            super::detect::set_unloaded_without_command(true);
            if !self.warned_no_command {
                log::warn!("waf: the installed rules changed and waf.reload_command is not set; they load at the next web-server restart");
                self.warned_no_command = true;
            }
            return out;
        }
        let now = self.clock.now();
        if self.retry_at.is_some_and(|t| now < t) {
            return out;
        }
        let deadline = Duration::from_secs(cfg.reload_timeout_seconds);
        let disabled = self.svc.disabled().unwrap_or_default();
        let ok = super::rules::run_reload(
            &cfg.reload_command,
            deadline,
            disabled,
            &self.svc.reload,
            deadline + Duration::from_secs(5),
        )
        .is_ok_and(|o| o == super::rules::ApplyOutcome::Reloaded);
        out.reloaded = Some(ok);
        if ok {
            super::detect::set_unloaded_without_command(false);
            self.failures = 0;
            self.retry_at = None;
            let h = hash.clone();
            if let Err(e) = self.store.write(move |c| crate::store::kv::set(c, KEY, &h)) {
                log::warn!("waf: cannot record the reloaded rules: {e}");
            }
            log::info!("waf: the web server reloaded the changed rules");
        } else {
            self.failures += 1;
            let wait = backoff(self.failures);
            self.retry_at = now
                .checked_add(jiff::SignedDuration::try_from(wait).unwrap_or_default())
                .ok();
            log::warn!(
                "waf: reload after a rule change failed ({} in a row); retrying in {} min",
                self.failures,
                wait.as_secs() / 60
            );
        }
        out
    }

    /// Records that the web server runs the current files (after an apply that reloaded).
    pub fn note_loaded(store: &Store, cfg: &crate::config::waf::WafConfig) {
        let (Some(r), o) = (&cfg.rules_file, &cfg.overrides_file) else {
            return;
        };
        let Ok(rules) = crate::fsutil::read_daemon_string(r) else {
            return;
        };
        let overrides = o
            .as_ref()
            .and_then(|p| crate::fsutil::read_daemon_string(p).ok())
            .unwrap_or_default();
        let hash = hex::encode(
            Sha256::new()
                .chain_update(&rules)
                .chain_update([0u8])
                .chain_update(&overrides)
                .finalize(),
        );
        let _ = store.write(move |c| crate::store::kv::set(c, KEY, &hash));
    }
}

/// The activation thread: a tick at start, then every [`CHECK_EVERY`].
pub struct ActivationThread {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
    _running: Arc<AtomicBool>,
}

impl ActivationThread {
    pub fn start(mut a: Activation) -> std::io::Result<ActivationThread> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let running = Arc::new(AtomicBool::new(true));
        let s = stop.clone();
        let r = running.clone();
        let thread = std::thread::Builder::new()
            .name("waf-rules".into())
            .spawn(move || {
                loop {
                    a.tick();
                    let mut stopped = s.0.lock();
                    if !*stopped {
                        s.1.wait_for(&mut stopped, CHECK_EVERY);
                    }
                    if *stopped {
                        break;
                    }
                }
                r.store(false, Ordering::Release);
            })?;
        Ok(ActivationThread {
            stop,
            thread: Some(thread),
            _running: running,
        })
    }

    pub fn stop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ActivationThread {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_an_hour() {
        let m = |n| backoff(n).as_secs() / 60;
        assert_eq!([m(1), m(2), m(3), m(6), m(7), m(20)], [1, 2, 4, 32, 60, 60]);
    }
}
