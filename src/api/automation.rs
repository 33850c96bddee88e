//! `automation` in `/api/v1/status`: the rollout state of each automatic response, which
//! run in dry run, which enforce, which are off, and since when.
//!
//! `since` is when this daemon first saw the response in its present mode (at a status
//! read, after a start or reload), kept in the store's `kv` so it survives restarts: a
//! mode that did not change keeps its instant.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::App;

const KV_KEY: &str = "automation.rollout";

type Modes = BTreeMap<String, (String, String)>;

/// The modes last recorded, read from the store once (status reads never wait on it again).
#[derive(Default)]
pub struct Tracker {
    seen: parking_lot::Mutex<Option<Modes>>,
}

/// One automatic response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rollout {
    pub name: String,
    /// `enforce`, `dry_run` or `off`.
    pub mode: String,
    /// RFC 3339 instant the mode was first seen.
    pub since: String,
    /// The configuration keys that set it.
    pub keys: Vec<String>,
}

/// (name, mode, keys) of every automatic response under the configuration in effect.
fn modes(app: &App) -> Vec<(&'static str, &'static str, &'static [&'static str])> {
    let cur = app.services.config.current();
    // `auto_response.dry_run` is read at start.
    let dry = app.services.config.started().engine.auto_dry_run;
    let blocking = |on: bool| match (on, dry) {
        (false, _) => "off",
        (true, true) => "dry_run",
        (true, false) => "enforce",
    };
    let on = |b: bool| if b { "enforce" } else { "off" };
    vec![
        (
            "quarantine",
            on(cur.engine.auto_quarantine),
            &["auto_response.quarantine"],
        ),
        (
            "threat_block",
            blocking(cur.threat.auto_block),
            &["auto_response.block", "auto_response.dry_run"],
        ),
        (
            "waf_escalation",
            blocking(true),
            &["auto_response.dry_run", "waf.escalation_denies"],
        ),
        (
            "http_scanner",
            if cur.threat.http_scanner_action == "challenge" && app.services.challenge.is_some() {
                "enforce"
            } else {
                blocking(cur.threat.auto_block)
            },
            &["auto_response.http_scanner_action", "auto_response.dry_run"],
        ),
        (
            "challenge",
            on(app.services.challenge.is_some()),
            &["challenge.enabled"],
        ),
    ]
}

/// The rollout state now; records a mode not seen before.
pub fn rollout(app: &App) -> Vec<Rollout> {
    let mut seen = app.automation.seen.lock();
    let stored: &Modes = seen.get_or_insert_with(|| {
        app.store
            .read(|c| crate::store::kv::get(c, KV_KEY))
            .ok()
            .flatten()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    });
    let now = crate::timefmt::rfc3339(app.clock.now());
    let mut next = BTreeMap::new();
    let mut out = Vec::new();
    for (name, mode, keys) in modes(app) {
        let since = match stored.get(name) {
            Some((m, since)) if m == mode => since.clone(),
            _ => now.clone(),
        };
        next.insert(name.to_string(), (mode.to_string(), since.clone()));
        out.push(Rollout {
            name: name.to_string(),
            mode: mode.to_string(),
            since,
            keys: keys.iter().map(|k| k.to_string()).collect(),
        });
    }
    if &next != stored {
        if let Ok(text) = serde_json::to_string(&next) {
            let _ = app
                .store
                .write_detached(move |c| crate::store::kv::set(c, KV_KEY, &text));
        }
        *seen = Some(next);
    }
    out
}
