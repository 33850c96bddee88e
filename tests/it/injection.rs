//! Log and terminal injection (issue 9 item 5): names an attacker chooses reach the daemon
//! log, finding messages and the API's composed text only escaped; JSON fields that carry a
//! raw path keep the exact bytes.

use crate::common::*;

use std::path::Path;

const WEBSHELL: &str = "<?php\n@eval($_POST['cmd']);\n?>\n";

/// Control and bidirectional-override characters `crate::text` escapes.
fn has_raw_controls(s: &str) -> bool {
    s.chars().any(|c| {
        (c < ' ' && c != '\n')
            || ('\u{7f}'..='\u{9f}').contains(&c)
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    })
}

#[test]
fn hostile_file_names_are_escaped_in_messages_and_logs_but_exact_in_paths() {
    let dir = temp_dir("inject");
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let extra = format!(
        "[files]\nwatch = [{:?}]\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[auto_response]\nquarantine = true\n",
        www.display().to_string()
    );
    let d = start_in_dir(dir, &extra, &[]);
    // ESC sequences, a forged log line and a right-to-left override in one name.
    let name = "x\u{1b}[31mred\n[2026-01-01T00:00:00Z INFO  svc] forged\u{202e}php.txt.php";
    let shell = www.join(name);
    std::fs::write(&shell, WEBSHELL).unwrap();
    let finding = wait_until(30, "the webshell finding", || {
        let v = d.get("/api/v1/findings", READ).expect(200).json();
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| {
                f["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("php.txt.php"))
            })
            .cloned()
    });
    let message = finding["message"].as_str().unwrap();
    assert!(!has_raw_controls(message), "{message:?}");
    assert!(message.contains("\\x1b[31mred\\"), "{message:?}");
    assert!(message.contains("\\u{202e}"), "{message:?}");
    // The path field is the exact name (JSON carries the escapes itself).
    assert_eq!(
        Path::new(finding["path"].as_str().unwrap()),
        shell.as_path(),
        "{finding}"
    );
    // Wait for the quarantine line, then no log line holds a raw control character and the
    // forged line never starts a line of its own.
    let log = wait_until(30, "the quarantine log line", || {
        let log = d.stderr();
        log.contains("quarantined ").then_some(log)
    });
    assert!(!has_raw_controls(&log), "{log:?}");
    assert!(
        !log.lines()
            .any(|l| l.contains("forged") && l.starts_with("[2026-01-01")),
        "{log}"
    );
    // The CLI prints the name escaped too.
    let out = d.cli(&["quarantine", "list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!has_raw_controls(&text), "{text:?}");
}
