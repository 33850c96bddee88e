//! Tests against the real kernel with temporary directories. They wait on the channel with
//! a timeout (the kernel is asynchronous) but never assert on timing.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::testutil::TestDir;
use super::*;
use crate::clock::ManualClock;

const WAIT: Duration = Duration::from_secs(5);

/// The backend configurations under test.
#[derive(Debug, Clone, Copy)]
enum Mode {
    Inotify,
    FanotifyFid,
    FanotifyPlain,
}

struct Setup {
    roots: Vec<PathBuf>,
    excluded: Vec<PathBuf>,
    cap: usize,
    max_watches: usize,
    clock: Arc<ManualClock>,
}

impl Setup {
    fn new(root: &Path) -> Setup {
        Setup {
            roots: vec![root.to_path_buf()],
            excluded: Vec::new(),
            cap: 1024,
            max_watches: 100_000,
            clock: ManualClock::at_epoch_2026(),
        }
    }

    /// Starts a watcher in `mode`; `None` (with a note) when that mode is unavailable here.
    fn start(&self, mode: Mode) -> Option<(FileWatcher, Receiver<FileEvent>)> {
        let (tx, rx) = crossbeam_channel::bounded(self.cap);
        let mut opts = WatchOptions::new(tx, self.clock.clone());
        opts.excluded_dirs = self.excluded.clone();
        opts.max_watches = self.max_watches;
        opts.poll_interval = Duration::from_millis(20);
        match mode {
            Mode::Inotify => opts.backend = BackendChoice::Inotify,
            Mode::FanotifyFid => opts.backend = BackendChoice::Fanotify,
            Mode::FanotifyPlain => {
                opts.backend = BackendChoice::Fanotify;
                opts.fanotify_fid = false;
            }
        }
        match FileWatcher::start(self.roots.clone(), opts) {
            Ok(w) => {
                if matches!(mode, Mode::FanotifyFid) && !w.description().contains("FID") {
                    eprintln!(
                        "skipping {mode:?}: FID mode unavailable ({})",
                        w.description()
                    );
                    return None;
                }
                Some((w, rx))
            }
            Err(e) if !matches!(mode, Mode::Inotify) => {
                eprintln!("skipping {mode:?}: {e}");
                None
            }
            Err(e) => panic!("inotify watcher failed to start: {e}"),
        }
    }
}

/// Waits for an event matching `pred`, skipping others (fanotify may report unrelated
/// overflows on a busy filesystem).
fn wait_for(rx: &Receiver<FileEvent>, pred: impl Fn(&FileEvent) -> bool) -> Option<FileEvent> {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        match rx.recv_timeout(left) {
            Ok(ev) if pred(&ev) => return Some(ev),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

fn wait_path(rx: &Receiver<FileEvent>, path: &Path) -> Option<FileEvent> {
    wait_for(rx, |e| e.path == path)
}

/// Polls `cond` on the watcher's counters until it holds or the wait ends.
fn wait_stats(w: &FileWatcher, cond: impl Fn(&WatchStats) -> bool) -> WatchStats {
    let deadline = Instant::now() + WAIT;
    loop {
        let s = w.stats();
        if cond(&s) || Instant::now() > deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until the reconcile queue holds `dir` (pending).
fn wait_pending(w: &FileWatcher, dir: &Path) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if w.reconcile().pending_paths().iter().any(|p| p == dir) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Waits until `path` is reported either as an event or by the reconcile walk (run here,
/// as the analyzer would). Returns how it was found.
fn found(
    rx: &Receiver<FileEvent>,
    worker: &mut ReconcileWorker,
    path: &Path,
) -> Option<&'static str> {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        while let Ok(ev) = rx.recv_timeout(Duration::from_millis(20)) {
            if ev.path == path {
                return Some("event");
            }
        }
        let mut hit = false;
        while worker.run_batch(1000, Duration::from_secs(1), &mut |p, _, _| {
            hit |= p == path;
        }) {}
        if hit {
            return Some("reconcile");
        }
    }
    None
}

const ALL: [Mode; 3] = [Mode::Inotify, Mode::FanotifyFid, Mode::FanotifyPlain];
const WITH_MOVES: [Mode; 2] = [Mode::Inotify, Mode::FanotifyFid];

#[test]
fn closed_write_is_reported() {
    for mode in ALL {
        let t = TestDir::new();
        let Some((mut w, rx)) = Setup::new(t.path()).start(mode) else {
            continue;
        };
        let f = t.path().join("upload.php");
        fs::write(&f, b"<?php echo 1;").expect("write");
        // A creation seen while the file is still open for writing may be reported first.
        let ev = wait_for(&rx, |e| e.path == f && e.kind == EventKind::ClosedWrite)
            .unwrap_or_else(|| panic!("{mode:?}: no close-write for {f:?}"));
        assert_eq!(ev.observed_at, 1_000_000_000, "{mode:?}: injected clock");
        // The watcher counts an event just after handing it over: wait for the count.
        let s = wait_stats(&w, |s| s.events_emitted >= 1);
        assert!(s.events_emitted >= 1, "{mode:?}: {s:?}");
        assert_eq!(s.roots_attached, 1, "{mode:?}");
        w.stop();
        w.stop();
    }
}

#[test]
fn file_in_new_nested_directory_is_reported() {
    for mode in WITH_MOVES {
        let t = TestDir::new();
        let Some((w, rx)) = Setup::new(t.path()).start(mode) else {
            continue;
        };
        let mut worker = w.reconcile().worker();
        let deep = t.path().join("a/b/c");
        fs::create_dir_all(&deep).expect("mkdir");
        let f = deep.join("shell.php");
        fs::write(&f, b"x").expect("write");
        // A close-write, or the walk of the new directory if it came before the watch.
        assert!(
            found(&rx, &mut worker, &f).is_some(),
            "{mode:?}: {f:?} not found"
        );
        // The new directories are watched from now on.
        let g = deep.join("later.php");
        fs::write(&g, b"y").expect("write");
        let ev = wait_for(&rx, |e| e.path == g && e.kind == EventKind::ClosedWrite);
        assert!(ev.is_some(), "{mode:?}: no close-write for {g:?}");
    }
}

#[test]
fn files_moved_in_are_reported() {
    for mode in WITH_MOVES {
        let t = TestDir::new();
        let outside = TestDir::new();
        let Some((w, rx)) = Setup::new(t.path()).start(mode) else {
            continue;
        };
        let src = outside.path().join("x.php");
        fs::write(&src, b"x").expect("write");
        let dst = t.path().join("x.php");
        fs::rename(&src, &dst).expect("rename file in");
        let ev = wait_path(&rx, &dst).unwrap_or_else(|| panic!("{mode:?}: no event for {dst:?}"));
        assert_eq!(ev.kind, EventKind::MovedIn, "{mode:?}");

        // A whole directory moved in goes to the reconcile walk, which finds its files.
        let dir = outside.path().join("pkg");
        fs::create_dir_all(dir.join("sub")).expect("mkdir");
        fs::write(dir.join("sub/inner.php"), b"y").expect("write");
        let pkg = t.path().join("pkg");
        fs::rename(&dir, &pkg).expect("rename dir in");
        assert!(
            wait_pending(&w, &pkg),
            "{mode:?}: {pkg:?} not handed to the walk"
        );
        let mut worker = w.reconcile().worker();
        let inner = pkg.join("sub/inner.php");
        // fanotify may also resolve the earlier close-write to the new location.
        assert!(found(&rx, &mut worker, &inner).is_some(), "{mode:?}");
        assert!(w.stats().scans_requested >= 1, "{mode:?}");
    }
}

#[test]
fn hard_links_into_the_root_are_reported() {
    for mode in WITH_MOVES {
        let t = TestDir::new();
        let outside = TestDir::new();
        // Content written before the watcher started and never analysed.
        let src = outside.path().join("shell.php");
        fs::write(&src, b"<?php eval($_POST['x']);").expect("write");
        let Some((_w, rx)) = Setup::new(t.path()).start(mode) else {
            continue;
        };
        let dst = t.path().join("x.php");
        fs::hard_link(&src, &dst).expect("ln");
        let ev = wait_path(&rx, &dst).unwrap_or_else(|| panic!("{mode:?}: link not seen"));
        assert_eq!(ev.kind, EventKind::Linked, "{mode:?}");
        // The source may go away at once: the new name is still reported.
        let src2 = outside.path().join("two.php");
        fs::write(&src2, b"<?php system($_GET['c']);").expect("write");
        let dst2 = t.path().join("y.php");
        fs::hard_link(&src2, &dst2).expect("ln");
        fs::remove_file(&src2).expect("rm source");
        assert!(wait_path(&rx, &dst2).is_some(), "{mode:?}: second link");
        // An empty new file is not a link worth reporting; its close-write is.
        let plain = t.path().join("new.php");
        drop(fs::File::create(&plain).expect("create"));
        let ev = wait_path(&rx, &plain).unwrap_or_else(|| panic!("{mode:?}: no event"));
        assert_eq!(ev.kind, EventKind::ClosedWrite, "{mode:?}");
    }
}

/// A file whose path is 4,096 bytes or more: the path cannot go to a system call; it is
/// reported with its long path (inotify) or its nameable ancestor goes to the walk (fanotify).
#[test]
fn files_under_paths_longer_than_path_max_are_reached() {
    for mode in WITH_MOVES {
        let t = TestDir::new();
        let Some((w, rx)) = Setup::new(t.path()).start(mode) else {
            continue;
        };
        let mut worker = w.reconcile().worker();
        let name = "L".repeat(240);
        let mut fd = std::os::fd::OwnedFd::from(fs::File::open(t.path()).expect("open"));
        let mut path = t.path().to_path_buf();
        while path.as_os_str().len() < 5000 {
            nix::sys::stat::mkdirat(
                Some(std::os::fd::AsRawFd::as_raw_fd(&fd)),
                name.as_str(),
                nix::sys::stat::Mode::from_bits_truncate(0o755),
            )
            .expect("mkdirat");
            fd = crate::sys::dirstream::open_subdir(
                std::os::fd::AsFd::as_fd(&fd),
                std::ffi::OsStr::new(&name),
            )
            .expect("openat");
            path.push(&name);
        }
        let f = path.join("deep.php");
        let file = crate::sys::dirstream::openat(
            std::os::fd::AsFd::as_fd(&fd),
            std::ffi::OsStr::new("deep.php"),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        )
        .expect("create");
        std::io::Write::write_all(&mut fs::File::from(file), b"<?php eval($_POST[1]);")
            .expect("write");
        let how = found(&rx, &mut worker, &f);
        assert!(how.is_some(), "{mode:?}: long path not reached");
        eprintln!("{mode:?}: long path reached by {how:?}");
        assert_eq!(w.stats().path_errors, 0, "{mode:?}");
        // The analyzer can open it by steps.
        assert!(crate::watch::files::open_file_long(&f).is_ok());
    }
}

#[test]
fn full_channel_counts_drops_without_blocking() {
    for mode in ALL {
        let t = TestDir::new();
        let mut setup = Setup::new(t.path());
        setup.cap = 1;
        let Some((w, rx)) = setup.start(mode) else {
            continue;
        };
        for i in 0..20 {
            fs::write(t.path().join(format!("f{i}")), b"x").expect("write");
        }
        // All 20 close-writes are accounted for: one delivered, the rest refused.
        let s = wait_stats(&w, |s| s.events_emitted + s.dropped >= 20);
        assert!(s.dropped >= 1, "{mode:?}: {s:?}");
        assert!(s.events_emitted + s.dropped >= 20, "{mode:?}: {s:?}");
        assert!(rx.try_recv().is_ok(), "{mode:?}: the one slot was filled");
        while rx.try_recv().is_ok() {}
        // The thread is still alive and delivering once there is room.
        let f = t.path().join("after");
        fs::write(&f, b"x").expect("write");
        assert!(wait_path(&rx, &f).is_some(), "{mode:?}: watcher stalled");
    }
}

#[test]
fn excluded_events_never_precede_the_marker() {
    for mode in ALL {
        let t = TestDir::new();
        let state = t.path().join("state");
        fs::create_dir_all(state.join("sub")).expect("mkdir");
        let mut setup = Setup::new(t.path());
        setup.excluded = vec![state.clone()];
        let Some((w, rx)) = setup.start(mode) else {
            continue;
        };
        fs::write(state.join("db.sqlite"), b"x").expect("write");
        fs::write(state.join("sub/y"), b"x").expect("write");
        fs::create_dir(state.join("newdir")).expect("mkdir");
        fs::write(state.join("newdir/z"), b"x").expect("write");
        let marker = t.path().join("marker");
        fs::write(&marker, b"x").expect("write");
        let deadline = Instant::now() + WAIT;
        let mut found = false;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Ok(ev) = rx.recv_timeout(left) else { break };
            assert!(
                !ev.path.starts_with(&state),
                "{mode:?}: excluded path leaked: {ev:?}"
            );
            if ev.path == marker {
                found = true;
                break;
            }
        }
        assert!(found, "{mode:?}: marker not seen");
        if matches!(mode, Mode::Inotify) {
            // inotify never watches the excluded tree at all.
            assert_eq!(w.stats().watches, 1, "{mode:?}: the root only");
        } else {
            // fanotify sees the writes and filters them out.
            assert!(w.stats().filtered >= 1, "{mode:?}: {:?}", w.stats());
        }
    }
}

#[test]
fn missing_root_is_attached_on_rescan() {
    for mode in ALL {
        let t = TestDir::new();
        let late = t.path().join("late");
        let Some((w, rx)) = Setup::new(&late).start(mode) else {
            continue;
        };
        assert_eq!(w.stats().roots_attached, 0, "{mode:?}");
        assert!(w.stats().root_attach_failures >= 1, "{mode:?}");
        fs::create_dir(&late).expect("mkdir");
        fs::write(late.join("early"), b"x").expect("write");
        w.rescan_roots();
        assert!(wait_pending(&w, &late), "{mode:?}: no scan for {late:?}");
        let f = late.join("f");
        fs::write(&f, b"x").expect("write");
        assert!(
            wait_path(&rx, &f).is_some(),
            "{mode:?}: no event after attach"
        );
    }
}

#[test]
fn missing_root_is_retried_on_the_clock() {
    for mode in [Mode::Inotify, Mode::FanotifyFid] {
        let t = TestDir::new();
        let late = t.path().join("late");
        let setup = Setup::new(&late);
        let clock = setup.clock.clone();
        let Some((w, rx)) = setup.start(mode) else {
            continue;
        };
        fs::create_dir(&late).expect("mkdir");
        // Nothing happens until the injected clock passes the retry interval.
        assert!(
            rx.recv_timeout(Duration::from_millis(100)).is_err(),
            "{mode:?}"
        );
        assert_eq!(w.stats().roots_attached, 0, "{mode:?}");
        assert!(w.reconcile().pending_paths().is_empty());
        clock.advance_secs(5);
        assert!(wait_pending(&w, &late), "{mode:?}: not retried");
        let f = late.join("f");
        fs::write(&f, b"x").expect("write");
        let ev = wait_path(&rx, &f).unwrap_or_else(|| panic!("{mode:?}: no event"));
        assert_eq!(ev.observed_at, 6_000_000_000);
    }
}

#[test]
fn removed_root_is_reattached_when_it_returns() {
    for mode in ALL {
        let t = TestDir::new();
        let root = t.path().join("www");
        fs::create_dir(&root).expect("mkdir");
        let Some((w, rx)) = Setup::new(&root).start(mode) else {
            continue;
        };
        fs::remove_dir_all(&root).expect("rm root");
        w.rescan_roots();
        let s = wait_stats(&w, |s| s.roots_attached == 0);
        assert_eq!(s.roots_attached, 0, "{mode:?}: {s:?}");
        fs::create_dir(&root).expect("mkdir again");
        w.rescan_roots();
        assert!(wait_pending(&w, &root), "{mode:?}: not reattached");
        let f = root.join("f");
        fs::write(&f, b"x").expect("write");
        assert!(
            wait_path(&rx, &f).is_some(),
            "{mode:?}: no event after reattach"
        );
    }
}

#[test]
fn inotify_watch_limit_is_enforced_and_counted() {
    let t = TestDir::new();
    for i in 0..5 {
        fs::create_dir(t.path().join(format!("d{i}"))).expect("mkdir");
    }
    let mut setup = Setup::new(t.path());
    setup.max_watches = 3;
    let (w, _rx) = setup.start(Mode::Inotify).expect("inotify");
    let s = w.stats();
    assert_eq!(s.watches, 3, "{s:?}");
    assert_eq!(s.watch_limit_refused, 3, "{s:?}");
}

#[test]
fn refused_events_hand_their_directory_to_the_walk() {
    for mode in ALL {
        let t = TestDir::new();
        // Watched from the start (a directory created now could be watched only after its
        // files were written).
        let sub = t.path().join("sub");
        fs::create_dir(&sub).expect("mkdir");
        let mut setup = Setup::new(t.path());
        setup.cap = 1;
        let Some((w, rx)) = setup.start(mode) else {
            continue;
        };
        for i in 0..20 {
            fs::write(sub.join(format!("f{i}")), b"x").expect("write");
        }
        let s = wait_stats(&w, |s| s.dropped >= 1);
        assert!(s.dropped >= 1, "{mode:?}: {s:?}");
        let pending = w.reconcile().pending_paths();
        assert!(
            pending.iter().any(|p| sub.starts_with(p)),
            "{mode:?}: {pending:?}"
        );
        drop(rx);
    }
}

#[test]
fn auto_prefers_fanotify_when_it_works() {
    let t = TestDir::new();
    let forced = Setup::new(t.path()).start(Mode::FanotifyPlain).is_some();
    let (tx, _rx) = crossbeam_channel::bounded(8);
    let opts = WatchOptions::new(tx, ManualClock::at_epoch_2026());
    let w = FileWatcher::start(vec![t.path().to_path_buf()], opts).expect("auto");
    let want = if forced {
        Backend::Fanotify
    } else {
        Backend::Inotify
    };
    assert_eq!(w.backend(), want, "{}", w.description());
    eprintln!("auto backend on this host: {}", w.description());
}

#[test]
fn backend_choice_parses_and_rejects_garbage() {
    assert_eq!("auto".parse::<BackendChoice>(), Ok(BackendChoice::Auto));
    assert_eq!(
        " Inotify ".parse::<BackendChoice>(),
        Ok(BackendChoice::Inotify)
    );
    assert_eq!(
        "FANOTIFY".parse::<BackendChoice>(),
        Ok(BackendChoice::Fanotify)
    );
    assert!("".parse::<BackendChoice>().is_err());
    let mut seed = 7u64;
    for _ in 0..2_000 {
        let len = (seed % 24) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                (seed >> 33) as u8
            })
            .collect();
        let s = String::from_utf8_lossy(&bytes);
        if let Err(e) = s.parse::<BackendChoice>() {
            assert!(!e.to_string().is_empty());
        }
    }
}

#[test]
#[ignore = "benchmark: cargo test --release -- --ignored --nocapture bench_"]
fn bench_close_write_throughput() {
    const N: u64 = 5_000;
    for mode in [Mode::Inotify, Mode::FanotifyFid, Mode::FanotifyPlain] {
        let t = TestDir::new();
        let mut setup = Setup::new(t.path());
        setup.cap = 2 * N as usize;
        let Some((w, _rx)) = setup.start(mode) else {
            continue;
        };
        let start = Instant::now();
        for i in 0..N {
            fs::write(t.path().join(format!("f{i}")), b"x").expect("write");
        }
        let wrote = start.elapsed();
        let s = wait_stats(&w, |s| s.events_emitted >= N);
        let total = start.elapsed();
        eprintln!(
            "{mode:?}: {N} files written in {wrote:?}; {} events delivered after {total:?} \
             ({:.0} events/s end to end; kernel events read {}, dropped {})",
            s.events_emitted,
            s.events_emitted as f64 / total.as_secs_f64(),
            s.events_read,
            s.dropped
        );
    }
}

/// Rescan throughput on one tree of 100,000 small `.php` files in 8 directories, side by side
/// in the same run: the reconcile walk (descriptors, batches of 512 entries, files opened
/// relative to their directory) against the rescan it replaces (recursive `read_dir`, files
/// scanned by path). Both scan every file with the shipped signatures. Prints files/s.
#[test]
#[ignore = "benchmark: cargo test --release --lib -- --ignored --nocapture bench_"]
fn bench_reconcile_rescan() {
    use crate::scan::signatures::SignatureSet;
    const DIRS: usize = 8;
    const PER: usize = 12_500;
    let sigs = SignatureSet::shipped().expect("signatures");
    let t = TestDir::new();
    for d in 0..DIRS {
        let dir = t.path().join(format!("p{d}"));
        fs::create_dir(&dir).expect("mkdir");
        for i in 0..PER {
            fs::write(dir.join(format!("f{i}.php")), b"<?php echo \"hello\";\n").expect("write");
        }
    }
    fs::write(
        t.path().join("p3/shell.php"),
        b"<?php @eval($_POST['cmd']); ?>",
    )
    .expect("write");
    let total = DIRS * PER + 1;
    for round in 0..2 {
        // Old: read_dir recursion, scan by path.
        let start = Instant::now();
        let mut scanned = 0usize;
        let mut hits = 0usize;
        let mut stack = vec![t.path().to_path_buf()];
        while let Some(dir) = stack.pop() {
            for e in fs::read_dir(&dir).expect("read_dir").flatten() {
                let ft = e.file_type().expect("type");
                if ft.is_dir() {
                    stack.push(e.path());
                } else if ft.is_file() {
                    scanned += 1;
                    hits += sigs.scan_file(&e.path()).expect("scan").len();
                }
            }
        }
        let old = start.elapsed();
        assert_eq!((scanned, hits), (total, 1));

        // New: the reconcile worker.
        let r = Reconcile::new(ManualClock::at_epoch_2026(), Vec::new());
        r.set_roots(vec![t.path().to_path_buf()]);
        let mut w = r.worker();
        r.request(t.path());
        let start = Instant::now();
        let mut scanned = 0usize;
        let mut hits = 0usize;
        let mut batches = 0usize;
        while w.run_batch(512, Duration::from_millis(50), &mut |p, dir, name| {
            let f = crate::watch::files::open_file_at(dir, name).expect("open");
            scanned += 1;
            hits += sigs.scan_open_file(p, &f).expect("scan").len();
        }) {
            batches += 1;
        }
        let new = start.elapsed();
        assert_eq!((scanned, hits), (total, 1));
        eprintln!(
            "round {round}: {total} files: reconcile walk {:.0} files/s ({new:?}, {batches} \
             batches) | read_dir rescan {:.0} files/s ({old:?})",
            total as f64 / new.as_secs_f64(),
            total as f64 / old.as_secs_f64(),
        );
    }
}
