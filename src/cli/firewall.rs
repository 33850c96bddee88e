//! `svc firewall ...`: the firewall over the control socket. The daemon owns table
//! `inet svc`; this command never runs nft itself.
//!
//! Exit codes: 0 done; 1 refused or failed (the reason on standard error: an allowed or
//! infrastructure address, an invalid address, nothing to remove, the daemon not running,
//! the engine absent); 2 usage error.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

/// Subcommands: (name, positional argument, summary).
pub const COMMANDS: &[(&str, &str, &str)] = &[
    (
        "status",
        "",
        "mode, table, set sizes, last re-assertion, rollback state",
    ),
    ("list", "", "blocks and dry-run records, newest first"),
    ("check", "IP", "what the firewall does with an address"),
    ("block", "IP", "block an address (permanent unless --for)"),
    (
        "unblock",
        "IP",
        "remove every block of an address (not subnets)",
    ),
    (
        "allow",
        "IP",
        "put an address or range on the allow list (--for for a time)",
    ),
    ("unallow", "IP", "remove an allow entry"),
    ("deny-subnet", "CIDR", "block a range permanently"),
    ("remove-subnet", "CIDR", "remove a range block"),
    (
        "flush",
        "",
        "remove every temporary block (permanent ones stay)",
    ),
    (
        "rollback",
        "[status|confirm|revert]",
        "the tentative settings change and its timer",
    ),
    (
        "confirm",
        "",
        "keep the tentative settings change (same as rollback confirm)",
    ),
    (
        "revert",
        "",
        "undo the tentative settings change now (same as rollback revert)",
    ),
];

pub const FLAGS: &[(&str, &str)] = &[
    (
        "--for DURATION",
        "block, allow: lifetime such as 4s, 90s, 15m, 24h, 7d",
    ),
    (
        "--reason TEXT",
        "block, allow, deny-subnet: why (shown in lists and checks)",
    ),
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
        "svc firewall — the daemon's nftables firewall (table inet svc)\n\nUsage: svc firewall <command> [ARG] [options]\n\nCommands:\n",
    );
    for (name, arg, help) in COMMANDS {
        s.push_str(&format!("  {:<28} {help}\n", format!("{name} {arg}")));
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

/// Parsed command line.
#[derive(Debug, Default, PartialEq)]
struct Args {
    words: Vec<String>,
    duration: Option<String>,
    reason: Option<String>,
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
            Long("for") => a.duration = Some(p.value().map_err(err)?.to_string_lossy().into()),
            Long("reason") => a.reason = Some(p.value().map_err(err)?.to_string_lossy().into()),
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

/// The control command and its arguments for a parsed command line.
fn request(a: &Args) -> Result<(&'static str, Value, Duration), String> {
    let words: Vec<&str> = a.words.iter().map(String::as_str).collect();
    let Some((&sub, rest)) = words.split_first() else {
        return Err("missing command".into());
    };
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
    let uses = |flag: bool, name: &str, allowed: bool| -> Result<(), String> {
        if flag && !allowed {
            Err(format!("{name} does not apply to {sub}"))
        } else {
            Ok(())
        }
    };
    let dur = a.duration.is_some();
    let why = a.reason.is_some();
    uses(dur, "--for", matches!(sub, "block" | "allow"))?;
    uses(
        why,
        "--reason",
        matches!(sub, "block" | "allow" | "deny-subnet"),
    )?;
    let mut body = json!({});
    if let Some(d) = &a.duration {
        crate::firewall::duration::parse(d).map_err(|e| e.to_string())?;
        body["for"] = d.clone().into();
    }
    if let Some(r) = &a.reason {
        body["reason"] = r.clone().into();
    }
    let short = Duration::from_secs(30);
    let long = Duration::from_secs(120);
    Ok(match sub {
        "status" => {
            none()?;
            ("firewall.status", body, short)
        }
        "list" => {
            none()?;
            ("firewall.list", body, short)
        }
        "check" => {
            body["ip"] = one("an IP address")?.into();
            ("firewall.check", body, short)
        }
        "block" => {
            body["ip"] = one("an IP address")?.into();
            ("firewall.block", body, long)
        }
        "unblock" => {
            body["ip"] = one("an IP address")?.into();
            ("firewall.unblock", body, long)
        }
        "allow" => {
            body["ip"] = one("an IP address or range")?.into();
            ("firewall.allow", body, long)
        }
        "unallow" => {
            body["ip"] = one("an IP address or range")?.into();
            ("firewall.unallow", body, long)
        }
        "deny-subnet" => {
            body["subnet"] = one("a CIDR range")?.into();
            ("firewall.deny_subnet", body, long)
        }
        "remove-subnet" => {
            body["subnet"] = one("a CIDR range")?.into();
            ("firewall.remove_subnet", body, long)
        }
        "flush" => {
            none()?;
            ("firewall.flush", body, long)
        }
        "confirm" => {
            none()?;
            ("firewall.confirm", body, long)
        }
        "revert" => {
            none()?;
            ("firewall.revert", body, long)
        }
        "rollback" => match rest {
            [] | ["status"] => ("firewall.rollback", body, short),
            ["confirm"] => ("firewall.confirm", body, long),
            ["revert"] => ("firewall.revert", body, long),
            _ => return Err("rollback takes status, confirm or revert".into()),
        },
        other => return Err(format!("unknown command {other:?}")),
    })
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("?")
}

fn lifetime(v: &Value) -> String {
    match v["expires_at"].as_str() {
        Some(t) => format!("until {t}"),
        None => "permanently".into(),
    }
}

/// Human text of an answer.
fn human(cmd: &str, v: &Value) -> String {
    match cmd {
        "firewall.status" => {
            let b = &v["blocks"];
            let mut out = format!(
                "firewall: mode {}, table {} {}, {} blocked addresses and {} subnets ({} temporary), {} allow entries, dry run {}\n",
                s(&v["mode"]),
                s(&v["table"]),
                if v["table_present"] == true { "present" } else { "missing" },
                b["addresses"],
                b["subnets"],
                b["temporary"],
                v["allows"],
                if v["dry_run"] == true { "on" } else { "off" },
            );
            if let Some(t) = v["last_reassert_at"].as_str() {
                out.push_str(&format!(
                    "last re-assertion {t} ({} in total)\n",
                    v["reasserts_total"]
                ));
            }
            if let Some(e) = v["last_error"].as_str() {
                out.push_str(&format!(
                    "last error: {}\n",
                    crate::text::escape_controls(e)
                ));
            }
            out.push_str(&rollback_line(&v["rollback"]));
            out
        }
        "firewall.list" => {
            let items = v["items"].as_array().cloned().unwrap_or_default();
            let mut out = String::new();
            for i in &items {
                out.push_str(&format!(
                    "{:<20} {:<40} {:<9} {}{}\n",
                    s(&i["ip"]),
                    lifetime(i),
                    s(&i["source"]),
                    crate::text::escape_controls(s(&i["reason"])),
                    if i["dry_run"] == true {
                        " [dry run]"
                    } else {
                        ""
                    }
                ));
            }
            out.push_str(&format!("{} entries\n", v["total"]));
            out
        }
        "firewall.check" => {
            let mut out = format!("{}: ", s(&v["ip"]));
            if v["blocked"] == true {
                let why = v["temporary"]
                    .as_str()
                    .or(v["permanent"].as_str())
                    .unwrap_or("");
                out.push_str(&format!(
                    "blocked ({}) by {}",
                    crate::text::escape_controls(why),
                    s(&v["blocked_by"])
                ));
                if v["temporary"].is_null() {
                    out.push_str(", permanent");
                }
            } else {
                out.push_str("not blocked");
            }
            if v["allowed"] == true {
                out.push_str(&format!("; allowed by {}", s(&v["allowed_by"])));
            }
            if v["infra"] == true {
                out.push_str("; infrastructure address (never blocked)");
            }
            if v["dry_run"].is_object() {
                out.push_str("; a dry-run block is recorded");
            }
            out.push('\n');
            out
        }
        "firewall.block" => {
            if v["dry_run"] == true {
                format!(
                    "dry run: recorded a block of {} {} (auto_response.dry_run)\n",
                    s(&v["ip"]),
                    lifetime(v)
                )
            } else {
                format!("blocked {} {}\n", s(&v["ip"]), lifetime(v))
            }
        }
        "firewall.unblock" => {
            let n = v["removed"].as_array().map_or(0, Vec::len);
            format!(
                "unblocked {} (removed {n} block{})\n",
                s(&v["ip"]),
                if n == 1 { "" } else { "s" }
            )
        }
        "firewall.allow" => {
            let mut out = format!("allowed {} {}\n", s(&v["ip"]), lifetime(v));
            if let Some(list) = v["unblocked"].as_array().filter(|l| !l.is_empty()) {
                let l: Vec<&str> = list.iter().map(s).collect();
                out.push_str(&format!("removed blocks of {}\n", l.join(", ")));
            }
            out
        }
        "firewall.unallow" => format!("removed allow entry {}\n", s(&v["ip"])),
        "firewall.deny_subnet" => format!("blocked subnet {} permanently\n", s(&v["subnet"])),
        "firewall.remove_subnet" => format!("removed the block of subnet {}\n", s(&v["subnet"])),
        "firewall.flush" => format!("removed {} temporary blocks\n", v["removed"]),
        _ => rollback_line(v),
    }
}

fn rollback_line(r: &Value) -> String {
    match r["state"].as_str() {
        Some("pending") => format!(
            "rollback: a tentative settings change is pending; it reverts at {} ({} s left) unless confirmed\n",
            s(&r["deadline"]),
            r["remaining_seconds"]
        ),
        Some(st @ ("confirmed" | "reverted")) => format!(
            "rollback: the last tentative change was {st} at {} ({})\n",
            s(&r["finished_at"]),
            s(&r["reason"])
        ),
        Some(other) => format!("rollback: {other}\n"),
        None => "rollback: unknown\n".into(),
    }
}

/// Runs `svc firewall ...` (arguments after `firewall`); returns the exit code.
pub fn run(args: Vec<OsString>) -> i32 {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("svc firewall: {e}\n");
            eprint!("{}", usage());
            return 2;
        }
    };
    if a.help {
        super::out(&usage());
        return 0;
    }
    let (cmd, body, timeout) = match request(&a) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("svc firewall: {e}\n");
            eprint!("{}", usage());
            return 2;
        }
    };
    let sub = a.words.first().cloned().unwrap_or_default();
    let what = format!("svc firewall {sub}");
    let answer =
        match super::control::ask_daemon(a.config.clone(), a.dev, &what, cmd, body, timeout) {
            Ok(v) => v,
            Err(code) => return code,
        };
    if let Some(e) = answer.get("error").and_then(Value::as_str) {
        if a.json {
            super::out(&format!(
                "{}\n",
                serde_json::to_string_pretty(&answer).unwrap_or_default()
            ));
        }
        eprintln!("svc firewall {sub}: {}", crate::text::escape_controls(e));
        return 1;
    }
    if a.json {
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&answer).unwrap_or_default()
        ));
    } else {
        super::out(&human(cmd, &answer));
        if let Some(w) = answer.get("warning").and_then(Value::as_str) {
            eprintln!(
                "svc firewall {sub}: warning: {}",
                crate::text::escape_controls(w)
            );
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<(&'static str, Value, Duration), String> {
        let a = parse(args.iter().map(OsString::from).collect())?;
        request(&a)
    }

    #[test]
    fn command_lines_become_control_requests() {
        let (c, v, _) = p(&["block", "192.0.2.7", "--for", "15m", "--reason", "ssh"]).unwrap();
        assert_eq!(c, "firewall.block");
        assert_eq!(v, json!({"ip": "192.0.2.7", "for": "15m", "reason": "ssh"}));
        let (c, v, _) = p(&["block", "192.0.2.7"]).unwrap();
        assert_eq!((c, v), ("firewall.block", json!({"ip": "192.0.2.7"})));
        assert_eq!(p(&["rollback"]).unwrap().0, "firewall.rollback");
        assert_eq!(p(&["rollback", "revert"]).unwrap().0, "firewall.revert");
        assert_eq!(p(&["confirm"]).unwrap().0, "firewall.confirm");
        assert_eq!(
            p(&["deny-subnet", "198.51.100.0/24"]).unwrap().1,
            json!({"subnet": "198.51.100.0/24"})
        );
        let a = parse(
            ["list", "--json", "-c", "/x.toml"]
                .map(OsString::from)
                .to_vec(),
        )
        .unwrap();
        assert!(a.json);
        assert_eq!(a.config, Some(PathBuf::from("/x.toml")));
    }

    #[test]
    fn usage_errors_say_what_is_wrong() {
        assert!(p(&[]).unwrap_err().contains("missing command"));
        assert!(p(&["block"]).unwrap_err().contains("needs an IP address"));
        assert!(p(&["block", "a", "b"]).unwrap_err().contains("takes one"));
        assert!(p(&["flush", "x"])
            .unwrap_err()
            .contains("takes no argument"));
        assert!(p(&["unblock", "1.2.3.4", "--for", "4s"])
            .unwrap_err()
            .contains("--for does not apply"));
        assert!(p(&["block", "1.2.3.4", "--for", "4"])
            .unwrap_err()
            .contains("unit"));
        assert!(p(&["nope"]).unwrap_err().contains("unknown command"));
        assert!(parse(["--bogus"].map(OsString::from).to_vec()).is_err());
        for (name, _, _) in COMMANDS {
            assert!(usage().contains(name));
        }
    }

    #[test]
    fn human_text() {
        let v = json!({"ip": "192.0.2.7", "blocked": true, "temporary": "ssh (expires in 23h59m)",
                       "permanent": null, "blocked_by": "192.0.2.7", "allowed": false, "infra": false});
        assert_eq!(
            human("firewall.check", &v),
            "192.0.2.7: blocked (ssh (expires in 23h59m)) by 192.0.2.7\n"
        );
        assert_eq!(
            human(
                "firewall.block",
                &json!({"ip": "192.0.2.7", "permanent": true})
            ),
            "blocked 192.0.2.7 permanently\n"
        );
        assert!(human(
            "firewall.rollback",
            &json!({"state": "pending", "deadline": "T", "remaining_seconds": 5})
        )
        .contains("5 s left"));
    }
}
