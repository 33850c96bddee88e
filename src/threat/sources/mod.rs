//! The verdict sources. Local ones (attack database, permanent blocklist, firewall state,
//! GeoIP, threat feeds) read memory only; remote ones (RDAP, IP-reputation feed, spam-filter
//! controller, upstream cache) keep caches and run their lookups on the pool.
//!
//! [`build`] makes the set a configuration asks for; a reload builds it again (quota,
//! back-off and the RDAP cache live in the store and survive; the upstream breaker starts
//! closed).

pub mod feeds;
pub mod ipfeed;
pub mod rdap;
pub mod spamfilter;
pub mod upstream;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::db::{AttackDb, Evidence};
use super::reminders::Reminders;
use super::score;
use super::verdict::{Answer, Query, Source, Status};
use crate::clock::SharedClock;
use crate::config::threat::{ReputationConfig, ThreatConfig};
use crate::findings::evidence::AttackKind;
use crate::firewall::Handle;
use crate::net::https::{Roots, RootsError};
use crate::store::Store;
use crate::timefmt::rfc3339;

/// What sources are built from.
#[derive(Clone)]
pub struct Env {
    pub clock: SharedClock,
    pub store: Store,
    pub db: Arc<AttackDb>,
    pub firewall: Handle,
    pub geoip: Option<Arc<crate::geoip::GeoIp>>,
    pub reminders: Arc<Reminders>,
    pub feeds: Arc<feeds::FeedSet>,
}

/// The built sources, and handles to the stateful remote ones (for status and the
/// maintenance tick).
pub struct Built {
    pub sources: Vec<Arc<dyn Source>>,
    pub ipfeed: Option<Arc<ipfeed::IpFeed>>,
    pub upstream: Option<Arc<upstream::Upstream>>,
    pub rdap: Option<Arc<rdap::Rdap>>,
}

/// Why the sources could not be configured.
#[derive(Debug)]
pub enum SourceError {
    /// `reputation.ca_file` could not be used.
    Roots(RootsError),
    /// The lookup pool's queue row could not be built or registered.
    Queue(crate::queue::RowError),
    /// A lookup thread could not be started.
    Spawn(std::io::Error),
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceError::Roots(e) => write!(f, "{e}"),
            SourceError::Queue(e) => write!(f, "{e}"),
            SourceError::Spawn(e) => write!(f, "cannot start the lookup pool: {e}"),
        }
    }
}

impl std::error::Error for SourceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SourceError::Roots(e) => Some(e),
            SourceError::Queue(e) => Some(e),
            SourceError::Spawn(e) => Some(e),
        }
    }
}

/// Builds every source the configuration enables, in the order of
/// `config::threat::SOURCE_NAMES`.
pub fn build(env: &Env, t: &ThreatConfig, r: &ReputationConfig) -> Result<Built, SourceError> {
    let roots = Roots::load(r.ca_file.as_deref()).map_err(SourceError::Roots)?;
    let timeout = Duration::from_secs(r.timeout_seconds);
    let mut sources: Vec<Arc<dyn Source>> = vec![
        Arc::new(LocalDb {
            db: env.db.clone(),
            clock: env.clock.clone(),
        }),
        Arc::new(Blocklist {
            firewall: env.firewall.clone(),
            store: env.store.clone(),
        }),
        Arc::new(FirewallState {
            firewall: env.firewall.clone(),
        }),
        Arc::new(Fleet {
            firewall: env.firewall.clone(),
        }),
    ];
    if let Some(g) = &env.geoip {
        sources.push(Arc::new(Geo {
            geoip: g.clone(),
            watched: t.watched_countries.clone(),
            score: t.watched_country_score.min(100) as u8,
        }));
    }
    let rdap = r
        .rdap
        .as_ref()
        .map(|c| Arc::new(rdap::Rdap::new(c, &roots, timeout, env)));
    if let Some(s) = &rdap {
        sources.push(s.clone());
    }
    let ipfeed = r
        .ipfeed
        .as_ref()
        .map(|c| Arc::new(ipfeed::IpFeed::new(c, &roots, timeout, env)));
    if let Some(s) = &ipfeed {
        sources.push(s.clone());
    }
    if let Some(c) = &r.spamfilter {
        sources.push(Arc::new(spamfilter::SpamFilter::new(
            c, &roots, timeout, env,
        )));
    }
    let upstream = r
        .upstream
        .as_ref()
        .map(|c| Arc::new(upstream::Upstream::new(c, &roots, timeout, env)));
    if let Some(s) = &upstream {
        sources.push(s.clone());
    }
    if !r.feeds.is_empty() {
        sources.push(Arc::new(feeds::FeedSource {
            set: env.feeds.clone(),
        }));
    }
    Ok(Built {
        sources,
        ipfeed,
        upstream,
        rdap,
    })
}

/// The local attack database.
pub struct LocalDb {
    pub db: Arc<AttackDb>,
    pub clock: SharedClock,
}

impl Source for LocalDb {
    fn name(&self) -> &'static str {
        "local_db"
    }

    fn lookup(&self, ip: IpAddr, q: &Query) -> Answer {
        let now = q.now.as_microsecond();
        let Some(v) = self.db.view(ip, now) else {
            return Answer::status(Status::NoData, "no events recorded");
        };
        let mut parts = Vec::new();
        for k in AttackKind::ALL {
            let n = v.counts[k.index()];
            if n > 0 {
                parts.push(format!("{} {n}", k.label().to_ascii_lowercase()));
            }
        }
        let mut reason = format!(
            "{} event{} ({})",
            v.events(),
            if v.events() == 1 { "" } else { "s" },
            parts.join(", ")
        );
        if let Ok(t) = jiff::Timestamp::from_microsecond(v.last_seen) {
            reason.push_str(&format!(", last seen {}", rfc3339(t)));
        }
        match v.evidence {
            Evidence::Permanent => reason.push_str("; permanent evidence"),
            Evidence::Expiring(_) => reason.push_str("; evidence with a block"),
            Evidence::None => {}
        }
        if v.events() == 0 {
            reason = "no events recorded".into();
        }
        Answer::score(score::shown(v.score), reason)
    }
}

/// Operator-managed permanent blocks (address and subnet blocks without expiry).
pub struct Blocklist {
    pub firewall: Handle,
    pub store: Store,
}

impl Source for Blocklist {
    fn name(&self) -> &'static str {
        "blocklist"
    }

    fn lookup(&self, ip: IpAddr, _q: &Query) -> Answer {
        match self.firewall.engine() {
            Ok(f) => {
                let c = f.check(ip);
                match c.block {
                    Some((net, e)) if e.permanent() => {
                        let by = if net.is_host() {
                            String::new()
                        } else {
                            format!(" (subnet {net})")
                        };
                        Answer {
                            blocked: true,
                            ..Answer::score(
                                100,
                                format!(
                                    "on the permanent blocklist{by}: {}",
                                    crate::text::for_log(&e.reason, 120)
                                ),
                            )
                        }
                    }
                    _ => Answer::status(Status::NoData, "not on the permanent blocklist"),
                }
            }
            Err(_) => {
                // The engine is absent: the store still holds the operator's list.
                let key = ip.to_canonical().to_string();
                let found = self
                    .store
                    .read(|c| crate::store::firewall::permanent_block_reason(c, &key));
                match found {
                    Ok(Some(reason)) => Answer {
                        blocked: true,
                        ..Answer::score(
                            100,
                            format!(
                                "on the permanent blocklist (firewall engine not running): {}",
                                crate::text::for_log(&reason, 120)
                            ),
                        )
                    },
                    Ok(None) => Answer::status(Status::NoData, "not on the permanent blocklist"),
                    Err(e) => Answer::status(Status::Error, format!("store: {e}")),
                }
            }
        }
    }
}

/// What the firewall does with the address now (temporary blocks, allow entries).
pub struct FirewallState {
    pub firewall: Handle,
}

impl Source for FirewallState {
    fn name(&self) -> &'static str {
        "firewall"
    }

    fn lookup(&self, ip: IpAddr, _q: &Query) -> Answer {
        let f = match self.firewall.engine() {
            Ok(f) => f,
            Err(r) => return Answer::status(Status::Error, Handle::absent_message(r)),
        };
        let c = f.check(ip);
        if let Some((net, e)) = &c.block {
            if !e.permanent() {
                return blocked_until("blocked by", net, e);
            }
            return Answer::info(format!("blocked permanently by {net}"));
        }
        if let Some((net, _)) = &c.allow {
            return Answer::score(0, format!("allow-listed by {net}"));
        }
        if let Some(net) = &c.infra {
            return Answer::score(0, format!("infrastructure address ({net})"));
        }
        if let Some((_, e)) = &c.dry_run {
            let until = e
                .expires_at()
                .map(|t| format!(" until {}", rfc3339(t)))
                .unwrap_or_default();
            return Answer::info(format!("a dry-run block is recorded{until}"));
        }
        Answer::status(Status::NoData, "not blocked or allowed")
    }
}

/// Score 100, blocked: `<what> <net> until <expiry>: <reason>`.
fn blocked_until(
    what: &str,
    net: &crate::firewall::Net,
    e: &crate::firewall::state::Entry,
) -> Answer {
    let until = e.expires_at().map(rfc3339).unwrap_or_default();
    Answer {
        blocked: true,
        ..Answer::score(
            100,
            format!(
                "{what} {net} until {until}: {}",
                crate::text::for_log(&e.reason, 120)
            ),
        )
    }
}

/// A block of source `fleet`: a ban decision of the CrowdSec Local API (fleet mode) that
/// took effect here.
pub struct Fleet {
    pub firewall: Handle,
}

/// The firewall source of blocks made for the LAPI (`fleet::bouncer::SOURCE`).
const FLEET_SOURCE: &str = "fleet";

impl Source for Fleet {
    fn name(&self) -> &'static str {
        "fleet"
    }

    fn lookup(&self, ip: IpAddr, _q: &Query) -> Answer {
        let Ok(f) = self.firewall.engine() else {
            return Answer::status(
                Status::NoData,
                "no fleet decision (firewall engine not running)",
            );
        };
        let c = f.check(ip);
        if let Some((net, e)) = c.block.as_ref().filter(|(_, e)| &*e.source == FLEET_SOURCE) {
            return blocked_until("blocked by the fleet:", net, e);
        }
        if let Some((_, e)) = c
            .dry_run
            .as_ref()
            .filter(|(_, e)| &*e.source == FLEET_SOURCE)
        {
            return Answer::info(format!(
                "a fleet decision is recorded as a dry run: {}",
                crate::text::for_log(&e.reason, 120)
            ));
        }
        Answer::status(Status::NoData, "no fleet decision")
    }
}

/// GeoIP location; a watched country adds `threat.watched_country_score`.
pub struct Geo {
    pub geoip: Arc<crate::geoip::GeoIp>,
    pub watched: Vec<String>,
    pub score: u8,
}

impl Source for Geo {
    fn name(&self) -> &'static str {
        "geoip"
    }

    fn lookup(&self, ip: IpAddr, _q: &Query) -> Answer {
        let Some(g) = self.geoip.lookup(ip) else {
            return Answer::status(Status::NoData, "not in the GeoIP databases");
        };
        let mut parts: Vec<String> = Vec::new();
        if let Some(c) = &g.country {
            parts.push(c.clone());
        }
        if let Some(c) = &g.city {
            parts.push(c.clone());
        }
        if let Some(a) = g.asn {
            parts.push(match &g.org {
                Some(o) => format!("AS{a} {o}"),
                None => format!("AS{a}"),
            });
        }
        let watched = g
            .country
            .as_ref()
            .is_some_and(|c| self.watched.iter().any(|w| w.eq_ignore_ascii_case(c)));
        let mut reason = parts.join(", ");
        if watched {
            reason.push_str(" (watched country)");
        }
        let data = serde_json::to_value(&g).unwrap_or(json!({}));
        Answer::score(if watched { self.score } else { 0 }, reason).with_data(data)
    }
}

/// A small bounded memory cache of answers with their expiry (wall microseconds).
pub struct MemCache {
    map: parking_lot::Mutex<std::collections::HashMap<IpAddr, (i64, Answer)>>,
    cap: usize,
}

impl MemCache {
    pub fn new(cap: usize) -> MemCache {
        MemCache {
            map: parking_lot::Mutex::new(std::collections::HashMap::new()),
            cap,
        }
    }

    pub fn get(&self, ip: IpAddr, now: i64) -> Option<Answer> {
        let m = self.map.lock();
        m.get(&ip)
            .filter(|(exp, _)| *exp > now)
            .map(|(_, a)| a.clone())
    }

    pub fn put(&self, ip: IpAddr, expires: i64, a: Answer, now: i64) {
        let mut m = self.map.lock();
        if m.len() >= self.cap && !m.contains_key(&ip) {
            m.retain(|_, (exp, _)| *exp > now);
            if m.len() >= self.cap {
                m.clear();
            }
        }
        m.insert(ip, (expires, a));
    }

    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
