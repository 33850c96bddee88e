//! [`WafService`]: the running WAF integration as the daemon and the routes see it: the
//! log collector, the escalation exclusions, the rule registry, the counters and the
//! `[waf]` settings in effect.
//!
//! Guarantees:
//! - Escalation exclusions are stored first (`waf_escalation_off`), then applied to the
//!   running escalator; they work whether or not rule management is configured.
//! - [`WafService::reconfigure`] applies `[waf]` live: escalation thresholds, retention,
//!   the reload settings, and the registry rebuilt from `waf.rules_file`. `logs.waf` and
//!   `waf.enabled` take effect at the next start.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use super::collector::{Counters, EscalateHook, Shared, WafCollector};
use super::escalate::{Exclusions, Thresholds};
use super::event::{Action, WafSink};
use super::parse::RuleActions;
use super::registry::{Registry, SHIPPED_RULES};
use crate::clock::SharedClock;
use crate::components::Components;
use crate::config::waf::WafConfig;
use crate::findings::Engine;
use crate::queue::Registry as Rows;
use crate::store::{Store, StoreError};

/// The registry, swapped whole on a rebuild.
#[derive(Default)]
pub struct LiveRegistry(RwLock<Arc<Registry>>);

impl RuleActions for LiveRegistry {
    fn action(&self, rule_id: u32) -> Option<Action> {
        self.0.read().action(rule_id)
    }
}

impl LiveRegistry {
    pub fn current(&self) -> Arc<Registry> {
        self.0.read().clone()
    }

    pub fn replace(&self, r: Registry) {
        *self.0.write() = Arc::new(r);
    }
}

/// Builds the registry from the shipped rules and `waf.rules_file` (when readable).
pub fn build_registry(cfg: &WafConfig) -> Registry {
    let mut r = Registry::default();
    r.add_text(SHIPPED_RULES);
    if let Some(p) = &cfg.rules_file {
        if let Ok(text) = crate::fsutil::read_daemon_string(p) {
            r.add_text(&text);
        }
    }
    r
}

pub struct WafService {
    pub cfg: RwLock<WafConfig>,
    pub exclusions: Arc<Exclusions>,
    pub counters: Arc<Counters>,
    pub registry: Arc<LiveRegistry>,
    thresholds: Arc<Mutex<Thresholds>>,
    retention: Arc<Mutex<(Duration, u64)>>,
    collector: Mutex<Option<WafCollector>>,
    /// The files the collector follows.
    pub paths: Vec<PathBuf>,
    /// The last reload of the web server (rule management).
    pub reload: Arc<Mutex<super::rules::ReloadState>>,
    /// One apply at a time.
    applying: Mutex<()>,
    activation: Mutex<Option<super::activation::ActivationThread>>,
    store: Store,
    clock: SharedClock,
}

/// Why the WAF service did not start.
#[derive(Debug)]
pub enum WafStartError {
    /// The escalation exclusions could not be read.
    Exclusions(StoreError),
    Collector(super::collector::StartError),
    /// The rule-activation thread could not be started.
    Activation(std::io::Error),
}

impl std::fmt::Display for WafStartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WafStartError::Exclusions(e) => {
                write!(f, "loading WAF escalation exclusions: {e}")
            }
            WafStartError::Collector(e) => write!(f, "{e}"),
            WafStartError::Activation(e) => write!(f, "waf-rules thread: {e}"),
        }
    }
}

impl std::error::Error for WafStartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WafStartError::Exclusions(e) => Some(e),
            WafStartError::Collector(e) => Some(e),
            WafStartError::Activation(e) => Some(e),
        }
    }
}

impl WafService {
    /// Loads the exclusions and, when `waf.enabled`, starts the log collector on `paths`.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        cfg: &WafConfig,
        paths: Vec<PathBuf>,
        hook: Option<EscalateHook>,
        sink: Option<Arc<dyn WafSink>>,
        country: Option<Arc<dyn Fn(std::net::IpAddr) -> Option<String> + Send + Sync>>,
        clock: SharedClock,
        engine: &Arc<Engine>,
        rows: &Arc<Rows>,
        components: &Components,
        store: &Store,
    ) -> Result<Arc<WafService>, WafStartError> {
        let off = store
            .read(crate::store::waf::escalation_off)
            .map_err(WafStartError::Exclusions)?;
        super::detect::set_stale_days(cfg.rules_stale_days);
        let registry = Arc::new(LiveRegistry(RwLock::new(Arc::new(build_registry(cfg)))));
        let svc = WafService {
            cfg: RwLock::new(cfg.clone()),
            exclusions: Exclusions::new(off),
            counters: Arc::new(Counters::default()),
            registry,
            thresholds: Arc::new(Mutex::new(Thresholds::of(cfg))),
            retention: Arc::new(Mutex::new(retention_of(cfg))),
            collector: Mutex::new(None),
            paths: if cfg.enabled { paths } else { Vec::new() },
            reload: Arc::new(Mutex::new(super::rules::ReloadState::default())),
            applying: Mutex::new(()),
            activation: Mutex::new(None),
            store: store.clone(),
            clock: clock.clone(),
        };
        if cfg.enabled && !svc.paths.is_empty() {
            let shared = Shared {
                exclusions: svc.exclusions.clone(),
                thresholds: svc.thresholds.clone(),
                counters: svc.counters.clone(),
                actions: svc.registry.clone(),
                hook,
                sink,
                country,
                retention: svc.retention.clone(),
            };
            let c = WafCollector::start(&svc.paths, shared, clock, engine, rows, components, store)
                .map_err(WafStartError::Collector)?;
            *svc.collector.lock() = Some(c);
            log::info!("WAF log collector following {} file(s)", svc.paths.len());
        }
        let svc = Arc::new(svc);
        {
            let engine = engine.clone();
            super::detect::set_failure_hook(Box::new(move |f| {
                engine.submit(f);
            }));
        }
        if cfg.enabled {
            let a = super::activation::Activation::new(
                svc.clone(),
                store.clone(),
                svc.clock.clone(),
                super::detect::panel(std::path::Path::new("/")),
            );
            let t =
                super::activation::ActivationThread::start(a).map_err(WafStartError::Activation)?;
            *svc.activation.lock() = Some(t);
        }
        Ok(svc)
    }

    /// Applies `[waf]` (see the module documentation).
    pub fn reconfigure(&self, cfg: &WafConfig) {
        super::detect::set_stale_days(cfg.rules_stale_days);
        *self.thresholds.lock() = Thresholds::of(cfg);
        *self.retention.lock() = retention_of(cfg);
        self.registry.replace(build_registry(cfg));
        *self.cfg.write() = cfg.clone();
    }

    /// Excludes `rule_id` from escalation (`off`) or turns it back on; returns whether the
    /// stored set changed.
    pub fn set_escalation(&self, rule_id: u32, off: bool, by: &str) -> Result<bool, StoreError> {
        let now = self.clock.now().as_microsecond();
        let by = by.to_string();
        let changed = self
            .store
            .write(move |c| crate::store::waf::set_escalation(c, rule_id, off, now, &by))?;
        self.exclusions.set(rule_id, off);
        Ok(changed)
    }

    /// The stored set of disabled rules.
    pub fn disabled(&self) -> Result<BTreeSet<u32>, StoreError> {
        Ok(self
            .store
            .read(crate::store::waf::disabled)?
            .into_iter()
            .collect())
    }

    /// Whether `id` is a loaded rule: one of svc's shipped rules or a rule of
    /// `waf.rules_file`.
    pub fn is_loaded_rule(&self, id: u32) -> bool {
        super::registry::shipped().iter().any(|r| r.id == id)
            || self.registry.current().action(id).is_some()
    }

    /// Applies the whole set of disabled rules (see [`super::rules::apply`]).
    pub fn apply(
        &self,
        disabled: &BTreeSet<u32>,
        answer_wait: Duration,
    ) -> Result<super::rules::ApplyOutcome, super::rules::ApplyError> {
        let _one = self.applying.lock();
        let cfg = self.cfg.read().clone();
        let store = self.store.clone();
        let out = super::rules::apply(
            &cfg,
            disabled,
            |id| self.is_loaded_rule(id),
            |set| {
                let ids: Vec<u32> = set.iter().copied().collect();
                store.write(move |c| crate::store::waf::set_disabled(c, &ids))
            },
            &self.reload,
            answer_wait,
        );
        if matches!(out, Ok(super::rules::ApplyOutcome::Reloaded)) {
            super::activation::Activation::note_loaded(&self.store, &cfg);
        }
        out
    }

    pub fn collector_running(&self) -> bool {
        self.collector.lock().is_some()
    }

    /// Stops the collector and the activation thread (daemon shutdown).
    pub fn stop(&self) {
        if let Some(mut t) = self.activation.lock().take() {
            t.stop();
        }
        if let Some(c) = self.collector.lock().take() {
            c.stop();
        }
    }
}

fn retention_of(cfg: &WafConfig) -> (Duration, u64) {
    (
        Duration::from_secs(cfg.event_retention_days * 86_400),
        cfg.max_events,
    )
}
