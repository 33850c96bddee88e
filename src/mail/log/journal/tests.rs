//! The journal source: entries to lines, bounded line reading, and the real `journalctl`
//! following a journal directory that Debian's `systemd-journal-remote` writes from the
//! journal export format (no running systemd needed), with cursor resume across restarts;
//! child supervision (restart with back-off, killed on stop) with small shell children.
//!
//! A missing `journalctl` or `systemd-journal-remote` fails the test under CI (`CI=true`)
//! and skips it locally.

use super::*;
use crate::clock::SystemClock;
use crate::mail::log::parse::{parse_line, MailEvent, Mta};
use std::io::Write;
use std::path::Path;

const REMOTE: &str = "/lib/systemd/systemd-journal-remote";

fn required(path: &str) -> bool {
    if Path::new(path).exists() {
        return true;
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "{path} is required in CI"
    );
    eprintln!("skipping: {path} not installed");
    false
}

#[test]
fn postfix_and_exim_entries_become_their_file_lines() {
    let e = entry_line(br#"{"__CURSOR":"s=1;i=2","__REALTIME_TIMESTAMP":"1764194400123456","SYSLOG_IDENTIFIER":"postfix/smtpd","_PID":"1234","_HOSTNAME":"mail","MESSAGE":"4F1AB2C3D4: client=unknown[192.0.2.9], sasl_method=PLAIN, sasl_username=alice@example.com"}"#).unwrap();
    assert_eq!(e.cursor.as_deref(), Some("s=1;i=2"));
    let line = e.line.unwrap();
    assert_eq!(
        line,
        "2025-11-26T22:00:00.123456+00:00 mail postfix/smtpd[1234]: 4F1AB2C3D4: client=unknown[192.0.2.9], sasl_method=PLAIN, sasl_username=alice@example.com"
    );
    let p = parse_line(&line).expect("parsed");
    assert_eq!(p.mta, Mta::Postfix);
    let t = p.time.unwrap();
    assert_eq!(
        (t.year, t.hour, t.micros, t.offset_secs),
        (Some(2025), 22, 123_456, Some(0))
    );
    // Exim, MESSAGE as bytes (journalctl's form for non-UTF-8 or binary fields).
    let msg = "1vOo2a-000Abc-7x <= alice@example.com H=(client) [192.0.2.9] P=esmtpa A=plain:alice@example.com S=300 id=x@example.com";
    let bytes: Vec<String> = msg.bytes().map(|b| b.to_string()).collect();
    let json = format!(
        r#"{{"__REALTIME_TIMESTAMP":"1764194400000000","SYSLOG_IDENTIFIER":"exim","MESSAGE":[{}]}}"#,
        bytes.join(",")
    );
    let line = entry_line(json.as_bytes()).unwrap().line.unwrap();
    assert_eq!(line, format!("2025-11-26 22:00:00 +0000 {msg}"));
    let p = parse_line(&line).expect("parsed");
    assert_eq!(p.mta, Mta::Exim);
    assert!(matches!(p.event, MailEvent::Received { .. }));
    // Other programs: no line, the cursor still counts.
    let e = entry_line(br#"{"__CURSOR":"c","SYSLOG_IDENTIFIER":"sshd","MESSAGE":"x"}"#).unwrap();
    assert_eq!((e.line, e.cursor.as_deref()), (None, Some("c")));
    // Garbage is refused with an error, never a panic.
    assert_eq!(entry_line(b"nope").unwrap_err(), EntryError::NotJson);
    assert_eq!(entry_line(b"[1]").unwrap_err(), EntryError::NotAnObject);
    assert_eq!(
        entry_line(br#"{"SYSLOG_IDENTIFIER":"postfix/qmgr"}"#).unwrap_err(),
        EntryError::NoMessage
    );
    assert_eq!(
        entry_line(br#"{"SYSLOG_IDENTIFIER":"exim","MESSAGE":"m","__REALTIME_TIMESTAMP":"99999999999999999999"}"#)
            .unwrap_err(),
        EntryError::BadTimestamp
    );
    assert_eq!(
        entry_line(br#"{"SYSLOG_IDENTIFIER":"exim","MESSAGE":[300]}"#).unwrap_err(),
        EntryError::NoMessage
    );
    // A newline in MESSAGE cannot forge a second line; a hostile host name is replaced.
    let line = entry_line(br#"{"__REALTIME_TIMESTAMP":"0","SYSLOG_IDENTIFIER":"postfix/smtp","_HOSTNAME":"a b","MESSAGE":"one\n2025-01-01 00:00:00 forged"}"#)
        .unwrap()
        .line
        .unwrap();
    assert_eq!(
        line,
        "1970-01-01T00:00:00.000000+00:00 localhost postfix/smtp: one"
    );
}

#[test]
fn bounded_lines_skip_over_long_ones_and_drop_a_partial_last_line() {
    let mut input = Vec::new();
    input.extend_from_slice(b"short\n");
    input.extend(std::iter::repeat_n(b'x', 50_000));
    input.extend_from_slice(b"\nafter\n");
    input.extend(std::iter::repeat_n(b'y', 20));
    input.extend_from_slice(b"\npartial");
    let mut r = BoundedLines::new(&input[..], 1000);
    assert_eq!(r.next_line(), Some(Ok(b"short".to_vec())));
    assert_eq!(r.next_line(), Some(Err(50_000)));
    assert_eq!(r.next_line(), Some(Ok(b"after".to_vec())));
    assert_eq!(r.next_line(), Some(Ok(vec![b'y'; 20])));
    assert_eq!(r.next_line(), None);
}

/// A line handler that records the lines it is given.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<String>>>);

impl LineHandler for Lines {
    fn line(&mut self, line: &str, _emit: &mut dyn FnMut(Finding)) {
        self.0.lock().push(line.to_string());
    }
    fn replay(&mut self, _line: &str) {}
}

struct Rig {
    dir: PathBuf,
    store: Store,
    registry: Arc<Registry>,
}

impl Rig {
    fn new(tag: &str) -> Rig {
        let dir = std::env::temp_dir().join(format!("svc-journal-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("journal")).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        Rig {
            dir,
            store,
            registry: Registry::new(),
        }
    }

    /// Starts a source on its own thread; returns its stop flag, thread and lines.
    fn start(
        &self,
        settings: JournalSettings,
    ) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>, Lines) {
        let lines = Lines::default();
        let mut src = JournalSource::new(
            settings,
            lines.clone(),
            self.store.clone(),
            Arc::new(|_| {}),
            SystemClock::shared(),
            self.registry.clone(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let t = std::thread::spawn(move || src.run(&flag));
        (stop, t, lines)
    }

    /// Writes a new journal file from entries in the journal export format.
    fn journal_file(&self, name: &str, entries: &[(&str, u64, &str)]) {
        let mut export = String::new();
        for (i, (ident, secs, msg)) in entries.iter().enumerate() {
            export.push_str(&format!(
                "__REALTIME_TIMESTAMP={}\n__MONOTONIC_TIMESTAMP={}\n_BOOT_ID=0123456789abcdef0123456789abcdef\nSYSLOG_FACILITY=2\nSYSLOG_IDENTIFIER={ident}\n_PID={}\n_HOSTNAME=mail\nMESSAGE={msg}\n\n",
                secs * 1_000_000,
                secs * 1_000_000,
                1000 + i
            ));
        }
        let src = self.dir.join(format!("{name}.export"));
        std::fs::write(&src, export).unwrap();
        // Written aside and moved in, so the follower sees a complete file appear.
        let staged = self.dir.join(format!("{name}.journal"));
        let out = std::process::Command::new(REMOTE)
            .arg(format!("--output={}", staged.display()))
            .arg(&src)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::rename(
            &staged,
            self.dir.join("journal").join(format!("{name}.journal")),
        )
        .unwrap();
    }

    fn settings(&self) -> JournalSettings {
        JournalSettings {
            program: PathBuf::from("/usr/bin/journalctl"),
            directory: Some(self.dir.join("journal")),
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.store.close();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn real_journalctl_follows_a_journal_directory_and_resumes_after_its_cursor() {
    if !required("/usr/bin/journalctl") || !required(REMOTE) {
        return;
    }
    let rig = Rig::new("follow");
    let base = 1_764_194_400u64;
    rig.journal_file(
        "old",
        &[(
            "postfix/smtpd",
            base,
            "AAAA000001: client=unknown[192.0.2.1]",
        )],
    );
    let (stop, t, lines) = rig.start(rig.settings());
    wait_for("attachment", 10, || {
        rig.registry.snapshot().contains_key(JOURNAL_ROW)
    });
    let row = rig.registry.snapshot()[JOURNAL_ROW].clone();
    assert!(row.depth_unavailable && row.capacity_unavailable, "{row:?}");
    // journalctl needs a moment to set up its watch before new files appear.
    std::thread::sleep(Duration::from_millis(700));
    rig.journal_file(
        "new",
        &[
            (
                "postfix/smtpd",
                base + 10,
                "BBBB000002: client=unknown[192.0.2.2], sasl_method=PLAIN, sasl_username=bob@example.com",
            ),
            (
                "exim",
                base + 11,
                "1vOo2a-000Abc-7x <= bob@example.com H=(c) [192.0.2.2] P=esmtpa A=plain:bob@example.com S=300",
            ),
            ("sshd", base + 12, "Accepted password for root"),
        ],
    );
    wait_for("two mail lines", 20, || lines.0.lock().len() >= 2);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Release);
    t.join().unwrap();
    let got = lines.0.lock().clone();
    assert_eq!(got.len(), 2, "only new mail entries: {got:?}");
    assert!(got[0].contains("postfix/smtpd[") && got[0].contains("BBBB000002"));
    assert!(parse_line(&got[0]).is_some() && parse_line(&got[1]).is_some());
    assert_eq!(parse_line(&got[1]).unwrap().mta, Mta::Exim);
    // Stopped: the cursor was saved; a new source resumes after it and gets only what
    // was written while it was stopped.
    let cursor = rig
        .store
        .read(|c| crate::store::kv::get(c, CURSOR_KEY))
        .unwrap();
    assert!(cursor.is_some());
    rig.journal_file(
        "later",
        &[(
            "postfix/qmgr",
            base + 20,
            "CCCC000003: from=<carol@example.com>, size=300, nrcpt=1 (queue active)",
        )],
    );
    let (stop, t, lines) = rig.start(rig.settings());
    wait_for("the entry written while stopped", 20, || {
        !lines.0.lock().is_empty()
    });
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Release);
    t.join().unwrap();
    let got = lines.0.lock().clone();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].contains("CCCC000003"));
}

#[test]
fn a_child_that_ends_is_restarted_with_back_off_and_one_that_runs_is_killed_on_stop() {
    let rig = Rig::new("supervise");
    // A child that prints one entry and exits: started at 0 s, then after 1 s, 2 s, ...
    let script = rig.dir.join("once.sh");
    let mut f = std::fs::File::create(&script).unwrap();
    writeln!(
        f,
        "#!/bin/sh\necho '{{\"__REALTIME_TIMESTAMP\":\"1764194400000000\",\"SYSLOG_IDENTIFIER\":\"postfix/smtpd\",\"MESSAGE\":\"DDDD000004: client=unknown[192.0.2.4]\"}}'\necho 'not json'\n"
    )
    .unwrap();
    drop(f);
    std::process::Command::new("chmod")
        .args(["755"])
        .arg(&script)
        .status()
        .unwrap();
    let (stop, t, lines) = rig.start(JournalSettings {
        program: script.clone(),
        directory: None,
    });
    wait_for("a restarted child", 10, || lines.0.lock().len() >= 2);
    let row = rig.registry.snapshot()[JOURNAL_ROW].clone();
    assert!(row.dropped_total >= 1, "the garbage line counted: {row:?}");
    let started = Instant::now();
    stop.store(true, Ordering::Release);
    t.join().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    let n = lines.0.lock().len();
    // Back-off: 1 s, then 2 s: not a busy loop.
    assert!((2..=4).contains(&n), "{n} starts");

    // A long-running child: killed and reaped on stop.
    let pidfile = rig.dir.join("pid");
    let script = rig.dir.join("long.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ > {}\nexec sleep 1000\n",
            pidfile.display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["755"])
        .arg(&script)
        .status()
        .unwrap();
    let rig2 = Rig::new("supervise2");
    let (stop, t, _) = rig2.start(JournalSettings {
        program: script,
        directory: None,
    });
    wait_for("the child", 10, || {
        std::fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n'))
    });
    let pid = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .to_string();
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    stop.store(true, Ordering::Release);
    t.join().unwrap();
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the child is gone after stop"
    );
}
