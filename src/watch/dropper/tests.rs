use super::*;
use crate::clock::ManualClock;

const DROPPER: &[u8] = b"<?php file_put_contents(__DIR__ . '/x.php', base64_decode($_POST['p']));";

fn setup() -> (Arc<ManualClock>, Arc<Registry>, Droppers) {
    let clock = ManualClock::at_epoch_2026();
    let reg = Registry::new();
    let d = Droppers::start(clock.clone(), &reg).unwrap();
    (clock, reg, d)
}

fn rows(reg: &Registry) -> (Option<u64>, Option<u64>, u64, u64) {
    let s = reg.snapshot();
    (
        s[CANDIDATES_ROW].waiting,
        s[FINDINGS_ROW].waiting,
        s[CANDIDATES_ROW].dropped_total,
        s[FINDINGS_ROW].dropped_total,
    )
}

#[test]
fn a_new_php_file_of_the_same_owner_in_the_window_confirms_the_dropper() {
    let (clock, reg, mut d) = setup();
    assert!(d
        .observe(Path::new("/www/up.php"), 1000, DROPPER)
        .is_empty());
    assert_eq!(rows(&reg), (Some(1), Some(1), 0, 0));
    // Another account's file, and the dropper itself written again: no confirmation.
    assert!(d
        .observe(Path::new("/www/b.php"), 1001, b"<?php")
        .is_empty());
    assert!(d
        .observe(Path::new("/www/up.php"), 1000, DROPPER)
        .is_empty());
    assert_eq!(d.len(), 1);
    clock.advance_secs(44);
    let f = d.observe(
        Path::new("/www/wp-content/uploads/x.php"),
        1000,
        b"<?php eval(1);",
    );
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].check, CHECK);
    assert_eq!(
        f[0].message,
        "PHP dropper /www/up.php wrote /www/wp-content/uploads/x.php"
    );
    assert_eq!(f[0].path.as_deref(), Some("/www/up.php"));
    assert!(f[0]
        .details
        .contains("file_put_contents() writing a PHP file at line 1"));
    // The held finding is released; the candidate waits out its window.
    assert_eq!(rows(&reg), (Some(1), Some(0), 0, 0));
    // A second drop in the window is reported too.
    assert_eq!(d.observe(Path::new("/www/y.php"), 1000, b"<?php").len(), 1);
    clock.advance_secs(1);
    d.expire();
    assert_eq!(rows(&reg), (Some(0), Some(0), 0, 0));
    assert_eq!(d.counters.confirmed.load(Ordering::Relaxed), 2);
    assert_eq!(d.counters.unconfirmed.load(Ordering::Relaxed), 0);
    // After the window: nothing confirms.
    assert!(d
        .observe(Path::new("/www/z.php"), 1000, b"<?php")
        .is_empty());
}

#[test]
fn an_unconfirmed_candidate_is_withdrawn_after_the_grace_without_a_loss() {
    let (clock, reg, mut d) = setup();
    d.observe(Path::new("/www/up.php"), 1000, DROPPER);
    clock.advance_secs(30);
    // Within the grace window the held finding is not lag.
    let s = reg.snapshot();
    assert_eq!(s[FINDINGS_ROW].lag_seconds, Some(0.0));
    assert_eq!(s[FINDINGS_ROW].oldest_waiting_age_seconds, Some(30.0));
    clock.advance_secs(15);
    d.expire();
    assert_eq!(rows(&reg), (Some(0), Some(0), 0, 0));
    assert_eq!(d.counters.unconfirmed.load(Ordering::Relaxed), 1);
    assert!(d
        .observe(Path::new("/www/x.php"), 1000, b"<?php")
        .is_empty());
}

#[test]
fn a_full_table_evicts_the_oldest_candidate_as_a_loss() {
    let (_clock, reg, mut d) = setup();
    for i in 0..CAPACITY {
        d.observe(Path::new(&format!("/www/{i}.php")), i as u32 + 10, DROPPER);
    }
    assert_eq!(
        rows(&reg),
        (Some(CAPACITY as u64), Some(CAPACITY as u64), 0, 0)
    );
    d.observe(Path::new("/www/new.php"), 5, DROPPER);
    assert_eq!(
        rows(&reg),
        (Some(CAPACITY as u64), Some(CAPACITY as u64), 1, 1)
    );
    assert_eq!(d.counters.evicted.load(Ordering::Relaxed), 1);
}

#[test]
fn a_file_that_writes_no_php_is_not_a_candidate() {
    let (_clock, reg, mut d) = setup();
    d.observe(
        Path::new("/www/a.php"),
        1000,
        b"<?php file_put_contents('log.txt', 1);",
    );
    assert_eq!(rows(&reg), (Some(0), Some(0), 0, 0));
}
