//! Quarantine tests. Ownership checks need root (they run as root here); without root the
//! tests that chown return early with a message.

use std::fs::{self, FileTimes};
use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt, PermissionsExt};
use std::time::{Duration, UNIX_EPOCH};

use nix::unistd::{chown, fchownat, Gid};

use super::*;
use crate::scan::testdir::TempDir;

const PAST_MTIME: u64 = 1_600_000_000;
const PAST_ATIME: u64 = 1_600_000_500;

fn root_or_skip(test: &str) -> bool {
    if is_root() {
        true
    } else {
        eprintln!("{test}: skipped, needs root");
        false
    }
}

/// Writes a victim file owned by 1234:1234, mode 0644, with past times.
fn victim(dir: &TempDir, rel: &str, body: &[u8]) -> PathBuf {
    let p = dir.write(rel, body);
    chown(&p, Some(Uid::from_raw(1234)), Some(Gid::from_raw(1234))).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    let f = File::options().write(true).open(&p).unwrap();
    f.set_times(
        FileTimes::new()
            .set_modified(UNIX_EPOCH + Duration::new(PAST_MTIME, 123_456_789))
            .set_accessed(UNIX_EPOCH + Duration::new(PAST_ATIME, 5)),
    )
    .unwrap();
    p
}

fn check_record(r: &QuarantineRecord, p: &Path, body: &[u8], method: MoveMethod) {
    assert_eq!(r.original_path, p.to_string_lossy());
    assert_eq!((r.uid, r.gid, r.mode), (1234, 1234, 0o644));
    assert_eq!(
        (r.mtime_sec, r.mtime_nsec),
        (PAST_MTIME as i64, 123_456_789)
    );
    assert_eq!((r.atime_sec, r.atime_nsec), (PAST_ATIME as i64, 5));
    assert_eq!(r.size, body.len() as u64);
    assert_eq!(r.sha256, hex::encode(Sha256::digest(body)));
    assert_eq!(r.method, method);
}

fn check_locked(qdir: &Path, r: &QuarantineRecord) {
    let qm = fs::symlink_metadata(qdir).unwrap();
    assert_eq!(qm.mode() & 0o7777, 0o700);
    let m = fs::symlink_metadata(quarantined_path(r, qdir)).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o600);
    assert_eq!((m.uid(), m.gid()), (0, 0));
    assert_eq!(m.mtime(), PAST_MTIME as i64);
}

fn check_restored(p: &Path, body: &[u8]) {
    let m = fs::symlink_metadata(p).unwrap();
    assert!(m.file_type().is_file());
    assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (1234, 1234, 0o644));
    assert_eq!(
        (m.mtime(), m.mtime_nsec()),
        (PAST_MTIME as i64, 123_456_789)
    );
    assert_eq!((m.atime(), m.atime_nsec()), (PAST_ATIME as i64, 5));
    assert_eq!(fs::read(p).unwrap(), body);
}

/// A quarantine in `qdir` for files beneath `site`.
fn q(site: &TempDir, qdir: &Path) -> Quarantine {
    Quarantine::new(qdir.to_path_buf(), vec![site.path().to_path_buf()])
}

fn roundtrip(qdir_base: &TempDir, expect: MoveMethod) {
    let site = TempDir::new("qsite");
    let body = b"<?php @eval($_POST['x']); ?>\n".repeat(1000);
    let p = victim(&site, "public_html/wp-content/uploads/x.php", &body);
    let qdir = qdir_base.path().join("quarantine");
    let qu = q(&site, &qdir);
    let r = qu.quarantine(&p, "q-0001").unwrap();
    assert!(fs::symlink_metadata(&p).is_err(), "original still present");
    check_record(&r, &p, &body, expect);
    check_locked(&qdir, &r);
    // The record survives a JSON round trip (the caller persists it).
    let json = serde_json::to_string(&r).unwrap();
    let back: QuarantineRecord = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    assert_eq!(back.recorded_root().unwrap().as_deref(), Some(site.path()));
    qu.restore(&back).unwrap();
    check_restored(&p, &body);
    assert!(fs::symlink_metadata(quarantined_path(&r, &qdir)).is_err());
}

#[test]
fn quarantine_and_restore_same_filesystem() {
    if !root_or_skip("quarantine_and_restore_same_filesystem") {
        return;
    }
    roundtrip(&TempDir::new("qdir"), MoveMethod::Rename);
}

#[test]
fn quarantine_and_restore_across_filesystems() {
    if !root_or_skip("quarantine_and_restore_across_filesystems") {
        return;
    }
    // /dev/shm is a tmpfs on Linux hosts; the temp dir normally is not.
    let shm = Path::new("/dev/shm");
    let probe = TempDir::new("probe");
    let other_fs = fs::metadata(shm)
        .map(|m| m.dev() != fs::metadata(probe.path()).map(|p| p.dev()).unwrap_or(0))
        .unwrap_or(false);
    if !other_fs {
        eprintln!("quarantine_and_restore_across_filesystems: skipped, no second filesystem");
        return;
    }
    let base = shm.join(format!(
        "svc-scan-qtest-{}-{}",
        std::process::id(),
        probe.path().file_name().unwrap().to_string_lossy()
    ));
    fs::create_dir(&base).unwrap();
    struct Cleanup(PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
    let _c = Cleanup(base.clone());
    let site = TempDir::new("qsite");
    let body = b"AddHandler application/x-httpd-php .jpg\n".to_vec();
    let p = victim(&site, "public_html/.htaccess", &body);
    let qdir = base.join("q");
    let qu = q(&site, &qdir);
    let r = qu.quarantine(&p, "x-1").unwrap();
    assert!(fs::symlink_metadata(&p).is_err());
    check_record(&r, &p, &body, MoveMethod::Copy);
    check_locked(&qdir, &r);
    qu.restore(&r).unwrap();
    check_restored(&p, &body);
    assert!(fs::symlink_metadata(quarantined_path(&r, &qdir)).is_err());
    // No temp files left beside the restored file.
    let names: Vec<_> = fs::read_dir(p.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, vec![OsString::from(".htaccess")]);
}

#[test]
fn restore_refuses_existing_path_and_keeps_copy_locked() {
    if !root_or_skip("restore_refuses_existing_path") {
        return;
    }
    let site = TempDir::new("qsite");
    let qbase = TempDir::new("qdir");
    let qdir = qbase.path().join("q");
    let p = victim(&site, "a/x.php", b"<?php system($_GET['c']);");
    let qu = q(&site, &qdir);
    let r = qu.quarantine(&p, "id1").unwrap();
    fs::write(&p, b"new content").unwrap();
    let e = qu.restore(&r).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    assert!(e.to_string().contains("refusing to restore"), "{e}");
    assert_eq!(fs::read(&p).unwrap(), b"new content");
    check_locked(&qdir, &r);
    // A second quarantine with the same id is refused.
    let p2 = victim(&site, "a/y.php", b"x");
    let e = qu.quarantine(&p2, "id1").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    assert!(p2.exists());
}

#[test]
fn restore_recreates_missing_parent_dirs() {
    if !root_or_skip("restore_recreates_missing_parent_dirs") {
        return;
    }
    let site = TempDir::new("qsite");
    let qbase = TempDir::new("qdir");
    let qdir = qbase.path().join("q");
    let body = b"<?php echo 1;";
    let p = victim(&site, "home/u/public_html/sub/deeper/x.php", body);
    let qu = q(&site, &qdir);
    let r = qu.quarantine(&p, "id2").unwrap();
    fs::remove_dir_all(site.path().join("home/u/public_html/sub")).unwrap();
    qu.restore(&r).unwrap();
    check_restored(&p, body);
    let d = fs::metadata(site.path().join("home/u/public_html/sub")).unwrap();
    assert_eq!((d.uid(), d.gid(), d.mode() & 0o777), (1234, 1234, 0o755));
}

#[test]
fn restore_refuses_tampered_copy_and_bad_records() {
    if !root_or_skip("restore_refuses_tampered_copy") {
        return;
    }
    let site = TempDir::new("qsite");
    let qbase = TempDir::new("qdir");
    let qdir = qbase.path().join("q");
    let p = victim(&site, "x.php", b"<?php eval($_POST[1]);");
    let qu = q(&site, &qdir);
    let r = qu.quarantine(&p, "id3").unwrap();
    let mut bad = r.clone();
    bad.mode = 0o100644;
    assert_eq!(
        qu.restore(&bad).unwrap_err().kind(),
        io::ErrorKind::InvalidData
    );
    let mut bad = r.clone();
    bad.stored_name = "../etc/passwd".into();
    assert_eq!(
        qu.restore(&bad).unwrap_err().kind(),
        io::ErrorKind::InvalidData
    );
    let mut bad = r.clone();
    bad.original_path_hex = Some("zz".into());
    assert_eq!(
        qu.restore(&bad).unwrap_err().kind(),
        io::ErrorKind::InvalidData
    );
    let mut bad = r.clone();
    bad.root_len = Some(3);
    assert_eq!(
        qu.restore(&bad).unwrap_err().kind(),
        io::ErrorKind::InvalidData
    );
    fs::write(quarantined_path(&r, &qdir), b"tampered").unwrap();
    let e = qu.restore(&r).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    assert!(!p.exists());
}

#[test]
fn refuses_symlinks_relative_paths_and_bad_ids() {
    let site = TempDir::new("qsite");
    let qbase = TempDir::new("qdir");
    let qdir = qbase.path().join("q");
    let qu = q(&site, &qdir);
    let target = site.write("real/target.php", b"x");
    let link = site.path().join("link.php");
    symlink(&target, &link).unwrap();
    let e = qu.quarantine(&link, "s1").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert!(
        e.to_string().contains("is a symlink, not a regular file"),
        "{e}"
    );
    assert!(link.exists() && target.exists());
    assert_eq!(
        qu.quarantine(Path::new("rel/x.php"), "s2")
            .unwrap_err()
            .kind(),
        io::ErrorKind::InvalidInput
    );
    for id in ["", ".hidden", "a/b", "x.part", &"a".repeat(129)] {
        assert_eq!(
            qu.quarantine(&target, id).unwrap_err().kind(),
            io::ErrorKind::InvalidInput,
            "{id:?}"
        );
    }
    assert!(target.exists());
    // Beneath the root no directory symlink is followed, whoever owns it.
    let dlink = site.path().join("public_html");
    symlink(site.path().join("real"), &dlink).unwrap();
    let e = qu.quarantine(&dlink.join("target.php"), "s3").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    assert!(e.to_string().contains("public_html is a symlink"), "{e}");
    assert!(target.exists());
    // Outside every watched root nothing is touched.
    let elsewhere = TempDir::new("qelse");
    let other = elsewhere.write("x.php", b"x");
    let e = qu.quarantine(&other, "s4").unwrap_err();
    assert!(
        e.to_string().contains("is not beneath a watched root"),
        "{e}"
    );
    assert!(other.exists());
    if is_root() {
        // The root itself may sit behind a symlink only root (or the daemon) owns.
        let via = TempDir::new("qvia");
        let root_link = via.path().join("site");
        symlink(site.path(), &root_link).unwrap();
        fchownat(
            None,
            &root_link,
            Some(Uid::from_raw(1234)),
            Some(Gid::from_raw(1234)),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .unwrap();
        let qv = Quarantine::new(qdir.clone(), vec![root_link.clone()]);
        let e = qv
            .quarantine(&root_link.join("real/target.php"), "s5")
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(e.to_string().contains("owned by uid 1234"), "{e}");
        assert!(target.exists());
    }
}

/// The file watcher reports resolved paths; a root configured through a symlink root owns
/// (`/home -> /data/home`) still matches them, and restore works from the record.
#[test]
fn roots_configured_through_a_root_symlink_match_resolved_paths() {
    if !root_or_skip("roots_configured_through_a_root_symlink_match_resolved_paths") {
        return;
    }
    let site = TempDir::new("qsite");
    let via = TempDir::new("qvia");
    let qbase = TempDir::new("qdir");
    let configured = via.path().join("home");
    symlink(site.path(), &configured).unwrap();
    let qu = Quarantine::new(qbase.path().join("q"), vec![configured.join("u")]);
    let p = victim(&site, "u/www/x.php", b"<?php");
    let r = qu.quarantine(&p, "via1").unwrap();
    assert_eq!(
        r.recorded_root().unwrap().as_deref(),
        Some(site.path().join("u").as_path())
    );
    qu.restore(&r).unwrap();
    check_restored(&p, b"<?php");
}

#[test]
fn fifos_and_devices_are_never_quarantined_nor_opened() {
    let site = TempDir::new("qsite");
    let qbase = TempDir::new("qdir");
    let qu = q(&site, &qbase.path().join("q"));
    let fifo = site.path().join("pipe.php");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let e = qu.quarantine(&fifo, "f1").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("FIFO"), "{e}");
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

/// The attack of issue 9: `www/s2/a/b/f.php` is quarantined, then `www/s2` becomes a
/// symlink to a directory outside the root. Restore refuses, naming `s2`, and creates
/// nothing outside.
#[test]
fn restore_refuses_a_directory_swapped_for_a_symlink() {
    if !root_or_skip("restore_refuses_a_directory_swapped_for_a_symlink") {
        return;
    }
    let site = TempDir::new("qsite");
    let outside = TempDir::new("qoutside");
    let qbase = TempDir::new("qdir");
    let qu = q(&site, &qbase.path().join("q"));
    let p = victim(&site, "s2/a/b/f.php", b"<?php system($_GET['c']);");
    let r = qu.quarantine(&p, "swap1").unwrap();
    fs::remove_dir_all(site.path().join("s2")).unwrap();
    symlink(outside.path(), site.path().join("s2")).unwrap();
    let e = qu.restore(&r).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!(
            "{} is a symlink",
            site.path().join("s2").display()
        )),
        "{msg}"
    );
    assert!(msg.contains("stays in quarantine"), "{msg}");
    assert_eq!(
        fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing outside"
    );
    check_locked(&qbase.path().join("q"), &r);
}

/// The race of issue 9: the directory is swapped right after the file was written. The
/// check after the move sees it, takes the file back into quarantine and removes the
/// directories it made, wherever the swap moved them.
#[test]
fn restore_undoes_a_directory_swapped_right_after_the_write() {
    if !root_or_skip("restore_undoes_a_directory_swapped_right_after_the_write") {
        return;
    }
    for openat2 in [true, false] {
        crate::sys::dir::disable_openat2_on_this_thread(!openat2);
        let site = TempDir::new("qsite");
        let outside = TempDir::new("qoutside");
        let qbase = TempDir::new("qdir");
        let qdir = qbase.path().join("q");
        let p = victim(&site, "s2/a/b/f.php", b"<?php system($_GET['c']);");
        let r = q(&site, &qdir).quarantine(&p, "swap2").unwrap();
        fs::remove_dir_all(site.path().join("s2/a")).unwrap();
        let (s2, moved_to, out) = (
            site.path().join("s2"),
            outside.path().join("s2"),
            outside.path().to_path_buf(),
        );
        let qu = q(&site, &qdir).with_after_move_hook(move || {
            // The attacker moves the real directory out of the root and leaves a symlink.
            fs::rename(&s2, &moved_to).unwrap();
            symlink(&out, &s2).unwrap();
        });
        let e = qu.restore(&r).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&format!(
                "{} was replaced by a symlink during the restore",
                site.path().join("s2").display()
            )),
            "{msg}"
        );
        assert!(msg.contains("put back into quarantine"), "{msg}");
        // Nothing was left outside the root: no file, no directories made by the restore.
        assert!(
            !outside.path().join("s2/a").exists(),
            "created dirs removed"
        );
        assert_eq!(fs::read_dir(outside.path().join("s2")).unwrap().count(), 0);
        check_locked(&qdir, &r);
        // Once the directory is back, the restore works.
        fs::remove_file(site.path().join("s2")).unwrap();
        fs::rename(outside.path().join("s2"), site.path().join("s2")).unwrap();
        q(&site, &qdir).restore(&r).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"<?php system($_GET['c']);");
    }
    crate::sys::dir::disable_openat2_on_this_thread(false);
}

/// Records written before `root_len` existed restore beneath the configured root that
/// contains them, and are refused when none does.
#[test]
fn old_records_use_the_configured_roots() {
    if !root_or_skip("old_records_use_the_configured_roots") {
        return;
    }
    let site = TempDir::new("qsite");
    let qbase = TempDir::new("qdir");
    let qdir = qbase.path().join("q");
    let p = victim(&site, "x/old.php", b"<?php");
    let mut r = q(&site, &qdir).quarantine(&p, "old1").unwrap();
    r.root_len = None;
    let elsewhere = TempDir::new("qelse");
    let e = Quarantine::new(qdir.clone(), vec![elsewhere.path().to_path_buf()])
        .restore(&r)
        .unwrap_err();
    assert!(e.to_string().contains("not beneath a watched root"), "{e}");
    q(&site, &qdir).restore(&r).unwrap();
    assert!(p.exists());
}

#[test]
fn non_utf8_paths_round_trip() {
    if !root_or_skip("non_utf8_paths_round_trip") {
        return;
    }
    let site = TempDir::new("qsite");
    let qbase = TempDir::new("qdir");
    let qdir = qbase.path().join("q");
    let name = OsString::from_vec(b"sh\xffell.php".to_vec());
    let p = site.path().join(&name);
    fs::write(&p, b"body").unwrap();
    chown(&p, Some(Uid::from_raw(1234)), Some(Gid::from_raw(1234))).unwrap();
    let qu = q(&site, &qdir);
    let r = qu.quarantine(&p, "u1").unwrap();
    assert!(r.original_path_hex.is_some());
    assert_eq!(r.original_path_buf().unwrap(), p);
    let back: QuarantineRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    qu.restore(&back).unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"body");
}

#[test]
fn purge_deletes_the_copy() {
    let site = TempDir::new("qsite");
    let qbase = TempDir::new("qdir");
    let qdir = qbase.path().join("q");
    let p = site.write("x.php", b"x");
    let qu = q(&site, &qdir);
    let r = qu.quarantine(&p, "p1").unwrap();
    let mut s = String::new();
    qu.open_stored(&r).unwrap().read_to_string(&mut s).unwrap();
    assert_eq!(s, "x");
    qu.purge(&r).unwrap();
    assert!(!quarantined_path(&r, &qdir).exists());
}

#[test]
fn garbage_records_are_errors_not_panics() {
    let mut x: u64 = 0xDEAD_BEEF_CAFE_F00D;
    for round in 0..500 {
        let len = round % 300;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as u8
            })
            .collect();
        let _ = serde_json::from_slice::<QuarantineRecord>(&bytes);
    }
    let r: Result<QuarantineRecord, _> = serde_json::from_str(
        r#"{"id":"a","original_path":"/x","stored_name":"a","uid":1,"gid":1,"mode":420,"size":1,
        "mtime_sec":1,"mtime_nsec":5000000000,"atime_sec":1,"atime_nsec":0,
        "sha256":"00","method":"rename"}"#,
    );
    let r = r.unwrap();
    assert_eq!(
        validate_record(&r).unwrap_err().kind(),
        io::ErrorKind::InvalidData
    );
}
