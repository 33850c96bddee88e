//! Free threat feeds: downloaded lists of addresses and ranges (`[[reputation.feeds]]`,
//! for example Spamhaus DROP or FireHOL level 1).
//!
//! Guarantees:
//! - A list is one address or CIDR range per line; text after `#` or `;` is a comment, the
//!   first word of a line counts (so `192.0.2.0/24 ; SBL123` works). Lines that are neither
//!   are skipped and counted. At most [`MAX_ENTRIES`] entries per feed and [`MAX_BODY`]
//!   bytes are read; [`parse_list`] never panics (fuzz target `threat_input`).
//! - Each feed is fetched when due (`refresh_hours`, default 24) by [`Feeds::tick`] (the
//!   feeds thread, every 30 s); a successful download replaces the feed's entries in memory
//!   and in the store (`threat_feed_entries`), so a restart has them at once. A failed one
//!   keeps the previous list and is retried after 15 minutes.
//! - A feed without a successful refresh for more than 7 days (counted from when it was
//!   first configured when it never succeeded) raises the WARNING `threat_feed_stale`
//!   (`Threat feed <name> has not refreshed in over 7 days`), reminded at most once a day
//!   across restarts; it never scores or blocks.
//! - Lookups read memory only: a sorted list of ranges per feed, binary search.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use super::Env;
use crate::config::threat::{FeedConfig, ReputationConfig};
use crate::net::cidr::Net;
use crate::net::https::{Client, FetchError, Roots};
use crate::store::kv;
use crate::store::threat::{load_feed, replace_feed};
use crate::threat::verdict::{Answer, Query, Source, Status};
use crate::timefmt::rfc3339;

pub const CHECK: &str = "threat_feed_stale";
/// Entries kept per feed at most.
pub const MAX_ENTRIES: usize = 1_000_000;
/// Bytes read per download at most.
pub const MAX_BODY: u64 = 32 * 1024 * 1024;
/// A feed this long without a refresh is stale.
pub const STALE_US: i64 = 7 * 86_400 * 1_000_000;
const RETRY_US: i64 = 15 * 60 * 1_000_000;

/// Parses a list: the entries and the number of lines skipped.
pub fn parse_list(text: &str, max: usize) -> (Vec<Net>, usize) {
    let mut out = Vec::new();
    let mut skipped = 0;
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or("").trim();
        let Some(word) = line.split_whitespace().next() else {
            continue;
        };
        if out.len() >= max {
            skipped += 1;
            continue;
        }
        match Net::parse(word) {
            Ok(n) if !n.is_default_route() => out.push(n),
            _ => skipped += 1,
        }
    }
    (out, skipped)
}

fn bounds(n: &Net) -> (u128, u128) {
    let mapped = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    };
    (mapped(n.first()), mapped(n.last()))
}

/// A feed's entries as merged, sorted ranges (IPv4 in the IPv4-mapped IPv6 space).
#[derive(Debug, Default, Clone)]
pub struct Ranges(Vec<(u128, u128)>);

impl Ranges {
    pub fn new(nets: &[Net]) -> Ranges {
        let mut v: Vec<(u128, u128)> = nets.iter().map(bounds).collect();
        v.sort_unstable();
        let mut out: Vec<(u128, u128)> = Vec::with_capacity(v.len());
        for (a, b) in v {
            match out.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        Ranges(out)
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let x = match ip.to_canonical() {
            IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
            IpAddr::V6(v6) => u128::from(v6),
        };
        let i = self.0.partition_point(|(a, _)| *a <= x);
        i > 0 && self.0[i - 1].1 >= x
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One loaded feed.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub score: u8,
    pub ranges: Arc<Ranges>,
    pub entries: usize,
    /// Wall microseconds of the last successful refresh.
    pub refreshed: Option<i64>,
}

/// The feeds' lists, shared by the source and the refresher.
#[derive(Default)]
pub struct FeedSet {
    feeds: RwLock<HashMap<String, Loaded>>,
}

impl FeedSet {
    /// Names of the feeds listing `ip`, with the highest score among them.
    pub fn listing(&self, ip: IpAddr) -> (Vec<String>, u8) {
        let g = self.feeds.read();
        let mut names = Vec::new();
        let mut best = 0;
        for (name, f) in g.iter() {
            if f.ranges.contains(ip) {
                names.push(name.clone());
                best = best.max(f.score);
            }
        }
        names.sort();
        (names, best)
    }

    /// Puts a loaded list under `name` (the refresher's way in; benchmarks and tests).
    pub fn insert(&self, name: &str, l: Loaded) {
        self.feeds.write().insert(name.to_string(), l);
    }

    pub fn snapshot(&self) -> Vec<(String, Loaded)> {
        let mut v: Vec<(String, Loaded)> = self
            .feeds
            .read()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    pub fn len(&self) -> usize {
        self.feeds.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The verdict source over the loaded feeds.
pub struct FeedSource {
    pub set: Arc<FeedSet>,
}

impl Source for FeedSource {
    fn name(&self) -> &'static str {
        "feeds"
    }

    fn lookup(&self, ip: IpAddr, _q: &Query) -> Answer {
        let (names, score) = self.set.listing(ip);
        if names.is_empty() {
            let n = self.set.len();
            return Answer::status(
                Status::NoData,
                format!(
                    "not listed in {n} threat feed{}",
                    if n == 1 { "" } else { "s" }
                ),
            );
        }
        Answer::score(score, format!("listed by {}", names.join(", ")))
    }
}

struct FeedState {
    cfg: FeedConfig,
    next_at: i64,
    /// When the feed was first configured (wall microseconds, from the store).
    since: i64,
}

/// The refresher: downloads feeds when due and keeps `threat_feed_stale`.
pub struct Feeds {
    env: Env,
    set: Arc<FeedSet>,
    state: Mutex<(Vec<FeedState>, Roots, Duration)>,
}

fn refreshed_key(name: &str) -> String {
    format!("threat.feed.{name}.refreshed")
}

fn since_key(name: &str) -> String {
    format!("threat.feed.{name}.since")
}

/// Why a feed's refresh failed (logged; the feed is tried again later).
#[derive(Debug)]
enum DownloadError {
    Fetch(FetchError),
    /// An HTTP status other than 200.
    Status(u16),
    /// Not one usable line.
    Empty {
        skipped: usize,
    },
}

impl std::fmt::Display for DownloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DownloadError::Fetch(e) => write!(f, "{e}"),
            DownloadError::Status(s) => write!(f, "answered {s}"),
            DownloadError::Empty { skipped } => write!(
                f,
                "no address or range in the list ({skipped} lines skipped)"
            ),
        }
    }
}

impl std::error::Error for DownloadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DownloadError::Fetch(e) => Some(e),
            _ => None,
        }
    }
}

impl Feeds {
    pub fn new(env: &Env, set: Arc<FeedSet>) -> Feeds {
        Feeds {
            env: env.clone(),
            set,
            state: Mutex::new((Vec::new(), Roots::default(), Duration::from_secs(10))),
        }
    }

    /// Applies `[[reputation.feeds]]`: loads new feeds' stored entries, drops removed ones.
    pub fn configure(&self, r: &ReputationConfig) -> Result<(), super::SourceError> {
        let roots = Roots::load(r.ca_file.as_deref()).map_err(super::SourceError::Roots)?;
        let now = self.env.clock.now().as_microsecond();
        let mut st = self.state.lock();
        let mut next = Vec::new();
        for f in &r.feeds {
            if let Some(old) = st.0.iter().position(|s| s.cfg.name == f.name) {
                let mut s = st.0.remove(old);
                if s.cfg.url != f.url {
                    s.next_at = now;
                }
                s.cfg = f.clone();
                if let Some(l) = self.set.feeds.write().get_mut(&f.name) {
                    l.score = f.score.min(100) as u8;
                }
                next.push(s);
                continue;
            }
            let name = f.name.clone();
            let (rk, sk) = (refreshed_key(&name), since_key(&name));
            let stored = self.env.store.read(|c| {
                Ok((
                    load_feed(c, &name)?,
                    kv::get(c, &rk)?.and_then(|v| v.parse::<i64>().ok()),
                    kv::get(c, &sk)?.and_then(|v| v.parse::<i64>().ok()),
                ))
            });
            let (entries, refreshed, since) = stored.unwrap_or((Vec::new(), None, None));
            let since = match since {
                Some(s) => s,
                None => {
                    let v = now.to_string();
                    let k = sk.clone();
                    let _ = self.env.store.write(move |c| kv::set(c, &k, &v));
                    now
                }
            };
            let nets: Vec<Net> = entries.iter().filter_map(|e| Net::parse(e).ok()).collect();
            self.set.feeds.write().insert(
                name.clone(),
                Loaded {
                    score: f.score.min(100) as u8,
                    ranges: Arc::new(Ranges::new(&nets)),
                    entries: nets.len(),
                    refreshed,
                },
            );
            let due = refreshed.map_or(now, |t| t + f.refresh_hours as i64 * 3_600_000_000);
            next.push(FeedState {
                cfg: f.clone(),
                next_at: due,
                since,
            });
        }
        let keep: Vec<String> = next.iter().map(|s| s.cfg.name.clone()).collect();
        self.set.feeds.write().retain(|k, _| keep.contains(k));
        *st = (next, roots, Duration::from_secs(r.timeout_seconds.max(30)));
        Ok(())
    }

    fn download(
        &self,
        cfg: &FeedConfig,
        roots: &Roots,
        timeout: Duration,
    ) -> Result<Vec<Net>, DownloadError> {
        let c = Client::new(&cfg.url, roots, timeout, MAX_BODY, 0);
        let f = c.get(&cfg.url, &[]).map_err(DownloadError::Fetch)?;
        if f.status != 200 {
            return Err(DownloadError::Status(f.status));
        }
        let text = String::from_utf8_lossy(&f.body);
        let (nets, skipped) = parse_list(&text, MAX_ENTRIES);
        if nets.is_empty() {
            return Err(DownloadError::Empty { skipped });
        }
        if skipped > 0 {
            log::info!(
                "threat feed {}: {} entries, {skipped} lines skipped",
                cfg.name,
                nets.len()
            );
        }
        Ok(nets)
    }

    /// Refreshes the feeds that are due and updates `threat_feed_stale`. Returns how many
    /// feeds were refreshed.
    pub fn tick(&self) -> usize {
        let now = self.env.clock.now().as_microsecond();
        let (due, roots, timeout): (Vec<FeedConfig>, Roots, Duration) = {
            let st = self.state.lock();
            (
                st.0.iter()
                    .filter(|s| s.next_at <= now)
                    .map(|s| s.cfg.clone())
                    .collect(),
                st.1.clone(),
                st.2,
            )
        };
        let mut done = 0;
        for cfg in due {
            let result = self.download(&cfg, &roots, timeout);
            let now = self.env.clock.now().as_microsecond();
            let next_at = match result {
                Ok(nets) => {
                    let strings: Vec<String> = nets.iter().map(|n| n.to_string()).collect();
                    let (name, rk, v) =
                        (cfg.name.clone(), refreshed_key(&cfg.name), now.to_string());
                    let stored = self.env.store.write(move |c| {
                        replace_feed(c, &name, &strings)?;
                        kv::set(c, &rk, &v)
                    });
                    if let Err(e) = stored {
                        log::warn!("threat feed {}: cannot store the list: {e}", cfg.name);
                    }
                    self.set.feeds.write().insert(
                        cfg.name.clone(),
                        Loaded {
                            score: cfg.score.min(100) as u8,
                            ranges: Arc::new(Ranges::new(&nets)),
                            entries: nets.len(),
                            refreshed: Some(now),
                        },
                    );
                    done += 1;
                    now + cfg.refresh_hours as i64 * 3_600_000_000
                }
                Err(e) => {
                    log::warn!(
                        "threat feed {}: refresh failed: {}",
                        cfg.name,
                        crate::text::for_log(&e.to_string(), 200)
                    );
                    now + RETRY_US
                }
            };
            if let Some(s) = self
                .state
                .lock()
                .0
                .iter_mut()
                .find(|s| s.cfg.name == cfg.name)
            {
                s.next_at = next_at;
            }
        }
        self.evaluate(self.env.clock.now().as_microsecond());
        done
    }

    /// Raises `threat_feed_stale` for every feed without a refresh for over 7 days.
    pub fn evaluate(&self, now: i64) {
        let loaded = self.set.snapshot();
        let mut stale = Vec::new();
        for s in self.state.lock().0.iter() {
            let refreshed = loaded
                .iter()
                .find(|(n, _)| *n == s.cfg.name)
                .and_then(|(_, l)| l.refreshed);
            let base = refreshed.unwrap_or(s.since);
            if now.saturating_sub(base) > STALE_US {
                let last = match refreshed.and_then(|t| jiff::Timestamp::from_microsecond(t).ok()) {
                    Some(t) => format!("last refreshed at {}", rfc3339(t)),
                    None => "never refreshed since it was configured".into(),
                };
                stale.push((
                    format!(
                        "Threat feed {} has not refreshed in over 7 days",
                        s.cfg.name
                    ),
                    format!("{last}; its list keeps being used; check the URL and outbound HTTPS"),
                ));
            }
        }
        self.env.reminders.set(CHECK, stale);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::findings::Ingest;
    use crate::net::https::testsrv::Server;
    use crate::threat::test_env;

    #[test]
    fn lists_parse_and_match() {
        let text = "; Spamhaus DROP\n192.0.2.0/24 ; SBL1\n198.51.100.7\n# comment\nnot-an-ip\n2001:db8::/32\n0.0.0.0/0\n\n203.0.113.0/25 x\n";
        let (nets, skipped) = parse_list(text, 100);
        assert_eq!(nets.len(), 4);
        assert_eq!(skipped, 2);
        let r = Ranges::new(&nets);
        for yes in [
            "192.0.2.255",
            "198.51.100.7",
            "2001:db8::9",
            "::ffff:203.0.113.1",
        ] {
            assert!(r.contains(yes.parse().unwrap()), "{yes}");
        }
        for no in ["198.51.100.8", "203.0.113.128", "2001:db9::1", "10.0.0.1"] {
            assert!(!r.contains(no.parse().unwrap()), "{no}");
        }
        assert_eq!(
            parse_list("1.2.3.4\n5.6.7.8\n", 1),
            (vec![Net::parse("1.2.3.4").unwrap()], 1)
        );
    }

    #[test]
    fn refresh_store_and_stale_reminder_once_a_day_across_restarts() {
        let s = Server::http(|_| (200, vec![], b"192.0.2.0/24\n".to_vec()));
        let (env, dir, clock, seen) = test_env("feeds");
        let mut rc = ReputationConfig::default();
        rc.feeds.push(FeedConfig {
            name: "drop".into(),
            url: s.url("/drop.txt"),
            refresh_hours: 24,
            score: 70,
        });
        let feeds = Feeds::new(&env, env.feeds.clone());
        feeds.configure(&rc).unwrap();
        assert_eq!(feeds.tick(), 1);
        let src = FeedSource {
            set: env.feeds.clone(),
        };
        let q = Query {
            now: jiff::Timestamp::UNIX_EPOCH,
            scan: None,
        };
        assert_eq!(src.lookup("192.0.2.9".parse().unwrap(), &q).score, Some(70));
        assert_eq!(feeds.tick(), 0, "not due yet");
        // The feed goes away: 8 days without a refresh make it stale.
        drop(s);
        clock.advance_secs(8 * 86_400);
        feeds.tick();
        let stale = |v: &[Ingest]| {
            v.iter()
                .filter(|i| matches!(i, Ingest::Finding(f) if f.check == CHECK))
                .count()
        };
        assert_eq!(stale(&seen.lock()), 1);
        clock.advance_secs(3600);
        feeds.tick();
        assert_eq!(stale(&seen.lock()), 1);
        // Restart: the list comes from the store, and no early reminder.
        let (env2, seen2) = crate::threat::test_env_on(&env.store, clock.clone());
        let feeds2 = Feeds::new(&env2, env2.feeds.clone());
        feeds2.configure(&rc).unwrap();
        assert!(env2.feeds.listing("192.0.2.1".parse().unwrap()).1 == 70);
        feeds2.evaluate(clock.now().as_microsecond());
        assert_eq!(stale(&seen2.lock()), 0);
        clock.advance_secs(23 * 3600);
        feeds2.evaluate(clock.now().as_microsecond());
        assert_eq!(stale(&seen2.lock()), 1);
        env.store.close();
        let _ = std::fs::remove_dir_all(dir);
    }
}
