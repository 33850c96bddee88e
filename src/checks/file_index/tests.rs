#![allow(
    clippy::disallowed_methods,
    reason = "test fixtures are built with plain std::fs calls, as an attacker would"
)]

use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::AtomicBool;

use super::index::{watched_place, Place};
use super::*;
use crate::checks::testutil::Fixture;
use crate::clock::ManualClock;
use crate::hostfs::is_php_name;

struct Env {
    fx: Fixture,
    store: Store,
    registry: Arc<Registry>,
    task: Arc<FileIndex>,
    ctx: CheckContext,
}

fn env() -> Env {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.path("db")).unwrap();
    let store = Store::open(&fx.path("db/svc.db")).unwrap();
    let registry = Registry::new();
    let clock: SharedClock = ManualClock::at_epoch_2026();
    let task = FileIndex::start(store.clone(), clock.clone(), &registry).unwrap();
    let ctx = CheckContext::builder(clock)
        .web_roots([fx.path("www")])
        .build();
    Env {
        fx,
        store,
        registry,
        task,
        ctx,
    }
}

impl Env {
    fn scan(&self) -> Vec<Finding> {
        self.task
            .scan(&self.ctx, &AtomicBool::new(false))
            .expect("scan completes")
    }
}

fn site(fx: &Fixture) {
    fx.write(
        "www/wp-includes/version.php",
        b"<?php $wp_version = '6.4.2';\n",
    );
    fx.write("www/wp-admin/index.php", b"<?php require 'admin.php';\n");
    fx.write("www/wp-content/uploads/2024/01/a.jpg", b"\xff\xd8\xff");
    fx.write("www/wp-content/themes/t/style.css", b"body{}\n");
    fx.write("www/.htaccess", b"# BEGIN WordPress\n");
    fx.write("www/index.php", b"<?php require 'wp-blog-header.php';\n");
}

#[test]
fn first_scan_builds_the_baseline_then_changes_in_watched_places_are_reported() {
    let e = env();
    site(&e.fx);
    assert!(
        e.scan().is_empty(),
        "the first scan only builds the baseline"
    );
    let first = e.task.last_run().unwrap();
    assert_eq!((first.index.files, first.index.hashed), (6, 6));
    assert!(e.scan().is_empty());
    let second = e.task.last_run().unwrap();
    assert_eq!((second.index.hashed, second.index.unchanged), (0, 6));

    e.fx.write(
        "www/wp-includes/version.php",
        b"<?php $wp_version = '6.4.2'; @eval($_POST['x']);\n",
    );
    e.fx.write(
        "www/wp-content/uploads/2024/01/x.php",
        b"<?php system($_GET['c']);",
    );
    e.fx.write(
        "www/.htaccess",
        b"# BEGIN WordPress\nAddType application/x-httpd-php .jpg\n",
    );
    // Outside the watched places: indexed, not reported.
    e.fx.write("www/index.php", b"<?php require 'other.php';\n");
    e.fx.write("www/wp-content/themes/t/new.php", b"<?php\n");
    let f = e.scan();
    let mut msgs: Vec<&str> = f.iter().map(|f| f.message.as_str()).collect();
    msgs.sort();
    let www = e.fx.path("www").display().to_string();
    assert_eq!(
        msgs,
        [
            format!("file changed since the baseline (.htaccess): {www}/.htaccess"),
            format!(
                "file changed since the baseline (WordPress core directory): {www}/wp-includes/version.php"
            ),
            format!(
                "file new since the baseline (PHP in uploads): {www}/wp-content/uploads/2024/01/x.php"
            ),
        ]
    );
    assert!(f.iter().all(|f| f.check == CHECK && f.path.is_some()));
    let run = e.task.last_run().unwrap();
    // Only the five written files were read again.
    assert_eq!((run.index.hashed, run.index.unchanged), (5, 3));
    assert_eq!(run.reported, 3);
    // The baseline took the new state.
    assert!(e.scan().is_empty());
}

#[test]
fn unchanged_files_are_not_read_again() {
    let e = env();
    site(&e.fx);
    e.scan();
    // Nothing read: no file hashed, no byte read (the walk only stats).
    e.scan();
    let run = e.task.last_run().unwrap();
    assert_eq!(run.index.hashed, 0);
    assert_eq!(run.index.bytes_hashed, 0);
    assert_eq!(run.index.unchanged, 6);
}

#[test]
fn touched_files_with_the_same_content_are_not_reported() {
    let e = env();
    site(&e.fx);
    e.scan();
    let p = e.fx.path("www/wp-includes/version.php");
    let content = std::fs::read(&p).unwrap();
    std::fs::write(&p, &content).unwrap();
    crate::checks::testutil::chmod(&p, 0o600);
    assert!(e.scan().is_empty());
    assert_eq!(e.task.last_run().unwrap().index.hashed, 1);
}

#[test]
fn symlinks_are_never_followed_and_hostile_names_are_kept_as_bytes() {
    let e = env();
    site(&e.fx);
    e.scan();
    e.fx.write("outside/wp-includes/evil.php", b"<?php eval($_POST[1]);");
    e.fx.symlink(&e.fx.path("outside"), "www/wp-content/uploads/link");
    e.fx.symlink(
        &e.fx.path("outside/wp-includes/evil.php"),
        "www/wp-includes/l.php",
    );
    let name = std::ffi::OsStr::from_bytes(b"sh\xff\x1b[31m\n.php");
    let p = e.fx.path("www/wp-content/uploads").join(name);
    std::fs::write(&p, b"<?php").unwrap();
    let f = e.scan();
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].message.contains("PHP in uploads"));
    assert!(!f[0].message.contains('\x1b') && !f[0].message.contains('\n'));
    let run = e.task.last_run().unwrap();
    assert_eq!(run.index.symlinks, 2);
    // The hostile name is in the baseline under its raw bytes.
    let key = root_key(&e.fx.path("www"));
    let files = e
        .store
        .read(|c| sql::load(c, &key, 100))
        .unwrap()
        .into_iter()
        .map(|f| f.path)
        .collect::<Vec<_>>();
    assert!(files.contains(&b"wp-content/uploads/sh\xff\x1b[31m\n.php".to_vec()));
}

#[test]
fn removed_files_leave_the_baseline_and_rows_exist() {
    let e = env();
    site(&e.fx);
    e.scan();
    std::fs::remove_file(e.fx.path("www/index.php")).unwrap();
    e.scan();
    let key = root_key(&e.fx.path("www"));
    let n = e.store.read(|c| sql::load(c, &key, 100)).unwrap().len();
    assert_eq!(n, 5);
    let snap = e.registry.snapshot();
    assert_eq!(snap[ACTIVE_ROW].capacity, Some(1));
    assert_eq!(snap[ACTIVE_ROW].running, 0);
    assert_eq!(snap[WAITING_ROW].waiting, Some(0));
    assert!(snap[WAITING_ROW].capacity_unavailable);
}

#[test]
fn a_stopped_scan_is_incomplete_and_removes_nothing() {
    let e = env();
    site(&e.fx);
    e.scan();
    std::fs::remove_file(e.fx.path("www/index.php")).unwrap();
    let f = e.task.scan(&e.ctx, &AtomicBool::new(true));
    assert!(f.is_some_and(|f| f.is_empty()));
    assert!(e.task.last_run().unwrap().index.incomplete);
    let key = root_key(&e.fx.path("www"));
    assert_eq!(e.store.read(|c| sql::load(c, &key, 100)).unwrap().len(), 6);
}

#[test]
fn watched_places() {
    assert_eq!(watched_place(b".htaccess"), Some(Place::Htaccess));
    assert_eq!(watched_place(b"a/b/.htaccess"), Some(Place::Htaccess));
    assert_eq!(watched_place(b"wp-includes/x.js"), Some(Place::Core));
    assert_eq!(watched_place(b"blog/wp-admin/css/a.css"), Some(Place::Core));
    assert_eq!(
        watched_place(b"wp-content/uploads/2024/x.PhP"),
        Some(Place::UploadsPhp)
    );
    assert_eq!(watched_place(b"wp-content/uploads/x.jpg"), None);
    assert_eq!(watched_place(b"wp-content/plugins/p/x.php"), None);
    assert_eq!(watched_place(b"wp-includes"), None);
    assert_eq!(watched_place(b""), None);
    assert!(is_php_name(b"a.phtml") && is_php_name(b"b.PHAR") && !is_php_name(b"php"));
}
