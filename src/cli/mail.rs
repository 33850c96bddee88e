//! `svc mail ...`: the mail antivirus over the control socket (status, statistics, the
//! quarantined-mail list, release and delete).
//!
//! Exit codes: 0 done; 1 refused or failed (the reason on standard error: unknown id, the
//! entry in another state, a move that failed, the daemon not running); 2 usage error.

use serde_json::{json, Value};

use super::args::Args;
use super::family::{unknown, Family, Request, UsageError};
use crate::text::escape_controls;

/// `svc mail`: verbs and flags in [`super::defs`].
pub static FAMILY: Family = Family {
    command: &super::defs::MAIL,
    request,
    human,
};

fn request(a: &Args) -> Result<Request, UsageError> {
    let (sub, rest) = (a.verb(), a.rest());
    let cmd = match sub {
        "status" => "mail.status",
        "stats" => "mail.stats",
        "list" => "mail.list",
        "release" => "mail.release",
        "delete" => "mail.delete",
        _ => return Err(unknown(a)),
    };
    match (cmd, rest) {
        ("mail.release" | "mail.delete", [id]) => Ok(Request::new(cmd, json!({ "id": id }))),
        ("mail.release" | "mail.delete", _) => Err(UsageError::TakesOne {
            verb: sub.to_string(),
            what: "quarantine ID",
        }),
        (_, []) => Ok(Request::new(cmd, json!({}))),
        _ => Err(UsageError::TakesNone {
            verb: sub.to_string(),
        }),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn req(words: &[&str]) -> Result<(&'static str, Value), UsageError> {
        let a = crate::cli::args::parse(
            &crate::cli::defs::MAIL,
            words.iter().map(std::ffi::OsString::from).collect(),
        )?;
        request(&a).map(|r| (r.command, r.body))
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
