//! `svc threat ...`: threat intelligence over the control socket (the same requests as the
//! `/api/v1/threat/*` routes).
//!
//! Exit codes: 0 done; 1 refused or failed (the reason on standard error: an invalid
//! address, nothing changed, the daemon not running, the firewall engine absent); 2 usage
//! error.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

/// Subcommands: (name, arguments, summary).
pub const COMMANDS: &[(&str, &str, &str)] = &[
    (
        "lookup",
        "IP",
        "verdict, score, sources, GeoIP, RDAP, block state and recent events of an address",
    ),
    (
        "block",
        "IP...",
        "block for 24 hours (--permanent: with no expiry and permanent evidence)",
    ),
    (
        "whitelist",
        "IP...",
        "put on the permanent whitelist (--hours H: one address for H hours, 1-168)",
    ),
    ("unwhitelist", "IP...", "remove from the whitelist"),
    (
        "clear",
        "IP...",
        "clear the score and evidence (events, firewall and blocklist entries stay)",
    ),
    ("stats", "", "attack statistics and type breakdown"),
    ("top", "", "top attacking addresses (--limit N)"),
    ("events", "IP", "event history of an address (--limit N)"),
    (
        "undo",
        "[TOKEN]",
        "list the undoable changes made from the command line, or undo one",
    ),
];

pub const FLAGS: &[(&str, &str)] = &[
    ("--permanent", "block: no expiry (permanent evidence)"),
    (
        "--hours H",
        "whitelist: a temporary whitelist of H hours (1-168)",
    ),
    ("--reason TEXT", "block, whitelist: why (shown in lists)"),
    ("--limit N", "top, events: how many"),
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
        "svc threat — threat intelligence: attack database, verdicts, blocks, whitelist\n\nUsage: svc threat <command> [ARG...] [options]\n\nCommands:\n",
    );
    for (name, arg, help) in COMMANDS {
        s.push_str(&format!("  {:<20} {help}\n", format!("{name} {arg}")));
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

#[derive(Debug, Default, PartialEq)]
struct Args {
    words: Vec<String>,
    permanent: bool,
    hours: Option<String>,
    reason: Option<String>,
    limit: Option<String>,
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
            Long("permanent") => a.permanent = true,
            Long("hours") => a.hours = Some(p.value().map_err(err)?.to_string_lossy().into()),
            Long("reason") => a.reason = Some(p.value().map_err(err)?.to_string_lossy().into()),
            Long("limit") => a.limit = Some(p.value().map_err(err)?.to_string_lossy().into()),
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

fn number(name: &str, v: &str, lo: u64, hi: u64) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("{name} must be a number from {lo} to {hi}")),
    }
}

/// The control command and its arguments for a parsed command line.
fn request(a: &Args) -> Result<(&'static str, Value), String> {
    let words: Vec<&str> = a.words.iter().map(String::as_str).collect();
    let Some((&sub, rest)) = words.split_first() else {
        return Err("missing command".into());
    };
    let uses = |set: bool, name: &str, ok: bool| -> Result<(), String> {
        if set && !ok {
            Err(format!("{name} does not apply to {sub}"))
        } else {
            Ok(())
        }
    };
    uses(a.permanent, "--permanent", sub == "block")?;
    uses(a.hours.is_some(), "--hours", sub == "whitelist")?;
    uses(
        a.reason.is_some(),
        "--reason",
        matches!(sub, "block" | "whitelist"),
    )?;
    uses(
        a.limit.is_some(),
        "--limit",
        matches!(sub, "top" | "events"),
    )?;
    let one = |what: &str| -> Result<String, String> {
        match rest {
            [x] => Ok(x.to_string()),
            [] => Err(format!("{sub} needs {what}")),
            _ => Err(format!("{sub} takes one {what}")),
        }
    };
    let none = || -> Result<(), String> {
        if rest.is_empty() {
            Ok(())
        } else {
            Err(format!("{sub} takes no argument"))
        }
    };
    let addresses = |body: &mut Value| -> Result<(), String> {
        match rest {
            [] => Err(format!("{sub} needs at least one IP address")),
            [x] => {
                body["ip"] = x.to_string().into();
                Ok(())
            }
            many => {
                body["ips"] = many
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .into();
                Ok(())
            }
        }
    };
    let mut body = json!({});
    if let Some(r) = &a.reason {
        body["reason"] = r.clone().into();
    }
    Ok(match sub {
        "lookup" => {
            body["ip"] = one("an IP address")?.into();
            ("threat.lookup", body)
        }
        "block" => {
            addresses(&mut body)?;
            if a.permanent {
                ("threat.block_permanent", body)
            } else {
                ("threat.block", body)
            }
        }
        "whitelist" => match &a.hours {
            Some(h) => {
                body["ip"] = one("IP address (with --hours)")?.into();
                body["hours"] = number("--hours", h, 1, 168)?.into();
                ("threat.temp_whitelist", body)
            }
            None => {
                addresses(&mut body)?;
                ("threat.whitelist_ip", body)
            }
        },
        "unwhitelist" => {
            addresses(&mut body)?;
            ("threat.unwhitelist", body)
        }
        "clear" => {
            addresses(&mut body)?;
            ("threat.clear", body)
        }
        "stats" => {
            none()?;
            ("threat.stats", body)
        }
        "top" => {
            none()?;
            if let Some(l) = &a.limit {
                body["limit"] = number("--limit", l, 1, 1000)?.into();
            }
            ("threat.top_attackers", body)
        }
        "events" => {
            body["ip"] = one("an IP address")?.into();
            if let Some(l) = &a.limit {
                body["limit"] = number("--limit", l, 1, 1000)?.into();
            }
            ("threat.events", body)
        }
        "undo" => match rest {
            [] => ("threat.undo_pending", body),
            [t] => {
                body["undo_token"] = t.to_string().into();
                ("threat.undo_run", body)
            }
            _ => return Err("undo takes at most one token".into()),
        },
        other => return Err(format!("unknown command {other:?}")),
    })
}

fn s(v: &Value) -> String {
    crate::text::escape_controls(v.as_str().unwrap_or("?")).into_owned()
}

fn lifetime(v: &Value) -> String {
    match v["expires_at"].as_str() {
        Some(t) => format!("until {t}"),
        None => "permanently".into(),
    }
}

/// Human text of an answer.
fn human(cmd: &str, v: &Value) -> String {
    let mut out = String::new();
    let changed = |out: &mut String, what: &str| {
        if let Some(list) = v["changed"].as_array() {
            let l: Vec<String> = list.iter().map(s).collect();
            out.push_str(&format!("{what} {}\n", l.join(", ")));
            for w in v["warnings"].as_array().into_iter().flatten() {
                out.push_str(&format!("skipped: {}\n", s(w)));
            }
            for f in v["failed"].as_array().into_iter().flatten() {
                out.push_str(&format!("failed: {}: {}\n", s(&f["ip"]), s(&f["error"])));
            }
            for i in v["invalid"].as_array().into_iter().flatten() {
                out.push_str(&format!("invalid: {}\n", s(i)));
            }
        } else {
            out.push_str(&format!("{what} {} {}\n", s(&v["ip"]), lifetime(v)));
        }
        if let Some(t) = v["undo_token"].as_str() {
            out.push_str(&format!("undo with: svc threat undo {t}\n"));
        }
    };
    match cmd {
        "threat.lookup" => {
            out.push_str(&format!(
                "{}: {} (score {}){}{}{}\n",
                s(&v["ip"]),
                s(&v["verdict"]),
                v["score"],
                if v["blocked"] == true {
                    ", blocked"
                } else {
                    ""
                },
                if v["whitelisted"] == true {
                    ", whitelisted"
                } else {
                    ""
                },
                if v["flagged"] == true {
                    ", flagged (permanent evidence; blocked again when next seen)"
                } else {
                    ""
                },
            ));
            for l in v["sources"].as_array().into_iter().flatten() {
                let score = l["score"]
                    .as_u64()
                    .map_or("-".to_string(), |n| n.to_string());
                out.push_str(&format!(
                    "  {:<11} {:>3}  {:<8} {}\n",
                    s(&l["name"]),
                    score,
                    s(&l["status"]),
                    s(&l["reason"])
                ));
            }
            for e in v["events"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "  {} {:<8} {:<20} {}\n",
                    s(&e["at"]),
                    s(&e["sev"]),
                    s(&e["type"]),
                    s(&e["message"])
                ));
            }
        }
        "threat.block" => changed(&mut out, "blocked"),
        "threat.block_permanent" => changed(&mut out, "blocked permanently"),
        "threat.whitelist_ip" | "threat.temp_whitelist" => changed(&mut out, "whitelisted"),
        "threat.unwhitelist" => changed(&mut out, "removed from the whitelist:"),
        "threat.clear" => changed(&mut out, "cleared"),
        "threat.stats" => {
            out.push_str(&format!(
                "{} addresses, {} events ({} in the last 24 hours), {} suspicious, {} malicious\n",
                v["total_addresses"],
                v["total_events"],
                v["events_24h"],
                v["suspicious_addresses"],
                v["malicious_addresses"]
            ));
            for t in v["by_type"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "  {:<24} {:>8} events {:>8} addresses\n",
                    s(&t["label"]),
                    t["events"],
                    t["addresses"]
                ));
            }
        }
        "threat.top_attackers" => {
            for i in v["items"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "{:<40} score {:>3} {:>6} events  {}\n",
                    s(&i["ip"]),
                    i["score"],
                    i["events"],
                    i["geo"]["country"].as_str().unwrap_or("")
                ));
            }
        }
        "threat.events" => {
            for e in v["items"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "{} {:<8} {:<20} {:<24} {}\n",
                    s(&e["at"]),
                    s(&e["sev"]),
                    s(&e["type"]),
                    s(&e["check"]),
                    s(&e["message"])
                ));
            }
        }
        "threat.undo_pending" => {
            for i in v["items"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "{} {:<16} {} address(es) until {}{}\n",
                    s(&i["undo_token"]),
                    s(&i["action"]),
                    i["count"],
                    s(&i["expires_at"]),
                    if i["valid"] == true {
                        ""
                    } else {
                        " (invalidated)"
                    }
                ));
            }
            if v["total"] == 0 {
                out.push_str("nothing to undo\n");
            }
        }
        "threat.undo_run" => {
            let l: Vec<String> = v["restored"]
                .as_array()
                .into_iter()
                .flatten()
                .map(s)
                .collect();
            out.push_str(&format!(
                "undone {} for {}\n",
                s(&v["action"]),
                l.join(", ")
            ));
            for f in v["failed"].as_array().into_iter().flatten() {
                out.push_str(&format!("failed: {}: {}\n", s(&f["ip"]), s(&f["error"])));
            }
        }
        _ => out.push_str(&format!("{v}\n")),
    }
    out
}

/// Runs `svc threat ...` (arguments after `threat`); returns the exit code.
pub fn run(args: Vec<OsString>) -> i32 {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("svc threat: {e}\n");
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
            eprintln!("svc threat: {e}\n");
            eprint!("{}", usage());
            return 2;
        }
    };
    let sub = a.words.first().cloned().unwrap_or_default();
    let what = format!("svc threat {sub}");
    let answer = match super::control::ask_daemon(
        a.config.clone(),
        a.dev,
        &what,
        cmd,
        body,
        Duration::from_secs(60),
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
        if !a.json {
            let partial = human(cmd, &answer);
            if answer.get("changed").is_some() {
                eprint!("{partial}");
            }
        }
        eprintln!("svc threat {sub}: {}", crate::text::escape_controls(e));
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

    fn p(args: &[&str]) -> Result<(&'static str, Value), String> {
        let a = parse(args.iter().map(OsString::from).collect())?;
        request(&a)
    }

    #[test]
    fn command_lines_become_control_requests() {
        assert_eq!(
            p(&["block", "192.0.2.7", "--reason", "x"]).unwrap(),
            ("threat.block", json!({"ip": "192.0.2.7", "reason": "x"}))
        );
        assert_eq!(
            p(&["block", "192.0.2.7", "192.0.2.8", "--permanent"]).unwrap(),
            (
                "threat.block_permanent",
                json!({"ips": ["192.0.2.7", "192.0.2.8"]})
            )
        );
        assert_eq!(
            p(&["whitelist", "192.0.2.7", "--hours", "5"]).unwrap(),
            (
                "threat.temp_whitelist",
                json!({"ip": "192.0.2.7", "hours": 5})
            )
        );
        assert_eq!(p(&["lookup", "::1"]).unwrap().0, "threat.lookup");
        assert_eq!(p(&["undo"]).unwrap().0, "threat.undo_pending");
        assert_eq!(p(&["undo", "abc"]).unwrap().1, json!({"undo_token": "abc"}));
        assert_eq!(p(&["top", "--limit", "5"]).unwrap().1, json!({"limit": 5}));
    }

    #[test]
    fn usage_errors_say_what_is_wrong() {
        assert!(p(&[]).unwrap_err().contains("missing command"));
        assert!(p(&["lookup"]).unwrap_err().contains("needs an IP"));
        assert!(p(&["block"]).unwrap_err().contains("at least one"));
        assert!(p(&["clear", "1.2.3.4", "--permanent"])
            .unwrap_err()
            .contains("--permanent does not apply"));
        assert!(p(&["whitelist", "1.2.3.4", "--hours", "200"])
            .unwrap_err()
            .contains("1 to 168"));
        assert!(p(&["whitelist", "1.2.3.4", "5.6.7.8", "--hours", "2"]).is_err());
        assert!(p(&["stats", "x"])
            .unwrap_err()
            .contains("takes no argument"));
        assert!(p(&["nope"]).unwrap_err().contains("unknown command"));
        for (name, _, _) in COMMANDS {
            assert!(usage().contains(name));
        }
    }

    #[test]
    fn human_text() {
        let v = json!({"ok": true, "ip": "192.0.2.7", "permanent": false,
                       "expires_at": "2026-01-02T00:00:00.000000Z", "undo_token": "t1"});
        assert_eq!(
            human("threat.block", &v),
            "blocked 192.0.2.7 until 2026-01-02T00:00:00.000000Z\nundo with: svc threat undo t1\n"
        );
        let v = json!({"changed": ["192.0.2.7"], "warnings": ["192.0.2.8: already"], "failed": [], "invalid": ["x"]});
        assert_eq!(
            human("threat.clear", &v),
            "cleared 192.0.2.7\nskipped: 192.0.2.8: already\ninvalid: x\n"
        );
    }
}
