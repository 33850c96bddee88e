//! The mail-log reader's journal source, for hosts whose MTA logs only to the systemd
//! journal: `journalctl -o json -f --no-pager SYSLOG_FACILITY=2` as a child process (the
//! mail facility, which Postfix and Exim log under), each JSON entry turned back into the
//! line its MTA would have written to a file ([`entry_line`]) and handed to the same line
//! handler as the file source.
//!
//! Row `mail.journal_source` (registered after the first attachment: the first child that
//! started): `depth_unavailable` and `capacity_unavailable` always (the journal does not
//! say how much is left to read), lag basis unavailable; `source_io` while the child is
//! down; an over-long or unreadable entry counts one loss.
//!
//! Guarantees:
//! - Bounded: a line longer than [`MAX_LINE_BYTES`] is skipped to its end and never held;
//!   the child's stderr goes nowhere; it gets no input and no secret.
//! - Supervised: a child that exits or cannot start is started again after a back-off of
//!   1 s doubling to [`MAX_BACKOFF`] (back to 1 s once a child ran a minute); the journal
//!   cursor of the last entry handled is kept in the store (`mail:journal-cursor`, saved at
//!   most every [`CURSOR_EVERY`] and at stop), so a restarted child (or daemon) resumes
//!   after it with `--after-cursor`; the first start reads only new entries.
//! - Stoppable: [`JournalSource::run`] returns within [`POLL`] of its stop flag; the child
//!   is killed and reaped.
//! - Entries never panic the parser ([`entry_line`] rejects garbage with an error).

use std::io::{ErrorKind, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};
use parking_lot::Mutex;

use crate::clock::SharedClock;
use crate::findings::Finding;
use crate::queue::{Flag, LagBasis, QueueHealth, Registry, RowConfig, RowHandle};
use crate::store::Store;
use crate::watch::tail::LineHandler;

/// The row.
pub const JOURNAL_ROW: &str = "mail.journal_source";
/// Longest JSON entry read; longer ones are skipped.
pub const MAX_LINE_BYTES: usize = 64 * 1024;
/// Longest back-off between child starts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How often the cursor is saved while entries arrive.
pub const CURSOR_EVERY: Duration = Duration::from_secs(5);
/// How often the reader looks at its stop flag.
pub const POLL: Duration = Duration::from_millis(200);
/// Store key of the cursor.
pub const CURSOR_KEY: &str = "mail:journal-cursor";
/// The journal's syslog facility of mail.
pub const MAIL_FACILITY: &str = "SYSLOG_FACILITY=2";

/// Which journal to read and with what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalSettings {
    /// `journalctl`.
    pub program: PathBuf,
    /// `--directory`: a journal directory (tests, a fixture root); `None`: the system's.
    pub directory: Option<PathBuf>,
}

impl JournalSettings {
    /// The journal source under `root` when the MTA has no log file: `journalctl` installed
    /// and a journal directory present (`/var/log/journal` or `/run/log/journal`; under a
    /// fixture root, its `var/log/journal`, read with `--directory`).
    pub fn detect(root: &std::path::Path) -> Option<JournalSettings> {
        let program = ["/usr/bin/journalctl", "/bin/journalctl"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())?;
        if root == std::path::Path::new("/") {
            let present = ["/var/log/journal", "/run/log/journal"]
                .iter()
                .any(|d| std::path::Path::new(d).is_dir());
            return present.then_some(JournalSettings {
                program,
                directory: None,
            });
        }
        let dir = root.join("var/log/journal");
        dir.is_dir().then_some(JournalSettings {
            program,
            directory: Some(dir),
        })
    }

    /// The child's arguments.
    pub fn args(&self, cursor: Option<&str>) -> Vec<String> {
        let mut a: Vec<String> = ["-o", "json", "-f", "--no-pager", "-q"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if let Some(d) = &self.directory {
            a.push(format!("--directory={}", d.display()));
        }
        match cursor {
            Some(c) => a.push(format!("--after-cursor={c}")),
            None => a.extend(["-n".to_string(), "0".to_string()]),
        }
        a.push(MAIL_FACILITY.to_string());
        a
    }
}

/// Why an entry was not turned into a line.
#[derive(Debug, PartialEq, Eq)]
pub enum EntryError {
    NotJson,
    NotAnObject,
    NoMessage,
    BadTimestamp,
}

impl std::fmt::Display for EntryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EntryError::NotJson => "journal entry is not JSON",
            EntryError::NotAnObject => "journal entry is not a JSON object",
            EntryError::NoMessage => "journal entry has no readable MESSAGE",
            EntryError::BadTimestamp => "journal entry has no valid __REALTIME_TIMESTAMP",
        })
    }
}

impl std::error::Error for EntryError {}

/// One journal entry: the line it stands for (`None`: not an MTA's) and its cursor.
#[derive(Debug, PartialEq, Eq)]
pub struct Entry {
    pub line: Option<String>,
    pub cursor: Option<String>,
}

fn text_field(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        // Binary-safe fields come as arrays of bytes.
        serde_json::Value::Array(items) => {
            let bytes: Option<Vec<u8>> = items
                .iter()
                .map(|b| b.as_u64().and_then(|n| u8::try_from(n).ok()))
                .collect();
            bytes.map(|b| String::from_utf8_lossy(&b).into_owned())
        }
        _ => None,
    }
}

/// Turns one `journalctl -o json` entry into the line its MTA writes to a file: Postfix
/// (`SYSLOG_IDENTIFIER` `postfix/...`) as an RFC 3339 syslog line, Exim (`exim`,
/// `exim4`) as a `mainlog` line with a `+0000` zone, both at the entry's
/// `__REALTIME_TIMESTAMP` (UTC). Other programs give `line: None`.
pub fn entry_line(json: &[u8]) -> Result<Entry, EntryError> {
    let v: serde_json::Value = serde_json::from_slice(json).map_err(|_| EntryError::NotJson)?;
    let obj = v.as_object().ok_or(EntryError::NotAnObject)?;
    let cursor = obj
        .get("__CURSOR")
        .and_then(|c| c.as_str())
        .filter(|c| c.len() <= 512 && !c.contains(['\n', '\0']))
        .map(str::to_string);
    let ident = obj
        .get("SYSLOG_IDENTIFIER")
        .and_then(text_field)
        .unwrap_or_default();
    let is_postfix = ident.starts_with("postfix");
    let is_exim = ident == "exim" || ident == "exim4";
    if !is_postfix && !is_exim {
        return Ok(Entry { line: None, cursor });
    }
    let message = obj
        .get("MESSAGE")
        .and_then(text_field)
        .ok_or(EntryError::NoMessage)?;
    // One line per entry: a message with a newline keeps its first line.
    let message = message.lines().next().unwrap_or("").to_string();
    let micros: i64 = obj
        .get("__REALTIME_TIMESTAMP")
        .and_then(|t| t.as_str())
        .and_then(|t| t.parse().ok())
        .ok_or(EntryError::BadTimestamp)?;
    let t = jiff::Timestamp::from_microsecond(micros).map_err(|_| EntryError::BadTimestamp)?;
    let utc = t.to_zoned(jiff::tz::TimeZone::UTC);
    let line = if is_postfix {
        let host = obj
            .get("_HOSTNAME")
            .and_then(text_field)
            .filter(|h| !h.is_empty() && !h.contains([' ', '\n']))
            .unwrap_or_else(|| "localhost".to_string());
        let pid = obj
            .get("_PID")
            .or_else(|| obj.get("SYSLOG_PID"))
            .and_then(text_field)
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        let ident: String = ident.chars().filter(|c| !c.is_whitespace()).collect();
        let prog = match pid {
            Some(p) => format!("{ident}[{p}]"),
            None => ident,
        };
        format!(
            "{} {host} {prog}: {message}",
            utc.strftime("%Y-%m-%dT%H:%M:%S%.6f+00:00")
        )
    } else {
        format!("{} +0000 {message}", utc.strftime("%Y-%m-%d %H:%M:%S"))
    };
    Ok(Entry {
        line: Some(line),
        cursor,
    })
}

/// Reads `\n`-terminated lines of at most `max` bytes from `r`; longer ones are skipped to
/// their end and reported as `Err(len)`.
pub struct BoundedLines<R> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    skipping: bool,
    skipped: usize,
    max: usize,
}

impl<R: Read> BoundedLines<R> {
    pub fn new(inner: R, max: usize) -> Self {
        BoundedLines {
            inner,
            buf: Vec::with_capacity(8192),
            start: 0,
            skipping: false,
            skipped: 0,
            max,
        }
    }

    /// The next line (without `\n`), `Some(Err(n))` for a skipped over-long one of `n`
    /// bytes, `None` at the end of input (a last partial line is dropped).
    pub fn next_line(&mut self) -> Option<Result<Vec<u8>, usize>> {
        loop {
            if let Some(i) = self.buf[self.start..].iter().position(|&b| b == b'\n') {
                let end = self.start + i;
                let line = self.buf[self.start..end].to_vec();
                self.start = end + 1;
                if self.skipping {
                    self.skipping = false;
                    let n = self.skipped + line.len();
                    self.skipped = 0;
                    return Some(Err(n));
                }
                if line.len() > self.max {
                    return Some(Err(line.len()));
                }
                return Some(Ok(line));
            }
            // No newline in what is buffered: compact, bound, read more.
            self.buf.drain(..self.start);
            self.start = 0;
            if self.buf.len() > self.max {
                self.skipped += self.buf.len();
                self.buf.clear();
                self.skipping = true;
            }
            let mut chunk = [0u8; 8192];
            match self.inner.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }
}

/// The journal source: supervises the child and feeds a line handler.
pub struct JournalSource<H: LineHandler> {
    settings: JournalSettings,
    handler: H,
    store: Store,
    submit: Submit,
    clock: SharedClock,
    registry: Arc<Registry>,
    row: Option<(Arc<QueueHealth>, RowHandle)>,
    child: Arc<Mutex<Option<Child>>>,
}

/// Where findings of the line handler go (the findings engine).
pub type Submit = Arc<dyn Fn(Finding) + Send + Sync>;

/// What one child's run ended with.
enum Ended {
    Stopped,
    Exited,
}

impl<H: LineHandler> JournalSource<H> {
    pub fn new(
        settings: JournalSettings,
        handler: H,
        store: Store,
        submit: Submit,
        clock: SharedClock,
        registry: Arc<Registry>,
    ) -> Self {
        JournalSource {
            settings,
            handler,
            store,
            submit,
            clock,
            registry,
            row: None,
            child: Arc::new(Mutex::new(None)),
        }
    }

    fn cursor(&self) -> Option<String> {
        self.store
            .read(|c| crate::store::kv::get(c, CURSOR_KEY))
            .ok()
            .flatten()
    }

    fn save_cursor(&self, cursor: &str) {
        let c = cursor.to_string();
        if let Err(e) = self
            .store
            .write(move |db| crate::store::kv::set(db, CURSOR_KEY, &c))
        {
            log::warn!("mail journal: cannot save the journal position: {e}");
            if let Some((row, _)) = &self.row {
                row.state_io_error();
            }
        } else if let Some((row, _)) = &self.row {
            row.state_io_ok();
        }
    }

    fn attach_row(&mut self) {
        if self.row.is_some() {
            return;
        }
        let mut cfg = RowConfig::new("entries").lag_basis(LagBasis::Unavailable);
        cfg.capacity = None;
        let row = QueueHealth::new(self.clock.clone(), cfg);
        row.set_depth_unavailable(true);
        match self.registry.register(JOURNAL_ROW, row.clone()) {
            Ok(h) => self.row = Some((row, h)),
            Err(e) => log::warn!("mail journal: {JOURNAL_ROW}: {e}"),
        }
    }

    /// Runs until `stop` is set: starts the child, reads it, restarts it with back-off.
    pub fn run(&mut self, stop: &AtomicBool) {
        let mut backoff = Duration::from_secs(1);
        let mut reported = false;
        while !stop.load(Ordering::Acquire) {
            let started = Instant::now();
            match self.run_child(stop) {
                Ok(Ended::Stopped) => break,
                Ok(Ended::Exited) => {
                    if !reported {
                        log::warn!("mail journal: journalctl ended; starting it again");
                        reported = true;
                    }
                }
                Err(e) => {
                    if !reported {
                        log::warn!("mail journal: cannot start journalctl: {e}");
                        reported = true;
                    }
                }
            }
            if let Some((row, _)) = &self.row {
                row.set_flag(Flag::SourceIo, true);
            }
            if started.elapsed() >= MAX_BACKOFF {
                backoff = Duration::from_secs(1);
            }
            let until = Instant::now() + backoff;
            while Instant::now() < until {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                std::thread::sleep(POLL.min(until - Instant::now()));
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    fn run_child(&mut self, stop: &AtomicBool) -> std::io::Result<Ended> {
        let cursor = self.cursor();
        let mut child = Command::new(&self.settings.program)
            .args(self.settings.args(cursor.as_deref()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        *self.child.lock() = Some(child);
        self.attach_row();
        if let Some((row, _)) = &self.row {
            row.set_flag(Flag::SourceIo, false);
        }
        // Lines come from a reading thread over a small channel, so the stop flag is
        // looked at every POLL even while the journal is quiet.
        let (tx, rx) = bounded::<Result<Vec<u8>, usize>>(256);
        let reader = std::thread::Builder::new()
            .name("mail-journal-read".into())
            .spawn(move || {
                let mut lines = BoundedLines::new(stdout, MAX_LINE_BYTES);
                while let Some(l) = lines.next_line() {
                    if tx.send(l).is_err() {
                        return;
                    }
                }
            })?;
        let ended = self.consume(&rx, stop);
        // Kill and reap the child; the reading thread then sees the end of its output.
        if let Some(mut c) = self.child.lock().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        drop(rx);
        let _ = reader.join();
        Ok(ended)
    }

    fn consume(&mut self, rx: &Receiver<Result<Vec<u8>, usize>>, stop: &AtomicBool) -> Ended {
        let mut last_cursor: Option<String> = None;
        let mut saved_at = Instant::now();
        let submit = self.submit.clone();
        let mut emit = |f: Finding| submit(f);
        let ended = loop {
            if stop.load(Ordering::Acquire) {
                break Ended::Stopped;
            }
            match rx.recv_timeout(POLL) {
                Ok(Ok(json)) => match entry_line(&json) {
                    Ok(entry) => {
                        if let Some(line) = &entry.line {
                            self.handler.line(line, &mut emit);
                        }
                        if let Some((row, _)) = &self.row {
                            row.note_progress();
                        }
                        if entry.cursor.is_some() {
                            last_cursor = entry.cursor;
                        }
                    }
                    Err(_) => {
                        if let Some((row, _)) = &self.row {
                            row.record_loss();
                        }
                    }
                },
                Ok(Err(_too_long)) => {
                    if let Some((row, _)) = &self.row {
                        row.record_loss();
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break Ended::Exited,
            }
            self.handler.maintain();
            if saved_at.elapsed() >= CURSOR_EVERY {
                if let Some(c) = last_cursor.take() {
                    self.save_cursor(&c);
                }
                saved_at = Instant::now();
            }
        };
        if let Some(c) = last_cursor {
            self.save_cursor(&c);
        }
        ended
    }
}

#[cfg(test)]
mod tests;
