//! `svc update-bot-ranges` and `svc store reset-bot-verify` (spec "Verified crawlers", rule 3).
//!
//! `update-bot-ranges` fetches every published-range feed itself, writes the on-disk
//! snapshot (`state_path/bot-ranges.json`, atomically) when any feed was usable, and asks a
//! running daemon to apply it without a restart (a stopped daemon reads it at start). Exit 0
//! when every feed was fetched, 1 when one failed (the others are still written) or nothing
//! could be written.
//!
//! `store reset-bot-verify` clears the crawler records and cached results: through the
//! running daemon (memory and store), or in the store directly when the daemon is stopped.

use std::time::Duration;

use serde_json::{json, Value};

use super::Args;
use crate::config::Config;

pub(super) fn load(flags: &Args, what: &str) -> Result<Config, i32> {
    let loaded = if flags.dev {
        crate::daemon::dev::config()
            .map(|(c, _)| c)
            .map_err(|e| vec![e.to_string()])
    } else {
        crate::config::load(&super::config_path(flags))
            .map_err(|errs| errs.iter().map(|e| e.to_string()).collect())
    };
    loaded.map_err(|errs| {
        eprintln!("{what}: invalid configuration:\n{}", errs.join("\n"));
        1
    })
}

pub fn update_bot_ranges(flags: &Args) -> i32 {
    let what = "svc update-bot-ranges";
    let cfg = match load(flags, what) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let roots = match crate::net::https::Roots::load(cfg.reputation.ca_file.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{what}: {e}");
            return 1;
        }
    };
    let now = jiff::Timestamp::now().to_string();
    let (set, r) = match crate::crawler::updater::refresh_to_disk(
        &cfg.state_path,
        &cfg.crawler.bot_ranges,
        &roots,
        Duration::from_secs(cfg.reputation.timeout_seconds),
        &now,
    ) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{what}: cannot write the snapshot: {e}");
            return 1;
        }
    };
    let sock = cfg.socket_path();
    let applied = super::control::request(
        &sock,
        "bot_ranges.apply",
        json!({ "refresh_ok": r.ok() }),
        Duration::from_secs(10),
    );
    let daemon = match &applied {
        Ok(v) if v.get("error").is_none() => "applied by the running daemon".to_string(),
        Ok(v) => format!(
            "the daemon could not apply it: {}",
            v["error"].as_str().unwrap_or("unknown error")
        ),
        Err(e) if e.is_not_running() => {
            "the daemon is not running; it reads the snapshot at start".to_string()
        }
        Err(e) => format!("the daemon was not reached: {e}"),
    };
    if flags.json {
        let failed: Vec<Value> = r
            .failed
            .iter()
            .map(|(n, e)| json!({ "crawler": n, "error": e }))
            .collect();
        super::out(&format!(
            "{}\n",
            json!({
                "updated": r.updated,
                "failed": failed,
                "refused_ranges": r.refused,
                "prefixes": set.counts(),
                "daemon": daemon,
            })
        ));
    } else {
        let mut text = String::new();
        for (name, n) in set.counts() {
            let src = if r.updated.contains(&name) {
                "fetched"
            } else {
                "kept"
            };
            text.push_str(&format!("{name:<16} {n:>6} prefixes ({src})\n"));
        }
        for (name, e) in &r.failed {
            text.push_str(&format!(
                "{name}: feed failed: {e}; the previous list stays\n"
            ));
        }
        if r.refused > 0 {
            text.push_str(&format!("{} range(s) refused by the guards\n", r.refused));
        }
        if r.updated.is_empty() {
            text.push_str("no feed was usable; the snapshot was not changed\n");
        } else {
            text.push_str(&format!(
                "wrote {}; {daemon}\n",
                crate::crawler::ranges::snapshot_path(&cfg.state_path).display()
            ));
        }
        super::out(&text);
    }
    if r.ok() && !r.updated.is_empty() {
        0
    } else {
        1
    }
}

pub fn store(flags: &Args) -> i32 {
    match flags.words.first().map(String::as_str) {
        Some("reset-bot-verify") if flags.words.len() > 1 => {
            eprintln!("svc store: reset-bot-verify takes no argument");
            2
        }
        Some("reset-bot-verify") => reset_bot_verify(flags),
        Some(other) => {
            eprintln!("svc store: unknown action {other:?} (reset-bot-verify)");
            2
        }
        None => {
            eprintln!("svc store: an action is needed: reset-bot-verify");
            2
        }
    }
}

fn reset_bot_verify(flags: &Args) -> i32 {
    let what = "svc store reset-bot-verify";
    let cfg = match load(flags, what) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let answer = super::control::request(
        &cfg.socket_path(),
        "bot_verify.reset",
        json!({}),
        Duration::from_secs(30),
    );
    let removed = match answer {
        Ok(v) => match v.get("error").and_then(Value::as_str) {
            Some(e) => {
                eprintln!("{what}: {e}");
                return 1;
            }
            None => v["removed"].as_u64().unwrap_or(0),
        },
        Err(e) if e.is_not_running() => {
            let db = cfg.state_path.join("svc.db");
            let cleared = crate::store::Store::open(&db).and_then(|s| {
                let r = s.write(crate::store::crawler::clear);
                s.close();
                r
            });
            match cleared {
                Ok(n) => n as u64,
                Err(e) => {
                    eprintln!("{what}: {}: {e}", db.display());
                    return 1;
                }
            }
        }
        Err(e) => {
            eprintln!("{what}: {e}");
            return 1;
        }
    };
    if flags.json {
        super::out(&format!("{}\n", json!({ "ok": true, "removed": removed })));
    } else {
        super::out(&format!(
            "cleared {removed} crawler verification record(s)\n"
        ));
    }
    0
}
