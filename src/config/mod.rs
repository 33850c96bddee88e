//! Configuration: the main TOML file, `conf.d/*.toml` drop-ins, validation, legacy migration.
//!
//! Guarantees:
//! - Drop-ins are read in lexicographic order from `conf.d/` beside the main file; tables
//!   merge, scalars replace, arrays append.
//! - Every key is known: unknown keys are errors, reported with their full dotted name.
//! - Loading never logs a secret; errors name keys, never token values.

pub mod abuse;
pub mod access;
pub mod alerts;
pub mod bots;
pub mod challenge;
pub mod cms;
pub mod crawler;
pub mod dropins;
pub mod firewall;
pub mod fleet;
pub mod geoip;
pub mod keys;
pub mod live;
pub mod mail;
mod merge;
pub mod migrate;
pub mod probes;
mod reader;
pub mod threat;
pub mod waf;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use live::Live;
pub use reader::{ConfigError, ConfigErrors};
use reader::{Errors, TableReader};

/// Default main configuration file.
pub const DEFAULT_PATH: &str = "/etc/svc/svc.toml";
/// Name of the entry a legacy `webui.auth_token` becomes.
pub const LEGACY_TOKEN_NAME: &str = "legacy-auth-token";
/// Default of `webui.audit_max_entries`, for `api::audit` (a const there); the key-table
/// test holds it equal to `keys::KEYS`.
pub const DEFAULT_AUDIT_MAX_ENTRIES: u64 = 100_000;
/// Shortest accepted token.
pub const MIN_TOKEN_LEN: usize = 16;

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Read,
    Admin,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Admin => "admin",
        }
    }
}

/// One `[[webui.tokens]]` entry.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenEntry {
    pub name: String,
    pub token: String,
    pub scope: Scope,
}

impl std::fmt::Debug for TokenEntry {
    // The token value is a secret: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenEntry")
            .field("name", &self.name)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// Limits of the HTTPS server (`[webui.limits]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    pub handshake_timeout_seconds: u64,
    pub head_timeout_seconds: u64,
    pub max_head_bytes: usize,
    pub max_headers: usize,
    pub max_body_bytes: usize,
    pub idle_timeout_seconds: u64,
    /// Whole time a response may take to reach a client that reads slowly.
    pub write_timeout_seconds: u64,
    /// Slowest accepted body upload: the body deadline is the head deadline plus the
    /// body's length at this rate.
    pub body_min_bytes_per_second: u64,
    pub max_connections: usize,
    /// Open connections per client address (IPv6 per /64).
    pub max_connections_per_address: usize,
    /// Worker threads (0: twice the cores, at least 4).
    pub workers: usize,
    pub max_sse_subscribers: usize,
    /// Failed authentications per address per minute before 429.
    pub auth_failures_per_minute: u32,
}

impl Default for HttpLimits {
    /// The defaults of `config::keys::KEYS`.
    fn default() -> Self {
        read_limits(&mut TableReader::new(None, "webui"), &mut Errors::default())
    }
}

/// `[webui]`. Its `Debug` never prints a secret (see [`Redacted`]).
#[derive(Clone, PartialEq, Eq)]
pub struct WebUi {
    pub listen: SocketAddr,
    pub tls_cert: String,
    pub tls_key: String,
    pub metrics_token: String,
    pub auth_token: String,
    pub session_idle_minutes: u64,
    pub session_max_hours: u64,
    pub tokens: Vec<TokenEntry>,
    pub limits: HttpLimits,
    /// `webui.audit_max_entries`: audit records kept (the newest).
    pub audit_max_entries: u64,
}

/// How `Debug` shows a secret: whether it is set, never its value.
pub struct Redacted<'a>(pub &'a str);

impl std::fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() {
            "<empty>"
        } else {
            "<redacted>"
        })
    }
}

impl std::fmt::Debug for WebUi {
    // metrics_token and auth_token are secrets; tokens print without their values.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebUi")
            .field("listen", &self.listen)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("metrics_token", &Redacted(&self.metrics_token))
            .field("auth_token", &Redacted(&self.auth_token))
            .field("session_idle_minutes", &self.session_idle_minutes)
            .field("session_max_hours", &self.session_max_hours)
            .field("tokens", &self.tokens)
            .field("limits", &self.limits)
            .field("audit_max_entries", &self.audit_max_entries)
            .finish()
    }
}

/// Detector and response settings (`logs`, `files`, `thresholds`, `auto_response`, `checks`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Engine {
    /// `logs.auth`: authentication logs to tail.
    pub auth_logs: Vec<PathBuf>,
    /// `logs.waf`: WAF logs to tail (absolute paths or glob patterns); empty: the error
    /// and audit logs the detected web server's configuration names.
    pub waf_logs: Vec<PathBuf>,
    /// `logs.mail`: MTA logs to tail (empty: detected under `checks.root`).
    pub mail_logs: Vec<PathBuf>,
    /// `logs.access`: web-server access logs to tail (absolute paths or glob patterns);
    /// empty: the detected web servers' and panels' logs (`watch::accesslog::logs`).
    pub access_logs: Vec<PathBuf>,
    /// `thresholds.http_*`: the access-log detector's thresholds.
    pub access_thresholds: access::AccessThresholds,
    /// `thresholds.mail_per_account_hourly`: messages per account and hour.
    pub mail_per_account_hourly: u32,
    /// `thresholds.mail_auth_failures`: SMTP AUTH failures per address in ten minutes.
    pub mail_auth_failures: u32,
    /// `thresholds.mail_queue_size`: queued messages before a `mail_queue` finding.
    pub mail_queue_size: u64,
    /// `files.watch`: roots of the file watcher.
    pub watch_roots: Vec<PathBuf>,
    /// `files.backend`: `auto`, `fanotify` or `inotify`.
    pub watch_backend: String,
    /// `thresholds.auth_failures`: failures from one address within the window.
    pub auth_failures: u32,
    /// `thresholds.auth_window_seconds`.
    pub auth_window_seconds: u64,
    /// `thresholds.auth_max_tracked_addresses`.
    pub auth_max_tracked_addresses: usize,
    /// `thresholds.auth_max_known_logins`.
    pub auth_max_known_logins: usize,
    /// `thresholds.auth_new_address_mail`.
    pub auth_new_address_mail: bool,
    /// `auto_response.quarantine`: move high-confidence malware into quarantine.
    pub auto_quarantine: bool,
    /// `auto_response.dry_run`: automatic callers record the firewall blocks they would make.
    pub auto_dry_run: bool,
    /// `checks.critical_interval_min` (0 disables the schedule).
    pub critical_interval_min: u64,
    /// `checks.deep_interval_min` (0 disables the schedule).
    pub deep_interval_min: u64,
    /// `checks.root`: the host layout checks read is taken under this directory.
    pub checks_root: PathBuf,
    /// `checks.web_roots`: web roots for the PHP checks (default: the usual layout under `checks.root`).
    pub web_roots: Option<Vec<PathBuf>>,
    /// `incidents.window_minutes`: findings of one source within this window form one
    /// incident; an incident quiet this long is resolved.
    pub incident_window_minutes: u64,
    /// `findings.max_active`: active findings kept at most (see `findings::engine`).
    pub max_active_findings: usize,
}

impl Default for Engine {
    /// The defaults of `config::keys::KEYS`.
    fn default() -> Self {
        let mut threat = threat::ThreatConfig::default();
        read_engine(
            &mut TableReader::new(None, ""),
            &mut Errors::default(),
            &mut threat,
        )
    }
}

/// The validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub state_path: PathBuf,
    pub webui: WebUi,
    pub engine: Engine,
    /// `[geoip]`: MaxMind DB files for enrichment.
    pub geoip: geoip::GeoIp,
    /// Files read, main file first.
    pub sources: Vec<PathBuf>,
    /// SHA-256 of the merged configuration (hex).
    pub hash: String,
    /// True for the embedded `--dev` configuration.
    pub dev: bool,
    /// `[alerts]`: hourly budget, minimum severity, notifiers.
    pub alerts: alerts::AlertsConfig,
    /// `[firewall]`: the nftables engine.
    pub firewall: firewall::FirewallConfig,
    /// `[mail]`: the mail antivirus.
    pub mail: mail::MailConfig,
    /// `[waf]`: the ModSecurity integration.
    pub waf: waf::WafConfig,
    /// `[threat]` and the auto-block keys of `[auto_response]`.
    pub threat: threat::ThreatConfig,
    /// `[reputation]`: verdict sources beyond the local attack database.
    pub reputation: threat::ReputationConfig,
    /// `[challenge]`: the proof-of-work challenge.
    pub challenge: challenge::ChallengeConfig,
    /// `[probes]`: kernel probe backends and their detections.
    pub probes: probes::ProbesConfig,
    /// The crawler-verification keys of `[reputation]`.
    pub crawler: crawler::CrawlerConfig,
    /// `[cms]`: content-management-system verification.
    pub cms: cms::CmsConfig,
    /// `[fleet]`: the CrowdSec Local API link.
    pub fleet: fleet::FleetConfig,
    /// The value of every key a reload cannot apply, as written (absent: its default), for
    /// `live::restart_required`.
    pub restart_values: Vec<(&'static str, Option<toml::Value>)>,
}

impl Config {
    /// Tokens by value for authentication. A legacy `auth_token` that is not (yet) migrated
    /// is included as an admin entry so it keeps working.
    pub fn effective_tokens(&self) -> Vec<TokenEntry> {
        let mut out = self.webui.tokens.clone();
        let legacy = &self.webui.auth_token;
        if !legacy.is_empty() && !out.iter().any(|t| &t.token == legacy) {
            out.push(TokenEntry {
                name: LEGACY_TOKEN_NAME.to_string(),
                token: legacy.clone(),
                scope: Scope::Admin,
            });
        }
        out
    }

    pub fn socket_path(&self) -> PathBuf {
        self.state_path.join("svc.sock")
    }
}

/// Reads and merges the main file and its drop-ins, then validates.
pub fn load(main: &Path) -> Result<Config, Vec<ConfigError>> {
    let (table, sources) = read_merged(main)?;
    from_table(&table, sources)
}

/// The drop-in files that belong to `main`, in the order they apply.
pub fn dropins(main: &Path) -> Vec<PathBuf> {
    let dir = main.parent().unwrap_or(Path::new(".")).join("conf.d");
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

/// The configuration `main` and its drop-ins make, merged into one TOML text (the values a
/// start would use; secrets included: the caller keeps it private).
pub fn merged_text(main: &Path) -> Result<String, Vec<ConfigError>> {
    let (table, _) = read_merged(main)?;
    toml::to_string(&table).map_err(|e| {
        vec![ConfigError {
            key: main.display().to_string(),
            message: format!("cannot write the merged configuration: {e}"),
        }]
    })
}

fn read_merged(main: &Path) -> Result<(toml::value::Table, Vec<PathBuf>), Vec<ConfigError>> {
    let mut files = vec![main.to_path_buf()];
    files.extend(dropins(main));
    let mut merged = toml::value::Table::new();
    let mut errors = Vec::new();
    for file in &files {
        match parse_file(file) {
            Ok(t) => merge::merge_file(&mut merged, file, t),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok((merged, files))
    } else {
        Err(errors)
    }
}

/// Parses one TOML file; the error is one line naming the file and position.
pub fn parse_file(path: &Path) -> Result<toml::value::Table, ConfigError> {
    let text = crate::fsutil::read_daemon_string(path).map_err(|e| ConfigError {
        key: String::new(),
        message: format!("{}: cannot read: {e}", path.display()),
    })?;
    parse_str(&text).map_err(|message| ConfigError {
        key: String::new(),
        message: format!("{}: {message}", path.display()),
    })
}

/// Test helper: `text` read as a whole configuration, its errors one per line.
#[cfg(test)]
pub(crate) fn from_text(text: &str) -> Result<Config, ConfigErrors> {
    let t = parse_str(text).map_err(|e| {
        ConfigErrors(vec![ConfigError {
            key: String::new(),
            message: e.to_string(),
        }])
    })?;
    from_table(&t, vec![]).map_err(ConfigErrors)
}

/// TOML that does not parse: one line, with the line and column when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// (line, column), from 1.
    pub at: Option<(usize, usize)>,
    /// The parser's message, its line breaks replaced by spaces.
    pub message: String,
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at {
            Some((line, col)) => write!(f, "line {line} column {col}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for SyntaxError {}

/// Parses TOML text into a table; the error is a single line with line and column.
pub fn parse_str(text: &str) -> Result<toml::value::Table, SyntaxError> {
    toml::from_str::<toml::value::Table>(text).map_err(|e| SyntaxError {
        at: e.span().map(|span| {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let col = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
            (line, col)
        }),
        message: e.message().replace('\n', " "),
    })
}

/// Validates a merged table into a [`Config`].
pub fn from_table(
    root: &toml::value::Table,
    sources: Vec<PathBuf>,
) -> Result<Config, Vec<ConfigError>> {
    let mut errs = Errors::default();
    let mut r = TableReader::new(Some(root), "");

    let state_path = r.string("state_path", &mut errs);
    if state_path.is_empty() || !state_path.starts_with('/') {
        errs.push("state_path", "must be an absolute path");
    }

    let webui = read_webui(&mut r, &mut errs);
    let mut threat = threat::ThreatConfig::default();
    let engine = read_engine(&mut r, &mut errs, &mut threat);
    threat::read_threat(&mut r, &mut errs, &mut threat);
    let mut crawler = crawler::CrawlerConfig::default();
    let reputation = threat::read_reputation(&mut r, &mut errs, &mut crawler);
    let geoip = geoip::read(&mut r, &mut errs);
    let alerts = alerts::read(&mut r, &mut errs);
    let firewall = firewall::read(&mut r, &mut errs);
    let mail = mail::read(&mut r, &mut errs);
    let waf = waf::read(&mut r, &mut errs);
    let challenge = challenge::read(&mut r, &mut errs);
    let cms = cms::read(&mut r, &mut errs);
    let probes = probes::read(&mut r, &mut errs);
    let fleet = fleet::read(&mut r, &mut errs);
    r.finish(&mut errs);

    if !errs.0.is_empty() {
        return Err(errs.0);
    }
    let canonical = toml::to_string(root).unwrap_or_default();
    let hash = hex::encode(Sha256::digest(canonical.as_bytes()));
    Ok(Config {
        state_path: PathBuf::from(state_path),
        webui,
        engine,
        geoip,
        sources,
        hash,
        dev: false,
        alerts,
        firewall,
        mail,
        waf,
        threat,
        reputation,
        challenge,
        probes,
        crawler,
        cms,
        fleet,
        restart_values: live::restart_values(root),
    })
}

fn read_webui(root: &mut TableReader<'_>, errs: &mut Errors) -> WebUi {
    let mut w = root.table("webui", errs);
    let listen_s = w.string("listen", errs);
    let listen = match listen_s.parse::<SocketAddr>() {
        Ok(a) => a,
        Err(_) => {
            errs.push(
                w.key("listen"),
                "must be an address and port such as 0.0.0.0:9443",
            );
            // Any value: the configuration is refused.
            SocketAddr::from(([0, 0, 0, 0], 0))
        }
    };
    let tls_cert = w.string("tls_cert", errs);
    let tls_key = w.string("tls_key", errs);
    if tls_cert.is_empty() != tls_key.is_empty() {
        let missing = if tls_cert.is_empty() {
            "tls_cert"
        } else {
            "tls_key"
        };
        errs.push(
            w.key(missing),
            "must be set together with the other (or both left empty)",
        );
    }
    let metrics_token = w.string("metrics_token", errs);
    if !metrics_token.is_empty() && metrics_token.chars().count() < MIN_TOKEN_LEN {
        errs.push(
            w.key("metrics_token"),
            format!("must be at least {MIN_TOKEN_LEN} characters"),
        );
    }
    let auth_token = w.string("auth_token", errs);
    if !auth_token.is_empty() && auth_token.chars().count() < MIN_TOKEN_LEN {
        errs.push(
            w.key("auth_token"),
            format!("must be at least {MIN_TOKEN_LEN} characters"),
        );
    }
    let session_idle_minutes = w.int("session_idle_minutes", errs) as u64;
    let session_max_hours = w.int("session_max_hours", errs) as u64;
    let audit_max_entries = w.int("audit_max_entries", errs) as u64;

    let mut tokens = Vec::new();
    let mut by_name: HashMap<String, String> = HashMap::new();
    let mut by_value: HashMap<String, String> = HashMap::new();
    for mut t in w.table_list("tokens", errs) {
        let here = t.key("").trim_end_matches('.').to_string();
        let name = t.string("name", errs);
        let token = t.string("token", errs);
        let scope_s = t.string("scope", errs);
        let mut ok = true;
        if name.trim().is_empty() {
            errs.push(t.key("name"), "must not be empty");
            ok = false;
        } else if let Some(first) = by_name.get(&name) {
            errs.push(
                t.key("name"),
                format!("duplicate token name {name:?} (also {first})"),
            );
            ok = false;
        } else {
            by_name.insert(name.clone(), here.clone());
        }
        if token.chars().count() < MIN_TOKEN_LEN {
            errs.push(
                t.key("token"),
                format!("must be at least {MIN_TOKEN_LEN} characters"),
            );
            ok = false;
        } else if let Some(first) = by_value.get(&token) {
            errs.push(
                t.key("token"),
                format!("duplicate token value (same as {first})"),
            );
            ok = false;
        } else {
            by_value.insert(token.clone(), here.clone());
        }
        let scope = match scope_s.as_str() {
            "admin" => Scope::Admin,
            "read" => Scope::Read,
            // `string` reported it.
            _ => {
                ok = false;
                Scope::Read
            }
        };
        t.finish(errs);
        if ok {
            tokens.push(TokenEntry { name, token, scope });
        }
    }
    if !metrics_token.is_empty() {
        if let Some(first) = by_value.get(&metrics_token) {
            errs.push(
                w.key("metrics_token"),
                format!("must differ from every API token (same as {first})"),
            );
        }
    }

    let limits = read_limits(&mut w, errs);
    w.finish(errs);
    WebUi {
        listen,
        tls_cert,
        tls_key,
        metrics_token,
        auth_token,
        session_idle_minutes,
        session_max_hours,
        tokens,
        limits,
        audit_max_entries,
    }
}

fn absolute_paths(list: Vec<String>, key: &str, errs: &mut Errors) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (i, p) in list.into_iter().enumerate() {
        if p.starts_with('/') {
            out.push(PathBuf::from(p));
        } else {
            errs.push(format!("{key}[{i}]"), "must be an absolute path");
        }
    }
    out
}

fn read_engine(
    root: &mut TableReader<'_>,
    errs: &mut Errors,
    threat: &mut threat::ThreatConfig,
) -> Engine {
    let mut logs = root.table("logs", errs);
    let auth = logs.string_list("auth", errs);
    let auth_logs = absolute_paths(auth, &logs.key("auth"), errs);
    let waf = logs.string_list("waf", errs);
    let waf_logs = absolute_paths(waf, &logs.key("waf"), errs);
    let mail = logs.string_list("mail", errs);
    let mail_logs = absolute_paths(mail, &logs.key("mail"), errs);
    let access = logs.string_list("access", errs);
    let access_logs = absolute_paths(access, &logs.key("access"), errs);
    logs.finish(errs);

    let mut files = root.table("files", errs);
    let watch = files.string_list("watch", errs);
    let watch_roots = absolute_paths(watch, &files.key("watch"), errs);
    let watch_backend = files.string("backend", errs);
    files.finish(errs);

    let mut th = root.table("thresholds", errs);
    let auth_failures = th.int("auth_failures", errs) as u32;
    let auth_window_seconds = th.int("auth_window_seconds", errs) as u64;
    let auth_max_tracked_addresses = th.int("auth_max_tracked_addresses", errs) as usize;
    let auth_max_known_logins = th.int("auth_max_known_logins", errs) as usize;
    let auth_new_address_mail = th.bool("auth_new_address_mail", errs);
    let mail_per_account_hourly = th.int("mail_per_account_hourly", errs) as u32;
    let mail_auth_failures = th.int("mail_auth_failures", errs) as u32;
    let mail_queue_size = th.int("mail_queue_size", errs) as u64;
    let access_thresholds = {
        use access::{AccessThresholds, NAMES};
        AccessThresholds::from_values(NAMES.map(|name| th.int(name, errs) as u64))
    };
    th.finish(errs);

    let mut ar = root.table("auto_response", errs);
    let auto_quarantine = ar.bool("quarantine", errs);
    let auto_dry_run = ar.bool("dry_run", errs);
    threat::read_auto_response(&mut ar, errs, threat);
    ar.finish(errs);

    let mut ck = root.table("checks", errs);
    let critical_interval_min = ck.int("critical_interval_min", errs) as u64;
    let deep_interval_min = ck.int("deep_interval_min", errs) as u64;
    let checks_root = ck.string("root", errs);
    if !checks_root.starts_with('/') {
        errs.push(ck.key("root"), "must be an absolute path");
    }
    let web_roots = if ck.has("web_roots") {
        let key = ck.key("web_roots");
        let list = ck.string_list("web_roots", errs);
        Some(absolute_paths(list, &key, errs))
    } else {
        None
    };
    ck.finish(errs);
    let mut inc = root.table("incidents", errs);
    let incident_window_minutes = inc.int("window_minutes", errs) as u64;
    inc.finish(errs);
    let mut fi = root.table("findings", errs);
    let max_active_findings = fi.int("max_active", errs) as usize;
    fi.finish(errs);
    Engine {
        max_active_findings,
        incident_window_minutes,
        auth_logs,
        waf_logs,
        access_logs,
        access_thresholds,
        mail_logs,
        mail_per_account_hourly,
        mail_auth_failures,
        mail_queue_size,
        watch_roots,
        watch_backend,
        auth_failures,
        auth_window_seconds,
        auth_max_tracked_addresses,
        auth_max_known_logins,
        auth_new_address_mail,
        auto_quarantine,
        auto_dry_run,
        critical_interval_min,
        deep_interval_min,
        checks_root: PathBuf::from(checks_root),
        web_roots,
    }
}

fn read_limits(w: &mut TableReader<'_>, errs: &mut Errors) -> HttpLimits {
    let mut l = w.table("limits", errs);
    let out = HttpLimits {
        handshake_timeout_seconds: l.int("handshake_timeout_seconds", errs) as u64,
        head_timeout_seconds: l.int("head_timeout_seconds", errs) as u64,
        max_head_bytes: l.int("max_head_bytes", errs) as usize,
        max_headers: l.int("max_headers", errs) as usize,
        max_body_bytes: l.int("max_body_bytes", errs) as usize,
        idle_timeout_seconds: l.int("idle_timeout_seconds", errs) as u64,
        write_timeout_seconds: l.int("write_timeout_seconds", errs) as u64,
        body_min_bytes_per_second: l.int("body_min_bytes_per_second", errs) as u64,
        max_connections: l.int("max_connections", errs) as usize,
        max_connections_per_address: l.int("max_connections_per_address", errs) as usize,
        workers: l.int("workers", errs) as usize,
        max_sse_subscribers: l.int("max_sse_subscribers", errs) as usize,
        auth_failures_per_minute: l.int("auth_failures_per_minute", errs) as u32,
    };
    l.finish(errs);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<Config, Vec<String>> {
        let t = parse_str(text).map_err(|e| vec![e.to_string()])?;
        from_table(&t, vec![]).map_err(|es| es.iter().map(|e| e.to_string()).collect())
    }

    const A: &str = "aaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbb";

    #[test]
    fn defaults_apply() {
        let c = check("").unwrap();
        assert_eq!(c.state_path, PathBuf::from("/var/lib/svc"));
        assert_eq!(c.webui.listen.to_string(), "0.0.0.0:9443");
        assert_eq!(c.webui.session_idle_minutes, 30);
        assert_eq!(c.webui.session_max_hours, 12);
    }

    #[test]
    fn http_limits_defaults_and_keys() {
        let l = check("").unwrap().webui.limits;
        assert_eq!(l.max_connections, 4096);
        assert_eq!(l.max_connections_per_address, 64);
        assert_eq!(l.write_timeout_seconds, 30);
        assert_eq!(l.body_min_bytes_per_second, 1024);
        assert_eq!(l.workers, 0);
        let l = check(
            "[webui.limits]\nmax_connections = 100\nmax_connections_per_address = 5\nwrite_timeout_seconds = 7\nbody_min_bytes_per_second = 4096\nworkers = 3\n",
        )
        .unwrap()
        .webui
        .limits;
        assert_eq!(
            (
                l.max_connections,
                l.max_connections_per_address,
                l.write_timeout_seconds,
                l.body_min_bytes_per_second,
                l.workers
            ),
            (100, 5, 7, 4096, 3)
        );
        let e = check("[webui.limits]\nmax_connections_per_address = 0\n").unwrap_err();
        assert!(
            e.iter()
                .any(|e| e.contains("webui.limits.max_connections_per_address")),
            "{e:?}"
        );
    }

    #[test]
    fn scope_error_names_indexed_key() {
        let e = check(&format!(
            "[[webui.tokens]]\nname=\"a\"\ntoken=\"{A}\"\nscope=\"admin\"\n[[webui.tokens]]\nname=\"b\"\ntoken=\"{B}\"\nscope=\"root\"\n"
        ))
        .unwrap_err();
        assert_eq!(
            e,
            vec!["webui.tokens[1].scope: must be \"admin\" or \"read\""]
        );
    }

    #[test]
    fn unknown_keys_short_and_duplicate_tokens_are_errors() {
        let e = check(&format!(
            "bogus = 1\n[webui]\nlisten=\"x\"\nfoo=2\n[[webui.tokens]]\nname=\"a\"\ntoken=\"{A}\"\nscope=\"admin\"\nextra=1\n[[webui.tokens]]\nname=\"a\"\ntoken=\"{A}\"\nscope=\"read\"\n[[webui.tokens]]\nname=\"c\"\ntoken=\"short\"\nscope=\"read\"\n"
        ))
        .unwrap_err();
        let joined = e.join("\n");
        assert!(joined.contains("bogus: unknown key"), "{joined}");
        assert!(joined.contains("webui.foo: unknown key"), "{joined}");
        assert!(joined.contains("webui.listen: must be"), "{joined}");
        assert!(
            joined.contains("webui.tokens[0].extra: unknown key"),
            "{joined}"
        );
        assert!(
            joined.contains("webui.tokens[1].name: duplicate token name \"a\""),
            "{joined}"
        );
        assert!(
            joined.contains("webui.tokens[1].token: duplicate token value"),
            "{joined}"
        );
        assert!(
            joined.contains("webui.tokens[2].token: must be at least 16"),
            "{joined}"
        );
        assert!(!joined.contains(A), "token values never printed");
    }

    #[test]
    fn legacy_token_is_effective_until_migrated() {
        let c = check(&format!("[webui]\nauth_token=\"{A}\"\n")).unwrap();
        let t = c.effective_tokens();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].name, LEGACY_TOKEN_NAME);
        assert_eq!(t[0].scope, Scope::Admin);
    }

    #[test]
    fn debug_of_the_whole_config_prints_no_secret() {
        const M: &str = "mmmmmmmmmmmmmmmmmmmm-metrics";
        const L: &str = "llllllllllllllllllll-legacy";
        const HOOK: &str = "hook-secret-in-path-0123456789";
        const USER: &str = "userinfo-secret";
        let c = check(&format!(
            "[webui]\nmetrics_token=\"{M}\"\nauth_token=\"{L}\"\n[[webui.tokens]]\nname=\"a\"\ntoken=\"{A}\"\nscope=\"admin\"\n[[webui.tokens]]\nname=\"b\"\ntoken=\"{B}\"\nscope=\"read\"\n[alerts.webhook]\nurl=\"https://{USER}:pw@hooks.example.com/{HOOK}?key={HOOK}\"\n"
        ))
        .unwrap();
        assert!(c.alerts.webhook.is_some());
        let printed = format!("{c:?} {c:#?} {:?}", c.effective_tokens());
        for secret in [A, B, M, L, HOOK, USER] {
            assert!(!printed.contains(secret), "{secret} printed: {printed}");
        }
        assert!(printed.contains("<redacted>"), "{printed}");
        assert!(printed.contains("hooks.example.com"), "{printed}");
    }

    #[test]
    fn audit_retention_is_configurable_within_bounds() {
        assert_eq!(
            check("").unwrap().webui.audit_max_entries,
            keys::int_default("webui.audit_max_entries") as u64
        );
        assert_eq!(
            check("[webui]\naudit_max_entries = 5000\n")
                .unwrap()
                .webui
                .audit_max_entries,
            5000
        );
        let e = check("[webui]\naudit_max_entries = 10\n").unwrap_err();
        assert!(e[0].starts_with("webui.audit_max_entries"), "{e:?}");
    }

    #[test]
    fn parse_errors_are_one_line_with_position() {
        let e = parse_str("a = 1\nb = = 2\n").unwrap_err().to_string();
        assert!(e.starts_with("line 2 column"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn garbage_never_panics() {
        let mut x: u64 = 0x9e3779b97f4a7c15;
        for len in 0..2000usize {
            let mut s = String::new();
            for _ in 0..(len % 97) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let alphabet = b"[]=\"'.abc\n 0123{}_,#tokens webui scope";
                s.push(alphabet[(x % alphabet.len() as u64) as usize] as char);
            }
            let _ = check(&s);
        }
    }
}
