//! The vulnerability list: a JSON array of `{"slug", "type": "plugin"|"theme",
//! "fixed_in", "title"}`. Which list is in force: `cms.vulnerability_file` when set, else the
//! list `svc update-cms-vulnerabilities` wrote (`state_path/cms-vulnerabilities.json`), else
//! the shipped `rules/cms/vulnerabilities.json` (embedded).
//!
//! Entries that break a rule (slug alphabet and length, type, a `fixed_in` that is a
//! version, title length) are refused and counted; the rest of the list stays usable.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::plugins::{Item, ItemKind};
use super::version::{is_older, valid_version};

const EMBEDDED: &str = include_str!("../../rules/cms/vulnerabilities.json");
/// File name of the updated list under the state directory.
pub const UPDATED_FILE: &str = "cms-vulnerabilities.json";
/// Largest list read.
pub const MAX_LIST_BYTES: u64 = 64 << 20;
/// Entries kept at most.
pub const MAX_ENTRIES: usize = 500_000;
/// Longest slug and title.
const MAX_SLUG: usize = 200;
const MAX_TITLE: usize = 300;

/// One entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vuln {
    pub slug: String,
    pub kind: ItemKind,
    pub fixed_in: String,
    pub title: String,
}

/// A list and what it refused.
#[derive(Clone, Debug, Default)]
pub struct VulnList {
    pub entries: Vec<Vuln>,
    pub refused: usize,
    /// Where it came from (`embedded` or a path).
    pub source: String,
}

/// Why a list is not usable.
#[derive(Debug)]
pub enum ListError {
    Read(PathBuf, std::io::Error),
    TooLarge(PathBuf),
    Json(serde_json::Error),
    NoUsableEntry { refused: usize },
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::Read(p, e) => write!(f, "{}: {e}", p.display()),
            ListError::TooLarge(p) => {
                write!(f, "{}: larger than {MAX_LIST_BYTES} bytes", p.display())
            }
            ListError::Json(e) => write!(f, "not a JSON array of entries: {e}"),
            ListError::NoUsableEntry { refused } => {
                write!(f, "no usable entry ({refused} refused)")
            }
        }
    }
}

impl std::error::Error for ListError {}

#[derive(Deserialize)]
struct RawEntry {
    slug: Option<serde_json::Value>,
    #[serde(rename = "type")]
    kind: Option<serde_json::Value>,
    fixed_in: Option<serde_json::Value>,
    title: Option<serde_json::Value>,
}

fn valid_slug(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_SLUG
        && s.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
        })
        && !s.starts_with('.')
}

/// Parses a list. An empty array is a usable (empty) list only when `allow_empty`.
pub fn parse(bytes: &[u8], allow_empty: bool) -> Result<VulnList, ListError> {
    let raw: Vec<serde_json::Value> = serde_json::from_slice(bytes).map_err(ListError::Json)?;
    let mut out = VulnList::default();
    for v in raw {
        if out.entries.len() >= MAX_ENTRIES {
            out.refused += 1;
            continue;
        }
        let Ok(e) = serde_json::from_value::<RawEntry>(v) else {
            out.refused += 1;
            continue;
        };
        let s =
            |v: &Option<serde_json::Value>| v.as_ref().and_then(|v| v.as_str()).map(str::to_owned);
        let (Some(slug), Some(kind), Some(fixed_in)) = (s(&e.slug), s(&e.kind), s(&e.fixed_in))
        else {
            out.refused += 1;
            continue;
        };
        let kind = match kind.as_str() {
            "plugin" => ItemKind::Plugin,
            "theme" => ItemKind::Theme,
            _ => {
                out.refused += 1;
                continue;
            }
        };
        let title = s(&e.title).unwrap_or_default();
        if !valid_slug(&slug) || !valid_version(&fixed_in) || title.chars().count() > MAX_TITLE {
            out.refused += 1;
            continue;
        }
        out.entries.push(Vuln {
            slug,
            kind,
            fixed_in,
            title: crate::hostfs::sanitize(&title, MAX_TITLE),
        });
    }
    if out.entries.is_empty() && !(allow_empty && out.refused == 0) {
        return Err(ListError::NoUsableEntry {
            refused: out.refused,
        });
    }
    Ok(out)
}

/// The bytes of a list file, refused above [`MAX_LIST_BYTES`].
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, ListError> {
    let meta = std::fs::metadata(path).map_err(|e| ListError::Read(path.to_path_buf(), e))?;
    if meta.len() > MAX_LIST_BYTES {
        return Err(ListError::TooLarge(path.to_path_buf()));
    }
    crate::fsutil::read_daemon_file(path).map_err(|e| ListError::Read(path.to_path_buf(), e))
}

/// Reads a list file (bounded).
pub fn read_file(path: &Path) -> Result<VulnList, ListError> {
    let bytes = read_bytes(path)?;
    let mut l = parse(&bytes, true)?;
    l.source = path.display().to_string();
    Ok(l)
}

/// The shipped list.
pub fn embedded() -> VulnList {
    let mut l = parse(EMBEDDED.as_bytes(), true).unwrap_or_default();
    l.source = "embedded".to_string();
    l
}

/// The path the updated list is written to: `configured`, else under `state_path`.
pub fn target_path(configured: Option<&Path>, state_path: &Path) -> PathBuf {
    configured.map_or_else(|| state_path.join(UPDATED_FILE), Path::to_path_buf)
}

/// The list in force (see the module documentation). A configured file that is unusable
/// is an error (the operator asked for it); an unusable updated list falls back to the
/// shipped one with a warning.
pub fn load(configured: Option<&Path>, state_path: &Path) -> Result<VulnList, ListError> {
    if let Some(p) = configured {
        return read_file(p);
    }
    let updated = state_path.join(UPDATED_FILE);
    if updated.exists() {
        match read_file(&updated) {
            Ok(l) => return Ok(l),
            Err(e) => {
                log::warn!("cms: updated vulnerability list unusable, using the shipped one: {e}")
            }
        }
    }
    Ok(embedded())
}

/// The entries `item` matches (installed version older than `fixed_in`).
pub fn matches<'a>(list: &'a VulnList, item: &Item) -> Vec<&'a Vuln> {
    let Some(version) = &item.version else {
        return Vec::new();
    };
    list.entries
        .iter()
        .filter(|v| v.kind == item.kind && v.slug == item.slug && is_older(version, &v.fixed_in))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_list_is_usable() {
        let l = embedded();
        assert!(l.entries.len() >= 10, "{l:?}");
        assert_eq!(l.refused, 0);
    }

    #[test]
    fn entries_are_checked_one_by_one() {
        let l = parse(
            br#"[{"slug":"a-b","type":"plugin","fixed_in":"1.2","title":"t"},
                {"slug":"../x","type":"plugin","fixed_in":"1"},
                {"slug":"c","type":"module","fixed_in":"1"},
                {"slug":"d","type":"theme","fixed_in":"latest"},
                {"slug":"e","type":"theme","fixed_in":"2","title":5},
                7, null]"#,
            false,
        )
        .unwrap();
        assert_eq!(l.entries.len(), 2);
        assert_eq!(l.refused, 5);
        assert!(parse(b"[]", true).unwrap().entries.is_empty());
        assert!(parse(b"[]", false).is_err());
        assert!(parse(b"[1]", true).is_err());
        assert!(parse(b"{}", true).is_err());
        let item = Item {
            kind: ItemKind::Plugin,
            slug: "a-b".into(),
            name: "A".into(),
            version: Some("1.1.9".into()),
        };
        assert_eq!(matches(&l, &item).len(), 1);
        let newer = Item {
            version: Some("1.2".into()),
            ..item.clone()
        };
        assert!(matches(&l, &newer).is_empty());
        let garbage = Item {
            version: Some("x".into()),
            ..item
        };
        assert!(matches(&l, &garbage).is_empty());
    }
}
