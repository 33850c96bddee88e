//! The ledger: parsed mail-log events ([`super::parse`]) turned into per-message records,
//! observed forwards ([`MailWrite`], written by the caller to the store) and findings.
//!
//! Per message: sender, sender domain, account, SMTP AUTH identity, client address, origin,
//! recipients, and outcomes (sent, deferred, bounced, forwarded, remote). Postfix spreads a
//! message over several lines (smtpd `client=`, pickup `uid=`, qmgr `from=`); they are
//! merged by queue id.
//!
//! Account and origin of a message:
//! - `auth`: submitted over SMTP AUTH; the account is the AUTH identity;
//! - `local`: submitted on this host (Exim `U=`, Postfix pickup `uid=`); the account is the
//!   local user (a uid for Postfix);
//! - `bounce`: a delivery-status notification the MTA generated (empty sender);
//! - `inbound`: unauthenticated SMTP (mail arriving for hosted domains); no account.
//!
//! Findings (check names of the spec's "Related checks"):
//! - `mail_per_account` (HIGH): an account sent more than `hourly_limit` messages within one
//!   clock hour (once per account and hour); or an authenticated account sent as a domain it
//!   does not own (relay abuse: the sender's domain is neither the AUTH identity's domain nor
//!   a subdomain of it), once per (account, domain) and hour.
//! - `email_forwarder_audit` (WARNING): a message forwarded from a mailbox to another
//!   domain (once per (mailbox, target) while remembered), and a forwarding loop (a target
//!   forwarding back to its source) as HIGH.
//! - `mail_auth_bruteforce` (HIGH): `auth_failures` SMTP AUTH failures from one address
//!   within ten minutes (once per address and window).
//!
//! Bounds: at most [`MAX_PENDING`] messages in flight (the oldest is forgotten first and
//! counted), [`MAX_TRACKED`] keys in each per-account, per-pair or per-address table (the
//! table is cleared when full and the clearing counted), [`MAX_WRITES`] writes held before
//! the caller drains them (beyond that writes are dropped and counted). Every text that
//! comes from the log is cut to [`MAX_FIELD`] bytes with control characters escaped before
//! it reaches a finding.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;

use jiff::civil::DateTime;
use jiff::tz::{Offset, TimeZone};
use jiff::{SignedDuration, Timestamp};

use crate::clock::SharedClock;
use crate::findings::{Finding, Severity};
use crate::store::mail_accounts::{MailWrite, NewMessage};

use super::parse::{LineTime, MailEvent, Outcome, Parsed};

pub const CHECK_PER_ACCOUNT: &str = "mail_per_account";
pub const CHECK_FORWARDER: &str = "email_forwarder_audit";
pub const CHECK_AUTH_BRUTEFORCE: &str = "mail_auth_bruteforce";

/// Messages remembered between their first and last line.
pub const MAX_PENDING: usize = 65_536;
/// Keys in each bookkeeping table.
pub const MAX_TRACKED: usize = 65_536;
/// Writes held before [`Ledger::take_writes`].
pub const MAX_WRITES: usize = 65_536;
/// Longest text taken from the log into a record or a finding.
pub const MAX_FIELD: usize = 320;
/// The SMTP AUTH failure window.
pub const AUTH_WINDOW: SignedDuration = SignedDuration::from_secs(600);

/// Thresholds of the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerSettings {
    /// `mail.per_account_hourly`: messages per account and clock hour before a finding.
    pub hourly_limit: u32,
    /// `mail.auth_failures`: SMTP AUTH failures per address in ten minutes.
    pub auth_failures: u32,
}

impl Default for LedgerSettings {
    fn default() -> Self {
        LedgerSettings {
            hourly_limit: 500,
            auth_failures: 10,
        }
    }
}

/// Counters of what the ledger refused or forgot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LedgerStats {
    pub messages: u64,
    pub deliveries: u64,
    pub forwards: u64,
    pub pending_evicted: u64,
    pub tables_cleared: u64,
    pub writes_dropped: u64,
}

struct Pending {
    /// Insertion number, matched against [`Ledger::order`] entries (stale ones skipped).
    seq: u64,
    key: String,
    at: i64,
    sender: Option<String>,
    auth: Option<String>,
    client: Option<IpAddr>,
    local_user: Option<String>,
    bounce: bool,
    recipients: u32,
    /// Recipients with a final outcome (sent or bounced) so far.
    finals: u32,
    written: bool,
}

/// See the module documentation.
pub struct Ledger {
    clock: SharedClock,
    tz: TimeZone,
    settings: LedgerSettings,
    pending: HashMap<String, Pending>,
    /// (queue id, seq) in arrival order; entries of completed messages are skipped lazily.
    order: VecDeque<(String, u64)>,
    seq: u64,
    /// account -> (hour start micros, messages, reported)
    hourly: HashMap<String, (i64, u32, bool)>,
    /// (account, domain, hour) already reported as relay abuse.
    mismatch_reported: HashSet<(String, String, i64)>,
    /// (original, target) forwards already reported.
    forwards: HashSet<(String, String)>,
    /// address -> failure instants (micros) within the window.
    auth_fail: HashMap<IpAddr, VecDeque<i64>>,
    writes: Vec<MailWrite>,
    stats: LedgerStats,
}

fn micros(t: Timestamp) -> i64 {
    t.as_microsecond()
}

/// `s` cut to [`MAX_FIELD`] bytes (at a character boundary), lower-cased.
fn norm(s: &str) -> String {
    crate::text::prefix_within(s, MAX_FIELD).to_ascii_lowercase()
}

/// For findings: escaped (log text is hostile).
fn shown(s: &str) -> String {
    crate::text::escape_controls(s).into_owned()
}

/// The domain of an address (after the last `@`), lower-case; `""` without one.
pub fn domain_of(addr: &str) -> String {
    addr.rsplit_once('@')
        .map(|(_, d)| norm(d.trim_end_matches('>')))
        .unwrap_or_default()
}

/// True when `domain` is `owner` or a subdomain of it.
fn owned_by(domain: &str, owner: &str) -> bool {
    !owner.is_empty()
        && (domain == owner || domain.strip_suffix(owner).is_some_and(|p| p.ends_with('.')))
}

impl Ledger {
    /// A ledger reading line times in `tz` (the server's zone: `TimeZone::system()`).
    pub fn new(settings: LedgerSettings, clock: SharedClock, tz: TimeZone) -> Ledger {
        Ledger {
            clock,
            tz,
            settings,
            pending: HashMap::new(),
            order: VecDeque::new(),
            seq: 0,
            hourly: HashMap::new(),
            mismatch_reported: HashSet::new(),
            forwards: HashSet::new(),
            auth_fail: HashMap::new(),
            writes: Vec::new(),
            stats: LedgerStats::default(),
        }
    }

    pub fn set_settings(&mut self, settings: LedgerSettings) {
        self.settings = settings;
    }

    pub fn stats(&self) -> LedgerStats {
        self.stats
    }

    /// Messages between their first and last line.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The writes produced since the last call, in order.
    pub fn take_writes(&mut self) -> Vec<MailWrite> {
        std::mem::take(&mut self.writes)
    }

    /// Writes waiting for [`Ledger::take_writes`].
    pub fn writes_len(&self) -> usize {
        self.writes.len()
    }

    /// The instant of a line: its own time read in the log's zone (the year of a BSD
    /// syslog header is the current one, or the previous one when that would put the line
    /// more than a day in the future), else now.
    pub fn line_instant(&self, t: Option<&LineTime>) -> Timestamp {
        let now = self.clock.now();
        let Some(t) = t else { return now };
        let conv = |year: i16| -> Option<Timestamp> {
            let dt = DateTime::new(
                year,
                t.month,
                t.day,
                t.hour,
                t.minute,
                t.second.min(59),
                t.micros.checked_mul(1000)?,
            )
            .ok()?;
            match t.offset_secs {
                Some(o) => Offset::from_seconds(o).ok()?.to_timestamp(dt).ok(),
                None => self.tz.to_ambiguous_timestamp(dt).compatible().ok(),
            }
        };
        let this_year = now.to_zoned(self.tz.clone()).year();
        let ts = match t.year {
            Some(y) => conv(y),
            None => conv(this_year).and_then(|ts| {
                if ts.duration_since(now) > SignedDuration::from_hours(24) {
                    conv(this_year - 1)
                } else {
                    Some(ts)
                }
            }),
        };
        ts.unwrap_or(now)
    }

    fn push(&mut self, w: MailWrite) {
        if self.writes.len() >= MAX_WRITES {
            self.stats.writes_dropped += 1;
        } else {
            self.writes.push(w);
        }
    }

    fn guard_tables(&mut self) {
        if self.hourly.len() >= MAX_TRACKED {
            self.hourly.clear();
            self.stats.tables_cleared += 1;
        }
        if self.mismatch_reported.len() >= MAX_TRACKED {
            self.mismatch_reported.clear();
            self.stats.tables_cleared += 1;
        }
        if self.forwards.len() >= MAX_TRACKED {
            self.forwards.clear();
            self.stats.tables_cleared += 1;
        }
        if self.auth_fail.len() >= MAX_TRACKED {
            self.auth_fail.clear();
            self.stats.tables_cleared += 1;
        }
    }

    /// One parsed line; findings go to `emit`.
    pub fn handle(&mut self, p: &Parsed<'_>, emit: &mut dyn FnMut(Finding)) {
        let at_ts = self.line_instant(p.time.as_ref());
        let at = micros(at_ts);
        self.guard_tables();
        let mta = p.mta.label();
        match &p.event {
            MailEvent::Received {
                queue_id,
                sender,
                auth,
                client,
                local_user,
                recipients,
                bounce_of,
            } => {
                let id = norm(queue_id);
                let entry = self.pending_entry(mta, &id, at);
                if let Some(s) = sender {
                    entry.sender = Some(norm(s));
                    if s.is_empty() {
                        entry.bounce = true;
                    }
                }
                if let Some(a) = auth {
                    entry.auth = Some(norm(a));
                }
                if client.is_some() {
                    entry.client = *client;
                }
                if let Some(u) = local_user {
                    entry.local_user = Some(norm(u));
                }
                if let Some(n) = recipients {
                    entry.recipients = entry.recipients.max(*n);
                }
                if bounce_of.is_some() {
                    entry.bounce = true;
                }
                // A message is recorded once its sender is known (Exim: at once; Postfix:
                // at qmgr's `from=`, after smtpd's `client=` or pickup's `uid=`).
                if entry.sender.is_some() {
                    self.record(&id, at_ts, true, emit);
                }
            }
            MailEvent::Delivery {
                queue_id,
                outcome,
                recipient,
                original,
                remote,
            } => {
                self.stats.deliveries += 1;
                let id = norm(queue_id);
                let key = match self.pending.get(&id) {
                    Some(e) => e.key.clone(),
                    None => {
                        // First seen at its delivery (the arrival was before the reader
                        // started): a record with what is known.
                        let e = self.pending_entry(mta, &id, at);
                        e.sender = Some(String::new());
                        e.key.clone()
                    }
                };
                let forwarded = original.is_some() && *outcome == Outcome::Sent;
                let o = |x: Outcome| i64::from(*outcome == x);
                self.record(&id, at_ts, false, emit);
                let finals = match self.pending.get_mut(&id) {
                    Some(e) if *outcome != Outcome::Deferred => {
                        e.finals += 1;
                        e.finals
                    }
                    _ => 0,
                };
                if finals > 0 {
                    self.push(MailWrite::Recipients {
                        key: key.clone(),
                        recipients: i64::from(finals),
                    });
                }
                self.push(MailWrite::Outcome {
                    key,
                    sent: o(Outcome::Sent),
                    deferred: o(Outcome::Deferred),
                    bounced: o(Outcome::Bounced),
                    forwarded: i64::from(forwarded),
                    remote: i64::from(*remote && *outcome == Outcome::Sent),
                });
                if let (Some(orig), true) = (original, forwarded) {
                    self.forward(orig, recipient, at_ts, emit);
                }
            }
            MailEvent::Completed { queue_id } => {
                let id = norm(queue_id);
                self.pending.remove(&id);
                // Stale order entries are skipped at eviction; keep the list bounded.
                if self.order.len() > 2 * MAX_PENDING {
                    let pending = &self.pending;
                    self.order
                        .retain(|(id, seq)| pending.get(id).is_some_and(|p| p.seq == *seq));
                }
            }
            MailEvent::AuthFailed { client, user } => {
                let Some(ip) = client else { return };
                let window = micros(at_ts) - AUTH_WINDOW.as_micros() as i64;
                let q = self.auth_fail.entry(*ip).or_default();
                q.retain(|&t| t > window);
                q.push_back(at);
                let n = q.len();
                let limit = self.settings.auth_failures.max(1) as usize;
                if n >= limit {
                    q.clear();
                    let who = user.map(|u| format!("; last user {}", shown(&norm(u))));
                    emit(
                        Finding::new(
                            CHECK_AUTH_BRUTEFORCE,
                            Severity::High,
                            format!("SMTP AUTH brute force from {ip}"),
                            at_ts,
                        )
                        .with_ip(*ip)
                        .with_details(format!(
                            "{n} failed SMTP AUTH attempts from {ip} within {} s{}",
                            AUTH_WINDOW.as_secs(),
                            who.unwrap_or_default()
                        )),
                    );
                }
            }
            MailEvent::RelayDenied { .. } => {
                // Refused by the MTA: nothing was sent. Counted by the reader only.
            }
        }
    }

    fn pending_entry(&mut self, mta: &str, id: &str, at: i64) -> &mut Pending {
        if !self.pending.contains_key(id) {
            if self.pending.len() >= MAX_PENDING {
                while let Some((old, seq)) = self.order.pop_front() {
                    if self.pending.get(&old).is_some_and(|p| p.seq == seq) {
                        self.pending.remove(&old);
                        self.stats.pending_evicted += 1;
                        break;
                    }
                }
            }
            self.seq += 1;
            self.order.push_back((id.to_string(), self.seq));
            self.pending.insert(
                id.to_string(),
                Pending {
                    seq: self.seq,
                    key: format!("{mta}:{id}:{at}"),
                    at,
                    sender: None,
                    auth: None,
                    client: None,
                    local_user: None,
                    bounce: false,
                    recipients: 0,
                    finals: 0,
                    written: false,
                },
            );
        }
        // Inserted above when missing.
        self.pending
            .get_mut(id)
            .expect("pending entry inserted above")
    }

    /// Writes (or rewrites, when more became known) the message record of `id` and runs
    /// the per-account checks the first time.
    fn record(&mut self, id: &str, now: Timestamp, rewrite: bool, emit: &mut dyn FnMut(Finding)) {
        let Some(e) = self.pending.get(id) else {
            return;
        };
        let sender = e.sender.clone().unwrap_or_default();
        let sender_domain = domain_of(&sender);
        let (origin, account) = if e.bounce {
            ("bounce", String::new())
        } else if let Some(a) = &e.auth {
            ("auth", a.clone())
        } else if let Some(u) = &e.local_user {
            ("local", u.clone())
        } else if e.client.is_some() {
            ("inbound", String::new())
        } else {
            ("unknown", String::new())
        };
        let auth_domain = e.auth.as_deref().map(domain_of).unwrap_or_default();
        let mismatch = origin == "auth"
            && !sender_domain.is_empty()
            && !auth_domain.is_empty()
            && !owned_by(&sender_domain, &auth_domain);
        let first = !e.written;
        let msg = NewMessage {
            key: e.key.clone(),
            at: e.at,
            mta: if e.key.starts_with("exim:") {
                "exim"
            } else {
                "postfix"
            },
            queue_id: id.to_string(),
            sender,
            sender_domain: sender_domain.clone(),
            account: account.clone(),
            auth_user: e.auth.clone().unwrap_or_default(),
            client_ip: e.client.map(|c| c.to_string()),
            origin,
            recipients: i64::from(e.recipients),
            relay_mismatch: mismatch,
        };
        let changed = first || rewrite;
        if let Some(e) = self.pending.get_mut(id) {
            e.written = true;
        }
        if changed {
            self.push(MailWrite::Message(msg));
        }
        if !first || account.is_empty() {
            return;
        }
        self.stats.messages += 1;
        let at = micros(now);
        let hour = at - at.rem_euclid(3_600_000_000);
        let limit = self.settings.hourly_limit.max(1);
        let slot = self
            .hourly
            .entry(account.clone())
            .or_insert((hour, 0, false));
        if slot.0 != hour {
            *slot = (hour, 0, false);
        }
        slot.1 += 1;
        if slot.1 > limit && !slot.2 {
            slot.2 = true;
            let n = slot.1;
            emit(
                Finding::new(
                    CHECK_PER_ACCOUNT,
                    Severity::High,
                    format!(
                        "account {} sent over {limit} messages in an hour",
                        shown(&account)
                    ),
                    now,
                )
                .with_account(account.clone())
                .with_details(format!(
                    "{n} messages since {} (limit {limit} an hour, mail.per_account_hourly)",
                    crate::timefmt::rfc3339(Timestamp::from_microsecond(hour).unwrap_or(now))
                )),
            );
        }
        if mismatch
            && self
                .mismatch_reported
                .insert((account.clone(), sender_domain.clone(), hour))
        {
            let details = format!(
                "authenticated as {} (domain {}), envelope sender domain {}, which that login does not own",
                shown(&account),
                shown(&auth_domain),
                shown(&sender_domain)
            );
            emit(
                Finding::new(
                    CHECK_PER_ACCOUNT,
                    Severity::High,
                    format!(
                        "account {} sent as {} (relay abuse)",
                        shown(&account),
                        shown(&sender_domain)
                    ),
                    now,
                )
                .with_account(account)
                .with_details(details),
            );
        }
    }

    fn forward(
        &mut self,
        original: &str,
        target: &str,
        now: Timestamp,
        emit: &mut dyn FnMut(Finding),
    ) {
        self.stats.forwards += 1;
        let original = norm(original);
        let target = norm(target);
        let from_domain = domain_of(&original);
        let target_domain = domain_of(&target);
        self.push(MailWrite::Forward {
            at: micros(now),
            original: original.clone(),
            target: target.clone(),
            target_domain: target_domain.clone(),
            account: from_domain.clone(),
        });
        let pair = (original.clone(), target.clone());
        if self.forwards.contains(&pair) {
            return;
        }
        self.forwards.insert(pair);
        if self.forwards.contains(&(target.clone(), original.clone())) {
            emit(
                Finding::new(
                    CHECK_FORWARDER,
                    Severity::High,
                    format!(
                        "forwarding loop between {} and {}",
                        shown(&original),
                        shown(&target)
                    ),
                    now,
                )
                .with_details("each address forwards mail to the other".to_string()),
            );
        } else if !target_domain.is_empty()
            && !owned_by(&target_domain, &from_domain)
            && !owned_by(&from_domain, &target_domain)
        {
            emit(
                Finding::new(
                    CHECK_FORWARDER,
                    Severity::Warning,
                    format!(
                        "mailbox {} forwards to external address {}",
                        shown(&original),
                        shown(&target)
                    ),
                    now,
                )
                .with_details(format!(
                    "mail for {} is forwarded to the domain {}",
                    shown(&original),
                    shown(&target_domain)
                )),
            );
        }
    }
}

#[cfg(test)]
mod tests;
