//! Site integrity (issue 28, part 2) through the real daemon: the file-index baseline of
//! deep scans, droppers and staged packages seen by the file watcher.

use crate::common::*;
use crate::remedy::{scan, start};

use std::path::Path;

use serde_json::Value;

fn write(p: &Path, body: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

/// The daemon's `file index:` log lines so far.
fn index_lines(d: &Daemon) -> Vec<String> {
    d.stderr()
        .lines()
        .filter(|l| l.contains("file index: "))
        .map(str::to_string)
        .collect()
}

/// A deep scan builds the baseline; a changed core file, a new PHP file in uploads and a
/// changed `.htaccess` are reported by the next one, other changes are not, and unchanged
/// files are not read again.
#[test]
fn file_index_reports_changes_in_watched_places_and_reads_only_changed_files() {
    let (d, www) = start("integrity-index", "", &[]);
    write(
        &www.join("wp-includes/version.php"),
        b"<?php $wp_version = '6.4.2';\n",
    );
    write(
        &www.join("wp-admin/index.php"),
        b"<?php require 'admin.php';\n",
    );
    write(&www.join(".htaccess"), b"# BEGIN WordPress\n");
    write(
        &www.join("wp-content/uploads/2024/01/a.jpg"),
        b"\xff\xd8\xff",
    );
    for i in 0..20 {
        write(
            &www.join(format!("wp-content/plugins/p/f{i}.php")),
            b"<?php\n",
        );
    }
    scan(&d, "deep");
    assert!(findings_of(&d, "file_index_changed").is_empty());
    let first = wait_until(10, "the first index line", || index_lines(&d).pop());
    assert!(first.contains("24 files, 24 hashed"), "{first}");

    write(
        &www.join("wp-includes/version.php"),
        b"<?php $wp_version = '6.4.2'; @eval($_POST['x']);\n",
    );
    write(
        &www.join("wp-content/uploads/x.php"),
        b"<?php system($_GET['c']);",
    );
    write(
        &www.join(".htaccess"),
        b"# BEGIN WordPress\nAddHandler php .jpg\n",
    );
    write(&www.join("wp-content/plugins/p/f0.php"), b"<?php echo 1;\n");
    scan(&d, "deep");
    let f = findings_of(&d, "file_index_changed");
    let mut paths: Vec<String> = f
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    paths.sort();
    let w = www.display().to_string();
    assert_eq!(
        paths,
        [
            format!("{w}/.htaccess"),
            format!("{w}/wp-content/uploads/x.php"),
            format!("{w}/wp-includes/version.php"),
        ],
        "{f:?}"
    );
    let lines = index_lines(&d);
    let second = lines.last().unwrap();
    // 4 files written again (one new), 21 left alone: never opened.
    assert!(
        second.contains("25 files, 4 hashed") && second.contains("21 unchanged not read"),
        "{second}"
    );
    assert!(second.contains("3 reported"), "{second}");
}

fn queue_row(d: &Daemon, name: &str) -> Value {
    d.get("/api/v1/status", READ).expect(200).json()["queues"][name].clone()
}

/// Writes `body` outside the root, gives it to `uid`, and moves it into `to` (a rename:
/// the watcher reports it as moved in, with its owner).
fn move_in_as(d: &Daemon, to: &Path, body: &[u8], uid: u32) {
    let tmp = d.dir.join(format!(
        "staging-{}",
        to.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&tmp, body).unwrap();
    std::os::unix::fs::chown(&tmp, Some(uid), Some(uid)).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

const DROPPER: &[u8] =
    b"<?php\n$t = __DIR__ . '/wp-content/uploads/cache.php';\nfile_put_contents($t, base64_decode($_POST['p']));\n";

/// A dropper sequence through real file events: a PHP file that writes PHP files becomes a
/// candidate; another account's PHP file does not confirm it; a new PHP file of the same
/// account does, and the finding names both files.
#[test]
fn dropper_is_confirmed_by_a_php_file_of_the_same_account() {
    let dir = temp_dir("integrity-dropper");
    let www = dir.join("www");
    std::fs::create_dir_all(www.join("wp-content/uploads")).unwrap();
    let d = start_in_dir(
        dir,
        &format!(
            "[files]\nwatch = [{:?}]\n[auto_response]\nquarantine = false\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n",
            www.display().to_string()
        ),
        &[],
    );
    let row = queue_row(&d, "fanotify.dropper");
    assert_eq!(row["capacity"], 16384, "{row}");
    assert_eq!(
        queue_row(&d, "fanotify.dropper_findings")["capacity"],
        16384
    );

    let dropper = www.join("up.php");
    std::fs::write(&dropper, DROPPER).unwrap();
    wait_until(30, "the candidate", || {
        (queue_row(&d, "fanotify.dropper")["waiting"] == 1).then_some(())
    });
    assert_eq!(queue_row(&d, "fanotify.dropper_findings")["waiting"], 1);
    // Another account's PHP file, then another account's dropper: the second candidate
    // shows both were analysed, and neither confirmed the first.
    move_in_as(&d, &www.join("other.php"), b"<?php echo 1;\n", 65534);
    move_in_as(&d, &www.join("theirs.php"), DROPPER, 65534);
    wait_until(30, "the second candidate", || {
        (queue_row(&d, "fanotify.dropper")["waiting"] == 2).then_some(())
    });
    assert!(findings_of(&d, "php_dropper").is_empty());

    let dropped = www.join("wp-content/uploads/cache.php");
    std::fs::write(&dropped, b"<?php echo 'second stage';\n").unwrap();
    let f = wait_until(30, "the dropper finding", || {
        findings_of(&d, "php_dropper").into_iter().next()
    });
    assert_eq!(
        f["message"],
        format!(
            "PHP dropper {} wrote {}",
            dropper.display(),
            dropped.display()
        )
    );
    assert_eq!(f["path"], dropper.display().to_string());
    assert_eq!(f["severity"], "HIGH");
    assert_eq!(findings_of(&d, "php_dropper").len(), 1);
    // The held finding was released; the other account's stays held until its window ends.
    let held = queue_row(&d, "fanotify.dropper_findings");
    assert_eq!(held["waiting"], 1, "{held}");
    assert_eq!(held["dropped_total"], 0);
}

const WEBSHELL: &[u8] = b"<?php\n// innocent looking header\n@eval($_POST['cmd']);\n?>\n";

/// A zip dropped into uploads with a shell inside is reported before anyone extracts it;
/// a zip bomb, a too deeply nested zip and a truncated zip are refused and reported, and
/// the daemon goes on.
#[test]
fn staged_package_with_a_shell_is_reported_and_bad_archives_are_refused() {
    let dir = temp_dir("integrity-staged");
    let www = dir.join("www");
    let uploads = www.join("wp-content/uploads");
    std::fs::create_dir_all(&uploads).unwrap();
    let d = start_in_dir(
        dir,
        &format!(
            "[files]\nwatch = [{:?}]\n[auto_response]\nquarantine = false\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n",
            www.display().to_string()
        ),
        &[],
    );
    assert_eq!(queue_row(&d, "fanotify.staged_packages")["capacity"], 1024);
    let pkg = uploads.join("plugin-update.zip");
    std::fs::write(
        &pkg,
        zip_of(&[("readme.txt", b"update"), ("plugin/loader.php", WEBSHELL)]),
    )
    .unwrap();
    let f = wait_until(30, "the staged package finding", || {
        findings_of(&d, "staged_package_malware").into_iter().next()
    });
    assert_eq!(
        f["message"],
        format!(
            "malware in staged package {}: plugin-update.zip/loader.php",
            pkg.display()
        )
    );
    assert_eq!(f["path"], pkg.display().to_string());
    assert!(!uploads.join("plugin/loader.php").exists());

    let zeros = vec![0u8; 20 * 1024 * 1024];
    std::fs::write(uploads.join("bomb.zip"), zip_of(&[("zeros.bin", &zeros)])).unwrap();
    let l3 = zip_of(&[("s.txt", b"x")]);
    let l2 = zip_of(&[("l3.zip", &l3)]);
    std::fs::write(uploads.join("nested.zip"), zip_of(&[("l2.zip", &l2)])).unwrap();
    let whole = zip_of(&[("a.txt", b"hello"), ("b.php", WEBSHELL)]);
    std::fs::write(uploads.join("cut.zip"), &whole[..whole.len() / 2]).unwrap();
    let refused = wait_until(60, "three refusals", || {
        let f = findings_of(&d, "staged_package_unverified");
        (f.len() == 3).then_some(f)
    });
    let detail = |name: &str| {
        refused
            .iter()
            .find(|f| f["path"].as_str().unwrap().ends_with(name))
            .map(|f| f["details"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("no finding for {name}: {refused:?}"))
    };
    assert!(detail("bomb.zip").contains("archive_ratio_limit"));
    assert!(detail("nested.zip").contains("archive_depth_limit"));
    assert!(detail("cut.zip").contains("archive_error"));
    let row = queue_row(&d, "fanotify.staged_packages");
    assert_eq!(row["dropped_total"], 0, "{row}");
    assert_eq!(row["running"], 0, "{row}");
}
