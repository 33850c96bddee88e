//! The mailbox password audit of the deep scan: reads the password files, tries each
//! mailbox's candidates on the shared [`HashPool`] (up to [`CONCURRENT_AUDITS`] mailboxes
//! at once), records what completed, and turns the results into findings
//! `email_weak_password` (HIGH, naming the mailbox) and `email_password_audit_incomplete`
//! (WARNING).
//!
//! Rules (spec "Password audit"):
//! - A completed audit of a mailbox is recorded with a keyed fingerprint of its stored
//!   value and the audit version (daemon version + bundled list digest); while both are
//!   unchanged the mailbox is not audited again and its result (weak or not) carries over.
//!   A completed audit replaces earlier findings; an upgrade (a new version) starts a fresh
//!   audit of every mailbox.
//! - An unsupported, malformed or over-limit stored value, or an audit that exceeds its
//!   5-minute budget, yields `email_password_audit_incomplete`: earlier password findings
//!   of that mailbox stay, the mailbox is not recorded as audited, the other mailboxes
//!   continue. Such a mailbox is retried only after `password_check_interval_min` (or at
//!   once when its stored value changes or the daemon is upgraded); skipped cycles keep
//!   the earlier findings and the warning.
//! - Temporary failures (cancellation, the scan's time budget) record nothing and change no
//!   finding: the mailbox is audited again at the next deep scan.
//! - Nothing secret leaves this module: no password, candidate or stored value goes to a
//!   subprocess, a log line, a finding, an error or a row. Findings name the mailbox (and
//!   its account when known).
//!
//! Row `email_password.mailboxes` (depth unit mailboxes, capacity unavailable: the
//! mailboxes this scan still has to audit; running: audits in progress, at most five):
//! phases admission (1 minute), processing (the 5-minute audit budget) and result handling
//! (1 minute, including the breach-count query). An audit over its budget counts one loss;
//! cancellation and mailboxes left for the next scan count none.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sha2::{Digest as _, Sha256};

use super::breach::BreachApi;
use super::candidates::{weak_list_digest, Candidates};
use super::files::{read_all, Entry};
use super::pool::{Checked, HashPool};
use super::scheme::{parse, Field, FormatError, Stored};
use crate::checks::CheckContext;
use crate::clock::SharedClock;
use crate::findings::{Finding, Severity};
use crate::queue::{
    LagBasis, Phase, PhaseBudgets, QueueHealth, RegisterError, Registry, RowConfig, RowHandle,
};
use crate::store::mail_accounts::{self as db, AuditRecord};
use crate::store::Store;

/// Check name of a weak password.
pub const CHECK_WEAK: &str = "email_weak_password";
/// Check name of an audit that could not complete.
pub const CHECK_INCOMPLETE: &str = "email_password_audit_incomplete";
/// Row of the mailbox audits.
pub const MAILBOXES_ROW: &str = "email_password.mailboxes";
/// Mailbox audits at once per scan.
pub const CONCURRENT_AUDITS: usize = 5;
/// Budget of one mailbox audit.
pub const AUDIT_BUDGET: Duration = Duration::from_secs(5 * 60);
/// Budget of admission and of result handling.
pub const STEP_BUDGET: Duration = Duration::from_secs(60);
/// Bumped when the audit's behaviour changes (part of the audit version).
pub const AUDIT_REVISION: u32 = 1;
/// `kv` key of the fingerprint key.
const FP_KEY: &str = "mail_password_fp_key";

pub use crate::config::mail::AuditSettings;

/// Cost units from which a scheme counts as slow (bcrypt, Argon2, SHA-crypt with many rounds).
pub const SLOW_UNITS: u64 = 10_000;

/// What happened to one mailbox in one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Completed: a candidate matched (breach count when asked).
    Weak(Option<u64>),
    /// Completed: no candidate matched (or a locked account).
    Clean,
    /// Not completed: unsupported, malformed, over limit or over budget.
    Incomplete(String),
    /// Not completed for now (cancelled, scan time over): nothing changes.
    Temporary,
}

/// Counts of one run (logged, and returned to tests and benchmarks).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    pub mailboxes: usize,
    pub carried_over: usize,
    pub skipped_by_interval: usize,
    pub audited: usize,
    pub weak: usize,
    pub incomplete: usize,
    pub temporary: usize,
    pub hashes_tried: u64,
    /// The run did not happen (its records could not be read): nothing changed.
    pub skipped: bool,
}

/// The auditor: one per daemon.
pub struct Auditor {
    pool: Arc<HashPool>,
    row: Arc<QueueHealth>,
    _row: RowHandle,
    store: Store,
    clock: SharedClock,
    /// Incomplete findings of the last run (the `email_password_audit_incomplete` check).
    last_incomplete: Mutex<Option<Vec<Finding>>>,
    /// Weak findings of the last run (kept when the records cannot be read).
    last_weak: Mutex<Option<Vec<Finding>>>,
    running: Mutex<()>,
}

fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    for p in parts {
        inner.update(p);
    }
    let ih = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(ih);
    outer.finalize().into()
}

/// The audit version: a new daemon version or bundled list starts a fresh audit.
pub fn audit_version() -> String {
    format!(
        "{}/{}/{}",
        env!("CARGO_PKG_VERSION"),
        AUDIT_REVISION,
        weak_list_digest().get(..16).unwrap_or("")
    )
}

impl Auditor {
    pub fn new(
        pool: Arc<HashPool>,
        store: Store,
        clock: SharedClock,
        registry: &Arc<Registry>,
    ) -> Result<Arc<Auditor>, RegisterError> {
        let mut cfg = RowConfig::new("mailboxes")
            .lag_basis(LagBasis::OperationProgress)
            .running_slots(CONCURRENT_AUDITS);
        cfg.capacity = None;
        cfg.phase_budgets =
            PhaseBudgets::uniform(STEP_BUDGET).with(Phase::Processing, AUDIT_BUDGET);
        let row = QueueHealth::new(clock.clone(), cfg);
        let handle = registry.register(MAILBOXES_ROW, row.clone())?;
        Ok(Arc::new(Auditor {
            pool,
            row,
            _row: handle,
            store,
            clock,
            last_incomplete: Mutex::new(None),
            last_weak: Mutex::new(None),
            running: Mutex::new(()),
        }))
    }

    /// The hash pool (benchmarks).
    pub fn pool(&self) -> &Arc<HashPool> {
        &self.pool
    }

    fn fingerprint_key(&self) -> Vec<u8> {
        let stored = self
            .store
            .read(|c| crate::store::kv::get(c, FP_KEY))
            .ok()
            .flatten()
            .and_then(|h| hex::decode(h).ok())
            .filter(|k| k.len() == 32);
        if let Some(k) = stored {
            return k;
        }
        let key = crate::ids::random_hex(32);
        let k2 = key.clone();
        if let Err(e) = self
            .store
            .write(move |c| crate::store::kv::set(c, FP_KEY, &k2))
        {
            ::log::warn!("password audit: cannot store its fingerprint key: {e}");
        }
        hex::decode(key).unwrap_or_default()
    }

    /// The incomplete findings of the last run (`None` before the first run).
    pub fn last_incomplete(&self) -> Option<Vec<Finding>> {
        self.last_incomplete.lock().clone()
    }

    /// Runs the audit (see the module documentation). Returns the weak-password findings
    /// in force after the run; the incomplete findings are kept for
    /// [`Auditor::last_incomplete`].
    pub fn run(
        &self,
        ctx: &CheckContext,
        settings: &AuditSettings,
        cancel: &AtomicBool,
    ) -> (Vec<Finding>, RunStats) {
        let _one = self.running.lock();
        let mut stats = RunStats::default();
        let now = self.clock.now();
        let now_us = now.as_microsecond();
        let paths = ctx.glob_all(&settings.files);
        let (entries, read) = read_all(&paths);
        let mut incomplete: Vec<Finding> = Vec::new();
        for (p, why) in &read.unreadable {
            let shown = crate::hostfs::display_path(p);
            ::log::warn!("password audit: {shown}: {why}");
            incomplete.push(
                Finding::new(
                    CHECK_INCOMPLETE,
                    Severity::Warning,
                    format!("password file {shown} could not be read"),
                    now,
                )
                .with_path(shown.clone())
                .with_details(format!("{why}; its mailboxes keep their earlier findings")),
            );
        }
        let records = match self.store.read(db::load_audit) {
            Ok(r) => r,
            Err(e) => {
                ::log::warn!("password audit: cannot read its records: {e}; audit skipped");
                let weak = self.last_weak.lock().clone().unwrap_or_default();
                stats.skipped = true;
                return (weak, stats);
            }
        };
        let key = self.fingerprint_key();
        let version = audit_version();
        stats.mailboxes = entries.len();
        let mut weak_findings: Vec<Finding> = Vec::new();
        let mut work: Vec<(usize, String)> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let fp = hex::encode(
                hmac_sha256(&key, &[e.mailbox.as_bytes(), b"\0", &e.stored])
                    .get(..16)
                    .unwrap_or(&[]),
            );
            let rec = records.get(&e.mailbox);
            let audited_now = rec.is_some_and(|r| {
                r.audited_fp.as_deref() == Some(fp.as_str())
                    && r.audited_version.as_deref() == Some(version.as_str())
            });
            if audited_now {
                stats.carried_over += 1;
                if let Some(r) = rec.filter(|r| r.weak) {
                    weak_findings.push(weak_finding(
                        &e.mailbox,
                        e.account.as_deref(),
                        r.breach_count,
                        now,
                    ));
                }
                continue;
            }
            let waiting_interval = rec.is_some_and(|r| {
                r.failed_fp.as_deref() == Some(fp.as_str())
                    && r.failed_version.as_deref() == Some(version.as_str())
                    && r.retry_after.is_some_and(|t| now_us < t)
            });
            if waiting_interval {
                stats.skipped_by_interval += 1;
                if let Some(r) = rec {
                    if r.weak {
                        weak_findings.push(weak_finding(
                            &e.mailbox,
                            e.account.as_deref(),
                            r.breach_count,
                            now,
                        ));
                    }
                    incomplete.push(incomplete_finding(
                        &e.mailbox,
                        e.account.as_deref(),
                        r.failed_reason
                            .as_deref()
                            .unwrap_or("earlier audit incomplete"),
                        now,
                    ));
                }
                continue;
            }
            work.push((i, fp));
        }
        // Mailboxes no longer listed: their records go, unless a file could not be read.
        let listed: HashSet<&str> = entries.iter().map(|e| e.mailbox.as_str()).collect();
        let mut remove: Vec<String> = Vec::new();
        for (m, r) in &records {
            if listed.contains(m.as_str()) {
                continue;
            }
            if read.unreadable.is_empty() {
                remove.push(m.clone());
            } else if r.weak {
                weak_findings.push(weak_finding(m, r.account.as_deref(), r.breach_count, now));
            }
        }

        let outcomes = self.audit_all(&entries, &work, settings, cancel, &mut stats);
        let mut save: Vec<AuditRecord> = Vec::new();
        let retry_after =
            now_us.saturating_add(settings.interval_min.saturating_mul(60_000_000) as i64);
        for ((i, fp), outcome) in work.iter().zip(outcomes) {
            let Some(e) = entries.get(*i) else { continue };
            let prev = records.get(&e.mailbox);
            let mut rec = prev.cloned().unwrap_or_else(|| AuditRecord {
                mailbox: e.mailbox.clone(),
                ..AuditRecord::default()
            });
            rec.account = e.account.clone();
            match outcome {
                Outcome::Weak(breach) => {
                    stats.weak += 1;
                    stats.audited += 1;
                    rec.audited_fp = Some(fp.clone());
                    rec.audited_version = Some(version.clone());
                    rec.weak = true;
                    rec.breach_count = breach.map(|b| b.min(i64::MAX as u64) as i64);
                    rec.audited = Some(now_us);
                    rec.failed_fp = None;
                    rec.failed_version = None;
                    rec.failed_reason = None;
                    rec.retry_after = None;
                    weak_findings.push(weak_finding(
                        &e.mailbox,
                        e.account.as_deref(),
                        rec.breach_count,
                        now,
                    ));
                    save.push(rec);
                }
                Outcome::Clean => {
                    stats.audited += 1;
                    rec.audited_fp = Some(fp.clone());
                    rec.audited_version = Some(version.clone());
                    rec.weak = false;
                    rec.breach_count = None;
                    rec.audited = Some(now_us);
                    rec.failed_fp = None;
                    rec.failed_version = None;
                    rec.failed_reason = None;
                    rec.retry_after = None;
                    save.push(rec);
                }
                Outcome::Incomplete(reason) => {
                    stats.incomplete += 1;
                    if rec.weak {
                        weak_findings.push(weak_finding(
                            &e.mailbox,
                            e.account.as_deref(),
                            rec.breach_count,
                            now,
                        ));
                    }
                    incomplete.push(incomplete_finding(
                        &e.mailbox,
                        e.account.as_deref(),
                        &reason,
                        now,
                    ));
                    rec.failed_fp = Some(fp.clone());
                    rec.failed_version = Some(version.clone());
                    rec.failed_reason = Some(reason);
                    rec.retry_after = Some(retry_after);
                    save.push(rec);
                }
                Outcome::Temporary => {
                    stats.temporary += 1;
                    if let Some(r) = prev {
                        if r.weak {
                            weak_findings.push(weak_finding(
                                &e.mailbox,
                                e.account.as_deref(),
                                r.breach_count,
                                now,
                            ));
                        }
                        if let Some(reason) = &r.failed_reason {
                            incomplete.push(incomplete_finding(
                                &e.mailbox,
                                e.account.as_deref(),
                                reason,
                                now,
                            ));
                        }
                    }
                }
            }
        }
        if !save.is_empty() || !remove.is_empty() {
            if let Err(e) = self.store.write(move |c| db::save_audit(c, &save, &remove)) {
                ::log::warn!("password audit: cannot record its results: {e}; they are audited again next time");
            }
        }
        if stats.audited + stats.incomplete > 0 {
            ::log::info!(
                "password audit: {} mailboxes, {} audited ({} weak), {} incomplete, {} unchanged, {} waiting for the retry interval, {} left for the next scan",
                stats.mailboxes,
                stats.audited,
                stats.weak,
                stats.incomplete,
                stats.carried_over,
                stats.skipped_by_interval,
                stats.temporary
            );
        }
        *self.last_incomplete.lock() = Some(incomplete);
        *self.last_weak.lock() = Some(weak_findings.clone());
        (weak_findings, stats)
    }

    /// Audits `work` with up to five threads; returns one outcome per item, in order.
    fn audit_all(
        &self,
        entries: &[Entry],
        work: &[(usize, String)],
        settings: &AuditSettings,
        cancel: &AtomicBool,
        stats: &mut RunStats,
    ) -> Vec<Outcome> {
        let n = work.len();
        let outcomes: Mutex<Vec<Outcome>> = Mutex::new(vec![Outcome::Temporary; n]);
        let next = AtomicUsize::new(0);
        let tried = std::sync::atomic::AtomicU64::new(0);
        let scan_deadline = self.pool.deadline_after(Duration::from_secs(
            settings.scan_minutes.saturating_mul(60),
        ));
        let breach =
            (!settings.breach_api.is_empty()).then(|| BreachApi::new(&settings.breach_api));
        let year = self.clock.now().to_zoned(jiff::tz::TimeZone::UTC).year();
        self.row.set_waiting(n as u64);
        std::thread::scope(|s| {
            for _ in 0..CONCURRENT_AUDITS.min(n) {
                s.spawn(|| loop {
                    if cancel.load(Ordering::Acquire) || self.pool.now_nanos() >= scan_deadline {
                        return;
                    }
                    let k = next.fetch_add(1, Ordering::AcqRel);
                    let Some((i, _)) = work.get(k) else { return };
                    let Some(e) = entries.get(*i) else { return };
                    self.row.sub_waiting(1);
                    let (o, t) =
                        self.audit_one(e, settings, cancel, scan_deadline, year, breach.as_ref());
                    tried.fetch_add(t, Ordering::Relaxed);
                    if let Some(slot) = outcomes.lock().get_mut(k) {
                        *slot = o;
                    }
                });
            }
        });
        self.row.set_waiting(0);
        stats.hashes_tried += tried.load(Ordering::Relaxed);
        outcomes.into_inner()
    }

    /// Audits one mailbox. Returns its outcome and the number of candidates tried.
    fn audit_one(
        &self,
        e: &Entry,
        settings: &AuditSettings,
        cancel: &AtomicBool,
        scan_deadline: i64,
        year: i16,
        breach: Option<&BreachApi>,
    ) -> (Outcome, u64) {
        let guard = self.row.start_running_in(Phase::Admission);
        let stored = match parse(&e.stored) {
            Ok(Field::Value(s)) => s,
            Ok(Field::Locked) => {
                guard.finish();
                return (Outcome::Clean, 0);
            }
            Err(err) => {
                guard.finish();
                return (Outcome::Incomplete(reason_of(&err)), 0);
            }
        };
        let slow = stored.cost_units() >= SLOW_UNITS;
        let list_limit = if slow {
            settings.slow_candidates
        } else {
            usize::MAX
        };
        let candidates = Arc::new(Candidates::new(
            &e.mailbox,
            e.account.as_deref(),
            year,
            list_limit,
        ));
        let stored = Arc::new(stored);
        let batch = HashPool::batch_len(&stored);
        guard.set_phase(Phase::Processing);
        // Deadlines on the pool's clock (monotonic nanoseconds; injected in tests).
        let budget_end = self.pool.deadline_after(AUDIT_BUDGET);
        let deadline = budget_end.min(scan_deadline.max(self.pool.now_nanos()));
        let mut start = 0;
        let mut tried = 0u64;
        let total = candidates.len();
        let matched = loop {
            if start >= total {
                break None;
            }
            let end = (start + batch).min(total);
            match self
                .pool
                .check(&stored, &candidates, start..end, cancel, deadline)
            {
                Checked::Matched(i) => {
                    tried += (i + 1 - start) as u64;
                    break Some(i);
                }
                Checked::NoMatch => {
                    tried += (end - start) as u64;
                    start = end;
                }
                Checked::Cancelled => {
                    guard.cancel();
                    return (Outcome::Temporary, tried);
                }
                Checked::Deadline => {
                    if self.pool.now_nanos() >= budget_end {
                        guard.lose();
                        return (
                            Outcome::Incomplete(format!(
                                "{} audit exceeded its {}-minute budget after {start} of {total} candidates",
                                stored.family(),
                                AUDIT_BUDGET.as_secs() / 60
                            )),
                            tried,
                        );
                    }
                    // The scan's own time is over: left for the next scan.
                    guard.cancel();
                    return (Outcome::Temporary, tried);
                }
                Checked::Failed(err) => {
                    guard.finish();
                    return (
                        Outcome::Incomplete(format!("{}: {err}", stored.family())),
                        tried,
                    );
                }
            }
        };
        guard.set_phase(Phase::ResultHandling);
        let outcome = match matched {
            None => Outcome::Clean,
            Some(i) => {
                let count = match (breach, candidates.get(i)) {
                    (Some(api), Some(pw)) => match api.count(pw) {
                        Ok(n) => Some(n),
                        Err(why) => {
                            ::log::warn!("password audit: breach count unavailable: {why}");
                            None
                        }
                    },
                    _ => None,
                };
                Outcome::Weak(count)
            }
        };
        guard.finish();
        (outcome, tried)
    }
}

fn reason_of(e: &FormatError) -> String {
    e.to_string()
}

fn weak_finding(
    mailbox: &str,
    account: Option<&str>,
    breach: Option<i64>,
    now: jiff::Timestamp,
) -> Finding {
    let mut details = String::from(
        "the deep-scan password audit matched this mailbox's password with an account-derived or common password; the password is not shown. Change it.",
    );
    if let Some(n) = breach {
        details.push_str(&format!(
            " The breach-count service lists this password {n} times."
        ));
    }
    let f = Finding::new(
        CHECK_WEAK,
        Severity::High,
        format!(
            "mailbox {} has a weak password",
            crate::hostfs::sanitize(mailbox, 320)
        ),
        now,
    )
    .with_details(details);
    match account {
        Some(a) => f.with_account(a),
        None => f,
    }
}

fn incomplete_finding(
    mailbox: &str,
    account: Option<&str>,
    reason: &str,
    now: jiff::Timestamp,
) -> Finding {
    let f = Finding::new(
        CHECK_INCOMPLETE,
        Severity::Warning,
        format!(
            "password audit of mailbox {} incomplete",
            crate::hostfs::sanitize(mailbox, 320)
        ),
        now,
    )
    .with_details(format!(
        "{reason}; earlier password findings of this mailbox stay and it is retried later"
    ));
    match account {
        Some(a) => f.with_account(a),
        None => f,
    }
}

/// The family of a stored value, or why it is not audited (benchmarks, tests).
pub fn describe(stored: &[u8]) -> Result<Option<Stored>, FormatError> {
    parse(stored).map(|f| match f {
        Field::Value(s) => Some(s),
        Field::Locked => None,
    })
}
