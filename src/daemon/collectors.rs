//! The running collectors, restartable one by one by a configuration reload.
//!
//! The file watcher (with its analyzer) and the auth-log watcher run as two independent
//! [`Collectors`] sets, so a change of `[files]` restarts only the file watcher and a
//! change of `logs.auth` only the auth-log watcher. Thresholds are applied live without a
//! restart.
//!
//! Guarantees:
//! - The auth-log watcher is restarted only after the findings and checkpoints it submitted
//!   are committed, so the new watcher resumes from the last checkpoint: no line is read
//!   twice or skipped (its detector's open windows are rebuilt by the checkpoint replay).
//! - The quarantine "restored" list is shared across restarts.
//! - File events that were queued for the analyzer when the file watcher stops are not
//!   analysed (the stop is a shutdown drain, as at daemon exit); the new watcher sees
//!   every change from its start.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::clock::SharedClock;
use crate::components::Components;
use crate::config::Config;
use crate::crawler::BotOracle;
use crate::findings::Engine;
use crate::queue::Registry;
use crate::scan::quarantine::QuarantineControl;
use crate::store::Store;
use crate::watch::accesslog::AccessCollector;
use crate::watch::analyzer::Restored;
use crate::watch::authlog::AuthThresholds;
use crate::watch::{CollectorError, Collectors};

/// Component names the collectors register (removed when a collector is turned off).
const FILES_COMPONENT: &str = "files";
const AUTH_COMPONENT: &str = "auth_log";
const ACCESS_COMPONENT: &str = crate::watch::accesslog::COMPONENT;

/// How long a restart waits for the findings of the stopped auth-log watcher to commit.
const FLUSH_WAIT: Duration = Duration::from_secs(10);

/// The thresholds section of a configuration.
pub fn thresholds_of(cfg: &Config) -> AuthThresholds {
    let e = &cfg.engine;
    AuthThresholds {
        failures: e.auth_failures,
        window_secs: e.auth_window_seconds,
        max_tracked_addresses: e.auth_max_tracked_addresses,
        max_known_logins: e.auth_max_known_logins,
        new_address_mail: e.auth_new_address_mail,
    }
}

/// `cfg` with only the file watcher enabled.
fn files_only(cfg: &Config) -> Config {
    let mut c = cfg.clone();
    c.engine.auth_logs.clear();
    c
}

/// `cfg` with only the auth-log watcher enabled.
fn auth_only(cfg: &Config) -> Config {
    let mut c = cfg.clone();
    c.engine.watch_roots.clear();
    c
}

pub struct LiveCollectors {
    files: Mutex<Option<Collectors>>,
    auth: Mutex<Option<Collectors>>,
    /// The access-log collector (`logs.access`; `None` when no log is found).
    access: Mutex<Option<AccessCollector>>,
    /// Who answers the access-log collector's crawler-identity questions.
    oracle: Arc<dyn BotOracle>,
    restored: Arc<Restored>,
    clock: SharedClock,
    engine: Arc<Engine>,
    registry: Arc<Registry>,
    components: Arc<Components>,
    store: Store,
}

impl LiveCollectors {
    /// Starts the collectors as `cfg` asks; `oracle` verifies crawler identities for the
    /// access-log collector.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        cfg: &Config,
        oracle: Arc<dyn BotOracle>,
        clock: SharedClock,
        engine: &Arc<Engine>,
        registry: &Arc<Registry>,
        components: &Arc<Components>,
        store: &Store,
    ) -> Result<LiveCollectors, CollectorError> {
        let me = LiveCollectors {
            files: Mutex::new(None),
            auth: Mutex::new(None),
            access: Mutex::new(None),
            oracle,
            restored: Arc::new(Restored::load(store)),
            clock,
            engine: engine.clone(),
            registry: registry.clone(),
            components: components.clone(),
            store: store.clone(),
        };
        *me.files.lock() = Some(me.spawn(&files_only(cfg))?);
        *me.auth.lock() = Some(me.spawn(&auth_only(cfg))?);
        *me.access.lock() = me.spawn_access(cfg)?;
        Ok(me)
    }

    /// The access-log collector on `cfg`'s `logs.access` (detected when empty); `None` when
    /// there is no file to follow.
    fn spawn_access(&self, cfg: &Config) -> Result<Option<AccessCollector>, CollectorError> {
        let e = &cfg.engine;
        let patterns = crate::watch::accesslog::logs::patterns(&e.access_logs, &e.checks_root);
        if patterns.is_empty() {
            log::info!("access log: no web-server access log found (logs.access is empty); the collector is off");
            return Ok(None);
        }
        let c = AccessCollector::start(
            &patterns,
            e.access_thresholds.clone(),
            self.oracle.clone(),
            self.clock.clone(),
            &self.engine,
            &self.registry,
            &self.components,
            &self.store,
        )?;
        log::info!("access-log watcher on {} file(s)", c.files());
        Ok(Some(c))
    }

    /// Restarts the access-log collector with `cfg`'s `logs.access` (and thresholds). It
    /// resumes from each file's committed checkpoint.
    pub fn restart_access(&self, cfg: &Config) -> Result<(), CollectorError> {
        let mut slot = self.access.lock();
        if let Some(old) = slot.take() {
            old.stop();
        }
        if !self.engine.flush(FLUSH_WAIT) {
            log::warn!("access-log restart: findings still queued after {FLUSH_WAIT:?}; the new watcher may read some lines again");
        }
        self.components.remove(ACCESS_COMPONENT);
        *slot = self.spawn_access(cfg)?;
        Ok(())
    }

    /// Applies `cfg`'s `thresholds.http_*` to the running access-log detector.
    pub fn set_access_thresholds(&self, cfg: &Config) {
        if let Some(c) = self.access.lock().as_ref() {
            c.shared_thresholds()
                .set(cfg.engine.access_thresholds.clone());
        }
    }

    fn spawn(&self, cfg: &Config) -> Result<Collectors, CollectorError> {
        crate::watch::start_collectors(
            cfg,
            self.clock.clone(),
            &self.engine,
            &self.registry,
            &self.components,
            &self.store,
            self.restored.clone(),
            // Staged packages are opened with the mail module's unpacker and limits.
            Arc::new(crate::mail::archive::PackageUnpacker {
                limits: cfg.mail.archive,
            }),
            // .htaccess and .user.ini injections are cleaned as the fix cleans them.
            Arc::new(crate::remedy::clean::AutoClean {
                store: self.store.clone(),
                clock: self.clock.clone(),
            }),
        )
    }

    /// Files restored from quarantine (shared with the restore command).
    pub fn restored(&self) -> Arc<Restored> {
        self.restored.clone()
    }

    /// The quarantine commands' handles, on the file watcher's current roots; `None` only
    /// while a reload restarts the file watcher.
    pub fn quarantine_control(&self) -> Option<QuarantineControl> {
        self.files
            .lock()
            .as_ref()
            .map(|files| files.quarantine_control(self.store.clone(), self.clock.clone()))
    }

    /// Restarts the file watcher with `cfg`'s `[files]` and `auto_response` settings.
    pub fn restart_files(&self, cfg: &Config) -> Result<(), CollectorError> {
        let mut slot = self.files.lock();
        if let Some(old) = slot.take() {
            old.stop();
        }
        self.components.remove(FILES_COMPONENT);
        *slot = Some(self.spawn(&files_only(cfg))?);
        log::info!(
            "file watcher restarted on {} root(s)",
            cfg.engine.watch_roots.len()
        );
        Ok(())
    }

    /// Restarts the auth-log watcher with `cfg`'s `logs.auth` (and thresholds). It resumes
    /// from each file's committed checkpoint.
    pub fn restart_auth(&self, cfg: &Config) -> Result<(), CollectorError> {
        let mut slot = self.auth.lock();
        if let Some(old) = slot.take() {
            old.stop();
        }
        // The checkpoints the old watcher submitted must be in the store before the new
        // one reads them.
        if !self.engine.flush(FLUSH_WAIT) {
            log::warn!("auth-log restart: findings still queued after {FLUSH_WAIT:?}; the new watcher may read some lines again");
        }
        self.components.remove(AUTH_COMPONENT);
        *slot = Some(self.spawn(&auth_only(cfg))?);
        log::info!(
            "auth-log watcher restarted on {} file(s)",
            cfg.engine.auth_logs.len()
        );
        Ok(())
    }

    /// Applies `cfg`'s `[thresholds]` to the running auth-log detector.
    pub fn set_thresholds(&self, cfg: &Config) {
        if let Some(c) = self.auth.lock().as_ref() {
            if let Some(t) = &c.auth_thresholds {
                t.set(thresholds_of(cfg));
            }
        }
    }

    /// The thresholds the running detector was last given (`None` without auth logs).
    pub fn thresholds(&self) -> Option<AuthThresholds> {
        self.auth
            .lock()
            .as_ref()
            .and_then(|c| c.auth_thresholds.as_ref().map(|t| t.get()))
    }

    /// Stops the collectors (daemon shutdown).
    pub fn stop(&self) {
        if let Some(c) = self.access.lock().take() {
            c.stop();
        }
        if let Some(c) = self.files.lock().take() {
            c.stop();
        }
        if let Some(c) = self.auth.lock().take() {
            c.stop();
        }
    }
}
