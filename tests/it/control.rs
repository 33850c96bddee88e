//! The control socket's command table (`daemon/commands.rs`): each family reaches its own
//! subsystem, and writes that come over the socket are audited with actor `cli`, via
//! `control`, with the outcome the answer's status gives. Reads are not audited.

use serde_json::Value;

use crate::common::*;

fn run(d: &Daemon, args: &[&str]) -> (i32, String, String) {
    let out = d.cli(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn audited(d: &Daemon) -> Vec<Value> {
    let a = d.get("/api/v1/audit", ADMIN).expect(200).json();
    a["items"].as_array().cloned().unwrap_or_default()
}

#[test]
fn each_family_answers_and_cli_writes_are_audited_with_their_outcome() {
    let d = Daemon::start("control-table", "");
    // Reads of every family answer from their own subsystem.
    let (code, out, err) = run(&d, &["waf", "stats", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], 200, "{v}");
    let (code, out, err) = run(&d, &["mail", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["total"], 0, "{v}");
    let (code, _, err) = run(&d, &["quarantine", "list"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(&d, &["threat", "stats"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(&d, &["firewall", "status"]);
    assert_eq!(code, 1);
    assert!(err.contains("firewall.enabled is false"), "{err}");

    // Writes: the firewall engine is off (503: error), the mail entry does not exist
    // (404: not_found), an address the attack database never saw has nothing to clear
    // (409: refused).
    let (code, _, err) = run(&d, &["firewall", "block", "192.0.2.7"]);
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = run(&d, &["mail", "release", "ffff0000ffff0000"]);
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = run(&d, &["threat", "clear", "198.51.100.4"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no record"), "{err}");

    // The audit log is written by its own thread: wait for the three records.
    let writes = ["firewall.block", "email.quarantine.release", "threat.clear"];
    let items = wait_until(30, "the three CLI writes in the audit log", || {
        let items = audited(&d);
        writes
            .iter()
            .all(|w| items.iter().any(|i| i["action"] == *w))
            .then_some(items)
    });
    let find = |action: &str| {
        items
            .iter()
            .find(|i| i["action"] == action)
            .cloned()
            .unwrap_or_else(|| panic!("no {action} in {items:#?}"))
    };
    let fw = find("firewall.block");
    assert_eq!(
        (&fw["actor"], &fw["via"], &fw["target"], &fw["outcome"]),
        (
            &Value::from("cli"),
            &Value::from("control"),
            &Value::from("192.0.2.7"),
            &Value::from("error")
        ),
        "{fw}"
    );
    let mail = find("email.quarantine.release");
    assert_eq!(
        (
            &mail["actor"],
            &mail["via"],
            &mail["target"],
            &mail["outcome"]
        ),
        (
            &Value::from("cli"),
            &Value::from("control"),
            &Value::from("ffff0000ffff0000"),
            &Value::from("not_found")
        ),
        "{mail}"
    );
    let threat = find("threat.clear");
    assert_eq!(
        (&threat["actor"], &threat["target"], &threat["outcome"]),
        (
            &Value::from("cli"),
            &Value::from("198.51.100.4"),
            &Value::from("refused")
        ),
        "{threat}"
    );
    // Reads leave no record.
    assert!(
        !items.iter().any(|i| {
            let a = i["action"].as_str().unwrap_or("");
            a == "firewall.status" || a.starts_with("waf.") || a.starts_with("mail.")
        }),
        "{items:#?}"
    );
}
