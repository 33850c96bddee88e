//! `svc waf ...`: the WAF integration. `install-rules` works without the daemon (it reads
//! the configuration and the rules built into this binary); the other commands ask the
//! running daemon over the control socket (`waf.*`).
//!
//! Exit codes: 0 done; 1 refused or failed (the reason on standard error); 2 usage error.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::args::Args;
use super::family::{Family, Request, UsageError};
use crate::waf::registry::SHIPPED_RULES;

/// `svc waf` verbs that ask the daemon (`install-rules` runs here: [`run`]).
pub static FAMILY: Family = Family {
    command: &super::defs::WAF,
    request,
    human,
};

/// Where `install-rules --write` puts the files when `waf.rules_file` and
/// `waf.overrides_file` are not set.
pub const DEFAULT_RULES: &str = "/etc/svc/waf/svc-rules.conf";
pub const DEFAULT_OVERRIDES: &str = "/etc/svc/waf/svc-overrides.conf";

/// `--server` of install-rules: one of the servers it knows.
fn server(a: &Args) -> Result<Option<&'static str>, UsageError> {
    match a.value("server") {
        None => Ok(None),
        Some("apache") => Ok(Some("apache")),
        Some("nginx") => Ok(Some("nginx")),
        Some("litespeed") => Ok(Some("litespeed")),
        Some(s) => Err(UsageError::Choice {
            what: "--server",
            expected: "apache, nginx or litespeed",
            got: s.to_string(),
        }),
    }
}

/// The control command for a parsed command line.
fn request(a: &Args) -> Result<Request, UsageError> {
    let (sub, words) = (a.verb(), a.rest());
    let rest: Vec<&str> = words.iter().map(String::as_str).collect();
    let rule = |s: &str| {
        s.parse::<u32>().map_err(|_| UsageError::NotA {
            verb: sub.to_string(),
            text: s.to_string(),
            what: "rule id",
        })
    };
    let (command, body) = match (sub, rest.as_slice()) {
        ("stats", []) => ("waf.stats", json!({})),
        ("rules", []) => ("waf.rules", json!({})),
        ("escalation", []) => ("waf.escalation", json!({})),
        ("escalation", [id, onoff]) => {
            let on = match *onoff {
                "on" => true,
                "off" => false,
                x => {
                    return Err(UsageError::Choice {
                        what: "escalation",
                        expected: "on or off",
                        got: x.to_string(),
                    })
                }
            };
            (
                "waf.escalation",
                json!({"rule_id": rule(id)?, "escalation": on}),
            )
        }
        ("escalation", _) => {
            return Err(UsageError::Takes {
                verb: "escalation",
                form: "RULE on|off, or nothing",
            })
        }
        ("apply", ids) => {
            let ids = ids.iter().map(|s| rule(s)).collect::<Result<Vec<_>, _>>()?;
            ("waf.apply", json!({ "disabled": ids }))
        }
        ("stats" | "rules", _) => {
            return Err(UsageError::TakesNone {
                verb: sub.to_string(),
            })
        }
        _ => return Err(super::family::unknown(a)),
    };
    Ok(Request::new(command, body))
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
    let path = super::config_path(a);
    // Without a configuration file (a host where svc is not set up yet) the defaults apply.
    let waf = if a.dev || !path.exists() {
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
    let named = match server(a) {
        Ok(s) => s,
        Err(e) => return super::family::usage_error(&super::defs::WAF, e),
    };
    let write = a.switch("write");
    let Some(server) = named.or_else(detect_server) else {
        eprintln!("svc waf install-rules: no web server found; name one with --server");
        return 1;
    };
    if write {
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
                "written": write,
                "include": include_text(server, &rules, &overrides),
            })
        ));
    } else {
        if write {
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

/// Runs `svc waf` (flags parsed, `--help` handled): `install-rules` here, the rest
/// through the daemon.
pub fn run(a: &Args) -> i32 {
    if a.verb() == "install-rules" {
        if !a.rest().is_empty() {
            return super::family::usage_error(
                &super::defs::WAF,
                "install-rules takes no argument",
            );
        }
        return install_rules(a);
    }
    super::family::run(&FAMILY, a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args, UsageError> {
        let a = crate::cli::args::parse(
            &crate::cli::defs::WAF,
            s.split_whitespace().map(std::ffi::OsString::from).collect(),
        )?;
        server(&a)?;
        Ok(a)
    }

    fn req(a: &Args) -> Result<(&'static str, Value), UsageError> {
        request(a).map(|r| (r.command, r.body))
    }

    #[test]
    fn requests_and_usage_errors() {
        let a = args("escalation 900112 off").unwrap();
        assert_eq!(
            req(&a).unwrap(),
            (
                "waf.escalation",
                json!({"rule_id": 900112, "escalation": false})
            )
        );
        let a = args("apply 900112 900109").unwrap();
        assert_eq!(
            req(&a).unwrap(),
            ("waf.apply", json!({"disabled": [900112, 900109]}))
        );
        assert_eq!(
            req(&args("apply").unwrap()).unwrap().1,
            json!({"disabled": []})
        );
        assert!(req(&args("escalation 900112 maybe").unwrap()).is_err());
        assert!(req(&args("apply x").unwrap()).is_err());
        assert!(req(&args("stats now").unwrap()).is_err());
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
