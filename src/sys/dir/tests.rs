//! `sys::dir` against a temporary tree. Every resolution test runs twice: with `openat2` and
//! with the component-by-component fallback of kernels without it. Ownership tests need
//! root (they run as root here) and return early with a message otherwise.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

use super::*;
use crate::scan::testdir::TempDir;

fn is_root() -> bool {
    Uid::effective().is_root()
}

fn both(test: impl Fn()) {
    disable_openat2_on_this_thread(false);
    test();
    disable_openat2_on_this_thread(true);
    test();
    disable_openat2_on_this_thread(false);
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// Gives a symlink to uid 1234 (as a user would have made it).
fn user_owned_link(p: &Path) {
    nix::unistd::fchownat(
        None,
        p,
        Some(Uid::from_raw(1234)),
        Some(Gid::from_raw(1234)),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .unwrap();
}

#[test]
fn child_and_open_beneath_refuse_symlinks_naming_the_component() {
    both(|| {
        let t = TempDir::new("dir-beneath");
        t.write("root/a/b/f.txt", b"x");
        t.write("outside/b/f.txt", b"secret");
        symlink(t.path().join("outside"), t.path().join("root/link")).unwrap();
        let root = Dir::open_daemon(&t.path().join("root")).unwrap();
        let b = root.open_beneath(Path::new("a/b")).unwrap();
        assert_eq!(b.path(), t.path().join("root/a/b"));
        let mut s = String::new();
        b.open_regular(os("f.txt"))
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "x");

        let e = root.open_beneath(Path::new("link/b")).unwrap_err();
        assert!(
            matches!(&e, Error::Symlink { path } if path == &t.path().join("root/link")),
            "{e}"
        );
        assert!(e.to_string().contains("root/link is a symlink"), "{e}");
        let e = root.child(os("link")).unwrap_err();
        assert!(matches!(e, Error::Symlink { .. }), "{e}");
        let e = root
            .open_regular_beneath(Path::new("link/b/f.txt"))
            .unwrap_err();
        assert!(matches!(e, Error::Symlink { .. }), "{e}");
        // A file where a directory is expected is named too.
        let e = root.open_beneath(Path::new("a/b/f.txt/c")).unwrap_err();
        assert!(
            matches!(&e, Error::NotDirectory { path } if path.ends_with("a/b/f.txt")),
            "{e}"
        );
        let e = root.open_beneath(Path::new("a/missing/c")).unwrap_err();
        assert!(matches!(e, Error::NotFound { .. }), "{e}");
    });
}

#[test]
fn names_and_relative_paths_cannot_escape() {
    let t = TempDir::new("dir-names");
    let root = Dir::open_daemon(t.path()).unwrap();
    for bad in ["..", ".", "", "a/b"] {
        assert!(
            matches!(root.lstat(os(bad)), Err(Error::InvalidPath { .. })),
            "{bad:?}"
        );
        assert!(matches!(
            root.create_file(os(bad), 0o600),
            Err(Error::InvalidPath { .. })
        ));
    }
    for bad in ["../x", "/etc", "a/../../x"] {
        assert!(
            matches!(
                root.open_beneath(Path::new(bad)),
                Err(Error::InvalidPath { .. })
            ),
            "{bad:?}"
        );
    }
    assert_eq!(
        root.open_beneath(Path::new("")).unwrap().info().unwrap(),
        root.info().unwrap()
    );
}

#[test]
fn only_regular_files_are_opened() {
    both(|| {
        let t = TempDir::new("dir-regular");
        t.write("d/f", b"data");
        let d = Dir::open_daemon(&t.path().join("d")).unwrap();
        nix::unistd::mkfifo(&t.path().join("d/fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        symlink(t.path().join("d/f"), t.path().join("d/link")).unwrap();
        fs::create_dir(t.path().join("d/sub")).unwrap();
        // A FIFO is refused at once (no writer: a blocking open would wait forever).
        let e = d.open_regular(os("fifo")).unwrap_err();
        assert!(
            matches!(
                e,
                Error::NotRegular {
                    kind: Kind::Fifo,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("is a FIFO, not a regular file"),
            "{e}"
        );
        assert!(matches!(
            d.open_regular(os("link")),
            Err(Error::NotRegular {
                kind: Kind::Symlink,
                ..
            })
        ));
        assert!(matches!(
            d.open_regular(os("sub")),
            Err(Error::NotRegular {
                kind: Kind::Dir,
                ..
            })
        ));
        assert!(matches!(
            d.open_regular(os("missing")),
            Err(Error::NotFound { .. })
        ));
        let dev = Dir::open_daemon(Path::new("/dev")).unwrap();
        assert!(matches!(
            dev.open_regular(os("null")),
            Err(Error::NotRegular {
                kind: Kind::CharDevice,
                ..
            })
        ));
        let mut s = String::new();
        d.open_regular(os("f"))
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "data");
    });
}

#[test]
fn trusted_walk_follows_only_root_owned_symlinks() {
    if !is_root() {
        eprintln!("trusted_walk_follows_only_root_owned_symlinks: skipped, needs root");
        return;
    }
    both(|| {
        let t = TempDir::new("dir-trusted");
        t.write("real/site/f.php", b"<?php");
        t.write("elsewhere/f.php", b"secret");
        let root_link = t.path().join("rootlink");
        symlink("real", &root_link).unwrap();
        let user_link = t.path().join("userlink");
        symlink(t.path().join("elsewhere"), &user_link).unwrap();
        user_owned_link(&user_link);

        let d = Dir::walk_trusted(&root_link.join("site")).unwrap();
        assert_eq!(
            d.info().unwrap().ino,
            fs::metadata(t.path().join("real/site")).unwrap().ino()
        );
        let e = Dir::walk_trusted(&user_link).unwrap_err();
        assert!(
            matches!(&e, Error::UntrustedSymlink { uid: 1234, path } if path == &user_link),
            "{e}"
        );
        // Files: an intermediate user-owned symlink is refused, a root-owned one followed.
        assert!(open_regular_trusted(&root_link.join("site/f.php"), false).is_ok());
        let e = open_regular_trusted(&user_link.join("f.php"), false).unwrap_err();
        assert!(matches!(e, Error::UntrustedSymlink { .. }), "{e}");
        // The last component: refused unless following, and then only a trusted link.
        let flink = t.path().join("real/site/link.php");
        symlink("f.php", &flink).unwrap();
        assert!(matches!(
            open_regular_trusted(&flink, false),
            Err(Error::Symlink { .. })
        ));
        let mut s = String::new();
        open_regular_trusted(&flink, true)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "<?php");
        user_owned_link(&flink);
        assert!(matches!(
            open_regular_trusted(&flink, true),
            Err(Error::UntrustedSymlink { .. })
        ));
        // Loops end.
        let a = t.path().join("loop_a");
        symlink("loop_b", &a).unwrap();
        symlink("loop_a", t.path().join("loop_b")).unwrap();
        assert!(matches!(
            Dir::walk_trusted(&a),
            Err(Error::TooManyLinks { .. })
        ));
        // Relative paths are refused by the walk.
        assert!(matches!(
            Dir::walk_trusted(Path::new("rel/dir")),
            Err(Error::InvalidPath { .. })
        ));
    });
}

#[test]
fn create_file_and_mkdir_set_exact_modes_and_never_follow() {
    let t = TempDir::new("dir-create");
    let d = Dir::open_daemon(t.path()).unwrap();
    let f = d.create_file(os("new"), 0o640).unwrap();
    assert_eq!(f.metadata().unwrap().mode() & 0o7777, 0o640);
    assert!(matches!(
        d.create_file(os("new"), 0o600),
        Err(Error::Exists { .. })
    ));
    // A dangling symlink at the name is not followed to create its target.
    symlink(t.path().join("target"), t.path().join("dangling")).unwrap();
    assert!(matches!(
        d.create_file(os("dangling"), 0o600),
        Err(Error::Exists { .. })
    ));
    assert!(!t.path().join("target").exists());
    let sub = d.mkdir(os("sub"), 0o750, None).unwrap();
    assert_eq!(sub.path(), t.path().join("sub"));
    let m = fs::metadata(t.path().join("sub")).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o750);
    if is_root() {
        d.mkdir(os("owned"), 0o755, Some((1234, 2345))).unwrap();
        let m = fs::metadata(t.path().join("owned")).unwrap();
        assert_eq!((m.uid(), m.gid()), (1234, 2345));
    }
    let deep = t.path().join("x/y/z");
    Dir::create_daemon(&deep, 0o700).unwrap();
    assert_eq!(fs::metadata(&deep).unwrap().mode() & 0o7777, 0o700);
    assert_eq!(
        fs::metadata(t.path().join("x")).unwrap().mode() & 0o7777,
        0o755
    );
    fs::set_permissions(&deep, fs::Permissions::from_mode(0o755)).unwrap();
    Dir::create_daemon(&deep, 0o700).unwrap();
    assert_eq!(fs::metadata(&deep).unwrap().mode() & 0o7777, 0o700);
}

#[test]
fn entries_are_listed_and_bounded() {
    let t = TempDir::new("dir-entries");
    t.write("a", b"");
    t.write("b/c", b"");
    symlink("a", t.path().join("l")).unwrap();
    let d = Dir::open_daemon(t.path()).unwrap();
    let (mut all, cut) = d.entries(10).unwrap();
    assert!(!cut);
    all.sort_by(|x, y| x.name.cmp(&y.name));
    let names: Vec<_> = all
        .iter()
        .map(|e| e.name.to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["a", "b", "l"]);
    assert_eq!(all[1].kind, Some(Kind::Dir));
    assert_eq!(all[2].kind, Some(Kind::Symlink));
    let (two, cut) = d.entries(2).unwrap();
    assert_eq!((two.len(), cut), (2, true));
}

fn past(f: &File) {
    set_times(f, (1_600_000_500, 5), (1_600_000_000, 123_456_789)).unwrap();
}

fn check_moved(p: &Path, body: &[u8], uid: u32) {
    let m = fs::symlink_metadata(p).unwrap();
    assert!(m.is_file());
    assert_eq!(fs::read(p).unwrap(), body);
    assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (uid, uid, 0o640));
    assert_eq!((m.mtime(), m.mtime_nsec()), (1_600_000_000, 123_456_789));
}

fn move_case(from_base: &Path, to_base: &Path, expect: MoveMethod) {
    let uid = if is_root() {
        1234
    } else {
        Uid::effective().as_raw()
    };
    let from = Dir::create_daemon(&from_base.join("spool/new"), 0o755).unwrap();
    let to = Dir::create_daemon(&to_base.join("spool/cur"), 0o755).unwrap();
    let f = from.create_file(os("msg"), 0o640).unwrap();
    fs::write(from_base.join("spool/new/msg"), b"mail body").unwrap();
    if is_root() {
        set_owner(&f, uid, uid).unwrap();
        set_mode(&f, 0o640).unwrap();
    }
    past(&f);
    let before = FileInfo::of(&f).unwrap();
    let m = move_file(
        &from,
        os("msg"),
        &to,
        os("msg:2,S"),
        Some((before.dev, before.ino)),
    )
    .unwrap();
    assert_eq!(m.method, expect);
    assert_eq!(m.before.size, 9);
    assert!(!from_base.join("spool/new/msg").exists());
    check_moved(&to_base.join("spool/cur/msg:2,S"), b"mail body", uid);
    // Nothing is replaced.
    let g = from.create_file(os("msg"), 0o640).unwrap();
    drop(g);
    assert!(matches!(
        move_file(&from, os("msg"), &to, os("msg:2,S"), None),
        Err(Error::Exists { .. })
    ));
    assert!(from_base.join("spool/new/msg").exists());
    // A FIFO is not moved; neither is a file that is not the one expected.
    nix::unistd::mkfifo(
        &from_base.join("spool/new/p"),
        Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    assert!(matches!(
        move_file(&from, os("p"), &to, os("p"), None),
        Err(Error::NotRegular { .. })
    ));
    assert!(matches!(
        move_file(&from, os("msg"), &to, os("other"), Some((0, 0))),
        Err(Error::Changed { .. })
    ));
    // No temporary files are left behind.
    let (names, _) = to.entries(10).unwrap();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn move_within_a_filesystem_renames() {
    let t = TempDir::new("dir-move");
    move_case(t.path(), t.path(), MoveMethod::Rename);
}

#[test]
fn move_across_filesystems_copies_keeping_owner_mode_and_times() {
    let t = TempDir::new("dir-move-x");
    let shm = Path::new("/dev/shm");
    let other = fs::metadata(shm)
        .map(|m| m.dev() != fs::metadata(t.path()).map(|p| p.dev()).unwrap_or(0))
        .unwrap_or(false);
    if !other {
        eprintln!("move_across_filesystems: skipped, no second filesystem");
        return;
    }
    let base = shm.join(format!(
        "svc-dir-move-{}-{}",
        std::process::id(),
        t.path().file_name().unwrap().to_string_lossy()
    ));
    fs::create_dir(&base).unwrap();
    struct Cleanup(PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
    let _c = Cleanup(base.clone());
    move_case(t.path(), &base, MoveMethod::Copy);
}

#[test]
fn descent_creates_beneath_verifies_and_undoes() {
    both(|| {
        let t = TempDir::new("dir-descent");
        fs::create_dir_all(t.path().join("root/s2")).unwrap();
        fs::create_dir_all(t.path().join("outside")).unwrap();
        let owner = is_root().then_some((1234, 1234));
        let root = Dir::open_daemon(&t.path().join("root")).unwrap();
        let c = Create { mode: 0o755, owner };
        let d = Descent::new(root, Path::new("s2/a/b"), Some(c)).unwrap();
        assert_eq!(d.dir().path(), t.path().join("root/s2/a/b"));
        assert_eq!(d.created().len(), 2);
        d.verify().unwrap();
        if let Some((uid, _)) = owner {
            assert_eq!(fs::metadata(t.path().join("root/s2/a")).unwrap().uid(), uid);
        }
        // Swap s2 for a symlink: verify names it; the held descriptors still work, and the
        // directories made are removed wherever the swap moved them.
        fs::rename(t.path().join("root/s2"), t.path().join("outside/s2")).unwrap();
        symlink(t.path().join("outside"), t.path().join("root/s2")).unwrap();
        let e = d.verify().unwrap_err();
        assert!(
            matches!(&e, Error::Changed { path, what } if path == &t.path().join("root/s2") && what.contains("symlink")),
            "{e}"
        );
        d.remove_created();
        assert!(!t.path().join("outside/s2/a").exists());
        // A fresh descent refuses the symlink and creates nothing outside.
        let root = Dir::open_daemon(&t.path().join("root")).unwrap();
        let e = Descent::new(root, Path::new("s2/x/y"), Some(c))
            .err()
            .unwrap();
        assert!(matches!(e, Error::Symlink { .. }), "{e}");
        assert!(!t.path().join("outside/x").exists());
    });
}

#[test]
fn messages_escape_control_and_bidi_characters() {
    let e = Error::Symlink {
        path: PathBuf::from("/www/a\x1b[31m\n\u{202e}b"),
    };
    let s = e.to_string();
    assert!(
        !s.contains('\x1b') && !s.contains('\n') && !s.contains('\u{202e}'),
        "{s}"
    );
    assert!(s.contains("\\x1b[31m\\n\\u{202e}b"), "{s}");
    let io: io::Error = e.into();
    assert_eq!(io.kind(), io::ErrorKind::PermissionDenied);
}
