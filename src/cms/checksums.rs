//! Official core checksums: the answer's parser, and the source that asks
//! `{checksums_url}?version=V&locale=L` and caches good answers per version and locale in
//! the store (`store::cms`).
//!
//! Guarantees:
//! - The answer is read under [`ANSWER_CAP`] and a deadline; redirects are not followed.
//! - A path is used only when it is relative, without `..`, NUL or a backslash, under
//!   [`MAX_PATH_LEN`] bytes; a digest only when it is 32 hex digits. Refused entries are
//!   counted ([`Checksums::refused`]), the rest stays usable; an answer with no usable
//!   entry is an error.
//! - A locale without checksums falls back to `en_US` (the core files are the same; a
//!   localised package adds only translations, in `wp-content/languages`, which is skipped).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;

use crate::net::https::{Client, FetchError, Roots};
use crate::store::{Store, StoreError};

/// Largest answer read (WordPress's is about 300 KiB).
pub const ANSWER_CAP: u64 = 8 << 20;
/// Entries kept from one answer at most.
pub const MAX_ENTRIES: usize = 50_000;
/// Longest core path accepted.
pub const MAX_PATH_LEN: usize = 512;

/// A version's core files and their MD5 digests (lower-case hex).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checksums {
    pub files: BTreeMap<String, String>,
    /// Entries refused by the path, digest or count rules.
    pub refused: usize,
}

/// Why a version's checksums are not available. `cause` is the stable token findings and
/// collapsed warnings name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChecksumError {
    /// Connect, TLS, send, read or deadline.
    Transport(String),
    /// The answer was larger than [`ANSWER_CAP`].
    TooLarge,
    /// The source answered another status than 200.
    Status(u16),
    /// Not JSON, or not `{"checksums": {...}}`.
    Invalid(String),
    /// `{"checksums": false}`: the source knows no such version.
    UnknownVersion,
    /// Every entry was refused.
    NoUsableEntry,
}

impl ChecksumError {
    /// Stable cause token.
    pub fn cause(&self) -> &'static str {
        match self {
            ChecksumError::Transport(_) | ChecksumError::TooLarge => "checksum_source_unreachable",
            ChecksumError::Status(_) => "checksum_source_error",
            ChecksumError::Invalid(_) | ChecksumError::NoUsableEntry => "checksum_answer_invalid",
            ChecksumError::UnknownVersion => "checksum_version_unknown",
        }
    }
}

impl std::fmt::Display for ChecksumError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChecksumError::Transport(e) => write!(f, "checksum source not reached: {e}"),
            ChecksumError::TooLarge => {
                write!(f, "checksum answer larger than {ANSWER_CAP} bytes")
            }
            ChecksumError::Status(s) => write!(f, "checksum source answered HTTP {s}"),
            ChecksumError::Invalid(e) => write!(f, "checksum answer is not valid: {e}"),
            ChecksumError::UnknownVersion => {
                f.write_str("checksum source has no checksums for this version")
            }
            ChecksumError::NoUsableEntry => f.write_str("checksum answer has no usable entry"),
        }
    }
}

impl std::error::Error for ChecksumError {}

/// Whether `p` is a safe relative core path.
pub fn safe_path(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= MAX_PATH_LEN
        && !p.starts_with('/')
        && !p.contains(['\0', '\\'])
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

fn is_md5(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Parses `{"checksums": {"path": "md5"}}` (also accepts WordPress's multi-version form
/// `{"checksums": {"6.4.3": {...}}}` for exactly the asked `version`).
pub fn parse(body: &[u8], version: &str) -> Result<Checksums, ChecksumError> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| ChecksumError::Invalid(e.to_string()))?;
    let sums = match v.get("checksums") {
        Some(serde_json::Value::Object(m)) => m,
        Some(serde_json::Value::Bool(false)) => return Err(ChecksumError::UnknownVersion),
        _ => {
            return Err(ChecksumError::Invalid(
                "no \"checksums\" object".to_string(),
            ))
        }
    };
    let sums = match sums.get(version) {
        Some(serde_json::Value::Object(inner)) => inner,
        _ => sums,
    };
    let mut out = Checksums::default();
    for (path, digest) in sums {
        let digest = digest.as_str().unwrap_or("");
        if out.files.len() >= MAX_ENTRIES || !safe_path(path) || !is_md5(digest) {
            out.refused += 1;
            continue;
        }
        out.files.insert(path.clone(), digest.to_ascii_lowercase());
    }
    if out.files.is_empty() {
        return Err(ChecksumError::NoUsableEntry);
    }
    Ok(out)
}

/// The checksum source: the configured URL, the store's cache and the HTTP client settings.
/// Built once per scan: one answer per version and locale is shared by every installation
/// of the scan (a dead source is asked once per scan, not once per site).
pub struct Source {
    pub url: String,
    pub roots: Roots,
    pub timeout: Duration,
    pub store: Store,
    memo: Mutex<HashMap<(String, String), Arc<Memo>>>,
}

type Memo = OnceLock<Result<Arc<Checksums>, ChecksumError>>;

impl Source {
    pub fn new(url: String, roots: Roots, timeout: Duration, store: Store) -> Source {
        Source {
            url,
            roots,
            timeout,
            store,
            memo: Mutex::new(HashMap::new()),
        }
    }

    /// [`Source::lookup`] once per version and locale for the life of this source; other
    /// callers asking meanwhile wait for that answer.
    pub fn get(
        &self,
        version: &str,
        locale: &str,
        now_micros: i64,
    ) -> Result<Arc<Checksums>, ChecksumError> {
        let cell = self
            .memo
            .lock()
            .entry((version.to_string(), locale.to_string()))
            .or_default()
            .clone();
        cell.get_or_init(|| self.lookup(version, locale, now_micros).map(Arc::new))
            .clone()
    }

    /// The cached checksums of `version`/`locale`, if stored (a store error reads as a miss).
    fn cached(&self, version: &str, locale: &str) -> Option<Checksums> {
        let (v, l) = (version.to_string(), locale.to_string());
        let text = self
            .store
            .read(move |c| crate::store::cms::checksums(c, &v, &l))
            .ok()
            .flatten()?;
        parse(text.as_bytes(), version).ok()
    }

    fn fetch_one(&self, version: &str, locale: &str) -> Result<Checksums, ChecksumError> {
        let url = format!("{}?version={version}&locale={locale}", self.url);
        let client = Client::new(&self.url, &self.roots, self.timeout, ANSWER_CAP, 0);
        let got = client
            .get(&url, &[("accept", "application/json")])
            .map_err(|e| match e {
                FetchError::TooLarge(_) => ChecksumError::TooLarge,
                FetchError::Transport(m) => ChecksumError::Transport(m),
            })?;
        if got.status != 200 {
            return Err(ChecksumError::Status(got.status));
        }
        parse(&got.body, version)
    }

    /// The checksums of `version`/`locale`: from the cache, else fetched (falling back to
    /// `en_US` when the locale has none) and cached. `now_micros` stamps the cache row.
    fn lookup(
        &self,
        version: &str,
        locale: &str,
        now_micros: i64,
    ) -> Result<Checksums, ChecksumError> {
        if let Some(c) = self.cached(version, locale) {
            return Ok(c);
        }
        let fetched = match self.fetch_one(version, locale) {
            Err(ChecksumError::UnknownVersion) if locale != super::version::DEFAULT_LOCALE => {
                self.fetch_one(version, super::version::DEFAULT_LOCALE)
            }
            r => r,
        };
        let sums = fetched?;
        // Cache the document as canonical JSON of the usable entries only.
        let doc = serde_json::json!({ "checksums": sums.files }).to_string();
        let (v, l) = (version.to_string(), locale.to_string());
        if let Err(e) = self
            .store
            .write(move |c| crate::store::cms::put_checksums(c, &v, &l, now_micros, &doc))
        {
            let e: StoreError = e;
            log::warn!("cms: checksums of {version}/{locale} not cached: {e}");
        }
        Ok(sums)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_entry_by_entry() {
        let md5 = "d41d8cd98f00b204e9800998ecf8427e";
        let body = format!(
            r#"{{"checksums": {{"index.php": "{md5}", "wp-admin/a.php": "{}", "../etc/passwd": "{md5}", "/abs": "{md5}", "x.php": "nothex", "a//b": "{md5}", "n": 5}}}}"#,
            md5.to_uppercase()
        );
        let c = parse(body.as_bytes(), "6.4").unwrap();
        assert_eq!(c.files.len(), 2);
        assert_eq!(c.files["wp-admin/a.php"], md5);
        assert_eq!(c.refused, 5);
        let nested = format!(r#"{{"checksums": {{"6.4": {{"index.php": "{md5}"}}}}}}"#);
        assert_eq!(parse(nested.as_bytes(), "6.4").unwrap().files.len(), 1);
        assert_eq!(
            parse(br#"{"checksums": false}"#, "1"),
            Err(ChecksumError::UnknownVersion)
        );
        assert_eq!(
            parse(br#"{"checksums": {}}"#, "1"),
            Err(ChecksumError::NoUsableEntry)
        );
        assert!(matches!(parse(b"[1", "1"), Err(ChecksumError::Invalid(_))));
        assert!(matches!(parse(b"{}", "1"), Err(ChecksumError::Invalid(_))));
    }
}
