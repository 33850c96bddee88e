//! RDAP: the network name and organisation an address is registered to, cached for 24
//! hours in the store (`threat_cache`, source `rdap`) and in memory. The source gives no
//! score (weight 0 by default): it explains, the lookup route shows it as `rdap`.
//!
//! The request is `GET {reputation.rdap.url}{address}` with `Accept: application/rdap+json`;
//! up to three `https://` redirects are followed (the rdap.org bootstrap service redirects
//! to the registry). Answers are read up to 1 MiB. A failed lookup is remembered for five
//! minutes in memory so a failing registry is not asked on every verdict.

use std::net::IpAddr;
use std::time::Duration;

use serde_json::{json, Value};

use super::{Env, MemCache};
use crate::config::threat::RdapConfig;
use crate::net::https::{Client, Roots};
use crate::store::threat::{cache_get, cache_put, CacheRow};
use crate::threat::verdict::{Answer, Query, Source, Status};

/// How long an answer is kept.
pub const TTL_US: i64 = 24 * 3600 * 1_000_000;
const FAILURE_TTL_US: i64 = 5 * 60 * 1_000_000;
const MAX_BODY: u64 = 1024 * 1024;
/// Entities and vCard entries looked at, at most.
const MAX_WALK: usize = 64;

pub struct Rdap {
    base: String,
    client: Client,
    env: Env,
    mem: MemCache,
}

/// What an RDAP answer says: (network name, handle, organisation, start, end, country).
pub fn parse(body: &[u8]) -> Option<Value> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(|s| crate::text::for_log(s, 200).to_string())
    };
    let mut org: Option<String> = None;
    if let Some(ents) = v.get("entities").and_then(Value::as_array) {
        let mut best: Option<(u8, String)> = None;
        for e in ents.iter().take(MAX_WALK) {
            let roles: Vec<&str> = e
                .get("roles")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).take(8).collect())
                .unwrap_or_default();
            let rank = if roles.contains(&"registrant") {
                0
            } else if roles.contains(&"administrative") {
                1
            } else {
                2
            };
            let name = e
                .get("vcardArray")
                .and_then(Value::as_array)
                .and_then(|a| a.get(1))
                .and_then(Value::as_array)
                .and_then(|entries| {
                    entries.iter().take(MAX_WALK).find_map(|en| {
                        let en = en.as_array()?;
                        (en.first()?.as_str()? == "fn")
                            .then(|| en.get(3)?.as_str().map(String::from))?
                    })
                });
            if let Some(n) = name {
                if best.as_ref().is_none_or(|(r, _)| rank < *r) {
                    best = Some((rank, crate::text::for_log(&n, 200).to_string()));
                }
            }
        }
        org = best.map(|(_, n)| n);
    }
    let out = json!({
        "name": s("name"),
        "handle": s("handle"),
        "organisation": org,
        "start_address": s("startAddress"),
        "end_address": s("endAddress"),
        "country": s("country"),
    });
    Some(out)
}

fn reason_of(d: &Value) -> String {
    let name = d["name"].as_str().unwrap_or("?");
    match d["organisation"].as_str() {
        Some(o) => format!("network {name}, organisation {o}"),
        None => format!("network {name}"),
    }
}

impl Rdap {
    pub fn new(cfg: &RdapConfig, roots: &Roots, timeout: Duration, env: &Env) -> Rdap {
        Rdap {
            base: cfg.url.clone(),
            client: Client::new(&cfg.url, roots, timeout, MAX_BODY, 3),
            env: env.clone(),
            mem: MemCache::new(4096),
        }
    }

    fn cached_in_store(&self, ip: IpAddr, now: i64) -> Option<Answer> {
        let key = ip.to_string();
        let row = self
            .env
            .store
            .read(|c| cache_get(c, "rdap", &key))
            .ok()
            .flatten()?;
        if row.expires <= now {
            return None;
        }
        let a = if row.data.is_empty() {
            Answer::status(Status::NoData, row.reason)
        } else {
            let data: Value = serde_json::from_str(&row.data).ok()?;
            Answer::info(row.reason).with_data(data)
        };
        self.mem.put(ip, row.expires, a.clone(), now);
        Some(a)
    }

    fn remember(&self, ip: IpAddr, a: &Answer, now: i64) {
        let expires = now + TTL_US;
        self.mem.put(ip, expires, a.clone(), now);
        let row = CacheRow {
            fetched: now,
            expires,
            score: None,
            reason: a.reason.clone(),
            data: a.data.as_ref().map(|d| d.to_string()).unwrap_or_default(),
        };
        let key = ip.to_string();
        if let Err(e) = self
            .env
            .store
            .write(move |c| cache_put(c, "rdap", &key, &row))
        {
            log::debug!("rdap: cannot cache: {e}");
        }
    }
}

impl Source for Rdap {
    fn name(&self) -> &'static str {
        "rdap"
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
        let url = format!("{}{}", self.base, ip);
        let a = match self.client.get(
            &url,
            &[("Accept", "application/rdap+json, application/json")],
        ) {
            Ok(f) if f.status == 200 => match parse(&f.body) {
                Some(d) => Answer::info(reason_of(&d)).with_data(d),
                None => Answer::status(Status::Error, "the RDAP answer is not valid JSON"),
            },
            Ok(f) if f.status == 404 => Answer::status(Status::NoData, "no RDAP record"),
            Ok(f) => Answer::status(Status::Error, format!("RDAP answered {}", f.status)),
            Err(e) => Answer::status(Status::Error, format!("RDAP: {e}")),
        };
        match a.status {
            Status::Ok | Status::NoData => self.remember(ip, &a, now),
            _ => self.mem.put(ip, now + FAILURE_TTL_US, a.clone(), now),
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_network_and_organisation() {
        let body = br#"{"name":"EXAMPLE-NET","handle":"NET-192-0-2-0-1","startAddress":"192.0.2.0","endAddress":"192.0.2.255","country":"US",
          "entities":[{"roles":["technical"],"vcardArray":["vcard",[["version",{},"text","4.0"],["fn",{},"text","Tech Dept"]]]},
                      {"roles":["registrant"],"vcardArray":["vcard",[["fn",{},"text","Example Org"]]]}]}"#;
        let d = parse(body).unwrap();
        assert_eq!(d["name"], "EXAMPLE-NET");
        assert_eq!(d["organisation"], "Example Org");
        assert_eq!(
            reason_of(&d),
            "network EXAMPLE-NET, organisation Example Org"
        );
        assert!(parse(b"not json").is_none());
        assert!(parse(b"[1,2]").is_some());
        let d = parse(br#"{"entities":[{"vcardArray":["vcard",[["fn"]]]}]}"#).unwrap();
        assert!(d["organisation"].is_null());
    }
}
