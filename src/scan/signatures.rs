//! Content signatures: files closed after write are matched against shipped rules
//! (`rules/signatures/*.toml`, format in `rules/signatures/README.md`) and optional extra rule
//! files.
//!
//! How a scan works:
//! 1. The path decides which rules apply (extension, file name, path conditions); a file no
//!    rule applies to is not read at all.
//! 2. The bytes scanned are the whole file up to [`ScanLimits::whole_file_max`] (1 MiB), else a
//!    head and a tail window (256 KiB each), so payloads appended to big files are found.
//! 3. The window is ASCII-lower-cased once. One Aho-Corasick automaton over every rule's
//!    lower-cased anchor literals runs on that copy (case-sensitive anchors are then verified
//!    byte for byte on the original) and yields the candidate rules.
//! 4. Only candidates are evaluated: `all` / `any` / `none` literals (each searched at most once
//!    per window), then regexes. `nocase` literals and regexes run case-sensitively on the
//!    lower-cased copy (see `fold`), which keeps the regex engine's literal optimisations.
//!
//! Guarantees: scanning never panics on any bytes; reads never exceed the windows; every
//! refusal and skipped byte is counted in [`SignatureStats`]. Each window is evaluated on its
//! own (a rule whose parts are split between head and tail does not match); a payload only in
//! the unread middle of a large file is not found (counted in `bytes_skipped`).

mod fold;
mod matches;
mod rules;
mod window;
mod yara;

#[cfg(test)]
mod corpus_tests;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use memchr::memmem;
use regex::bytes::Regex;
use serde::Serialize;

pub use matches::{category_label, Match};
pub use rules::{
    Confidence, Rule, RuleError, RuleErrorKind, EXTENSION_GROUPS, MAX_LIST_LEN, MAX_LITERAL_BYTES,
    MAX_REGEX_BYTES, MAX_RULES, MAX_RULE_FILE_BYTES, MIN_ANCHOR_BYTES,
};
pub use window::ScanLimits;
pub use yara::to_yara;

/// The shipped rule files, embedded at build time: `(source name, TOML text)`.
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "rules/signatures/webshell.toml",
        include_str!("../../rules/signatures/webshell.toml"),
    ),
    (
        "rules/signatures/obfuscated_php.toml",
        include_str!("../../rules/signatures/obfuscated_php.toml"),
    ),
    (
        "rules/signatures/php_in_uploads.toml",
        include_str!("../../rules/signatures/php_in_uploads.toml"),
    ),
    (
        "rules/signatures/htaccess.toml",
        include_str!("../../rules/signatures/htaccess.toml"),
    ),
    (
        "rules/signatures/phishing.toml",
        include_str!("../../rules/signatures/phishing.toml"),
    ),
    (
        "rules/signatures/malicious_js.toml",
        include_str!("../../rules/signatures/malicious_js.toml"),
    ),
];

/// Most extra rule files read from a directory; the rest are refused (and counted).
pub const MAX_EXTRA_RULE_FILES: usize = 256;

/// Counters of one [`SignatureSet`] since it was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SignatureStats {
    /// Files (or buffers) whose bytes were scanned.
    pub files_scanned: u64,
    /// Files no rule applies to (by name/path): not read.
    pub files_skipped_no_rules: u64,
    /// Files refused: not a regular file, or could not be opened/read.
    pub files_refused: u64,
    /// Files larger than the whole-file limit (scanned by head and tail windows).
    pub files_windowed: u64,
    pub bytes_scanned: u64,
    /// Bytes in the middle of large files that were not scanned.
    pub bytes_skipped: u64,
    /// Regex evaluations (only candidates from the prefilter run regexes).
    pub regex_runs: u64,
    pub matches: u64,
    /// Matches beyond [`ScanLimits::max_matches_per_file`], not reported.
    pub matches_dropped: u64,
    /// Extra rule files refused when loading (invalid, unreadable, or over the file limit).
    pub rule_files_refused: u64,
}

#[derive(Default)]
struct Counters {
    files_scanned: AtomicU64,
    files_skipped_no_rules: AtomicU64,
    files_refused: AtomicU64,
    files_windowed: AtomicU64,
    bytes_scanned: AtomicU64,
    bytes_skipped: AtomicU64,
    regex_runs: AtomicU64,
    matches: AtomicU64,
    matches_dropped: AtomicU64,
    rule_files_refused: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

struct CompiledRule {
    /// Regex and whether it runs on the lower-cased copy.
    regexes: Vec<(Regex, bool)>,
    all: Vec<usize>,
    any: Vec<usize>,
    none: Vec<usize>,
}

/// Which rules an automaton pattern (a lower-cased anchor) serves.
#[derive(Default)]
struct PatternUsers {
    /// Rules satisfied by the anchor in any ASCII case.
    nocase: Vec<usize>,
    /// Rules that need these exact bytes.
    exact: Vec<(Vec<u8>, Vec<usize>)>,
}

/// A literal; `nocase` ones are lower-cased and searched in the lower-cased copy.
struct Literal {
    finder: memmem::Finder<'static>,
    on_lower: bool,
}

/// A compiled, immutable set of content signatures. Cheap to share (`Arc`) between scanner
/// threads; counters are atomics.
pub struct SignatureSet {
    rules: Vec<Rule>,
    compiled: Vec<CompiledRule>,
    ac: Option<AhoCorasick>,
    users: Vec<PatternUsers>,
    literals: Vec<Literal>,
    limits: ScanLimits,
    counters: Counters,
}

impl std::fmt::Debug for SignatureSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignatureSet")
            .field("rules", &self.rules.len())
            .field("anchors", &self.users.len())
            .field("literals", &self.literals.len())
            .field("limits", &self.limits)
            .finish()
    }
}

impl SignatureSet {
    /// Parses, validates and compiles rule sources `(name, TOML text)`. The first invalid
    /// source refuses the whole set.
    pub fn from_toml_strs(sources: &[(&str, &str)]) -> Result<SignatureSet, RuleError> {
        let mut seen = Vec::new();
        let mut parsed = Vec::new();
        for (name, text) in sources {
            parsed.extend(rules::parse_source(name, text, &mut seen, parsed.len())?);
        }
        Self::build(parsed).map_err(|kind| RuleError {
            source: "(rule set)".into(),
            rule_index: None,
            rule_id: None,
            key: None,
            kind,
        })
    }

    /// The shipped rules ([`SHIPPED`]).
    pub fn shipped() -> Result<SignatureSet, RuleError> {
        Self::from_toml_strs(SHIPPED)
    }

    /// How many rules [`SignatureSet::shipped`] has, from parsing alone (no pattern is
    /// compiled).
    pub fn shipped_rule_count() -> Result<usize, RuleError> {
        let mut seen = Vec::new();
        let mut n = 0;
        for (name, text) in SHIPPED {
            n += rules::parse_source(name, text, &mut seen, n)?.len();
        }
        Ok(n)
    }

    /// The shipped rules plus every `*.toml` file in `dir` (lexicographic order). Each extra
    /// file is accepted or refused as a whole; refused files are returned with their errors
    /// and counted in `rule_files_refused`. A missing `dir` adds nothing. Only an error in the
    /// shipped rules fails the call.
    pub fn shipped_with_dir(dir: &Path) -> Result<(SignatureSet, Vec<RuleError>), RuleError> {
        let mut seen = Vec::new();
        let mut parsed = Vec::new();
        for (name, text) in SHIPPED {
            parsed.extend(rules::parse_source(name, text, &mut seen, parsed.len())?);
        }
        let mut errors = Vec::new();
        let mut files = Vec::new();
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "toml") {
                    files.push(p);
                }
            }
        }
        files.sort();
        let io_err = |p: &Path, m: String| RuleError {
            source: p.display().to_string(),
            rule_index: None,
            rule_id: None,
            key: None,
            kind: RuleErrorKind::Invalid(m),
        };
        for (i, p) in files.iter().enumerate() {
            if i >= MAX_EXTRA_RULE_FILES {
                errors.push(io_err(
                    p,
                    format!("more than {MAX_EXTRA_RULE_FILES} rule files; not loaded"),
                ));
                continue;
            }
            let text = match read_rule_file(p) {
                Ok(t) => t,
                Err(e) => {
                    errors.push(io_err(p, e.to_string()));
                    continue;
                }
            };
            let name = p.display().to_string();
            match rules::parse_source(&name, &text, &mut seen, parsed.len()) {
                Ok(r) => parsed.extend(r),
                Err(e) => errors.push(e),
            }
        }
        let set = Self::build(parsed).map_err(|kind| RuleError {
            source: "(rule set)".into(),
            rule_index: None,
            rule_id: None,
            key: None,
            kind,
        })?;
        bump(&set.counters.rule_files_refused, errors.len() as u64);
        Ok((set, errors))
    }

    fn build(parsed: Vec<rules::ParsedRule>) -> Result<SignatureSet, RuleErrorKind> {
        let mut pattern_ids: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut users: Vec<PatternUsers> = Vec::new();
        let mut literal_ids: HashMap<(Vec<u8>, bool), usize> = HashMap::new();
        let mut literals: Vec<Literal> = Vec::new();
        let mut rules_out = Vec::with_capacity(parsed.len());
        let mut compiled = Vec::with_capacity(parsed.len());

        for (ri, p) in parsed.into_iter().enumerate() {
            let nocase = p.rule.nocase;
            for a in &p.rule.anchors {
                let key = a.as_bytes().to_ascii_lowercase();
                let pid = *pattern_ids.entry(key.clone()).or_insert_with(|| {
                    patterns.push(key);
                    users.push(PatternUsers::default());
                    patterns.len() - 1
                });
                let Some(u) = users.get_mut(pid) else {
                    continue;
                };
                if nocase {
                    u.nocase.push(ri);
                } else if let Some((_, rs)) = u
                    .exact
                    .iter_mut()
                    .find(|(b, _)| b.as_slice() == a.as_bytes())
                {
                    rs.push(ri);
                } else {
                    u.exact.push((a.as_bytes().to_vec(), vec![ri]));
                }
            }
            let mut lit = |s: &String| -> Result<usize, RuleErrorKind> {
                let key = if nocase {
                    (s.as_bytes().to_ascii_lowercase(), true)
                } else {
                    (s.as_bytes().to_vec(), false)
                };
                if let Some(id) = literal_ids.get(&key) {
                    return Ok(*id);
                }
                literals.push(Literal {
                    finder: memmem::Finder::new(&key.0).into_owned(),
                    on_lower: nocase,
                });
                literal_ids.insert(key, literals.len() - 1);
                Ok(literals.len() - 1)
            };
            let all = p.rule.all.iter().map(&mut lit).collect::<Result<_, _>>()?;
            let any = p.rule.any.iter().map(&mut lit).collect::<Result<_, _>>()?;
            let none = p.rule.none.iter().map(&mut lit).collect::<Result<_, _>>()?;
            let mut regexes = Vec::with_capacity(p.regexes.len());
            for (src, re) in p.rule.regex.iter().zip(p.regexes) {
                let lowered = if nocase {
                    fold::lower_pattern(src).and_then(|l| rules::compile_regex(&l, false).ok())
                } else {
                    None
                };
                regexes.push(match lowered {
                    Some(l) => (l, true),
                    None => (re, false),
                });
            }
            compiled.push(CompiledRule {
                regexes,
                all,
                any,
                none,
            });
            rules_out.push(p.rule);
        }
        let ac = if patterns.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::Standard)
                    .kind(Some(AhoCorasickKind::DFA))
                    .build(&patterns)
                    .map_err(|e| RuleErrorKind::Invalid(format!("anchor automaton: {e}")))?,
            )
        };
        Ok(SignatureSet {
            rules: rules_out,
            compiled,
            ac,
            users,
            literals,
            limits: ScanLimits::default(),
            counters: Counters::default(),
        })
    }

    /// Replaces the scan limits (normalized, see [`ScanLimits::normalized`]).
    pub fn with_limits(mut self, limits: ScanLimits) -> Self {
        self.limits = limits.normalized();
        self
    }

    pub fn limits(&self) -> ScanLimits {
        self.limits
    }

    /// The loaded rules, in load order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> SignatureStats {
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        SignatureStats {
            files_scanned: g(&c.files_scanned),
            files_skipped_no_rules: g(&c.files_skipped_no_rules),
            files_refused: g(&c.files_refused),
            files_windowed: g(&c.files_windowed),
            bytes_scanned: g(&c.bytes_scanned),
            bytes_skipped: g(&c.bytes_skipped),
            regex_runs: g(&c.regex_runs),
            matches: g(&c.matches),
            matches_dropped: g(&c.matches_dropped),
            rule_files_refused: g(&c.rule_files_refused),
        }
    }

    /// Whether any rule applies to `path` (a file no rule applies to is never read).
    pub fn applies_to(&self, path: &Path) -> bool {
        self.applicable(path).iter().any(|b| *b)
    }

    /// Scans an in-memory copy of the file at `path` (the path decides which rules apply).
    /// Buffers over the whole-file limit are scanned by head and tail windows.
    pub fn scan_bytes(&self, path: &Path, data: &[u8]) -> Vec<Match> {
        let app = self.applicable(path);
        if !app.iter().any(|b| *b) {
            bump(&self.counters.files_skipped_no_rules, 1);
            return Vec::new();
        }
        let (parts, skipped) = window::slice_windows(data, &self.limits);
        self.scan_parts(&app, parts.into_iter(), skipped)
    }

    /// Opens and scans the file at `path`, reading only its windows. Symlinks (as the file,
    /// or as a directory on the way unless root owns it) and non-regular files (FIFOs,
    /// devices, directories) are refused without being opened (`sys::dir`).
    pub fn scan_file(&self, path: &Path) -> io::Result<Vec<Match>> {
        let app = self.applicable(path);
        if !app.iter().any(|b| *b) {
            bump(&self.counters.files_skipped_no_rules, 1);
            return Ok(Vec::new());
        }
        let file = open_for_scan(path).inspect_err(|_| {
            bump(&self.counters.files_refused, 1);
        })?;
        self.scan_open_inner(&app, &file)
    }

    /// Scans an already open file (e.g. from fanotify) known by `path`. Reads with positioned
    /// reads, so the file offset does not matter and is not moved.
    pub fn scan_open_file(&self, path: &Path, file: &File) -> io::Result<Vec<Match>> {
        let app = self.applicable(path);
        if !app.iter().any(|b| *b) {
            bump(&self.counters.files_skipped_no_rules, 1);
            return Ok(Vec::new());
        }
        self.scan_open_inner(&app, file)
    }

    fn scan_open_inner(&self, app: &[bool], file: &File) -> io::Result<Vec<Match>> {
        let refused = |e: io::Error| {
            bump(&self.counters.files_refused, 1);
            e
        };
        let meta = file.metadata().map_err(refused)?;
        if !meta.file_type().is_file() {
            return Err(refused(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            )));
        }
        let w = window::read_windows(file, meta.len(), &self.limits).map_err(refused)?;
        let parts = w.parts.iter().map(|(o, b)| (*o, b.as_slice()));
        Ok(self.scan_parts(app, parts, w.skipped))
    }

    fn applicable(&self, path: &Path) -> Vec<bool> {
        let bytes = path.as_os_str().as_bytes();
        let name = path
            .file_name()
            .map(|n| n.as_bytes().to_ascii_lowercase())
            .unwrap_or_default();
        let ext: &[u8] = match memchr::memrchr(b'.', &name) {
            Some(0) | None => b"",
            Some(i) => name.get(i + 1..).unwrap_or(b""),
        };
        self.rules
            .iter()
            .map(|r| {
                let type_ok = r
                    .extensions
                    .iter()
                    .any(|e| e == "*" || (!ext.is_empty() && e.as_bytes() == ext))
                    || r.file_names.iter().any(|n| n.as_bytes() == name.as_slice());
                type_ok
                    && (r.path_contains.is_empty()
                        || r.path_contains
                            .iter()
                            .any(|p| memmem::find(bytes, p.as_bytes()).is_some()))
                    && !r
                        .path_excludes
                        .iter()
                        .any(|p| memmem::find(bytes, p.as_bytes()).is_some())
            })
            .collect()
    }

    fn scan_parts<'a>(
        &self,
        app: &[bool],
        parts: impl Iterator<Item = (u64, &'a [u8])>,
        skipped: u64,
    ) -> Vec<Match> {
        let c = &self.counters;
        bump(&c.files_scanned, 1);
        if skipped > 0 {
            bump(&c.files_windowed, 1);
            bump(&c.bytes_skipped, skipped);
        }
        let mut out: Vec<Match> = Vec::new();
        let mut matched = vec![false; self.rules.len()];
        let mut dropped = 0u64;
        let mut lower = Vec::new();
        for (base, data) in parts {
            bump(&c.bytes_scanned, data.len() as u64);
            fold::lower_into(data, &mut lower);
            let w = Window {
                base,
                data,
                lower: &lower,
            };
            self.scan_window(app, &w, &mut matched, &mut out, &mut dropped);
        }
        bump(&c.matches, out.len() as u64);
        bump(&c.matches_dropped, dropped);
        out
    }

    fn scan_window(
        &self,
        app: &[bool],
        w: &Window<'_>,
        matched: &mut [bool],
        out: &mut Vec<Match>,
        dropped: &mut u64,
    ) {
        let Some(ac) = &self.ac else {
            return;
        };
        // First anchor offset per candidate rule.
        let mut hit: Vec<Option<usize>> = vec![None; self.rules.len()];
        let mut pending = app
            .iter()
            .zip(matched.iter())
            .filter(|(a, m)| **a && !**m)
            .count();
        if pending == 0 {
            return;
        }
        let data = w.data;
        for m in ac.find_overlapping_iter(w.lower) {
            let Some(u) = self.users.get(m.pattern().as_usize()) else {
                continue;
            };
            for &r in &u.nocase {
                pending -= mark(app, matched, &mut hit, r, m.start());
            }
            for (exact, rs) in &u.exact {
                if data.get(m.range()) == Some(exact.as_slice()) {
                    for &r in rs {
                        pending -= mark(app, matched, &mut hit, r, m.start());
                    }
                }
            }
            if pending == 0 {
                break;
            }
        }
        // Literal presence per window: 0 unknown, 1 present, 2 absent.
        let mut lit_state = vec![0u8; self.literals.len()];
        let mut present = |id: usize| -> bool {
            match lit_state.get(id).copied() {
                Some(1) => true,
                Some(2) => false,
                _ => {
                    let yes = self.literals.get(id).is_some_and(|l| {
                        let hay = if l.on_lower { w.lower } else { data };
                        l.finder.find(hay).is_some()
                    });
                    if let Some(s) = lit_state.get_mut(id) {
                        *s = if yes { 1 } else { 2 };
                    }
                    yes
                }
            }
        };
        for (r, h) in hit.iter().enumerate() {
            let Some(anchor_at) = *h else {
                continue;
            };
            let (Some(rule), Some(cr)) = (self.rules.get(r), self.compiled.get(r)) else {
                continue;
            };
            if !cr.all.iter().all(|&l| present(l))
                || (!cr.any.is_empty() && !cr.any.iter().any(|&l| present(l)))
                || cr.none.iter().any(|&l| present(l))
            {
                continue;
            }
            let mut at = anchor_at;
            let mut ok = true;
            for (i, (re, on_lower)) in cr.regexes.iter().enumerate() {
                bump(&self.counters.regex_runs, 1);
                let hay = if *on_lower { w.lower } else { data };
                if i == 0 {
                    match re.find(hay) {
                        Some(m) => at = m.start(),
                        None => ok = false,
                    }
                } else if !re.is_match(hay) {
                    ok = false;
                }
                if !ok {
                    break;
                }
            }
            if !ok {
                continue;
            }
            if let Some(m) = matched.get_mut(r) {
                *m = true;
            }
            if out.len() >= self.limits.max_matches_per_file {
                *dropped += 1;
                continue;
            }
            out.push(Match {
                rule_id: rule.id.clone(),
                name: rule.name.clone(),
                category: rule.category.clone(),
                severity: rule.severity,
                confidence: rule.confidence,
                offset: w.base + at as u64,
                excerpt: matches::excerpt(data, at, self.limits.excerpt_max),
            });
        }
    }
}

/// One scan window: its absolute offset, bytes, and ASCII-lower-cased copy (same length).
struct Window<'a> {
    base: u64,
    data: &'a [u8],
    lower: &'a [u8],
}

/// Records the first anchor offset of rule `r` if it applies and has not matched yet; returns
/// 1 when the rule became a candidate, else 0.
fn mark(app: &[bool], matched: &[bool], hit: &mut [Option<usize>], r: usize, at: usize) -> usize {
    let eligible = app.get(r).copied().unwrap_or(false) && !matched.get(r).copied().unwrap_or(true);
    match hit.get_mut(r) {
        Some(slot @ None) if eligible => {
            *slot = Some(at);
            1
        }
        _ => 0,
    }
}

/// Why an extra rule file was not read.
#[derive(Debug)]
enum ReadError {
    Io(io::Error),
    /// Over [`MAX_RULE_FILE_BYTES`].
    TooLarge,
    NotUtf8,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "cannot read: {e}"),
            ReadError::TooLarge => write!(f, "larger than {MAX_RULE_FILE_BYTES} bytes"),
            ReadError::NotUtf8 => f.write_str("not valid UTF-8"),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Reads an extra rule file (in a directory the operator configured), a regular file of at
/// most [`MAX_RULE_FILE_BYTES`].
fn read_rule_file(p: &Path) -> Result<String, ReadError> {
    use std::io::Read;
    let f = open_for_scan(p).map_err(ReadError::Io)?;
    let meta = f.metadata().map_err(ReadError::Io)?;
    if meta.len() > MAX_RULE_FILE_BYTES as u64 {
        return Err(ReadError::TooLarge);
    }
    let mut bytes = Vec::new();
    f.take(MAX_RULE_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() > MAX_RULE_FILE_BYTES {
        return Err(ReadError::TooLarge);
    }
    String::from_utf8(bytes).map_err(|_| ReadError::NotUtf8)
}

/// Opens a file to scan through `sys::dir`: its directory is reached without following a
/// symlink a user owns (root's are followed), the file itself is never a symlink, and only a
/// regular file is opened (a FIFO, device or socket is refused without being opened), without
/// updating atime where permitted. What is checked is what is read: a name swapped between
/// a caller's `lstat` and this open cannot redirect the read.
fn open_for_scan(path: &Path) -> io::Result<File> {
    Ok(crate::sys::dir::open_regular_trusted(path, false)?)
}
