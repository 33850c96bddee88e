//! Site integrity (issue 28, part 2) through the real daemon: the file-index baseline of
//! deep scans, droppers and staged packages seen by the file watcher.

use crate::common::*;
use crate::firewall::post;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// A daemon whose checks read `{dir}/fixture` (web root `{dir}/fixture/var/www`), without
/// scheduled scans, plus `extra` TOML.
fn start(tag: &str, extra: &str) -> (Daemon, PathBuf) {
    let dir = temp_dir(tag);
    let www = dir.join("fixture/var/www");
    std::fs::create_dir_all(&www).unwrap();
    let root = dir.join("fixture").display().to_string();
    let d = start_in_dir(
        dir,
        &format!("[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\nroot = {root:?}\n{extra}"),
        &[],
    );
    (d, www)
}

/// Queues a deep scan and waits until it is done; returns the job.
fn deep_scan(d: &Daemon) -> Value {
    let r = post(d, "/api/v1/scan-jobs", ADMIN, json!({ "kind": "deep" }));
    r.expect(202);
    let id = r.json()["id"].as_i64().unwrap();
    wait_until(120, "the scan job to finish", || {
        let j = d.get(&format!("/api/v1/scan-jobs/{id}"), READ).json();
        (j["state"] == "done").then_some(j)
    })
}

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
    let (d, www) = start("integrity-index", "");
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
    deep_scan(&d);
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
    deep_scan(&d);
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
