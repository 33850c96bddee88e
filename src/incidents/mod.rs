//! Incidents: findings that share an attacker address or an account within a window become
//! one incident; the security posture follows open incidents and daemon faults.
//!
//! An incident is keyed by the finding's address, else its account, else (for host-wide
//! findings) its check. It is `open` while findings keep arriving within the window,
//! `contained` once its source is blocked or its file quarantined, and `resolved` after a
//! quiet window. State is derived from time on each read, so no timer thread is needed.
//! Incidents live in memory (bounded; resolved ones are evicted first); a persistent
//! instance ([`Incidents::persistent`]) also keeps snapshots in the store through an ordered
//! writer and restores them at start (see [`persist`]).

mod names;
pub mod persist;

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use parking_lot::Mutex;
use serde::Serialize;

use crate::clock::SharedClock;
use crate::findings::{Finding, Severity};
use crate::queue::Registry;
use crate::store::Store;
use names::{Names, Set};

pub use persist::{PersistError, WriteOutcome};

/// Incidents kept at most.
pub const MAX_INCIDENTS: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyKind {
    Ip,
    Account,
    Host,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Open,
    Contained,
    Resolved,
}

/// What an incident is, as opposed to how often it was seen: a change here is written
/// promptly.
type StateFacts = (u64, Severity, usize, usize, bool);

/// What an incident is keyed by. An address is kept as an address (no text, no allocation);
/// the shown key text is derived when a view or a stored row is built.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum IncKey {
    Ip(IpAddr),
    Account(Box<str>),
    Host(Box<str>),
}

impl IncKey {
    fn kind(&self) -> KeyKind {
        match self {
            IncKey::Ip(_) => KeyKind::Ip,
            IncKey::Account(_) => KeyKind::Account,
            IncKey::Host(_) => KeyKind::Host,
        }
    }
}

/// The key text views and stored rows show.
impl std::fmt::Display for IncKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IncKey::Ip(ip) => ip.fmt(f),
            IncKey::Account(s) | IncKey::Host(s) => f.write_str(s),
        }
    }
}

/// One incident; its key is the key it is kept under.
#[derive(Clone, Debug)]
struct Incident {
    id: u64,
    severity: Severity,
    first_seen: Timestamp,
    last_seen: Timestamp,
    count: u64,
    /// Its checks and accounts.
    names: Names,
    contained: bool,
}

impl Incident {
    fn state_facts(&self) -> StateFacts {
        (
            self.id,
            self.severity,
            self.names.len(Set::Checks),
            self.names.len(Set::Accounts),
            self.contained,
        )
    }
}

/// An incident as the API shows it.
#[derive(Clone, Debug, Serialize)]
pub struct IncidentView {
    pub id: u64,
    pub kind: KeyKind,
    pub key: String,
    pub state: State,
    pub severity: Severity,
    #[serde(serialize_with = "crate::timefmt::ser")]
    pub first_seen: Timestamp,
    #[serde(serialize_with = "crate::timefmt::ser")]
    pub last_seen: Timestamp,
    pub count: u64,
    pub checks: Vec<String>,
    pub accounts: Vec<String>,
}

#[derive(Default)]
struct Inner {
    by_key: HashMap<IncKey, Incident>,
    next_id: u64,
    /// Findings without an account since start, per check.
    unattributed_cumulative: BTreeMap<String, u64>,
    evicted: u64,
    /// Keys whose stored snapshot is out of date (persistent instances).
    pending: persist::Pending,
}

pub struct Incidents {
    clock: SharedClock,
    /// `incidents.window_minutes` in seconds; changed live by a reload.
    window_secs: AtomicU64,
    inner: Mutex<Inner>,
    persist: Option<persist::Persist>,
}

fn key_of(f: &Finding) -> IncKey {
    if let Some(ip) = f.ip {
        IncKey::Ip(ip)
    } else if let Some(a) = &f.account {
        IncKey::Account(a.as_str().into())
    } else {
        IncKey::Host(f.check.as_str().into())
    }
}

impl Incidents {
    /// Incidents in memory only.
    pub fn new(clock: SharedClock, window: Duration) -> Incidents {
        Incidents {
            clock,
            window_secs: AtomicU64::new(window.as_secs().max(1)),
            inner: Mutex::new(Inner::default()),
            persist: None,
        }
    }

    /// Incidents kept in the store too: registers the `incident.persist.*` rows and restores
    /// the stored incidents. Call [`Incidents::start_writer`] next, and
    /// [`Incidents::shutdown`] after the last finding.
    pub fn persistent(
        clock: SharedClock,
        window: Duration,
        store: Store,
        registry: &Arc<Registry>,
    ) -> Result<Arc<Incidents>, PersistError> {
        let persist = persist::Persist::new(clock.clone(), store, registry)?;
        let me = Incidents {
            persist: Some(persist),
            ..Incidents::new(clock, window)
        };
        let n = me.restore();
        if n > 0 {
            log::info!("incidents: restored {n} from the store");
        }
        Ok(Arc::new(me))
    }

    pub fn window(&self) -> Duration {
        Duration::from_secs(self.window_secs.load(Ordering::Relaxed))
    }

    /// Changes the correlation window (`incidents.window_minutes`, configuration reload).
    /// States are derived on each read, so the new window applies at once.
    pub fn set_window(&self, window: Duration) {
        self.window_secs
            .store(window.as_secs().max(1), Ordering::Relaxed);
    }

    /// The stored snapshot of `key` is out of date: promptly (`waiting`) when what the
    /// incident is changed, else as deferred bookkeeping (a repeat that only counts).
    fn mark(&self, g: &mut Inner, key: &IncKey, changed: bool) {
        if let Some(p) = &self.persist {
            if changed {
                g.pending.mark_waiting(key, p.stamp());
            } else if g.pending.mark_deferred(key, p.stamp(), false) {
                p.record_deferred_overflow();
            }
            p.publish(&g.pending);
        }
    }

    fn state_of(&self, i: &Incident, now: Timestamp) -> State {
        if crate::clock::add(i.last_seen, self.window()) <= now {
            State::Resolved
        } else if i.contained {
            State::Contained
        } else {
            State::Open
        }
    }

    /// Folds one dispatched finding into its incident (a listener of the engine).
    pub fn observe(&self, f: &Finding) {
        let now = self.clock.now();
        let key = key_of(f);
        let contained = f.details.contains("quarantined as");
        let mut g = self.inner.lock();
        if f.account.is_none() {
            // The check is known after its first finding: no copy of its name then.
            match g.unattributed_cumulative.get_mut(&f.check) {
                Some(n) => *n += 1,
                None => {
                    g.unattributed_cumulative.insert(f.check.clone(), 1);
                }
            }
        }
        let resolved = g
            .by_key
            .get(&key)
            .is_some_and(|i| self.state_of(i, now) == State::Resolved);
        if resolved {
            // A quiet incident that flares up again starts a new incident.
            g.by_key.remove(&key);
        }
        if !g.by_key.contains_key(&key) && g.by_key.len() >= MAX_INCIDENTS {
            self.evict(&mut g, now);
        }
        let before = g.by_key.get(&key).map(Incident::state_facts);
        if before.is_none() {
            g.next_id += 1;
        }
        let id = g.next_id;
        let inc = g.by_key.entry(key.clone()).or_insert_with(|| Incident {
            id,
            severity: f.severity,
            first_seen: f.first_seen.min(now),
            last_seen: f.last_seen,
            count: 0,
            names: Names::default(),
            contained: false,
        });
        inc.severity = inc.severity.max(f.severity);
        inc.last_seen = inc.last_seen.max(f.last_seen).max(now);
        inc.count += 1;
        inc.names.insert(Set::Checks, &f.check);
        if let Some(a) = &f.account {
            inc.names.insert(Set::Accounts, a);
        }
        inc.contained |= contained;
        // A new incident or a change of what it is (severity, checks, accounts, contained)
        // is written promptly; a repeat that only counts is coalesced bookkeeping.
        let changed = before != Some(inc.state_facts());
        self.mark(&mut g, &key, changed);
        drop(g);
        if changed {
            if let Some(p) = &self.persist {
                p.wake();
            }
        }
    }

    fn evict(&self, g: &mut Inner, now: Timestamp) {
        let victim = g
            .by_key
            .iter()
            .min_by_key(|(_, i)| (self.state_of(i, now) != State::Resolved, i.last_seen))
            .map(|(k, _)| k.clone());
        if let Some(k) = victim {
            g.by_key.remove(&k);
            g.evicted += 1;
            if let Some(p) = &self.persist {
                // Its removal from the store is bookkeeping for the next batch.
                if g.pending.mark_deferred(&k, p.stamp(), true) {
                    p.record_deferred_overflow();
                }
                p.publish(&g.pending);
            }
        }
    }

    /// Marks the incident of an address contained (its source is blocked).
    pub fn contain_ip(&self, ip: IpAddr) {
        let key = IncKey::Ip(ip);
        let mut g = self.inner.lock();
        let Some(i) = g.by_key.get_mut(&key) else {
            return;
        };
        if i.contained {
            return;
        }
        i.contained = true;
        self.mark(&mut g, &key, true);
        drop(g);
        if let Some(p) = &self.persist {
            p.wake();
        }
    }

    fn view(&self, key: &IncKey, i: &Incident, now: Timestamp) -> IncidentView {
        IncidentView {
            id: i.id,
            kind: key.kind(),
            key: key.to_string(),
            state: self.state_of(i, now),
            severity: i.severity,
            first_seen: i.first_seen,
            last_seen: i.last_seen,
            count: i.count,
            checks: i.names.to_vec(Set::Checks),
            accounts: i.names.to_vec(Set::Accounts),
        }
    }

    /// All incidents, newest activity first.
    pub fn list(&self) -> Vec<IncidentView> {
        let now = self.clock.now();
        let g = self.inner.lock();
        let mut v: Vec<IncidentView> = g.by_key.iter().map(|(k, i)| self.view(k, i, now)).collect();
        v.sort_by(|a, b| b.last_seen.cmp(&a.last_seen).then(a.id.cmp(&b.id)));
        v
    }

    /// Incidents of one address or account.
    pub fn matching(&self, ip: Option<IpAddr>, account: Option<&str>) -> Vec<IncidentView> {
        self.list()
            .into_iter()
            .filter(|i| {
                ip.is_some_and(|ip| i.kind == KeyKind::Ip && i.key == ip.to_string())
                    || account.is_some_and(|a| {
                        i.accounts.iter().any(|x| x == a)
                            || (i.kind == KeyKind::Account && i.key == a)
                    })
            })
            .collect()
    }

    /// Open and contained incidents by severity: (critical, high, warning).
    pub fn open_by_severity(&self) -> (u64, u64, u64) {
        let now = self.clock.now();
        let g = self.inner.lock();
        let mut c = (0, 0, 0);
        for i in g
            .by_key
            .values()
            .filter(|i| self.state_of(i, now) != State::Resolved)
        {
            match i.severity {
                Severity::Critical => c.0 += 1,
                Severity::High => c.1 += 1,
                Severity::Warning => c.2 += 1,
            }
        }
        c
    }

    /// The worst severity among incidents that are open (not contained, not resolved).
    pub fn worst_open(&self) -> Option<Severity> {
        let now = self.clock.now();
        let g = self.inner.lock();
        g.by_key
            .values()
            .filter(|i| self.state_of(i, now) == State::Open)
            .map(|i| i.severity)
            .max()
    }

    /// Cumulative findings without an account since start, per check.
    pub fn unattributed_cumulative(&self) -> BTreeMap<String, u64> {
        self.inner.lock().unattributed_cumulative.clone()
    }
}

/// The security posture: `critical` with an open CRITICAL incident; `warning` with an open
/// HIGH incident, a contained-but-unresolved HIGH or CRITICAL incident, or any daemon fault
/// (a degraded queue, a failing store); `healthy` otherwise.
pub fn posture(
    worst_open: Option<Severity>,
    open_counts: (u64, u64, u64),
    faults: bool,
) -> &'static str {
    match worst_open {
        Some(Severity::Critical) => "critical",
        Some(Severity::High) => "warning",
        _ if faults || open_counts.0 + open_counts.1 > 0 => "warning",
        _ => "healthy",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    fn finding(
        check: &str,
        sev: Severity,
        ip: Option<&str>,
        account: Option<&str>,
        at: Timestamp,
    ) -> Finding {
        let mut f = Finding::new(check, sev, format!("{check} {ip:?}"), at);
        f.ip = ip.map(|s| s.parse().unwrap());
        f.account = account.map(String::from);
        f
    }

    #[test]
    fn same_address_within_window_is_one_incident() {
        let clock = ManualClock::at_epoch_2026();
        let inc = Incidents::new(clock.clone(), Duration::from_secs(3600));
        inc.observe(&finding(
            "ssh_bruteforce",
            Severity::High,
            Some("203.0.113.9"),
            None,
            clock.now(),
        ));
        clock.advance_secs(600);
        inc.observe(&finding(
            "pam_bruteforce",
            Severity::High,
            Some("203.0.113.9"),
            None,
            clock.now(),
        ));
        inc.observe(&finding(
            "webshell",
            Severity::Critical,
            None,
            Some("alice"),
            clock.now(),
        ));
        let all = inc.list();
        assert_eq!(all.len(), 2);
        let ip = all.iter().find(|i| i.kind == KeyKind::Ip).unwrap();
        assert_eq!(ip.count, 2);
        assert_eq!(ip.checks, vec!["pam_bruteforce", "ssh_bruteforce"]);
        assert_eq!(inc.open_by_severity(), (1, 1, 0));
        assert_eq!(inc.worst_open(), Some(Severity::Critical));
        assert_eq!(
            posture(inc.worst_open(), inc.open_by_severity(), false),
            "critical"
        );
        assert_eq!(inc.matching(None, Some("alice")).len(), 1);
    }

    #[test]
    fn quiet_incidents_resolve_and_flare_ups_start_new_ones() {
        let clock = ManualClock::at_epoch_2026();
        let inc = Incidents::new(clock.clone(), Duration::from_secs(3600));
        inc.observe(&finding(
            "ssh_bruteforce",
            Severity::High,
            Some("198.51.100.1"),
            None,
            clock.now(),
        ));
        assert_eq!(
            posture(inc.worst_open(), inc.open_by_severity(), false),
            "warning"
        );
        clock.advance_secs(3601);
        assert_eq!(inc.list()[0].state, State::Resolved);
        assert_eq!(inc.open_by_severity(), (0, 0, 0));
        assert_eq!(
            posture(inc.worst_open(), inc.open_by_severity(), false),
            "healthy"
        );
        assert_eq!(
            posture(inc.worst_open(), inc.open_by_severity(), true),
            "warning"
        );
        let first = inc.list()[0].id;
        inc.observe(&finding(
            "ssh_bruteforce",
            Severity::High,
            Some("198.51.100.1"),
            None,
            clock.now(),
        ));
        let again = inc.list();
        assert_eq!(again.len(), 1);
        assert_ne!(again[0].id, first);
        assert_eq!(again[0].state, State::Open);
    }

    #[test]
    fn blocked_source_or_quarantine_contains() {
        let clock = ManualClock::at_epoch_2026();
        let inc = Incidents::new(clock.clone(), Duration::from_secs(3600));
        inc.observe(&finding(
            "ssh_bruteforce",
            Severity::Critical,
            Some("192.0.2.7"),
            None,
            clock.now(),
        ));
        inc.contain_ip("192.0.2.7".parse().unwrap());
        assert_eq!(inc.list()[0].state, State::Contained);
        let mut q = finding(
            "webshell",
            Severity::Critical,
            None,
            Some("bob"),
            clock.now(),
        );
        q.details = "rule X; quarantined as abc".into();
        inc.observe(&q);
        assert_eq!(inc.worst_open(), None);
        assert_eq!(inc.open_by_severity(), (2, 0, 0));
        assert_eq!(
            posture(inc.worst_open(), inc.open_by_severity(), false),
            "warning"
        );
    }

    #[test]
    fn unattributed_findings_are_counted_per_check() {
        let clock = ManualClock::at_epoch_2026();
        let inc = Incidents::new(clock.clone(), Duration::from_secs(60));
        inc.observe(&finding(
            "sshd_root_password_login",
            Severity::High,
            None,
            None,
            clock.now(),
        ));
        inc.observe(&finding(
            "webshell",
            Severity::High,
            None,
            Some("a"),
            clock.now(),
        ));
        assert_eq!(
            inc.unattributed_cumulative()
                .get("sshd_root_password_login"),
            Some(&1)
        );
        assert_eq!(inc.unattributed_cumulative().get("webshell"), None);
    }

    #[test]
    fn an_address_incident_is_small() {
        // An address key is the address itself; checks and accounts share one allocation.
        assert!(std::mem::size_of::<IncKey>() <= 24);
        assert!(std::mem::size_of::<(IncKey, Incident)>() <= 96);
    }

    /// Bytes per address incident, printed for the record:
    /// `cargo test --lib incidents::tests::bytes_per_address -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn bytes_per_address() {
        let entry = std::mem::size_of::<(IncKey, Incident)>();
        let mut names = Names::default();
        names.insert(Set::Checks, "ssh_bruteforce");
        let one = names.heap_bytes();
        names.insert(Set::Checks, "ssh_invalid_user");
        println!(
            "map entry {entry} B (key {} B, incident {} B); names {one} B with one check, \
             {} B with two, in one allocation; pending key {} B, no allocation",
            std::mem::size_of::<IncKey>(),
            std::mem::size_of::<Incident>(),
            names.heap_bytes(),
            std::mem::size_of::<IncKey>(),
        );
    }

    #[test]
    fn bounded_with_resolved_evicted_first() {
        let clock = ManualClock::at_epoch_2026();
        let inc = Incidents::new(clock.clone(), Duration::from_secs(60));
        inc.observe(&finding(
            "x",
            Severity::Warning,
            Some("10.0.0.1"),
            None,
            clock.now(),
        ));
        clock.advance_secs(120);
        for n in 0..MAX_INCIDENTS {
            let ip = format!("10.1.{}.{}", n / 256, n % 256);
            inc.observe(&finding(
                "x",
                Severity::Warning,
                Some(&ip),
                None,
                clock.now(),
            ));
        }
        let all = inc.list();
        assert_eq!(all.len(), MAX_INCIDENTS);
        assert!(
            all.iter().all(|i| i.key != "10.0.0.1"),
            "the resolved one went first"
        );
    }
}
