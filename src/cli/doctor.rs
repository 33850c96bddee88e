//! `svc doctor [--json]`: prints each named check; exits 1 when anything is degraded or
//! failing (including a daemon that is not running).

use std::time::Duration;

use serde_json::{json, Value};

use super::Args;

pub fn run(flags: &Args) -> i32 {
    let report = match super::status::state_path(flags) {
        Err(e) => {
            json!({ "ok": false, "checks": [ { "name": "config", "status": "fail", "detail": e.to_string() } ] })
        }
        Ok(state) => match super::control::request(
            &state.join("svc.sock"),
            "doctor",
            json!({}),
            Duration::from_secs(10),
        ) {
            Ok(v) if v.get("checks").is_some() => v,
            Ok(v) => json!({ "ok": false, "checks": [ { "name": "daemon", "status": "fail",
                "detail": v.get("error").and_then(Value::as_str).unwrap_or("unexpected answer") } ] }),
            Err(e) => json!({ "ok": false, "checks": [
                { "name": "config", "status": "ok", "detail": "valid" },
                { "name": "daemon", "status": "fail", "detail": e.to_string() } ] }),
        },
    };
    let ok = report["ok"].as_bool().unwrap_or(false);
    if flags.json {
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        ));
    } else {
        let mut text = String::new();
        for c in report["checks"].as_array().into_iter().flatten() {
            text.push_str(&format!(
                "{:<9} {:<32} {}\n",
                c["status"].as_str().unwrap_or("?"),
                c["name"].as_str().unwrap_or("?"),
                c["detail"].as_str().unwrap_or("")
            ));
        }
        text.push_str(if ok {
            "doctor: all checks passed\n"
        } else {
            "doctor: problems found\n"
        });
        super::out(&text);
    }
    if ok {
        0
    } else {
        1
    }
}
