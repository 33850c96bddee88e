//! Engine detection and rule staleness, read from a host root (`/` in production, a fixture
//! tree in tests), for the `waf_status` check.
//!
//! Guarantees:
//! - A web server is considered present when its configuration directory exists; for each
//!   present server the engine is "active" when its module is installed and loaded
//!   (Apache: `mods-enabled/security2.load` or a `LoadModule security2_module` line in the
//!   module configuration; nginx: `ngx_http_modsecurity_module` loaded in `nginx.conf` or
//!   `modules-enabled/`; LiteSpeed: a `mod_security` module in its server configuration).
//! - A present server without an active engine yields a WARNING `waf_status` finding
//!   (message stable per server) whose details carry the install hint for the distribution
//!   family (`apt-get`, `dnf`) or, on the hosting panel, the instruction to use its security
//!   centre.
//! - Staleness: on the panel, each vendor tree an active configuration file includes is
//!   judged by its newest artifact (retired and unloaded trees are ignored); when the panel
//!   cannot provide that mapping (no readable active configuration), and on other
//!   platforms, each flat rule tree of a distribution package and each vendor tree is
//!   judged by its oldest artifact. Older than the threshold (`waf.rules_stale_days`,
//!   default 90) is a WARNING.
//! - Rules changed while no `waf.reload_command` is configured are a WARNING
//!   ([`NO_RELOAD_COMMAND`]) until the web server runs them.
//! - Reads are bounded: configuration files at most [`MAX_FILE`] bytes, trees walked at
//!   most [`MAX_DEPTH`] levels and [`MAX_ARTIFACTS`] files, symlinks not followed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use crate::findings::{Finding, Severity};
use crate::hostfs::reroot;

pub const CHECK: &str = "waf_status";
pub const MAX_FILE: u64 = 1 << 20;
pub const MAX_DEPTH: usize = 4;
pub const MAX_ARTIFACTS: usize = 20_000;

static STALE_DAYS: AtomicU64 = AtomicU64::new(90);

/// The last reload failure (reason), while the last reload failed.
static RELOAD_FAILURE: parking_lot::Mutex<Option<String>> = parking_lot::Mutex::new(None);
/// Called with each new reload failure (the daemon submits the finding at once).
static FAILURE_HOOK: std::sync::OnceLock<Box<dyn Fn(Finding) + Send + Sync>> =
    std::sync::OnceLock::new();

/// Installed rules changed while no `waf.reload_command` is configured (cleared once the
/// web server runs them: a reload through the API, or a command configured and run).
static UNLOADED_NO_COMMAND: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Message of the finding of changed rules without a reload command.
pub const NO_RELOAD_COMMAND: &str =
    "WAF rules changed and no web-server reload command is configured";

/// Records whether changed rules wait for a reload that no command can do: `true` raises
/// `waf_status` (at once through the hook, then in every check) until it is `false`.
pub fn set_unloaded_without_command(on: bool) {
    let was = UNLOADED_NO_COMMAND.swap(on, Ordering::SeqCst);
    if on && !was {
        if let Some(hook) = FAILURE_HOOK.get() {
            hook(no_command_finding(jiff::Timestamp::now()));
        }
    }
}

fn no_command_finding(now: jiff::Timestamp) -> Finding {
    let mut f = Finding::new(CHECK, Severity::Warning, NO_RELOAD_COMMAND, now);
    f.details = "set waf.reload_command (or reload the web server); until then the changed rules load only at the next web-server restart".into();
    f
}

/// Message of the finding of a failed reload.
pub const RELOAD_FAILED: &str = "the web-server reload after a WAF rule change failed";

/// Records the outcome of a reload: `Some(reason)` raises `waf_status` (and the next
/// checks keep it) until a reload succeeds (`None`).
pub fn set_reload_failure(reason: Option<String>) {
    let now = jiff::Timestamp::now();
    *RELOAD_FAILURE.lock() = reason.clone();
    if let (Some(r), Some(hook)) = (reason, FAILURE_HOOK.get()) {
        hook(reload_finding(&r, now));
    }
}

/// Installs the hook of [`set_reload_failure`] (once per process).
pub fn set_failure_hook(f: Box<dyn Fn(Finding) + Send + Sync>) {
    let _ = FAILURE_HOOK.set(f);
}

fn reload_finding(reason: &str, now: jiff::Timestamp) -> Finding {
    let mut f = Finding::new(CHECK, Severity::Warning, RELOAD_FAILED, now);
    f.details = crate::text::escape_controls(reason).into_owned();
    f
}

/// Sets the staleness threshold the check uses (the daemon, from `waf.rules_stale_days`).
pub fn set_stale_days(days: u64) {
    STALE_DAYS.store(days.max(1), Ordering::Relaxed);
}

fn read(root: &Path, p: &str) -> Option<String> {
    let bytes = crate::hostfs::read_bounded(&reroot(root, Path::new(p)), MAX_FILE, false).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

fn exists(root: &Path, p: &str) -> bool {
    reroot(root, Path::new(p)).exists()
}

/// Files of a directory (not recursive), sorted.
fn files(root: &Path, dir: &str) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(reroot(root, Path::new(dir))) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .take(4096)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink()))
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

fn any_file_contains(root: &Path, dirs: &[&str], needle: &str) -> bool {
    dirs.iter().any(|d| {
        files(root, d).iter().any(|f| {
            crate::hostfs::read_bounded(f, MAX_FILE, true)
                .is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle))
        })
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Debian,
    RedHat,
    Other,
}

fn family(root: &Path) -> Family {
    if exists(root, "/etc/debian_version") {
        Family::Debian
    } else if [
        "/etc/redhat-release",
        "/etc/almalinux-release",
        "/etc/rocky-release",
        "/etc/centos-release",
        "/etc/fedora-release",
    ]
    .iter()
    .any(|p| exists(root, p))
    {
        Family::RedHat
    } else {
        Family::Other
    }
}

/// The hosting-panel platform.
pub fn panel(root: &Path) -> bool {
    exists(root, "/usr/local/cpanel")
}

/// One present web server and its engine.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ServerEngine {
    pub server: &'static str,
    pub active: bool,
    pub detail: String,
}

/// The servers present under `root` and whether ModSecurity is active on each.
pub fn engines(root: &Path) -> Vec<ServerEngine> {
    let mut out = Vec::new();
    if exists(root, "/etc/apache2") {
        let active = exists(root, "/etc/apache2/mods-enabled/security2.load")
            || any_file_contains(
                root,
                &["/etc/apache2/conf.modules.d", "/etc/apache2/conf.d"],
                "security2_module",
            );
        out.push(ServerEngine {
            server: "apache",
            active,
            detail: "/etc/apache2".into(),
        });
    } else if exists(root, "/etc/httpd") {
        let active = any_file_contains(
            root,
            &["/etc/httpd/conf.modules.d", "/etc/httpd/conf.d"],
            "security2_module",
        );
        out.push(ServerEngine {
            server: "apache",
            active,
            detail: "/etc/httpd".into(),
        });
    }
    if exists(root, "/etc/nginx") {
        let loaded = read(root, "/etc/nginx/nginx.conf")
            .is_some_and(|t| t.contains("ngx_http_modsecurity_module"))
            || any_file_contains(
                root,
                &["/etc/nginx/modules-enabled"],
                "ngx_http_modsecurity_module",
            );
        out.push(ServerEngine {
            server: "nginx",
            active: loaded,
            detail: "/etc/nginx".into(),
        });
    }
    if exists(root, "/usr/local/lsws") {
        let active = [
            "/usr/local/lsws/conf/httpd_config.conf",
            "/usr/local/lsws/conf/httpd_config.xml",
        ]
        .iter()
        .filter_map(|p| read(root, p))
        .any(|t| t.contains("mod_security"));
        out.push(ServerEngine {
            server: "litespeed",
            active,
            detail: "/usr/local/lsws".into(),
        });
    }
    out
}

/// The install hint for `server` on this host.
pub fn install_hint(root: &Path, server: &str) -> String {
    if panel(root) {
        return "on the hosting panel, enable ModSecurity in its security centre (WHM: Security Center > ModSecurity Configuration and ModSecurity Vendors)".into();
    }
    match (server, family(root)) {
        ("apache", Family::Debian) => "apt-get install libapache2-mod-security2 && a2enmod security2 && systemctl reload apache2".into(),
        ("apache", Family::RedHat) => "dnf install mod_security && systemctl reload httpd".into(),
        ("nginx", Family::Debian) => "apt-get install libnginx-mod-http-modsecurity, then set `modsecurity on;` and `modsecurity_rules_file` in the server blocks and reload nginx".into(),
        ("nginx", Family::RedHat) => "dnf install libmodsecurity, then build or install the ModSecurity-nginx connector (ngx_http_modsecurity_module) for this nginx version, load it and set `modsecurity on;`".into(),
        ("litespeed", _) => "enable mod_security in the LiteSpeed WebAdmin console (Server > Modules) and restart LiteSpeed gracefully".into(),
        ("apache", Family::Other) => "install ModSecurity 2 for Apache (mod_security2) with the distribution's package manager and load security2_module".into(),
        _ => "install libmodsecurity 3 and the ModSecurity-nginx connector with the distribution's package manager".into(),
    }
}

/// Flat rule trees of distribution packages.
const FLAT_TREES: &[&str] = &[
    "/usr/share/modsecurity-crs",
    "/etc/modsecurity/crs",
    "/usr/share/mod_modsecurity_crs",
    "/etc/httpd/modsecurity.d/activated_rules",
];

/// Vendor trees of the panel, and the configuration files that name the loaded ones.
const VENDOR_DIRS: &[&str] = &[
    "/etc/apache2/conf.d/modsec_vendor_configs",
    "/usr/local/apache/conf/modsec_vendor_configs",
];
const PANEL_CONFS: &[&str] = &[
    "/etc/apache2/conf.d/modsec/modsec2.cpanel.conf",
    "/usr/local/apache/conf/modsec2.cpanel.conf",
];

/// (oldest, newest) modification times of the rule artifacts (`*.conf`, `*.data`) of a
/// tree, walked without following symlinks.
fn artifact_times(dir: &Path) -> Option<(SystemTime, SystemTime)> {
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    let mut seen = 0usize;
    let mut range: Option<(SystemTime, SystemTime)> = None;
    while let Some((d, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            if seen >= MAX_ARTIFACTS {
                return range;
            }
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() && depth < MAX_DEPTH {
                stack.push((e.path(), depth + 1));
            } else if t.is_file() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if !(name.ends_with(".conf") || name.ends_with(".data")) {
                    continue;
                }
                seen += 1;
                if let Ok(m) = e.metadata().and_then(|m| m.modified()) {
                    range = Some(match range {
                        None => (m, m),
                        Some((lo, hi)) => (lo.min(m), hi.max(m)),
                    });
                }
            }
        }
    }
    range
}

fn days_old(now: SystemTime, t: SystemTime) -> u64 {
    now.duration_since(t)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0)
}

/// Stale rule trees: (tree, age in days).
pub fn stale_trees(root: &Path, now: SystemTime, days: u64) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let panel_conf: Option<String> = PANEL_CONFS.iter().find_map(|p| read(root, p));
    if let (true, Some(conf)) = (panel(root), panel_conf) {
        // The panel's active configuration names the loaded vendor trees; each is judged by
        // its newest artifact.
        for (name, vendor, path) in vendor_trees(root) {
            if !conf.contains(&format!("modsec_vendor_configs/{vendor}/")) {
                continue;
            }
            if let Some((_, newest)) = artifact_times(&path) {
                let age = days_old(now, newest);
                if age > days {
                    out.push((name, age));
                }
            }
        }
        return out;
    }
    // Without the panel's mapping (or off the panel), every tree, vendor trees included, is
    // judged by its oldest artifact.
    let flat = FLAT_TREES
        .iter()
        .map(|t| (t.to_string(), reroot(root, Path::new(t))));
    let vendors = vendor_trees(root).into_iter().map(|(n, _, p)| (n, p));
    for (name, path) in flat.chain(vendors) {
        if let Some((oldest, _)) = artifact_times(&path) {
            let age = days_old(now, oldest);
            if age > days {
                out.push((name, age));
            }
        }
    }
    out
}

/// The vendor trees under [`VENDOR_DIRS`]: shown name, vendor directory name, real path.
fn vendor_trees(root: &Path) -> Vec<(String, String, PathBuf)> {
    let mut out = Vec::new();
    for base in VENDOR_DIRS {
        let Ok(rd) = std::fs::read_dir(reroot(root, Path::new(base))) else {
            continue;
        };
        let mut v: Vec<_> = rd
            .flatten()
            .take(256)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .collect();
        v.sort_by_key(|e| e.file_name());
        for e in v {
            let vendor = e.file_name().to_string_lossy().into_owned();
            out.push((format!("{base}/{vendor}"), vendor, e.path()));
        }
    }
    out
}

/// Most disabled scopes reported one by one (the rest are counted in one finding).
pub const MAX_SCOPES: usize = 100;

/// True when a configuration text turns the engine off (`SecRuleEngine Off` for
/// ModSecurity 2, `modsecurity off;` for the nginx connector) outside comments.
fn turns_off(text: &str) -> bool {
    text.lines().take(100_000).any(|l| {
        let l = l.trim();
        if l.starts_with('#') {
            return false;
        }
        let mut w = l.split_whitespace();
        match (w.next(), w.next()) {
            (Some(k), Some(v)) if k.eq_ignore_ascii_case("SecRuleEngine") => {
                v.trim_matches('"').eq_ignore_ascii_case("off")
            }
            (Some(k), Some(v)) if k.eq_ignore_ascii_case("modsecurity") => {
                v.trim_end_matches(';').eq_ignore_ascii_case("off")
            }
            _ => false,
        }
    })
}

/// The first `ServerName` / `server_name` of a vhost file, else its file name.
fn vhost_name(path: &Path, text: &str) -> String {
    text.lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            let k = w.next()?;
            (k.eq_ignore_ascii_case("ServerName") || k == "server_name")
                .then(|| w.next().map(|v| v.trim_end_matches(';').to_string()))
                .flatten()
        })
        .unwrap_or_else(|| {
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
}

fn dirs_of(p: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(p) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .take(100_000)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| crate::text::escape_controls(&n.to_string_lossy()).into_owned())
        .unwrap_or_default()
}

/// Regular files directly in `dir` (at most 4096).
fn files_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .take(4096)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .collect()
}

fn any_off(files: &[PathBuf]) -> bool {
    files.iter().any(|f| {
        crate::hostfs::read_bounded(f, MAX_FILE, false)
            .is_ok_and(|b| turns_off(&String::from_utf8_lossy(&b)))
    })
}

/// Domains and accounts with the engine off, by name: the panel's per-domain userdata flag,
/// per-account and per-domain includes in the plain (`std`) and TLS (`ssl`) vhost trees,
/// and plain Apache and nginx vhosts.
pub fn disabled_scopes(root: &Path) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for base in [
        "/etc/apache2/conf.d/userdata",
        "/usr/local/apache/conf/userdata",
    ] {
        for tls in ["std", "ssl"] {
            for ver in ["2_4", "2_2"] {
                let tree = reroot(root, Path::new(&format!("{base}/{tls}/{ver}")));
                for user in dirs_of(&tree) {
                    let account_files = files_in(&user);
                    if any_off(&account_files) {
                        out.push(format!("account {} ({tls})", name(&user)));
                    }
                    for domain in dirs_of(&user) {
                        let fs = files_in(&domain);
                        if any_off(&fs) {
                            out.push(format!(
                                "domain {} of account {} ({tls})",
                                name(&domain),
                                name(&user)
                            ));
                        }
                    }
                }
            }
        }
    }
    // The panel's userdata flag per domain.
    for user in dirs_of(&reroot(root, Path::new("/var/cpanel/userdata"))) {
        let Ok(rd) = std::fs::read_dir(&user) else {
            continue;
        };
        for e in rd.flatten().take(10_000) {
            if !e.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let Ok(b) = crate::hostfs::read_bounded(&e.path(), MAX_FILE, false) else {
                continue;
            };
            let off = String::from_utf8_lossy(&b).lines().any(|l| {
                let l = l.trim().replace(' ', "");
                l == "modsecurity_disabled:1" || l == "modsecurity_disabled:'1'"
            });
            if off {
                out.push(format!(
                    "domain {} of account {} (panel setting)",
                    name(&e.path()),
                    name(&user)
                ));
            }
        }
    }
    for dir in [
        "/etc/apache2/sites-enabled",
        "/etc/httpd/conf.d",
        "/etc/nginx/sites-enabled",
        "/etc/nginx/conf.d",
    ] {
        for f in files(root, dir) {
            if let Ok(b) = crate::hostfs::read_bounded(&f, MAX_FILE, true) {
                let text = String::from_utf8_lossy(&b);
                if turns_off(&text) {
                    out.push(format!(
                        "site {}",
                        crate::text::escape_controls(&vhost_name(&f, &text))
                    ));
                }
            }
        }
    }
    out.dedup();
    out
}

/// The `waf_status` findings for the host under `root`, with the last reload failure.
pub fn findings(root: &Path, now: jiff::Timestamp) -> Vec<Finding> {
    let failure = RELOAD_FAILURE.lock().clone();
    findings_with(root, now, failure)
}

fn findings_with(root: &Path, now: jiff::Timestamp, failure: Option<String>) -> Vec<Finding> {
    let mut out = Vec::new();
    for e in engines(root) {
        if e.active {
            continue;
        }
        let mut f = Finding::new(
            CHECK,
            Severity::Warning,
            format!("ModSecurity is not active on {}", e.server),
            now,
        );
        f.details = format!("install: {}", install_hint(root, e.server));
        out.push(f);
    }
    if let Some(r) = failure {
        out.push(reload_finding(&r, now));
    }
    if UNLOADED_NO_COMMAND.load(Ordering::SeqCst) {
        out.push(no_command_finding(now));
    }
    let scopes = disabled_scopes(root);
    for sc in scopes.iter().take(MAX_SCOPES) {
        let mut f = Finding::new(
            CHECK,
            Severity::Warning,
            format!("ModSecurity is off for {sc}"),
            now,
        );
        f.details =
            "the engine is switched off for this scope; requests to it are not filtered".into();
        out.push(f);
    }
    if scopes.len() > MAX_SCOPES {
        out.push(Finding::new(
            CHECK,
            Severity::Warning,
            format!(
                "ModSecurity is off for {} more scopes",
                scopes.len() - MAX_SCOPES
            ),
            now,
        ));
    }
    let days = STALE_DAYS.load(Ordering::Relaxed);
    let sys_now =
        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(now.as_second().max(0) as u64);
    for (tree, age) in stale_trees(root, sys_now, days) {
        let mut f = Finding::new(
            CHECK,
            Severity::Warning,
            format!("WAF rules in {tree} are stale"),
            now,
        );
        f.details =
            format!("last updated {age} days ago (threshold {days} days); update the rule set");
        out.push(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::tail::testutil::TempDir;
    use std::time::Duration;

    fn put(root: &Path, p: &str, text: &str) {
        let f = reroot(root, Path::new(p));
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, text).unwrap();
    }

    fn age(root: &Path, p: &str, days: u64) {
        let f = std::fs::File::options()
            .write(true)
            .open(reroot(root, Path::new(p)))
            .unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(days * 86_400))
            .unwrap();
    }

    #[test]
    fn missing_engines_get_hints_per_family_and_panel() {
        let d = TempDir::new("waf-detect");
        let r = d.path();
        put(r, "/etc/debian_version", "12\n");
        put(r, "/etc/apache2/apache2.conf", "");
        put(r, "/etc/nginx/nginx.conf", "events {}\n");
        let f = findings_with(r, jiff::Timestamp::now(), None);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f[0].message.contains("apache"));
        assert!(f[0]
            .details
            .contains("apt-get install libapache2-mod-security2"));
        assert!(f[1].details.contains("libnginx-mod-http-modsecurity"));
        put(
            r,
            "/etc/apache2/mods-enabled/security2.load",
            "LoadModule security2_module x\n",
        );
        put(
            r,
            "/etc/nginx/modules-enabled/50-mod-http-modsecurity.conf",
            "load_module modules/ngx_http_modsecurity_module.so;\n",
        );
        assert!(findings_with(r, jiff::Timestamp::now(), None).is_empty());
        let f = findings_with(r, jiff::Timestamp::now(), Some("exit status 1".into()));
        assert_eq!(f[0].message, RELOAD_FAILED);

        let d = TempDir::new("waf-detect2");
        let r = d.path();
        put(r, "/etc/redhat-release", "AlmaLinux\n");
        put(r, "/etc/httpd/conf/httpd.conf", "");
        assert!(install_hint(r, "apache").starts_with("dnf install mod_security"));
        assert!(!engines(r)[0].active);
        put(r, "/usr/local/cpanel/version", "");
        assert!(install_hint(r, "apache").contains("security centre"));
    }

    #[test]
    fn disabled_scopes_by_name() {
        let d = TempDir::new("waf-scopes");
        let r = d.path();
        let u = "/etc/apache2/conf.d/userdata";
        put(
            r,
            &format!("{u}/std/2_4/alice/modsec.conf"),
            "SecRuleEngine Off\n",
        );
        put(
            r,
            &format!("{u}/ssl/2_4/bob/shop.example/modsec.conf"),
            "  secruleengine \"off\"\n",
        );
        put(
            r,
            &format!("{u}/std/2_4/carol/blog.example/modsec.conf"),
            "# SecRuleEngine Off\nSecRuleEngine On\n",
        );
        put(
            r,
            "/var/cpanel/userdata/dave/dave.example",
            "documentroot: /home/dave\nmodsecurity_disabled: 1\n",
        );
        put(
            r,
            "/etc/nginx/sites-enabled/api",
            "server {\n  server_name api.example;\n  modsecurity off;\n}\n",
        );
        put(
            r,
            "/etc/nginx/sites-enabled/www",
            "server {\n  server_name www.example;\n  modsecurity on;\n}\n",
        );
        let s = disabled_scopes(r);
        assert_eq!(
            s,
            [
                "account alice (std)",
                "domain shop.example of account bob (ssl)",
                "domain dave.example of account dave (panel setting)",
                "site api.example",
            ],
            "{s:?}"
        );
        let f = findings_with(r, jiff::Timestamp::now(), None);
        assert!(f
            .iter()
            .any(|f| f.message == "ModSecurity is off for site api.example"));
    }

    #[test]
    fn staleness_flat_oldest_panel_newest_of_loaded_trees() {
        let d = TempDir::new("waf-stale");
        let r = d.path();
        put(r, "/usr/share/modsecurity-crs/rules/REQUEST-901.conf", "");
        put(r, "/usr/share/modsecurity-crs/rules/old.data", "");
        age(r, "/usr/share/modsecurity-crs/rules/old.data", 120);
        let now = SystemTime::now();
        let s = stale_trees(r, now, 90);
        assert_eq!(s.len(), 1);
        assert!(s[0].1 >= 119, "{s:?}");
        assert!(stale_trees(r, now, 200).is_empty());

        // Panel: the loaded vendor's newest artifact decides; a fresh unloaded vendor
        // cannot hide it, a retired stale one is ignored.
        let d = TempDir::new("waf-stale2");
        let r = d.path();
        put(r, "/usr/local/cpanel/version", "");
        put(
            r,
            "/etc/apache2/conf.d/modsec/modsec2.cpanel.conf",
            "Include \"/etc/apache2/conf.d/modsec_vendor_configs/OWASP3/modsecurity_crs_10_setup.conf\"\n",
        );
        let v = "/etc/apache2/conf.d/modsec_vendor_configs";
        put(r, &format!("{v}/OWASP3/a.conf"), "");
        put(r, &format!("{v}/OWASP3/rules/b.conf"), "");
        age(r, &format!("{v}/OWASP3/a.conf"), 200);
        age(r, &format!("{v}/OWASP3/rules/b.conf"), 100);
        put(r, &format!("{v}/fresh/x.conf"), "");
        put(r, &format!("{v}/retired/y.conf"), "");
        age(r, &format!("{v}/retired/y.conf"), 400);
        let s = stale_trees(r, now, 90);
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(s[0].0.ends_with("/OWASP3") && s[0].1 >= 99, "{s:?}");
        assert!(stale_trees(r, now, 150).is_empty());
    }

    /// Issue 41 item 5: without the panel's mapping (and off the panel) vendor trees are
    /// judged by their oldest artifact, not skipped.
    #[test]
    fn vendor_trees_without_a_mapping_are_judged_by_the_oldest_artifact() {
        let now = SystemTime::now();
        for panel_host in [false, true] {
            let d = TempDir::new("waf-stale-nomap");
            let r = d.path();
            if panel_host {
                // The panel is there, its active configuration is not readable.
                put(r, "/usr/local/cpanel/version", "");
            }
            let v = "/usr/local/apache/conf/modsec_vendor_configs";
            put(r, &format!("{v}/OWASP3/a.conf"), "");
            put(r, &format!("{v}/OWASP3/rules/b.conf"), "");
            age(r, &format!("{v}/OWASP3/rules/b.conf"), 120);
            put(r, &format!("{v}/fresh/x.conf"), "");
            let s = stale_trees(r, now, 90);
            assert_eq!(s.len(), 1, "{panel_host}: {s:?}");
            assert_eq!(s[0].0, format!("{v}/OWASP3"));
            assert!(s[0].1 >= 119, "{s:?}");
            assert!(stale_trees(r, now, 200).is_empty());
        }
    }
}
