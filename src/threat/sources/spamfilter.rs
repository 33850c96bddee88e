//! The spam-filter controller: per-address outcomes of recent mail from its rolling history
//! (the Rspamd controller's `GET {url}/history`, header `Password` from the environment
//! variable `reputation.spamfilter.token_env`, read at query time).
//!
//! Rule 4: delivered ham dilutes the score, temporary deferrals are neutral, definitive spam
//! actions count against the sender: score = 100 * spam / (spam + ham). Actions: `no
//! action` is ham; `greylist`, `soft reject` are deferrals; `reject`, `add header`,
//! `rewrite subject`, `discard` are spam. The history is fetched at most every
//! `reputation.spamfilter.refresh_seconds` (default 60) and read up to 32 MiB and 100,000
//! rows; between fetches lookups answer from memory.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;

use super::Env;
use crate::config::threat::SpamFilterConfig;
use crate::net::https::{Client, FetchError, Roots};
use crate::threat::verdict::{Answer, Query, Source, Status};

const MAX_BODY: u64 = 32 * 1024 * 1024;
/// History rows read at most.
pub const MAX_ROWS: usize = 100_000;

/// Outcomes of one address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub ham: u32,
    pub spam: u32,
    pub deferred: u32,
}

type History = Arc<HashMap<IpAddr, Counts>>;

pub struct SpamFilter {
    cfg: SpamFilterConfig,
    client: Client,
    /// (fetched at, wall microseconds; the history).
    state: Mutex<Option<(i64, History)>>,
    /// One fetch at a time.
    fetching: Mutex<()>,
}

/// Reads a history answer (a list of rows, or `{"rows": [...]}`).
pub fn parse(body: &[u8]) -> Option<HashMap<IpAddr, Counts>> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let rows = match &v {
        Value::Array(a) => a,
        Value::Object(o) => o.get("rows")?.as_array()?,
        _ => return None,
    };
    let mut out: HashMap<IpAddr, Counts> = HashMap::new();
    for r in rows.iter().take(MAX_ROWS) {
        let Some(ip) = r
            .get("ip")
            .and_then(Value::as_str)
            .and_then(|s| s.trim().parse::<IpAddr>().ok())
            .map(|a| a.to_canonical())
        else {
            continue;
        };
        let Some(action) = r.get("action").and_then(Value::as_str) else {
            continue;
        };
        let c = out.entry(ip.to_canonical()).or_default();
        match action.to_ascii_lowercase().replace('_', " ").as_str() {
            "no action" => c.ham = c.ham.saturating_add(1),
            "greylist" | "soft reject" => c.deferred = c.deferred.saturating_add(1),
            "reject" | "add header" | "rewrite subject" | "discard" => {
                c.spam = c.spam.saturating_add(1)
            }
            _ => {}
        }
    }
    Some(out)
}

fn answer(c: Option<&Counts>) -> Answer {
    let Some(c) = c else {
        return Answer::status(Status::NoData, "not in the spam filter's history");
    };
    let reason = format!(
        "{} spam, {} ham, {} deferred in the spam filter's history",
        c.spam, c.ham, c.deferred
    );
    let decided = u64::from(c.spam) + u64::from(c.ham);
    if decided == 0 {
        return Answer::info(reason);
    }
    let score = (100 * u64::from(c.spam) / decided) as u8;
    Answer::score(score, reason)
}

/// Why the spam filter's history is not available (the source's `error` reason).
#[derive(Debug)]
enum SpamFilterError {
    /// The token's environment variable (named) is unset or empty.
    NoToken(String),
    Fetch(FetchError),
    /// An HTTP status other than 200.
    Status(u16),
    NotUnderstood,
}

impl std::fmt::Display for SpamFilterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpamFilterError::NoToken(var) => write!(
                f,
                "the environment variable {var} (reputation.spamfilter.token_env) is not set"
            ),
            SpamFilterError::Fetch(e) => write!(f, "spam filter: {e}"),
            SpamFilterError::Status(s) => write!(f, "the spam filter answered {s}"),
            SpamFilterError::NotUnderstood => {
                f.write_str("the spam filter's history is not understood")
            }
        }
    }
}

impl std::error::Error for SpamFilterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SpamFilterError::Fetch(e) => Some(e),
            _ => None,
        }
    }
}

impl SpamFilter {
    pub fn new(cfg: &SpamFilterConfig, roots: &Roots, timeout: Duration, _env: &Env) -> SpamFilter {
        SpamFilter {
            cfg: cfg.clone(),
            client: Client::new(&cfg.url, roots, timeout, MAX_BODY, 0),
            state: Mutex::new(None),
            fetching: Mutex::new(()),
        }
    }

    fn fresh(&self, now: i64) -> Option<History> {
        let refresh = self.cfg.refresh_seconds as i64 * 1_000_000;
        self.state
            .lock()
            .as_ref()
            .filter(|(at, _)| now.saturating_sub(*at) < refresh && *at <= now)
            .map(|(_, h)| h.clone())
    }

    fn fetch(&self, now: i64) -> Result<History, SpamFilterError> {
        let _one = self.fetching.lock();
        if let Some(h) = self.fresh(now) {
            return Ok(h);
        }
        let token = std::env::var(&self.cfg.token_env).unwrap_or_default();
        if token.is_empty() {
            return Err(SpamFilterError::NoToken(self.cfg.token_env.clone()));
        }
        let url = format!("{}/history", self.cfg.url.trim_end_matches('/'));
        let f = self
            .client
            .get(&url, &[("Password", &token)])
            .map_err(SpamFilterError::Fetch)?;
        if f.status != 200 {
            return Err(SpamFilterError::Status(f.status));
        }
        let h = Arc::new(parse(&f.body).ok_or(SpamFilterError::NotUnderstood)?);
        *self.state.lock() = Some((now, h.clone()));
        Ok(h)
    }
}

impl Source for SpamFilter {
    fn name(&self) -> &'static str {
        "spamfilter"
    }

    fn remote(&self) -> bool {
        true
    }

    fn cached(&self, ip: IpAddr, q: &Query) -> Option<Answer> {
        let h = self.fresh(q.now.as_microsecond())?;
        Some(answer(h.get(&ip)))
    }

    fn lookup(&self, ip: IpAddr, q: &Query) -> Answer {
        match self.fetch(q.now.as_microsecond()) {
            Ok(h) => answer(h.get(&ip)),
            Err(e) => Answer::status(Status::Error, e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::net::https::testsrv::Server;
    use crate::threat::test_env;

    #[test]
    fn ham_dilutes_deferrals_are_neutral_spam_counts() {
        let body = br#"{"rows":[
            {"ip":"192.0.2.1","action":"reject"},{"ip":"192.0.2.1","action":"no action"},
            {"ip":"192.0.2.1","action":"greylist"},{"ip":"192.0.2.1","action":"add header"},
            {"ip":"192.0.2.2","action":"soft reject"},{"ip":"bogus","action":"reject"},{"action":"reject"}]}"#;
        let h = parse(body).unwrap();
        let a = answer(h.get(&"192.0.2.1".parse().unwrap()));
        assert_eq!(a.score, Some(66));
        let a = answer(h.get(&"192.0.2.2".parse().unwrap()));
        assert_eq!((a.score, a.status), (None, Status::Ok));
        assert_eq!(answer(None).status, Status::NoData);
        assert!(parse(b"[]").unwrap().is_empty());
        assert!(parse(b"7").is_none());
    }

    #[test]
    fn token_from_the_environment_and_history_reused() {
        let s = Server::http(|req| {
            if req.header("password") != Some("pw-1") {
                return (403, vec![], vec![]);
            }
            (
                200,
                vec![],
                br#"[{"ip":"192.0.2.5","action":"reject"}]"#.to_vec(),
            )
        });
        let (env, dir, clock, _) = test_env("spam");
        let var = format!("SVC_TEST_SPAM_{}", std::process::id());
        let cfg = SpamFilterConfig {
            url: s.url(""),
            token_env: var.clone(),
            refresh_seconds: 60,
        };
        let sf = SpamFilter::new(&cfg, &Roots::default(), Duration::from_secs(5), &env);
        let q = Query {
            now: clock.now(),
            scan: None,
        };
        let a = sf.lookup("192.0.2.5".parse().unwrap(), &q);
        assert_eq!(a.status, Status::Error);
        assert!(a.reason.contains(&var) && !a.reason.contains("pw-1"));
        std::env::set_var(&var, "pw-1");
        assert_eq!(sf.lookup("192.0.2.5".parse().unwrap(), &q).score, Some(100));
        assert_eq!(
            sf.cached("192.0.2.6".parse().unwrap(), &q).unwrap().status,
            Status::NoData
        );
        assert_eq!(s.count(), 1);
        assert_eq!(s.seen.lock()[0].path, "/history");
        clock.advance_secs(61);
        let q = Query {
            now: clock.now(),
            scan: None,
        };
        assert!(sf.cached("192.0.2.5".parse().unwrap(), &q).is_none());
        std::env::remove_var(&var);
        env.store.close();
        let _ = std::fs::remove_dir_all(dir);
    }
}
