//! Configuration reload: `svc reload` (control socket) and SIGHUP.
//!
//! A reload re-reads the main file and its `conf.d/` drop-ins and validates them as a whole.
//! An invalid configuration is refused: nothing changes, and the answer carries every error
//! exactly as `svc validate` prints it. A valid one is compared section by section with the
//! configuration in effect; each changed section in [`SECTIONS`] is handed to the subsystem
//! that owns it, which applies it live. Keys that are read once at start
//! (the restart class of [`crate::config::keys::KEYS`]) are named in the answer and wait for a restart.
//!
//! Guarantees:
//! - All or nothing: when a section cannot be applied (a file watcher that cannot start),
//!   the sections applied before it, and it, are applied again with the configuration in
//!   effect, the answer is an error, and the configuration in effect does not change.
//! - One reload at a time (a second waits for the first).
//! - Route handlers take no lock of the reload: live values sit in the handles that own
//!   them (tokens, alert settings, detector thresholds, the incident window).
//! - Every reload is audited (`actor` `reload`, `via` `control_socket` or `signal`, action
//!   `config.reload`, outcome `ok`, `refused` or `error`) and logged; errors name keys, never
//!   secret values.
//!
//! Adding a subsystem (firewall, threat, WAF, mail): give its handle to [`Handles`], add a
//! [`Section`] whose `changed` compares its config section and whose `apply` calls the
//! subsystem's own `reconfigure` with that section. Keys it cannot change live go into
//! the restart class of `config::keys::KEYS` instead.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};

use super::collectors::{thresholds_of, LiveCollectors};
use crate::alerts::AlertsError;
use crate::api::audit::Entry;
use crate::api::App;
use crate::config::{self, Config, Live};
use crate::mail::MailError;
use crate::store::StoreError;
use crate::threat::sources::SourceError;
use crate::watch::CollectorError;

/// What asked for the reload (the audit record's `via`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    ControlSocket,
    Signal,
    /// A settings change through the API.
    Api,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::ControlSocket => "control_socket",
            Trigger::Signal => "signal",
            Trigger::Api => "api",
        }
    }
}

/// Where the configuration comes from.
#[derive(Clone, Debug)]
pub enum Source {
    /// The main file (drop-ins in `conf.d/` beside it).
    File(PathBuf),
    /// The embedded `--dev` configuration.
    Dev,
}

impl Source {
    fn load(&self) -> Result<Config, Vec<String>> {
        match self {
            Source::File(path) => {
                config::load(path).map_err(|errs| errs.iter().map(|e| e.to_string()).collect())
            }
            Source::Dev => super::dev::config()
                .map(|(c, _)| c)
                .map_err(|e| vec![e.to_string()]),
        }
    }

    fn describe(&self) -> String {
        match self {
            Source::File(p) => p.display().to_string(),
            Source::Dev => "--dev".to_string(),
        }
    }
}

/// Handles of the running subsystems a reload reconfigures.
pub struct Handles {
    /// Tokens, sessions, audit, alerts and incidents (through `services`).
    pub app: Arc<App>,
    pub collectors: Arc<LiveCollectors>,
}

/// What applying sections did, beyond their names.
#[derive(Debug, Default)]
pub struct Effects {
    /// Browser sessions ended because their creating admin token is gone.
    pub sessions_ended: usize,
}

/// Why a running subsystem could not take a section (the answer's `error` after the
/// section's name).
#[derive(Debug)]
pub enum ApplyError {
    /// Sessions created by a removed admin token could not be ended.
    EndSessions(StoreError),
    Alerts(AlertsError),
    Threat(SourceError),
    /// A log or file collector did not start again.
    Collector(CollectorError),
    Mail(MailError),
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApplyError::EndSessions(e) => {
                write!(f, "cannot end the sessions of removed tokens: {e}")
            }
            ApplyError::Alerts(e) => write!(f, "alerts: {e}"),
            ApplyError::Threat(e) => write!(f, "threat: {e}"),
            ApplyError::Collector(e) => write!(f, "{e}"),
            ApplyError::Mail(e) => write!(f, "mail: {e}"),
        }
    }
}

impl std::error::Error for ApplyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ApplyError::EndSessions(e) => Some(e),
            ApplyError::Alerts(e) => Some(e),
            ApplyError::Threat(e) => Some(e),
            ApplyError::Collector(e) => Some(e),
            ApplyError::Mail(e) => Some(e),
        }
    }
}

/// One configuration section a running subsystem takes live.
pub struct Section {
    /// Name in the reload answer (a dotted key or table).
    pub name: &'static str,
    /// Whether the section differs between two configurations.
    pub changed: fn(&Config, &Config) -> bool,
    /// Applies `cfg`'s section to the running subsystem.
    pub apply: fn(&Handles, &Config, &mut Effects) -> Result<(), ApplyError>,
}

/// The sections applied live, in the order they are applied.
pub static SECTIONS: &[Section] = &[
    Section {
        name: "webui.tokens",
        changed: |a, b| a.effective_tokens() != b.effective_tokens(),
        apply: apply_tokens,
    },
    Section {
        name: "webui.metrics_token",
        changed: |a, b| a.webui.metrics_token != b.webui.metrics_token,
        apply: apply_tokens,
    },
    Section {
        name: "thresholds",
        changed: |a, b| thresholds_of(a) != thresholds_of(b),
        apply: |h, c, _| {
            h.collectors.set_thresholds(c);
            Ok(())
        },
    },
    Section {
        name: "thresholds.http",
        changed: |a, b| a.engine.access_thresholds != b.engine.access_thresholds,
        apply: |h, c, _| {
            h.collectors.set_access_thresholds(c);
            Ok(())
        },
    },
    Section {
        name: "incidents.window_minutes",
        changed: |a, b| a.engine.incident_window_minutes != b.engine.incident_window_minutes,
        apply: |h, c, _| {
            h.app
                .services
                .incidents
                .set_window(Duration::from_secs(c.engine.incident_window_minutes * 60));
            Ok(())
        },
    },
    Section {
        name: "findings.max_active",
        changed: |a, b| a.engine.max_active_findings != b.engine.max_active_findings,
        apply: |h, c, _| {
            h.app
                .services
                .engine
                .set_max_active(c.engine.max_active_findings);
            Ok(())
        },
    },
    Section {
        name: "alerts",
        changed: |a, b| a.alerts != b.alerts,
        apply: |h, c, _| {
            h.app
                .services
                .alerts
                .reconfigure(&c.alerts)
                .map_err(ApplyError::Alerts)
        },
    },
    Section {
        name: "threat",
        // `reputation.report` is a restart key (abuse reporting is set up at start).
        changed: |a, b| {
            let live = |c: &Config| {
                let mut r = c.reputation.clone();
                r.report = Default::default();
                r
            };
            (&a.threat, live(a)) != (&b.threat, live(b))
        },
        apply: |h, c, _| {
            h.app
                .services
                .threat
                .reconfigure(&c.threat, &c.reputation)
                .map_err(ApplyError::Threat)
        },
    },
    Section {
        name: "challenge",
        changed: |a, b| {
            let live = |c: &Config| {
                let mut x = c.challenge.clone();
                let d = crate::config::challenge::ChallengeConfig::default();
                (x.enabled, x.listen, x.tls_cert, x.tls_key) =
                    (d.enabled, d.listen, d.tls_cert, d.tls_key);
                (x, c.threat.http_scanner_action.clone())
            };
            live(a) != live(b)
        },
        apply: |h, c, _| {
            if let Some(ch) = &h.app.services.challenge {
                ch.set_settings(super::challenge::settings(c));
            }
            Ok(())
        },
    },
    Section {
        name: "reputation.crawler",
        changed: |a, b| a.crawler.settings() != b.crawler.settings(),
        apply: |h, c, _| {
            h.app.services.crawler.reconfigure(c.crawler.settings());
            Ok(())
        },
    },
    Section {
        name: "files",
        changed: |a, b| {
            (
                &a.engine.watch_roots,
                &a.engine.watch_backend,
                a.engine.auto_quarantine,
            ) != (
                &b.engine.watch_roots,
                &b.engine.watch_backend,
                b.engine.auto_quarantine,
            )
        },
        apply: |h, c, _| h.collectors.restart_files(c).map_err(ApplyError::Collector),
    },
    Section {
        name: "logs.auth",
        changed: |a, b| a.engine.auth_logs != b.engine.auth_logs,
        apply: |h, c, _| h.collectors.restart_auth(c).map_err(ApplyError::Collector),
    },
    Section {
        name: "logs.access",
        changed: |a, b| a.engine.access_logs != b.engine.access_logs,
        apply: |h, c, _| {
            h.collectors
                .restart_access(c)
                .map_err(ApplyError::Collector)
        },
    },
    Section {
        name: "mail",
        changed: |a, b| a.mail.antivirus_part() != b.mail.antivirus_part(),
        apply: |h, c, _| {
            h.app
                .services
                .mail
                .reconfigure(&c.mail)
                .map_err(ApplyError::Mail)
        },
    },
    Section {
        name: "mail.password",
        changed: |a, b| a.mail.password != b.mail.password,
        apply: |h, c, _| {
            h.app.services.jobs.reconfigure_tasks(c);
            Ok(())
        },
    },
    Section {
        name: "waf",
        changed: |a, b| {
            let strip = |c: &Config| {
                let mut w = c.waf.clone();
                w.enabled = true;
                w
            };
            strip(a) != strip(b)
        },
        apply: |h, c, _| {
            h.app.services.waf.reconfigure(&c.waf);
            Ok(())
        },
    },
];

fn apply_tokens(h: &Handles, c: &Config, fx: &mut Effects) -> Result<(), ApplyError> {
    let app = &h.app;
    app.tokens
        .replace(&c.effective_tokens(), &c.webui.metrics_token);
    let ended = app
        .sessions
        .end_created_by(|id| app.tokens.is_admin(id))
        .map_err(ApplyError::EndSessions)?;
    fx.sessions_ended += ended;
    Ok(())
}

/// The outcome of one reload (the control-socket answer).
#[derive(Debug, Default)]
pub struct Outcome {
    pub ok: bool,
    /// Configuration errors (refused), one line each, as `svc validate` prints them.
    pub errors: Vec<String>,
    /// A section that could not be applied (everything was rolled back).
    pub error: Option<String>,
    pub changed: bool,
    pub applied: Vec<&'static str>,
    pub restart_required: Vec<&'static str>,
    pub sessions_ended: usize,
    pub config_hash: String,
    pub sources: Vec<String>,
}

impl Outcome {
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "ok": self.ok,
            "changed": self.changed,
            "applied": self.applied,
            "restart_required": self.restart_required,
            "sessions_ended": self.sessions_ended,
            "config_hash": self.config_hash,
            "sources": self.sources,
        });
        if !self.errors.is_empty() {
            v["errors"] = json!(self.errors);
        }
        if let Some(e) = &self.error {
            v["error"] = json!(e);
        }
        v
    }

    /// One log line.
    fn summary(&self) -> String {
        if !self.errors.is_empty() {
            return format!(
                "refused: {} configuration error(s): {}",
                self.errors.len(),
                self.errors.join("; ")
            );
        }
        if let Some(e) = &self.error {
            return format!("failed and rolled back: {e}");
        }
        let mut s = if self.applied.is_empty() {
            "no live change".to_string()
        } else {
            format!("applied {}", self.applied.join(", "))
        };
        if self.sessions_ended > 0 {
            s.push_str(&format!(
                "; ended {} browser session(s) of removed tokens",
                self.sessions_ended
            ));
        }
        if !self.restart_required.is_empty() {
            s.push_str(&format!(
                "; restart needed for {}",
                self.restart_required.join(", ")
            ));
        }
        s
    }
}

/// Reloads the configuration on request.
pub struct Reloader {
    source: Source,
    live: Arc<Live>,
    handles: Handles,
    one_at_a_time: Mutex<()>,
}

impl Reloader {
    pub fn new(source: Source, live: Arc<Live>, handles: Handles) -> Reloader {
        Reloader {
            source,
            live,
            handles,
            one_at_a_time: Mutex::new(()),
        }
    }

    /// Re-reads, validates and applies the configuration.
    pub fn reload(&self, trigger: Trigger) -> Outcome {
        let _one = self.one_at_a_time.lock();
        let current = self.live.current();
        let mut out = Outcome {
            config_hash: current.hash.clone(),
            ..Outcome::default()
        };
        let next = match self.source.load() {
            Ok(c) => Arc::new(c),
            Err(errors) => {
                out.errors = errors;
                out.restart_required = self.live.restart_required();
                self.live.refuse();
                self.finish(trigger, &out, "refused");
                return out;
            }
        };
        out.sources = next
            .sources
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let due: Vec<&Section> = SECTIONS
            .iter()
            .filter(|s| (s.changed)(&current, &next))
            .collect();
        let mut fx = Effects::default();
        for (i, s) in due.iter().enumerate() {
            if let Err(e) = (s.apply)(&self.handles, &next, &mut fx) {
                out.error = Some(format!("{}: {e}", s.name));
                self.roll_back(&due[..=i], &current);
                out.restart_required = self.live.restart_required();
                self.live.refuse();
                self.finish(trigger, &out, "error");
                return out;
            }
            out.applied.push(s.name);
        }
        out.ok = true;
        out.changed = current.hash != next.hash;
        out.sessions_ended = fx.sessions_ended;
        out.config_hash = next.hash.clone();
        self.live.accept(next);
        out.restart_required = self.live.restart_required();
        self.finish(trigger, &out, "ok");
        out
    }

    /// Applies the configuration in effect again to `sections` (newest first).
    fn roll_back(&self, sections: &[&Section], current: &Config) {
        let mut fx = Effects::default();
        for s in sections.iter().rev() {
            if let Err(e) = (s.apply)(&self.handles, current, &mut fx) {
                log::error!(
                    "reload: rolling back {} failed too: {e}; the daemon may need a restart",
                    s.name
                );
            }
        }
    }

    fn finish(&self, trigger: Trigger, out: &Outcome, outcome: &str) {
        let line = format!(
            "configuration reload ({}, {}): {}",
            trigger.as_str(),
            self.source.describe(),
            out.summary()
        );
        if outcome == "ok" {
            log::info!("{line}");
        } else {
            log::warn!("{line}");
        }
        let target = if outcome == "ok" {
            let mut t = format!("applied={}", out.applied.join(","));
            if !out.restart_required.is_empty() {
                t.push_str(&format!(
                    " restart_required={}",
                    out.restart_required.join(",")
                ));
            }
            t
        } else if let Some(e) = &out.error {
            e.clone()
        } else {
            format!("{} configuration error(s)", out.errors.len())
        };
        let app = &self.handles.app;
        app.audit.record(Entry {
            at: app.clock.now(),
            actor: "reload",
            via: trigger.as_str(),
            action: "config.reload",
            target: &target,
            outcome,
            remote_ip: "",
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{from_table, parse_str};

    fn cfg(text: &str) -> Config {
        from_table(&parse_str(text).unwrap(), vec![]).unwrap()
    }

    fn sections(a: &str, b: &str) -> (Vec<&'static str>, Vec<&'static str>) {
        let (a, b) = (cfg(a), cfg(b));
        let live: Vec<&str> = SECTIONS
            .iter()
            .filter(|s| (s.changed)(&a, &b))
            .map(|s| s.name)
            .collect();
        (live, config::live::restart_required(&a, &b))
    }

    const T1: &str = "aaaaaaaaaaaaaaaaaaaa";
    const T2: &str = "bbbbbbbbbbbbbbbbbbbb";

    /// Every documented key is either applied live or reported as needing a restart: a
    /// reload never ignores a change silently.
    #[test]
    fn every_key_is_applied_live_or_named_for_a_restart() {
        let cases: &[(&str, &[&str])] = &[
            ("state_path = \"/var/lib/other\"\n", &["state_path"]),
            ("[webui]\nlisten = \"127.0.0.1:1\"\n", &["webui.listen"]),
            (
                "[webui]\ntls_cert = \"/c.pem\"\ntls_key = \"/k.pem\"\n",
                &["webui.tls_cert", "webui.tls_key"],
            ),
            (
                "[webui]\nmetrics_token = \"mmmmmmmmmmmmmmmmmmmm\"\n",
                &["webui.metrics_token"],
            ),
            (
                &format!("[webui]\nauth_token = {T1:?}\n"),
                &["webui.tokens"],
            ),
            (
                "[webui]\nsession_idle_minutes = 5\n",
                &["webui.session_idle_minutes"],
            ),
            (
                "[webui]\nsession_max_hours = 2\n",
                &["webui.session_max_hours"],
            ),
            (
                &format!("[[webui.tokens]]\nname = \"x\"\ntoken = {T2:?}\nscope = \"read\"\n"),
                &["webui.tokens"],
            ),
            ("[webui.limits]\nmax_connections = 9\n", &["webui.limits.*"]),
            ("[firewall]\nmode = \"full\"\n", &["firewall.*"]),
            (
                "[auto_response]\ndry_run = false\n",
                &["auto_response.dry_run"],
            ),
            ("[logs]\nauth = [\"/x.log\"]\n", &["logs.auth"]),
            ("[logs]\nwaf = [\"/x/*.log\"]\n", &["logs.waf"]),
            ("[waf]\nenabled = false\n", &["waf.enabled"]),
            ("[waf]\nrules_file = \"/r.conf\"\n", &["waf"]),
            ("[waf]\noverrides_file = \"/o.conf\"\n", &["waf"]),
            (
                "[waf]\nreload_command = \"systemctl reload apache2\"\n",
                &["waf"],
            ),
            ("[waf]\nreload_timeout_seconds = 5\n", &["waf"]),
            ("[waf]\nescalation_denies = 5\n", &["waf"]),
            ("[waf]\nescalation_window_minutes = 5\n", &["waf"]),
            ("[waf]\nrules_stale_days = 5\n", &["waf"]),
            ("[waf]\nevent_retention_days = 5\n", &["waf"]),
            ("[waf]\nmax_events = 5000\n", &["waf"]),
            ("[waf]\nmax_tracked_addresses = 50\n", &["waf"]),
            ("[logs]\nmail = [\"/x.log\"]\n", &["logs.mail"]),
            ("[logs]\naccess = [\"/x/*.log\"]\n", &["logs.access"]),
            ("[thresholds]\nhttp_window_seconds = 60\n", &["thresholds.http"]),
            ("[thresholds]\nhttp_wp_login_posts = 3\n", &["thresholds.http"]),
            ("[thresholds]\nhttp_xmlrpc_posts = 3\n", &["thresholds.http"]),
            ("[thresholds]\nhttp_user_enum_requests = 3\n", &["thresholds.http"]),
            ("[thresholds]\nhttp_scanner_probe_404s = 3\n", &["thresholds.http"]),
            ("[thresholds]\nhttp_scanner_agent_requests = 4\n", &["thresholds.http"]),
            ("[thresholds]\nhttp_claimed_bot_requests = 3\n", &["thresholds.http"]),
            ("[thresholds]\nhttp_max_tracked_addresses = 100\n", &["thresholds.http"]),
            (
                "[thresholds]\nmail_per_account_hourly = 9\n",
                &["thresholds.mail_per_account_hourly"],
            ),
            (
                "[thresholds]\nmail_auth_failures = 9\n",
                &["thresholds.mail_auth_failures"],
            ),
            (
                "[thresholds]\nmail_queue_size = 9\n",
                &["thresholds.mail_queue_size"],
            ),
            ("[files]\nwatch = [\"/srv\"]\n", &["files"]),
            ("[files]\nbackend = \"inotify\"\n", &["files"]),
            ("[auto_response]\nquarantine = true\n", &["files"]),
            ("[thresholds]\nauth_failures = 3\n", &["thresholds"]),
            ("[thresholds]\nauth_window_seconds = 60\n", &["thresholds"]),
            (
                "[thresholds]\nauth_max_tracked_addresses = 100\n",
                &["thresholds"],
            ),
            (
                "[thresholds]\nauth_max_known_logins = 100\n",
                &["thresholds"],
            ),
            (
                "[thresholds]\nauth_new_address_mail = true\n",
                &["thresholds"],
            ),
            (
                "[checks]\ncritical_interval_min = 1\n",
                &["checks.critical_interval_min"],
            ),
            (
                "[checks]\ndeep_interval_min = 1\n",
                &["checks.deep_interval_min"],
            ),
            ("[checks]\nroot = \"/srv\"\n", &["checks.root"]),
            ("[checks]\nweb_roots = [\"/srv\"]\n", &["checks.web_roots"]),
            (
                "[incidents]\nwindow_minutes = 5\n",
                &["incidents.window_minutes"],
            ),
            ("[findings]\nmax_active = 100\n", &["findings.max_active"]),
            ("[alerts]\nmax_per_hour = 5\n", &["alerts"]),
            ("[mail]\nenabled = true\n", &["mail"]),
            ("[mail]\nspool_path = \"/srv/spool\"\n", &["mail"]),
            ("[mail]\nclamd_socket = \"off\"\n", &["mail"]),
            ("[mail]\nclamd_timeout_seconds = 5\n", &["mail"]),
            ("[mail]\nquarantine = false\n", &["mail"]),
            ("[mail]\nquarantine_path = \"/srv/q\"\n", &["mail"]),
            ("[mail]\nscan_threads = 4\n", &["mail"]),
            ("[mail]\ncontent_scan = false\n", &["mail"]),
            ("[mail]\nmax_depth = 5\n", &["mail"]),
            ("[mail]\nmax_parts = 5\n", &["mail"]),
            ("[mail]\nmax_extract_bytes = 5000\n", &["mail"]),
            ("[mail]\narchive_max_bytes = 5000\n", &["mail"]),
            ("[mail]\narchive_max_files = 5\n", &["mail"]),
            ("[mail]\narchive_max_ratio = 5\n", &["mail"]),
            ("[mail]\narchive_max_depth = 4\n", &["mail"]),
            ("[mail]\npassword_audit = false\n", &["mail.password"]),
            (
                "[mail]\npassword_files = [\"/etc/dovecot/users\"]\n",
                &["mail.password"],
            ),
            (
                "[mail]\npassword_check_interval_min = 5\n",
                &["mail.password"],
            ),
            ("[mail]\npassword_slow_candidates = 5\n", &["mail.password"]),
            (
                "[mail]\npassword_audit_scan_minutes = 5\n",
                &["mail.password"],
            ),
            (
                "[mail]\nbreach_api = \"https://b.example.com/range/\"\n",
                &["mail.password"],
            ),
            ("[alerts]\nmin_severity = \"CRITICAL\"\n", &["alerts"]),
            (
                "[alerts.webhook]\nurl = \"https://h.example.com/x\"\n",
                &["alerts"],
            ),
            ("[threat]\nmax_records = 5000\n", &["threat"]),
            ("[threat]\nhalf_life_hours = 24\n", &["threat"]),
            ("[threat]\nverdict_deadline_ms = 500\n", &["threat"]),
            ("[threat]\nevent_retention_days = 7\n", &["threat"]),
            ("[threat]\nmax_events = 5000\n", &["threat"]),
            ("[threat]\nwatched_countries = [\"CN\"]\n", &["threat"]),
            ("[threat]\nwatched_country_score = 5\n", &["threat"]),
            ("[threat]\ndigest_interval_minutes = 5\n", &["threat"]),
            ("[threat]\nundo_minutes = 5\n", &["threat"]),
            ("[threat.weights]\nupstream = 10\n", &["threat"]),
            ("[auto_response]\nblock = false\n", &["threat"]),
            ("[auto_response]\nblock_score = 50\n", &["threat"]),
            ("[auto_response]\nmax_blocks_per_hour = 5\n", &["threat"]),
            ("[auto_response]\nblock_hours = 2\n", &["threat"]),
            ("[reputation]\nca_file = \"/ca.pem\"\n", &["threat"]),
            ("[reputation]\ntimeout_seconds = 3\n", &["threat"]),
            ("[reputation]\nipfeed_key = \"k\"\n", &["threat"]),
            (
                "[reputation]\nipfeed_key = \"k\"\nipfeed_daily_quota = 5\nipfeed_cache_hours = 2\nipfeed_max_per_scan = 1\nipfeed_url = \"https://f.example.com/x\"\n",
                &["threat"],
            ),
            (
                "[reputation.spamfilter]\nurl = \"http://127.0.0.1:11334\"\ntoken_env = \"PW\"\n",
                &["threat"],
            ),
            (
                "[reputation.upstream]\nurl = \"https://u.example.com/s\"\ncache_ttl_min = 5\n",
                &["threat"],
            ),
            ("[reputation.rdap]\nenabled = true\n", &["threat"]),
            (
                "[auto_response]\nhttp_scanner_action = \"challenge\"\n",
                &["threat", "challenge"],
            ),
            ("[challenge]\nenabled = true\n", &["challenge.enabled"]),
            (
                "[challenge]\nlisten = \"127.0.0.1:1\"\n",
                &["challenge.listen"],
            ),
            (
                "[challenge]\ntls_cert = \"/c.pem\"\ntls_key = \"/k.pem\"\n",
                &["challenge.tls_cert", "challenge.tls_key"],
            ),
            (
                "[challenge]\npublic_url = \"https://c.example.com/\"\n",
                &["challenge"],
            ),
            ("[challenge]\ndifficulty = 10\n", &["challenge"]),
            (
                "[challenge]\ntrusted_proxies = [\"127.0.0.1\"]\n",
                &["challenge"],
            ),
            ("[challenge]\ntimeout_minutes = 10\n", &["challenge"]),
            ("[challenge]\nallow_hours = 10\n", &["challenge"]),
            ("[challenge]\nmax_pending = 100\n", &["challenge"]),
            ("[challenge]\nmap_dir = \"/srv/m\"\n", &["challenge"]),
            ("[challenge]\napache_file = \"/srv/a.conf\"\n", &["challenge"]),
            ("[challenge]\nnginx_http_file = \"/srv/h.conf\"\n", &["challenge"]),
            ("[challenge]\nnginx_server_file = \"/srv/s.conf\"\n", &["challenge"]),
            ("[challenge]\nreload_command = \"nginx -s reload\"\n", &["challenge"]),
            (
                "[[reputation.feeds]]\nname = \"drop\"\nurl = \"https://f.example.com/drop.txt\"\n",
                &["threat"],
            ),
            (
                "[reputation.report]\nspool_limit = 500\n[[reputation.report.destinations]]\nname = \"c\"\nurl = \"https://c.example.com/r\"\n",
                &["reputation.report"],
            ),
            (
                "[reputation]\nbot_verify_enabled = true\n",
                &["reputation.crawler"],
            ),
            (
                "[reputation]\ndns_server = \"127.0.0.1:53\"\n",
                &["reputation.crawler"],
            ),
            (
                "[[reputation.verified_bots]]\nname = \"x\"\nua_substrings = [\"xbot\"]\nip_ranges = [\"8.8.8.0/24\"]\n",
                &["reputation.crawler"],
            ),
            (
                "[reputation.bot_ranges]\ninterval_hours = 2\n",
                &["reputation.bot_ranges.*"],
            ),
        ];
        for (text, want) in cases {
            let (live, restart) = sections("", text);
            let all: Vec<&str> = live.iter().chain(restart.iter()).copied().collect();
            assert_eq!(all, want.to_vec(), "{text}");
        }
        let (live, restart) = sections("", "");
        assert!(live.is_empty() && restart.is_empty());
    }

    #[test]
    fn outcome_json_and_summary() {
        let o = Outcome {
            ok: true,
            changed: true,
            applied: vec!["webui.tokens", "thresholds"],
            restart_required: vec!["webui.listen"],
            sessions_ended: 1,
            config_hash: "ab".into(),
            ..Outcome::default()
        };
        let v = o.to_json();
        assert_eq!(v["applied"], json!(["webui.tokens", "thresholds"]));
        assert_eq!(v["restart_required"], json!(["webui.listen"]));
        assert!(v.get("errors").is_none() && v.get("error").is_none());
        assert_eq!(
            o.summary(),
            "applied webui.tokens, thresholds; ended 1 browser session(s) of removed tokens; restart needed for webui.listen"
        );
        let refused = Outcome {
            errors: vec!["thresholds.auth_failures: must be between 1 and 1000000".into()],
            ..Outcome::default()
        };
        assert_eq!(refused.to_json()["ok"], false);
        assert!(refused
            .summary()
            .starts_with("refused: 1 configuration error(s)"));
    }
}
