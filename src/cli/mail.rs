//! `svc mail ...`: the mail antivirus over the control socket (status, statistics, the
//! quarantined-mail list, release and delete).
//!
//! Exit codes: 0 done; 1 refused or failed (the reason on standard error: unknown id, the
//! entry in another state, a move that failed, the daemon not running); 2 usage error.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::text::escape_controls;

pub const COMMANDS: &[(&str, &str, &str)] = &[
    (
        "status",
        "",
        "watcher, spool, clamd health and version, staging",
    ),
    (
        "stats",
        "",
        "messages scanned, infected, quarantined, incomplete",
    ),
    ("list", "", "quarantined messages, newest first"),
    (
        "release",
        "ID",
        "put a quarantined message back into its spool",
    ),
    ("delete", "ID", "delete a quarantined message"),
];

pub const FLAGS: &[(&str, &str)] = &[
    ("--json", "print the daemon's JSON answer"),
    (
        "-c, --config FILE",
        "main configuration file (default /etc/svc/svc.toml)",
    ),
    (
        "--dev",
        "talk to a daemon started with --dev in this directory",
    ),
    ("-h, --help", "print this help"),
];

pub fn usage() -> String {
    let mut s = String::from(
        "svc mail — the mail antivirus (spool watcher, clamd, mail quarantine)\n\nUsage: svc mail <command> [ID] [options]\n\nCommands:\n",
    );
    for (name, arg, help) in COMMANDS {
        s.push_str(&format!("  {:<16} {help}\n", format!("{name} {arg}")));
    }
    s.push_str("\nOptions:\n");
    for (flag, help) in FLAGS {
        s.push_str(&format!("  {flag:<20} {help}\n"));
    }
    s.push_str(
        "\nExit status: 0 done, 1 refused or failed (reason on standard error), 2 usage error.\n",
    );
    s
}

#[derive(Debug, Default)]
struct Args {
    words: Vec<String>,
    json: bool,
    config: Option<PathBuf>,
    dev: bool,
    help: bool,
}

fn parse(args: Vec<OsString>) -> Result<Args, String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(args);
    let mut a = Args::default();
    let err = |e: lexopt::Error| e.to_string();
    while let Some(arg) = p.next().map_err(err)? {
        match arg {
            Value(v) => a.words.push(v.to_string_lossy().into_owned()),
            Long("json") => a.json = true,
            Short('c') | Long("config") => a.config = Some(PathBuf::from(p.value().map_err(err)?)),
            Long("dev") => a.dev = true,
            Short('h') | Long("help") => a.help = true,
            other => return Err(other.unexpected().to_string()),
        }
    }
    if a.dev && a.config.is_some() {
        return Err("--dev and --config cannot be combined".into());
    }
    Ok(a)
}

fn request(a: &Args) -> Result<(&'static str, Value), String> {
    let words: Vec<&str> = a.words.iter().map(String::as_str).collect();
    let Some((&sub, rest)) = words.split_first() else {
        return Err("missing command".into());
    };
    let cmd = match sub {
        "status" => "mail.status",
        "stats" => "mail.stats",
        "list" => "mail.list",
        "release" => "mail.release",
        "delete" => "mail.delete",
        other => return Err(format!("unknown command {:?}", escape_controls(other))),
    };
    match (cmd, rest) {
        ("mail.release" | "mail.delete", [id]) => Ok((cmd, json!({ "id": id }))),
        ("mail.release" | "mail.delete", _) => Err(format!("{sub} takes one quarantine ID")),
        (_, []) => Ok((cmd, json!({}))),
        _ => Err(format!("{sub} takes no argument")),
    }
}

fn s(v: &Value) -> String {
    escape_controls(v.as_str().unwrap_or("-")).into_owned()
}

fn human(cmd: &str, v: &Value) -> String {
    match cmd {
        "mail.status" => {
            let c = &v["engines"]["clamd"];
            format!(
                "mail antivirus: {}, spool {} ({}), clamd {} {}, staging {}, quarantine {}\n",
                if v["active"] == true {
                    "active"
                } else if v["enabled"] == true {
                    "enabled, not watching"
                } else {
                    "disabled"
                },
                s(&v["spool_path"]),
                s(&v["watcher"]["mta"]),
                s(&c["status"]),
                s(&c["health"]["version"]["engine"]),
                if v["staging"]["ok"] == true {
                    "ok"
                } else {
                    "refused"
                },
                s(&v["quarantine"]["path"]),
            ) + &v["watcher"]["error"]
                .as_str()
                .map(|e| format!("watcher: {}\n", escape_controls(e)))
                .unwrap_or_default()
        }
        "mail.stats" => {
            let l = &v["last_24h"];
            format!(
                "since start: {} scanned, {} infected, {} quarantined, {} incomplete\nlast 24 h:   {} scanned, {} infected, {} quarantined, {} incomplete\n",
                v["scanned"], v["infected"], v["quarantined"], v["incomplete"],
                l["scanned"], l["infected"], l["quarantined"], l["incomplete"],
            )
        }
        "mail.list" => {
            let mut out = String::new();
            for e in v["items"].as_array().into_iter().flatten() {
                let sig = e["verdicts"][0]["signature"].clone();
                out.push_str(&format!(
                    "{} {:<11} {} {} from {} to {}: {}\n",
                    s(&e["id"]),
                    s(&e["state"]),
                    s(&e["quarantined_at"]),
                    s(&e["queue_id"]),
                    s(&e["sender"]),
                    s(&e["recipients"][0]),
                    s(&sig),
                ));
            }
            out.push_str(&format!("{} quarantined messages\n", v["total"]));
            out
        }
        _ => format!(
            "{} {}: {}\n",
            s(&v["id"]),
            s(&v["queue_id"]),
            s(&v["state"])
        ),
    }
}

pub fn run(args: Vec<OsString>) -> i32 {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("svc mail: {e}\n");
            eprint!("{}", usage());
            return 2;
        }
    };
    if a.help {
        super::out(&usage());
        return 0;
    }
    let (cmd, body) = match request(&a) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("svc mail: {e}\n");
            eprint!("{}", usage());
            return 2;
        }
    };
    let sub = a.words.first().cloned().unwrap_or_default();
    let what = format!("svc mail {sub}");
    let answer = match super::control::ask_daemon(
        a.config.clone(),
        a.dev,
        &what,
        cmd,
        body,
        Duration::from_secs(120),
    ) {
        Ok(v) => v,
        Err(code) => return code,
    };
    if a.json {
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&answer).unwrap_or_default()
        ));
    }
    if let Some(e) = answer.get("error").and_then(Value::as_str) {
        eprintln!("svc mail {sub}: {}", escape_controls(e));
        return 1;
    }
    if !a.json {
        super::out(&human(cmd, &answer));
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(words: &[&str]) -> Result<(&'static str, Value), String> {
        request(&Args {
            words: words.iter().map(|w| w.to_string()).collect(),
            ..Args::default()
        })
    }

    #[test]
    fn commands_and_arguments() {
        assert_eq!(
            req(&["release", "ab12"]).unwrap(),
            ("mail.release", json!({"id": "ab12"}))
        );
        assert_eq!(req(&["list"]).unwrap().0, "mail.list");
        assert!(req(&["release"]).is_err());
        assert!(req(&["status", "x"]).is_err());
        assert!(req(&["bogus"]).is_err());
        assert!(req(&[]).is_err());
    }
}
