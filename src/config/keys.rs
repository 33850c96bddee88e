//! Every configuration key, once: dotted path, kind with range or choices, default, class
//! (live on reload or restart only) and a one-line doc.
//!
//! Guarantees:
//! - The readers (`TableReader::int`, `bool`, `string`, `string_list`, `raw`) take a key's
//!   default and range from [`KEYS`] and nowhere else; the `Default` impls of the section
//!   types are the readers run over an empty table.
//! - A reload names exactly the keys whose [`Class`] is not [`Class::Live`] (see
//!   `config::live`); a firewall settings change may carry the [`Class::Tentative`] keys.
//! - `docs/configuration.md` (key tables) and `man/svc.toml.5` are generated from [`KEYS`]
//!   (`svc gen config-docs`, `svc gen man DIR`); tests fail when the committed files differ.
//!
//! `[]` in a path stands for every element of an array of tables (`webui.tokens[].name`),
//! `*` for any key of a table (`reputation.bot_ranges.urls.*`).

/// What a key holds; integer ranges are inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Int(i64, i64),
    Str,
    /// A string that must be one of these.
    Choice(&'static [&'static str]),
    /// An array of strings.
    List,
    /// An array of ports (integers) or `"low-high"` ranges.
    Ports,
    /// An argv: an array of strings, or one string split on spaces (no shell).
    Command,
}

impl Kind {
    /// The type as the docs name it.
    pub fn type_name(self) -> &'static str {
        match self {
            Kind::Bool => "boolean",
            Kind::Int(..) => "integer",
            Kind::Str | Kind::Choice(_) => "string",
            Kind::List => "array of strings",
            Kind::Ports => "array of ports",
            Kind::Command => "command",
        }
    }

    /// The range or choices as the docs show them (empty when free).
    pub fn range(self) -> String {
        match self {
            Kind::Int(lo, hi) => format!("{lo}-{hi}"),
            Kind::Choice(c) => c.join(", "),
            Kind::Ports => "1-65535".to_string(),
            _ => String::new(),
        }
    }
}

/// When a change of the key takes effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Applied by a reload.
    Live,
    /// Read once at start; a reload names the key and waits for a restart.
    Restart,
    /// Read once at start with its whole group; a reload names the group.
    Group(&'static str),
    /// Like `Group` for a reload, but a tentative settings change applies it live.
    Tentative(&'static str),
}

impl Class {
    pub fn is_live(self) -> bool {
        self == Class::Live
    }
}

/// Keys that name a program to run, or a file or directory the daemon writes outside its
/// state directory: settable only in the files root owns (`svc.toml` and hand-written
/// drop-ins), never through the settings API or the console (decision 450).
pub const FILE_ONLY: &[&str] = &[
    "state_path",
    "firewall.nft_path",
    "waf.reload_command",
    "waf.rules_file",
    "waf.overrides_file",
    "challenge.reload_command",
    "challenge.map_dir",
    "challenge.apache_file",
    "challenge.nginx_http_file",
    "challenge.nginx_server_file",
    "mail.quarantine_path",
];

/// The longest path a path key takes, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;

/// The most entries a list of paths takes.
pub const MAX_PATH_ENTRIES: usize = 256;

/// Keys holding absolute paths (or globs) to files and directories; empty means unset.
const ABSOLUTE_PATHS: &[&str] = &[
    "state_path",
    "webui.tls_cert",
    "webui.tls_key",
    "logs.auth",
    "logs.waf",
    "logs.mail",
    "logs.access",
    "files.watch",
    "cms.vulnerability_file",
    "reputation.ca_file",
    "mail.spool_path",
    "mail.quarantine_path",
    "mail.password_files",
    "waf.rules_file",
    "waf.overrides_file",
    "challenge.tls_cert",
    "challenge.tls_key",
    "challenge.map_dir",
    "challenge.apache_file",
    "challenge.nginx_http_file",
    "challenge.nginx_server_file",
    "fleet.ca_file",
];

/// Keys holding paths that need not be absolute (a program name, `host:port`, a file name).
const OTHER_PATHS: &[&str] = &[
    "firewall.nft_path",
    "mail.clamd_socket",
    "probes.sensitive_files",
];

/// Checks one string of a path key (a [`Kind::Str`] value or one entry of a
/// [`Kind::List`]): at most [`MAX_PATH_BYTES`], no control characters, and absolute for the
/// keys that name files (decision 453). Other keys pass.
pub fn check_path(key: &str, s: &str) -> Result<(), String> {
    let absolute = ABSOLUTE_PATHS.contains(&key);
    if !absolute && !OTHER_PATHS.contains(&key) {
        return Ok(());
    }
    if s.len() > MAX_PATH_BYTES {
        return Err(format!("must be at most {MAX_PATH_BYTES} bytes"));
    }
    if s.chars().any(char::is_control) {
        return Err("must not contain control characters (newline, NUL, ...)".into());
    }
    if absolute && !s.is_empty() && !s.starts_with('/') {
        return Err("must be an absolute path".into());
    }
    Ok(())
}

/// Whether `key` is a list of paths (bounded to [`MAX_PATH_ENTRIES`] entries).
pub fn is_path_list(key: &str) -> bool {
    (ABSOLUTE_PATHS.contains(&key) || OTHER_PATHS.contains(&key))
        && find(key).is_some_and(|k| k.kind == Kind::List)
}

/// One configuration key.
#[derive(Debug)]
pub struct Key {
    pub path: &'static str,
    pub kind: Kind,
    /// The default as a TOML literal; empty when the key has none (unset).
    pub default: &'static str,
    pub class: Class,
    pub doc: &'static str,
}

impl Key {
    /// The default as a TOML value (`None` when unset).
    pub fn default_value(&self) -> Option<toml::Value> {
        if self.default.is_empty() {
            return None;
        }
        let t: toml::value::Table = toml::from_str(&format!("v = {}", self.default)).ok()?;
        t.get("v").cloned()
    }

    /// The name a reload reports when this key changed (`None` for a live key).
    pub fn restart_name(&self) -> Option<&'static str> {
        match self.class {
            Class::Live => None,
            Class::Restart => Some(self.path),
            Class::Group(g) | Class::Tentative(g) => Some(g),
        }
    }

    /// The section a key belongs to (its path up to the last dot; empty at the top).
    pub fn table(&self) -> &'static str {
        self.path.rsplit_once('.').map_or("", |(t, _)| t)
    }

    /// Settable only in the files root owns ([`FILE_ONLY`]); every [`Kind::Command`] key is.
    pub fn file_only(&self) -> bool {
        self.kind == Kind::Command || FILE_ONLY.contains(&self.path)
    }

    /// The key's own name (after the last dot).
    pub fn name(&self) -> &'static str {
        self.path.rsplit_once('.').map_or(self.path, |(_, n)| n)
    }
}

const fn key(
    path: &'static str,
    kind: Kind,
    default: &'static str,
    class: Class,
    doc: &'static str,
) -> Key {
    Key {
        path,
        kind,
        default,
        class,
        doc,
    }
}

use Class::{Group, Live, Restart, Tentative};
use Kind::{Bool, Choice, Command, Int, List, Ports, Str};

/// Every key, in the order the docs list them.
pub static KEYS: &[Key] = &[
    key("state_path", Str, "\"/var/lib/svc\"", Restart,
        "State directory (absolute): store, TLS pair, control socket `svc.sock`."),
    key("webui.listen", Str, "\"0.0.0.0:9443\"", Restart,
        "HTTPS address and port."),
    key("webui.tls_cert", Str, "", Restart,
        "PEM files. Both empty: a self-signed pair is generated once under `{state_path}/tls/` (key mode 0600) and reused."),
    key("webui.tls_key", Str, "", Restart,
        "PEM files. Both empty: a self-signed pair is generated once under `{state_path}/tls/` (key mode 0600) and reused."),
    key("webui.metrics_token", Str, "", Live,
        "Credential valid on `/metrics` only (16+ characters)."),
    key("webui.auth_token", Str, "", Live,
        "Legacy single admin token; migrated on first start into `[[webui.tokens]]` as `legacy-auth-token`."),
    key("webui.session_idle_minutes", Int(1, 10_080), "30", Restart,
        "Browser session idle deadline."),
    key("webui.session_max_hours", Int(1, 8760), "12", Restart,
        "Browser session absolute deadline."),
    key("webui.audit_max_entries", Int(200, 100_000_000), "100000", Live,
        "Audit records kept (200-100000000); the action-log writer deletes older ones as it writes."),
    key("webui.tokens[].name", Str, "", Live,
        "Token name: unique, not empty."),    key("webui.tokens[].token", Str, "", Live,
        "Token value: unique, 16+ characters (a secret, never printed)."),    key("webui.tokens[].scope", Choice(&["admin", "read"]), "", Live,
        "What the token may do."),    key("webui.limits.handshake_timeout_seconds", Int(1, 300), "10", Group("webui.limits.*"),
        "Whole TLS handshake, from accept (bytes that trickle in do not extend it)."),
    key("webui.limits.head_timeout_seconds", Int(1, 300), "10", Group("webui.limits.*"),
        "Whole request head, from its first byte; then 408 and close."),
    key("webui.limits.max_head_bytes", Int(1024, 1_048_576), "16384", Group("webui.limits.*"),
        "Larger heads get 431."),
    key("webui.limits.max_headers", Int(8, 1024), "64", Group("webui.limits.*"),
        "More headers get 431."),
    key("webui.limits.max_body_bytes", Int(1024, 67_108_864), "1048576", Group("webui.limits.*"),
        "Larger bodies get 413 (refused from the head, before the body is read)."),
    key("webui.limits.idle_timeout_seconds", Int(1, 3600), "30", Group("webui.limits.*"),
        "Keep-alive idle deadline (after the handshake or a response, until the next request's first byte)."),
    key("webui.limits.write_timeout_seconds", Int(1, 3600), "30", Group("webui.limits.*"),
        "Whole response write to a client that reads slowly; then the connection is closed."),
    key("webui.limits.body_min_bytes_per_second", Int(1, 1_073_741_824), "1024", Group("webui.limits.*"),
        "Slowest accepted upload: the body deadline is `head_timeout_seconds` plus the body's Content-Length at this rate (1 MiB: 1,034 s); then 408 and close."),
    key("webui.limits.max_connections", Int(1, 65_536), "4096", Group("webui.limits.*"),
        "Open connections (event streams not included). The next one is closed at once and counted (`http.refused.max_connections`). Needs an open-file limit above it: the daemon raises its soft limit to the hard limit at start and logs the figure (systemd: `LimitNOFILE`)."),
    key("webui.limits.max_connections_per_address", Int(1, 65_536), "64", Group("webui.limits.*"),
        "Open connections per client address; IPv6 addresses count per /64, IPv4-mapped IPv6 as IPv4. The next one is closed at once and counted (`http.refused.per_address`). A reverse proxy in front of svc connects from one address: raise this for it."),
    key("webui.limits.workers", Int(0, 256), "0", Group("webui.limits.*"),
        "Request worker threads; 0 means twice the CPU cores, at least 4. Workers only run complete requests, so a small pool suffices."),
    key("webui.limits.max_sse_subscribers", Int(1, 4096), "64", Group("webui.limits.*"),
        "Event-stream subscribers, counted separately from `max_connections`."),
    key("webui.limits.auth_failures_per_minute", Int(1, 100_000), "20", Group("webui.limits.*"),
        "Failed authentications per address per minute before 429."),
    key("logs.auth", List, "[\"/var/log/auth.log\", \"/var/log/secure\"]", Live,
        "Authentication logs to tail (absent files are retried)."),
    key("logs.waf", List, "[]", Restart,
        "WAF logs to tail: absolute paths or glob patterns (`*`, `?`, `[...]` in the last component; at most 256 files). Empty: the error and audit logs of the web servers found under `checks.root` (`/etc/apache2`, `/etc/httpd`, `/etc/nginx`, `/usr/local/lsws`, `/usr/local/apache/conf`) and each `SecAuditLog` file of the ModSecurity configurations svc knows there. Read at start (restart to change)."),
    key("logs.mail", List, "[]", Restart,
        "MTA logs for the mail-log reader (Exim `mainlog`, Postfix `mail.log`). Empty: the first existing one of `/var/log/exim4/mainlog`, `/var/log/exim/main.log`, `/var/log/exim_mainlog`, `/var/log/mail.log`, `/var/log/maillog` under `checks.root`; none: the systemd journal's mail facility (`journalctl`, when a journal directory exists: `/var/log/journal`, `/run/log/journal`, or `var/log/journal` under a fixture `checks.root`), else the reader is off. Restart key."),
    key("logs.access", List, "[]", Live,
        "Web-server access logs (`common`, `combined`, vhost-prefixed, the layout decided per file from its first line; Apache, Nginx, LiteSpeed): absolute paths or glob patterns (`*`, `?`, `[...]` in any component, expanded again every 60 s so a new domain's log is followed; compressed, error, bytes and FTP logs are skipped; at most 512 files). Empty: under `checks.root`, `/var/log/apache2/{access,other_vhosts_access}.log` (with `/etc/apache2`), `/var/log/httpd/{access_log,ssl_access_log}` (`/etc/httpd`), `/var/log/nginx/access.log` (`/etc/nginx`), `/usr/local/lsws/logs/access.log` (`/usr/local/lsws`), `/var/log/apache2/domlogs/*` (cPanel), `/var/www/vhosts/system/*/logs/access{,_ssl}_log` (Plesk), `/var/log/httpd/domains/*.log` (DirectAdmin); none: the collector is off. Applied live."),
    key("files.watch", List, "[\"/var/www\"]", Live,
        "Roots of the file watcher (recursive)."),
    key("files.backend", Choice(&["auto", "fanotify", "inotify"]), "\"auto\"", Live,
        "`auto` (fanotify where permitted, else inotify), `fanotify`, `inotify`."),
    key("thresholds.auth_failures", Int(1, 1_000_000), "5", Live,
        "Failures from one address within the window that make `ssh_bruteforce` / `pam_bruteforce`."),
    key("thresholds.auth_window_seconds", Int(1, 604_800), "600", Live,
        "The window, from an address's first failure."),
    key("thresholds.auth_max_tracked_addresses", Int(16, 10_000_000), "65536", Live,
        "Addresses with failure state kept at once (least recently active evicted, counted)."),
    key("thresholds.auth_max_known_logins", Int(16, 10_000_000), "65536", Live,
        "(user, address) pairs remembered for `auth_new_address_login`."),
    key("thresholds.auth_new_address_mail", Bool, "false", Live,
        "Also report Dovecot logins from new addresses."),
    key("thresholds.mail_per_account_hourly", Int(1, 10_000_000), "500", Restart,
        "Messages one account (SMTP AUTH login or local user) may send in a clock hour before a `mail_per_account` finding; also the floor of `volume` items in `/api/v1/email/relay-abuse`. Restart key."),
    key("thresholds.mail_auth_failures", Int(1, 1_000_000), "10", Restart,
        "SMTP AUTH failures from one address within ten minutes that make a `mail_auth_bruteforce` finding. Restart key."),
    key("thresholds.mail_queue_size", Int(1, 100_000_000), "1000", Restart,
        "Queued messages from which `mail_queue` reports a large queue. Restart key."),
    key("thresholds.http_window_seconds", Int(10, 86_400), "300", Live,
        "Window of every access-log check, from an address's first counted request (10-86400)."),
    key("thresholds.http_wp_login_posts", Int(1, 1_000_000), "10", Live,
        "POSTs to `wp-login.php` from one address within the window that make `wp_login_bruteforce`."),
    key("thresholds.http_xmlrpc_posts", Int(1, 1_000_000), "10", Live,
        "POSTs to `xmlrpc.php` that make `xmlrpc_abuse`."),
    key("thresholds.http_user_enum_requests", Int(1, 1_000_000), "5", Live,
        "`?author=N` and REST users-route requests that make `wp_user_enumeration`."),
    key("thresholds.http_scanner_probe_404s", Int(1, 1_000_000), "10", Live,
        "404 answers to known probe paths that make `http_scanner_profile`."),
    key("thresholds.http_scanner_agent_requests", Int(1, 1_000_000), "3", Live,
        "Requests with a vulnerability scanner's user agent that make `http_scanner_profile`."),
    key("thresholds.http_claimed_bot_requests", Int(1, 10_000_000), "300", Live,
        "Requests claiming a crawler that is pending, unresolved or unverifiable that make `http_claimed_bot_unverified`."),
    key("thresholds.http_max_tracked_addresses", Int(16, 10_000_000), "65536", Live,
        "Addresses with access-log state kept at once (16-10000000; least recently active evicted, counted)."),
    key("auto_response.quarantine", Bool, "false", Live,
        "Move files with a high-confidence signature match into `{state_path}/quarantine/`. Only files beneath a `files.watch` root are moved, and `svc quarantine restore` puts them back beneath the same root without following any symlink (decisions 84-88)."),
    key("auto_response.dry_run", Bool, "true", Restart,
        "Automatic callers (threat scoring, WAF escalation) only record the firewall blocks they would make (listed in `/api/v1/blocked-ips` with `dry_run: true`); nftables is untouched. Operator blocks always apply."),
    key("auto_response.block", Bool, "true", Live,
        "Automatic blocking from attack findings and verdict scores (recorded only while `auto_response.dry_run` is true)."),
    key("auto_response.block_score", Int(1, 100), "80", Live,
        "Verdict score (1-100) at or above which an address is blocked automatically."),
    key("auto_response.max_blocks_per_hour", Int(1, 1_000_000), "500", Live,
        "Automatic blocks per sliding hour (1-1,000,000); the rest wait as retry records (`auto_block.pending`)."),
    key("auto_response.block_hours", Int(1, 8760), "24", Live,
        "Lifetime of an automatic block (1-8,760 hours)."),
    key("auto_response.http_scanner_action", Choice(&["block", "challenge"]), "\"block\"", Live,
        "`block` or `challenge`: with `challenge` (and `challenge.enabled`), an `http_scanner_profile` address goes to the proof-of-work challenge instead of a block. Applied live."),
    key("checks.critical_interval_min", Int(0, 10_080), "10", Restart,
        "Critical checks (UID 0 accounts, sshd root password login, suspicious cron); 0 disables the schedule."),
    key("checks.deep_interval_min", Int(0, 10_080), "60", Restart,
        "Deep checks (world-writable PHP, unexpected SUID, hardening audit); 0 disables the schedule."),
    key("checks.root", Str, "\"/\"", Restart,
        "Checks read the host layout under this directory (fixtures in tests)."),
    key("checks.web_roots", List, "", Restart,
        "Web roots for the PHP checks."),
    key("cms.checksums_url", Str, "\"https://api.wordpress.org/core/checksums/1.0/\"", Live,
        "WordPress core checksum source, asked as `URL?version=V&locale=L` and answering `{\"checksums\": {\"path\": \"md5\"}}`; `https://`, or `http://` to loopback only. Answers are cached per version and locale in the store."),
    key("cms.vulnerability_file", Str, "", Live,
        "JSON array of vulnerable plugin and theme versions (`slug`, `type`, `fixed_in`, `title`); empty: the list `svc update-cms-vulnerabilities` wrote under state_path, else the shipped one."),
    key("incidents.window_minutes", Int(1, 10_080), "60", Live,
        "Findings of one source within this window form one incident; an incident quiet this long is resolved."),
    key("findings.max_active", Int(10, 10_000_000), "50000", Live,
        "Active findings kept at most (10-10000000). Beyond it the least recently dispatched event findings (log and file-watcher detections) leave the active set first, then, only when none is left, the least recently dispatched condition findings (scheduled checks); each counts as a loss on `findings.ingest` and stays in history. Applied live by `svc reload` (a lower bound trims the set at the next dispatched finding)."),
    key("threat.max_records", Int(1000, 20_000_000), "1000000", Live,
        "Addresses in the attack database (1,000-20,000,000); the least recently seen is evicted and counted (`evicted_total`)."),
    key("threat.half_life_hours", Int(1, 8760), "168", Live,
        "A score halves after this much quiet (7 days), so an address quiet for weeks drifts back to clean."),
    key("threat.verdict_deadline_ms", Int(50, 30_000), "2000", Live,
        "How long a verdict waits for remote sources (50-30,000); a late one is reported `timeout`."),
    key("threat.event_retention_days", Int(1, 3650), "90", Live,
        "Stored attack events older than this are deleted (hourly)."),
    key("threat.max_events", Int(1000, 100_000_000), "5000000", Live,
        "Stored attack events kept at most (the oldest deleted)."),
    key("threat.watched_countries", List, "[]", Live,
        "ISO 3166-1 alpha-2 codes: blocks of their addresses go into the block digest, and GeoIP scores them."),
    key("threat.watched_country_score", Int(0, 100), "20", Live,
        "The GeoIP source's score for a watched country (0-100)."),
    key("threat.digest_interval_minutes", Int(1, 10_080), "60", Live,
        "How often the block digest is sent (per destination)."),
    key("threat.undo_minutes", Int(1, 1440), "60", Live,
        "Lifetime of an undo entry (1-1,440)."),
    key("threat.weights.local_db", Int(0, 100), "100", Live,
        "Weight (percent) of the `local_db` verdict source."),    key("threat.weights.blocklist", Int(0, 100), "100", Live,
        "Weight (percent) of the `blocklist` verdict source."),    key("threat.weights.firewall", Int(0, 100), "100", Live,
        "Weight (percent) of the `firewall` verdict source."),    key("threat.weights.fleet", Int(0, 100), "100", Live,
        "Weight (percent) of the `fleet` verdict source (a block of source `fleet`: a CrowdSec LAPI decision)."),    key("threat.weights.geoip", Int(0, 100), "100", Live,
        "Weight (percent) of the `geoip` verdict source."),    key("threat.weights.rdap", Int(0, 100), "0", Live,
        "Weight (percent) of the `rdap` verdict source."),    key("threat.weights.ipfeed", Int(0, 100), "80", Live,
        "Weight (percent) of the `ipfeed` verdict source."),    key("threat.weights.spamfilter", Int(0, 100), "60", Live,
        "Weight (percent) of the `spamfilter` verdict source."),    key("threat.weights.upstream", Int(0, 100), "80", Live,
        "Weight (percent) of the `upstream` verdict source."),    key("threat.weights.feeds", Int(0, 100), "70", Live,
        "Weight (percent) of the `feeds` verdict source."),    key("reputation.bot_verify_enabled", Bool, "false", Live,
        "Verify claimed crawler identities: published ranges first, then forward-confirmed reverse DNS on `bot_verification.requests` (256 waiting, 1 running). Off: no request claims a crawler."),
    key("reputation.dns_server", Str, "", Live,
        "`ip:port` (or a bare address, port 53) of the DNS server asked for PTR, A and AAAA; unset: the first three `nameserver` lines of `/etc/resolv.conf`."),
    key("reputation.verified_bots[].name", Str, "", Live,
        "Operator identity: 1-64 of `a-z 0-9 - _ .`, not a built-in name, unique."),
    key("reputation.verified_bots[].ua_substrings", List, "", Live,
        "User-agent substrings (case-insensitive, 3-128 characters) that claim it."),
    key("reputation.verified_bots[].rdns_suffixes", List, "", Live,
        "Exactly one of this or `ip_ranges`. Registrable domains (or names under one): public suffixes (Public Suffix List) and shared-hosting suffixes (`rules/crawlers/shared-hosting-suffixes.txt`) are refused. The PTR must be under one and its A/AAAA must contain the address; a PTR-only match is not trusted."),
    key("reputation.verified_bots[].ip_ranges", List, "", Live,
        "CIDRs; refused when broader than /8 (IPv4) or /24 (IPv6), or overlapping private, loopback, link-local, CGNAT, documentation, benchmarking, multicast or reserved space (IPv6: outside 2000::/3)."),
    key("reputation.bot_ranges.enabled", Bool, "true", Group("reputation.bot_ranges.*"),
        "Auto-updater of the published ranges (needs outbound HTTPS; runs only while verification is on)."),
    key("reputation.bot_ranges.interval_hours", Int(1, 720), "24", Group("reputation.bot_ranges.*"),
        "Refresh interval (1-720); the first refresh is due one interval after the on-disk snapshot was written."),
    key("reputation.bot_ranges.urls.*", Str, "", Group("reputation.bot_ranges.*"),
        "Feed URL per published-range crawler (`googlebot`, `bingbot`, `applebot`, `gptbot`, `chatgpt-user`, `oai-searchbot`, `perplexitybot`, `amazonbot`); `https://`, plain `http://` only to loopback."),
    key("reputation.ca_file", Str, "", Live,
        "PEM roots trusted for outbound HTTPS instead of the built-in Mozilla roots (a private collector); absolute path."),
    key("reputation.timeout_seconds", Int(1, 60), "10", Live,
        "Timeout of one remote request (1-60)."),
    key("reputation.ipfeed_key", Str, "", Live,
        "Key of the IP-reputation feed (AbuseIPDB-compatible); the source is on when set. Never logged."),
    key("reputation.ipfeed_url", Str, "\"https://api.abuseipdb.com/api/v2/check\"", Live,
        "The feed's check endpoint."),
    key("reputation.ipfeed_daily_quota", Int(1, 10_000_000), "1000", Live,
        "Requests per UTC day, reserved in the store before each request (survives restarts)."),
    key("reputation.ipfeed_cache_hours", Int(1, 720), "24", Live,
        "How long an answer is reused (memory and store)."),
    key("reputation.ipfeed_max_per_scan", Int(0, 1000), "5", Live,
        "Uncached lookups per automatic cycle (`checks.reputation_queries` cap); operator lookups are not capped."),
    key("reputation.spamfilter.url", Str, "", Live,
        "Spam-filter controller (Rspamd controller `/history`): ham dilutes, deferrals are neutral, spam counts."),
    key("reputation.spamfilter.token_env", Str, "", Live,
        "Environment variable holding the controller password, read at query time (a change needs a restart of the daemon's environment)."),
    key("reputation.spamfilter.refresh_seconds", Int(5, 3600), "60", Live,
        "How often the history is fetched again (5-3,600)."),
    key("reputation.upstream.url", Str, "", Live,
        "Upstream HTTP cache (panel-side shared score); the address is appended."),
    key("reputation.upstream.token_env", Str, "", Live,
        "Environment variable holding a bearer token, read at query time."),
    key("reputation.upstream.cache_ttl_min", Int(1, 1440), "15", Live,
        "Local cache lifetime of an upstream answer."),
    key("reputation.upstream.failure_threshold", Int(1, 1000), "5", Live,
        "Consecutive failures that open the fail-open circuit breaker."),
    key("reputation.upstream.cooldown_seconds", Int(1, 3600), "30", Live,
        "Time the breaker stays open before one probe is let through (one at a time)."),
    key("reputation.rdap.enabled", Bool, "true", Live,
        "RDAP network name and organisation, cached 24 hours in the store."),
    key("reputation.rdap.url", Str, "\"https://rdap.org/ip/\"", Live,
        "RDAP base; the address is appended."),
    key("reputation.feeds[].name", Str, "", Live,
        "Free threat feeds (plain lists of addresses and CIDRs); `threat_feed_stale` WARNING after 7 days without a refresh, at most one reminder a day across restarts."),
    key("reputation.feeds[].url", Str, "", Live,
        "Free threat feeds (plain lists of addresses and CIDRs); `threat_feed_stale` WARNING after 7 days without a refresh, at most one reminder a day across restarts."),
    key("reputation.feeds[].refresh_hours", Int(1, 720), "24", Live,
        "Download interval (1-720)."),
    key("reputation.feeds[].score", Int(1, 100), "70", Live,
        "Score of a listed address (1-100)."),
    key("reputation.report.enabled", Bool, "false", Group("reputation.report"),
        "Turns reporting on (needs at least one destination and automatic blocking running: firewall on)."),
    key("reputation.report.spool_limit", Int(100, 1_000_000), "10000", Group("reputation.report"),
        "Durable reports over every destination (100-1,000,000); beyond it the oldest waiting report is dropped and counted as a loss. The ingress holds 10,000 or this limit when smaller."),
    key("reputation.report.destinations[].name", Str, "", Group("reputation.report"),
        "1-64 of letters, digits, `-`, `_`, `.`; unique. Spooled reports of a destination removed from the configuration are dropped (counted) at start."),
    key("reputation.report.destinations[].url", Str, "", Group("reputation.report"),
        "`https://`, or `http://` to a loopback address only. The central service: `https://api.abuseipdb.com/api/v2/report`."),
    key("reputation.report.destinations[].format", Choice(&["abuseipdb", "json"]), "\"json\"", Group("reputation.report"),
        "`abuseipdb`: form `ip`, `categories` (numeric ids), `comment`, `timestamp` with header `Key:`. `json`: `{\"ip\", \"categories\": [names], \"category_ids\", \"comment\", \"time\", \"reporter\": \"svc\"}`, with `Authorization: Bearer <key>` when a key is set."),
    key("reputation.report.destinations[].api_key_env", Str, "", Group("reputation.report"),
        "Environment variable holding the API key (required for `abuseipdb`); read at each attempt, never logged. A missing key is a failed attempt (retried)."),
    key("reputation.report.destinations[].dedup_window_hours", Int(1, 8760), "24", Group("reputation.report"),
        "1-8,760."),
    key("geoip.city_db", Str, "", Group("geoip.*"),
        "MaxMind DB file (GeoIP2/GeoLite2 City or Country) for `geo.country`, `geo.city` on enriched findings. Absolute path."),
    key("geoip.asn_db", Str, "", Group("geoip.*"),
        "MaxMind DB file (GeoLite2 ASN or GeoIP2 ISP) for `geo.asn`, `geo.org`. Absolute path."),
    key("alerts.max_per_hour", Int(1, 100_000), "30", Live,
        "Notifications per one-hour window (1-100000). Alerts over it are held back, counted by check and severity, and summarised in one notification when the window ends."),
    key("alerts.min_severity", Str, "\"HIGH\"", Live,
        "`CRITICAL`, `HIGH` or `WARNING` (any letter case): findings below it never alert."),
    key("alerts.webhook.url", Str, "", Live,
        "Webhook receiving JSON POSTs. `https://`, or `http://` to a loopback address only (127.0.0.0/8, `::1`, `localhost`); other `http://` URLs are refused. The URL may carry a secret: logs and status show only scheme and host. Without `[alerts.webhook]` the alert subsystem is off."),
    key("alerts.webhook.timeout_seconds", Int(1, 30), "10", Live,
        "Deadline of one attempt (1-30)."),
    key("alerts.webhook.max_attempts", Int(1, 10), "5", Live,
        "Attempts per notification, the first included (1-10); pauses of 1, 2, 4, 8, 16, 16, ... s between them."),
    key("firewall.enabled", Bool, "true", Group("firewall.*"),
        "Run the engine."),
    key("firewall.mode", Choice(&["blocklist", "full"]), "\"blocklist\"", Tentative("firewall.*"),
        "*Run time.* `blocklist`: an input chain (priority -10, before the distribution's filter) with only infra accept, blocked addresses and subnets drop, allowed accept; everything else passes to the other tables. `full`: the same, then default drop with loopback, established/related, ICMP and ICMPv6 essentials (echo requests limited to 20/s), the rate meters and the connection cap, and the port lists below."),
    key("firewall.tcp_in", Ports, "[22, 25, 53, 80, 110, 143, 443, 465, 587, 993, 995]", Tentative("firewall.*"),
        "*Run time.* `full` mode: TCP ports open to new connections; integers or `\"low-high\"` ranges. The daemon's own HTTPS port (`webui.listen`, unless on loopback) is always open, and is accepted before the rate meters and the connection cap (decision 291)."),
    key("firewall.udp_in", Ports, "[53]", Tentative("firewall.*"),
        "*Run time.* `full` mode: UDP ports open."),
    key("firewall.tcp_out", Ports, "[20, 21, 22, 25, 53, 80, 110, 113, 443, 465, 587, 993, 995]", Tentative("firewall.*"),
        "*Run time.* `full` mode: ports new outbound TCP connections may use (loopback, established and `infra_ips` destinations always pass); empty leaves outbound TCP unrestricted."),
    key("firewall.infra_ips", List, "[]", Tentative("firewall.*"),
        "*Run time.* Addresses or ranges accepted first and never blocked (monitoring, backup, the panel's peers)."),
    key("firewall.dos_exempt_ranges", List, "[]", Tentative("firewall.*"),
        "*Run time.* Ranges the rate meters and the connection cap skip (`full` mode)."),
    key("firewall.syn_flood_rate", Int(0, 1_000_000), "100", Tentative("firewall.*"),
        "*Run time.* TCP SYNs per second per source address (IPv6 per /64) before drops; 0 turns the meter off."),
    key("firewall.syn_flood_burst", Int(1, 1_000_000), "150", Tentative("firewall.*"),
        "*Run time.* Burst of the SYN meter (packets)."),
    key("firewall.conn_rate", Int(0, 1_000_000), "50", Tentative("firewall.*"),
        "*Run time.* New connections per second per source (IPv6 per /64); 0 off."),
    key("firewall.conn_rate_burst", Int(1, 1_000_000), "100", Tentative("firewall.*"),
        "*Run time.* Burst of the new-connection meter."),
    key("firewall.conn_limit", Int(0, 1_000_000), "300", Tentative("firewall.*"),
        "*Run time.* Concurrent TCP connections per IPv4 source; 0 off. A change of a meter's settings (a revert included) starts that meter afresh."),
    key("firewall.max_blocks", Int(1, 2_000_000), "250000", Group("firewall.*"),
        "Address and subnet blocks kept at most (1-2,000,000); over it a block is refused (`refusal: limit`, counted in `refused_total`). Dry-run records have the same bound."),
    key("firewall.max_allows", Int(1, 100_000), "10000", Group("firewall.*"),
        "Allow entries kept at most (1-100,000)."),
    key("firewall.check_interval_seconds", Int(1, 10), "2", Group("firewall.*"),
        "Seconds between checks that the table is still in place (1-10); a lost table is re-created from the store at the next check."),
    key("firewall.nft_path", Str, "\"nft\"", Group("firewall.*"),
        "The nft program: a name looked up in `PATH`, `/usr/sbin`, `/sbin`, `/usr/local/sbin`, or an absolute path."),
    key("mail.enabled", Bool, "false", Live,
        "Watch the spool and scan messages."),
    key("mail.spool_path", Str, "", Live,
        "The MTA's spool directory (Exim's `spool_directory`; the daemon watches its `input/` tree with every hash subdirectory, split or not; Postfix's `incoming/`, `active/`, `deferred/`, `hold/`). Empty: the first of `/var/spool/exim4`, `/var/spool/exim`, `/var/spool/postfix` with such a layout."),
    key("mail.clamd_socket", Str, "", Live,
        "clamd's `LocalSocket` path, or `host:port` on loopback (other addresses are refused: message bodies never leave the host). Empty: `LocalSocket` of `/etc/clamav/clamd.conf`, else `/run/clamav/clamd.ctl`. `off`: no clamd (content signatures only)."),
    key("mail.clamd_timeout_seconds", Int(1, 3600), "60", Live,
        "I/O deadline of one clamd call (1-3600)."),
    key("mail.quarantine", Bool, "true", Live,
        "Move infected messages out of the spool. False: report only."),
    key("mail.quarantine_path", Str, "", Live,
        "Where quarantined queue files go (may be another filesystem; owner, group, mode and mtime are kept). Absolute."),
    key("mail.scan_threads", Int(1, 16), "2", Live,
        "Scanner threads (1-16)."),
    key("mail.content_scan", Bool, "true", Live,
        "Check `email_content` on outbound (locally submitted or authenticated) mail."),
    key("mail.max_depth", Int(1, 100), "16", Live,
        "Deepest MIME nesting walked (1-100); deeper entities are scanned as one part and the message is reported incompletely scanned."),
    key("mail.max_parts", Int(1, 100_000), "512", Live,
        "Most leaf parts extracted per message (1-100,000)."),
    key("mail.max_extract_bytes", Int(1024, 1_099_511_627_776), "104857600", Live,
        "Most decoded bytes per message, parts, base64 interpretations and archive members together (1 KiB-1 TiB)."),
    key("mail.archive_max_bytes", Int(1024, 1_099_511_627_776), "33554432", Live,
        "Most bytes unpacked from one attachment's archive tree."),
    key("mail.archive_max_files", Int(1, 1_000_000), "1000", Live,
        "Most members unpacked from one attachment's archive tree."),
    key("mail.archive_max_ratio", Int(1, 100_000), "100", Live,
        "Largest inflation ratio of a member past its first MiB (a bomb stops there and is reported, never inflated further)."),
    key("mail.archive_max_depth", Int(1, 10), "2", Live,
        "Archives inside archives unpacked to this depth (1-10)."),
    key("mail.password_audit", Bool, "true", Live,
        "Run the audit. False: its findings are resolved at the next deep scan."),
    key("mail.password_files", List, "[\"/etc/dovecot/users\", \"/etc/dovecot/passwd\", \"/home/*/etc/*/shadow\", \"/etc/virtual/*/passwd\"]", Live,
        "Dovecot passwd-files and panel shadow files (cPanel `/home/<account>/etc/<domain>/shadow`, DirectAdmin `/etc/virtual/<domain>/passwd`): absolute paths or globs. A missing file is skipped; an unreadable one is an `email_password_audit_incomplete` finding and its mailboxes keep their findings."),
    key("mail.password_check_interval_min", Int(1, 525_600), "1440", Live,
        "How long a mailbox whose audit could not complete (unsupported, malformed, over-limit or over-budget value) waits before it is tried again, unless its stored value changes (1-525600)."),
    key("mail.password_slow_candidates", Int(0, 100_000), "500", Live,
        "Entries of the bundled list tried on slow schemes (bcrypt, Argon2, SHA-crypt over 40,000 rounds); account-derived candidates are always tried (0-100000)."),
    key("mail.password_audit_scan_minutes", Int(1, 720), "10", Live,
        "Time one deep scan gives the audit; mailboxes not reached are audited at the next deep scan (1-720)."),
    key("mail.breach_api", Str, "", Live,
        "Base URL of a breach-count range API (Pwned Passwords k-anonymity format, e.g. `https://api.pwnedpasswords.com/range/`). Asked only for confirmed weak passwords, with only the first 5 hex characters of the password's SHA-1 appended; the count goes into the finding's details. `https://`, or `http://` to a loopback address only; no query string."),
    key("waf.enabled", Bool, "true", Restart,
        "Run the WAF log collector. *Restart.*"),
    key("waf.rules_file", Str, "", Live,
        "Where svc's rules (IDs 900000-900999, `rules/modsecurity/svc-rules.conf`, built into the binary) are deployed; `svc waf install-rules --write` writes them there (default `/etc/svc/waf/svc-rules.conf`). Its rules also feed the rule-action registry. Absolute path."),
    key("waf.overrides_file", Str, "", Live,
        "The `SecRuleRemoveById` file the daemon writes atomically (mode 0644) on apply; include it after every rule file. Must differ from `rules_file`."),
    key("waf.reload_command", Command, "", Live,
        "The web-server reload, run without a shell once per apply: a service-manager command such as `[\"systemctl\", \"reload\", \"apache2\"]` (an array, or a string split on spaces). The program is a name looked up in `PATH` or an absolute path."),
    key("waf.reload_timeout_seconds", Int(1, 600), "60", Live,
        "Deadline of one reload (1-600); the process is killed when it passes. An apply waits for the reload at most 20 s and then answers 202 while it goes on."),
    key("waf.escalation_denies", Int(1, 10_000), "3", Live,
        "Denies from one address within the window that raise `modsec_block_escalation` (1-10000)."),
    key("waf.escalation_window_minutes", Int(1, 1440), "10", Live,
        "The escalation window (1-1440)."),
    key("waf.rules_stale_days", Int(1, 3650), "90", Live,
        "Rule trees older than this many days raise a WARNING `waf_status` (1-3650): panel vendor trees the active configuration loads are judged by their newest file; distribution rule trees, and vendor trees when the panel cannot map them, by their oldest."),
    key("waf.event_retention_days", Int(1, 3650), "30", Live,
        "WAF events older than this are deleted (checked every 10 minutes)."),
    key("waf.max_events", Int(1000, 100_000_000), "1000000", Live,
        "WAF events kept at most; the oldest go first (1000-100000000)."),
    key("waf.max_tracked_addresses", Int(16, 10_000_000), "65536", Live,
        "Addresses with an open escalation window at once (the least recently seen is dropped, counted as `evicted_addresses_total` in `/api/v1/waf/stats`)."),
    key("probes.backends", List, "[\"execution\", \"connection\", \"sensitive_files\", \"af_alg\"]", Restart,
        "Kernel probe backends to start when built with the `bpf` feature and running as root: `execution`, `connection`, `sensitive_files`, `af_alg`. A backend that cannot attach is reported by name in `svc doctor`, `/api/v1/components` and `svc status`; the daemon runs on."),
    key("probes.allowed_out_ports", Ports, "[21, 22, 25, 53, 80, 443, 465, 587, 993, 995, 3306, 5432, 6379, 11211]", Restart,
        "Outbound TCP ports a non-root process may connect to; any other port is `outbound_connection_unusual` (WARNING). Ports or `\"low-high\"` ranges."),
    key("probes.sensitive_files", List, "[\"/etc/shadow\", \"/etc/gshadow\", \"/etc/sudoers\", \"/etc/sudoers.d/*\", \"/root/.ssh/authorized_keys\", \"/root/.ssh/id_*\", \"/home/*/.ssh/authorized_keys\", \"/home/*/.ssh/id_*\", \"wp-config.php\"]", Restart,
        "Files a non-root uid that does not own them must not open (`sensitive_file_access`, HIGH). `*` matches within one path component; a pattern without `/` matches that file name in any directory. The file name, or the directory name above a file name with `*`, must be literal and at most 31 bytes (the kernel filter selects on it)."),
    key("probes.threat_score_high", Int(1, 100), "80", Restart,
        "A non-root outbound connection to an address the threat database scores at or over this is `outbound_connection_unusual` (HIGH) whatever its port. Advisory: the lookup never delays a finding."),
    key("challenge.enabled", Bool, "false", Restart,
        "Run the challenge listener and route the signals above to it."),
    key("challenge.listen", Str, "\"127.0.0.1:8439\"", Restart,
        "Address of the challenge listener (HTTPS; the same connection limits and deadlines as `[webui.limits]`, 2 workers)."),
    key("challenge.trusted_proxies", List, "[]", Live,
        "Addresses or CIDR ranges (at most 64; not `0.0.0.0/0` or `::/0`) of reverse proxies in front of the listener. Only when the connection's peer is listed does the last address of the last `X-Forwarded-For` header name the client; from every other peer, loopback included, the header is ignored (counted `forwarded_untrusted`, logged at most once a minute). Empty: the peer is always the client. A proxy that forwards `challenge.public_url` to the listener must be listed (a local one: `[\"127.0.0.1\", \"::1\"]`), or every visitor's proof binds to the proxy's address. Nonces issued through one proxy are bounded at 5,000 (its oldest gives way, `nonces_replaced_proxy`), besides 8 per forwarded client."),
    key("challenge.tls_cert", Str, "", Restart,
        "PEM pair of the listener; both or neither."),
    key("challenge.tls_key", Str, "", Restart,
        "PEM pair of the listener; both or neither."),
    key("challenge.public_url", Str, "", Live,
        "`http(s)` URL the web server redirects challenged addresses to (needed by `svc webserver-integration install`); no quotes, spaces, `;`, `$`, braces or angle brackets."),
    key("challenge.difficulty", Int(8, 24), "16", Live,
        "Leading zero bits of `SHA-256(\"<nonce>:<counter>\")` a proof needs (8-24; each bit doubles the browser's work)."),
    key("challenge.timeout_minutes", Int(1, 1440), "30", Live,
        "An unsolved route becomes a block after this (1-1,440)."),
    key("challenge.allow_hours", Int(1, 168), "4", Live,
        "How long a solve keeps the checks that routed the address from routing or blocking it again (1-168). Other checks are not affected."),
    key("challenge.max_pending", Int(16, 1_000_000), "10000", Live,
        "Addresses routed at once (16-1,000,000); beyond it an address is blocked as before (counted `refused_full`)."),
    key("challenge.map_dir", Str, "\"/var/cache/svc-challenge\"", Live,
        "Directory (0755) of the map files `nginx.map` (`<address> 1;`) and `apache.map` (`<address> 1`), 0644, rewritten atomically within a second of a change and at least every 5 minutes."),
    key("challenge.apache_file", Str, "\"/etc/apache2/conf-available/svc-challenge.conf\"", Live,
        "Apache snippet (`RewriteEngine On`, `RewriteMap txt:` and the redirect); `Include` it inside each `<VirtualHost>` to protect (mod_rewrite rules of the server configuration do not reach virtual hosts)."),
    key("challenge.nginx_http_file", Str, "\"/etc/nginx/conf.d/svc-challenge.conf\"", Live,
        "nginx `geo $svc_challenge` block (`http {}` level)."),
    key("challenge.nginx_server_file", Str, "\"/etc/nginx/snippets/svc-challenge.conf\"", Live,
        "nginx redirect (`include` it in each `server {}` to protect)."),
    key("challenge.reload_command", Command, "", Live,
        "Argv (no shell) run after the map's address list changed, at most every 10 s, 30 s deadline: nginx reads its `geo` include only at reload (Apache re-reads a `txt:` map by itself)."),
    key("fleet.lapi_url", Str, "", Group("fleet"),
        "Base URL of the CrowdSec Local API (LAPI), without `/v1`: `https://`, or `http://` to a loopback address only. Empty: fleet mode off."),
    key("fleet.ca_file", Str, "", Group("fleet"),
        "PEM roots that verify the LAPI's certificate instead of the built-in ones (absolute path)."),
    key("fleet.bouncer_key", Str, "", Group("fleet"),
        "Bouncer API key (`cscli bouncers add`; a secret, never printed). Set: ban decisions of the LAPI become firewall blocks (source `fleet`) through `central.actions`."),
    key("fleet.poll_seconds", Int(1, 3600), "10", Group("fleet"),
        "Seconds between polls of `/v1/decisions/stream` (the first asks `startup=true`, later ones the changes)."),
    key("fleet.machine_id", Str, "", Group("fleet"),
        "Watcher login (`cscli machines add`): with `password`, each automatic block that took effect is pushed to the LAPI as an alert (`svc/<check>`)."),
    key("fleet.password", Str, "", Group("fleet"),
        "Watcher password (a secret, never printed); set together with `machine_id`."),
    key("fleet.timeout_seconds", Int(1, 120), "10", Group("fleet"),
        "Deadline of one LAPI request (connect, send and the whole answer)."),
];

/// `path` with list indexes (`[3]`) written as `[]`.
pub fn normalize(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push('[');
            }
            ']' => {
                in_index = false;
                out.push(']');
            }
            _ if in_index => {}
            _ => out.push(c),
        }
    }
    out
}

/// The key at `path` (list indexes allowed), or the `*` entry of its table.
pub fn find(path: &str) -> Option<&'static Key> {
    let p = normalize(path);
    KEYS.iter().find(|k| k.path == p).or_else(|| {
        let (table, _) = p.rsplit_once('.')?;
        KEYS.iter()
            .find(|k| k.path.strip_suffix(".*") == Some(table))
    })
}

/// The integer default of `path` (0 when the key is not an integer with a default).
pub fn int_default(path: &str) -> i64 {
    find(path)
        .and_then(Key::default_value)
        .and_then(|v| v.as_integer())
        .unwrap_or(0)
}

/// The boolean default of `path` (false when the key is not a boolean with a default).
pub fn bool_default(path: &str) -> bool {
    find(path)
        .and_then(Key::default_value)
        .and_then(|v| v.as_bool())
        .unwrap_or(false)
}

/// The keys a tentative firewall change may carry, without the `firewall.` prefix.
pub fn firewall_runtime() -> impl Iterator<Item = &'static str> {
    KEYS.iter()
        .filter(|k| matches!(k.class, Class::Tentative(_)))
        .filter_map(|k| k.path.strip_prefix("firewall."))
}

impl Class {
    /// How the reference shows the class.
    pub fn describe(self) -> String {
        match self {
            Class::Live => "live".to_string(),
            Class::Restart => "restart".to_string(),
            Class::Group(g) => format!("restart ({g})"),
            Class::Tentative(g) => format!("restart ({g}); live by tentative apply"),
        }
    }
}

/// The marker comments of `docs/configuration.md` that hold generated key tables:
/// `<!-- keys: PREFIX... -->` up to `<!-- /keys -->`.
const DOCS_OPEN: &str = "<!-- keys: ";
const DOCS_CLOSE: &str = "<!-- /keys -->";
/// The list of the keys a reload cannot apply, as it names them.
const RESTART_OPEN: &str = "<!-- restart-keys -->";
const RESTART_CLOSE: &str = "<!-- /restart-keys -->";

/// The prefixes of every marker in `doc`, in order.
fn doc_markers(doc: &str) -> Vec<Vec<&str>> {
    doc.lines()
        .filter_map(|l| l.strip_prefix(DOCS_OPEN)?.strip_suffix(" -->"))
        .map(|p| p.split_whitespace().collect())
        .collect()
}

/// The marker (index into `markers`) a key's table goes under: the longest matching prefix.
fn marker_of(path: &str, markers: &[Vec<&str>]) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (i, m) in markers.iter().enumerate() {
        for p in m {
            if path.starts_with(p) && best.is_none_or(|(_, len)| p.len() > len) {
                best = Some((i, p.len()));
            }
        }
    }
    best.map(|(i, _)| i)
}

/// `doc` (the text of `docs/configuration.md`) with every marked key table generated from
/// [`KEYS`]; the prose between tables is kept as written.
pub fn render_docs(doc: &str) -> String {
    let markers = doc_markers(doc);
    let mut out = String::with_capacity(doc.len() + 64 * KEYS.len());
    let mut index = 0;
    let mut skipping = false;
    for line in doc.split_inclusive('\n') {
        if skipping {
            if line.trim() == DOCS_CLOSE || line.trim() == RESTART_CLOSE {
                skipping = false;
                out.push_str(line);
            }
            continue;
        }
        out.push_str(line);
        if line.trim() == RESTART_OPEN {
            let indent = &line[..line.len() - line.trim_start().len()];
            let mut names: Vec<&str> = Vec::new();
            for n in KEYS.iter().filter_map(Key::restart_name) {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
            let list: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            out.push_str(&format!("{indent}{}.\n", list.join(", ")));
            skipping = true;
            continue;
        }
        if line.starts_with(DOCS_OPEN) {
            out.push_str(
                "| Key | Type | Default | Range | Reload | Meaning |\n|---|---|---|---|---|---|\n",
            );
            for k in KEYS
                .iter()
                .filter(|k| marker_of(k.path, &markers) == Some(index))
            {
                let default = if k.default.is_empty() {
                    "(unset)".to_string()
                } else {
                    format!("`{}`", k.default)
                };
                out.push_str(&format!(
                    "| `{}` | {} | {} | {} | {} | {} |\n",
                    k.path,
                    k.kind.type_name(),
                    default,
                    k.kind.range(),
                    k.class.describe(),
                    k.doc
                ));
            }
            index += 1;
            skipping = true;
        }
    }
    out
}

/// Text escaped for roff.
fn roff(text: &str) -> String {
    let mut s = text
        .replace('\\', "\\e")
        .replace('-', "\\-")
        .replace('`', "");
    if s.starts_with('.') || s.starts_with('\'') {
        s.insert_str(0, "\\&");
    }
    s
}

/// The man page `svc.toml.5`: every key of [`KEYS`], one section per table.
pub fn man_page() -> String {
    let mut m = String::new();
    m.push_str(&format!(
        ".\\\" Generated by `svc gen man` from src/config/keys.rs; do not edit.\n.TH SVC.TOML 5 \"\" \"svc {}\" \"File Formats\"\n",
        env!("CARGO_PKG_VERSION")
    ));
    m.push_str(".SH NAME\nsvc.toml \\- configuration of the svc host security daemon\n");
    m.push_str(".SH SYNOPSIS\n/etc/svc/svc.toml, /etc/svc/conf.d/*.toml\n");
    m.push_str(concat!(
        ".SH DESCRIPTION\n",
        "TOML. The main file is read first, then the drop\\-ins of \\fIconf.d\\fR beside it in ",
        "lexicographic order: tables merge, scalars replace, arrays append. Unknown keys are ",
        "errors; \\fBsvc validate\\fR prints one line per error, naming the key. ",
        "\\fBsvc reload\\fR (or SIGHUP) applies the keys marked \\fIlive\\fR and names the ",
        "others, which wait for a restart. In a key name, \\fB[]\\fR stands for each entry of an ",
        "array of tables and \\fB*\\fR for any key of a table.\n",
    ));
    let mut table: Option<&str> = None;
    for k in KEYS {
        let t = k.table().split("[]").next().unwrap_or("");
        if table != Some(t) {
            table = Some(t);
            let title = if t.is_empty() {
                "TOP LEVEL".to_string()
            } else {
                format!("[{t}]")
            };
            m.push_str(&format!(".SH \"{}\"\n", roff(&title)));
        }
        let default = if k.default.is_empty() {
            "unset".to_string()
        } else {
            k.default.to_string()
        };
        let range = k.kind.range();
        let range = if range.is_empty() {
            String::new()
        } else {
            format!(", range {range}")
        };
        m.push_str(&format!(
            ".TP\n.B {}\n{}, default {}{}; {}.\n.br\n{}\n",
            roff(k.path),
            k.kind.type_name(),
            roff(&default),
            roff(&range),
            roff(&k.class.describe()),
            roff(k.doc)
        ));
    }
    m.push_str(concat!(
        ".SH FILES\n",
        ".TP\n/etc/svc/svc.toml\nThe main configuration file.\n",
        ".TP\n/etc/svc/conf.d/*.toml\nDrop\\-ins.\n",
        ".SH SEE ALSO\n",
        "\\fBsvc\\fR(8)\n",
    ));
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::reader::ASKED;

    /// A configuration that sets every key to its default (keys without one get a valid
    /// sample), with every optional table and one element of every array of tables.
    fn every_key() -> String {
        let sample = |k: &Key| -> String {
            if !k.default.is_empty() {
                return k.default.to_string();
            }
            match (k.path, k.kind) {
                (p, _) if p.ends_with("url") || p.ends_with(".*") => {
                    "\"https://feeds.example.com/x\"".into()
                }
                (p, _) if p.ends_with("token") => format!("\"{p}-aaaaaaaaaaaaaaaa\""),
                (p, _) if p.ends_with("_env") => "\"SVC_TEST_ENV\"".into(),
                (p, _) if p.ends_with(".name") => "\"sample\"".into(),
                (p, _) if p.ends_with("scope") => "\"read\"".into(),
                (p, _) if p.ends_with("ua_substrings") => "[\"samplebot\"]".into(),
                (p, _) if p.ends_with("rdns_suffixes") => "[\"crawl.example.com\"]".into(),
                (_, Kind::List | Kind::Command) => "[]".into(),
                _ => "\"\"".into(),
            }
        };
        let mut root = toml::value::Table::new();
        for k in KEYS {
            // One of rdns_suffixes / ip_ranges per entry.
            if k.path.ends_with("ip_ranges") {
                continue;
            }
            let path = k.path.replace(".*", ".googlebot");
            let v: toml::Value =
                toml::from_str::<toml::value::Table>(&format!("v = {}", sample(k))).unwrap()["v"]
                    .clone();
            let mut t = &mut root;
            let segs: Vec<&str> = path.split('.').collect();
            for seg in &segs[..segs.len() - 1] {
                t = if let Some(list) = seg.strip_suffix("[]") {
                    let arr = t.entry(list).or_insert_with(|| {
                        toml::Value::Array(vec![toml::Value::Table(Default::default())])
                    });
                    arr.as_array_mut().unwrap()[0].as_table_mut().unwrap()
                } else {
                    t.entry(*seg)
                        .or_insert_with(|| toml::Value::Table(Default::default()))
                        .as_table_mut()
                        .unwrap()
                };
            }
            t.insert(segs[segs.len() - 1].to_string(), v);
        }
        toml::to_string(&root).unwrap()
    }

    #[test]
    fn no_duplicate_paths_and_every_key_documented() {
        for (i, k) in KEYS.iter().enumerate() {
            assert!(
                KEYS[..i].iter().all(|o| o.path != k.path),
                "{} twice",
                k.path
            );
            assert!(!k.doc.is_empty() && !k.doc.contains('\n'), "{}", k.path);
            if let Kind::Int(lo, hi) = k.kind {
                assert!(lo <= hi, "{}", k.path);
            }
            if !k.default.is_empty() {
                assert!(
                    k.default_value().is_some(),
                    "{}: default is not TOML",
                    k.path
                );
            }
        }
    }

    /// Every default (and sample) passes its own validation, and the keys the readers ask
    /// for are exactly the table's.
    #[test]
    fn defaults_validate_and_readers_read_exactly_the_table() {
        let text = every_key();
        ASKED.with(|a| a.borrow_mut().clear());
        let c = crate::config::from_text(&text);
        assert!(c.is_ok(), "{:?}\n{text}", c.err());
        let asked = ASKED.with(|a| a.borrow().clone());
        let is_table = |a: &str| {
            KEYS.iter().any(|k| {
                k.path.starts_with(&format!("{a}.")) || k.path.starts_with(&format!("{a}[]."))
            })
        };
        for a in asked.iter().filter(|a| !is_table(a)) {
            assert!(find(a).is_some(), "{a} is read but not in KEYS");
        }
        for k in KEYS {
            let p = k.path.replace(".*", ".googlebot");
            let read = asked.contains(&p)
                // The other of rdns_suffixes / ip_ranges is only asked when present.
                || k.path.ends_with("ip_ranges");
            assert!(read, "{} is in KEYS but no reader reads it", k.path);
        }
        // The section Default impls are the table's defaults.
        let empty = crate::config::from_text("").unwrap();
        assert_eq!(
            empty.challenge,
            crate::config::challenge::ChallengeConfig::default()
        );
        assert_eq!(empty.waf, crate::config::waf::WafConfig::default());
        assert_eq!(
            empty.firewall,
            crate::config::firewall::FirewallConfig::default()
        );
        assert_eq!(empty.engine, crate::config::Engine::default());
        assert_eq!(empty.webui.limits, crate::config::HttpLimits::default());
        assert_eq!(
            crate::config::DEFAULT_AUDIT_MAX_ENTRIES as i64,
            int_default("webui.audit_max_entries")
        );
        assert_eq!(
            crate::findings::engine::DEFAULT_MAX_ACTIVE as i64,
            int_default("findings.max_active")
        );
    }

    /// Every key has a table in `docs/configuration.md`, and the committed file is what
    /// `svc gen config-docs docs/configuration.md` writes.
    #[test]
    fn the_committed_configuration_reference_is_current() {
        let committed = include_str!("../../docs/configuration.md");
        let markers = doc_markers(committed);
        for k in KEYS {
            assert!(
                marker_of(k.path, &markers).is_some(),
                "{} has no table in the docs",
                k.path
            );
        }
        assert!(
            committed == render_docs(committed),
            "docs/configuration.md is stale: run `cargo run -- gen config-docs docs/configuration.md`"
        );
    }

    /// `man/svc.toml.5` is what `svc gen man` writes; it names every key.
    #[test]
    fn the_committed_svc_toml_man_page_is_current() {
        let page = man_page();
        for k in KEYS {
            assert!(
                page.contains(&format!(".B {}\n", roff(k.path))),
                "{}",
                k.path
            );
        }
        assert!(
            include_str!("../../man/svc.toml.5") == page,
            "man/svc.toml.5 is stale: run `cargo run -- gen man man`"
        );
    }

    /// Every key is live or restart-only: changing it either reaches a reload's live
    /// sections or is named as needing a restart (the reload test walks this table).
    #[test]
    fn every_restart_key_is_reported_by_a_reload() {
        let base = crate::config::from_text("").unwrap();
        for k in KEYS.iter().filter(|k| !k.class.is_live()) {
            let Some(name) = k.restart_name() else {
                continue;
            };
            // A value different from the default, valid for the key.
            let v = match k.kind {
                Kind::Bool => {
                    (!matches!(k.default_value(), Some(toml::Value::Boolean(true)))).to_string()
                }
                Kind::Int(lo, hi) => {
                    let d = int_default(k.path);
                    (if d == hi { lo } else { d + 1 }).to_string()
                }
                Kind::Choice(c) => format!(
                    "{:?}",
                    c.iter().find(|c| format!("{c:?}") != k.default).unwrap()
                ),
                Kind::Ports => "[8080]".into(),
                _ => continue,
            };
            let (table, key) = k.path.rsplit_once('.').unwrap_or(("", k.path));
            if table.contains("[]") || key == "*" {
                continue;
            }
            let text = if table.is_empty() {
                format!("{key} = {v}\n")
            } else {
                format!("[{table}]\n{key} = {v}\n")
            };
            let Ok(next) = crate::config::from_text(&text) else {
                continue;
            };
            assert_eq!(
                crate::config::live::restart_required(&base, &next),
                [name],
                "{}",
                k.path
            );
        }
    }
}
