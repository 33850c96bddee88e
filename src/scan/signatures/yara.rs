//! Export of rules as YARA source, used to compare against `yara` on the same corpus (see
//! `benches/signatures-vs-yara.sh`) and for operators who want to reuse the signatures.
//!
//! The translation keeps the literals and regexes; YARA cannot see file names or paths, so
//! `extensions`, `file_names`, `path_contains` and `path_excludes` are written as metadata
//! only, and YARA scans whole files (no head/tail windows).

use super::rules::Rule;

/// YARA source for `rules`: one YARA rule per rule, named `svc_<id>`.
pub fn to_yara(rules: &[Rule]) -> String {
    let mut out = String::from("// Generated from svc content signatures.\n\n");
    for r in rules {
        let ident: String =
            r.id.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
        out.push_str(&format!("rule svc_{ident}\n{{\n  meta:\n"));
        out.push_str(&format!("    id = \"{}\"\n", text_escape(&r.id)));
        out.push_str(&format!("    name = \"{}\"\n", text_escape(&r.name)));
        out.push_str(&format!(
            "    category = \"{}\"\n",
            text_escape(&r.category)
        ));
        out.push_str(&format!("    severity = \"{}\"\n", r.severity.label()));
        out.push_str(&format!("    confidence = \"{}\"\n", r.confidence.label()));
        out.push_str("  strings:\n");
        let nc = if r.nocase { " nocase" } else { "" };
        let mut cond = Vec::new();
        for (prefix, list, how) in [
            ("a", &r.anchors, "any of"),
            ("l", &r.all, "all of"),
            ("y", &r.any, "any of"),
            ("n", &r.none, "none"),
        ] {
            for (i, s) in list.iter().enumerate() {
                out.push_str(&format!("    ${prefix}{i} = \"{}\"{nc}\n", text_escape(s)));
            }
            if !list.is_empty() {
                cond.push(match how {
                    "none" => format!("not (any of (${prefix}*))"),
                    _ => format!("{how} (${prefix}*)"),
                });
            }
        }
        let flag = if r.nocase { "i" } else { "" };
        for (i, re) in r.regex.iter().enumerate() {
            out.push_str(&format!("    $r{i} = /{}/{flag}\n", regex_escape(re)));
        }
        if !r.regex.is_empty() {
            cond.push("all of ($r*)".into());
        }
        out.push_str("  condition:\n    ");
        out.push_str(&cond.join(" and "));
        out.push_str("\n}\n\n");
    }
    out
}

fn text_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'"' => o.push_str("\\\""),
            b'\\' => o.push_str("\\\\"),
            0x20..=0x7e => o.push(b as char),
            _ => o.push_str(&format!("\\x{b:02x}")),
        }
    }
    o
}

/// Escapes unescaped `/` (YARA's regex delimiter) and non-printable bytes.
fn regex_escape(re: &str) -> String {
    let mut o = String::with_capacity(re.len());
    let mut escaped = false;
    for c in re.chars() {
        if escaped {
            o.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' => {
                o.push(c);
                escaped = true;
            }
            '/' => o.push_str("\\/"),
            c if c.is_ascii_graphic() || c == ' ' => o.push(c),
            c => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    o.push_str(&format!("\\x{b:02x}"));
                }
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::signatures::SignatureSet;

    #[test]
    fn exports_every_shipped_rule() {
        let s = SignatureSet::shipped().unwrap();
        let y = to_yara(s.rules());
        assert_eq!(
            y.matches("\nrule svc_").count() + usize::from(y.starts_with("rule")),
            s.rules().len()
        );
        assert!(y.contains("nocase"));
        assert_eq!(regex_escape(r"a/b\/c"), r"a\/b\/c");
        assert_eq!(text_escape("a\"\\\t"), "a\\\"\\\\\\x09");
    }
}
