//! The upstream HTTP cache: a shared, panel-side score (`GET {reputation.upstream.url}?ip=A`,
//! answer `{"score": 0-100, "reason": "..."}`; 404 means no opinion), with an optional
//! bearer token from the environment variable `token_env`.
//!
//! Rule 5: answers are kept locally for `cache_ttl_min` (default 15 minutes); a fail-open
//! circuit breaker (`breaker.rs`) opens after `failure_threshold` consecutive failures and
//! lets one probe through at a time after `cooldown_seconds`. While it is open the source
//! answers `skipped` and the verdict goes on without it.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{Env, MemCache};
use crate::config::threat::UpstreamConfig;
use crate::net::https::{Client, FetchError, Roots};
use crate::threat::breaker::{Breaker, Permit};
use crate::threat::verdict::{Answer, Query, Source, Status};

const MAX_BODY: u64 = 64 * 1024;

pub struct Upstream {
    cfg: UpstreamConfig,
    client: Client,
    pub breaker: Arc<Breaker>,
    mem: MemCache,
}

/// Reads an answer: (score, reason).
pub fn parse(body: &[u8]) -> Option<(u8, String)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let score = v.get("score")?.as_f64()?;
    if !score.is_finite() {
        return None;
    }
    let reason = v
        .get("reason")
        .and_then(Value::as_str)
        .map(|r| crate::text::for_log(r, 200).to_string())
        .unwrap_or_else(|| "shared score".into());
    Some((score.round().clamp(0.0, 100.0) as u8, reason))
}

/// Why the upstream gave no score (the source's `error` reason).
#[derive(Debug)]
enum UpstreamError {
    Fetch(FetchError),
    /// A 200 answer without a finite `score`.
    NotUnderstood,
    /// An HTTP status other than 200 or 404.
    Status(u16),
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamError::Fetch(e) => write!(f, "upstream: {e}"),
            UpstreamError::NotUnderstood => f.write_str("the upstream answer is not understood"),
            UpstreamError::Status(s) => write!(f, "upstream answered {s}"),
        }
    }
}

impl std::error::Error for UpstreamError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UpstreamError::Fetch(e) => Some(e),
            _ => None,
        }
    }
}

impl Upstream {
    pub fn new(cfg: &UpstreamConfig, roots: &Roots, timeout: Duration, env: &Env) -> Upstream {
        Upstream {
            cfg: cfg.clone(),
            client: Client::new(&cfg.url, roots, timeout, MAX_BODY, 0),
            breaker: Breaker::new(
                env.clock.clone(),
                cfg.failure_threshold,
                Duration::from_secs(cfg.cooldown_seconds),
            ),
            mem: MemCache::new(65_536),
        }
    }

    fn ttl_us(&self) -> i64 {
        self.cfg.cache_ttl_min as i64 * 60 * 1_000_000
    }

    fn fetch(&self, ip: IpAddr) -> Result<Answer, UpstreamError> {
        let url = format!(
            "{}{}ip={ip}",
            self.cfg.url,
            if self.cfg.url.contains('?') { '&' } else { '?' }
        );
        let token = if self.cfg.token_env.is_empty() {
            None
        } else {
            Some(std::env::var(&self.cfg.token_env).unwrap_or_default())
        };
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Accept", "application/json")];
        if let Some(a) = &auth {
            headers.push(("Authorization", a.as_str()));
        }
        let f = self
            .client
            .get(&url, &headers)
            .map_err(UpstreamError::Fetch)?;
        match f.status {
            200 => parse(&f.body)
                .map(|(s, r)| Answer::score(s, r))
                .ok_or(UpstreamError::NotUnderstood),
            404 => Ok(Answer::status(Status::NoData, "no shared score")),
            s => Err(UpstreamError::Status(s)),
        }
    }
}

impl Source for Upstream {
    fn name(&self) -> &'static str {
        "upstream"
    }

    fn remote(&self) -> bool {
        true
    }

    fn cached(&self, ip: IpAddr, q: &Query) -> Option<Answer> {
        self.mem.get(ip, q.now.as_microsecond())
    }

    fn lookup(&self, ip: IpAddr, q: &Query) -> Answer {
        let now = q.now.as_microsecond();
        if let Some(a) = self.mem.get(ip, now) {
            return a;
        }
        let probe = match self.breaker.acquire() {
            Permit::Refused => {
                return Answer::status(
                    Status::Skipped,
                    "circuit breaker open after repeated upstream failures (fail-open)",
                )
            }
            Permit::Go => None,
            Permit::Probe(p) => Some(p),
        };
        match self.fetch(ip) {
            Ok(a) => {
                self.breaker.success(probe);
                self.mem.put(ip, now + self.ttl_us(), a.clone(), now);
                a
            }
            Err(e) => {
                self.breaker.failure(probe);
                Answer::status(Status::Error, e.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::clock::Clock;
    use crate::net::https::testsrv::{write_ca, Server};
    use crate::threat::test_env;

    #[test]
    fn cache_ttl_and_the_breakers_single_probe() {
        let fail = Arc::new(AtomicBool::new(false));
        let slow = Arc::new(AtomicBool::new(false));
        let (f2, s2) = (fail.clone(), slow.clone());
        let s = Server::https(move |req| {
            if s2.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(400));
            }
            if f2.load(Ordering::SeqCst) {
                return (503, vec![], vec![]);
            }
            let score = if req.path.contains("192.0.2.9") {
                90
            } else {
                5
            };
            (
                200,
                vec![],
                format!(r#"{{"score": {score}, "reason": "panel"}}"#).into_bytes(),
            )
        });
        let (env, dir, clock, _) = test_env("upstream");
        let roots = Roots::load(Some(&write_ca(&s, &dir))).unwrap();
        let cfg = UpstreamConfig {
            url: s.url("/score"),
            token_env: String::new(),
            cache_ttl_min: 15,
            failure_threshold: 2,
            cooldown_seconds: 30,
        };
        let up = Arc::new(Upstream::new(&cfg, &roots, Duration::from_secs(5), &env));
        let q = |c: &crate::clock::ManualClock| Query {
            now: c.now(),
            scan: None,
        };
        assert_eq!(
            up.lookup("192.0.2.9".parse().unwrap(), &q(&clock)).score,
            Some(90)
        );
        assert_eq!(
            up.cached("192.0.2.9".parse().unwrap(), &q(&clock))
                .unwrap()
                .score,
            Some(90)
        );
        clock.advance_secs(14 * 60);
        assert!(up
            .cached("192.0.2.9".parse().unwrap(), &q(&clock))
            .is_some());
        clock.advance_secs(61);
        assert!(up
            .cached("192.0.2.9".parse().unwrap(), &q(&clock))
            .is_none());
        assert_eq!(s.count(), 1);
        // Two failures open the breaker; then nothing is sent.
        fail.store(true, Ordering::SeqCst);
        for n in 1..=2 {
            let a = up.lookup(format!("198.51.100.{n}").parse().unwrap(), &q(&clock));
            assert_eq!(a.status, Status::Error);
        }
        assert_eq!(up.breaker.state_name(), "open");
        let a = up.lookup("198.51.100.3".parse().unwrap(), &q(&clock));
        assert_eq!(a.status, Status::Skipped);
        assert_eq!(s.count(), 3);
        // After the cooldown exactly one probe goes through while others are refused.
        clock.advance_secs(30);
        fail.store(false, Ordering::SeqCst);
        slow.store(true, Ordering::SeqCst);
        let probe = {
            let up = up.clone();
            let c = clock.now();
            std::thread::spawn(move || {
                up.lookup(
                    "198.51.100.4".parse().unwrap(),
                    &Query { now: c, scan: None },
                )
            })
        };
        crate::threat::wait_for(|| s.seen.lock().len() == 4);
        for n in 5..8 {
            let a = up.lookup(format!("198.51.100.{n}").parse().unwrap(), &q(&clock));
            assert_eq!(a.status, Status::Skipped, "{a:?}");
        }
        assert_eq!(probe.join().unwrap().score, Some(5));
        assert_eq!(s.count(), 4);
        assert_eq!(up.breaker.state_name(), "closed");
        slow.store(false, Ordering::SeqCst);
        assert_eq!(
            up.lookup("198.51.100.9".parse().unwrap(), &q(&clock)).score,
            Some(5)
        );
        env.store.close();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn answers_parse() {
        assert_eq!(parse(br#"{"score": 120.4}"#).unwrap().0, 100);
        assert!(parse(br#"{"score": "x"}"#).is_none());
        assert!(parse(b"").is_none());
    }
}
