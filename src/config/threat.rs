//! `[threat]`, the auto-block keys of `[auto_response]`, and `[reputation]`: the attack
//! database, verdict sources and automatic blocking (see `threat`).
//!
//! Every key here is applied live by a configuration reload (section `threat` in
//! `daemon::reload::SECTIONS`), except `auto_response.dry_run`, which the firewall engine
//! reads at start (a restart key in `config::keys::KEYS`). Remote URLs must be `https://`; plain `http://` is
//! accepted only for loopback addresses. Secrets (`reputation.ipfeed_key`) are never printed
//! by `Debug`; tokens named by `token_env` are read from the environment at query time.

use std::path::PathBuf;

use super::reader::{Errors, TableReader};

/// Names of the verdict sources, in answer order (the keys of `[threat.weights]`; their
/// defaults are in `config::keys::KEYS`).
pub const SOURCE_NAMES: &[&str] = &[
    "local_db",
    "blocklist",
    "firewall",
    "fleet",
    "geoip",
    "rdap",
    "ipfeed",
    "spamfilter",
    "upstream",
    "feeds",
];

/// `[threat]` and the auto-block keys of `[auto_response]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreatConfig {
    /// `threat.max_records`: addresses kept; the least recently seen is evicted (counted).
    pub max_records: usize,
    /// `threat.half_life_hours`: a score halves after this much quiet.
    pub half_life_hours: u64,
    /// `threat.verdict_deadline_ms`: a source that has not answered by then is `timeout`.
    pub verdict_deadline_ms: u64,
    /// `threat.event_retention_days`: stored attack events older than this are deleted.
    pub event_retention_days: u64,
    /// `threat.max_events`: stored attack events kept at most (the oldest are deleted).
    pub max_events: u64,
    /// `threat.watched_countries`: ISO 3166-1 alpha-2 codes (upper case) whose blocks go into
    /// the block digest; a match also adds `watched_country_score` on the GeoIP source.
    pub watched_countries: Vec<String>,
    /// `threat.watched_country_score`: the GeoIP source's score for a watched country.
    pub watched_country_score: u32,
    /// `threat.digest_interval_minutes`: how often a block digest is sent.
    pub digest_interval_minutes: u64,
    /// `threat.undo_minutes`: how long an operator change can be undone.
    pub undo_minutes: u64,
    /// `[threat.weights]`: percent per source, in [`SOURCE_NAMES`] order.
    pub weights: Vec<u32>,
    /// `auto_response.block`: automatic blocking on (still dry run until
    /// `auto_response.dry_run = false`).
    pub auto_block: bool,
    /// `auto_response.block_score`: verdict score at or above which an address is blocked.
    pub block_score: u32,
    /// `auto_response.max_blocks_per_hour`: automatic blocks per sliding hour.
    pub max_blocks_per_hour: u32,
    /// `auto_response.block_hours`: lifetime of an automatic block.
    pub block_hours: u64,
    /// `auto_response.http_scanner_action`: `block` (default) or `challenge` (an
    /// `http_scanner_profile` address is routed to the proof-of-work challenge when it runs).
    pub http_scanner_action: String,
}

impl Default for ThreatConfig {
    /// The defaults of `config::keys::KEYS`.
    fn default() -> Self {
        // Every field is overwritten by the two readers below.
        let mut c = ThreatConfig {
            max_records: 0,
            half_life_hours: 0,
            verdict_deadline_ms: 0,
            event_retention_days: 0,
            max_events: 0,
            watched_countries: Vec::new(),
            watched_country_score: 0,
            digest_interval_minutes: 0,
            undo_minutes: 0,
            weights: Vec::new(),
            auto_block: false,
            block_score: 0,
            max_blocks_per_hour: 0,
            block_hours: 0,
            http_scanner_action: String::new(),
        };
        let mut errs = Errors::default();
        let mut root = TableReader::new(None, "");
        read_threat(&mut root, &mut errs, &mut c);
        read_auto_response(
            &mut root.table("auto_response", &mut errs),
            &mut errs,
            &mut c,
        );
        c
    }
}

impl ThreatConfig {
    /// The weight of source `name` as a fraction (0 for an unknown name).
    pub fn weight(&self, name: &str) -> f64 {
        SOURCE_NAMES
            .iter()
            .position(|n| *n == name)
            .and_then(|i| self.weights.get(i))
            .map_or(0.0, |w| f64::from(*w) / 100.0)
    }
}

/// `reputation.ipfeed_*`: an AbuseIPDB-compatible reputation API.
#[derive(Clone, PartialEq, Eq)]
pub struct IpFeedConfig {
    /// `reputation.ipfeed_key` (a secret; never printed).
    pub key: String,
    /// `reputation.ipfeed_url`.
    pub url: String,
    /// `reputation.ipfeed_daily_quota`: requests per UTC day, reserved in the store first.
    pub daily_quota: u32,
    /// `reputation.ipfeed_cache_hours`: how long an answer is reused.
    pub cache_hours: u64,
    /// `reputation.ipfeed_max_per_scan`: uncached lookups per automatic scan cycle.
    pub max_per_scan: u32,
}

impl std::fmt::Debug for IpFeedConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpFeedConfig")
            .field("key", &super::Redacted(&self.key))
            .field("url", &self.url)
            .field("daily_quota", &self.daily_quota)
            .field("cache_hours", &self.cache_hours)
            .field("max_per_scan", &self.max_per_scan)
            .finish()
    }
}

/// `[reputation.spamfilter]`: a spam-filter controller's per-address history (Rspamd
/// controller `/history`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpamFilterConfig {
    pub url: String,
    /// Environment variable holding the controller password, read at query time.
    pub token_env: String,
    /// Seconds a fetched history is reused.
    pub refresh_seconds: u64,
}

/// `[reputation.upstream]`: a shared score served over HTTP (a panel-side cache).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamConfig {
    pub url: String,
    /// Environment variable holding a bearer token (empty: none).
    pub token_env: String,
    /// Minutes an answer is reused locally.
    pub cache_ttl_min: u64,
    /// Consecutive failures that open the circuit breaker.
    pub failure_threshold: u32,
    /// Seconds the open breaker waits before letting one probe through.
    pub cooldown_seconds: u64,
}

/// `[reputation.rdap]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdapConfig {
    /// Base URL; the address is appended (`https://rdap.org/ip/` + `192.0.2.7`).
    pub url: String,
}

/// One `[[reputation.feeds]]` entry: a downloaded list of addresses and ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedConfig {
    pub name: String,
    pub url: String,
    pub refresh_hours: u64,
    /// Score of a listed address (before the `feeds` weight).
    pub score: u32,
}

/// `[reputation]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReputationConfig {
    /// `reputation.ca_file`: PEM roots trusted for outbound HTTPS instead of the built-in
    /// Mozilla roots (a private collector, tests).
    pub ca_file: Option<PathBuf>,
    /// `reputation.timeout_seconds`: deadline of one outbound request.
    pub timeout_seconds: u64,
    pub ipfeed: Option<IpFeedConfig>,
    pub spamfilter: Option<SpamFilterConfig>,
    pub upstream: Option<UpstreamConfig>,
    pub rdap: Option<RdapConfig>,
    pub feeds: Vec<FeedConfig>,
    /// `[reputation.report]`: abuse reporting (read at start).
    pub report: super::abuse::ReportConfig,
}

impl Default for ReputationConfig {
    /// The defaults of `config::keys::KEYS`.
    fn default() -> Self {
        let mut crawler = super::crawler::CrawlerConfig::default();
        read_reputation(
            &mut TableReader::new(None, ""),
            &mut Errors::default(),
            &mut crawler,
        )
    }
}

/// A remote URL: `https://`, or `http://` to a loopback address only.
fn url(t: &mut TableReader<'_>, key: &'static str, errs: &mut Errors) -> String {
    let u = t.string(key, errs);
    if u.is_empty() {
        errs.push(t.key(key), "must be set");
    } else if let Err(e) = super::alerts::validate_webhook_url(&u) {
        errs.push(t.key(key), e);
    }
    u
}

fn env_name(t: &mut TableReader<'_>, key: &'static str, errs: &mut Errors) -> String {
    let v = t.string(key, errs);
    let ok = v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !v.starts_with(|c: char| c.is_ascii_digit());
    if !ok || v.len() > 128 {
        errs.push(
            t.key(key),
            "must be an environment variable name (letters, digits, _)",
        );
    }
    v
}

/// Reads `[threat]` (with `[threat.weights]`).
pub(super) fn read_threat(root: &mut TableReader<'_>, errs: &mut Errors, c: &mut ThreatConfig) {
    let mut t = root.table("threat", errs);
    c.max_records = t.int("max_records", errs) as usize;
    c.half_life_hours = t.int("half_life_hours", errs) as u64;
    c.verdict_deadline_ms = t.int("verdict_deadline_ms", errs) as u64;
    c.event_retention_days = t.int("event_retention_days", errs) as u64;
    c.max_events = t.int("max_events", errs) as u64;
    let key = t.key("watched_countries");
    let mut countries = Vec::new();
    for (i, s) in t
        .string_list("watched_countries", errs)
        .into_iter()
        .enumerate()
    {
        if s.len() == 2 && s.bytes().all(|b| b.is_ascii_alphabetic()) {
            let up = s.to_ascii_uppercase();
            if !countries.contains(&up) {
                countries.push(up);
            }
        } else {
            errs.push(
                format!("{key}[{i}]"),
                "must be an ISO 3166-1 alpha-2 country code such as \"CN\"",
            );
        }
    }
    c.watched_countries = countries;
    c.watched_country_score = t.int("watched_country_score", errs) as u32;
    c.digest_interval_minutes = t.int("digest_interval_minutes", errs) as u64;
    c.undo_minutes = t.int("undo_minutes", errs) as u64;
    let mut w = t.table("weights", errs);
    c.weights = SOURCE_NAMES
        .iter()
        .map(|name| w.int(name, errs) as u32)
        .collect();
    w.finish(errs);
    t.finish(errs);
}

/// Reads the auto-block keys of `[auto_response]` (the caller finishes the table).
pub(super) fn read_auto_response(
    ar: &mut TableReader<'_>,
    errs: &mut Errors,
    c: &mut ThreatConfig,
) {
    c.auto_block = ar.bool("block", errs);
    c.block_score = ar.int("block_score", errs) as u32;
    c.max_blocks_per_hour = ar.int("max_blocks_per_hour", errs) as u32;
    c.block_hours = ar.int("block_hours", errs) as u64;
    // A `Choice` key: `string` refuses anything but its choices.
    c.http_scanner_action = ar.string("http_scanner_action", errs);
}

/// Reads `[reputation]`. Issue-specific sub-tables (crawler verification, abuse reports)
/// join this reader.
pub(super) fn read_reputation(
    root: &mut TableReader<'_>,
    errs: &mut Errors,
    crawler: &mut super::crawler::CrawlerConfig,
) -> ReputationConfig {
    let mut r = root.table("reputation", errs);
    *crawler = super::crawler::read(&mut r, errs);
    let ca = r.string("ca_file", errs);
    let ca_file = if ca.is_empty() {
        None
    } else if !ca.starts_with('/') {
        errs.push(r.key("ca_file"), "must be an absolute path");
        None
    } else {
        Some(PathBuf::from(ca))
    };
    let timeout_seconds = r.int("timeout_seconds", errs) as u64;
    let key = r.string("ipfeed_key", errs);
    let feed_url = r.string("ipfeed_url", errs);
    let daily_quota = r.int("ipfeed_daily_quota", errs) as u32;
    let cache_hours = r.int("ipfeed_cache_hours", errs) as u64;
    let max_per_scan = r.int("ipfeed_max_per_scan", errs) as u32;
    let ipfeed = if key.is_empty() {
        None
    } else {
        if let Err(e) = super::alerts::validate_webhook_url(&feed_url) {
            errs.push(r.key("ipfeed_url"), e);
        }
        if key.chars().any(char::is_control) {
            errs.push(r.key("ipfeed_key"), "must not contain control characters");
        }
        Some(IpFeedConfig {
            key,
            url: feed_url,
            daily_quota,
            cache_hours,
            max_per_scan,
        })
    };
    let spamfilter = if r.has("spamfilter") {
        let mut s = r.table("spamfilter", errs);
        let url = url(&mut s, "url", errs);
        let token_env = env_name(&mut s, "token_env", errs);
        let refresh_seconds = s.int("refresh_seconds", errs) as u64;
        s.finish(errs);
        Some(SpamFilterConfig {
            url,
            token_env,
            refresh_seconds,
        })
    } else {
        None
    };
    let upstream = if r.has("upstream") {
        let mut u = r.table("upstream", errs);
        let url = url(&mut u, "url", errs);
        let token_env = env_name(&mut u, "token_env", errs);
        let cache_ttl_min = u.int("cache_ttl_min", errs) as u64;
        let failure_threshold = u.int("failure_threshold", errs) as u32;
        let cooldown_seconds = u.int("cooldown_seconds", errs) as u64;
        u.finish(errs);
        Some(UpstreamConfig {
            url,
            token_env,
            cache_ttl_min,
            failure_threshold,
            cooldown_seconds,
        })
    } else {
        None
    };
    let rdap = if r.has("rdap") {
        let mut t = r.table("rdap", errs);
        let enabled = t.bool("enabled", errs);
        let url = url(&mut t, "url", errs);
        t.finish(errs);
        enabled.then_some(RdapConfig { url })
    } else {
        None
    };
    let mut feeds: Vec<FeedConfig> = Vec::new();
    for mut f in r.table_list("feeds", errs) {
        let name = f.string("name", errs);
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            errs.push(
                f.key("name"),
                "must be 1-64 characters of letters, digits, - _ .",
            );
        } else if feeds.iter().any(|x| x.name == name) {
            errs.push(f.key("name"), format!("duplicate feed name {name:?}"));
        }
        let url = url(&mut f, "url", errs);
        let refresh_hours = f.int("refresh_hours", errs) as u64;
        let score = f.int("score", errs) as u32;
        f.finish(errs);
        feeds.push(FeedConfig {
            name,
            url,
            refresh_hours,
            score,
        });
    }
    let report = super::abuse::read(&mut r, errs);
    r.finish(errs);
    ReputationConfig {
        report,
        ca_file,
        timeout_seconds,
        ipfeed,
        spamfilter,
        upstream,
        rdap,
        feeds,
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn check(text: &str) -> Result<Config, crate::config::ConfigErrors> {
        crate::config::from_text(text)
    }

    #[test]
    fn defaults() {
        let c = check("").unwrap();
        assert_eq!(c.threat.max_records, 1_000_000);
        assert_eq!(c.threat.half_life_hours, 168);
        assert_eq!(c.threat.block_score, 80);
        assert_eq!(c.threat.max_blocks_per_hour, 500);
        assert_eq!(c.threat.verdict_deadline_ms, 2000);
        assert!((c.threat.weight("local_db") - 1.0).abs() < 1e-9);
        assert!(c.reputation.ipfeed.is_none() && c.reputation.upstream.is_none());
    }

    #[test]
    fn keys_and_errors() {
        let c = check(
            "[threat]\nmax_records = 5000\nwatched_countries = [\"cn\", \"RU\"]\n[threat.weights]\nupstream = 50\n[auto_response]\nblock_score = 60\n[reputation]\nipfeed_key = \"SECRETKEY123\"\n[reputation.upstream]\nurl = \"http://127.0.0.1:9/u\"\n[reputation.spamfilter]\nurl = \"https://spam.example.com\"\ntoken_env = \"RSPAMD_PW\"\n[[reputation.feeds]]\nname = \"drop\"\nurl = \"https://feeds.example.com/drop.txt\"\n",
        )
        .unwrap();
        assert_eq!(c.threat.watched_countries, vec!["CN", "RU"]);
        assert!((c.threat.weight("upstream") - 0.5).abs() < 1e-9);
        assert_eq!(c.threat.block_score, 60);
        assert_eq!(c.reputation.upstream.as_ref().unwrap().cache_ttl_min, 15);
        assert_eq!(c.reputation.feeds[0].refresh_hours, 24);
        assert!(!format!("{c:?}").contains("SECRETKEY123"));
        let e = check(
            "[threat]\nwatched_countries = [\"China\"]\nbogus = 1\n[reputation.upstream]\nurl = \"http://panel.example.com/u\"\n[reputation.spamfilter]\nurl = \"https://x.example.com\"\ntoken_env = \"A-B\"\n[[reputation.feeds]]\nname = \"a b\"\nurl = \"ftp://x\"\n",
        )
        .unwrap_err().to_string();
        for want in [
            "threat.watched_countries[0]",
            "threat.bogus: unknown key",
            "reputation.upstream.url: plain http://",
            "reputation.spamfilter.token_env",
            "reputation.feeds[0].name",
            "reputation.feeds[0].url",
        ] {
            assert!(e.contains(want), "{want} missing in\n{e}");
        }
    }
}
