//! The IP-reputation feed: an AbuseIPDB-compatible API (`GET {ipfeed_url}?ipAddress=A&
//! maxAgeInDays=90` with header `Key`, answer `{"data": {"abuseConfidenceScore": N,
//! "totalReports": M, ...}}`).
//!
//! Guarantees (spec "Threat sources and verdicts" rule 3):
//! - Answers are cached (memory and store, `reputation.ipfeed_cache_hours`).
//! - An automatic scan cycle makes at most `reputation.ipfeed_max_per_scan` (default 5)
//!   uncached lookups; operator lookups are not capped this way.
//! - Before each request one unit of the daily quota (`reputation.ipfeed_daily_quota`, per
//!   UTC day) is reserved in the store (`kv` `reputation.ipfeed.quota`); when none is left
//!   no request is sent. The reservation survives restarts.
//! - A 429 answer backs off for its `Retry-After` (else one hour, doubling on repeated 429
//!   up to a day); a 402 answer backs off until the next UTC day. The back-off is kept in
//!   the store (`kv` `reputation.ipfeed.backoff`) and survives restarts.
//! - While the quota is used up or a back-off runs, the WARNING `reputation_quota_exhausted`
//!   is in force (at most one reminder a day, see `reminders`); it never scores or blocks.

use std::net::IpAddr;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;

use super::{Env, MemCache};
use crate::config::threat::IpFeedConfig;
use crate::net::https::{Client, Roots};
use crate::store::threat::{cache_get, cache_put, quota_used, reserve_quota, CacheRow};
use crate::threat::verdict::{Answer, Query, Source, Status};
use crate::timefmt::rfc3339;

pub const CHECK: &str = "reputation_quota_exhausted";
pub const MESSAGE: &str = "IP reputation feed quota exhausted";
const QUOTA_KEY: &str = "reputation.ipfeed.quota";
const BACKOFF_KEY: &str = "reputation.ipfeed.backoff";
const DAY_US: i64 = 86_400 * 1_000_000;
const HOUR_US: i64 = 3600 * 1_000_000;
const MAX_BODY: u64 = 256 * 1024;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Backoff {
    /// Wall microseconds.
    until: i64,
    /// `429` or `402`.
    why: String,
    /// Consecutive 429 answers.
    streak: u32,
}

impl Backoff {
    fn encode(&self) -> String {
        format!("{}:{}:{}", self.until, self.why, self.streak)
    }

    fn decode(s: &str) -> Option<Backoff> {
        let mut it = s.splitn(3, ':');
        Some(Backoff {
            until: it.next()?.parse().ok()?,
            why: it.next()?.to_string(),
            streak: it.next()?.parse().ok()?,
        })
    }
}

pub struct IpFeed {
    cfg: IpFeedConfig,
    client: Client,
    env: Env,
    mem: MemCache,
    backoff: Mutex<Option<Backoff>>,
}

/// Reads an answer: (score, reason).
pub fn parse(body: &[u8]) -> Option<(u8, String)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let d = v.get("data")?;
    let score = d.get("abuseConfidenceScore")?.as_u64()?.min(100) as u8;
    let reports = d.get("totalReports").and_then(Value::as_u64).unwrap_or(0);
    let mut reason = format!("abuse confidence {score}%, {reports} reports");
    if let Some(c) = d.get("countryCode").and_then(Value::as_str) {
        reason.push_str(&format!(", country {}", crate::text::for_log(c, 8)));
    }
    if d.get("isWhitelisted").and_then(Value::as_bool) == Some(true) {
        reason.push_str(", whitelisted by the feed");
    }
    Some((score, reason))
}

fn day_of(us: i64) -> i64 {
    us.div_euclid(DAY_US)
}

impl IpFeed {
    pub fn new(cfg: &IpFeedConfig, roots: &Roots, timeout: Duration, env: &Env) -> IpFeed {
        let stored = env
            .store
            .read(|c| crate::store::kv::get(c, BACKOFF_KEY))
            .ok()
            .flatten()
            .and_then(|s| Backoff::decode(&s));
        IpFeed {
            cfg: cfg.clone(),
            client: Client::new(&cfg.url, roots, timeout, MAX_BODY, 0),
            env: env.clone(),
            mem: MemCache::new(65_536),
            backoff: Mutex::new(stored),
        }
    }

    fn ttl_us(&self) -> i64 {
        self.cfg.cache_hours as i64 * HOUR_US
    }

    fn cached_in_store(&self, ip: IpAddr, now: i64) -> Option<Answer> {
        let key = ip.to_string();
        let row = self
            .env
            .store
            .read(|c| cache_get(c, "ipfeed", &key))
            .ok()
            .flatten()?;
        if row.expires <= now {
            return None;
        }
        let a = Answer::score(row.score.unwrap_or(0).clamp(0, 100) as u8, row.reason);
        self.mem.put(ip, row.expires, a.clone(), now);
        Some(a)
    }

    fn set_backoff(&self, b: Option<Backoff>) {
        *self.backoff.lock() = b.clone();
        let v = b.map(|b| b.encode());
        if let Err(e) = self
            .env
            .store
            .write(move |c| crate::store::kv::put(c, BACKOFF_KEY, v.as_deref()))
        {
            log::warn!("ipfeed: cannot store the back-off: {e}");
        }
    }

    /// The back-off in force at `now`, if any.
    fn backoff_at(&self, now: i64) -> Option<Backoff> {
        self.backoff.lock().clone().filter(|b| b.until > now)
    }

    /// Why lookups are held back now (quota used up or a back-off), if they are.
    pub fn exhausted(&self, now: i64) -> Option<String> {
        if let Some(b) = self.backoff_at(now) {
            let until = jiff::Timestamp::from_microsecond(b.until)
                .map(rfc3339)
                .unwrap_or_default();
            let what = if b.why == "402" {
                "the feed answered 402 (quota or payment required)"
            } else {
                "the feed answered 429 (rate limited)"
            };
            return Some(format!("{what}; lookups resume at {until}"));
        }
        let used = self
            .env
            .store
            .read(|c| quota_used(c, QUOTA_KEY))
            .ok()
            .flatten();
        match used {
            Some((d, n)) if d == day_of(now) && n >= u64::from(self.cfg.daily_quota) => {
                let next = jiff::Timestamp::from_microsecond((d + 1) * DAY_US)
                    .map(rfc3339)
                    .unwrap_or_default();
                Some(format!(
                    "the daily quota of {} requests is used; lookups resume at {next}",
                    self.cfg.daily_quota
                ))
            }
            _ => None,
        }
    }

    /// Raises or resolves `reputation_quota_exhausted`.
    pub fn evaluate(&self, now: i64) {
        let cond = self
            .exhausted(now)
            .map(|why| vec![(MESSAGE.to_string(), why)])
            .unwrap_or_default();
        self.env.reminders.set(CHECK, cond);
    }

    /// (requests used today, daily quota).
    pub fn quota(&self, now: i64) -> (u64, u32) {
        let used = self
            .env
            .store
            .read(|c| quota_used(c, QUOTA_KEY))
            .ok()
            .flatten()
            .filter(|(d, _)| *d == day_of(now))
            .map_or(0, |(_, n)| n);
        (used, self.cfg.daily_quota)
    }

    fn request(&self, ip: IpAddr, now: i64) -> Answer {
        let url = format!(
            "{}{}ipAddress={ip}&maxAgeInDays=90",
            self.cfg.url,
            if self.cfg.url.contains('?') { '&' } else { '?' }
        );
        let headers = [
            ("Key", self.cfg.key.as_str()),
            ("Accept", "application/json"),
        ];
        match self.client.get(&url, &headers) {
            Ok(f) if f.status == 200 => {
                if self.backoff.lock().is_some() {
                    self.set_backoff(None);
                }
                match parse(&f.body) {
                    Some((score, reason)) => {
                        let a = Answer::score(score, reason);
                        let expires = now + self.ttl_us();
                        self.mem.put(ip, expires, a.clone(), now);
                        let row = CacheRow {
                            fetched: now,
                            expires,
                            score: Some(i64::from(score)),
                            reason: a.reason.clone(),
                            data: String::new(),
                        };
                        let key = ip.to_string();
                        if let Err(e) = self
                            .env
                            .store
                            .write(move |c| cache_put(c, "ipfeed", &key, &row))
                        {
                            log::debug!("ipfeed: cannot cache: {e}");
                        }
                        a
                    }
                    None => Answer::status(Status::Error, "the feed's answer is not understood"),
                }
            }
            Ok(f) if f.status == 429 => {
                let streak = self
                    .backoff
                    .lock()
                    .as_ref()
                    .filter(|b| b.why == "429")
                    .map_or(0, |b| b.streak)
                    .saturating_add(1);
                let wait = match f.retry_after {
                    Some(s) => (s.min(86_400) as i64) * 1_000_000,
                    None => (HOUR_US << (streak - 1).min(5)).min(DAY_US),
                };
                self.set_backoff(Some(Backoff {
                    until: now + wait.max(1_000_000),
                    why: "429".into(),
                    streak,
                }));
                Answer::status(
                    Status::Skipped,
                    "the feed answered 429 (rate limited); backing off",
                )
            }
            Ok(f) if f.status == 402 => {
                self.set_backoff(Some(Backoff {
                    until: (day_of(now) + 1) * DAY_US,
                    why: "402".into(),
                    streak: 0,
                }));
                Answer::status(
                    Status::Skipped,
                    "the feed answered 402 (quota or payment required); backing off until the next day",
                )
            }
            Ok(f) => Answer::status(Status::Error, format!("the feed answered {}", f.status)),
            Err(e) => Answer::status(Status::Error, format!("the feed: {e}")),
        }
    }
}

impl Source for IpFeed {
    fn name(&self) -> &'static str {
        "ipfeed"
    }

    fn remote(&self) -> bool {
        true
    }

    fn cached(&self, ip: IpAddr, q: &Query) -> Option<Answer> {
        let now = q.now.as_microsecond();
        self.mem
            .get(ip, now)
            .or_else(|| self.cached_in_store(ip, now))
    }

    fn lookup(&self, ip: IpAddr, q: &Query) -> Answer {
        let now = q.now.as_microsecond();
        if let Some(a) = self.cached(ip, q) {
            return a;
        }
        if let Some(why) = self.exhausted_backoff(now) {
            self.evaluate(now);
            return Answer::status(Status::Skipped, why);
        }
        if let Some(b) = &q.scan {
            if !b.take() {
                return Answer::status(
                    Status::Skipped,
                    format!(
                        "the per-scan cap of {} uncached lookups is reached",
                        self.cfg.max_per_scan
                    ),
                );
            }
        }
        let day = day_of(now);
        let quota = self.cfg.daily_quota;
        let reserved = self
            .env
            .store
            .write(move |c| reserve_quota(c, QUOTA_KEY, day, quota));
        let a = match reserved {
            Ok(true) => self.request(ip, now),
            Ok(false) => Answer::status(
                Status::Skipped,
                format!("the daily quota of {quota} requests is used"),
            ),
            Err(e) => Answer::status(
                Status::Error,
                format!("cannot reserve quota in the store: {e}"),
            ),
        };
        self.evaluate(now);
        a
    }
}

impl IpFeed {
    fn exhausted_backoff(&self, now: i64) -> Option<String> {
        self.backoff_at(now).map(|b| {
            let until = jiff::Timestamp::from_microsecond(b.until)
                .map(rfc3339)
                .unwrap_or_default();
            format!("backing off after a {} answer until {until}", b.why)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::Clock;
    use crate::findings::Ingest;
    use crate::net::https::testsrv::{write_ca, Server};
    use crate::threat::test_env;
    use crate::threat::verdict::ScanBudget;

    fn cfg(url: String, quota: u32) -> IpFeedConfig {
        IpFeedConfig {
            key: "k-secret".into(),
            url,
            daily_quota: quota,
            cache_hours: 24,
            max_per_scan: 5,
        }
    }

    fn ok_server() -> Server {
        Server::https(|req| {
            assert_eq!(req.header("key"), Some("k-secret"));
            (
                200,
                vec![],
                br#"{"data":{"abuseConfidenceScore":87,"totalReports":12,"countryCode":"ZZ"}}"#
                    .to_vec(),
            )
        })
    }

    #[test]
    fn quota_is_reserved_in_the_store_across_a_restart() {
        let s = ok_server();
        let (env, dir, clock, seen) = test_env("ipfeed-quota");
        let ca = write_ca(&s, &dir);
        let roots = Roots::load(Some(&ca)).unwrap();
        let c = cfg(s.url("/api/v2/check"), 2);
        let feed = IpFeed::new(&c, &roots, Duration::from_secs(5), &env);
        let q = Query {
            now: clock.now(),
            scan: None,
        };
        let a = feed.lookup("192.0.2.1".parse().unwrap(), &q);
        assert_eq!(a.score, Some(87), "{a:?}");
        assert!(a.reason.contains("12 reports"));
        // Cached: no second request.
        feed.lookup("192.0.2.1".parse().unwrap(), &q);
        assert_eq!(s.count(), 1);
        feed.lookup("192.0.2.2".parse().unwrap(), &q);
        assert_eq!(s.count(), 2);
        // "Restart": a new source on the same store; the day's quota is used.
        let feed2 = IpFeed::new(&c, &roots, Duration::from_secs(5), &env);
        let a = feed2.lookup("192.0.2.3".parse().unwrap(), &q);
        assert_eq!(a.status, Status::Skipped, "{a:?}");
        assert_eq!(s.count(), 2);
        // The cache survived too.
        assert_eq!(
            feed2
                .cached("192.0.2.1".parse().unwrap(), &q)
                .unwrap()
                .score,
            Some(87)
        );
        let warned = seen
            .lock()
            .iter()
            .any(|i| matches!(i, Ingest::Finding(f) if f.check == CHECK));
        assert!(warned);
        // A new UTC day frees the quota.
        clock.advance_secs(86_400);
        let q = Query {
            now: clock.now(),
            scan: None,
        };
        assert_eq!(
            feed2.lookup("192.0.2.3".parse().unwrap(), &q).score,
            Some(87)
        );
        assert_eq!(feed2.quota(clock.now().as_microsecond()), (1, 2));
        env.store.close();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn scan_cap_429_and_402_back_off_across_a_restart() {
        let mode = Arc::new(parking_lot::Mutex::new(200u16));
        let m = mode.clone();
        let s = Server::http(move |_| {
            let st = *m.lock();
            match st {
                429 => (429, vec![("Retry-After".into(), "600".into())], vec![]),
                402 => (402, vec![], vec![]),
                _ => (
                    200,
                    vec![],
                    br#"{"data":{"abuseConfidenceScore":10}}"#.to_vec(),
                ),
            }
        });
        let (env, dir, clock, _seen) = test_env("ipfeed-backoff");
        let c = cfg(s.url("/check"), 1000);
        let feed = IpFeed::new(&c, &Roots::default(), Duration::from_secs(5), &env);
        let now = || Query {
            now: clock.now(),
            scan: None,
        };
        // The per-scan cap.
        let budget = ScanBudget::new(1);
        let scan = Query {
            now: clock.now(),
            scan: Some(budget),
        };
        assert_eq!(
            feed.lookup("192.0.2.10".parse().unwrap(), &scan).score,
            Some(10)
        );
        let a = feed.lookup("192.0.2.11".parse().unwrap(), &scan);
        assert!(a.reason.contains("per-scan cap"), "{a:?}");
        assert_eq!(s.count(), 1);
        // 429: back off for Retry-After.
        *mode.lock() = 429;
        let a = feed.lookup("192.0.2.12".parse().unwrap(), &now());
        assert_eq!(a.status, Status::Skipped);
        assert_eq!(s.count(), 2);
        *mode.lock() = 200;
        assert_eq!(
            feed.lookup("192.0.2.13".parse().unwrap(), &now()).status,
            Status::Skipped
        );
        assert_eq!(s.count(), 2, "no request while backing off");
        assert!(feed
            .exhausted(clock.now().as_microsecond())
            .unwrap()
            .contains("429"));
        // Across a restart too.
        let feed2 = IpFeed::new(&c, &Roots::default(), Duration::from_secs(5), &env);
        assert_eq!(
            feed2.lookup("192.0.2.13".parse().unwrap(), &now()).status,
            Status::Skipped
        );
        assert_eq!(s.count(), 2);
        clock.advance_secs(601);
        assert_eq!(
            feed2.lookup("192.0.2.13".parse().unwrap(), &now()).score,
            Some(10)
        );
        assert_eq!(s.count(), 3);
        // 402: until the next UTC day.
        *mode.lock() = 402;
        feed2.lookup("192.0.2.14".parse().unwrap(), &now());
        *mode.lock() = 200;
        clock.advance_secs(3600);
        assert_eq!(
            feed2.lookup("192.0.2.15".parse().unwrap(), &now()).status,
            Status::Skipped
        );
        assert_eq!(s.count(), 4);
        let until = (day_of(clock.now().as_microsecond()) + 1) * DAY_US;
        let left = (until - clock.now().as_microsecond()) / 1_000_000;
        clock.advance_secs(left as u64 + 1);
        assert_eq!(
            feed2.lookup("192.0.2.15".parse().unwrap(), &now()).score,
            Some(10)
        );
        assert!(feed2.exhausted(clock.now().as_microsecond()).is_none());
        env.store.close();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn answers_parse() {
        assert_eq!(
            parse(br#"{"data":{"abuseConfidenceScore":250,"isWhitelisted":true}}"#)
                .unwrap()
                .0,
            100
        );
        assert!(parse(b"{}").is_none());
        assert!(parse(b"\xff").is_none());
    }
}
