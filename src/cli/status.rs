//! `svc status`: asks the running daemon over its control socket.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::Args;
use crate::config::ConfigError;

/// Why the state directory is not known: the configuration that names it is invalid.
#[derive(Debug)]
pub struct InvalidConfig(pub Vec<ConfigError>);

impl fmt::Display for InvalidConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid configuration:")?;
        for e in &self.0 {
            write!(f, "\n{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for InvalidConfig {}

/// The state directory a CLI command talks to.
pub fn state_path(flags: &Args) -> Result<PathBuf, InvalidConfig> {
    if flags.dev {
        return Ok(crate::daemon::dev::state_dir());
    }
    let path = super::config_path(flags);
    crate::config::load(&path)
        .map(|c| c.state_path)
        .map_err(InvalidConfig)
}

/// Sends one command to the daemon through the shared client ([`super::control`]); prints a
/// clear message (not running, not responding, refused answer, daemon error) and returns
/// `Err(1)` on failure.
pub fn ask(flags: &Args, command: &str, args: Value, timeout: Duration) -> Result<Value, i32> {
    let state = state_path(flags).map_err(|e| {
        eprintln!("svc {command}: {e}");
        1
    })?;
    let sock = state.join("svc.sock");
    match super::control::request(&sock, command, args, timeout) {
        Ok(v) => {
            if let Some(e) = v.get("error").and_then(Value::as_str) {
                eprintln!(
                    "svc {command}: daemon answered: {}",
                    crate::text::escape_controls(e)
                );
                return Err(1);
            }
            Ok(v)
        }
        Err(e) => {
            eprintln!("svc {command}: {e}");
            Err(1)
        }
    }
}

pub fn run(flags: &Args) -> i32 {
    let answer = match ask(
        flags,
        "status",
        serde_json::json!({}),
        Duration::from_secs(5),
    ) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let text = if flags.json {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&answer).unwrap_or_default()
        )
    } else {
        human(&answer["snapshot"])
    };
    super::out(&text);
    0
}

/// Human summary of a status snapshot.
pub fn human(s: &Value) -> String {
    let str_of = |v: &Value| v.as_str().unwrap_or("?").to_string();
    let mut out = format!(
        "svc {} running (pid {}), up {}s, status {}, security posture {}\n",
        str_of(&s["version"]),
        s["pid"],
        s["uptime_seconds"],
        str_of(&s["status"]),
        str_of(&s["security_posture"]),
    );
    let store = &s["store"];
    out.push_str(&format!(
        "store: {} ({} writes, {} failed)\n",
        if store["ok"].as_bool() == Some(true) {
            "ok"
        } else {
            "FAILING"
        },
        store["writes_ok"],
        store["writes_failed"]
    ));
    if let Some(c) = s.get("severity_counts") {
        out.push_str(&format!(
            "findings: {} critical, {} high, {} warning\n",
            c["critical"], c["high"], c["warning"]
        ));
    }
    if let Some(latest) = s.get("latest_scan").and_then(Value::as_str) {
        out.push_str(&format!("latest scan: {latest}\n"));
    }
    if let Some(c) = s.get("cms_verification").and_then(Value::as_object) {
        if let Some(e) = c.get("error").and_then(Value::as_str) {
            out.push_str(&format!(
                "cms verification: {}\n",
                crate::text::for_log(e, 200)
            ));
        }
        for group in ["core", "plugins"] {
            if let Some(g) = c.get(group) {
                out.push_str(&format!(
                    "cms {group}: {} verified, {} modified, {} unverified, {} unknown, {} not platform\n",
                    g["verified"], g["modified"], g["unverified"], g["unknown"], g["not_platform"]
                ));
            }
        }
    }
    match s.get("queues").and_then(Value::as_object) {
        Some(q) if !q.is_empty() => {
            out.push_str("queues:\n");
            for (name, row) in q {
                out.push_str(&format!(
                    "  {name:<28} {:<9} waiting {} running {} dropped {}\n",
                    str_of(&row["status"]),
                    row["waiting"],
                    row["running"],
                    row["dropped_total"]
                ));
            }
        }
        _ => out.push_str("queues: none active\n"),
    }
    // Kernel probe backends by name: attached, or why not (not built, cannot attach).
    if let Some(w) = s.get("watchers").and_then(Value::as_object) {
        let probes: Vec<_> = w.iter().filter(|(_, c)| c["kind"] == "probe").collect();
        if !probes.is_empty() {
            out.push_str("kernel probes:\n");
            for (name, c) in probes {
                out.push_str(&format!("  {name:<28} {}\n", str_of(&c["detail"])));
            }
        }
    }
    if let Some(h) = s.get("http").filter(|h| h.is_object()) {
        let p = &h["phases"];
        out.push_str(&format!(
            "http: {} open of {} (handshake {}, idle {}, head {}, body {}, worker {}, write {}), {} event streams\n",
            h["open_connections"],
            h["max_connections"],
            p["handshake"],
            p["idle"],
            p["head"],
            p["body"],
            p["worker"],
            p["write"],
            h["sse_streams"],
        ));
        let t = &h["timeouts"];
        out.push_str(&format!(
            "http refusals: {} over max_connections, {} over the per-address limit; timeouts: handshake {}, head {}, body {}, write {}, idle {}; {} handler panics\n",
            h["refused"]["max_connections"],
            h["refused"]["per_address"],
            t["handshake"],
            t["head"],
            t["body"],
            t["write"],
            t["idle"],
            h["panics_total"],
        ));
    }
    if s["challenge"]["enabled"] == true {
        out.push_str(&format!(
            "challenge: {} addresses pending\n",
            s["challenge"]["pending"]
        ));
    }
    if let Some(f) = s.get("faults").and_then(Value::as_array) {
        for fault in f {
            out.push_str(&format!("fault: {}\n", str_of(fault)));
        }
    }
    out
}
