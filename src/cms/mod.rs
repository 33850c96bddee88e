//! Content-management-system verification: WordPress core checksums, the plugin and theme
//! inventory against a vulnerability list, and the `cms_verification` coverage, run as a
//! deep-scan task ([`CmsTask`]) in every deep and full scan (`svc check`, scan jobs) and,
//! over one account's web roots, in account scans.
//!
//! - [`discover`]: installations beneath the web roots (WordPress; Joomla and Drupal are
//!   reported as installations, `not_platform` for both kinds: no official per-file
//!   checksum source exists for them).
//! - [`checksums`]: the checksum source and its cache in the store; [`core`]: the
//!   comparison; [`plugins`] and [`vulns`]: the inventory and the list.
//! - [`coverage`]: the per-installation records and rules 1-8.
//!
//! Rows: `checks.cms_core` (5 workers per scan, 2-minute budget per installation) and
//! `checks.plugin_inventory` (5 workers, 4-minute budget); an installation over its budget
//! is one loss; a refused request (an HTTP error of the checksum source) completes its work
//! (rule 8) and counts the installation unverified.

pub mod checksums;
pub mod core;
pub mod coverage;
pub mod discover;
pub mod plugins;
pub mod version;
pub mod vulns;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use self::checksums::Source;
use self::coverage::{Coverage, Group, Outcome};
use self::discover::{Installation, Platform};
use crate::checks::jobs::{AccountScope, ScanTask};
use crate::checks::CheckContext;
use crate::clock::SharedClock;
use crate::findings::{Finding, Severity};
use crate::queue::{LagBasis, Phase, PhaseBudgets, QueueHealth, Registry, RowConfig, RowHandle};
use crate::store::Store;

/// Core files differ from the official ones.
pub const CORE_MODIFIED: &str = "cms_core_modified";
/// A plugin or theme version older than a listed fix.
pub const PLUGIN_VULNERABLE: &str = "cms_plugin_vulnerable";
pub use coverage::{CORE_UNVERIFIED, PLUGINS_UNVERIFIED};

/// The checks the task answers.
pub static CHECKS: [&str; 4] = [
    CORE_MODIFIED,
    CORE_UNVERIFIED,
    PLUGIN_VULNERABLE,
    PLUGINS_UNVERIFIED,
];

/// Row names (api-core.md).
pub const CORE_ROW: &str = "checks.cms_core";
pub const PLUGIN_ROW: &str = "checks.plugin_inventory";
/// Workers per scan of each row.
pub const WORKERS: usize = 5;
/// Budget of one installation's core verification.
pub const CORE_BUDGET: Duration = Duration::from_secs(120);
/// Budget of one installation's inventory.
pub const PLUGIN_BUDGET: Duration = Duration::from_secs(240);
/// Files a `cms_core_modified` message names at most (the details count the rest).
pub const NAMED_FILES: usize = 10;

/// The live settings.
#[derive(Clone, Debug)]
pub struct Settings {
    pub checksums_url: String,
    pub vulnerability_file: Option<PathBuf>,
    pub state_path: PathBuf,
    pub roots: crate::net::https::Roots,
    pub timeout: Duration,
}

impl Settings {
    pub fn from_config(cfg: &crate::config::Config) -> Settings {
        let roots = crate::net::https::Roots::load(cfg.reputation.ca_file.as_deref())
            .unwrap_or_else(|e| {
                log::warn!("cms: {e}; using the built-in roots");
                crate::net::https::Roots::default()
            });
        Settings {
            checksums_url: cfg.cms.checksums_url.clone(),
            vulnerability_file: cfg.cms.vulnerability_file.clone(),
            state_path: cfg.state_path.clone(),
            roots,
            timeout: Duration::from_secs(cfg.reputation.timeout_seconds.clamp(1, 60)),
        }
    }
}

/// The CMS deep-scan task (one per daemon).
pub struct CmsTask {
    settings: RwLock<Settings>,
    store: Store,
    clock: SharedClock,
    coverage: Mutex<Coverage>,
    /// The last findings per installation and check, re-sent while an installation is not
    /// attempted again (a stopped or failed attempt keeps what was known).
    last: Mutex<HashMap<(String, &'static str), Vec<Finding>>>,
    core_row: Arc<QueueHealth>,
    plugin_row: Arc<QueueHealth>,
    _rows: [RowHandle; 2],
    /// One scan at a time in this task (the scan worker runs one job; a second caller waits).
    running: Mutex<()>,
}

fn row(clock: &SharedClock, budget: Duration) -> Arc<QueueHealth> {
    let mut cfg = RowConfig::new("installations")
        .lag_basis(LagBasis::OperationProgress)
        .running_slots(WORKERS);
    cfg.capacity = None;
    cfg.phase_budgets =
        PhaseBudgets::uniform(Duration::from_secs(60)).with(Phase::Processing, budget);
    QueueHealth::new(clock.clone(), cfg)
}

/// What one installation's work gave.
struct Done {
    outcome: Option<Outcome>,
    findings: Vec<Finding>,
}

/// Runs `f` over `items` on [`WORKERS`] threads, counting waiting and running work on
/// `row`; results in item order. When no thread can be started, the caller does the work.
fn pool<T: Sync, R: Send>(items: &[T], row: &QueueHealth, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    row.add_waiting(items.len() as u64);
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<(usize, R)>> = Mutex::new(Vec::with_capacity(items.len()));
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(item) = items.get(i) else { break };
        row.sub_waiting(1);
        let r = f(item);
        out.lock().push((i, r));
    };
    std::thread::scope(|s| {
        let started = (0..WORKERS.min(items.len()))
            .filter(|_| {
                std::thread::Builder::new()
                    .name("cms-worker".into())
                    .spawn_scoped(s, work)
                    .is_ok()
            })
            .count();
        if started == 0 {
            work();
        }
    });
    let mut out = out.into_inner();
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

impl CmsTask {
    /// Loads the stored coverage and registers the two rows.
    pub fn start(
        settings: Settings,
        store: Store,
        clock: SharedClock,
        registry: &Arc<Registry>,
    ) -> Result<Arc<CmsTask>, crate::queue::RowError> {
        let core_row = row(&clock, CORE_BUDGET);
        let plugin_row = row(&clock, PLUGIN_BUDGET);
        let h1 = registry
            .register(CORE_ROW, core_row.clone())
            .map_err(crate::queue::RowError::at(CORE_ROW))?;
        let h2 = registry
            .register(PLUGIN_ROW, plugin_row.clone())
            .map_err(crate::queue::RowError::at(PLUGIN_ROW))?;
        let coverage = match store.read(crate::store::cms::coverage) {
            Ok(rows) => Coverage::from_rows(rows),
            Err(e) => {
                log::warn!("cms: installation history unreadable: {e}");
                Coverage::unreadable(format!("installation history unreadable: {e}"))
            }
        };
        Ok(Arc::new(CmsTask {
            settings: RwLock::new(settings),
            store,
            clock,
            coverage: Mutex::new(coverage),
            last: Mutex::new(HashMap::new()),
            core_row,
            plugin_row,
            _rows: [h1, h2],
            running: Mutex::new(()),
        }))
    }

    /// The `cms_verification` value of the status snapshot (memory only).
    pub fn status(&self) -> serde_json::Value {
        self.coverage.lock().view()
    }

    fn over(&self, deadline: i64) -> bool {
        self.clock.monotonic_nanos() >= deadline
    }

    fn deadline(&self, budget: Duration) -> i64 {
        self.clock
            .monotonic_nanos()
            .saturating_add(i64::try_from(budget.as_nanos()).unwrap_or(i64::MAX))
    }

    /// Verifies one installation's core.
    fn verify_core(&self, inst: &Installation, source: &Source, stop: &AtomicBool) -> Done {
        let none = |outcome| Done {
            outcome,
            findings: Vec::new(),
        };
        let failed = |cause: &str, detail: String| {
            none(Some(Outcome::Failed {
                cause: cause.to_string(),
                detail,
            }))
        };
        if inst.platform != Platform::WordPress {
            return none(Some(Outcome::NotPlatform));
        }
        let guard = self.core_row.start_running_in(Phase::Processing);
        let deadline = self.deadline(CORE_BUDGET);
        let (Some(version), Some(locale)) = (&inst.version, &inst.locale) else {
            guard.finish();
            return failed(
                "version_unreadable",
                "wp-includes/version.php names no valid version".into(),
            );
        };
        let sums = match source.get(version, locale, self.clock.now().as_microsecond()) {
            Ok(s) => s,
            Err(e) => {
                // A refusal completed the work (rule 8): not a loss.
                guard.finish();
                return failed(e.cause(), format!("{version}/{locale}: {e}"));
            }
        };
        let dir = match crate::sys::dir::Dir::walk_trusted(&inst.path) {
            Ok(d) => d,
            Err(e) => {
                guard.finish();
                return failed(
                    "core_unreadable",
                    crate::text::for_log(&e.to_string(), 200).to_string(),
                );
            }
        };
        let report = core::compare(&dir, &sums, &|| {
            stop.load(Ordering::Relaxed) || self.over(deadline)
        });
        if report.stopped {
            if stop.load(Ordering::Relaxed) {
                guard.cancel();
                return none(None);
            }
            guard.lose();
            return failed(
                "budget_exceeded",
                format!(
                    "{version}: stopped after {} files ({}-minute budget)",
                    report.checked,
                    CORE_BUDGET.as_secs() / 60
                ),
            );
        }
        guard.finish();
        if report.differs() {
            let shown = crate::hostfs::display_path(&inst.path);
            let mut files: Vec<&str> = report
                .modified
                .iter()
                .chain(&report.missing)
                .chain(&report.unexpected)
                .map(String::as_str)
                .collect();
            files.sort_unstable();
            let total = files.len();
            let mut named = files
                .iter()
                .take(NAMED_FILES)
                .map(|f| crate::hostfs::sanitize(f, 200))
                .collect::<Vec<_>>()
                .join(", ");
            if total > NAMED_FILES {
                named.push_str(&format!(" and {} more", total - NAMED_FILES));
            }
            let list = |v: &[String]| {
                let mut s = v
                    .iter()
                    .take(50)
                    .map(|f| crate::hostfs::sanitize(f, 200))
                    .collect::<Vec<_>>()
                    .join(", ");
                if v.len() > 50 {
                    s.push_str(&format!(" and {} more", v.len() - 50));
                }
                s
            };
            let f = Finding::new(
                CORE_MODIFIED,
                Severity::High,
                format!("WordPress core files differ from {version} at {shown}: {named}"),
                self.clock.now(),
            )
            .with_details(format!(
                "{} modified: {}; {} missing: {}; {} unexpected PHP in core directories: {}; {} files compared (locale {locale})",
                report.modified.len(),
                list(&report.modified),
                report.missing.len(),
                list(&report.missing),
                report.unexpected.len(),
                list(&report.unexpected),
                report.checked,
            ))
            .with_path(shown);
            return Done {
                outcome: Some(Outcome::Modified),
                findings: vec![f],
            };
        }
        if report.unreadable > 0 {
            return failed(
                "core_unreadable",
                format!(
                    "{version}: {} core files could not be read",
                    report.unreadable
                ),
            );
        }
        none(Some(Outcome::Verified))
    }

    /// Inventories one installation's plugins and themes and matches them with `list`.
    fn inventory(
        &self,
        inst: &Installation,
        list: Option<&vulns::VulnList>,
        stop: &AtomicBool,
    ) -> Done {
        if inst.platform != Platform::WordPress {
            return Done {
                outcome: Some(Outcome::NotPlatform),
                findings: Vec::new(),
            };
        }
        let guard = self.plugin_row.start_running_in(Phase::Processing);
        let deadline = self.deadline(PLUGIN_BUDGET);
        let inv =
            crate::sys::dir::Dir::walk_trusted(&inst.path).and_then(|d| plugins::inventory(&d));
        if stop.load(Ordering::Relaxed) {
            guard.cancel();
            return Done {
                outcome: None,
                findings: Vec::new(),
            };
        }
        if self.over(deadline) {
            guard.lose();
            return Done {
                outcome: Some(Outcome::Failed {
                    cause: "budget_exceeded".into(),
                    detail: format!(
                        "inventory over its {}-minute budget",
                        PLUGIN_BUDGET.as_secs() / 60
                    ),
                }),
                findings: Vec::new(),
            };
        }
        guard.finish();
        let inv = match inv {
            Ok(i) => i,
            Err(e) => {
                return Done {
                    outcome: Some(Outcome::Failed {
                        cause: "content_unreadable".into(),
                        detail: crate::text::for_log(&e.to_string(), 200).to_string(),
                    }),
                    findings: Vec::new(),
                }
            }
        };
        let shown = crate::hostfs::display_path(&inst.path);
        let mut findings = Vec::new();
        let Some(list) = list else {
            return Done {
                outcome: Some(Outcome::Verified),
                findings,
            };
        };
        for item in &inv.items {
            let hits = vulns::matches(list, item);
            let Some(top) = hits.iter().max_by(|a, b| {
                version::compare(&a.fixed_in, &b.fixed_in).unwrap_or(std::cmp::Ordering::Equal)
            }) else {
                continue;
            };
            let v = item.version.as_deref().unwrap_or("");
            let titles: Vec<String> = hits
                .iter()
                .map(|h| format!("{} (fixed in {})", h.title, h.fixed_in))
                .collect();
            findings.push(
                Finding::new(
                    PLUGIN_VULNERABLE,
                    Severity::High,
                    format!(
                        "Vulnerable WordPress {} {} {v} (fixed in {}) at {shown}",
                        item.kind.as_str(),
                        item.slug,
                        top.fixed_in
                    ),
                    self.clock.now(),
                )
                .with_details(format!("{}: {}", item.name, titles.join("; ")))
                .with_path(shown.clone()),
            );
        }
        Done {
            outcome: Some(Outcome::Verified),
            findings,
        }
    }

    /// One run over the web roots of `ctx`; `scope` for an account scan.
    fn run_over(
        &self,
        ctx: &CheckContext,
        scope: Option<&AccountScope>,
        stop: &AtomicBool,
    ) -> Vec<(&'static str, Vec<Finding>)> {
        let _one = self.running.lock();
        let settings = self.settings.read().clone();
        let roots = ctx.glob_all(&ctx.web_roots);
        let found = discover::discover(&roots);
        let mut owners = crate::checks::walk::OwnerCache::default();
        let accounts: Vec<Option<String>> = found
            .installations
            .iter()
            .map(|i| owners.name(i.uid).or_else(|| Some(i.uid.to_string())))
            .collect();
        let seq = {
            let mut cov = self.coverage.lock();
            let seq = cov.begin_scan();
            for (i, acc) in found.installations.iter().zip(&accounts) {
                let p = crate::hostfs::display_path(&i.path);
                for g in Group::ALL {
                    cov.discovered(&p, g, i.platform, acc.clone());
                }
            }
            seq
        };
        let source = Source::new(
            settings.checksums_url.clone(),
            settings.roots.clone(),
            settings.timeout,
            self.store.clone(),
        );
        let core = pool(&found.installations, &self.core_row, |i| {
            self.verify_core(i, &source, stop)
        });
        let list = match vulns::load(settings.vulnerability_file.as_deref(), &settings.state_path) {
            Ok(l) => Some(l),
            Err(e) => {
                log::warn!("cms: vulnerability list unusable: {e}");
                None
            }
        };
        let inventories = pool(&found.installations, &self.plugin_row, |i| {
            self.inventory(i, list.as_ref(), stop)
        });
        if stop.load(Ordering::Relaxed) {
            // Abandoned: nothing completes, findings stay as they were.
            self.persist();
            return Vec::new();
        }
        let now = self.clock.now();
        let mut modified = Vec::new();
        let mut vulnerable = Vec::new();
        {
            let mut cov = self.coverage.lock();
            let mut last = self.last.lock();
            for ((inst, c), p) in found.installations.iter().zip(core).zip(inventories) {
                let path = crate::hostfs::display_path(&inst.path);
                for (group, check, done, out) in [
                    (Group::Core, CORE_MODIFIED, c, &mut modified),
                    (Group::Plugins, PLUGIN_VULNERABLE, p, &mut vulnerable),
                ] {
                    let key = (path.clone(), check);
                    let keep_last = match done.outcome {
                        Some(
                            o @ (Outcome::Verified | Outcome::Modified | Outcome::NotPlatform),
                        ) => {
                            cov.attempt(&path, group, seq, now, o);
                            false
                        }
                        Some(o) => {
                            cov.attempt(&path, group, seq, now, o);
                            true
                        }
                        None => true,
                    };
                    // The vulnerable list could not be read: keep what was known.
                    let keep_last = keep_last || (group == Group::Plugins && list.is_none());
                    if keep_last {
                        out.extend(last.get(&key).cloned().unwrap_or_default());
                    } else {
                        last.insert(key, done.findings.clone());
                        out.extend(done.findings);
                    }
                }
            }
            if scope.is_none() && !found.truncated && found.unreadable == 0 {
                let paths: HashSet<String> = found
                    .installations
                    .iter()
                    .map(|i| crate::hostfs::display_path(&i.path))
                    .collect();
                let shown_roots: Vec<PathBuf> = roots
                    .iter()
                    .map(|r| PathBuf::from(crate::hostfs::display_path(r)))
                    .collect();
                cov.prune(&shown_roots, &paths);
                last.retain(|(p, _), _| paths.contains(p));
            }
        }
        self.persist();
        let cov = self.coverage.lock();
        let scoped_roots: Option<Vec<PathBuf>> = scope.map(|s| {
            s.web_roots
                .iter()
                .map(|r| PathBuf::from(crate::hostfs::display_path(r)))
                .collect()
        });
        vec![
            (CORE_MODIFIED, modified),
            (
                CORE_UNVERIFIED,
                cov.unverified_findings(Group::Core, scoped_roots.as_deref(), now),
            ),
            (PLUGIN_VULNERABLE, vulnerable),
            (
                PLUGINS_UNVERIFIED,
                cov.unverified_findings(Group::Plugins, scoped_roots.as_deref(), now),
            ),
        ]
    }

    /// Writes the changed coverage rows. A failure is logged; memory stays right (status
    /// reads memory) and a row is written again when its installation next changes.
    fn persist(&self) {
        let (rows, gone) = self.coverage.lock().take_changes();
        if rows.is_empty() && gone.is_empty() {
            return;
        }
        if let Err(e) = self
            .store
            .write(move |c| crate::store::cms::save_coverage(c, &rows, &gone))
        {
            log::warn!("cms: coverage not stored: {e}");
        }
    }
}

impl ScanTask for CmsTask {
    fn checks(&self) -> &'static [&'static str] {
        &CHECKS
    }

    fn run(&self, ctx: &CheckContext, stop: &AtomicBool) -> Vec<(&'static str, Vec<Finding>)> {
        self.run_over(ctx, None, stop)
    }

    fn run_account(
        &self,
        ctx: &CheckContext,
        scope: &AccountScope,
        stop: &AtomicBool,
    ) -> Vec<(&'static str, Vec<Finding>)> {
        self.run_over(ctx, Some(scope), stop)
    }

    fn reconfigure(&self, cfg: &crate::config::Config) {
        *self.settings.write() = Settings::from_config(cfg);
    }
}

#[cfg(test)]
mod tests;
