//! `svc waf ...`: the WAF integration. `install-rules` works without the daemon (it reads
//! the configuration and the rules built into this binary); the other commands ask the
//! running daemon over the control socket (`waf.*`).
//!
//! Exit codes: 0 done; 1 refused or failed (the reason on standard error); 2 usage error.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::Flags;
use crate::waf::registry::SHIPPED_RULES;

/// Subcommands: (name, arguments, summary).
pub const COMMANDS: &[(&str, &str, &str)] = &[
    (
        "install-rules",
        "",
        "print the include lines for the web server (--server), or install svc's rules (--write)",
    ),
    (
        "stats",
        "",
        "collector, denies in 24 h, top rules and addresses",
    ),
    (
        "rules",
        "",
        "svc's rules: enabled, staged, escalation, hits in 24 h",
    ),
    (
        "escalation",
        "[RULE on|off]",
        "list the rules excluded from escalation, or turn a rule's escalation on or off",
    ),
    (
        "apply",
        "[RULE...]",
        "disable exactly these rules (none: enable all) and reload the web server once",
    ),
];

pub const FLAGS: &[(&str, &str)] = &[
    (
        "--server NAME",
        "install-rules: apache, nginx or litespeed (default: the one detected)",
    ),
    (
        "--write",
        "install-rules: write the rules to waf.rules_file and an empty waf.overrides_file when absent",
    ),
    ("--json", "print JSON"),
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

/// Where `install-rules --write` puts the files when `waf.rules_file` and
/// `waf.overrides_file` are not set.
pub const DEFAULT_RULES: &str = "/etc/svc/waf/svc-rules.conf";
pub const DEFAULT_OVERRIDES: &str = "/etc/svc/waf/svc-overrides.conf";

pub fn usage() -> String {
    let mut s = String::from(
        "svc waf — the ModSecurity integration\n\nUsage: svc waf <command> [ARG...] [options]\n\nCommands:\n",
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

#[derive(Debug, Default, PartialEq)]
struct Args {
    words: Vec<String>,
    server: Option<String>,
    write: bool,
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
            Long("server") => a.server = Some(p.value().map_err(err)?.to_string_lossy().into()),
            Long("write") => a.write = true,
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
    if let Some(s) = &a.server {
        if !matches!(s.as_str(), "apache" | "nginx" | "litespeed") {
            return Err(format!(
                "--server: expected apache, nginx or litespeed, got {s:?}"
            ));
        }
    }
    let sub = a.words.first().map(String::as_str).unwrap_or("");
    if (a.server.is_some() || a.write) && sub != "install-rules" {
        return Err("--server and --write apply to install-rules only".into());
    }
    Ok(a)
}

/// The control command for a parsed command line.
fn request(a: &Args) -> Result<(&'static str, Value), String> {
    let words: Vec<&str> = a.words.iter().map(String::as_str).collect();
    let Some((&sub, rest)) = words.split_first() else {
        return Err("missing command".into());
    };
    let rule = |s: &str| -> Result<u32, String> {
        s.parse::<u32>()
            .map_err(|_| format!("{sub}: {s:?} is not a rule id"))
    };
    Ok(match (sub, rest) {
        ("stats", []) => ("waf.stats", json!({})),
        ("rules", []) => ("waf.rules", json!({})),
        ("escalation", []) => ("waf.escalation", json!({})),
        ("escalation", [id, onoff]) => {
            let on = match *onoff {
                "on" => true,
                "off" => false,
                x => return Err(format!("escalation: expected on or off, got {x:?}")),
            };
            (
                "waf.escalation",
                json!({"rule_id": rule(id)?, "escalation": on}),
            )
        }
        ("escalation", _) => return Err("escalation takes RULE on|off, or nothing".into()),
        ("apply", ids) => {
            let ids = ids.iter().map(|s| rule(s)).collect::<Result<Vec<_>, _>>()?;
            ("waf.apply", json!({ "disabled": ids }))
        }
        ("stats" | "rules", _) => return Err(format!("{sub} takes no argument")),
        (other, _) => return Err(format!("unknown command {other:?}")),
    })
}

/// The web server to write the include for: `--server`, else the first whose
/// configuration directory exists.
fn detect_server() -> Option<&'static str> {
    [
        ("/usr/local/lsws", "litespeed"),
        ("/etc/apache2", "apache"),
        ("/etc/httpd", "apache"),
        ("/etc/nginx", "nginx"),
    ]
    .into_iter()
    .find(|(d, _)| Path::new(d).is_dir())
    .map(|(_, s)| s)
}

/// The include text for `server`.
pub fn include_text(server: &str, rules: &Path, overrides: &Path) -> String {
    let (r, o) = (rules.display(), overrides.display());
    match server {
        "nginx" => format!(
            "# In the ModSecurity rules file nginx loads (modsecurity_rules_file, for example\n# /etc/nginx/modsec/main.conf), after the core rules:\nInclude {r}\nInclude {o}\n"
        ),
        "litespeed" => format!(
            "# LiteSpeed: custom rule deployment needs the hosting panel's security centre.\n# In the server's mod_security configuration, after the core rules:\nInclude {r}\nInclude {o}\n"
        ),
        _ => format!(
            "# Apache (mod_security2): in a file of mods-enabled/conf.d loaded after the core rules,\n# for example /etc/apache2/mods-enabled/security2.conf:\nIncludeOptional {r}\nIncludeOptional {o}\n"
        ),
    }
}

fn install_rules(a: &Args) -> i32 {
    let flags = Flags {
        config: a.config.clone(),
        dev: a.dev,
        ..Flags::default()
    };
    let path = super::config_path(&flags);
    // Without a configuration file (a host where svc is not set up yet) the defaults apply.
    let waf = if flags.dev || !path.exists() {
        crate::config::waf::WafConfig::default()
    } else {
        match crate::config::load(&path) {
            Ok(c) => c.waf,
            Err(errs) => {
                for e in errs {
                    eprintln!("svc waf install-rules: {e}");
                }
                return 1;
            }
        }
    };
    let rules = waf
        .rules_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_RULES));
    let overrides = waf
        .overrides_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_OVERRIDES));
    let Some(server) = a.server.as_deref().or_else(|| detect_server()) else {
        eprintln!("svc waf install-rules: no web server found; name one with --server");
        return 1;
    };
    if a.write {
        for p in [&rules, &overrides] {
            if let Some(dir) = p.parent() {
                if let Err(e) = crate::fsutil::ensure_dir(dir, 0o755) {
                    eprintln!("svc waf install-rules: {}: {e}", dir.display());
                    return 1;
                }
            }
        }
        if let Err(e) = crate::fsutil::write_atomic(&rules, SHIPPED_RULES.as_bytes(), 0o644, None) {
            eprintln!("svc waf install-rules: {}: {e}", rules.display());
            return 1;
        }
        if !overrides.exists() {
            let text = crate::waf::rules::overrides_text(&Default::default());
            if let Err(e) = crate::fsutil::write_atomic(&overrides, text.as_bytes(), 0o644, None) {
                eprintln!("svc waf install-rules: {}: {e}", overrides.display());
                return 1;
            }
        }
    }
    if a.json {
        super::out(&format!(
            "{}\n",
            json!({
                "server": server,
                "rules_file": rules.display().to_string(),
                "overrides_file": overrides.display().to_string(),
                "written": a.write,
                "include": include_text(server, &rules, &overrides),
            })
        ));
    } else {
        if a.write {
            super::out(&format!(
                "wrote {} and {}; add to the {server} configuration and reload it:\n",
                rules.display(),
                overrides.display()
            ));
        }
        super::out(&include_text(server, &rules, &overrides));
    }
    0
}

fn human(cmd: &str, v: &Value) -> String {
    match cmd {
        "waf.stats" => {
            let c = &v["collector"];
            let mut out = format!(
                "collector: {} ({} files), {} events, {} denies, {} escalations since start\nlast 24 h: {} events, {} denies\n",
                if c["running"] == true { "running" } else { "not running" },
                c["files"].as_array().map_or(0, Vec::len),
                c["events_total"],
                c["denies_total"],
                c["escalations_total"],
                v["events_24h"],
                v["denies_24h"],
            );
            for r in v["top_rules"].as_array().into_iter().flatten() {
                out.push_str(&format!("  rule {:<10} {}\n", r["rule_id"], r["count"]));
            }
            for r in v["top_ips"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "  ip   {:<40} {}\n",
                    r["ip"].as_str().unwrap_or("?"),
                    r["count"]
                ));
            }
            out
        }
        "waf.rules" => {
            let mut out = String::new();
            for r in v["items"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "{} {:<8} {:<13} hits {:<6} {}\n",
                    r["id"],
                    if r["enabled"] == true {
                        "enabled"
                    } else {
                        "disabled"
                    },
                    if r["escalation"] == true {
                        "escalates"
                    } else {
                        "no-escalation"
                    },
                    r["hits_24h"],
                    crate::text::escape_controls(r["description"].as_str().unwrap_or("")),
                ));
            }
            out
        }
        "waf.escalation" if v.get("rule_id").is_some() => format!(
            "rule {}: escalation {}\n",
            v["rule_id"],
            if v["escalation"] == true { "on" } else { "off" }
        ),
        "waf.escalation" => {
            let ids: Vec<String> = v["excluded"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|x| x.to_string())
                .collect();
            if ids.is_empty() {
                "no rule is excluded from escalation\n".into()
            } else {
                format!("excluded from escalation: {}\n", ids.join(", "))
            }
        }
        "waf.apply" => format!(
            "disabled: {}; {}\n",
            v["disabled"],
            if v["reloaded"] == true {
                "the web server reloaded"
            } else {
                "the reload continues in the background"
            }
        ),
        _ => format!("{v}\n"),
    }
}

pub fn run(args: Vec<OsString>) -> i32 {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("svc waf: {e}\n");
            eprint!("{}", usage());
            return 2;
        }
    };
    if a.help {
        super::out(&usage());
        return 0;
    }
    if a.words.first().map(String::as_str) == Some("install-rules") {
        if a.words.len() > 1 {
            eprintln!("svc waf: install-rules takes no argument\n");
            eprint!("{}", usage());
            return 2;
        }
        return install_rules(&a);
    }
    let (cmd, body) = match request(&a) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("svc waf: {e}\n");
            eprint!("{}", usage());
            return 2;
        }
    };
    let sub = a.words.first().cloned().unwrap_or_default();
    let what = format!("svc waf {sub}");
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
        eprintln!("svc waf {sub}: {}", crate::text::escape_controls(e));
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

    fn args(s: &str) -> Result<Args, String> {
        parse(s.split_whitespace().map(OsString::from).collect())
    }

    #[test]
    fn requests_and_usage_errors() {
        let a = args("escalation 900112 off").unwrap();
        assert_eq!(
            request(&a).unwrap(),
            (
                "waf.escalation",
                json!({"rule_id": 900112, "escalation": false})
            )
        );
        let a = args("apply 900112 900109").unwrap();
        assert_eq!(
            request(&a).unwrap(),
            ("waf.apply", json!({"disabled": [900112, 900109]}))
        );
        assert_eq!(
            request(&args("apply").unwrap()).unwrap().1,
            json!({"disabled": []})
        );
        assert!(request(&args("escalation 900112 maybe").unwrap()).is_err());
        assert!(request(&args("apply x").unwrap()).is_err());
        assert!(request(&args("stats now").unwrap()).is_err());
        assert!(args("stats --write").is_err());
        assert!(args("install-rules --server iis").is_err());
        assert!(args("install-rules --server nginx --write").is_ok());
    }

    #[test]
    fn include_lines_per_server() {
        let r = Path::new("/etc/svc/waf/svc-rules.conf");
        let o = Path::new("/etc/svc/waf/svc-overrides.conf");
        assert!(include_text("apache", r, o).contains("IncludeOptional /etc/svc/waf/svc-rules.conf\nIncludeOptional /etc/svc/waf/svc-overrides.conf"));
        assert!(include_text("nginx", r, o).contains("modsecurity_rules_file"));
        assert!(include_text("litespeed", r, o).contains("panel"));
    }
}
