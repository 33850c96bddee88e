//! The block digest: blocks of addresses from `threat.watched_countries`, summarised every
//! `threat.digest_interval_minutes` per destination.
//!
//! Active while watched countries are set, GeoIP is configured (the country comes from it)
//! and a destination exists. Destinations: the webhook (`[alerts.webhook]`, through its
//! durable spool `panel.spool`). Mail is not a destination yet: this build has no mail
//! transport, so there is no `block_digest.email` row.
//!
//! Rows:
//! - `block_digest.records` (records, capacity 5,000): blocks waiting for the next digest.
//!   Overflow drops the oldest record (one loss each).
//! - `block_digest.webhook` (notifications, capacity 16): digests built and not yet accepted
//!   by the webhook spool. A refusal is retried every tick (`retry_failed`); overflow drops
//!   the oldest digest (one loss).

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Arc;

use jiff::Timestamp;
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::alerts::Alerts;
use crate::clock::SharedClock;
use crate::queue::{QueueHealth, Registry, RowConfig, RowHandle};
use crate::timefmt::rfc3339;

pub const RECORDS_ROW: &str = "block_digest.records";
pub const WEBHOOK_ROW: &str = "block_digest.webhook";
pub const RECORDS_CAPACITY: usize = 5_000;
pub const OUTBOX_CAPACITY: usize = 16;
/// Items listed in one digest at most (the counts cover all).
const LISTED: usize = 200;

#[derive(Clone, Debug)]
struct Rec {
    ip: IpAddr,
    country: String,
    at: Timestamp,
    reason: String,
    source: String,
    expires_at: Option<Timestamp>,
    dry_run: bool,
}

struct Rows {
    records: RowHandle,
    webhook: RowHandle,
}

struct State {
    watched: Vec<String>,
    interval_us: i64,
    records: VecDeque<Rec>,
    outbox: VecDeque<Vec<u8>>,
    window_start: Option<Timestamp>,
    next_at: i64,
    rows: Option<Rows>,
}

pub struct Digest {
    clock: SharedClock,
    registry: Arc<Registry>,
    alerts: Arc<Alerts>,
    geoip: Option<Arc<crate::geoip::GeoIp>>,
    host: String,
    state: Mutex<State>,
}

fn health(clock: &SharedClock, unit: &'static str, cap: usize) -> Arc<QueueHealth> {
    QueueHealth::new(clock.clone(), RowConfig::new(unit).capacity(cap as u64))
}

impl Digest {
    pub fn new(
        clock: SharedClock,
        registry: &Arc<Registry>,
        alerts: Arc<Alerts>,
        geoip: Option<Arc<crate::geoip::GeoIp>>,
    ) -> Digest {
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_default();
        Digest {
            clock,
            registry: registry.clone(),
            alerts,
            geoip,
            host,
            state: Mutex::new(State {
                watched: Vec::new(),
                interval_us: 3_600_000_000,
                records: VecDeque::new(),
                outbox: VecDeque::new(),
                window_start: None,
                next_at: i64::MAX,
                rows: None,
            }),
        }
    }

    /// Applies `threat.watched_countries` and `threat.digest_interval_minutes`.
    pub fn configure(&self, watched: &[String], interval_minutes: u64) {
        let mut st = self.state.lock();
        st.watched = watched.to_vec();
        st.interval_us = interval_minutes.max(1) as i64 * 60_000_000;
        let now = self.clock.now().as_microsecond();
        st.next_at = now + st.interval_us;
        drop(st);
        self.sync_rows();
    }

    fn active(&self, st: &State) -> bool {
        !st.watched.is_empty() && self.geoip.is_some() && self.alerts.enabled()
    }

    /// Registers or removes the rows as the digest becomes active or not.
    fn sync_rows(&self) {
        let mut st = self.state.lock();
        let active = self.active(&st);
        match (active, st.rows.is_some()) {
            (true, false) => {
                let r = self.registry.register(
                    RECORDS_ROW,
                    health(&self.clock, "records", RECORDS_CAPACITY),
                );
                let w = self.registry.register(
                    WEBHOOK_ROW,
                    health(&self.clock, "notifications", OUTBOX_CAPACITY),
                );
                match (r, w) {
                    (Ok(records), Ok(webhook)) => st.rows = Some(Rows { records, webhook }),
                    (r, w) => {
                        for e in [r.err(), w.err()].into_iter().flatten() {
                            log::warn!("block digest: cannot register its rows: {e}");
                        }
                    }
                }
            }
            (false, true) => {
                st.rows = None;
                st.records.clear();
                st.outbox.clear();
            }
            _ => {}
        }
    }

    /// Notes a block (operator or automatic) of `ip`.
    pub fn note(
        &self,
        ip: IpAddr,
        reason: &str,
        source: &str,
        expires_at: Option<Timestamp>,
        dry_run: bool,
    ) {
        let mut st = self.state.lock();
        if st.rows.is_none() {
            return;
        }
        let Some(country) = self
            .geoip
            .as_ref()
            .and_then(|g| g.lookup(ip))
            .and_then(|g| g.country)
        else {
            return;
        };
        if !st.watched.iter().any(|w| w.eq_ignore_ascii_case(&country)) {
            return;
        }
        let now = self.clock.now();
        st.window_start.get_or_insert(now);
        st.records.push_back(Rec {
            ip,
            country,
            at: now,
            reason: crate::text::cut(reason, 120).into_owned(),
            source: source.to_string(),
            expires_at,
            dry_run,
        });
        let mut dropped = 0;
        while st.records.len() > RECORDS_CAPACITY {
            st.records.pop_front();
            dropped += 1;
        }
        if let Some(rows) = &st.rows {
            let h = rows.records.health();
            h.set_waiting(st.records.len() as u64);
            if dropped > 0 {
                h.record_losses(dropped);
            }
        }
    }

    fn build(&self, recs: &[Rec], start: Timestamp, end: Timestamp) -> Value {
        let mut by_country: std::collections::BTreeMap<&str, u64> = Default::default();
        for r in recs {
            *by_country.entry(r.country.as_str()).or_default() += 1;
        }
        let items: Vec<Value> = recs
            .iter()
            .rev()
            .take(LISTED)
            .map(|r| {
                let mut v = json!({
                    "ip": r.ip.to_string(), "country": r.country, "at": rfc3339(r.at),
                    "reason": r.reason, "source": r.source, "permanent": r.expires_at.is_none(),
                });
                if let Some(t) = r.expires_at {
                    v["expires_at"] = rfc3339(t).into();
                }
                if r.dry_run {
                    v["dry_run"] = true.into();
                }
                v
            })
            .collect();
        json!({
            "id": crate::ids::random_hex(16),
            "type": "block_digest",
            "text": format!("{} block(s) of addresses from watched countries", recs.len()),
            "host": self.host,
            "created_at": rfc3339(self.clock.now()),
            "window_start": rfc3339(start),
            "window_end": rfc3339(end),
            "total": recs.len(),
            "by_country": by_country,
            "items": items,
            "truncated": recs.len() > LISTED,
        })
    }

    /// Sends a digest when one is due, and hands waiting digests to the webhook spool.
    pub fn tick(&self) {
        self.sync_rows();
        let now = self.clock.now();
        let mut st = self.state.lock();
        if st.rows.is_none() {
            return;
        }
        if now.as_microsecond() >= st.next_at {
            st.next_at = now.as_microsecond() + st.interval_us;
            if !st.records.is_empty() {
                let recs: Vec<Rec> = st.records.drain(..).collect();
                let start = st.window_start.take().unwrap_or(now);
                let body = serde_json::to_vec(&self.build(&recs, start, now)).unwrap_or_default();
                st.outbox.push_back(body);
                let mut dropped = 0;
                while st.outbox.len() > OUTBOX_CAPACITY {
                    st.outbox.pop_front();
                    dropped += 1;
                }
                if let Some(rows) = &st.rows {
                    rows.records.health().set_waiting(0);
                    rows.records.health().note_progress();
                    if dropped > 0 {
                        rows.webhook.health().record_losses(dropped);
                    }
                }
            }
        }
        while let Some(body) = st.outbox.front().cloned() {
            let n = st.outbox.len();
            if self
                .alerts
                .notify(body, format!("block digest ({n} waiting)"))
            {
                st.outbox.pop_front();
                if let Some(rows) = &st.rows {
                    rows.webhook.health().note_progress();
                }
            } else {
                if let Some(rows) = &st.rows {
                    rows.webhook.health().note_retry_failed();
                }
                break;
            }
        }
        if let Some(rows) = &st.rows {
            rows.webhook.health().set_waiting(st.outbox.len() as u64);
        }
    }

    /// (records waiting, digests waiting), or `None` while inactive.
    pub fn status(&self) -> Option<(usize, usize)> {
        let st = self.state.lock();
        st.rows
            .as_ref()
            .map(|_| (st.records.len(), st.outbox.len()))
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::time::Duration;

    use super::*;
    use crate::clock::ManualClock;
    use crate::config::alerts::{AlertsConfig, WebhookConfig};
    use crate::geoip::mmdb;
    use crate::store::Store;

    /// A loopback webhook receiver: each POST body goes to the channel, answered 200.
    fn receiver() -> (String, std::sync::mpsc::Receiver<Vec<u8>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", l.local_addr().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut len = 0usize;
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).map_or(true, |n| n == 0) || h == "\r\n" {
                        break;
                    }
                    if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; len];
                if r.read_exact(&mut body).is_err() {
                    continue;
                }
                let mut s = s;
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                if tx.send(body).is_err() {
                    return;
                }
            }
        });
        (url, rx)
    }

    #[test]
    fn watched_country_blocks_are_summarised_per_interval_and_bounded() {
        let dir = std::env::temp_dir().join(format!("svc-threat-digest-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let city = dir.join("city.mmdb");
        std::fs::write(
            &city,
            mmdb::build(
                6,
                "GeoLite2-City",
                &[(
                    "203.0.113.0".parse().unwrap(),
                    24,
                    mmdb::city_record("AU", "Australia", "Sydney"),
                )],
            ),
        )
        .unwrap();
        let geoip = Arc::new(crate::geoip::GeoIp::from_paths(Some(&city), None).unwrap());
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let clock = ManualClock::at_epoch_2026();
        let registry = Registry::new();
        let (url, rx) = receiver();
        let alerts = Alerts::start(
            &AlertsConfig {
                webhook: Some(WebhookConfig {
                    url,
                    timeout_seconds: 5,
                    max_attempts: 3,
                }),
                ..AlertsConfig::default()
            },
            clock.clone(),
            store.clone(),
            &registry,
        )
        .unwrap();
        let d = Digest::new(clock.clone(), &registry, alerts.clone(), Some(geoip));
        // Inactive without watched countries: no rows, nothing kept.
        d.configure(&[], 1);
        assert_eq!(d.status(), None);
        d.configure(&["AU".to_string()], 1);
        assert_eq!(d.status(), Some((0, 0)));
        let watched: IpAddr = "203.0.113.7".parse().unwrap();
        let other: IpAddr = "198.51.100.7".parse().unwrap();
        d.note(watched, "auto: ssh_bruteforce", "auto", None, false);
        d.note(other, "auto: ssh_bruteforce", "auto", None, false);
        assert_eq!(d.status(), Some((1, 0)), "only the watched country");
        // Not due yet.
        d.tick();
        assert!(rx.try_recv().is_err());
        clock.advance_secs(61);
        d.tick();
        let body = rx.recv_timeout(Duration::from_secs(10)).expect("a digest");
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["type"], "block_digest");
        assert_eq!(v["total"], 1);
        assert_eq!(v["by_country"]["AU"], 1);
        assert_eq!(v["items"][0]["ip"], "203.0.113.7");
        assert_eq!(v["items"][0]["permanent"], true);
        assert_eq!(d.status(), Some((0, 0)));
        // 5,000 records at most; the oldest go first.
        for i in 0..(RECORDS_CAPACITY + 10) {
            let ip = IpAddr::from([203, 0, 113, (i % 250) as u8]);
            d.note(ip, "operator", "operator", None, false);
        }
        assert_eq!(d.status(), Some((RECORDS_CAPACITY, 0)));
        alerts.shutdown(Duration::from_secs(1));
        store.close();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
