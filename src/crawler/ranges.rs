//! Published crawler address ranges: the embedded snapshot, the on-disk snapshot
//! (`state_path/bot-ranges.json`), vendor feeds, and the refresh that joins them.
//!
//! Guarantees:
//! - Every range, from the embedded snapshot, the disk or a feed, passes
//!   [`guards::check_range`](super::guards::check_range); a refused range is dropped and
//!   counted, the rest of its list stays.
//! - A refresh replaces a crawler's list only with a feed that fetched and parsed with at
//!   least one usable range; otherwise the crawler keeps its previous list (from the disk
//!   snapshot or, failing that, the embedded one).
//! - The disk snapshot is written atomically (`fsutil::write_atomic`, mode 0644).
//! - Feeds are `https://` (plain `http://` only to loopback, checked at config load), read
//!   under `reputation.timeout_seconds` and a 4 MiB cap, never following redirects.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::guards::{check_range, Net};
use crate::net::https::{Client, Roots};

const EMBEDDED: &str = include_str!("../../rules/crawlers/bot-ranges.json");
/// File name of the on-disk snapshot under the state directory.
pub const SNAPSHOT_FILE: &str = "bot-ranges.json";
/// Largest feed accepted.
pub const FEED_CAP: u64 = 4 << 20;
/// Most ranges kept per crawler.
pub const MAX_PER_CRAWLER: usize = 10_000;

pub use crate::config::bots::FEEDS;

/// Why a range snapshot could not be used or written (the path is the snapshot's).
#[derive(Debug)]
pub enum SnapshotError {
    /// Not the JSON form svc writes.
    NotSnapshot(serde_json::Error),
    /// The file at the path is not a snapshot.
    Invalid(PathBuf, Box<SnapshotError>),
    /// The file at the path could not be read or written.
    Io(PathBuf, std::io::Error),
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotError::NotSnapshot(e) => write!(f, "not a range snapshot: {e}"),
            SnapshotError::Invalid(path, e) => write!(f, "{}: {e}", path.display()),
            SnapshotError::Io(path, e) => write!(f, "{}: {e}", path.display()),
        }
    }
}

impl std::error::Error for SnapshotError {}

/// Why one vendor feed gave no usable list.
#[derive(Debug)]
pub enum FeedError {
    Fetch(crate::net::https::FetchError),
    Status(u16),
    NotUtf8,
    Json(serde_json::Error),
    NoPrefixes,
    NoUsableRange { refused: usize },
}

impl std::fmt::Display for FeedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FeedError::Fetch(e) => write!(f, "{e}"),
            FeedError::Status(s) => write!(f, "HTTP status {s}"),
            FeedError::NotUtf8 => f.write_str("feed is not UTF-8"),
            FeedError::Json(e) => write!(f, "feed is not valid JSON: {e}"),
            FeedError::NoPrefixes => f.write_str("feed has no \"prefixes\" array"),
            FeedError::NoUsableRange { refused } => {
                write!(f, "feed has no usable range ({refused} refused)")
            }
        }
    }
}

impl std::error::Error for FeedError {}

/// The ranges of each published-range crawler.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSet {
    pub crawlers: BTreeMap<String, Vec<Net>>,
    /// When the set was produced (RFC 3339), as its file says.
    pub generated: String,
}

#[derive(Serialize, Deserialize)]
struct File {
    #[serde(default)]
    about: String,
    #[serde(default)]
    generated: String,
    crawlers: BTreeMap<String, Vec<String>>,
}

impl RangeSet {
    /// Whether `ip` is in `crawler`'s list; `None` when the set has no list for it (or an
    /// empty one), so nothing can be said by address.
    pub fn lookup(&self, crawler: &str, ip: std::net::IpAddr) -> Option<bool> {
        let list = self.crawlers.get(crawler).filter(|l| !l.is_empty())?;
        Some(list.iter().any(|n| n.contains(ip)))
    }

    /// Parses a snapshot file; ranges that fail the guards are dropped and counted.
    pub fn parse(text: &str) -> Result<(RangeSet, usize), SnapshotError> {
        let f: File = serde_json::from_str(text).map_err(SnapshotError::NotSnapshot)?;
        let mut out = RangeSet {
            generated: crate::text::for_log(&f.generated, 64).to_string(),
            ..RangeSet::default()
        };
        let mut refused = 0;
        for (name, list) in f.crawlers {
            if name.is_empty() || name.len() > 64 {
                refused += list.len();
                continue;
            }
            let (nets, bad) = checked(list.iter().map(String::as_str));
            refused += bad;
            out.crawlers.insert(name, nets);
        }
        Ok((out, refused))
    }

    pub fn to_json(&self) -> String {
        let f = File {
            about: "Published crawler address ranges written by svc (svc update-bot-ranges or the auto-updater).".into(),
            generated: self.generated.clone(),
            crawlers: self
                .crawlers
                .iter()
                .map(|(k, v)| (k.clone(), v.iter().map(Net::to_string).collect()))
                .collect(),
        };
        serde_json::to_string_pretty(&f).unwrap_or_default()
    }

    /// The snapshot embedded in the binary.
    pub fn embedded() -> RangeSet {
        RangeSet::parse(EMBEDDED)
            .map(|(s, _)| s)
            .unwrap_or_default()
    }

    /// The disk snapshot when readable and valid, else the embedded one; crawlers missing
    /// from the disk snapshot keep the embedded list.
    pub fn load(state: &Path) -> (RangeSet, Option<SnapshotError>) {
        let mut base = RangeSet::embedded();
        let path = snapshot_path(state);
        match crate::fsutil::read_daemon_string(&path) {
            Ok(text) => match RangeSet::parse(&text) {
                Ok((disk, _)) => {
                    for (k, v) in disk.crawlers {
                        if !v.is_empty() {
                            base.crawlers.insert(k, v);
                        }
                    }
                    base.generated = disk.generated;
                    (base, None)
                }
                Err(e) => (base, Some(SnapshotError::Invalid(path, Box::new(e)))),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (base, None),
            Err(e) => (base, Some(SnapshotError::Io(path, e))),
        }
    }

    /// Writes the set as the disk snapshot (atomically, 0644).
    pub fn save(&self, state: &Path) -> std::io::Result<()> {
        crate::fsutil::write_atomic(
            &snapshot_path(state),
            self.to_json().as_bytes(),
            0o644,
            None,
        )
    }

    /// Prefix count per crawler.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        self.crawlers
            .iter()
            .map(|(k, v)| (k.clone(), v.len()))
            .collect()
    }
}

pub fn snapshot_path(state: &Path) -> PathBuf {
    state.join(SNAPSHOT_FILE)
}

/// Parses and guards ranges; returns the usable ones (deduplicated, at most
/// [`MAX_PER_CRAWLER`]) and how many were refused.
fn checked<'a>(items: impl Iterator<Item = &'a str>) -> (Vec<Net>, usize) {
    let mut nets = Vec::new();
    let mut refused = 0;
    for s in items {
        match s.parse::<Net>().and_then(|n| check_range(&n).map(|()| n)) {
            Ok(n) if nets.len() < MAX_PER_CRAWLER => nets.push(n),
            _ => refused += 1,
        }
    }
    nets.sort();
    nets.dedup();
    (nets, refused)
}

/// Parses a vendor feed: the JSON form the search engines and AI vendors publish
/// (`{"prefixes": [{"ipv4Prefix": ".."}, {"ipv6Prefix": ".."}]}`), a JSON array of CIDR
/// strings, or plain text with one CIDR per line (`#` comments). Returns the usable ranges
/// and the refused count; an error when nothing usable is found.
pub fn parse_feed(body: &[u8]) -> Result<(Vec<Net>, usize), FeedError> {
    let text = std::str::from_utf8(body).map_err(|_| FeedError::NotUtf8)?;
    let trimmed = text.trim_start();
    let (nets, refused) = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let v: serde_json::Value = serde_json::from_str(text).map_err(FeedError::Json)?;
        let mut items: Vec<String> = Vec::new();
        let list = match &v {
            serde_json::Value::Array(a) => a.clone(),
            serde_json::Value::Object(o) => match o.get("prefixes") {
                Some(serde_json::Value::Array(a)) => a.clone(),
                _ => return Err(FeedError::NoPrefixes),
            },
            _ => Vec::new(),
        };
        for e in list {
            match e {
                serde_json::Value::String(s) => items.push(s),
                serde_json::Value::Object(o) => {
                    for k in ["ipv4Prefix", "ipv6Prefix", "prefix", "cidr"] {
                        if let Some(serde_json::Value::String(s)) = o.get(k) {
                            items.push(s.clone());
                        }
                    }
                }
                _ => {}
            }
        }
        checked(items.iter().map(String::as_str))
    } else {
        checked(
            text.lines()
                .map(|l| l.split('#').next().unwrap_or("").trim())
                .filter(|l| !l.is_empty()),
        )
    };
    if nets.is_empty() {
        return Err(FeedError::NoUsableRange { refused });
    }
    Ok((nets, refused))
}

/// What one refresh did.
#[derive(Debug, Default, Clone)]
pub struct Refresh {
    /// Crawlers whose list came from their feed.
    pub updated: Vec<String>,
    /// Crawlers whose feed failed, with why (they keep their previous list).
    pub failed: Vec<(String, String)>,
    /// Ranges refused by the guards, over all feeds.
    pub refused: usize,
}

impl Refresh {
    pub fn ok(&self) -> bool {
        self.failed.is_empty()
    }
}

/// Fetches every feed in `feeds` (name, url) and returns `base` with each crawler whose
/// feed was usable replaced.
pub fn refresh(
    base: &RangeSet,
    feeds: &[(String, String)],
    roots: &Roots,
    timeout: Duration,
    now: &str,
) -> (RangeSet, Refresh) {
    let mut out = base.clone();
    let mut r = Refresh::default();
    for (name, url) in feeds {
        let client = Client::new(url, roots, timeout, FEED_CAP, 0);
        let got = client
            .get(url, &[("accept", "application/json, text/plain")])
            .map_err(FeedError::Fetch)
            .and_then(|f| {
                if f.status == 200 {
                    parse_feed(&f.body)
                } else {
                    Err(FeedError::Status(f.status))
                }
            });
        match got {
            Ok((nets, refused)) => {
                r.refused += refused;
                out.crawlers.insert(name.clone(), nets);
                r.updated.push(name.clone());
            }
            Err(e) => r.failed.push((name.clone(), e.to_string())),
        }
    }
    if !r.updated.is_empty() {
        out.generated = now.to_string();
    }
    (out, r)
}

/// The feed list: the built-in feeds with `overrides` (name -> url) applied.
pub fn feed_list(overrides: &[(String, String)]) -> Vec<(String, String)> {
    FEEDS
        .iter()
        .map(|(n, u)| {
            let url = overrides
                .iter()
                .find(|(o, _)| o == n)
                .map(|(_, u)| u.clone())
                .unwrap_or_else(|| u.to_string());
            (n.to_string(), url)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::https::testsrv::Server;

    #[test]
    fn embedded_snapshot_is_valid_and_guarded() {
        let (s, refused) = RangeSet::parse(EMBEDDED).unwrap();
        assert_eq!(refused, 0, "the shipped snapshot passes its own guards");
        assert!(s.crawlers["googlebot"].len() > 10);
        assert_eq!(
            s.lookup("googlebot", "66.249.66.1".parse().unwrap()),
            Some(true)
        );
        assert_eq!(
            s.lookup("googlebot", "192.0.2.1".parse().unwrap()),
            Some(false)
        );
        assert_eq!(s.lookup("amazonbot", "192.0.2.1".parse().unwrap()), None);
        for (name, _) in FEEDS {
            assert!(s.crawlers.contains_key(*name), "{name}");
        }
    }

    #[test]
    fn feeds_in_three_forms_with_guards() {
        let json = br#"{"creationTime":"x","prefixes":[{"ipv4Prefix":"66.249.64.0/27"},{"ipv6Prefix":"2001:4860:4801:10::/64"},{"ipv4Prefix":"10.0.0.0/8"},{"ipv4Prefix":"1.0.0.0/4"}]}"#;
        let (n, refused) = parse_feed(json).unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(refused, 2);
        let (n, _) = parse_feed(br#"["20.171.206.0/24"]"#).unwrap();
        assert_eq!(n.len(), 1);
        let (n, _) = parse_feed(b"# list\n52.230.152.0/24\n\n52.233.106.0/24 # x\n").unwrap();
        assert_eq!(n.len(), 2);
        assert!(parse_feed(b"{\"prefixes\":[{\"ipv4Prefix\":\"192.168.0.0/16\"}]}").is_err());
        assert!(parse_feed(b"<html>").is_err());
        assert!(parse_feed(&[0xff, 0xfe]).is_err());
        // The texts of the error types are the former strings.
        let e = |b: &[u8]| parse_feed(b).unwrap_err().to_string();
        assert_eq!(e(b"<html>"), "feed has no usable range (1 refused)");
        assert_eq!(e(&[0xff, 0xfe]), "feed is not UTF-8");
        assert_eq!(e(b"{\"x\": 1}"), "feed has no \"prefixes\" array");
        assert!(e(b"{").starts_with("feed is not valid JSON: "));
        let snapshot = RangeSet::parse("[]").unwrap_err().to_string();
        assert!(snapshot.starts_with("not a range snapshot: "), "{snapshot}");
    }

    #[test]
    fn refresh_replaces_good_feeds_keeps_failed_ones_and_saves_atomically() {
        let srv = Server::http(|seen| match seen.path.as_str() {
            "/g.json" => (
                200,
                vec![],
                br#"{"prefixes":[{"ipv4Prefix":"66.249.90.0/24"}]}"#.to_vec(),
            ),
            "/bad.json" => (
                200,
                vec![],
                br#"{"prefixes":[{"ipv4Prefix":"127.0.0.0/8"}]}"#.to_vec(),
            ),
            _ => (500, vec![], vec![]),
        });
        let base = RangeSet::embedded();
        let feeds = vec![
            (
                "googlebot".to_string(),
                format!("http://{}/g.json", srv.addr),
            ),
            (
                "gptbot".to_string(),
                format!("http://{}/bad.json", srv.addr),
            ),
            (
                "bingbot".to_string(),
                format!("http://{}/missing", srv.addr),
            ),
        ];
        let (set, r) = refresh(
            &base,
            &feeds,
            &Roots::default(),
            Duration::from_secs(5),
            "2026-11-26T00:00:00Z",
        );
        assert_eq!(r.updated, vec!["googlebot".to_string()]);
        assert_eq!(r.failed.len(), 2);
        assert!(!r.ok());
        assert_eq!(
            set.lookup("googlebot", "66.249.90.7".parse().unwrap()),
            Some(true)
        );
        assert_eq!(
            set.lookup("googlebot", "66.249.66.1".parse().unwrap()),
            Some(false)
        );
        assert_eq!(set.crawlers["gptbot"], base.crawlers["gptbot"]);
        assert_eq!(set.crawlers["bingbot"], base.crawlers["bingbot"]);
        let dir = std::env::temp_dir().join(format!("svc-ranges-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        set.save(&dir).unwrap();
        let (loaded, err) = RangeSet::load(&dir);
        assert!(err.is_none());
        assert_eq!(loaded.crawlers["googlebot"], set.crawlers["googlebot"]);
        std::fs::write(snapshot_path(&dir), "garbage").unwrap();
        let (fallback, err) = RangeSet::load(&dir);
        assert!(err.is_some());
        assert_eq!(fallback, RangeSet::embedded());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
