//! PHP taint analysis (`php_taint_flow`): request data (`$_GET`, `$_POST`, `$_REQUEST`,
//! `$_COOKIE`, `$_SERVER['HTTP_*']`, `php://input`) that reaches code execution, a shell
//! command or an include inside one uploaded or changed PHP file. A tokenizer of its own
//! ([`lexer`]) and one pass over the statements ([`flow`]); no PHP runs. Bounded: files over
//! [`MAX_FILE_BYTES`] are not read, [`lexer::MAX_TOKENS`] tokens and
//! [`flow::WORK_BUDGET`] token visits at most per file.

pub mod flow;
pub mod lexer;

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use jiff::Timestamp;

use crate::model::finding::{Finding, Severity};

pub use flow::Flow;

/// The finding's check name.
pub const CHECK: &str = "php_taint_flow";
/// Largest file analysed (PHP sources are small; a bigger "PHP" file is data or a packed
/// shell the signatures look at).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// File names the analysis reads: PHP source, run or included
/// ([`crate::hostfs::is_php_source_name`]).
pub fn is_php_path(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| crate::hostfs::is_php_source_name(n.as_encoded_bytes()))
}

/// What the analysis of one source found and where it stopped early.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub flows: Vec<Flow>,
    /// The token cap ended the file early.
    pub token_capped: bool,
    /// The work budget ended the analysis early.
    pub budget_exhausted: bool,
}

/// Analyses one PHP source held in memory (callers cap its size).
pub fn analyze_source(src: &[u8]) -> Report {
    let toks = lexer::tokenize(src);
    let a = flow::analyze(&toks.tokens);
    Report {
        flows: a.flows,
        token_capped: toks.truncated,
        budget_exhausted: a.budget_exhausted,
    }
}

/// What the analysis did, for the queue row's detail and the perf page.
#[derive(Default, Debug)]
pub struct Counters {
    pub files: AtomicU64,
    pub flows: AtomicU64,
    /// Files over [`MAX_FILE_BYTES`], not analysed.
    pub too_large: AtomicU64,
    /// Files cut by the token cap.
    pub token_capped: AtomicU64,
    /// Files whose analysis ran out of budget.
    pub budget_exhausted: AtomicU64,
    /// Files that could not be read (other than vanished).
    pub read_errors: AtomicU64,
}

/// Why a file was not analysed.
#[derive(Debug)]
pub enum SkipReason {
    TooLarge,
    /// The file could not be opened (gone, a symlink, not a regular file...).
    Open(crate::sys::dir::Error),
    Read(std::io::Error),
}

/// Reads (never through a symlink in the tree) and analyses the file at `path`, counting
/// what it did in `c`. The owner's uid comes back with the report.
pub fn analyze_file(path: &Path, c: &Counters) -> Result<(Report, u32), SkipReason> {
    use std::os::unix::fs::MetadataExt;
    let f = crate::sys::dir::open_regular_trusted(path, false).map_err(SkipReason::Open)?;
    let meta = f.metadata().map_err(SkipReason::Read)?;
    if meta.len() > MAX_FILE_BYTES {
        c.too_large.fetch_add(1, Ordering::Relaxed);
        return Err(SkipReason::TooLarge);
    }
    let mut src = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut src)
        .map_err(SkipReason::Read)?;
    if src.len() as u64 > MAX_FILE_BYTES {
        c.too_large.fetch_add(1, Ordering::Relaxed);
        return Err(SkipReason::TooLarge);
    }
    let report = analyze_source(&src);
    c.files.fetch_add(1, Ordering::Relaxed);
    c.flows
        .fetch_add(report.flows.len() as u64, Ordering::Relaxed);
    if report.token_capped {
        c.token_capped.fetch_add(1, Ordering::Relaxed);
    }
    if report.budget_exhausted {
        c.budget_exhausted.fetch_add(1, Ordering::Relaxed);
    }
    Ok((report, meta.uid()))
}

/// The finding for one flow in the file at `path`.
pub fn finding(path: &Path, flow: &Flow, now: Timestamp) -> Finding {
    let shown = crate::text::escape_path(path);
    Finding::new(
        CHECK,
        Severity::Critical,
        format!(
            "PHP taint flow in {shown}: {} (line {}) reaches {} (line {})",
            flow.source, flow.source_line, flow.sink, flow.sink_line
        ),
        now,
    )
    .with_path(path.to_string_lossy().into_owned())
    .with_details(format!(
        "source={} source_line={} sink={} sink_line={}",
        flow.source, flow.source_line, flow.sink, flow.sink_line
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures(kind: &str) -> Vec<(String, Vec<u8>)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/taint")
            .join(kind);
        let mut out: Vec<_> = std::fs::read_dir(&dir)
            .expect("fixture directory")
            .map(|e| {
                let p = e.expect("fixture entry").path();
                let name = p
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                (name, std::fs::read(&p).expect("fixture"))
            })
            .collect();
        out.sort();
        out
    }

    /// Each file under `flow/` names its one expected flow in a `// expect: SOURCE LINE
    /// SINK LINE` comment; nothing under `benign/` has a flow.
    #[test]
    fn fixtures_true_positives_and_benign_look_alikes() {
        let flows = fixtures("flow");
        assert_eq!(flows.len(), 10);
        for (name, src) in &flows {
            let text = String::from_utf8_lossy(src);
            let expect = text
                .lines()
                .find_map(|l| l.split_once("expect: ").map(|(_, e)| e.to_string()))
                .expect("expect comment");
            let words: Vec<&str> = expect.split(' ').collect();
            let n = words.len();
            let want = Flow {
                source: words[0].to_string(),
                source_line: words[1].parse().expect("source line"),
                sink: words[2..n - 1].join(" "),
                sink_line: words[n - 1].parse().expect("sink line"),
            };
            assert_eq!(analyze_source(src).flows, vec![want], "{name}");
        }
        let benign = fixtures("benign");
        assert_eq!(benign.len(), 10);
        for (name, src) in &benign {
            assert_eq!(analyze_source(src), Report::default(), "{name}");
        }
    }

    #[test]
    fn php_names_and_the_finding() {
        assert!(is_php_path(Path::new("/w/a.PHP")));
        assert!(is_php_path(Path::new("/w/x.phtml")));
        assert!(!is_php_path(Path::new("/w/a.js")));
        let f = finding(
            Path::new("/w/up/x.php"),
            &Flow {
                source: "$_GET".into(),
                source_line: 2,
                sink: "eval".into(),
                sink_line: 3,
            },
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(f.check, CHECK);
        assert_eq!(
            f.message,
            "PHP taint flow in /w/up/x.php: $_GET (line 2) reaches eval (line 3)"
        );
        assert_eq!(f.path.as_deref(), Some("/w/up/x.php"));
    }

    #[test]
    fn file_size_cap_is_counted() {
        let dir = crate::scan::testdir::TempDir::new("taint");
        let big = dir.write("big.php", &vec![b' '; MAX_FILE_BYTES as usize + 1]);
        let small = dir.write("s.php", b"<?php eval($_GET[1]);");
        let c = Counters::default();
        assert!(matches!(analyze_file(&big, &c), Err(SkipReason::TooLarge)));
        let (r, _) = analyze_file(&small, &c).expect("analysed");
        assert_eq!(r.flows.len(), 1);
        assert_eq!(c.too_large.load(Ordering::Relaxed), 1);
        assert_eq!(c.files.load(Ordering::Relaxed), 1);
        assert_eq!(c.flows.load(Ordering::Relaxed), 1);
    }
}
