//! Nobody outside the site (issue 35): fixes, the quarantine and the automatic response act
//! only on a site's own inodes (one link, the site's account) and take the account of a site
//! from its web root, never from a file a user can link; `.htaccess` injections are cleaned,
//! never removed whole. Each attack is the one a site owner can mount on a shared server.

use crate::common::*;
use crate::firewall::post;
use crate::remedy::{scan, start};

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use serde_json::{json, Value};

/// uid 1 (`daemon`) exists with a name on every Debian host; `login.defs` in the checks'
/// root makes it a login account, as a site owner's uid is on a real host.
const SITE_UID: u32 = 1;

/// A daemon whose checks read `{dir}/fixture` and whose file watcher watches its web root
/// `{dir}/fixture/var/www` (with `subdirs` made first), with the automatic quarantine on or
/// off; no scheduled scans.
fn start_watched(tag: &str, subdirs: &[&str], auto: bool) -> (Daemon, std::path::PathBuf) {
    let dir = temp_dir(tag);
    let www = dir.join("fixture/var/www");
    for s in subdirs {
        std::fs::create_dir_all(www.join(s)).unwrap();
    }
    let root = dir.join("fixture").display().to_string();
    let d = start_in_dir(
        dir,
        &format!(
            "[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\nroot = {root:?}\n[files]\nwatch = [{:?}]\n[auto_response]\nquarantine = {auto}\n",
            www.display().to_string()
        ),
        &[],
    );
    (d, www)
}

fn login_defs(d: &Daemon, uid_min: u32) {
    let etc = d.dir.join("fixture/etc");
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::write(etc.join("login.defs"), format!("UID_MIN {uid_min}\n")).unwrap();
}

fn chown(p: &Path, uid: u32) {
    std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap();
}

fn mode_of(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn finding_at(d: &Daemon, check: &str, path: &Path) -> Value {
    let shown = path.display().to_string();
    findings_of(d, check)
        .into_iter()
        .find(|f| f["path"] == shown.as_str())
        .unwrap_or_else(|| panic!("no {check} finding for {shown}"))
}

fn refusals(d: &Daemon, reason: &str) -> u64 {
    let text = d.get("/metrics", ADMIN).expect(200).text();
    let key = format!("svc_fix_refusals_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /metrics"))
}

/// A root-owned 0666 file hard-linked into a site as `wp-config.php` (what
/// `fs.protected_hardlinks=1` allows any user): the finding names the site's account, not
/// root; the fix refuses with 409 `hard_linked`, writes no crontab and leaves root's file as
/// it was. A site of a system account gets no cron line (409 `system_account`); the owner's
/// own `wp-config.php` is fixed into the owner's crontab, and a site path holding `%` is
/// refused before anything changes.
#[test]
fn cms_cron_fix_never_writes_a_crontab_a_linked_file_names() {
    let (d, www) = start("contain-cron", "", &[]);
    let spool = d.dir.join("fixture/var/spool/cron/crontabs");
    std::fs::create_dir_all(&spool).unwrap();
    let site = www.join("s1");
    std::fs::create_dir_all(&site).unwrap();
    chown(&www, SITE_UID);
    chown(&site, SITE_UID);
    // Root's file, outside every web root, linked into the site.
    let roots_file = d.dir.join("root-owned.php");
    std::fs::write(&roots_file, "<?php\n$x = 1;\n").unwrap();
    std::fs::set_permissions(&roots_file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let wp = site.join("wp-config.php");
    std::fs::hard_link(&roots_file, &wp).unwrap();
    login_defs(&d, 1);
    scan(&d, "deep");
    let f = finding_at(&d, "perf_cms_cron", &wp);
    assert_eq!(f["account"], "daemon", "the site's account: {f}");
    let before = refusals(&d, "hard_linked");
    let r = post(
        &d,
        "/api/v1/perf/fix-cms-cron",
        ADMIN,
        json!({ "id": f["id"] }),
    );
    r.expect(409);
    assert_eq!(r.json()["reason"], "hard_linked", "{}", r.json());
    assert_eq!(refusals(&d, "hard_linked"), before + 1);
    assert!(
        std::fs::read_dir(&spool).unwrap().next().is_none(),
        "no crontab written"
    );
    assert_eq!(
        std::fs::read_to_string(&roots_file).unwrap(),
        "<?php\n$x = 1;\n"
    );
    assert_eq!(mode_of(&roots_file), 0o666);

    // The owner's own file, but uid 1 is a system account under the host's UID_MIN.
    std::fs::remove_file(&wp).unwrap();
    let text = "<?php\ndefine('DB_NAME', 'wp');\nrequire_once ABSPATH . 'wp-settings.php';\n";
    std::fs::write(&wp, text).unwrap();
    chown(&wp, SITE_UID);
    login_defs(&d, 1000);
    scan(&d, "deep");
    let f = finding_at(&d, "perf_cms_cron", &wp);
    let r = post(
        &d,
        "/api/v1/perf/fix-cms-cron",
        ADMIN,
        json!({ "id": f["id"] }),
    );
    r.expect(409);
    assert_eq!(r.json()["reason"], "system_account", "{}", r.json());
    assert_eq!(
        std::fs::read_to_string(&wp).unwrap(),
        text,
        "nothing edited"
    );
    assert!(std::fs::read_dir(&spool).unwrap().next().is_none());

    // A site whose path cron would split at `%`: refused, nothing edited.
    let odd = www.join("50%off");
    std::fs::create_dir_all(&odd).unwrap();
    chown(&odd, SITE_UID);
    let odd_wp = odd.join("wp-config.php");
    std::fs::write(&odd_wp, text).unwrap();
    chown(&odd_wp, SITE_UID);
    login_defs(&d, 1);
    scan(&d, "deep");
    let f = finding_at(&d, "perf_cms_cron", &odd_wp);
    post(
        &d,
        "/api/v1/perf/fix-cms-cron",
        ADMIN,
        json!({ "id": f["id"] }),
    )
    .expect(400);
    assert_eq!(std::fs::read_to_string(&odd_wp).unwrap(), text);

    // The owner's own fix keeps working: the owner's crontab, 0600, the job runs as them.
    let f = finding_at(&d, "perf_cms_cron", &wp);
    post(
        &d,
        "/api/v1/perf/fix-cms-cron",
        ADMIN,
        json!({ "id": f["id"] }),
    )
    .expect(200);
    let tab = spool.join("daemon");
    let line = std::fs::read_to_string(&tab).unwrap();
    assert!(
        line.contains(&format!("cd '{}' && php -q wp-cron.php", site.display())),
        "{line}"
    );
    let meta = std::fs::metadata(&tab).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (SITE_UID, 0o600));
    assert!(!spool.join("root").exists());
}

/// Root files hard-linked into a site as a world-writable `leak.php`, a `php.ini` with
/// display_errors on and a webshell: the chmod, the display_errors cleaning and the
/// quarantine each refuse with 409 `hard_linked`, and root's files keep their modes and
/// content. In a site whose web root a user owns, a root-owned file with one link is refused
/// as `foreign_owner`. The site's own writable file still becomes 0644.
#[test]
fn fixes_refuse_hard_linked_and_foreign_files() {
    let (d, www) = start_watched("contain-links", &["site"], false);
    let site = www.join("site");
    let outside = d.dir.join("root-files");
    std::fs::create_dir_all(&outside).unwrap();
    let link = |name: &str, body: &str, mode: u32| {
        let theirs = outside.join(name);
        std::fs::write(&theirs, body).unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(mode)).unwrap();
        std::fs::hard_link(&theirs, site.join(name)).unwrap();
        theirs
    };
    let leak = link("leak.php", "<?php $secret = 1;\n", 0o622);
    let ini = link("php.ini", "display_errors = On\n", 0o644);
    let shell = link("shell.php", "<?php @eval($_POST['cmd']); ?>\n", 0o644);
    let own = site.join("own.php");
    std::fs::write(&own, "<?php echo 1;\n").unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o666)).unwrap();
    scan(&d, "deep");
    let shown = site.join("shell.php").display().to_string();
    wait_until(60, "the watcher's webshell finding", || {
        findings_of(&d, "webshell")
            .into_iter()
            .find(|f| f["path"] == shown.as_str())
    });
    let refused = |check: &str, route: &str, path: &Path| {
        let f = finding_at(&d, check, path);
        let r = post(&d, route, ADMIN, json!({ "id": f["id"] }));
        r.expect(409);
        assert_eq!(r.json()["reason"], "hard_linked", "{check}: {}", r.json());
    };
    refused("world_writable_php", "/api/v1/fix", &site.join("leak.php"));
    refused(
        "php_display_errors",
        "/api/v1/perf/fix-display-errors",
        &site.join("php.ini"),
    );
    refused("webshell", "/api/v1/fix", &site.join("shell.php"));
    assert_eq!(mode_of(&leak), 0o622);
    assert_eq!(mode_of(&ini), 0o644);
    assert_eq!(
        std::fs::read_to_string(&ini).unwrap(),
        "display_errors = On\n"
    );
    assert_eq!(mode_of(&shell), 0o644);
    assert!(site.join("shell.php").exists(), "not moved");
    assert_eq!(
        d.get("/api/v1/quarantine", ADMIN).expect(200).json()["total"],
        0
    );
    // The site's own file.
    let f = finding_at(&d, "world_writable_php", &own);
    post(&d, "/api/v1/fix", ADMIN, json!({ "id": f["id"] })).expect(200);
    assert_eq!(mode_of(&own), 0o644);

    // A web root a user owns: root's file in it (one link) is not the site's.
    chown(&www, SITE_UID);
    let foreign = site.join("foreign.php");
    std::fs::write(&foreign, "<?php echo 2;\n").unwrap();
    std::fs::set_permissions(&foreign, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mine = site.join("mine.php");
    std::fs::write(&mine, "<?php echo 3;\n").unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o666)).unwrap();
    chown(&mine, SITE_UID);
    scan(&d, "deep");
    let f = finding_at(&d, "world_writable_php", &foreign);
    let r = post(&d, "/api/v1/fix", ADMIN, json!({ "id": f["id"] }));
    r.expect(409);
    assert_eq!(r.json()["reason"], "foreign_owner", "{}", r.json());
    assert_eq!(mode_of(&foreign), 0o666);
    let f = finding_at(&d, "world_writable_php", &mine);
    post(&d, "/api/v1/fix", ADMIN, json!({ "id": f["id"] })).expect(200);
    assert_eq!(mode_of(&mine), 0o644);
}

/// With `auto_response.quarantine = true`, an `.htaccess` holding the site's own rewrite
/// rules and an injected `auto_prepend_file` loses only the injected line (a pre-clean backup
/// is listed), never the whole file; a hard-linked one is left alone (refusal counted) while
/// a webshell beside it is still quarantined.
#[test]
fn automatic_response_cleans_htaccess_and_leaves_linked_files() {
    let (d, www) = start_watched("contain-auto", &["site", "linked"], true);
    let dir = d.dir.clone();
    let own = "# BEGIN WordPress\nRewriteEngine On\nRewriteRule ^index\\.php$ - [L]\nRewriteCond %{REQUEST_FILENAME} !-f\nRewriteRule . /index.php [L]\n# END WordPress\n";
    let injected = format!("{own}php_value auto_prepend_file /tmp/.sess_8f3a.php\n");
    let staging = dir.join("staging");
    std::fs::write(&staging, &injected).unwrap();
    let ht = www.join("site/.htaccess");
    std::fs::rename(&staging, &ht).unwrap();
    let f = wait_until(60, "the htaccess finding", || {
        findings_of(&d, "htaccess_injection")
            .into_iter()
            .find(|f| f["path"] == ht.display().to_string().as_str())
    });
    assert!(
        f["details"]
            .as_str()
            .unwrap()
            .contains("injected lines removed"),
        "{f}"
    );
    assert_eq!(
        std::fs::read_to_string(&ht).unwrap(),
        own,
        "the site's rules stay"
    );
    let q = d.get("/api/v1/quarantine", ADMIN).expect(200).json();
    let items = q["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{q}");
    assert_eq!(items[0]["reason"], "pre-clean backup", "{q}");

    // Root's .htaccess linked into another site: not cleaned, not moved.
    let roots = dir.join("roots-htaccess");
    std::fs::write(&roots, &injected).unwrap();
    let before = refusals(&d, "hard_linked");
    let linked = www.join("linked/.htaccess");
    std::fs::hard_link(&roots, &linked).unwrap();
    wait_until(60, "the linked htaccess finding", || {
        findings_of(&d, "htaccess_injection")
            .into_iter()
            .find(|f| f["path"] == linked.display().to_string().as_str())
    });
    wait_until(30, "the refusal to be counted", || {
        (refusals(&d, "hard_linked") > before).then_some(())
    });
    assert_eq!(std::fs::read_to_string(&roots).unwrap(), injected);
    assert_eq!(mode_of(&roots), 0o644);
    // A webshell is still quarantined whole; the listing shows a newline in its name
    // escaped, as findings show paths.
    let shell = www.join("site/up\nload.php");
    std::fs::write(&staging, "<?php @eval($_POST['cmd']); ?>\n").unwrap();
    std::fs::rename(&staging, &shell).unwrap();
    // The file leaves before its entry is stored (a crash in between keeps it safe in the
    // quarantine, logged), so the listing is polled rather than read once.
    let entry = wait_until(60, "the webshell's quarantine entry", || {
        let q = d.get("/api/v1/quarantine", ADMIN).expect(200).json();
        q["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["original_path"] == shell.display().to_string().as_str())
            .cloned()
    });
    assert!(!shell.exists(), "the webshell left its place");
    assert!(
        entry["path_shown"]
            .as_str()
            .unwrap()
            .ends_with("site/up\\nload.php"),
        "{entry}"
    );
}
