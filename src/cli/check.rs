//! `svc check [--json]`: runs every scheduled check through the daemon and prints the
//! findings of that run.

use std::time::Duration;

use serde_json::{json, Value};

use super::Flags;

pub fn run(flags: &Flags) -> i32 {
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
pub fn quarantine(flags: &Flags) -> i32 {
    let (cmd, args) = match flags.positional.as_slice() {
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
    let mut text = String::new();
    if cmd == "quarantine.list" {
        let items = answer["items"].as_array().cloned().unwrap_or_default();
        for q in &items {
            text.push_str(&format!(
                "{}  {}  {}  {}{}\n",
                q["id"].as_str().unwrap_or("?"),
                q["quarantined_at"].as_str().unwrap_or("?"),
                q["check"].as_str().unwrap_or("?"),
                q["original_path"].as_str().unwrap_or("?"),
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
        text.push_str(&format!(
            "restored {}\n",
            answer["original_path"]
                .as_str()
                .unwrap_or_else(|| answer.get("id").and_then(Value::as_str).unwrap_or("?"))
        ));
    }
    super::out(&text);
    0
}
