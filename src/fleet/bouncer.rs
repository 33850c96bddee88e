//! The bouncer side: LAPI decisions become firewall blocks.
//!
//! ```text
//! poller "fleet-poll": GET /v1/decisions/stream (startup=true, then deltas, every
//!   poll_seconds) --> [central.actions] (1,024 waiting) --> applier "fleet-apply"
//!   (1 running): one firewall transaction per action
//! ```
//!
//! Guarantees:
//! - Ban decisions of scope `Ip` and `Range` become blocks of source `fleet` with the
//!   decision's remaining time, as automatic blocks (`auto_response.dry_run` holds). Other
//!   scopes and types, invalid values and expired decisions are counted and skipped.
//! - The firewall's refusals hold: an address on the allow list (the threat whitelist
//!   included), an infrastructure address, an address of this host, loopback or a default
//!   route is never blocked for the LAPI; such a decision is refused and counted.
//! - A deleted decision unblocks only a block of source `fleet`, and only when no other
//!   live decision of the LAPI names the same address or range. Local blocks are never
//!   removed or lengthened by the LAPI: a decision for an address a local block covers
//!   counts as applied and leaves it as it is.
//! - The first poll, the first after any failure, one 15 s after a delta that brought
//!   decisions, and one every 10 minutes ask the whole list (`startup=true`): blocks of source `fleet` the list no longer holds are removed, so
//!   deletions missed while the LAPI or the daemon was away are not kept.
//! - A LAPI that is down or answers errors changes nothing locally: blocks keep their
//!   expiry; the row `fleet.lapi` shows the lag since the last successful poll.
//! - Answers are read up to [`ANSWER_CAP`]; a longer or unreadable one is refused and
//!   counted, and the next poll is a full one.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::lapi::{self, Decision, Stream};
use super::{Counters, Link};
use crate::firewall::{Actor, BlockItem, Firewall, Net, Outcome, Refusal};
use crate::queue::{BoundedQueue, PopError, RefuseReason};

/// Name of the action queue's row.
pub const ACTIONS_ROW: &str = "central.actions";
/// Waiting actions at most.
pub const ACTIONS_CAPACITY: u64 = 1_024;
/// Largest decisions-stream answer read.
pub const ANSWER_CAP: u64 = 64 * 1024 * 1024;
/// The firewall source of blocks made for the LAPI.
pub const SOURCE: &str = "fleet";

/// One unit of `central.actions`: the decisions of one stream answer.
#[derive(Debug)]
pub struct Action {
    /// A `startup=true` answer: the whole list.
    pub full: bool,
    pub new: Vec<Decision>,
    pub deleted: Vec<Decision>,
}

/// Applies actions to the firewall (the single consumer of `central.actions`).
pub struct Applier {
    firewall: Arc<Firewall>,
    counters: Arc<Counters>,
    link: Arc<Link>,
    /// Live decision ids per address or range (those that took effect or were kept).
    active: HashMap<Net, BTreeSet<i64>>,
}

impl Applier {
    pub fn new(firewall: Arc<Firewall>, counters: Arc<Counters>, link: Arc<Link>) -> Applier {
        Applier {
            firewall,
            counters,
            link,
            active: HashMap::new(),
        }
    }

    /// Runs until the queue is closed and drained.
    pub fn run(mut self, queue: &BoundedQueue<Action>) {
        loop {
            match queue.pop_timeout(Duration::from_secs(1)) {
                Ok(g) => {
                    let (a, _, running) = g.into_parts();
                    self.apply(a);
                    running.finish();
                }
                Err(PopError::Timeout) => {}
                Err(PopError::Closed) => return,
            }
        }
    }

    /// Blocks of source `fleet` now in the firewall (address blocks, subnets, dry runs).
    fn fleet_entries(&self) -> HashMap<Net, bool> {
        self.firewall
            .list()
            .into_iter()
            .filter(|l| &*l.entry.source == SOURCE)
            .map(|l| (l.net, l.dry_run))
            .collect()
    }

    pub fn apply(&mut self, a: Action) {
        let c = &self.counters;
        if a.full {
            // Whatever the LAPI no longer lists goes, before the list is applied.
            let wanted: std::collections::HashSet<Net> = a.new.iter().map(|d| d.net).collect();
            let stale: Vec<Net> = self
                .fleet_entries()
                .into_keys()
                .filter(|n| !wanted.contains(n))
                .collect();
            self.active.clear();
            for n in stale {
                self.remove(n);
            }
        }
        // An address or range a local block already covers stays the local decision: the
        // LAPI neither lengthens nor, later, removes it.
        let (local, new): (Vec<Decision>, Vec<Decision>) = {
            let subnets: HashMap<Net, bool> = if a.new.iter().any(|d| !d.net.is_host()) {
                self.firewall
                    .list()
                    .into_iter()
                    .filter(|l| !l.dry_run && !l.net.is_host())
                    .map(|l| (l.net, &*l.entry.source == SOURCE))
                    .collect()
            } else {
                HashMap::new()
            };
            a.new.into_iter().partition(|d| {
                if d.net.is_host() {
                    self.firewall
                        .check(d.net.addr())
                        .block
                        .is_some_and(|(_, e)| &*e.source != SOURCE)
                } else {
                    subnets.get(&d.net) == Some(&false)
                }
            })
        };
        for d in &local {
            c.applied.fetch_add(1, Ordering::Relaxed);
            self.active.entry(d.net).or_default().insert(d.id);
        }
        let a = Action { new, ..a };
        if !a.new.is_empty() {
            let items: Vec<BlockItem> = a
                .new
                .iter()
                .map(|d| BlockItem {
                    net: d.net,
                    reason: reason(d),
                    duration: d.duration,
                })
                .collect();
            let actor = Actor::Automatic {
                source: SOURCE.into(),
            };
            match self.firewall.block(items, &actor) {
                Ok(outcomes) => {
                    for (d, o) in a.new.iter().zip(outcomes) {
                        match o {
                            Outcome::Blocked { .. } | Outcome::Unchanged { .. } => {
                                c.applied.fetch_add(1, Ordering::Relaxed);
                                self.active.entry(d.net).or_default().insert(d.id);
                            }
                            Outcome::DryRun { .. } => {
                                c.applied.fetch_add(1, Ordering::Relaxed);
                                c.dry_run.fetch_add(1, Ordering::Relaxed);
                                self.active.entry(d.net).or_default().insert(d.id);
                            }
                            Outcome::Refused { refusal, .. } => {
                                c.refused.fetch_add(1, Ordering::Relaxed);
                                c.refused_by[refusal_index(&refusal)]
                                    .fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                }
                Err(e) => {
                    // Nothing of this action took effect: the next poll asks the whole list.
                    c.apply_errors.fetch_add(1, Ordering::Relaxed);
                    self.link.resync.store(true, Ordering::Release);
                    log::warn!(
                        "fleet: {} decision(s) not applied: {e}; the next poll reads the whole list",
                        a.new.len()
                    );
                }
            }
        }
        for d in &a.deleted {
            let last = match self.active.get_mut(&d.net) {
                Some(ids) => {
                    ids.remove(&d.id);
                    ids.is_empty()
                }
                // Unknown here (applied before a restart): the firewall's source decides.
                None => true,
            };
            if last {
                self.active.remove(&d.net);
                self.remove(d.net);
            }
        }
    }

    /// Removes `net`'s block when it is one of the fleet's.
    fn remove(&self, net: Net) {
        let c = &self.counters;
        let ours = if net.is_host() {
            let r = self.firewall.check(net.addr());
            let block = r
                .block
                .as_ref()
                .is_some_and(|(n, e)| *n == net && &*e.source == SOURCE);
            let dry = r
                .dry_run
                .as_ref()
                .is_some_and(|(_, e)| &*e.source == SOURCE);
            block || dry
        } else {
            self.fleet_entries().get(&net) == Some(&false)
        };
        if !ours {
            return;
        }
        let r = if net.is_host() {
            self.firewall.unblock(net.addr()).map(|_| ())
        } else {
            self.firewall.remove_subnet(net).map(|_| ())
        };
        match r {
            Ok(()) => {
                c.unblocked.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                c.apply_errors.fetch_add(1, Ordering::Relaxed);
                self.link.resync.store(true, Ordering::Release);
                log::warn!("fleet: cannot remove the block of {net}: {e}");
            }
        }
    }
}

/// The reason recorded with a fleet block.
fn reason(d: &Decision) -> String {
    let what = if d.scenario.is_empty() {
        "decision"
    } else {
        d.scenario.as_str()
    };
    let origin = if d.origin.is_empty() {
        String::new()
    } else {
        format!(", origin {}", d.origin)
    };
    // Stored reasons are single-line and bounded (`firewall::types::check_reason`).
    crate::text::for_log(
        &format!("fleet: {what} (LAPI decision {}{origin})", d.id),
        200,
    )
    .replace(['\n', '\r'], " ")
}

/// Refusal kinds counted apart: allowed, infra, local (this host, loopback, default
/// route, own address), other (limit, overlap).
pub const REFUSALS: [&str; 4] = ["allowed", "infra", "local", "other"];

fn refusal_index(r: &Refusal) -> usize {
    match r {
        Refusal::Allowed { .. } => 0,
        Refusal::Infra(_) => 1,
        Refusal::Local(_) | Refusal::DefaultRoute | Refusal::OwnAddress(_) => 2,
        Refusal::Limit(_) | Refusal::OverlapsSubnet(_) => 3,
    }
}

/// Counts a stream answer's decisions; returns the action, or `None` when there is nothing
/// to do.
pub fn action_of(s: Stream, full: bool, c: &Counters) -> Option<Action> {
    c.received.fetch_add(s.received, Ordering::Relaxed);
    c.deleted_received
        .fetch_add(s.deleted.len() as u64, Ordering::Relaxed);
    for k in &s.skipped {
        c.skipped.fetch_add(1, Ordering::Relaxed);
        c.skipped_by[k.index()].fetch_add(1, Ordering::Relaxed);
    }
    if !full && s.new.is_empty() && s.deleted.is_empty() {
        return None;
    }
    Some(Action {
        full,
        new: s.new,
        deleted: s.deleted,
    })
}

/// Offers an action, waiting for room (the poller pauses rather than lose decisions);
/// false when the queue closed or `stop` says so.
pub fn offer(queue: &BoundedQueue<Action>, a: Action, stop: &dyn Fn() -> bool) -> bool {
    let mut item = a;
    loop {
        match queue.push_timeout(item, Duration::from_secs(1)) {
            Ok(()) => return true,
            Err(r) if r.reason() == RefuseReason::Closed => {
                drop(r.into_item());
                return false;
            }
            Err(r) => {
                // Still waiting, not lost.
                item = r.withdraw();
                if stop() {
                    return false;
                }
            }
        }
    }
}

/// Parses a stream answer body (bounded by the HTTP client's cap).
pub fn parse(body: &[u8]) -> Result<Stream, lapi::ParseError> {
    lapi::parse_stream(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::firewall::testns::TestNs;
    use crate::queue::Registry;
    use crate::store::Store;
    use std::sync::atomic::AtomicU64;

    fn ban(id: i64, net: &str) -> Decision {
        Decision {
            id,
            net: Net::parse(net).unwrap(),
            duration: Some(Duration::from_secs(3600)),
            scenario: "crowdsecurity/ssh-bf".into(),
            origin: "crowdsec".into(),
        }
    }

    fn gone(id: i64, net: &str) -> Decision {
        Decision {
            duration: None,
            ..ban(id, net)
        }
    }

    /// The applier against a real engine in a namespace: sources, refusals, shared
    /// addresses, local blocks and the full list's clean-up.
    #[test]
    fn decisions_become_fleet_blocks_and_never_touch_local_ones() {
        let Some(ns) = TestNs::require("fleet") else {
            return;
        };
        ns.enter();
        let dir = std::env::temp_dir().join(format!("svc-fleet-apply-{}", ns.name));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let clock = ManualClock::new(jiff::Timestamp::now());
        let registry = Registry::new();
        let fw = crate::firewall::testns::engine(clock.clone(), store.clone(), &registry);
        let link = Arc::new(Link::new(clock.clone(), &registry, Duration::from_secs(10)).unwrap());
        let counters = Arc::new(Counters::default());
        let mut ap = Applier::new(fw.clone(), counters.clone(), link);
        let source = |ip: &str| {
            fw.check(ip.parse().unwrap())
                .block
                .map(|(n, e)| (n.to_string(), e.source.to_string()))
        };
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        // Local state: an allow entry and a block of this host's own.
        fw.allow(
            Net::parse("192.0.2.77").unwrap(),
            "partner",
            None,
            &Actor::operator("t"),
        )
        .unwrap();
        fw.block(
            vec![BlockItem {
                net: Net::parse("192.0.2.50").unwrap(),
                reason: "local".into(),
                duration: Some(Duration::from_secs(600)),
            }],
            &Actor::operator("t"),
        )
        .unwrap();

        ap.apply(Action {
            full: true,
            new: vec![
                ban(1, "192.0.2.10"),
                ban(2, "192.0.2.10"),
                ban(3, "198.51.100.0/24"),
                ban(4, "192.0.2.77"),
                ban(5, "192.0.2.50"),
                ban(6, "127.0.0.1"),
            ],
            deleted: vec![],
        });
        assert_eq!(
            source("192.0.2.10"),
            Some(("192.0.2.10".into(), "fleet".into()))
        );
        assert_eq!(
            source("198.51.100.9"),
            Some(("198.51.100.0/24".into(), "fleet".into()))
        );
        assert_eq!(source("192.0.2.77"), None);
        assert_eq!(
            source("192.0.2.50"),
            Some(("192.0.2.50".into(), "operator".into()))
        );
        assert_eq!(
            n(&counters.applied),
            4,
            "two of one address, a range, a local block"
        );
        assert_eq!(n(&counters.refused), 2);
        assert_eq!(n(&counters.refused_by[0]), 1, "allowed");
        assert_eq!(n(&counters.refused_by[2]), 1, "local");
        assert!(ns
            .nft(&["list", "set", "inet", "svc", "block4"])
            .contains("192.0.2.10"));

        // One of two decisions of an address deleted: the block stays; both: it goes. A
        // deleted decision never removes a local block.
        ap.apply(Action {
            full: false,
            new: vec![],
            deleted: vec![gone(1, "192.0.2.10"), gone(5, "192.0.2.50")],
        });
        assert!(source("192.0.2.10").is_some());
        assert!(source("192.0.2.50").is_some());
        ap.apply(Action {
            full: false,
            new: vec![],
            deleted: vec![gone(2, "192.0.2.10")],
        });
        assert_eq!(source("192.0.2.10"), None);
        assert_eq!(n(&counters.unblocked), 1);

        // A full list without the range (deleted while we were away) removes it.
        ap.apply(Action {
            full: true,
            new: vec![ban(7, "192.0.2.11")],
            deleted: vec![],
        });
        assert_eq!(source("198.51.100.9"), None);
        assert!(source("192.0.2.11").is_some());
        assert!(
            source("192.0.2.50").is_some(),
            "local blocks are never stale"
        );
        assert_eq!(n(&counters.unblocked), 2);
        fw.shutdown();
        store.close();
        let _ = std::fs::remove_dir_all(dir);
    }
}
