//! Outside text made safe to show: file names, request paths, log-line excerpts and other
//! bytes an attacker chooses reach terminals, log files and composed messages only through
//! these functions.
//!
//! Guarantees of [`escape_controls`] (and [`escape_bytes`], [`escape_path`]): the result
//! contains no C0 control (U+0000-U+001F), no DEL (U+007F), no C1 control (U+0080-U+009F)
//! and no bidirectional override or isolate (U+202A-U+202E, U+2066-U+2069). Each is written
//! as a visible escape (`\n`, `\r`, `\t`, `\x1b`, `\u{202e}`); bytes that are not UTF-8 are
//! written as `\xNN`. Everything else is kept as it is, so ordinary names read unchanged.
//! JSON fields that carry a raw path do not use this: they keep the exact bytes (JSON
//! escapes them itself).

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::path::Path;

/// True for the characters [`escape_controls`] rewrites.
pub fn needs_escape(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `s` with every control and bidirectional-override character escaped (see the module
/// guarantees). Borrows when nothing needs escaping.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if needs_escape(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Raw bytes (a path from the kernel, a log line) shown as text: valid UTF-8 runs go
/// through [`escape_controls`], every invalid byte becomes `\xNN`.
pub fn escape_bytes(b: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(b) {
        Ok(s) => escape_controls(s),
        Err(_) => {
            let mut out = String::with_capacity(b.len() + 8);
            for chunk in b.utf8_chunks() {
                out.push_str(&escape_controls(chunk.valid()));
                for byte in chunk.invalid() {
                    let _ = write!(out, "\\x{byte:02x}");
                }
            }
            Cow::Owned(out)
        }
    }
}

/// A path shown as text, escaped like [`escape_bytes`].
pub fn escape_path(p: &Path) -> Cow<'_, str> {
    use std::os::unix::ffi::OsStrExt;
    escape_bytes(p.as_os_str().as_bytes())
}

/// At most `max_chars` characters of `s`; a cut text ends with `...` (counted in the limit
/// when `max_chars` leaves room for it).
pub fn cut(s: &str, max_chars: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max_chars) {
        None => Cow::Borrowed(s),
        Some(_) => {
            let keep = max_chars.saturating_sub(3);
            let end = s.char_indices().nth(keep).map_or(s.len(), |(i, _)| i);
            Cow::Owned(format!("{}...", &s[..end]))
        }
    }
}

/// The longest prefix of `s` within `max_bytes` bytes that ends on a character boundary
/// (for bounding what is kept of outside text by its size in memory).
pub fn prefix_within(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut end = max_bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or("")
}

/// Log text for a composed finding: [`prefix_within`] `max_bytes`, with each control
/// character replaced by `?`.
pub fn printable_prefix(s: &str, max_bytes: usize) -> String {
    prefix_within(s, max_bytes)
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Outside text for a log line or a terminal: escaped, then cut to `max_chars`.
pub fn for_log(s: &str, max_chars: usize) -> String {
    escape_controls(&cut(s, max_chars)).into_owned()
}

/// Displays `&str` escaped, without allocating when nothing needs escaping:
/// `log::warn!("bad name {}", Escaped(name))`.
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape_controls(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_end_on_a_character_boundary_within_the_size() {
        assert_eq!(prefix_within("abc", 2), "ab");
        assert_eq!(prefix_within("abc", 5), "abc");
        assert_eq!(prefix_within("a\u{e9}b", 2), "a");
        assert_eq!(prefix_within("\u{e9}", 0), "");
        let long = "\u{e9}".repeat(200);
        assert_eq!(prefix_within(&long, 255).len(), 254);
        assert_eq!(printable_prefix("a\nb\u{1b}c", 4), "a?b?");
    }

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        assert!(matches!(
            escape_controls("/var/www/site/index.php é 日本"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn controls_and_bidi_are_escaped() {
        assert_eq!(escape_controls("a\nb\rc\td"), "a\\nb\\rc\\td");
        assert_eq!(escape_controls("\x1b[31mred"), "\\x1b[31mred");
        assert_eq!(escape_controls("x\u{7f}y\u{85}z"), "x\\x7fy\\u{85}z");
        assert_eq!(
            escape_controls("evil\u{202e}php.txt"),
            "evil\\u{202e}php.txt"
        );
        assert_eq!(escape_controls("\u{2066}\u{2069}"), "\\u{2066}\\u{2069}");
        for c in (0u32..0x20)
            .chain(0x7f..0xa0)
            .chain(0x202a..0x202f)
            .chain(0x2066..0x206a)
        {
            let s = char::from_u32(c).unwrap().to_string();
            assert!(!escape_controls(&s).chars().any(needs_escape), "{c:x}");
        }
    }

    #[test]
    fn invalid_utf8_bytes_become_hex() {
        assert_eq!(escape_bytes(b"ok\xff\xfe\n"), "ok\\xff\\xfe\\n");
        assert_eq!(escape_bytes("é".as_bytes()), "é");
    }

    #[test]
    fn cut_counts_characters_and_marks_the_cut() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("abcdefghij", 10), "abcdefghij");
        assert_eq!(cut("abcdefghijk", 10), "abcdefg...");
        assert_eq!(cut("ééééééé", 5), "éé...");
        assert_eq!(for_log("a\nbcdefghijklmno", 8), "a\\nbcd...");
    }
}
