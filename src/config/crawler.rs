//! The crawler-verification keys of `[reputation]`: `bot_verify_enabled`, `verified_bots`,
//! `bot_ranges` and `dns_server` (spec "Verified crawlers").
//!
//! `verified_bots` entries are checked at load and reload by rule 1
//! (`net::guards`); every error names the entry (`reputation.verified_bots[i]`
//! and its `name`). `bot_ranges` is read once at start (its class in `config::keys::KEYS`).

use std::net::SocketAddr;
use std::sync::Arc;

use super::bots::{is_builtin, Identity, FEEDS};
use super::reader::{Errors, TableReader};
use crate::net::guards::{check_rdns_suffix, parse_range};

/// The crawler keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrawlerConfig {
    /// `reputation.bot_verify_enabled` (default off).
    pub enabled: bool,
    /// `reputation.verified_bots`.
    pub verified_bots: Vec<Identity>,
    /// `reputation.bot_ranges`.
    pub bot_ranges: UpdaterSettings,
    /// `reputation.dns_server`: `ip:port` of the DNS server for reverse DNS; the nameservers
    /// of `/etc/resolv.conf` when unset.
    pub dns_server: Option<SocketAddr>,
}

impl CrawlerConfig {
    /// What the verifier takes live.
    pub fn settings(&self) -> VerifierSettings {
        VerifierSettings {
            enabled: self.enabled,
            operator: self.verified_bots.clone(),
            dns_server: self.dns_server,
        }
    }
}

/// What the operator configured (`reputation.*` crawler keys), as the verifier takes it
/// live.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifierSettings {
    pub enabled: bool,
    /// `reputation.verified_bots`.
    pub operator: Vec<Identity>,
    /// `reputation.dns_server`; `/etc/resolv.conf` when `None`.
    pub dns_server: Option<std::net::SocketAddr>,
}

/// `reputation.bot_ranges`: the published-range updater's settings, read at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdaterSettings {
    pub enabled: bool,
    pub interval_hours: u64,
    /// Feed URL overrides by crawler name (`reputation.bot_ranges.urls`).
    pub urls: Vec<(String, String)>,
}

impl Default for UpdaterSettings {
    fn default() -> Self {
        UpdaterSettings {
            enabled: super::keys::bool_default("reputation.bot_ranges.enabled"),
            interval_hours: super::keys::int_default("reputation.bot_ranges.interval_hours") as u64,
            urls: Vec::new(),
        }
    }
}

/// Most operator identities.
const MAX_BOTS: usize = 64;
/// Most substrings, suffixes or ranges per identity.
const MAX_ITEMS: usize = 256;

/// Reads the crawler keys from the `[reputation]` reader `r`.
pub(super) fn read(r: &mut TableReader<'_>, errs: &mut Errors) -> CrawlerConfig {
    let d = CrawlerConfig::default();
    let enabled = r.bool("bot_verify_enabled", errs);
    let dns = r.string("dns_server", errs);
    let dns_server = if dns.is_empty() {
        None
    } else {
        match crate::dns::parse_server(&dns) {
            Some(a) => Some(a),
            None => {
                errs.push(
                    r.key("dns_server"),
                    "must be an address and port such as 127.0.0.1:53",
                );
                None
            }
        }
    };
    let mut verified_bots: Vec<Identity> = Vec::new();
    let entries = r.table_list("verified_bots", errs);
    if entries.len() > MAX_BOTS {
        errs.push(
            r.key("verified_bots"),
            format!("at most {MAX_BOTS} entries"),
        );
    }
    for mut b in entries {
        let entry = b.key("");
        let entry = entry.trim_end_matches('.').to_string();
        let name = b.string("name", errs);
        let label = format!("entry {name:?}");
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"-_.".contains(&c))
        {
            errs.push(
                b.key("name"),
                format!("{entry}: must be 1-64 characters of a-z, 0-9, - _ ."),
            );
        } else if is_builtin(&name) {
            errs.push(
                b.key("name"),
                format!("{label}: is the name of a built-in identity"),
            );
        } else if verified_bots.iter().any(|x| *x.name == *name) {
            errs.push(b.key("name"), format!("{label}: duplicate name"));
        }
        let ua: Vec<String> = b
            .string_list("ua_substrings", errs)
            .into_iter()
            .map(|s| s.trim().to_ascii_lowercase())
            .collect();
        if ua.is_empty() || ua.iter().any(|s| s.len() < 3 || s.len() > 128) || ua.len() > MAX_ITEMS
        {
            errs.push(
                b.key("ua_substrings"),
                format!("{label}: must list 1-{MAX_ITEMS} substrings of 3-128 characters"),
            );
        }
        let has_rdns = b.has("rdns_suffixes");
        let has_ranges = b.has("ip_ranges");
        let mut rdns_suffixes = Vec::new();
        let mut ip_ranges = Vec::new();
        if has_rdns == has_ranges {
            errs.push(
                entry.clone(),
                format!("{label}: needs exactly one of rdns_suffixes or ip_ranges"),
            );
        }
        if has_rdns {
            let key = b.key("rdns_suffixes");
            let list = b.string_list("rdns_suffixes", errs);
            if list.is_empty() || list.len() > MAX_ITEMS {
                errs.push(
                    key.clone(),
                    format!("{label}: must list 1-{MAX_ITEMS} suffixes"),
                );
            }
            for (i, s) in list.iter().enumerate() {
                match check_rdns_suffix(s) {
                    Ok(n) => rdns_suffixes.push(n),
                    Err(e) => errs.push(format!("{key}[{i}]"), format!("{label}: {e}")),
                }
            }
        }
        if has_ranges {
            let key = b.key("ip_ranges");
            let list = b.string_list("ip_ranges", errs);
            if list.is_empty() || list.len() > MAX_ITEMS {
                errs.push(
                    key.clone(),
                    format!("{label}: must list 1-{MAX_ITEMS} ranges"),
                );
            }
            for (i, s) in list.iter().enumerate() {
                match parse_range(s) {
                    Ok(n) => ip_ranges.push(n),
                    Err(e) => errs.push(format!("{key}[{i}]"), format!("{label}: {e}")),
                }
            }
        }
        b.finish(errs);
        verified_bots.push(Identity {
            name: Arc::from(name.as_str()),
            ua_substrings: ua,
            rdns_suffixes,
            ip_ranges,
            published: false,
            builtin: false,
        });
    }
    let mut bot_ranges = d.bot_ranges.clone();
    {
        let mut t = r.table("bot_ranges", errs);
        bot_ranges.enabled = t.bool("enabled", errs);
        bot_ranges.interval_hours = t.int("interval_hours", errs) as u64;
        let mut u = t.table("urls", errs);
        for (name, _) in FEEDS {
            if u.has(name) {
                let url = u.string(name, errs);
                if let Err(e) = super::alerts::validate_webhook_url(&url) {
                    errs.push(u.key(name), e);
                }
                bot_ranges.urls.push((name.to_string(), url));
            }
        }
        u.finish(errs);
        t.finish(errs);
    }
    CrawlerConfig {
        enabled,
        verified_bots,
        bot_ranges,
        dns_server,
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn check(text: &str) -> Result<Config, crate::config::ConfigErrors> {
        crate::config::from_text(text)
    }

    #[test]
    fn defaults_and_a_full_section() {
        let c = check("").unwrap();
        assert!(!c.crawler.enabled && c.crawler.bot_ranges.enabled);
        assert_eq!(c.crawler.bot_ranges.interval_hours, 24);
        let c = check(
            "[reputation]\nbot_verify_enabled = true\ndns_server = \"127.0.0.1:5353\"\n\
             [[reputation.verified_bots]]\nname = \"partnerbot\"\nua_substrings = [\"PartnerBot\"]\nrdns_suffixes = [\"crawl.partner.example.com\"]\n\
             [[reputation.verified_bots]]\nname = \"uptime\"\nua_substrings = [\"uptimer\"]\nip_ranges = [\"8.8.4.0/24\", \"2600:1f18::/32\"]\n\
             [reputation.bot_ranges]\ninterval_hours = 6\n[reputation.bot_ranges.urls]\ngooglebot = \"http://127.0.0.1:9/g.json\"\n",
        )
        .unwrap();
        assert!(c.crawler.enabled);
        assert_eq!(
            c.crawler.dns_server,
            Some("127.0.0.1:5353".parse().unwrap())
        );
        assert_eq!(c.crawler.verified_bots.len(), 2);
        assert_eq!(
            c.crawler.verified_bots[0].ua_substrings,
            vec!["partnerbot".to_string()]
        );
        assert_eq!(c.crawler.verified_bots[1].ip_ranges.len(), 2);
        assert_eq!(c.crawler.bot_ranges.interval_hours, 6);
        assert_eq!(c.crawler.bot_ranges.urls.len(), 1);
    }

    #[test]
    fn rule_one_errors_name_the_entry() {
        let e = check(
            "[reputation]\ndns_server = \"resolver\"\n\
             [[reputation.verified_bots]]\nname = \"a\"\nua_substrings = [\"abot\"]\nrdns_suffixes = [\"github.io\", \"co.uk\"]\n\
             [[reputation.verified_bots]]\nname = \"b\"\nua_substrings = [\"bbot\"]\nip_ranges = [\"10.0.0.0/8\", \"1.0.0.0/6\", \"192.0.2.0/24\", \"fe80::/10\"]\n\
             [[reputation.verified_bots]]\nname = \"c\"\nua_substrings = [\"cbot\"]\nip_ranges = [\"8.8.8.0/24\"]\nrdns_suffixes = [\"example.com\"]\n\
             [[reputation.verified_bots]]\nname = \"googlebot\"\nua_substrings = [\"gbot\"]\nip_ranges = [\"8.8.8.0/24\"]\n\
             [reputation.bot_ranges.urls]\ngooglebot = \"http://feeds.example.com/g\"\n",
        )
        .unwrap_err().to_string();
        for want in [
            "reputation.dns_server",
            "reputation.verified_bots[0].rdns_suffixes[0]: entry \"a\"",
            "reputation.verified_bots[0].rdns_suffixes[1]: entry \"a\"",
            "reputation.verified_bots[1].ip_ranges[0]: entry \"b\"",
            "reputation.verified_bots[1].ip_ranges[1]: entry \"b\"",
            "reputation.verified_bots[1].ip_ranges[2]: entry \"b\"",
            "reputation.verified_bots[1].ip_ranges[3]: entry \"b\"",
            "reputation.verified_bots[2]: entry \"c\": needs exactly one",
            "reputation.verified_bots[3].name: entry \"googlebot\"",
            "reputation.bot_ranges.urls.googlebot",
        ] {
            assert!(e.contains(want), "missing {want:?} in:\n{e}");
        }
    }
}
