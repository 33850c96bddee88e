//! The configuration in effect, and which keys a reload cannot apply.
//!
//! Guarantees:
//! - [`Live::current`] is the last configuration a reload accepted (or the start-up one): a
//!   reader gets one whole configuration, never a mix of two.
//! - Keys in [`RESTART_KEYS`] are read once at start. A reload that changes one applies
//!   everything else, names the key in its answer and in [`Live::restart_required`], and the
//!   running daemon keeps the start-up value until it restarts.
//! - Reads take a short read lock only; nothing here touches a file.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use super::Config;

/// A key (or group of keys) that takes effect only at the next start.
pub struct RestartKey {
    /// Dotted name as `svc reload` reports it (`.*` for a whole table).
    pub key: &'static str,
    /// The value's comparable form. Never shown to anyone (it may hold a path, never a
    /// secret: no restart key is a credential).
    pub value: fn(&Config) -> String,
}

/// Keys read once at start (listener, state directory, TLS pair, server limits, session
/// deadlines, check schedule and layout, GeoIP databases, firewall settings).
pub static RESTART_KEYS: &[RestartKey] = &[
    RestartKey {
        key: "reputation.bot_ranges.*",
        value: |c| format!("{:?}", c.crawler.bot_ranges),
    },
    RestartKey {
        key: "logs.waf",
        value: |c| format!("{:?}", c.engine.waf_logs),
    },
    RestartKey {
        key: "waf.enabled",
        value: |c| c.waf.enabled.to_string(),
    },
    RestartKey {
        key: "state_path",
        value: |c| c.state_path.display().to_string(),
    },
    RestartKey {
        key: "webui.listen",
        value: |c| c.webui.listen.to_string(),
    },
    RestartKey {
        key: "webui.tls_cert",
        value: |c| c.webui.tls_cert.clone(),
    },
    RestartKey {
        key: "webui.tls_key",
        value: |c| c.webui.tls_key.clone(),
    },
    RestartKey {
        key: "webui.limits.*",
        value: |c| format!("{:?}", c.webui.limits),
    },
    RestartKey {
        key: "webui.session_idle_minutes",
        value: |c| c.webui.session_idle_minutes.to_string(),
    },
    RestartKey {
        key: "webui.session_max_hours",
        value: |c| c.webui.session_max_hours.to_string(),
    },
    RestartKey {
        key: "checks.critical_interval_min",
        value: |c| c.engine.critical_interval_min.to_string(),
    },
    RestartKey {
        key: "checks.deep_interval_min",
        value: |c| c.engine.deep_interval_min.to_string(),
    },
    RestartKey {
        key: "logs.mail",
        value: |c| format!("{:?}", c.engine.mail_logs),
    },
    RestartKey {
        key: "thresholds.mail_per_account_hourly",
        value: |c| c.engine.mail_per_account_hourly.to_string(),
    },
    RestartKey {
        key: "thresholds.mail_auth_failures",
        value: |c| c.engine.mail_auth_failures.to_string(),
    },
    RestartKey {
        key: "thresholds.mail_queue_size",
        value: |c| c.engine.mail_queue_size.to_string(),
    },
    RestartKey {
        key: "checks.root",
        value: |c| c.engine.checks_root.display().to_string(),
    },
    RestartKey {
        key: "checks.web_roots",
        value: |c| format!("{:?}", c.engine.web_roots),
    },
    RestartKey {
        key: "geoip.*",
        value: |c| format!("{:?}", c.geoip),
    },
    // The firewall engine reads its settings at start; live changes go through the
    // rollback timer (`svc firewall` / `/api/v1/settings/firewall/tentative-apply`).
    RestartKey {
        key: "firewall.*",
        value: |c| format!("{:?}", c.firewall),
    },
    RestartKey {
        key: "challenge.enabled",
        value: |c| c.challenge.enabled.to_string(),
    },
    RestartKey {
        key: "challenge.listen",
        value: |c| c.challenge.listen.to_string(),
    },
    RestartKey {
        key: "challenge.tls_cert",
        value: |c| c.challenge.tls_cert.clone(),
    },
    RestartKey {
        key: "challenge.tls_key",
        value: |c| c.challenge.tls_key.clone(),
    },
    RestartKey {
        key: "auto_response.dry_run",
        value: |c| c.engine.auto_dry_run.to_string(),
    },
    // Abuse reporting: destinations, spool and senders are set up at start.
    RestartKey {
        key: "reputation.report",
        value: |c| format!("{:?}", c.reputation.report),
    },
];

/// Restart keys whose value differs between `running` (what the process started with) and
/// `next`, in table order.
pub fn restart_required(running: &Config, next: &Config) -> Vec<&'static str> {
    RESTART_KEYS
        .iter()
        .filter(|k| (k.value)(running) != (k.value)(next))
        .map(|k| k.key)
        .collect()
}

/// The state directory a configuration names, read leniently: `svc reload` must reach the
/// daemon to report errors even when the new configuration is invalid. Files that do not
/// parse are skipped; `None` when no file names an absolute `state_path`.
pub fn state_path_hint(main: &std::path::Path) -> Option<std::path::PathBuf> {
    let mut files = vec![main.to_path_buf()];
    files.extend(super::dropins(main));
    let mut found = None;
    for f in files {
        if let Ok(t) = super::parse_file(&f) {
            if let Some(toml::Value::String(p)) = t.get("state_path") {
                if p.starts_with('/') {
                    found = Some(std::path::PathBuf::from(p));
                }
            }
        }
    }
    found
}

/// The configuration in effect, swapped as a whole by a reload.
pub struct Live {
    started: Arc<Config>,
    current: RwLock<Arc<Config>>,
    restart_required: RwLock<Vec<&'static str>>,
    reloads: AtomicU64,
    refused: AtomicU64,
}

impl Live {
    pub fn new(started: Arc<Config>) -> Live {
        Live {
            current: RwLock::new(started.clone()),
            started,
            restart_required: RwLock::new(Vec::new()),
            reloads: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// The configuration the process started with (restart keys are in effect from it).
    pub fn started(&self) -> &Arc<Config> {
        &self.started
    }

    /// The last accepted configuration.
    pub fn current(&self) -> Arc<Config> {
        self.current.read().clone()
    }

    /// SHA-256 of the last accepted configuration (status `config_hash`).
    pub fn hash(&self) -> String {
        self.current.read().hash.clone()
    }

    /// Restart keys the last accepted configuration changed (empty when none).
    pub fn restart_required(&self) -> Vec<&'static str> {
        self.restart_required.read().clone()
    }

    /// Records an accepted reload.
    pub fn accept(&self, next: Arc<Config>) {
        let pending = restart_required(&self.started, &next);
        *self.current.write() = next;
        *self.restart_required.write() = pending;
        self.reloads.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a refused reload (invalid configuration, or one that could not be applied).
    pub fn refuse(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// (accepted, refused) reloads since start.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.reloads.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{from_table, parse_str};

    fn cfg(text: &str) -> Config {
        from_table(&parse_str(text).unwrap(), vec![]).unwrap()
    }

    #[test]
    fn restart_keys_are_reported_against_the_start_up_configuration() {
        let a = Arc::new(cfg("[webui]\nlisten = \"127.0.0.1:1\"\n"));
        let live = Live::new(a.clone());
        assert_eq!(live.hash(), a.hash);
        let b = Arc::new(cfg(
            "[webui]\nlisten = \"127.0.0.1:2\"\n[webui.limits]\nmax_headers = 32\n[thresholds]\nauth_failures = 9\n",
        ));
        live.accept(b.clone());
        assert_eq!(live.restart_required(), ["webui.listen", "webui.limits.*"]);
        assert_eq!(live.hash(), b.hash);
        // Going back to the start-up value clears it: the running daemon has that value.
        live.accept(Arc::new(cfg(
            "[thresholds]\nauth_failures = 9\n[webui]\nlisten = \"127.0.0.1:1\"\n",
        )));
        assert!(live.restart_required().is_empty());
        live.refuse();
        assert_eq!(live.counts(), (2, 1));
    }
}
