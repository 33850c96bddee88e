//! `svc threat ...`: threat intelligence over the control socket (the same requests as the
//! `/api/v1/threat/*` routes).
//!
//! Exit codes: 0 done; 1 refused or failed (the reason on standard error: an invalid
//! address, nothing changed, the daemon not running, the firewall engine absent); 2 usage
//! error.

use std::time::Duration;

use serde_json::{json, Value};

use super::args::Args;
use super::family::{none, one, unknown, Family, Request, UsageError};

/// `svc threat`: verbs and flags in [`super::defs`].
pub static FAMILY: Family = Family {
    command: &super::defs::THREAT,
    request,
    human,
};

fn number(flag: &'static str, v: &str, lo: u64, hi: u64) -> Result<u64, UsageError> {
    match v.parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(UsageError::OutOfRange { flag, lo, hi }),
    }
}

/// The control request of a parsed command line.
fn request(a: &Args) -> Result<Request, UsageError> {
    let sub = a.verb();
    let rest = a.rest();
    let addresses = |body: &mut Value| match rest {
        [] => Err(UsageError::Needs {
            verb: sub.to_string(),
            what: "at least one IP address",
        }),
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
    };
    let mut body = json!({});
    if let Some(r) = a.value("reason") {
        body["reason"] = r.into();
    }
    let command = match sub {
        "lookup" => {
            body["ip"] = one(a, "an IP address")?.into();
            "threat.lookup"
        }
        "block" => {
            addresses(&mut body)?;
            if a.switch("permanent") {
                "threat.block_permanent"
            } else {
                "threat.block"
            }
        }
        "whitelist" => match a.value("hours") {
            Some(h) => {
                body["ip"] = one(a, "IP address (with --hours)")?.into();
                body["hours"] = number("--hours", h, 1, 168)?.into();
                "threat.temp_whitelist"
            }
            None => {
                addresses(&mut body)?;
                "threat.whitelist_ip"
            }
        },
        "unwhitelist" => {
            addresses(&mut body)?;
            "threat.unwhitelist"
        }
        "clear" => {
            addresses(&mut body)?;
            "threat.clear"
        }
        "stats" => {
            none(a)?;
            "threat.stats"
        }
        "top" => {
            none(a)?;
            if let Some(l) = a.value("limit") {
                body["limit"] = number("--limit", l, 1, 1000)?.into();
            }
            "threat.top_attackers"
        }
        "events" => {
            body["ip"] = one(a, "an IP address")?.into();
            if let Some(l) = a.value("limit") {
                body["limit"] = number("--limit", l, 1, 1000)?.into();
            }
            "threat.events"
        }
        "undo" => match rest {
            [] => "threat.undo_pending",
            [t] => {
                body["undo_token"] = t.clone().into();
                "threat.undo_run"
            }
            _ => {
                return Err(UsageError::Takes {
                    verb: "undo",
                    form: "at most one token",
                })
            }
        },
        _ => return Err(unknown(a)),
    };
    Ok(Request {
        command,
        body,
        timeout: Duration::from_secs(60),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<(&'static str, Value), UsageError> {
        let a = crate::cli::args::parse(
            &crate::cli::defs::THREAT,
            args.iter().map(std::ffi::OsString::from).collect(),
        )?;
        request(&a).map(|r| (r.command, r.body))
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
        assert!(p(&["lookup"])
            .unwrap_err()
            .to_string()
            .contains("needs an IP"));
        assert!(p(&["block"])
            .unwrap_err()
            .to_string()
            .contains("at least one"));
        assert!(p(&["clear", "1.2.3.4", "--permanent"])
            .unwrap_err()
            .to_string()
            .contains("--permanent does not apply"));
        assert!(p(&["whitelist", "1.2.3.4", "--hours", "200"])
            .unwrap_err()
            .to_string()
            .contains("1 to 168"));
        assert!(p(&["whitelist", "1.2.3.4", "5.6.7.8", "--hours", "2"]).is_err());
        assert!(p(&["stats", "x"])
            .unwrap_err()
            .to_string()
            .contains("takes no argument"));
        assert!(p(&["nope"])
            .unwrap_err()
            .to_string()
            .contains("unknown command"));
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
