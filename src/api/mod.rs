//! The API: router, authentication and scopes, CSRF and origin checks, routes.
//!
//! Order of checks for each request: find the route (an unknown path is 404 for every
//! caller, before any credential is read), authenticate (Bearer token, else the session
//! cookie; public routes such as the login form read none), method (405 with `Allow`), scope
//! (403), CSRF and origin for cookie-authenticated state-changing requests (403), then the
//! handler. Every non-2xx answer is JSON with an `error` message.

mod accounts;
pub mod audit;
pub mod auth;
mod automation;
mod backups;
pub mod body;
pub mod capabilities;
mod challenge;
pub mod console;
pub mod csv;
mod data;
pub mod daterange;
mod events;
mod findings;
mod firewall;
mod fixes;
mod fleet;
mod history;
mod incident;
mod mail;
mod mail_accounts;
pub mod metrics;
mod pages;
pub mod params;
mod perf;
mod prefs;
mod remedy;
mod router;
mod scan_jobs;
mod session_routes;
pub mod sessions;
mod settings;
mod status;
pub mod suppressions;
mod threat;
mod undo;
mod waf;

use std::sync::{Arc, OnceLock};

use jiff::Timestamp;

use crate::checks::jobs::ScanJobs;
use crate::clock::SharedClock;
use crate::config::Config;
use crate::findings::Engine;
use crate::http::ServerStats;
use crate::queue::Registry;
use crate::store::Store;

/// Subsystem handles the routes read.
pub struct Services {
    pub registry: Arc<Registry>,
    pub engine: Arc<Engine>,
    pub jobs: Arc<ScanJobs>,
    /// Component rows (watchers) reported by collectors.
    pub components: Arc<crate::components::Components>,
    /// Files restored from quarantine, trusted by the analyzer.
    pub restored: Arc<crate::watch::analyzer::Restored>,
    pub incidents: Arc<crate::incidents::Incidents>,
    /// GeoIP databases (`[geoip]`), opened once at start; `None` when not configured.
    pub geoip: Option<Arc<crate::geoip::GeoIp>>,
    /// Suppression rules (also installed in the engine).
    pub suppressions: Arc<crate::findings::suppress::Suppressions>,
    /// The live event stream (`/api/v1/events`).
    pub events: crate::events::EventBus,
    /// Alerts (active while a notifier is configured).
    pub alerts: Arc<crate::alerts::Alerts>,
    /// The configuration in effect (changed by a reload; `App::cfg` is the start-up one).
    pub config: Arc<crate::config::Live>,
    /// The firewall engine, or why it is absent.
    pub firewall: crate::firewall::Handle,
    /// The mail antivirus (spool watcher, scanners, mail quarantine).
    pub mail: Arc<crate::mail::MailAv>,
    /// The WAF integration (log collector, escalation exclusions, rule registry).
    pub waf: Arc<crate::waf::service::WafService>,
    /// Threat intelligence: attack database, verdicts, automatic blocks, undo.
    pub threat: Arc<crate::threat::Threat>,
    /// The proof-of-work challenge while `challenge.enabled`.
    pub challenge: Option<Arc<crate::challenge::Challenge>>,
    /// Verified crawlers (`crawler::Verifier`).
    pub crawler: Arc<crate::crawler::Verifier>,
    /// CMS verification (`cms_verification` in the status).
    pub cms: Arc<crate::cms::CmsTask>,
    /// Fleet mode (`[fleet]`): the CrowdSec LAPI link; `None` when off.
    pub fleet: Option<Arc<crate::fleet::Fleet>>,
    /// Fixes of findings (`/api/v1/fix` and its family).
    pub fixer: Arc<crate::remedy::Fixer>,
    /// The file quarantine's handles as they are now (restore and bulk delete).
    pub quarantine: crate::remedy::QuarantineSource,
}

pub use router::{Access, Route, ROUTES};

/// What the settings routes ask of the daemon.
pub struct DaemonControl {
    /// Re-reads and applies the configuration; answers as `svc reload` does.
    pub reload: Box<dyn Fn() -> serde_json::Value + Send + Sync>,
    /// Stops the daemon and starts it again in the same process (exec).
    pub restart: Box<dyn Fn() + Send + Sync>,
}

/// Facts about this daemon process, fixed at start (binary hash filled in once computed).
pub struct Runtime {
    pub version: &'static str,
    pub started_at: Timestamp,
    pub started_mono: i64,
    pub started_at_token: String,
    pub binary_hash: OnceLock<String>,
    pub pid: u32,
    /// Why this process runs on the last configuration that started (a restart into the
    /// configuration on disk failed): a fault until the next start.
    pub start_fallback: Option<String>,
}

/// Everything the routes read. Built once by the daemon; handles only.
pub struct App {
    pub cfg: Arc<Config>,
    pub clock: SharedClock,
    pub store: Store,
    pub tokens: Arc<auth::Tokens>,
    pub limiter: auth::FailureLimiter,
    pub sessions: sessions::Sessions,
    /// Shared with the daemon's control-command table, which records the CLI's writes.
    pub audit: Arc<audit::AuditLog>,
    /// Rate limiter of log lines clients cause (one per kind and address a minute).
    pub client_log: crate::lograte::LogLimiter,
    pub metrics: metrics::HttpMetrics,
    /// JSON bodies refused by [`body::parse`], by reason.
    pub body_refusals: body::Refusals,
    pub runtime: Runtime,
    pub server: OnceLock<Arc<ServerStats>>,
    /// Reload and restart, set by the daemon once its reloader exists (settings routes).
    pub control: OnceLock<DaemonControl>,
    /// Modes of the automatic responses as last recorded (`status.automation`).
    pub automation: automation::Tracker,
    pub services: Services,
    /// Addresses in `blocked_ips`, loaded at start and kept by whoever blocks or unblocks.
    pub blocklist_size: std::sync::atomic::AtomicU64,
}

impl App {
    pub fn new(cfg: Arc<Config>, clock: SharedClock, store: Store, services: Services) -> App {
        let w = &cfg.webui;
        // Read once at start; health reads never touch the store.
        let blocked: u64 = store
            .read(crate::store::firewall::blocked_count)
            .unwrap_or(0);
        let tokens = Arc::new(auth::Tokens::new(&cfg.effective_tokens(), &w.metrics_token));
        let limiter = auth::FailureLimiter::new(w.limits.auth_failures_per_minute, clock.clone());
        let sessions = sessions::Sessions::new(
            store.clone(),
            clock.clone(),
            std::time::Duration::from_secs(w.session_idle_minutes * 60),
            std::time::Duration::from_secs(w.session_max_hours * 3600),
        );
        let runtime = Runtime {
            version: env!("CARGO_PKG_VERSION"),
            started_at: clock.now(),
            started_mono: clock.monotonic_nanos(),
            started_at_token: crate::ids::random_hex(12),
            binary_hash: OnceLock::new(),
            pid: std::process::id(),
            start_fallback: None,
        };
        let audit = Arc::new(audit::AuditLog::start(
            store.clone(),
            clock.clone(),
            &services.registry,
            w.audit_max_entries,
        ));
        App {
            audit,
            client_log: crate::lograte::LogLimiter::per_minute(clock.clone()),
            cfg,
            clock,
            store,
            tokens,
            limiter,
            sessions,
            metrics: metrics::HttpMetrics::default(),
            body_refusals: body::Refusals::default(),
            runtime,
            server: OnceLock::new(),
            control: OnceLock::new(),
            automation: automation::Tracker::default(),
            services,
            blocklist_size: std::sync::atomic::AtomicU64::new(blocked),
        }
    }

    /// Seconds since start.
    pub fn uptime_seconds(&self) -> u64 {
        let ns = self
            .clock
            .monotonic_nanos()
            .saturating_sub(self.runtime.started_mono);
        (ns.max(0) / 1_000_000_000) as u64
    }

    /// The status snapshot, from memory only.
    pub fn status_snapshot(&self) -> serde_json::Value {
        serde_json::to_value(status::snapshot(self))
            .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }))
    }
}
