//! `svc firewall ...`: the firewall over the control socket. The daemon owns table
//! `inet svc`; this command never runs nft itself.
//!
//! Exit codes: 0 done; 1 refused or failed (the reason on standard error: an allowed or
//! infrastructure address, an invalid address, nothing to remove, the daemon not running,
//! the engine absent); 2 usage error.

use std::time::Duration;

use serde_json::{json, Value};

use super::args::Args;
use super::family::{none, one, unknown, Family, Request, UsageError};

/// `svc firewall`: verbs and flags in [`super::defs`].
pub static FAMILY: Family = Family {
    command: &super::defs::FIREWALL,
    request,
    human,
};

/// The control request of a parsed command line.
fn request(a: &Args) -> Result<Request, UsageError> {
    let mut body = json!({});
    if let Some(d) = a.value("for") {
        crate::firewall::duration::parse(d).map_err(UsageError::Duration)?;
        body["for"] = d.into();
    }
    if let Some(r) = a.value("reason") {
        body["reason"] = r.into();
    }
    let short = Duration::from_secs(30);
    let long = Duration::from_secs(120);
    let (command, timeout) = match a.verb() {
        "status" => {
            none(a)?;
            ("firewall.status", short)
        }
        "list" => {
            none(a)?;
            ("firewall.list", short)
        }
        "check" => {
            body["ip"] = one(a, "an IP address")?.into();
            ("firewall.check", short)
        }
        "block" => {
            body["ip"] = one(a, "an IP address")?.into();
            ("firewall.block", long)
        }
        "unblock" => {
            body["ip"] = one(a, "an IP address")?.into();
            ("firewall.unblock", long)
        }
        "allow" => {
            body["ip"] = one(a, "an IP address or range")?.into();
            ("firewall.allow", long)
        }
        "unallow" => {
            body["ip"] = one(a, "an IP address or range")?.into();
            ("firewall.unallow", long)
        }
        "deny-subnet" => {
            body["subnet"] = one(a, "a CIDR range")?.into();
            ("firewall.deny_subnet", long)
        }
        "remove-subnet" => {
            body["subnet"] = one(a, "a CIDR range")?.into();
            ("firewall.remove_subnet", long)
        }
        "flush" => {
            none(a)?;
            ("firewall.flush", long)
        }
        "confirm" => {
            none(a)?;
            ("firewall.confirm", long)
        }
        "revert" => {
            none(a)?;
            ("firewall.revert", long)
        }
        "rollback" => match a.rest() {
            [] => ("firewall.rollback", short),
            [w] if w == "status" => ("firewall.rollback", short),
            [w] if w == "confirm" => ("firewall.confirm", long),
            [w] if w == "revert" => ("firewall.revert", long),
            _ => {
                return Err(UsageError::Takes {
                    verb: "rollback",
                    form: "status, confirm or revert",
                })
            }
        },
        _ => return Err(unknown(a)),
    };
    Ok(Request {
        command,
        body,
        timeout,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<(&'static str, Value, Duration), UsageError> {
        let a = crate::cli::args::parse(
            &crate::cli::defs::FIREWALL,
            args.iter().map(std::ffi::OsString::from).collect(),
        )?;
        request(&a).map(|r| (r.command, r.body, r.timeout))
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
    }

    #[test]
    fn usage_errors_say_what_is_wrong() {
        assert!(p(&["block"])
            .unwrap_err()
            .to_string()
            .contains("needs an IP address"));
        assert!(p(&["block", "a", "b"])
            .unwrap_err()
            .to_string()
            .contains("takes one"));
        assert!(p(&["flush", "x"])
            .unwrap_err()
            .to_string()
            .contains("takes no argument"));
        assert!(p(&["unblock", "1.2.3.4", "--for", "4s"])
            .unwrap_err()
            .to_string()
            .contains("--for does not apply"));
        assert!(p(&["block", "1.2.3.4", "--for", "4"])
            .unwrap_err()
            .to_string()
            .contains("unit"));
        assert!(p(&["nope"])
            .unwrap_err()
            .to_string()
            .contains("unknown command"));
        assert!(p(&["--bogus"]).is_err());
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
