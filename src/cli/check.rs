//! `svc check [--json]`: runs every scheduled check through the daemon and prints the
//! findings of that run.

use std::time::Duration;

use serde_json::{json, Value};

use super::Args;

pub fn run(flags: &Args) -> i32 {
    let answer = match super::status::ask(flags, "check", json!({}), Duration::from_secs(660)) {
        Ok(v) => v,
        Err(code) => return code,
    };
    if flags.json {
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&answer).unwrap_or_default()
        ));
        return 0;
    }
    let findings = answer["job"]["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut text = String::new();
    for f in &findings {
        text.push_str(&format!(
            "{:<8} {:<26} {}\n",
            f["severity"].as_str().unwrap_or("?"),
            f["check"].as_str().unwrap_or("?"),
            f["message"].as_str().unwrap_or("")
        ));
    }
    text.push_str(&format!(
        "scan {} finished at {}: {} finding{}\n",
        answer["job"]["id"],
        answer["job"]["finished"].as_str().unwrap_or("?"),
        findings.len(),
        if findings.len() == 1 { "" } else { "s" }
    ));
    super::out(&text);
    0
}

/// `svc quarantine list|restore ID`.
pub fn quarantine(flags: &Args) -> i32 {
    let (cmd, args) = match flags.words.as_slice() {
        [c] if c == "list" => ("quarantine.list", json!({})),
        [c, id] if c == "restore" => ("quarantine.restore", json!({ "id": id })),
        _ => {
            eprintln!("svc quarantine: expected `list` or `restore ID`");
            return 2;
        }
    };
    let answer = match super::status::ask(flags, cmd, args, Duration::from_secs(30)) {
        Ok(v) => v,
        Err(code) => return code,
    };
    if flags.json {
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&answer).unwrap_or_default()
        ));
        return 0;
    }
    super::out(&quarantine_text(cmd, &answer));
    0
}

/// The human-readable answer of `svc quarantine list|restore`. Every field comes from file
/// names an attacker chose: control characters and bidirectional overrides are escaped
/// (`crate::text`), so a name cannot move the cursor, recolour the terminal, forge a line or
/// reorder what is shown. `--json` keeps the exact text (JSON escapes it).
fn quarantine_text(cmd: &str, answer: &Value) -> String {
    let field = |v: &Value, k: &str| -> String {
        crate::text::escape_controls(v[k].as_str().unwrap_or("?")).into_owned()
    };
    let mut text = String::new();
    if cmd == "quarantine.list" {
        let items = answer["items"].as_array().cloned().unwrap_or_default();
        for q in &items {
            text.push_str(&format!(
                "{}  {}  {}  {}{}\n",
                field(q, "id"),
                field(q, "quarantined_at"),
                field(q, "check"),
                field(q, "original_path"),
                if q["restored_at"].is_string() {
                    "  (restored)"
                } else {
                    ""
                }
            ));
        }
        text.push_str(&format!(
            "{} quarantined file{}\n",
            items.len(),
            if items.len() == 1 { "" } else { "s" }
        ));
    } else {
        let shown = if answer["original_path"].is_string() {
            field(answer, "original_path")
        } else {
            field(answer, "id")
        };
        text.push_str(&format!("restored {shown}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quarantine_output_escapes_controls_and_bidi() {
        let evil = "/www/a\x1b[2J\x1b[31m\nFAKE LINE\u{202e}php.jpg";
        let answer = json!({ "items": [{
            "id": "q1\r", "quarantined_at": "2026-01-01T00:00:00Z", "check": "webshell\u{9b}",
            "original_path": evil,
        }], "total": 1 });
        let t = quarantine_text("quarantine.list", &answer);
        assert_eq!(t.lines().count(), 2, "{t}");
        for bad in ['\x1b', '\r', '\u{202e}', '\u{9b}'] {
            assert!(!t.contains(bad), "{t:?}");
        }
        assert!(
            t.contains("/www/a\\x1b[2J\\x1b[31m\\nFAKE LINE\\u{202e}php.jpg"),
            "{t}"
        );
        let r = quarantine_text(
            "quarantine.restore",
            &json!({ "ok": true, "original_path": evil }),
        );
        assert_eq!(r.lines().count(), 1, "{r}");
        assert!(!r.contains('\x1b'), "{r:?}");
    }
}
