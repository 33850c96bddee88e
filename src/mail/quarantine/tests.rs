use super::*;
use crate::scan::testdir::TempDir;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

const ID: &str = "1tAbCd-000123-Xy";

struct Fx {
    t: TempDir,
    q: MailQuarantine,
    store: Store,
}

fn fx(tag: &str) -> Fx {
    let t = TempDir::new(tag);
    for (rel, body) in [
        (format!("spool/input/r/{ID}-H"), "header"),
        (format!("spool/input/r/{ID}-D"), "data"),
        (format!("spool/msglog/r/{ID}"), "log"),
    ] {
        let p = t.write(&rel, body.as_bytes());
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    }
    let store = Store::open(&t.path().join("svc.db")).unwrap();
    let q = MailQuarantine::new(
        t.path().join("mq"),
        store.clone(),
        crate::clock::SystemClock::shared(),
    );
    Fx { t, q, store }
}

fn candidates() -> Vec<Candidate> {
    vec![
        Candidate {
            role: "H",
            dir: "input/r".into(),
            name: format!("{ID}-H"),
            required: true,
        },
        Candidate {
            role: "J",
            dir: "input/r".into(),
            name: format!("{ID}-J"),
            required: false,
        },
        Candidate {
            role: "msglog",
            dir: "msglog/r".into(),
            name: ID.into(),
            required: false,
        },
        Candidate {
            role: "D",
            dir: "input/r".into(),
            name: format!("{ID}-D"),
            required: true,
        },
    ]
}

fn meta() -> Meta {
    Meta {
        sender: "a@example.com".into(),
        recipients: vec!["b@example.org".into()],
        ..Meta::default()
    }
}

#[test]
fn quarantine_release_delete_round_trip_keeps_attributes() {
    let f = fx("mq-round");
    let spool = f.t.path().join("spool");
    let h = spool.join(format!("input/r/{ID}-H"));
    let before = std::fs::metadata(&h).unwrap();
    let id =
        f.q.quarantine(&spool, Mta::Exim, ID, &candidates(), None, &meta())
            .unwrap();
    assert!(!h.exists());
    let stored = f.t.path().join("mq").join(&id).join("H");
    assert_eq!(std::fs::read(&stored).unwrap(), b"header");
    let e = f.q.get(&id).unwrap();
    assert_eq!(e.state, "quarantined");
    assert_eq!(e.files.len(), 3);
    let (list, total) = f.q.list(0, 10).unwrap();
    assert_eq!((list.len(), total), (1, 1));

    f.q.release(&id).unwrap();
    let after = std::fs::metadata(&h).unwrap();
    assert_eq!(std::fs::read(&h).unwrap(), b"header");
    assert_eq!(
        (
            after.uid(),
            after.gid(),
            after.mode(),
            after.mtime(),
            after.mtime_nsec()
        ),
        (
            before.uid(),
            before.gid(),
            before.mode(),
            before.mtime(),
            before.mtime_nsec()
        )
    );
    assert!(!f.t.path().join("mq").join(&id).exists());
    assert_eq!(f.q.get(&id).unwrap().state, "released");
    assert!(matches!(f.q.release(&id), Err(QError::State(_))));
    assert_eq!(f.q.released_queue_ids(), [ID]);

    let id2 =
        f.q.quarantine(&spool, Mta::Exim, ID, &candidates(), None, &meta())
            .unwrap();
    f.q.delete(&id2).unwrap();
    assert!(!f.t.path().join("mq").join(&id2).exists());
    assert!(!spool.join(format!("input/r/{ID}-D")).exists());
    assert!(matches!(f.q.release("ffff"), Err(QError::NotFound)));
    assert!(matches!(f.q.release("../x"), Err(QError::NotFound)));
    f.store.close();
}

#[test]
fn release_never_replaces_a_spool_file() {
    let f = fx("mq-conflict");
    let spool = f.t.path().join("spool");
    let id =
        f.q.quarantine(&spool, Mta::Exim, ID, &candidates(), None, &meta())
            .unwrap();
    std::fs::write(spool.join(format!("input/r/{ID}-D")), "new").unwrap();
    assert!(matches!(f.q.release(&id), Err(QError::Conflict(_))));
    assert_eq!(f.q.get(&id).unwrap().state, "partial");
    assert_eq!(
        std::fs::read(spool.join(format!("input/r/{ID}-D"))).unwrap(),
        b"new"
    );
    f.store.close();
}

#[test]
fn a_lock_held_by_the_mta_defers_the_quarantine() {
    let f = fx("mq-lock");
    let spool = f.t.path().join("spool");
    let d = spool.join(format!("input/r/{ID}-D"));
    // Another open file description holding a write lock (as Exim's delivery does).
    let holder = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&d)
        .unwrap();
    let wr = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    nix::fcntl::fcntl(holder.as_raw_fd(), nix::fcntl::FcntlArg::F_OFD_SETLK(&wr)).unwrap();
    let mine = std::fs::File::open(&d).unwrap();
    assert!(matches!(
        f.q.quarantine(&spool, Mta::Exim, ID, &candidates(), Some(&mine), &meta()),
        Err(QError::Locked)
    ));
    drop(holder);
    let mine = std::fs::File::open(&d).unwrap();
    f.q.quarantine(&spool, Mta::Exim, ID, &candidates(), Some(&mine), &meta())
        .unwrap();
    f.store.close();
}

#[test]
fn recovery_finishes_interrupted_operations_from_either_place() {
    let f = fx("mq-recover");
    let spool = f.t.path().join("spool");
    let id =
        f.q.quarantine(&spool, Mta::Exim, ID, &candidates(), None, &meta())
            .unwrap();
    // A crash during a release: the body is back in the spool, the header is not, and a
    // cross-filesystem copy left a partial file.
    let entry = f.t.path().join("mq").join(&id);
    std::fs::rename(entry.join("D"), spool.join(format!("input/r/{ID}-D"))).unwrap();
    std::fs::write(spool.join("input/r/.svc-move-0011.part"), "x").unwrap();
    let now = jiff::Timestamp::now();
    let id2 = id.clone();
    f.store
        .write(move |c| sql::set_state(c, &id2, &["quarantined"], "releasing", None, now))
        .unwrap();
    assert_eq!(f.q.recover(), 0);
    assert_eq!(f.q.get(&id).unwrap().state, "released");
    assert!(spool.join(format!("input/r/{ID}-H")).exists());
    assert!(!spool.join("input/r/.svc-move-0011.part").exists());

    // A crash during a quarantine: the header moved, the body is in both places (a copy
    // renamed into quarantine whose source was not unlinked yet).
    let id =
        f.q.quarantine(&spool, Mta::Exim, ID, &candidates(), None, &meta())
            .unwrap();
    let entry = f.t.path().join("mq").join(&id);
    std::fs::copy(entry.join("D"), spool.join(format!("input/r/{ID}-D"))).unwrap();
    std::fs::rename(entry.join("msglog"), spool.join(format!("msglog/r/{ID}"))).unwrap();
    let id2 = id.clone();
    f.store
        .write(move |c| sql::set_state(c, &id2, &["quarantined"], "quarantining", None, now))
        .unwrap();
    assert_eq!(f.q.recover(), 0);
    assert_eq!(f.q.get(&id).unwrap().state, "quarantined");
    for n in ["H", "D", "msglog"] {
        assert!(entry.join(n).exists(), "{n}");
    }
    assert!(!spool.join(format!("input/r/{ID}-D")).exists());
    assert!(!spool.join(format!("msglog/r/{ID}")).exists());
    f.store.close();
}

/// Exim with `message_logs = false` has no `msglog/` directory: the message is
/// quarantined by its `-H` and `-D` files and released without a message log.
#[test]
fn a_spool_without_message_logs_quarantines_and_releases() {
    let f = fx("mq-nolog");
    let spool = f.t.path().join("spool");
    std::fs::remove_dir_all(spool.join("msglog")).unwrap();
    let id =
        f.q.quarantine(&spool, Mta::Exim, ID, &candidates(), None, &meta())
            .unwrap();
    let e = f.q.get(&id).unwrap();
    let roles: Vec<&str> = e.files.iter().map(|f| f.role.as_str()).collect();
    assert_eq!(roles, ["H", "D"]);
    assert!(!spool.join(format!("input/r/{ID}-H")).exists());
    f.q.release(&id).unwrap();
    assert_eq!(
        std::fs::read(spool.join(format!("input/r/{ID}-H"))).unwrap(),
        b"header"
    );
    assert!(!spool.join("msglog").exists(), "no message log is made up");
    let id =
        f.q.quarantine(&spool, Mta::Exim, ID, &candidates(), None, &meta())
            .unwrap();
    f.q.delete(&id).unwrap();
    assert!(!spool.join(format!("input/r/{ID}-D")).exists());
    f.store.close();
}

/// A message log quarantined with its message is put back although its directory was
/// removed meanwhile: the directory is made again as Exim makes it.
#[test]
fn release_makes_a_removed_message_log_directory_again() {
    let f = fx("mq-logdir");
    let spool = f.t.path().join("spool");
    let id =
        f.q.quarantine(&spool, Mta::Exim, ID, &candidates(), None, &meta())
            .unwrap();
    std::fs::remove_dir_all(spool.join("msglog")).unwrap();
    f.q.release(&id).unwrap();
    assert_eq!(
        std::fs::read(spool.join(format!("msglog/r/{ID}"))).unwrap(),
        b"log"
    );
    let m = std::fs::symlink_metadata(spool.join("msglog/r")).unwrap();
    assert!(m.is_dir());
    assert_eq!(m.mode() & 0o7777, 0o750);
    assert_eq!(f.q.get(&id).unwrap().state, "released");
    f.store.close();
}
