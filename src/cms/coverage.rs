//! `cms_verification`: what is known about each installation, per verification kind
//! (`core`, `plugins`), and the counts and warnings derived from it (api-core.md,
//! "Content-management-system verification coverage", rules 1-8).
//!
//! - Rule 1: an installation discovery found without a completed attempt is `unknown`.
//! - Rule 2: core verification that found differences, missing files included, is
//!   `modified`.
//! - Rule 3: a `verified` plugin inventory may still list vulnerable versions (those are
//!   findings, not a state).
//! - Rule 4: records live in the store and are loaded at start. Each scan takes the next
//!   number of a sequence at its start; an attempt is recorded only when its scan is not
//!   older than the one that recorded the installation's last attempt, so overlapping scans
//!   keep the latest attempt and its consecutive-failure count in scan order. Discovery
//!   alone never replaces an attempt's state.
//! - Rule 5: a group without records is absent; history that could not be read gives
//!   `{"error": ...}` instead of counts.
//! - Rule 6: every failed attempt counts the installation `unverified`; from
//!   [`REPEATED_FAILURES`] consecutive failures on, it also gets its own WARNING.
//! - Rule 7: in host scans, when more than [`PER_CAUSE_LIMIT`] installations of one kind
//!   fail repeatedly for one cause, their warnings become one finding naming the cause,
//!   the total and a sample of failure details, without any path, naming an account only
//!   when all share it. Account scans keep per-installation warnings.
//! - Rule 8: these are findings; the queue rows count lost work only (a refused request
//!   completed its work).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde_json::{json, Map, Value};

use super::discover::Platform;
use crate::findings::{Finding, Severity};
use crate::store::cms::CoverageRow;

/// Consecutive failures from which an installation gets its own warning (rule 6).
pub const REPEATED_FAILURES: u32 = 2;
/// Installations one cause may stop in a host scan before their warnings collapse (rule 7).
pub const PER_CAUSE_LIMIT: usize = 5;
/// Failure details a collapsed warning carries as its sample.
pub const SAMPLE: usize = 3;

/// Check of repeated core verification failures.
pub const CORE_UNVERIFIED: &str = "cms_core_unverified";
/// Check of repeated plugin inventory failures.
pub const PLUGINS_UNVERIFIED: &str = "cms_plugins_unverified";

/// A verification kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Group {
    Core,
    Plugins,
}

impl Group {
    pub const ALL: [Group; 2] = [Group::Core, Group::Plugins];

    pub fn as_str(self) -> &'static str {
        match self {
            Group::Core => "core",
            Group::Plugins => "plugins",
        }
    }

    fn parse(s: &str) -> Option<Group> {
        match s {
            "core" => Some(Group::Core),
            "plugins" => Some(Group::Plugins),
            _ => None,
        }
    }

    /// Why installations of other platforms are `not_platform` in this group.
    pub fn not_platform_reason(self) -> &'static str {
        match self {
            Group::Core => "no official per-file core checksum source exists for Joomla or Drupal; those installations are counted, not verified",
            Group::Plugins => "the plugin and vulnerability inventory covers WordPress plugins and themes only; Joomla and Drupal installations are counted, not inventoried",
        }
    }

    fn unverified_check(self) -> &'static str {
        match self {
            Group::Core => CORE_UNVERIFIED,
            Group::Plugins => PLUGINS_UNVERIFIED,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Group::Core => "core verification",
            Group::Plugins => "plugin inventory",
        }
    }
}

/// An installation's state in one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Unknown,
    Verified,
    Modified,
    Unverified,
    NotPlatform,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Unknown => "unknown",
            State::Verified => "verified",
            State::Modified => "modified",
            State::Unverified => "unverified",
            State::NotPlatform => "not_platform",
        }
    }

    fn parse(s: &str) -> Option<State> {
        Some(match s {
            "unknown" => State::Unknown,
            "verified" => State::Verified,
            "modified" => State::Modified,
            "unverified" => State::Unverified,
            "not_platform" => State::NotPlatform,
            _ => return None,
        })
    }
}

/// How one attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Verified,
    Modified,
    NotPlatform,
    /// Could not complete: a stable `cause` token and a detail without paths.
    Failed {
        cause: String,
        detail: String,
    },
}

/// One installation in one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub platform: Platform,
    pub account: Option<String>,
    pub state: State,
    pub last_attempt: Option<Timestamp>,
    /// Consecutive failed attempts.
    pub failures: u32,
    pub cause: Option<String>,
    pub detail: Option<String>,
    /// Sequence number of the scan that recorded the last attempt (0: none).
    pub scan_seq: u64,
}

/// Counts of one group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupCounts {
    pub verified: u64,
    pub modified: u64,
    pub unverified: u64,
    pub unknown: u64,
    pub not_platform: u64,
    /// `not_platform` per platform (`joomla`, `drupal`).
    pub not_platform_by: BTreeMap<&'static str, u64>,
    pub last_attempt: Option<Timestamp>,
}

/// Every record, and whether the history could be read.
#[derive(Debug, Default)]
pub struct Coverage {
    records: BTreeMap<(String, Group), Record>,
    /// Why the stored history could not be read (rule 5).
    error: Option<String>,
    last_seq: u64,
    /// Keys changed or removed since the last [`Coverage::take_changes`].
    changed: BTreeMap<(String, Group), bool>,
}

impl Coverage {
    /// Coverage from stored rows (rows that do not parse are skipped).
    pub fn from_rows(rows: Vec<CoverageRow>) -> Coverage {
        let mut c = Coverage::default();
        for r in rows {
            let (Some(group), Some(state), Some(platform)) = (
                Group::parse(&r.kind),
                State::parse(&r.state),
                Platform::parse(&r.platform),
            ) else {
                continue;
            };
            let seq = u64::try_from(r.scan_seq).unwrap_or(0);
            c.last_seq = c.last_seq.max(seq);
            c.records.insert(
                (r.path, group),
                Record {
                    platform,
                    account: r.account,
                    state,
                    last_attempt: r
                        .last_attempt
                        .and_then(|m| Timestamp::from_microsecond(m).ok()),
                    failures: u32::try_from(r.failures).unwrap_or(0),
                    cause: r.cause,
                    detail: r.detail,
                    scan_seq: seq,
                },
            );
        }
        c
    }

    /// Coverage whose history could not be read.
    pub fn unreadable(error: String) -> Coverage {
        Coverage {
            error: Some(error),
            ..Coverage::default()
        }
    }

    /// The number of a new scan (rule 4's order).
    pub fn begin_scan(&mut self) -> u64 {
        self.last_seq += 1;
        self.last_seq
    }

    /// Discovery found the installation: a new one is `unknown` (rule 1); a known one keeps
    /// its state (rule 4) and takes the current platform and account.
    pub fn discovered(
        &mut self,
        path: &str,
        group: Group,
        platform: Platform,
        account: Option<String>,
    ) {
        let key = (path.to_string(), group);
        match self.records.get_mut(&key) {
            Some(r) => {
                if r.platform != platform || r.account != account {
                    r.platform = platform;
                    r.account = account;
                    self.changed.insert(key, true);
                }
            }
            None => {
                self.records.insert(
                    key.clone(),
                    Record {
                        platform,
                        account,
                        state: State::Unknown,
                        last_attempt: None,
                        failures: 0,
                        cause: None,
                        detail: None,
                        scan_seq: 0,
                    },
                );
                self.changed.insert(key, true);
            }
        }
    }

    /// Records an attempt of scan `seq` at `at`. Ignored when a later scan already recorded
    /// one (rule 4) or the installation was not discovered. Returns whether it was applied.
    pub fn attempt(
        &mut self,
        path: &str,
        group: Group,
        seq: u64,
        at: Timestamp,
        outcome: Outcome,
    ) -> bool {
        let key = (path.to_string(), group);
        let Some(r) = self.records.get_mut(&key) else {
            return false;
        };
        if r.scan_seq > seq {
            return false;
        }
        r.scan_seq = seq;
        r.last_attempt = Some(at);
        match outcome {
            Outcome::Failed { cause, detail } => {
                r.state = State::Unverified;
                r.failures = r.failures.saturating_add(1);
                r.cause = Some(cause);
                r.detail = Some(detail);
            }
            o => {
                r.state = match o {
                    Outcome::Verified => State::Verified,
                    Outcome::Modified => State::Modified,
                    _ => State::NotPlatform,
                };
                r.failures = 0;
                r.cause = None;
                r.detail = None;
            }
        }
        self.changed.insert(key, true);
        true
    }

    /// Forgets installations beneath `roots` that a complete discovery no longer found.
    pub fn prune(&mut self, roots: &[PathBuf], found: &std::collections::HashSet<String>) {
        let gone: Vec<(String, Group)> = self
            .records
            .keys()
            .filter(|(p, _)| {
                !found.contains(p) && roots.iter().any(|r| Path::new(p).starts_with(r))
            })
            .cloned()
            .collect();
        for k in gone {
            self.records.remove(&k);
            self.changed.insert(k, false);
        }
    }

    /// The rows to write and the keys to delete since the last call.
    pub fn take_changes(&mut self) -> (Vec<CoverageRow>, Vec<(String, String)>) {
        let mut put = Vec::new();
        let mut gone = Vec::new();
        for ((path, group), live) in std::mem::take(&mut self.changed) {
            match (live, self.records.get(&(path.clone(), group))) {
                (true, Some(r)) => put.push(CoverageRow {
                    path,
                    kind: group.as_str().to_string(),
                    platform: r.platform.as_str().to_string(),
                    account: r.account.clone(),
                    state: r.state.as_str().to_string(),
                    last_attempt: r.last_attempt.map(|t| t.as_microsecond()),
                    failures: i64::from(r.failures),
                    cause: r.cause.clone(),
                    detail: r.detail.clone(),
                    scan_seq: i64::try_from(r.scan_seq).unwrap_or(i64::MAX),
                }),
                _ => gone.push((path, group.as_str().to_string())),
            }
        }
        (put, gone)
    }

    /// The record of `path` in `group`.
    pub fn get(&self, path: &str, group: Group) -> Option<&Record> {
        self.records.get(&(path.to_string(), group))
    }

    /// Counts of `group`; `None` without records (rule 5).
    pub fn counts(&self, group: Group) -> Option<GroupCounts> {
        let mut c = GroupCounts::default();
        let mut any = false;
        for ((_, g), r) in &self.records {
            if *g != group {
                continue;
            }
            any = true;
            match r.state {
                State::Unknown => c.unknown += 1,
                State::Verified => c.verified += 1,
                State::Modified => c.modified += 1,
                State::Unverified => c.unverified += 1,
                State::NotPlatform => {
                    c.not_platform += 1;
                    *c.not_platform_by.entry(r.platform.as_str()).or_default() += 1;
                }
            }
            c.last_attempt = c.last_attempt.max(r.last_attempt);
        }
        any.then_some(c)
    }

    /// The `cms_verification` value.
    pub fn view(&self) -> Value {
        if let Some(e) = &self.error {
            return json!({ "error": e });
        }
        let mut out = Map::new();
        for g in Group::ALL {
            if let Some(c) = self.counts(g) {
                let mut m = json!({
                    "verified": c.verified,
                    "modified": c.modified,
                    "unverified": c.unverified,
                    "unknown": c.unknown,
                    "not_platform": c.not_platform,
                });
                if c.not_platform > 0 {
                    m["not_platform_reason"] = Value::String(g.not_platform_reason().into());
                    m["not_platform_platforms"] = json!(c.not_platform_by);
                }
                if let Some(t) = c.last_attempt {
                    m["last_attempt"] = Value::String(crate::timefmt::rfc3339(t));
                }
                out.insert(g.as_str().to_string(), m);
            }
        }
        Value::Object(out)
    }

    /// The warnings of repeated failures in `group` (rules 6 and 7). `scope`: an account
    /// scan's web roots (per-installation warnings beneath them only); `None`: a host scan,
    /// whose per-cause groups above [`PER_CAUSE_LIMIT`] collapse.
    pub fn unverified_findings(
        &self,
        group: Group,
        scope: Option<&[PathBuf]>,
        now: Timestamp,
    ) -> Vec<Finding> {
        let check = group.unverified_check();
        let mut by_cause: BTreeMap<&str, Vec<(&str, &Record)>> = BTreeMap::new();
        for ((path, g), r) in &self.records {
            if *g != group || r.state != State::Unverified || r.failures < REPEATED_FAILURES {
                continue;
            }
            if let Some(roots) = scope {
                if !roots.iter().any(|root| Path::new(path).starts_with(root)) {
                    continue;
                }
            }
            by_cause
                .entry(r.cause.as_deref().unwrap_or("unknown"))
                .or_default()
                .push((path, r));
        }
        let mut out = Vec::new();
        for (cause, list) in by_cause {
            if scope.is_none() && list.len() > PER_CAUSE_LIMIT {
                out.push(collapsed(check, group, cause, &list, now));
                continue;
            }
            for (path, r) in list {
                let mut f = Finding::new(
                    check,
                    Severity::Warning,
                    format!(
                        "{} {} could not complete ({cause}): {path}",
                        r.platform.label(),
                        group.what()
                    ),
                    now,
                )
                .with_details(format!(
                    "{} consecutive failed attempts; last: {}",
                    r.failures,
                    r.detail.as_deref().unwrap_or("")
                ))
                .with_path(path.to_string());
                if let Some(a) = &r.account {
                    f = f.with_account(a.clone());
                }
                out.push(f);
            }
        }
        out
    }
}

/// One finding for every installation `cause` stopped (rule 7): cause, total and a sample
/// of failure details; no path; the account only when all share it.
fn collapsed(
    check: &'static str,
    group: Group,
    cause: &str,
    list: &[(&str, &Record)],
    now: Timestamp,
) -> Finding {
    let mut sample: Vec<&str> = list
        .iter()
        .filter_map(|(_, r)| r.detail.as_deref())
        .collect();
    sample.sort_unstable();
    sample.dedup();
    sample.truncate(SAMPLE);
    let first = list.first().and_then(|(_, r)| r.account.clone());
    let shared = first.filter(|a| list.iter().all(|(_, r)| r.account.as_deref() == Some(a)));
    let mut f = Finding::new(
        check,
        Severity::Warning,
        format!(
            "{} stopped at more than {PER_CAUSE_LIMIT} installations by one cause: {cause}",
            group.what()
        ),
        now,
    )
    .with_details(format!(
        "{} installations failed repeatedly ({cause}); sample: {}",
        list.len(),
        sample.join("; ")
    ));
    if let Some(a) = shared {
        f = f.with_account(a);
    }
    f
}

#[cfg(test)]
#[path = "coverage_tests.rs"]
mod tests;
