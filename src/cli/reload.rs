//! `svc reload [--json]`: asks the running daemon to re-read its configuration (what a
//! systemd unit's `ExecReload` runs; SIGHUP does the same).
//!
//! Exit 0 when the daemon applied the configuration (keys that need a restart are listed);
//! 1 when it refused it (each error printed exactly as `svc validate` prints it), could not
//! apply it (nothing changed), or is not running.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use super::Args;

/// A reload restarts collectors at most; a large inotify tree can take a while.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Where the daemon's socket is, and the configuration errors seen locally (if any).
fn locate(flags: &Args) -> (PathBuf, Vec<String>) {
    if flags.dev {
        return (crate::daemon::dev::state_dir(), Vec::new());
    }
    let path = super::config_path(flags);
    match crate::config::load(&path) {
        Ok(c) => (c.state_path, Vec::new()),
        Err(errs) => {
            let state = crate::config::live::state_path_hint(&path)
                .unwrap_or_else(|| PathBuf::from("/var/lib/svc"));
            (state, errs.iter().map(|e| e.to_string()).collect())
        }
    }
}

fn print_errors(errors: &[String]) {
    let mut text = String::new();
    for e in errors {
        text.push_str(e);
        text.push('\n');
    }
    super::out(&text);
}

fn list(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub fn run(flags: &Args) -> i32 {
    let (state, local_errors) = locate(flags);
    let sock = state.join("svc.sock");
    let answer = match super::control::request(&sock, "reload", json!({}), TIMEOUT) {
        Ok(v) => v,
        Err(e) => {
            if !local_errors.is_empty() {
                // Nothing to reload into anyway: the configuration is invalid.
                print_errors(&local_errors);
            } else {
                eprintln!("svc reload: {e}");
            }
            return 1;
        }
    };
    if flags.json {
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&answer).unwrap_or_default()
        ));
        return if answer["ok"] == true { 0 } else { 1 };
    }
    let errors = list(&answer, "errors");
    if !errors.is_empty() {
        print_errors(&errors);
        return 1;
    }
    if let Some(e) = answer["error"].as_str() {
        eprintln!("svc reload: not applied (the running configuration is unchanged): {e}");
        return 1;
    }
    if answer["ok"] != true {
        eprintln!("svc reload: unexpected answer: {answer}");
        return 1;
    }
    let sources = list(&answer, "sources");
    let applied = list(&answer, "applied");
    let restart = list(&answer, "restart_required");
    let mut text = format!(
        "reloaded {} ({} file{}): {}\n",
        sources.first().map_or("the configuration", |s| s.as_str()),
        sources.len(),
        if sources.len() == 1 { "" } else { "s" },
        if applied.is_empty() {
            "nothing to apply live".to_string()
        } else {
            format!("applied {}", applied.join(", "))
        }
    );
    let ended = answer["sessions_ended"].as_u64().unwrap_or(0);
    if ended > 0 {
        text.push_str(&format!(
            "ended {ended} browser session{} created by removed admin tokens\n",
            if ended == 1 { "" } else { "s" }
        ));
    }
    if !restart.is_empty() {
        text.push_str(&format!(
            "restart needed for: {} (the running daemon keeps its start-up values)\n",
            restart.join(", ")
        ));
    }
    super::out(&text);
    0
}
