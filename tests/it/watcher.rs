//! File watcher evasions through the real binary (issue 9, item 2): hard links into the web
//! root, paths of 4,096 bytes and more, and a flood that overflows the kernel queue. Each
//! runs on the default backend (fanotify here) and on `files.backend = "inotify"`.

use crate::common::*;

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

const WEBSHELL: &str = "<?php\n// innocent looking header\n@eval($_POST['cmd']);\n?>\n";

/// Starts a daemon watching `{dir}/www` with `backend` (`None` = the default, auto).
fn start(tag: &str, backend: Option<&str>) -> Daemon {
    let dir = temp_dir(tag);
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::create_dir_all(dir.join("fixture")).unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let backend = backend
        .map(|b| format!("backend = {b:?}\n"))
        .unwrap_or_default();
    std::fs::write(
        &config,
        format!(
            "{}[files]\nwatch = [{www:?}]\n{backend}[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\nroot = {root:?}\n",
            base_config(&state),
            www = dir.join("www").display().to_string(),
            root = dir.join("fixture").display().to_string(),
        ),
    )
    .unwrap();
    Daemon::start_with(dir, config, state, &[])
}

/// The `files` component row.
fn files_component(d: &Daemon) -> serde_json::Value {
    let comps = d.get("/api/v1/components", READ).expect(200).json();
    comps["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "files")
        .cloned()
        .expect("files component")
}

/// Waits up to `secs` for an active finding on `path`.
fn wait_finding_on(d: &Daemon, path: &Path, secs: u64) -> serde_json::Value {
    let want = path.display().to_string();
    wait_until(secs, "the finding", || {
        let v = d.get("/api/v1/findings", READ).expect(200).json();
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == want.as_str())
            .cloned()
    })
}

fn reconcile_row(d: &Daemon) -> serde_json::Value {
    let s = d.get("/api/v1/status", READ).expect(200).json();
    s["queues"]["fanotify.reconcile"].clone()
}

fn backends() -> [(&'static str, Option<&'static str>); 2] {
    [("default", None), ("inotify", Some("inotify"))]
}

#[test]
fn watcher_hard_link_into_the_root_is_analysed() {
    for (label, backend) in backends() {
        let d = start(&format!("link-{label}"), backend);
        eprintln!("{label}: {}", files_component(&d)["detail"]);
        // Written before the link, outside the root (same filesystem): never analysed.
        let elsewhere = d.dir.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        let src = elsewhere.join("shell.php");
        std::fs::write(&src, WEBSHELL).unwrap();
        let x = d.dir.join("www/x.php");
        std::fs::hard_link(&src, &x).unwrap();
        let f = wait_finding_on(&d, &x, 20);
        assert_eq!(f["check"], "webshell", "{label}");
        // The source removed right after the link: the new name is still analysed.
        let src2 = elsewhere.join("two.php");
        std::fs::write(&src2, WEBSHELL).unwrap();
        let y = d.dir.join("www/y.php");
        std::fs::hard_link(&src2, &y).unwrap();
        std::fs::remove_file(&src2).unwrap();
        wait_finding_on(&d, &y, 20);
        assert_eq!(files_component(&d)["errors_total"], 0, "{label}");
    }
}

/// Creates nested directories named `name` below `top` with `mkdirat` relative steps until
/// the path is at least `min_len` bytes (no long path ever reaches a system call; each step
/// opens the new directory through `/proc/self/fd/N/name`), and returns the deepest one's
/// descriptor and path.
fn deep_tree(top: &Path, name: &str, min_len: usize) -> (OwnedFd, PathBuf) {
    use std::os::unix::fs::OpenOptionsExt;
    let mut fd = OwnedFd::from(std::fs::File::open(top).unwrap());
    let mut path = top.to_path_buf();
    while path.as_os_str().len() < min_len {
        nix::sys::stat::mkdirat(
            Some(fd.as_raw_fd()),
            name,
            nix::sys::stat::Mode::from_bits_truncate(0o755),
        )
        .unwrap();
        let next = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(format!("/proc/self/fd/{}/{name}", fd.as_raw_fd()))
            .unwrap();
        fd = OwnedFd::from(next);
        path.push(name);
    }
    (fd, path)
}

/// Writes `data` to `name` in the directory `dir` (relative to its descriptor).
fn write_at(dir: &OwnedFd, name: &str, data: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(format!("/proc/self/fd/{}/{name}", dir.as_fd().as_raw_fd()))
        .unwrap();
    f.write_all(data).unwrap();
}

#[test]
fn watcher_path_longer_than_path_max_is_analysed() {
    for (label, backend) in backends() {
        let d = start(&format!("longpath-{label}"), backend);
        let www = d.dir.join("www");
        // 240-byte names: a few levels reach past 4,096 bytes.
        let (fd, deep) = deep_tree(&www, &"d".repeat(240), 5_000);
        assert!(deep.as_os_str().len() >= 4096);
        write_at(&fd, "deep.php", WEBSHELL.as_bytes());
        let shell = deep.join("deep.php");
        let f = wait_finding_on(&d, &shell, 30);
        assert_eq!(f["check"], "webshell", "{label}");
        assert_eq!(f["path"], shell.display().to_string(), "{label}");
        // Reached by descriptors, not refused.
        assert_eq!(files_component(&d)["errors_total"], 0, "{label}");
        // A second file in an existing long directory (already watched by inotify, a known
        // directory for fanotify) is found too.
        write_at(&fd, "again.php", WEBSHELL.as_bytes());
        wait_finding_on(&d, &deep.join("again.php"), 30);
        let row = reconcile_row(&d);
        assert_eq!(row["depth_unit"], "directory_tasks", "{row}");
        assert_eq!(row["capacity"], 1024, "{row}");
        assert_eq!(row["dropped_total"], 0, "{row}");
    }
}

/// Starts `procs` shell processes that each write `per` small `.php` files into their own
/// directory under `base`; process 3 writes the webshell halfway through. Returns the
/// webshell's path once every process has exited.
fn flood(base: &Path, procs: usize, per: usize) -> PathBuf {
    let shell_dir = base.join("p3");
    let mut children = Vec::new();
    for p in 0..procs {
        let dir = base.join(format!("p{p}"));
        std::fs::create_dir_all(&dir).unwrap();
        let middle = if p == 3 {
            format!(
                "if [ $i -eq {} ]; then printf '%s' \"$SHELLCODE\" > shell.php; fi; ",
                per / 2
            )
        } else {
            String::new()
        };
        let script = format!(
            "cd \"$1\" || exit 1; i=0; while [ $i -lt {per} ]; do {middle}echo '<?php echo \"hello\";' > f$i.php; i=$((i+1)); done"
        );
        children.push(
            std::process::Command::new("sh")
                .arg("-c")
                .arg(script)
                .arg("flood")
                .arg(&dir)
                .env("SHELLCODE", WEBSHELL)
                .spawn()
                .expect("sh"),
        );
    }
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    shell_dir.join("shell.php")
}

fn ts_secs(s: &str) -> f64 {
    let t: jiff::Timestamp = s.parse().unwrap();
    t.as_millisecond() as f64 / 1000.0
}

/// 8 processes write 100,000 harmless `.php` files with one webshell in the middle: the
/// kernel queue overflows and the analyzer queue refuses most events, yet the reconcile walk
/// runs to the end and the webshell is reported. Prints the time from the end of the flood
/// to the finding and the scan rate while the walk ran. Slow: run with
/// `cargo test --test it -- --ignored watcher_flood`.
#[test]
#[ignore = "slow flood test; .ci/run runs it"]
fn watcher_flood_reports_the_webshell_after_overflow() {
    const PROCS: usize = 8;
    const PER: usize = 12_500;
    for (label, backend) in backends() {
        let d = start(&format!("flood-{label}"), backend);
        let base = d.dir.join("www/flood");
        std::fs::create_dir_all(&base).unwrap();
        let started = Instant::now();
        // Sample the rows while the flood runs.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = {
            let stop = stop.clone();
            let addr = d.addr;
            let cert = d.cert();
            std::thread::spawn(move || {
                let mut max_waiting = 0u64;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let mut c = Client::connect(addr, cert.clone());
                    let auth = format!("Bearer {READ}");
                    let s = c
                        .send("GET", "/api/v1/status", &[("Authorization", &auth)], b"")
                        .json();
                    let w = s["queues"]["fanotify.reconcile"]["waiting"]
                        .as_u64()
                        .unwrap_or(0);
                    max_waiting = max_waiting.max(w);
                    std::thread::sleep(Duration::from_millis(100));
                }
                max_waiting
            })
        };
        let shell = flood(&base, PROCS, PER);
        let flood_secs = started.elapsed().as_secs_f64();
        let flood_end = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let scanned_at_end = files_component(&d)["events_total"].as_u64().unwrap_or(0);
        let f = wait_finding_on(&d, &shell, 120);
        assert_eq!(f["check"], "webshell", "{label}");
        let found_after = ts_secs(f["first_seen"].as_str().unwrap()) - flood_end;
        // The walk runs to the end: the row empties without losses.
        let t0 = Instant::now();
        let row = wait_until(300, "the reconcile walk to finish", || {
            let r = reconcile_row(&d);
            (r["waiting"] == 0 && r["running"] == 0).then_some(r)
        });
        let walk_secs = t0.elapsed().as_secs_f64();
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let max_waiting = sampler.join().unwrap();
        let scanned = files_component(&d)["events_total"].as_u64().unwrap_or(0);
        let s = d.get("/api/v1/status", READ).json();
        let analyzer = &s["queues"]["fanotify.analyzer"];
        eprintln!(
            "{label} ({}): {} files in {flood_secs:.1} s; webshell reported {found_after:+.1} s \
             after the flood ended; analyzer losses {}; reconcile max waiting {max_waiting}, \
             losses {}; after the flood {} more files scanned, walk idle {walk_secs:.1} s after \
             the finding ({:.0} files/s from the end of the flood to idle)",
            files_component(&d)["detail"],
            PROCS * PER,
            analyzer["dropped_total"],
            row["dropped_total"],
            scanned - scanned_at_end,
            (scanned - scanned_at_end) as f64 / (found_after.max(0.0) + walk_secs).max(0.001),
        );
        assert_eq!(row["dropped_total"], 0, "{label}: {row}");
        assert!(max_waiting <= 1024, "{label}");
        // 100,000 files: do not leave them behind.
        let dir = d.dir.clone();
        drop(d);
        let _ = std::fs::remove_dir_all(dir);
    }
}
