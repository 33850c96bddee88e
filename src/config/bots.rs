//! The crawlers known without configuration: the built-in identities and the vendor feeds
//! of their published ranges, and the type of one identity. The configuration checks
//! `reputation.verified_bots` names and `reputation.bot_ranges.urls` keys against them; the
//! crawler builds its user-agent matcher and its range refresh from them.

use std::sync::Arc;

use crate::net::guards::Net;

/// How an identity verifies, besides published ranges looked up by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// `googlebot`, or an operator entry's `name`.
    pub name: Arc<str>,
    /// Lower-case user-agent substrings that claim it.
    pub ua_substrings: Vec<String>,
    /// Reverse-DNS suffixes a forward-confirmed PTR must be under; empty: no DNS method.
    pub rdns_suffixes: Vec<String>,
    /// Operator ranges (`ip_ranges`). Built-ins take theirs from the range snapshot.
    pub ip_ranges: Vec<Net>,
    /// Whether the published range snapshot has a list under this name (checked first).
    pub published: bool,
    pub builtin: bool,
}

/// One built-in identity: (name, user-agent substrings, reverse-DNS suffixes, published ranges).
type Builtin = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    bool,
);

/// The built-in identities. `published` ones are also refreshed by the range updater.
pub const BUILTINS: &[Builtin] = &[
    (
        "googlebot",
        &[
            "googlebot",
            "googleother",
            "google-inspectiontool",
            "adsbot-google",
            "storebot-google",
        ],
        &["googlebot.com", "google.com"],
        true,
    ),
    (
        "bingbot",
        &["bingbot", "adidxbot", "bingpreview"],
        &["search.msn.com"],
        true,
    ),
    ("applebot", &["applebot"], &["applebot.apple.com"], true),
    (
        "yandexbot",
        &["yandexbot", "yandeximages", "yandexmobilebot"],
        &["yandex.ru", "yandex.net", "yandex.com"],
        false,
    ),
    (
        "baiduspider",
        &["baiduspider"],
        &["baidu.com", "baidu.jp"],
        false,
    ),
    ("petalbot", &["petalbot"], &["petalsearch.com"], false),
    ("seznambot", &["seznambot"], &["seznam.cz"], false),
    (
        "facebookbot",
        &[
            "facebookexternalhit",
            "facebookcatalog",
            "meta-externalagent",
        ],
        &["fbsv.net"],
        false,
    ),
    ("twitterbot", &["twitterbot"], &["twttr.com"], false),
    ("linkedinbot", &["linkedinbot"], &["linkedin.com"], false),
    ("pinterestbot", &["pinterestbot"], &["pinterest.com"], false),
    ("gptbot", &["gptbot"], &[], true),
    ("chatgpt-user", &["chatgpt-user"], &[], true),
    ("oai-searchbot", &["oai-searchbot"], &[], true),
    ("perplexitybot", &["perplexitybot"], &[], true),
    // Amazon's combined feed verifies by address; the legacy suffix is only a fallback.
    (
        "amazonbot",
        &["amazonbot"],
        &["crawl.amazonbot.amazon"],
        true,
    ),
];

/// Whether `name` is a built-in identity's name.
pub fn is_builtin(name: &str) -> bool {
    BUILTINS.iter().any(|b| b.0 == name)
}

/// The vendor feeds of the built-in published-range identities.
pub const FEEDS: &[(&str, &str)] = &[
    (
        "googlebot",
        "https://developers.google.com/static/search/apis/ipranges/googlebot.json",
    ),
    ("bingbot", "https://www.bing.com/toolbox/bingbot.json"),
    (
        "applebot",
        "https://search.developer.apple.com/applebot.json",
    ),
    ("gptbot", "https://openai.com/gptbot.json"),
    ("chatgpt-user", "https://openai.com/chatgpt-user.json"),
    ("oai-searchbot", "https://openai.com/searchbot.json"),
    (
        "perplexitybot",
        "https://www.perplexity.ai/perplexitybot.json",
    ),
    (
        "amazonbot",
        "https://developer.amazon.com/amazonbot/live-ip-addresses/",
    ),
];
