//! ASCII case folding done once per window instead of inside every regex.
//!
//! Case-insensitive regexes with many alternatives lose the regex engine's literal
//! optimisations and run several times slower. A rule marked `nocase` is therefore run
//! case-sensitively, with its pattern's letters lower-cased, on an ASCII-lower-cased copy of
//! the window (same length, so offsets are unchanged). [`lower_pattern`] only rewrites patterns
//! it fully understands and returns `None` otherwise (the rule then runs as a case-insensitive
//! regex on the original bytes).

/// ASCII-lower-cases `src` into `dst` (cleared first).
pub(crate) fn lower_into(src: &[u8], dst: &mut Vec<u8>) {
    dst.clear();
    dst.extend(src.iter().map(u8::to_ascii_lowercase));
}

/// The pattern that, matched case-sensitively on ASCII-lower-cased bytes, matches exactly
/// where `src` matches case-insensitively (ASCII, `unicode(false)`) on the original bytes.
pub(crate) fn lower_pattern(src: &str) -> Option<String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let mut in_class = false;
    // Position right after `[` or `[^` (where `]` is a literal).
    let mut class_start = false;
    while let Some(&c) = chars.get(i) {
        if !c.is_ascii() {
            return None;
        }
        if c == '\\' {
            let next = *chars.get(i + 1)?;
            match next {
                'x' => {
                    let h1 = *chars.get(i + 2)?;
                    let h2 = *chars.get(i + 3)?;
                    if !h1.is_ascii_hexdigit() || !h2.is_ascii_hexdigit() {
                        return None; // \x{...} and short forms: not handled
                    }
                    let v = u8::from_str_radix(&format!("{h1}{h2}"), 16).ok()?;
                    if in_class && chars.get(i + 4) == Some(&'-') {
                        return None; // ranges with escaped endpoints: not handled
                    }
                    out.push_str(&format!("\\x{:02x}", v.to_ascii_lowercase()));
                    i += 4;
                }
                'p' | 'P' | 'Q' | 'E' | 'u' | 'U' | 'c' | 'k' | 'g' | 'N' => return None,
                _ => {
                    if in_class && next.is_ascii_alphabetic() && chars.get(i + 2) == Some(&'-') {
                        return None;
                    }
                    out.push('\\');
                    out.push(next);
                    i += 2;
                }
            }
            class_start = false;
            continue;
        }
        if in_class {
            if c == '[' && chars.get(i + 1) == Some(&':') {
                return None; // POSIX classes
            }
            if c == ']' && !class_start {
                in_class = false;
                out.push(c);
                i += 1;
                continue;
            }
            if c == '^' && out.ends_with('[') && class_start {
                out.push(c);
                i += 1;
                continue; // still at the start: a following `]` is literal
            }
            class_start = false;
            // A range `lo-hi`?
            if chars.get(i + 1) == Some(&'-') {
                if let Some(&hi) = chars.get(i + 2) {
                    if hi != ']' {
                        if hi == '\\' || !hi.is_ascii() {
                            return None;
                        }
                        let has_upper = (c..=hi).any(|x| x.is_ascii_uppercase());
                        let both_upper = c.is_ascii_uppercase() && hi.is_ascii_uppercase();
                        let has_lower = (c..=hi).any(|x| x.is_ascii_lowercase());
                        let both_lower = c.is_ascii_lowercase() && hi.is_ascii_lowercase();
                        if (has_upper && !both_upper) || (has_lower && !both_lower) {
                            return None;
                        }
                        out.push(c.to_ascii_lowercase());
                        out.push('-');
                        out.push(hi.to_ascii_lowercase());
                        i += 3;
                        continue;
                    }
                }
            }
            out.push(c.to_ascii_lowercase());
            i += 1;
            continue;
        }
        match c {
            '[' => {
                in_class = true;
                class_start = true;
                out.push(c);
            }
            '(' if chars.get(i + 1) == Some(&'?') => return None,
            _ => out.push(c.to_ascii_lowercase()),
        }
        i += 1;
    }
    if in_class {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::signatures::rules::compile_regex;
    use crate::scan::signatures::SignatureSet;

    #[test]
    fn rewrites_literals_classes_and_hex() {
        assert_eq!(
            lower_pattern(r"Eval\s*\(\$_POST").as_deref(),
            Some(r"eval\s*\(\$_post")
        );
        assert_eq!(lower_pattern(r"[A-Z0-9_]+").as_deref(), Some(r"[a-z0-9_]+"));
        assert_eq!(
            lower_pattern(r"[^A-Z]\x41\x5c").as_deref(),
            Some(r"[^a-z]\x61\x5c")
        );
        assert_eq!(lower_pattern(r"[]A]").as_deref(), Some(r"[]a]"));
        assert_eq!(lower_pattern(r"\S\W\D\B\b").as_deref(), Some(r"\S\W\D\B\b"));
        assert_eq!(lower_pattern(r"[A-z]"), None);
        assert_eq!(lower_pattern(r"[0-Z]"), None);
        assert_eq!(lower_pattern(r"\p{L}"), None);
        assert_eq!(lower_pattern(r"[[:upper:]]"), None);
        assert_eq!(lower_pattern(r"(?i)x"), None);
        assert_eq!(lower_pattern(r"[abc"), None);
        assert_eq!(lower_pattern("\\"), None);
    }

    #[test]
    fn garbage_patterns_never_panic() {
        let mut x = 77u64;
        for len in 0..3000 {
            let bytes = noise(&mut x, len % 40, b"[]^-\\xAZaz09(?):{}p\xff");
            let _ = lower_pattern(&String::from_utf8_lossy(&bytes));
        }
    }

    fn noise(x: &mut u64, len: usize, alphabet: &[u8]) -> Vec<u8> {
        (0..len)
            .map(|_| {
                *x ^= *x << 13;
                *x ^= *x >> 7;
                *x ^= *x << 17;
                alphabet[(*x as usize >> 11) % alphabet.len()]
            })
            .collect()
    }

    /// Differential test: every shipped nocase regex matches at the same places whether run
    /// case-insensitively on the original or lowered on the lowered bytes.
    #[test]
    fn lowered_patterns_match_like_nocase_ones() {
        let set = SignatureSet::shipped().unwrap();
        let mut x = 0x1234_5678_9ABC_DEF1u64;
        let mut checked = 0;
        for r in set.rules().iter().filter(|r| r.nocase) {
            for src in &r.regex {
                let orig = compile_regex(src, true).unwrap();
                let low = compile_regex(&lower_pattern(src).expect(src), false).unwrap();
                // Inputs: rule literals in random case glued with noise.
                let mut pieces: Vec<Vec<u8>> = r
                    .anchors
                    .iter()
                    .chain(&r.any)
                    .chain(&r.all)
                    .map(|s| s.as_bytes().to_vec())
                    .collect();
                pieces.extend(
                    [
                        "(", "$_POST[", "'", "\"", " ", "\n", ".jpg", "//", "<form ", "action=",
                        "1,",
                    ]
                    .iter()
                    .map(|s| s.as_bytes().to_vec()),
                );
                for _ in 0..400 {
                    let mut data = Vec::new();
                    for _ in 0..12 {
                        let k = (noise(&mut x, 1, &[0, 1, 2, 3, 4, 5, 6, 7])[0]) as usize;
                        if k < 5 {
                            let p = &pieces[(x as usize >> 5) % pieces.len()];
                            let flips = noise(&mut x, p.len(), &[0, 1]);
                            data.extend(p.iter().zip(flips).map(|(b, f)| {
                                if f == 1 {
                                    b.to_ascii_uppercase()
                                } else {
                                    *b
                                }
                            }));
                        } else {
                            data.extend(noise(&mut x, k, b"aZ09 (\t\n$_'\"./\\=,;<>\xff"));
                        }
                    }
                    let mut lowered = Vec::new();
                    lower_into(&data, &mut lowered);
                    let a: Vec<_> = orig.find_iter(&data).map(|m| m.range()).collect();
                    let b: Vec<_> = low.find_iter(&lowered).map(|m| m.range()).collect();
                    assert_eq!(
                        a,
                        b,
                        "rule {} on {:?}",
                        r.id,
                        String::from_utf8_lossy(&data)
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 1000);
    }
}
