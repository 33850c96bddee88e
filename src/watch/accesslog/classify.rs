//! What a request is, for the checks: matchers over the path, query and user agent (no
//! regex; Aho-Corasick automata built once, ASCII case-insensitive).
//!
//! The lists are deliberately short and specific: they decide which requests are counted,
//! and a threshold per address decides what is reported.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use super::parse::AccessLine;

/// User-agent substrings of vulnerability scanners and exploit kits.
pub const SCANNER_AGENTS: &[&str] = &[
    "sqlmap",
    "nikto",
    "nuclei",
    "masscan",
    "zgrab",
    "wpscan",
    "dirbuster",
    "gobuster",
    "feroxbuster",
    "fuzz faster u fool",
    "nmap scripting engine",
    "acunetix",
    "netsparker",
    "jorgee",
    "zmeu",
    "morfeus",
    "l9explore",
    "l9tcpid",
    "havij",
    "w3af",
    "openvas",
    "whatweb",
    "arachni",
    "skipfish",
    "commix",
    "joomscan",
    "droopescan",
    "cgichk",
];

/// User-agent substrings that claim a crawler identity: the request is worth asking the
/// crawler oracle about. A superset of the built-in identities' names.
pub const CRAWLER_WORDS: &[&str] = &[
    "bot",
    "crawl",
    "spider",
    "slurp",
    "facebookexternalhit",
    "facebookcatalog",
    "meta-externalagent",
    "mediapartners-google",
    "google-extended",
    "google-inspectiontool",
    "googleother",
    "feedfetcher",
    "chatgpt-user",
    "perplexity",
    "claude-web",
    "anthropic-ai",
    "ia_archiver",
    "yandex",
    "baiduspider",
    "bingpreview",
    "duckduckgo",
];

/// Path substrings that only a scanner asks for on a site that does not have them
/// (counted on 404 answers only).
pub const PROBE_PATHS: &[&str] = &[
    "/.env",
    "/.git/",
    "/.git",
    "/.svn",
    "/.hg/",
    "/.ds_store",
    "/.aws/",
    "/.ssh/",
    "/.htpasswd",
    "/.vscode/",
    "/wp-config.php.",
    "/wp-config.bak",
    "/wp-config.old",
    "/phpmyadmin",
    "/pma/",
    "/myadmin",
    "/mysqladmin",
    "/phpinfo",
    "/info.php",
    "/eval-stdin.php",
    "/vendor/phpunit",
    "/cgi-bin/",
    "/boaform",
    "/hnap1",
    "/actuator/",
    "/solr/admin",
    "/jmx-console",
    "/manager/html",
    "/owa/auth",
    "/autodiscover/autodiscover",
    "/ecp/",
    "/remote/login",
    "/wp-admin/setup-config.php",
    "/wp-admin/install.php",
    "/administrator/index.php",
    "/server-status",
    "/config.json",
    "/backup.zip",
    "/backup.sql",
    "/dump.sql",
    "/database.sql",
    "/shell.php",
    "/cmd.php",
    "/c99.php",
    "/r57.php",
    "/wso.php",
    "/alfa.php",
    "/xleet",
    "/roundcube",
    "/webmail/",
    "/horde/",
    "/typo3/",
    "/xampp/",
];

fn automaton(patterns: &[&str]) -> Option<AhoCorasick> {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::LeftmostFirst)
        .kind(Some(AhoCorasickKind::DFA))
        .build(patterns)
        .ok()
}

static SCANNERS: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| automaton(SCANNER_AGENTS));
static CRAWLERS: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| automaton(CRAWLER_WORDS));
static ENUM_HINTS: LazyLock<Option<AhoCorasick>> =
    LazyLock::new(|| automaton(&["author=", "users"]));
static PROBES: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| automaton(PROBE_PATHS));

fn matches(ac: &LazyLock<Option<AhoCorasick>>, s: &str) -> bool {
    ac.as_ref().is_some_and(|a| a.is_match(s))
}

/// The facts about one request the checks count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// A POST to `wp-login.php`.
    pub wp_login: bool,
    /// A POST to `xmlrpc.php`.
    pub xmlrpc: bool,
    /// `?author=N`, the REST users route (`/wp-json/wp/v2/users`, `?rest_route=/wp/v2/users`).
    pub user_enum: bool,
    /// A 404 answer to a known probe path.
    pub probe_404: bool,
    /// A vulnerability scanner's user agent.
    pub scanner_agent: bool,
    /// The user agent claims a crawler (worth asking the oracle).
    pub claims_crawler: bool,
}

impl Request {
    /// Whether any check counts this request.
    pub fn interesting(&self) -> bool {
        self.wp_login
            || self.xmlrpc
            || self.user_enum
            || self.probe_404
            || self.scanner_agent
            || self.claims_crawler
    }
}

/// User agents whose classification is remembered at most (the set is cleared when full:
/// a flood of distinct user agents costs a scan each, never memory).
pub const UA_CACHE: usize = 4096;
/// Longest user agent remembered.
const UA_CACHE_MAX_LEN: usize = 512;

/// [`classify`] with the user agents' classification remembered: real traffic repeats a
/// few hundred user agents, and scanning one is most of the cost of a line.
#[derive(Default)]
pub struct Classifier {
    ua: HashMap<Box<str>, (bool, bool), BuildHasherDefault<FxHasher>>,
}

impl Classifier {
    pub fn classify(&mut self, l: &AccessLine<'_>) -> Request {
        let mut r = classify_request(l);
        if let Some(ua) = l.user_agent {
            if ua.len() > 1 {
                let (scanner, crawler) = match self.ua.get(ua) {
                    Some(&v) => v,
                    None => {
                        let v = classify_ua(ua);
                        if ua.len() <= UA_CACHE_MAX_LEN {
                            if self.ua.len() >= UA_CACHE {
                                self.ua.clear();
                            }
                            self.ua.insert(ua.into(), v);
                        }
                        v
                    }
                };
                r.scanner_agent = scanner;
                r.claims_crawler = crawler;
            }
        }
        r
    }
}

/// A fast non-cryptographic hasher (FxHash over 8-byte words) for the user-agent cache: its
/// keys are attacker-chosen, but the cache is bounded and cleared, so collisions cost time
/// on one table of at most [`UA_CACHE`] entries, never memory.
#[derive(Default)]
pub struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// (scanner agent, claims a crawler) of a user agent.
fn classify_ua(ua: &str) -> (bool, bool) {
    let scanner = matches(&SCANNERS, ua);
    (scanner, !scanner && matches(&CRAWLERS, ua))
}

/// The request facts that do not depend on the user agent.
fn classify_request(l: &AccessLine<'_>) -> Request {
    let path = l.path().as_bytes();
    let post = l.method == "POST";
    let mut r = Request {
        wp_login: post && ends_with_ci(path, b"/wp-login.php"),
        xmlrpc: post && ends_with_ci(path, b"/xmlrpc.php"),
        ..Request::default()
    };
    r.user_enum = is_user_enum(l);
    if l.status == 404 {
        r.probe_404 = matches(&PROBES, l.path());
    }
    r
}

/// Classifies one parsed line (without a cache; see [`Classifier`]).
pub fn classify(l: &AccessLine<'_>) -> Request {
    let mut r = classify_request(l);
    if let Some(ua) = l.user_agent {
        if ua.len() > 1 {
            (r.scanner_agent, r.claims_crawler) = classify_ua(ua);
        }
    }
    r
}

fn ends_with_ci(s: &[u8], suffix: &[u8]) -> bool {
    s.len() >= suffix.len()
        && s.get(s.len() - suffix.len()..)
            .is_some_and(|t| t.eq_ignore_ascii_case(suffix))
}

fn contains_ci(s: &[u8], needle: &[u8]) -> bool {
    s.len() >= needle.len()
        && s.windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

fn is_user_enum(l: &AccessLine<'_>) -> bool {
    let target = l.target.as_bytes();
    // Cheap pre-check: both forms need `author=` or `users` somewhere in the target.
    if !ENUM_HINTS.as_ref().is_some_and(|a| a.is_match(target)) {
        return false;
    }
    if contains_ci(l.path().as_bytes(), b"/wp-json/wp/v2/users") {
        return true;
    }
    let Some(q) = l.query() else { return false };
    for pair in q.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k.eq_ignore_ascii_case("author")
            && !v.is_empty()
            && v.len() <= 12
            && v.bytes().all(|c| c.is_ascii_digit())
        {
            return true;
        }
        if k.eq_ignore_ascii_case("rest_route") && decoded_starts_with_ci(v, b"/wp/v2/users") {
            return true;
        }
    }
    false
}

/// Whether `v`, percent-decoded (`+` is a space), starts with `prefix` (ASCII case
/// insensitive). Decodes no more than the prefix needs; a bad escape is taken literally.
fn decoded_starts_with_ci(v: &str, prefix: &[u8]) -> bool {
    let b = v.as_bytes();
    let mut i = 0;
    for &want in prefix {
        let c = match b.get(i) {
            None => return false,
            Some(b'%') => match (b.get(i + 1).and_then(hex), b.get(i + 2).and_then(hex)) {
                (Some(h), Some(l)) => {
                    i += 3;
                    h * 16 + l
                }
                _ => {
                    i += 1;
                    b'%'
                }
            },
            Some(b'+') => {
                i += 1;
                b' '
            }
            Some(&c) => {
                i += 1;
                c
            }
        };
        if !c.eq_ignore_ascii_case(&want) {
            return false;
        }
    }
    true
}

fn hex(c: &u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::accesslog::parse::parse_line;

    fn req(method: &str, target: &str, status: u16, ua: &str) -> Request {
        let line = format!(
            "192.0.2.1 - - [26/Nov/2026:21:00:01 +0000] \"{method} {target} HTTP/1.1\" {status} 1 \"-\" \"{ua}\""
        );
        classify(&parse_line(&line).unwrap())
    }

    #[test]
    fn each_check_recognises_its_requests() {
        assert!(req("POST", "/wp-login.php", 200, "m").wp_login);
        assert!(req("POST", "/blog/WP-LOGIN.PHP?redirect_to=x", 302, "m").wp_login);
        assert!(!req("GET", "/wp-login.php", 200, "m").wp_login);
        assert!(req("POST", "/xmlrpc.php", 200, "m").xmlrpc);
        assert!(!req("POST", "/xmlrpc.php.bak", 200, "m").xmlrpc);
        assert!(req("GET", "/?author=3", 301, "m").user_enum);
        assert!(req("GET", "/index.php?x=1&AUTHOR=12", 200, "m").user_enum);
        assert!(!req("GET", "/?author=bob", 200, "m").user_enum);
        assert!(req("GET", "/wp-json/wp/v2/users", 200, "m").user_enum);
        assert!(req("GET", "/wp-json/wp/v2/users/1", 200, "m").user_enum);
        assert!(req("GET", "/?rest_route=%2Fwp%2Fv2%2FUsers", 200, "m").user_enum);
        assert!(req("GET", "/?rest_route=/wp/v2/users&context=edit", 200, "m").user_enum);
        assert!(!req("GET", "/?rest_route=/wp/v2/posts", 200, "m").user_enum);
        assert!(req("GET", "/.env", 404, "m").probe_404);
        assert!(req("GET", "/phpMyAdmin/index.php", 404, "m").probe_404);
        assert!(!req("GET", "/.env", 200, "m").probe_404, "only on 404");
        assert!(!req("GET", "/missing.png", 404, "m").probe_404);
        let s = req(
            "GET",
            "/",
            200,
            "Mozilla/5.00 (Nikto/2.1.6) (Evasions:None)",
        );
        assert!(s.scanner_agent && !s.claims_crawler);
        let g = req(
            "GET",
            "/",
            200,
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        );
        assert!(g.claims_crawler && g.interesting());
        assert!(!req(
            "GET",
            "/",
            200,
            "Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0"
        )
        .interesting());
    }
}
