//! glob(3)-like expansion of path patterns (`*`, `?`, `[...]`, `\` escapes), sorted
//! bytewise like `glob` sorts, bounded by a match limit (the checks pass
//! `max_glob_matches`). A leading `.` in a name is matched only by a literal `.` (as glob(3)
//! does). Intermediate symlinks are followed, as glob(3) does; only paths that exist are
//! returned.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// True if the bytes hold a glob metacharacter.
pub fn has_magic(s: &[u8]) -> bool {
    s.iter().any(|b| matches!(b, b'*' | b'?' | b'['))
}

/// Matches a bracket expression starting at `p[start] == b'['` against `c`. Returns
/// `(matched, index after ']')`, or `None` when the bracket is unterminated (then `[` is
/// literal).
fn match_class(p: &[u8], start: usize, c: u8) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = matches!(p.get(i), Some(b'!') | Some(b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let lo = *p.get(i)?;
        if lo == b']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if let (Some(b'-'), Some(&hi)) = (p.get(i + 1), p.get(i + 2)) {
            if hi != b']' {
                if lo <= c && c <= hi {
                    matched = true;
                }
                i += 3;
                continue;
            }
        }
        if lo == c {
            matched = true;
        }
        i += 1;
    }
}

/// Matches one pattern element at `p[pi]` against `c`; returns the next pattern index.
fn match_one(p: &[u8], pi: usize, c: u8) -> Option<usize> {
    match p.get(pi)? {
        b'?' => Some(pi + 1),
        b'[' => match match_class(p, pi, c) {
            Some((true, next)) => Some(next),
            Some((false, _)) => None,
            None => (c == b'[').then_some(pi + 1),
        },
        b'\\' => match p.get(pi + 1) {
            Some(&e) => (e == c).then_some(pi + 2),
            None => (c == b'\\').then_some(pi + 1),
        },
        &l => (l == c).then_some(pi + 1),
    }
}

/// fnmatch(3) on one name. `period` = a leading `.` must be matched literally.
pub fn fnmatch(p: &[u8], s: &[u8], period: bool) -> bool {
    if period && s.first() == Some(&b'.') && p.first() != Some(&b'.') {
        return false;
    }
    let (mut pi, mut si) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if p.get(pi) == Some(&b'*') {
            star = Some((pi, si));
            pi += 1;
            continue;
        }
        if let Some(c) = s.get(si) {
            if let Some(next) = match_one(p, pi, *c) {
                pi = next;
                si += 1;
                continue;
            }
        }
        match star {
            Some((sp, ss)) => {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    while p.get(pi) == Some(&b'*') {
        pi += 1;
    }
    pi == p.len()
}

/// Expands `pattern`. Returns existing paths, sorted per directory level, at most `limit`
/// per level, and how many matches past `limit` were dropped.
pub fn expand(pattern: &Path, limit: usize) -> (Vec<PathBuf>, u64) {
    let mut refused = 0u64;
    let mut cands: Vec<PathBuf> = vec![PathBuf::new()];
    for comp in pattern.components() {
        match comp {
            Component::RootDir => cands.iter_mut().for_each(|c| c.push("/")),
            Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => cands.iter_mut().for_each(|c| c.push("..")),
            Component::Normal(name) if !has_magic(name.as_bytes()) => {
                cands.iter_mut().for_each(|c| c.push(name));
            }
            Component::Normal(pat) => {
                let mut next = Vec::new();
                for dir in &cands {
                    let rd = if dir.as_os_str().is_empty() {
                        fs::read_dir(".")
                    } else {
                        fs::read_dir(dir)
                    };
                    let Ok(rd) = rd else { continue };
                    let mut names: Vec<_> = rd
                        .filter_map(Result::ok)
                        .map(|e| e.file_name())
                        .filter(|n| fnmatch(pat.as_bytes(), n.as_bytes(), true))
                        .collect();
                    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
                    for n in names {
                        if next.len() >= limit {
                            refused += 1;
                            continue;
                        }
                        next.push(dir.join(n));
                    }
                }
                cands = next;
            }
        }
        if cands.is_empty() {
            break;
        }
    }
    cands.retain(|p| !p.as_os_str().is_empty() && fs::symlink_metadata(p).is_ok());
    (cands, refused)
}

/// Expands each pattern (plain paths are kept when they exist), de-duplicated, in order,
/// and the matches dropped past `limit` (per pattern and level) over all patterns.
pub fn expand_all(patterns: &[PathBuf], limit: usize) -> (Vec<PathBuf>, u64) {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut refused = 0u64;
    for p in patterns {
        let (matches, dropped) = expand(p, limit);
        refused += dropped;
        for m in matches {
            if !out.contains(&m) {
                out.push(m);
            }
        }
    }
    (out, refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::{garbage, Fixture};

    #[test]
    fn fnmatch_basics() {
        assert!(fnmatch(b"*.conf", b"a.conf", true));
        assert!(!fnmatch(b"*.conf", b".hidden.conf", true));
        assert!(fnmatch(b".*.conf", b".hidden.conf", true));
        assert!(fnmatch(b"a?c", b"abc", true));
        assert!(fnmatch(b"[a-c]x", b"bx", true));
        assert!(!fnmatch(b"[!a-c]x", b"bx", true));
        assert!(fnmatch(b"[]]", b"]", true));
        assert!(fnmatch(b"[abc", b"[abc", true));
        assert!(fnmatch(b"a\\*", b"a*", true));
        assert!(!fnmatch(b"a\\*", b"ab", true));
        assert!(fnmatch(b"*a*b*c*", b"xxaxxbxxcxx", true));
        assert!(!fnmatch(b"*a*b*c*", b"xxaxxcxxbxx", true));
        assert!(fnmatch(b"*", b"", true));
        assert!(!fnmatch(b"", b"a", true));
        assert!(fnmatch(b"ro*", b"root", false));
    }

    #[test]
    fn fnmatch_survives_garbage() {
        for seed in 0..300 {
            let p = garbage(seed, 40);
            let s = garbage(seed + 1000, 60);
            let _ = fnmatch(&p, &s, seed % 2 == 0);
            let _ = fnmatch(&p, &p, false);
        }
    }

    #[test]
    fn expand_matches_sorted_and_bounded() {
        let fx = Fixture::new();
        fx.write("home/bob/public_html/x", b"");
        fx.write("home/alice/public_html/x", b"");
        fx.write("home/carol/other", b"");
        let got = expand(&fx.path("home/*/public_html"), 4096);
        assert_eq!(
            got,
            (
                vec![
                    fx.path("home/alice/public_html"),
                    fx.path("home/bob/public_html")
                ],
                0
            )
        );
        assert_eq!(expand(&fx.path("home/zed"), 4096), (Vec::new(), 0));
        assert_eq!(
            expand(&fx.path("home/bob"), 4096),
            (vec![fx.path("home/bob")], 0)
        );

        let (one, refused) = expand(&fx.path("home/*"), 1);
        assert_eq!((one.len(), refused), (1, 2));
    }
}
