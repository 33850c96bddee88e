//! Stored programs a WordPress site does not ship (issue 41): triggers on the site's
//! tables and events (WordPress ships none), and procedures or functions whose body writes
//! to the site's `users`, `usermeta` or `options` tables, reaches files or commands
//! (`sys_exec`, `LOAD_FILE`, `INTO OUTFILE`/`DUMPFILE`) or holds an encoded payload.

use crate::findings::Severity;
use crate::store::sitedb::{DbObject, ObjectKind};

/// Hex or base64 literals at least this long are an encoded payload.
pub const LONG_LITERAL: usize = 64;

/// Why an object looks injected, and how severe; None for a routine that looks benign.
pub fn object_problem(o: &DbObject, prefix: &str) -> Option<(Severity, String)> {
    let watched = |t: &str| {
        ["users", "usermeta", "options"]
            .iter()
            .any(|w| t.eq_ignore_ascii_case(&format!("{prefix}{w}")))
    };
    match o.kind {
        ObjectKind::Trigger => {
            let table = o.table.as_deref().unwrap_or("");
            let sev = if watched(table) {
                Severity::Critical
            } else {
                Severity::High
            };
            let mut why = format!("a trigger on {table} (WordPress ships none)");
            if let Some(r) = routine_problem(&o.body, prefix) {
                why.push_str(&format!("; its body {}", r.1));
            }
            Some((sev, why))
        }
        ObjectKind::Event => {
            let mut why = "an event (WordPress ships none)".to_string();
            let mut sev = Severity::High;
            if let Some(r) = routine_problem(&o.body, prefix) {
                sev = r.0;
                why.push_str(&format!("; its body {}", r.1));
            }
            Some((sev, why))
        }
        ObjectKind::Procedure | ObjectKind::Function => routine_problem(&o.body, prefix)
            .map(|(s, r)| (s, format!("a {} whose body {r}", o.kind.name()))),
    }
}

/// Lower-case words of a body (letters, digits, `_`, `$`), identifiers unquoted.
fn words(body: &str) -> Vec<String> {
    body.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// Why a routine's body looks malicious.
pub fn routine_problem(body: &[u8], prefix: &str) -> Option<(Severity, String)> {
    let text = String::from_utf8_lossy(body);
    let w = words(&text);
    let joined = w.join(" ");
    for (needle, shown) in [
        ("sys_exec", "calls sys_exec"),
        ("sys_eval", "calls sys_eval"),
        ("load_file", "calls LOAD_FILE"),
        ("into outfile", "writes a file (INTO OUTFILE)"),
        ("into dumpfile", "writes a file (INTO DUMPFILE)"),
    ] {
        if contains_words(&joined, needle) {
            return Some((Severity::Critical, shown.to_string()));
        }
    }
    let prefix = prefix.to_ascii_lowercase();
    for (i, word) in w.iter().enumerate() {
        if !["insert", "replace", "update", "delete"].contains(&word.as_str()) {
            continue;
        }
        for t in w.iter().skip(i + 1).take(5) {
            for (table, sev) in [
                ("users", Severity::Critical),
                ("usermeta", Severity::Critical),
                ("options", Severity::High),
            ] {
                if *t == format!("{prefix}{table}") {
                    return Some((sev, format!("writes to {t} ({})", word.to_uppercase())));
                }
            }
        }
    }
    if contains_words(&joined, "from_base64") {
        return Some((Severity::High, "decodes a payload (FROM_BASE64)".into()));
    }
    if contains_words(&joined, "unhex") {
        return Some((Severity::High, "decodes a payload (UNHEX)".into()));
    }
    if let Some(kind) = long_literal(&text) {
        return Some((Severity::High, format!("holds a long {kind} literal")));
    }
    None
}

fn contains_words(joined: &str, needle: &str) -> bool {
    joined == needle
        || joined.starts_with(&format!("{needle} "))
        || joined.ends_with(&format!(" {needle}"))
        || joined.contains(&format!(" {needle} "))
}

/// A hex (`0x…`, `X'…'`) or base64 literal of at least [`LONG_LITERAL`] characters.
fn long_literal(text: &str) -> Option<&'static str> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        // `0x…` or `X'…'`.
        let hex = (b[i] == b'0' && b.get(i + 1).is_some_and(|c| *c == b'x' || *c == b'X'))
            || ((b[i] == b'x' || b[i] == b'X') && b.get(i + 1) == Some(&b'\''));
        if hex {
            let s = i + 2;
            let n = b[s..].iter().take_while(|c| c.is_ascii_hexdigit()).count();
            if n >= LONG_LITERAL {
                return Some("hex");
            }
        }
        if b[i] == b'\'' || b[i] == b'"' {
            let s = i + 1;
            let n = b[s..]
                .iter()
                .take_while(|c| {
                    c.is_ascii_alphanumeric() || **c == b'+' || **c == b'/' || **c == b'='
                })
                .count();
            let lit = &b[s..s + n];
            // Base64 mixes cases and digits; a long word or number alone is not one.
            if n >= LONG_LITERAL
                && lit.iter().any(u8::is_ascii_uppercase)
                && lit.iter().any(u8::is_ascii_lowercase)
                && lit.iter().any(u8::is_ascii_digit)
            {
                return Some("base64");
            }
            i = s + n.max(1) - 1;
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routine(kind: ObjectKind, body: &str) -> DbObject {
        DbObject {
            kind,
            name: "r".into(),
            table: None,
            definer: "u@localhost".into(),
            body: body.as_bytes().to_vec(),
            complete: true,
        }
    }

    #[test]
    fn routines_writing_watched_tables_or_decoding_are_flagged() {
        let p = |b: &str| object_problem(&routine(ObjectKind::Procedure, b), "wp_");
        let (sev, why) = p("BEGIN INSERT INTO `wp_users` (user_login) VALUES ('x'); END").unwrap();
        assert_eq!(sev, Severity::Critical);
        assert_eq!(why, "a procedure whose body writes to wp_users (INSERT)");
        assert!(p("BEGIN UPDATE wpsite.wp_options SET option_value='x'; END").is_some());
        assert!(p("BEGIN SELECT LOAD_FILE('/etc/passwd'); END").is_some());
        assert!(p("SELECT 'x' INTO\n OUTFILE '/tmp/x'").is_some());
        assert!(p("RETURN FROM_BASE64(s)").is_some());
        let b64 = "PD9waHAgZXZhbCgkX1BPU1RbJ3gnXSk7ID8+PD9waHAgZXZhbCgkX1BPU1RbJ3gnXSk7ID8+";
        assert_eq!(
            p(&format!("RETURN '{b64}'")).unwrap().1,
            "a procedure whose body holds a long base64 literal"
        );
        assert!(p(&format!("RETURN 0x{}", "41".repeat(40))).is_some());
        // Reading the watched tables, or writing others, is not flagged.
        assert_eq!(p("BEGIN SELECT COUNT(*) FROM wp_users; END"), None);
        assert_eq!(p("BEGIN INSERT INTO stats (n) VALUES (1); END"), None);
        assert_eq!(p("RETURN CONCAT('unhexed', 'users')"), None);
        // Another site's prefix is not this site's table.
        assert_eq!(
            object_problem(
                &routine(ObjectKind::Function, "UPDATE other_users SET x=1"),
                "wp_"
            ),
            None
        );
    }

    #[test]
    fn every_trigger_and_event_is_flagged() {
        let mut t = routine(ObjectKind::Trigger, "SET NEW.x = 1");
        t.table = Some("wp_users".into());
        let (sev, why) = object_problem(&t, "wp_").unwrap();
        assert_eq!(sev, Severity::Critical);
        assert_eq!(why, "a trigger on wp_users (WordPress ships none)");
        t.table = Some("wp_posts".into());
        assert_eq!(object_problem(&t, "wp_").unwrap().0, Severity::High);
        let e = routine(ObjectKind::Event, "DELETE FROM wp_usermeta");
        assert_eq!(
            object_problem(&e, "wp_").unwrap(),
            (
                Severity::Critical,
                "an event (WordPress ships none); its body writes to wp_usermeta (DELETE)".into()
            )
        );
    }
}
