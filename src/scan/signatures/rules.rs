//! The content-signature rule format: parsing and validation.
//!
//! A rule file is TOML:
//!
//! ```toml
//! format = 1                     # optional; only 1 is known
//!
//! [[rule]]
//! id = "SVC-WS-0001"             # unique across all loaded files: [A-Za-z0-9._-]{1,64}
//! name = "php_eval_request"      # snake_case, used in finding messages
//! category = "webshell"          # snake_case; becomes the finding's `check`
//! severity = "CRITICAL"          # CRITICAL | HIGH | WARNING
//! confidence = "high"            # high | medium | low (high may trigger auto quarantine)
//! description = "..."            # optional
//! extensions = ["@php"]          # last extension, lower-cased; "@group" or "*" for any
//! file_names = [".htaccess"]     # exact file names (lower-cased); either key suffices
//! path_contains = ["/uploads/"]  # optional: path must contain one of these
//! path_excludes = ["/cache/"]    # optional: path must contain none of these
//! nocase = true                  # ASCII case-insensitive anchors, literals and regexes
//! anchors = ["eval", "assert"]   # required prefilter literals (>= 3 bytes); one must occur
//! all = ["$_POST"]               # optional: every literal must occur
//! any = ["base64_decode"]        # optional: at least one must occur
//! none = ["Silence is golden"]   # optional: no literal may occur
//! regex = ['''eval\s*\(''']      # optional: every regex must match (Rust syntax, bytes,
//!                                # ASCII classes; keep to the subset YARA also accepts)
//! ```
//!
//! Guarantees: parsing never panics on any input; every refusal is a [`RuleError`] naming the
//! source, the rule (index and id when known) and the key.

use std::collections::HashSet;
use std::fmt;

use regex::bytes::{Regex, RegexBuilder};
use toml::{Table, Value};

use crate::findings::Severity;

/// Largest rule file accepted, in bytes.
pub const MAX_RULE_FILE_BYTES: usize = 1024 * 1024;
/// Most rules accepted across all sources of one set.
pub const MAX_RULES: usize = 4096;
/// Most literals in one list (`anchors`, `all`, `any`, `none`) and most regexes per rule.
pub const MAX_LIST_LEN: usize = 64;
/// Longest literal, in bytes.
pub const MAX_LITERAL_BYTES: usize = 256;
/// Shortest anchor literal, in bytes (shorter anchors would defeat the prefilter).
pub const MIN_ANCHOR_BYTES: usize = 3;
/// Longest regex source, in bytes.
pub const MAX_REGEX_BYTES: usize = 4096;
/// Compiled size limit of one regex, in bytes.
pub const REGEX_SIZE_LIMIT: usize = 2 * 1024 * 1024;

/// How sure a rule is that a match is malicious.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

impl Confidence {
    pub fn label(self) -> &'static str {
        match self {
            Confidence::Low => "low",
            Confidence::Medium => "medium",
            Confidence::High => "high",
        }
    }
}

impl fmt::Display for Confidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One validated rule, as written in its file (groups in `extensions` expanded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub id: String,
    pub name: String,
    pub category: String,
    pub severity: Severity,
    pub confidence: Confidence,
    pub description: String,
    /// Lower-case extensions without the dot; `"*"` matches every file.
    pub extensions: Vec<String>,
    /// Lower-case exact file names.
    pub file_names: Vec<String>,
    pub path_contains: Vec<String>,
    pub path_excludes: Vec<String>,
    pub nocase: bool,
    pub anchors: Vec<String>,
    pub all: Vec<String>,
    pub any: Vec<String>,
    pub none: Vec<String>,
    pub regex: Vec<String>,
    /// Name of the source (file) the rule came from.
    pub source: String,
}

/// What was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleErrorKind {
    /// Not valid TOML (message includes line and column).
    Syntax(String),
    /// The source exceeds [`MAX_RULE_FILE_BYTES`].
    TooLarge {
        limit: usize,
    },
    /// More than [`MAX_RULES`] rules in the set.
    TooManyRules {
        limit: usize,
    },
    UnknownKey,
    Missing,
    WrongType {
        expected: &'static str,
    },
    /// A value that has the right type but is not allowed; the text says why.
    Invalid(String),
    /// Another rule (in `first_source`) already uses this id.
    DuplicateId {
        first_source: String,
    },
}

/// A refused rule source. Display: `source: rule #3 (id X): key `regex[0]`: ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    pub source: String,
    /// Zero-based index of the `[[rule]]` table, when the error is inside one.
    pub rule_index: Option<usize>,
    pub rule_id: Option<String>,
    pub key: Option<String>,
    pub kind: RuleErrorKind,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        match (self.rule_index, &self.rule_id) {
            (Some(i), Some(id)) => write!(f, ": rule #{} (id {id})", i + 1)?,
            (Some(i), None) => write!(f, ": rule #{}", i + 1)?,
            (None, Some(id)) => write!(f, ": rule {id}")?,
            (None, None) => {}
        }
        if let Some(k) = &self.key {
            write!(f, ": key `{k}`")?;
        }
        match &self.kind {
            RuleErrorKind::Syntax(m) => write!(f, ": invalid TOML: {m}"),
            RuleErrorKind::TooLarge { limit } => write!(f, ": file larger than {limit} bytes"),
            RuleErrorKind::TooManyRules { limit } => write!(f, ": more than {limit} rules"),
            RuleErrorKind::UnknownKey => write!(f, ": unknown key"),
            RuleErrorKind::Missing => write!(f, ": missing"),
            RuleErrorKind::WrongType { expected } => write!(f, ": expected {expected}"),
            RuleErrorKind::Invalid(m) => write!(f, ": {m}"),
            RuleErrorKind::DuplicateId { first_source } => {
                write!(f, ": duplicate id (first defined in {first_source})")
            }
        }
    }
}

impl std::error::Error for RuleError {}

/// A rule with its regexes compiled.
#[derive(Clone, Debug)]
pub(crate) struct ParsedRule {
    pub rule: Rule,
    pub regexes: Vec<Regex>,
}

const RULE_KEYS: &[&str] = &[
    "id",
    "name",
    "category",
    "severity",
    "confidence",
    "description",
    "extensions",
    "file_names",
    "path_contains",
    "path_excludes",
    "nocase",
    "anchors",
    "all",
    "any",
    "none",
    "regex",
];

/// Extension groups usable in `extensions` as `"@name"`. `@php` is every extension of
/// [`crate::hostfs::PHP_EXTENSIONS`] (a test holds them equal).
pub const EXTENSION_GROUPS: &[(&str, &[&str])] = &[
    (
        "php",
        &[
            "php", "php3", "php4", "php5", "php7", "php8", "phtml", "pht", "phar", "inc", "phps",
        ],
    ),
    ("html", &["html", "htm", "shtml", "xhtml"]),
    ("js", &["js", "mjs"]),
    (
        "image",
        &[
            "jpg", "jpeg", "png", "gif", "bmp", "ico", "webp", "tif", "tiff",
        ],
    ),
];

/// Compiles one regex source with the rule's case setting and the set's limits.
pub(crate) fn compile_regex(src: &str, nocase: bool) -> Result<Regex, regex::Error> {
    RegexBuilder::new(src)
        .unicode(false)
        .case_insensitive(nocase)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
}

/// Parses and validates one rule source. `seen` holds the ids (and their sources) of rules
/// already accepted, for duplicate detection; accepted ids are added to it only on success.
pub(crate) fn parse_source(
    source: &str,
    text: &str,
    seen: &mut Vec<(String, String)>,
    rules_so_far: usize,
) -> Result<Vec<ParsedRule>, RuleError> {
    let err = |kind| RuleError {
        source: source.to_string(),
        rule_index: None,
        rule_id: None,
        key: None,
        kind,
    };
    if text.len() > MAX_RULE_FILE_BYTES {
        return Err(err(RuleErrorKind::TooLarge {
            limit: MAX_RULE_FILE_BYTES,
        }));
    }
    let table: Table = text
        .parse()
        .map_err(|e: toml::de::Error| err(RuleErrorKind::Syntax(e.to_string().trim().into())))?;
    let top_key_err = |key: &str, kind| RuleError {
        key: Some(key.to_string()),
        ..err(kind)
    };
    for (k, v) in &table {
        match k.as_str() {
            "format" => match v.as_integer() {
                Some(1) => {}
                Some(_) => {
                    return Err(top_key_err(
                        k,
                        RuleErrorKind::Invalid("unsupported format (only 1 is known)".into()),
                    ))
                }
                None => {
                    return Err(top_key_err(
                        k,
                        RuleErrorKind::WrongType {
                            expected: "an integer",
                        },
                    ))
                }
            },
            "rule" => {}
            _ => return Err(top_key_err(k, RuleErrorKind::UnknownKey)),
        }
    }
    let rules = match table.get("rule") {
        None => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => {
            return Err(top_key_err(
                "rule",
                RuleErrorKind::WrongType {
                    expected: "an array of tables ([[rule]])",
                },
            ))
        }
    };
    if rules_so_far.saturating_add(rules.len()) > MAX_RULES {
        return Err(err(RuleErrorKind::TooManyRules { limit: MAX_RULES }));
    }
    let mut out = Vec::with_capacity(rules.len());
    let mut local: HashSet<String> = HashSet::new();
    for (i, v) in rules.iter().enumerate() {
        let t = v.as_table().ok_or_else(|| RuleError {
            rule_index: Some(i),
            key: Some("rule".into()),
            ..err(RuleErrorKind::WrongType {
                expected: "a table",
            })
        })?;
        let parsed = parse_rule(source, i, t)?;
        let id = parsed.rule.id.clone();
        if let Some((_, first)) = seen.iter().find(|(sid, _)| *sid == id) {
            return Err(RuleError {
                rule_index: Some(i),
                rule_id: Some(id),
                key: Some("id".into()),
                ..err(RuleErrorKind::DuplicateId {
                    first_source: first.clone(),
                })
            });
        }
        if !local.insert(id.clone()) {
            return Err(RuleError {
                rule_index: Some(i),
                rule_id: Some(id),
                key: Some("id".into()),
                ..err(RuleErrorKind::DuplicateId {
                    first_source: source.to_string(),
                })
            });
        }
        out.push(parsed);
    }
    for p in &out {
        seen.push((p.rule.id.clone(), source.to_string()));
    }
    Ok(out)
}

struct Ctx<'a> {
    source: &'a str,
    index: usize,
    id: Option<String>,
}

impl Ctx<'_> {
    fn err(&self, key: &str, kind: RuleErrorKind) -> RuleError {
        RuleError {
            source: self.source.to_string(),
            rule_index: Some(self.index),
            rule_id: self.id.clone(),
            key: Some(key.to_string()),
            kind,
        }
    }

    fn string(&self, t: &Table, key: &str, required: bool) -> Result<Option<String>, RuleError> {
        match t.get(key) {
            None if required => Err(self.err(key, RuleErrorKind::Missing)),
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.err(
                key,
                RuleErrorKind::WrongType {
                    expected: "a string",
                },
            )),
        }
    }

    fn list(&self, t: &Table, key: &str) -> Result<Vec<String>, RuleError> {
        let arr = match t.get(key) {
            None => return Ok(Vec::new()),
            Some(Value::Array(a)) => a,
            Some(_) => {
                return Err(self.err(
                    key,
                    RuleErrorKind::WrongType {
                        expected: "an array of strings",
                    },
                ))
            }
        };
        if arr.len() > MAX_LIST_LEN {
            return Err(self.err(
                key,
                RuleErrorKind::Invalid(format!("more than {MAX_LIST_LEN} entries")),
            ));
        }
        let mut out = Vec::with_capacity(arr.len());
        for (j, v) in arr.iter().enumerate() {
            let k = format!("{key}[{j}]");
            let s = v.as_str().ok_or_else(|| {
                self.err(
                    &k,
                    RuleErrorKind::WrongType {
                        expected: "a string",
                    },
                )
            })?;
            if s.is_empty() {
                return Err(self.err(&k, RuleErrorKind::Invalid("empty string".into())));
            }
            out.push(s.to_string());
        }
        Ok(out)
    }
}

fn is_snake(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b.first().is_some_and(|c| c.is_ascii_lowercase())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

fn parse_rule(source: &str, index: usize, t: &Table) -> Result<ParsedRule, RuleError> {
    let mut cx = Ctx {
        source,
        index,
        id: None,
    };
    // The id first, so every later error can name it.
    let id = cx.string(t, "id", true)?.unwrap_or_default();
    if !valid_id(&id) {
        return Err(cx.err(
            "id",
            RuleErrorKind::Invalid("must be 1-64 characters of A-Z a-z 0-9 . _ -".into()),
        ));
    }
    cx.id = Some(id.clone());
    for k in t.keys() {
        if !RULE_KEYS.contains(&k.as_str()) {
            return Err(cx.err(k, RuleErrorKind::UnknownKey));
        }
    }
    let name = cx.string(t, "name", true)?.unwrap_or_default();
    if !is_snake(&name) {
        return Err(cx.err(
            "name",
            RuleErrorKind::Invalid("must be snake_case ([a-z][a-z0-9_]*, at most 64)".into()),
        ));
    }
    let category = cx.string(t, "category", true)?.unwrap_or_default();
    if !is_snake(&category) {
        return Err(cx.err(
            "category",
            RuleErrorKind::Invalid("must be snake_case ([a-z][a-z0-9_]*, at most 64)".into()),
        ));
    }
    let sev_s = cx.string(t, "severity", true)?.unwrap_or_default();
    let severity = match sev_s.to_ascii_uppercase().as_str() {
        "CRITICAL" => Severity::Critical,
        "HIGH" => Severity::High,
        "WARNING" => Severity::Warning,
        _ => {
            return Err(cx.err(
                "severity",
                RuleErrorKind::Invalid("must be CRITICAL, HIGH or WARNING".into()),
            ))
        }
    };
    let conf_s = cx.string(t, "confidence", true)?.unwrap_or_default();
    let confidence = match conf_s.to_ascii_lowercase().as_str() {
        "high" => Confidence::High,
        "medium" => Confidence::Medium,
        "low" => Confidence::Low,
        _ => {
            return Err(cx.err(
                "confidence",
                RuleErrorKind::Invalid("must be high, medium or low".into()),
            ))
        }
    };
    let description = cx.string(t, "description", false)?.unwrap_or_default();
    let nocase = match t.get("nocase") {
        None => false,
        Some(Value::Boolean(b)) => *b,
        Some(_) => {
            return Err(cx.err(
                "nocase",
                RuleErrorKind::WrongType {
                    expected: "a boolean",
                },
            ))
        }
    };

    let mut extensions = Vec::new();
    for (j, e) in cx.list(t, "extensions")?.into_iter().enumerate() {
        let e = e.to_ascii_lowercase();
        if let Some(group) = e.strip_prefix('@') {
            let members = EXTENSION_GROUPS
                .iter()
                .find(|(g, _)| *g == group)
                .map(|(_, m)| *m)
                .ok_or_else(|| {
                    cx.err(
                        &format!("extensions[{j}]"),
                        RuleErrorKind::Invalid(format!(
                            "unknown group @{group} (known: @php @html @js @image)"
                        )),
                    )
                })?;
            extensions.extend(members.iter().map(|m| m.to_string()));
        } else if e == "*"
            || (e.len() <= 16 && e.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'))
        {
            extensions.push(e);
        } else {
            return Err(cx.err(
                &format!("extensions[{j}]"),
                RuleErrorKind::Invalid(
                    "an extension is 1-16 letters/digits without the dot, \"*\" or \"@group\""
                        .into(),
                ),
            ));
        }
    }
    extensions.sort();
    extensions.dedup();
    let mut file_names = Vec::new();
    for (j, n) in cx.list(t, "file_names")?.into_iter().enumerate() {
        if n.contains('/') || n.len() > 255 {
            return Err(cx.err(
                &format!("file_names[{j}]"),
                RuleErrorKind::Invalid("a file name has no '/' and at most 255 bytes".into()),
            ));
        }
        file_names.push(n.to_ascii_lowercase());
    }
    if extensions.is_empty() && file_names.is_empty() {
        return Err(cx.err(
            "extensions",
            RuleErrorKind::Invalid(
                "a rule needs `extensions` or `file_names` (use [\"*\"] for every file)".into(),
            ),
        ));
    }
    let path_contains = cx.list(t, "path_contains")?;
    let path_excludes = cx.list(t, "path_excludes")?;

    let anchors = cx.list(t, "anchors")?;
    if anchors.is_empty() {
        return Err(cx.err("anchors", RuleErrorKind::Missing));
    }
    for (j, a) in anchors.iter().enumerate() {
        if a.len() < MIN_ANCHOR_BYTES || a.len() > MAX_LITERAL_BYTES {
            return Err(cx.err(
                &format!("anchors[{j}]"),
                RuleErrorKind::Invalid(format!(
                    "an anchor has {MIN_ANCHOR_BYTES}-{MAX_LITERAL_BYTES} bytes"
                )),
            ));
        }
    }
    let all = cx.list(t, "all")?;
    let any = cx.list(t, "any")?;
    let none = cx.list(t, "none")?;
    for (key, list) in [("all", &all), ("any", &any), ("none", &none)] {
        for (j, l) in list.iter().enumerate() {
            if l.len() > MAX_LITERAL_BYTES {
                return Err(cx.err(
                    &format!("{key}[{j}]"),
                    RuleErrorKind::Invalid(format!("longer than {MAX_LITERAL_BYTES} bytes")),
                ));
            }
        }
    }
    let regex_src = cx.list(t, "regex")?;
    let mut regexes = Vec::with_capacity(regex_src.len());
    for (j, r) in regex_src.iter().enumerate() {
        let k = format!("regex[{j}]");
        if r.len() > MAX_REGEX_BYTES {
            return Err(cx.err(
                &k,
                RuleErrorKind::Invalid(format!("longer than {MAX_REGEX_BYTES} bytes")),
            ));
        }
        if r.contains("(?") {
            return Err(cx.err(
                &k,
                RuleErrorKind::Invalid(
                    "inline flags and non-capturing groups `(?` are not allowed (use nocase)"
                        .into(),
                ),
            ));
        }
        let re = compile_regex(r, nocase).map_err(|e| {
            let msg = e
                .to_string()
                .lines()
                .last()
                .unwrap_or("")
                .trim()
                .to_string();
            cx.err(&k, RuleErrorKind::Invalid(format!("invalid regex: {msg}")))
        })?;
        regexes.push(re);
    }
    Ok(ParsedRule {
        rule: Rule {
            id,
            name,
            category,
            severity,
            confidence,
            description,
            extensions,
            file_names,
            path_contains,
            path_excludes,
            nocase,
            anchors,
            all,
            any,
            none,
            regex: regex_src,
            source: source.to_string(),
        },
        regexes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
format = 1
[[rule]]
id = "T-1"
name = "test_rule"
category = "webshell"
severity = "high"
confidence = "medium"
extensions = ["@php", "txt"]
nocase = true
anchors = ["eval"]
regex = ['''eval\s*\(''']
"#;

    fn parse(text: &str) -> Result<Vec<ParsedRule>, RuleError> {
        parse_source("t.toml", text, &mut Vec::new(), 0)
    }

    fn err_of(text: &str) -> RuleError {
        match parse(text) {
            Err(e) => e,
            Ok(_) => panic!("expected an error for {text}"),
        }
    }

    #[test]
    fn parses_a_good_rule_and_expands_groups() {
        let r = parse(GOOD).unwrap();
        assert_eq!(r.len(), 1);
        let rule = &r[0].rule;
        assert_eq!(rule.severity, Severity::High);
        assert_eq!(rule.confidence, Confidence::Medium);
        assert!(rule.extensions.contains(&"phtml".to_string()));
        assert!(rule.extensions.contains(&"txt".to_string()));
        assert!(r[0].regexes[0].is_match(b"EVAL ("));
    }

    #[test]
    fn the_php_group_is_the_hostfs_php_table() {
        let group: Vec<&str> = EXTENSION_GROUPS
            .iter()
            .find(|(n, _)| *n == "php")
            .map(|(_, m)| m.to_vec())
            .unwrap_or_default();
        let table: Vec<&str> = crate::hostfs::PHP_EXTENSIONS
            .iter()
            .map(|(e, _)| *e)
            .collect();
        assert_eq!(group, table);
    }

    #[test]
    fn errors_name_rule_and_key() {
        let e = err_of(&GOOD.replace("severity = \"high\"", "severity = \"urgent\""));
        assert_eq!(e.rule_id.as_deref(), Some("T-1"));
        assert_eq!(e.key.as_deref(), Some("severity"));
        let s = e.to_string();
        assert!(
            s.contains("t.toml: rule #1 (id T-1): key `severity`"),
            "{s}"
        );

        let e = err_of(&GOOD.replace("nocase = true", "nocase = true\nbogus = 1"));
        assert_eq!(e.kind, RuleErrorKind::UnknownKey);
        assert_eq!(e.key.as_deref(), Some("bogus"));

        let e = err_of(&GOOD.replace("anchors = [\"eval\"]", ""));
        assert_eq!(
            (e.key.as_deref(), e.kind),
            (Some("anchors"), RuleErrorKind::Missing)
        );

        let e = err_of(&GOOD.replace("anchors = [\"eval\"]", "anchors = [\"ev\"]"));
        assert_eq!(e.key.as_deref(), Some("anchors[0]"));

        let e = err_of(&GOOD.replace(r"eval\s*\(", r"eval(\s*"));
        assert_eq!(e.key.as_deref(), Some("regex[0]"));
        assert!(e.to_string().contains("invalid regex"), "{e}");

        let e = err_of(&GOOD.replace(r"eval\s*\(", r"(?i)eval"));
        assert_eq!(e.key.as_deref(), Some("regex[0]"));

        let e = err_of(&GOOD.replace("test_rule", "Test-Rule"));
        assert_eq!(e.key.as_deref(), Some("name"));

        let e = err_of(&GOOD.replace("\"@php\"", "\"@nope\""));
        assert_eq!(e.key.as_deref(), Some("extensions[0]"));

        let e = err_of(&GOOD.replace("extensions = [\"@php\", \"txt\"]", ""));
        assert_eq!(e.key.as_deref(), Some("extensions"));

        let e = err_of(&GOOD.replace("format = 1", "format = 2"));
        assert_eq!((e.key.as_deref(), e.rule_index), (Some("format"), None));

        let e = err_of("x = [");
        assert!(matches!(e.kind, RuleErrorKind::Syntax(_)));

        let e = err_of(&format!(
            "{GOOD}\n{}",
            &GOOD[GOOD.find("[[rule]]").unwrap()..]
        ));
        assert!(matches!(e.kind, RuleErrorKind::DuplicateId { .. }));
        assert_eq!(e.rule_index, Some(1));
    }

    #[test]
    fn duplicate_ids_across_sources_are_refused() {
        let mut seen = Vec::new();
        parse_source("a.toml", GOOD, &mut seen, 0).unwrap();
        let e = parse_source("b.toml", GOOD, &mut seen, 1).unwrap_err();
        assert_eq!(
            e.kind,
            RuleErrorKind::DuplicateId {
                first_source: "a.toml".into()
            }
        );
    }

    #[test]
    fn limits_are_enforced() {
        let big = "#".repeat(MAX_RULE_FILE_BYTES + 1);
        assert!(matches!(err_of(&big).kind, RuleErrorKind::TooLarge { .. }));
        let e = parse_source("t.toml", GOOD, &mut Vec::new(), MAX_RULES).unwrap_err();
        assert!(matches!(e.kind, RuleErrorKind::TooManyRules { .. }));
    }

    #[test]
    fn garbage_never_panics() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for round in 0..2000 {
            let len = (round % 200) + 1;
            let mut bytes = Vec::with_capacity(len);
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                bytes.push((x & 0xff) as u8);
            }
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse(&text);
            // Mutations of a valid file exercise the validator rather than the TOML parser.
            let cut = (x as usize) % GOOD.len();
            let mutated = format!("{}{}{}", &GOOD[..cut], text, &GOOD[cut..]);
            let _ = parse(&mutated);
        }
    }
}
