//! The hardening audit: a pass/fail/unknown report over sshd, PHP, mount options and
//! directory permissions, and its failing items as optional WARNING findings.
//!
//! Items (name, and `target` when it is per file or mount):
//! - ssh: `sshd_permit_root_login` (fail on `yes`), `sshd_password_authentication` (pass
//!   only on `no`; OpenSSH default yes), `sshd_x11_forwarding` (fail on `yes`; default no),
//!   `sshd_max_auth_tries` (pass at 4 or fewer; default 6). Global values only (Match
//!   blocks ignored), first match wins, Include followed.
//! - php, per php.ini (merged with its sibling `conf.d/` or `php.d/` `*.ini`, in name order):
//!   `php_expose_php` (PHP default On), `php_allow_url_include` (default Off),
//!   `php_display_errors` (built-in default On), `php_disable_functions` (fail when empty).
//! - mounts, per audited mount point, from the mount that holds it:
//!   `mount_nodev`, `mount_nosuid`, `mount_noexec`.
//! - permissions: `sticky_bit` (shared temp dirs world-writable without sticky) and
//!   `system_dir_not_world_writable`. Paths that do not exist produce no item.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::Serialize;

use super::context::{count, CheckContext};
use super::mountinfo::{covering_mount, parse_mountinfo};
use super::phpini::{ini_bool, PhpIni};
use super::sshd::{load_sshd_config, SshdConfig, SshdLoadError};
use crate::findings::{Finding, Severity};
use crate::hostfs::display_path;

/// Name of the check that turns failing items into findings.
pub const CHECK: &str = "hardening_audit";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HardeningCategory {
    Ssh,
    Php,
    Mounts,
    Permissions,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HardeningStatus {
    Pass,
    Fail,
    Unknown,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HardeningItem {
    pub category: HardeningCategory,
    /// snake_case; findings are `hardening_<name>`.
    pub name: String,
    /// The file, mount point or directory the item is about, when there can be several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    pub status: HardeningStatus,
    pub detail: String,
    pub recommendation: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HardeningSummary {
    pub pass: usize,
    pub fail: usize,
    pub unknown: usize,
}

/// The report; serializes to JSON with `generated_at` in RFC 3339 (6 fraction digits, UTC).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HardeningReport {
    #[serde(serialize_with = "crate::timefmt::ser")]
    pub generated_at: Timestamp,
    pub items: Vec<HardeningItem>,
    pub summary: HardeningSummary,
}

struct Items(Vec<HardeningItem>);

impl Items {
    fn add(
        &mut self,
        category: HardeningCategory,
        name: &str,
        target: Option<String>,
        status: HardeningStatus,
        detail: String,
        recommendation: &str,
    ) {
        self.0.push(HardeningItem {
            category,
            name: name.to_string(),
            target,
            status,
            detail,
            recommendation: recommendation.to_string(),
        });
    }
}

fn pass_if(ok: bool) -> HardeningStatus {
    if ok {
        HardeningStatus::Pass
    } else {
        HardeningStatus::Fail
    }
}

const SSH_ITEMS: [(&str, &str, &str); 4] = [
    (
        "sshd_permit_root_login",
        "PermitRootLogin",
        "Set PermitRootLogin prohibit-password (or no) and log in as root with keys only",
    ),
    (
        "sshd_password_authentication",
        "PasswordAuthentication",
        "Set PasswordAuthentication no and use SSH keys",
    ),
    (
        "sshd_x11_forwarding",
        "X11Forwarding",
        "Set X11Forwarding no",
    ),
    (
        "sshd_max_auth_tries",
        "MaxAuthTries",
        "Set MaxAuthTries 4 or lower",
    ),
];

fn audit_ssh(ctx: &CheckContext, items: &mut Items) {
    let cfg: Result<SshdConfig, SshdLoadError> = load_sshd_config(ctx);
    let cfg = match cfg {
        Ok(c) => c,
        Err(e) => {
            let why = match (&e, &ctx.sshd_config_path) {
                (SshdLoadError::Read(r), Some(p)) => format!("{} {r}", display_path(p)),
                _ => "sshd_config not configured".to_string(),
            };
            for (name, kw, rec) in SSH_ITEMS {
                items.add(
                    HardeningCategory::Ssh,
                    name,
                    None,
                    HardeningStatus::Unknown,
                    format!("{kw}: {why}"),
                    rec,
                );
            }
            return;
        }
    };
    for (name, kw, rec) in SSH_ITEMS {
        let (status, eff) = match name {
            "sshd_permit_root_login" => {
                let e = cfg.effective(&["permitrootlogin"], "prohibit-password");
                let s = match e.value.as_str() {
                    "yes" => HardeningStatus::Fail,
                    "no" | "prohibit-password" | "without-password" | "forced-commands-only" => {
                        HardeningStatus::Pass
                    }
                    _ => HardeningStatus::Unknown,
                };
                (s, e)
            }
            "sshd_password_authentication" => {
                let e = cfg.effective(&["passwordauthentication"], "yes");
                (pass_if(e.value == "no"), e)
            }
            "sshd_x11_forwarding" => {
                let e = cfg.effective(&["x11forwarding"], "no");
                (pass_if(e.value != "yes"), e)
            }
            _ => {
                let e = cfg.effective(&["maxauthtries"], "6");
                let s = match e.value.parse::<u32>() {
                    Ok(n) => pass_if(n <= 4),
                    Err(_) => HardeningStatus::Unknown,
                };
                (s, e)
            }
        };
        items.add(
            HardeningCategory::Ssh,
            name,
            None,
            status,
            format!("{kw} {}", eff.describe()),
            rec,
        );
    }
}

/// php.ini plus its scan directory, merged.
fn load_php(ctx: &CheckContext, ini: &Path) -> Option<PhpIni> {
    let bytes = ctx.read_config(ini, true).ok()?;
    let mut php = PhpIni::default();
    php.merge_text(&String::from_utf8_lossy(&bytes), ini);
    let dir = ini.parent().unwrap_or(Path::new("/"));
    for scan in ["conf.d", "php.d"] {
        for extra in ctx.glob(&dir.join(scan).join("*.ini")) {
            if let Ok(b) = ctx.read_config(&extra, true) {
                php.merge_text(&String::from_utf8_lossy(&b), &extra);
            }
        }
    }
    count(&ctx.counters().unparsed_lines, php.bad_lines as u64);
    Some(php)
}

const DANGEROUS_FUNCTIONS: &[&str] = &[
    "exec",
    "passthru",
    "shell_exec",
    "system",
    "proc_open",
    "popen",
];

fn audit_php_file(ctx: &CheckContext, ini: &Path, items: &mut Items) {
    let Some(php) = load_php(ctx, ini) else {
        return;
    };
    let target = Some(display_path(ini));
    let shown = |key: &str, default: &str| match php.get(key) {
        Some(v) => format!("{key} = {} ({}:{})", v.value, display_path(&v.file), v.line),
        None => format!("{key} not set (PHP default {default})"),
    };
    let flag = |key: &str, default_on: bool| match php.get(key) {
        Some(v) => ini_bool(&v.value),
        None => Some(default_on),
    };
    let off_status = |v: Option<bool>| match v {
        Some(on) => pass_if(!on),
        None => HardeningStatus::Unknown,
    };
    let php_cat = HardeningCategory::Php;
    items.add(
        php_cat,
        "php_expose_php",
        target.clone(),
        off_status(flag("expose_php", true)),
        shown("expose_php", "On"),
        "Set expose_php = Off",
    );
    items.add(
        php_cat,
        "php_allow_url_include",
        target.clone(),
        off_status(flag("allow_url_include", false)),
        shown("allow_url_include", "Off"),
        "Set allow_url_include = Off",
    );
    items.add(
        php_cat,
        "php_display_errors",
        target.clone(),
        off_status(flag("display_errors", true)),
        shown("display_errors", "On"),
        "Set display_errors = Off and log errors instead",
    );
    let disabled: Vec<String> = php
        .get("disable_functions")
        .map(|v| {
            v.value
                .split(',')
                .map(|f| f.trim().to_ascii_lowercase())
                .filter(|f| !f.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let still: Vec<&str> = DANGEROUS_FUNCTIONS
        .iter()
        .copied()
        .filter(|f| !disabled.iter().any(|d| d == f))
        .collect();
    let mut detail = shown("disable_functions", "empty");
    if !still.is_empty() {
        detail.push_str(&format!("; still enabled: {}", still.join(", ")));
    }
    items.add(
        php_cat,
        "php_disable_functions",
        target,
        pass_if(!disabled.is_empty()),
        detail,
        "List at least exec, passthru, shell_exec, system, proc_open, popen in disable_functions",
    );
}

const MOUNT_OPTIONS: [(&str, &str); 3] = [
    ("nodev", "mount_nodev"),
    ("nosuid", "mount_nosuid"),
    ("noexec", "mount_noexec"),
];

fn audit_mounts(ctx: &CheckContext, items: &mut Items) {
    if ctx.audited_mount_points.is_empty() {
        return;
    }
    let mounts = ctx
        .mountinfo_path
        .as_ref()
        .ok_or_else(|| "mountinfo not configured".to_string())
        .and_then(|p| {
            ctx.read_config(p, true)
                .map_err(|e| format!("{}: {e}", display_path(p)))
        })
        .map(|b| {
            let (m, bad) = parse_mountinfo(&b);
            count(&ctx.counters().unparsed_lines, bad as u64);
            m
        });
    for point in &ctx.audited_mount_points {
        for (opt, name) in MOUNT_OPTIONS {
            let rec = format!("Mount {point} with {opt} (separate tmpfs or bind mount)");
            let target = Some(point.clone());
            let (status, detail) = match &mounts {
                Err(why) => (
                    HardeningStatus::Unknown,
                    format!("mount table unreadable: {why}"),
                ),
                Ok(m) => match covering_mount(m, point) {
                    None => (HardeningStatus::Unknown, format!("no mount holds {point}")),
                    Some(e) => {
                        let on = if e.mount_point == *point {
                            format!("{point} is mounted ({})", e.fstype)
                        } else {
                            format!(
                                "{point} is not a separate mount; it is on {} ({})",
                                e.mount_point, e.fstype
                            )
                        };
                        (
                            pass_if(e.has_option(opt)),
                            format!("{on} with options {}", e.options.join(",")),
                        )
                    }
                },
            };
            items.add(
                HardeningCategory::Mounts,
                name,
                target,
                status,
                detail,
                &rec,
            );
        }
    }
}

fn audit_dirs(ctx: &CheckContext, items: &mut Items) {
    let lists: [(&[PathBuf], bool); 2] = [(&ctx.sticky_dirs, true), (&ctx.system_dirs, false)];
    for (dirs, sticky_ok) in lists {
        for dir in dirs {
            let shown = display_path(dir);
            let (name, rec) = if sticky_ok {
                ("sticky_bit", format!("chmod 1777 {shown}"))
            } else {
                (
                    "system_dir_not_world_writable",
                    format!("chmod o-w {shown}"),
                )
            };
            let (status, detail) = match fs::metadata(dir) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    count(&ctx.counters().read_errors, 1);
                    (HardeningStatus::Unknown, format!("cannot stat: {e}"))
                }
                Ok(m) => {
                    let mode = m.permissions().mode();
                    let ww = mode & 0o002 != 0;
                    let sticky = mode & 0o1000 != 0;
                    let ok = !ww || (sticky_ok && sticky);
                    let what = match (ww, sticky) {
                        (false, _) => "not world-writable",
                        (true, true) => "world-writable with sticky bit",
                        (true, false) => "world-writable without sticky bit",
                    };
                    (pass_if(ok), format!("mode {:04o}: {what}", mode & 0o7777))
                }
            };
            items.add(
                HardeningCategory::Permissions,
                name,
                Some(shown),
                status,
                detail,
                &rec,
            );
        }
    }
}

/// Runs the whole audit. Never fails: what cannot be read is an `unknown` item (or, for
/// absent php.ini files and directories, no item).
pub fn hardening_audit(ctx: &CheckContext) -> HardeningReport {
    let mut items = Items(Vec::new());
    audit_ssh(ctx, &mut items);
    for ini in ctx.glob_all(&ctx.php_ini_paths) {
        audit_php_file(ctx, &ini, &mut items);
    }
    audit_mounts(ctx, &mut items);
    audit_dirs(ctx, &mut items);
    let mut summary = HardeningSummary::default();
    for i in &items.0 {
        match i.status {
            HardeningStatus::Pass => summary.pass += 1,
            HardeningStatus::Fail => summary.fail += 1,
            HardeningStatus::Unknown => summary.unknown += 1,
        }
    }
    HardeningReport {
        generated_at: ctx.clock.now(),
        items: items.0,
        summary,
    }
}

/// One WARNING finding `hardening_<name>` per failing item, at the report's instant. The
/// message names the item and its target, so it is stable while the item keeps failing.
pub fn hardening_findings(report: &HardeningReport) -> Vec<Finding> {
    report
        .items
        .iter()
        .filter(|i| i.status == HardeningStatus::Fail)
        .map(|i| {
            let message = match &i.target {
                Some(t) => format!("hardening check {} failed for {t}", i.name),
                None => format!("hardening check {} failed", i.name),
            };
            let mut f = Finding::new(
                format!("hardening_{}", i.name),
                Severity::Warning,
                message,
                report.generated_at,
            )
            .with_details(format!(
                "{}. Recommendation: {}",
                i.detail, i.recommendation
            ));
            if let Some(t) = i.target.as_ref().filter(|t| t.starts_with('/')) {
                f = f.with_path(t.clone());
            }
            f
        })
        .collect()
}

/// [`hardening_audit`] then [`hardening_findings`] (the `HARDENING_CHECK` entry).
pub fn hardening_check(ctx: &CheckContext) -> Vec<Finding> {
    hardening_findings(&hardening_audit(ctx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::{chmod, garbage, Fixture};

    fn item<'a>(r: &'a HardeningReport, name: &str, target_end: Option<&str>) -> &'a HardeningItem {
        r.items
            .iter()
            .find(|i| {
                i.name == name
                    && target_end
                        .is_none_or(|t| i.target.as_deref().is_some_and(|x| x.ends_with(t)))
            })
            .unwrap_or_else(|| panic!("no item {name} {target_end:?} in {:#?}", r.items))
    }

    fn hardened_fixture() -> Fixture {
        let fx = Fixture::new();
        fx.write(
            "etc/ssh/sshd_config",
            b"Include /etc/ssh/sshd_config.d/*.conf\nPermitRootLogin no\nPasswordAuthentication no\nMaxAuthTries 3\nMatch User x\n X11Forwarding yes\n",
        );
        fx.write("etc/ssh/sshd_config.d/a.conf", b"X11Forwarding no\n");
        fx.write(
            "etc/php/8.2/fpm/php.ini",
            b"[PHP]\nexpose_php = On\nallow_url_include = Off\ndisplay_errors = Off\ndisable_functions =\n",
        );
        fx.write(
            "etc/php/8.2/fpm/conf.d/99-hardening.ini",
            b"expose_php = Off\ndisable_functions = exec,passthru,shell_exec,system,proc_open,popen\n",
        );
        fx.write(
            "proc/self/mountinfo",
            b"22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n\
              25 22 0:21 / /dev/shm rw,nosuid,nodev,noexec - tmpfs tmpfs rw\n\
              30 22 0:30 / /tmp rw,nosuid,nodev,noexec - tmpfs tmpfs rw\n",
        );
        fx.mkdir("tmp", 0o1777);
        fx.mkdir("var/tmp", 0o1777);
        fx.mkdir("etc", 0o755);
        fx.mkdir("usr/bin", 0o755);
        fx
    }

    #[test]
    fn hardened_host_passes_everything() {
        let fx = hardened_fixture();
        let r = hardening_audit(&fx.ctx());
        let bad: Vec<_> = r
            .items
            .iter()
            .filter(|i| i.status != HardeningStatus::Pass)
            .collect();
        assert!(bad.is_empty(), "{bad:#?}");
        // 4 ssh + 4 php + 6 mount + tmp, var/tmp, etc, usr, usr/bin, var.
        assert_eq!(r.summary.pass, r.items.len());
        assert_eq!(r.items.len(), 4 + 4 + 6 + 6);
        assert!(item(&r, "php_expose_php", None)
            .detail
            .contains("99-hardening.ini:1"));
        assert!(hardening_findings(&r).is_empty());
    }

    #[test]
    fn weak_host_fails_and_produces_findings() {
        let fx = hardened_fixture();
        fx.write(
            "etc/ssh/sshd_config",
            b"PermitRootLogin yes\nX11Forwarding yes\n",
        );
        fx.write(
            "etc/php/8.2/fpm/conf.d/99-hardening.ini",
            b"allow_url_include = On\n",
        );
        fx.write("etc/php.ini", b"display_errors = stderr\n");
        fx.write(
            "proc/self/mountinfo",
            b"22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n25 22 0:21 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw\n",
        );
        chmod(&fx.path("tmp"), 0o777);
        chmod(&fx.path("etc"), 0o1777);
        let ctx = fx.ctx();
        let r = hardening_audit(&ctx);
        let st = |n: &str, t: Option<&str>| item(&r, n, t).status;
        use HardeningStatus::*;
        assert_eq!(st("sshd_permit_root_login", None), Fail);
        assert_eq!(st("sshd_password_authentication", None), Fail);
        assert!(item(&r, "sshd_password_authentication", None)
            .detail
            .contains("(default)"));
        assert_eq!(st("sshd_x11_forwarding", None), Fail);
        assert_eq!(st("sshd_max_auth_tries", None), Fail);
        assert_eq!(st("php_expose_php", Some("fpm/php.ini")), Fail);
        assert_eq!(st("php_allow_url_include", Some("fpm/php.ini")), Fail);
        assert_eq!(st("php_disable_functions", Some("fpm/php.ini")), Fail);
        assert_eq!(st("php_display_errors", Some("/etc/php.ini")), Fail);
        assert_eq!(st("mount_noexec", Some("/tmp")), Fail);
        assert!(item(&r, "mount_noexec", Some("/tmp"))
            .detail
            .contains("not a separate mount"));
        assert_eq!(st("mount_noexec", Some("/dev/shm")), Fail);
        assert_eq!(st("mount_nosuid", Some("/dev/shm")), Pass);
        assert_eq!(st("sticky_bit", Some("/tmp")), Fail);
        assert_eq!(st("sticky_bit", Some("/var/tmp")), Pass);
        assert_eq!(st("system_dir_not_world_writable", Some("/etc")), Fail);

        let f = hardening_findings(&r);
        assert_eq!(f.len(), r.summary.fail);
        assert!(f
            .iter()
            .all(|f| f.severity == Severity::Warning && f.check.starts_with("hardening_")));
        let tmp = f
            .iter()
            .find(|f| f.check == "hardening_mount_noexec" && f.message.ends_with("/tmp"))
            .unwrap();
        assert_eq!(tmp.message, "hardening check mount_noexec failed for /tmp");
        assert_eq!(tmp.first_seen, r.generated_at);
        assert!(tmp
            .details
            .contains("Recommendation: Mount /tmp with noexec"));
        assert_eq!(hardening_check(&ctx).len(), f.len());
    }

    #[test]
    fn unreadable_sources_are_unknown() {
        let fx = Fixture::new();
        let r = hardening_audit(&fx.ctx());
        assert_eq!(r.summary.pass + r.summary.fail, 0);
        assert_eq!(r.summary.unknown, 4 + 6);
        assert!(item(&r, "sshd_permit_root_login", None)
            .detail
            .contains("not found"));
    }

    #[test]
    fn report_serializes_with_rfc3339_time() {
        let fx = hardened_fixture();
        let r = hardening_audit(&fx.ctx());
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["generated_at"], "2026-01-01T00:00:00.000000Z");
        assert_eq!(v["items"][0]["category"], "ssh");
        assert_eq!(v["items"][0]["status"], "pass");
        assert!(v["items"][0].get("target").is_none());
        assert!(v["summary"]["pass"].as_u64().unwrap() > 0);
    }

    #[test]
    fn garbage_inputs_never_panic() {
        let fx = hardened_fixture();
        fx.write("etc/ssh/sshd_config", &garbage(1, 4096));
        fx.write("etc/php/8.2/fpm/php.ini", &garbage(2, 4096));
        fx.write("proc/self/mountinfo", &garbage(3, 4096));
        let r = hardening_audit(&fx.ctx());
        assert!(!r.items.is_empty());
    }
}
