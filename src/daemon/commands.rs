//! Control-socket commands: one table, dispatched by name.
//!
//! Each command answers one JSON object; an answer with an `error` string is a failure the
//! CLI prints. Unknown names get `unknown command` from the socket server.

use std::sync::Arc;

use serde_json::{json, Value};

use super::reload::{Reloader, Trigger};
use crate::api::App;

/// What a command can reach.
pub struct Ctx {
    pub app: Arc<App>,
    pub reloader: Arc<Reloader>,
    pub collectors: Arc<super::collectors::LiveCollectors>,
}

/// One control-socket command.
pub struct Command {
    pub name: &'static str,
    /// What it does (for readers of the table; the CLI has its own help).
    pub summary: &'static str,
    /// Called with the context, the command's full name (a family such as `firewall.*`
    /// serves several) and its arguments.
    pub run: fn(&Ctx, &str, &Value) -> Value,
}

/// Every command the daemon answers.
pub static COMMANDS: &[Command] = &[
    Command {
        name: "ping",
        summary: "liveness: {ok: true}",
        run: |_, _, _| json!({ "ok": true }),
    },
    Command {
        name: "status",
        summary: "the status snapshot (GET /api/v1/status)",
        run: |c, _, _| json!({ "snapshot": c.app.status_snapshot() }),
    },
    Command {
        name: "doctor",
        summary: "named health checks",
        run: |c, _, _| super::doctor::report(&c.app),
    },
    Command {
        name: "check",
        summary: "a full scan, answered with its findings",
        run: |c, _, _| super::run_check(&c.app),
    },
    Command {
        name: "reload",
        summary: "re-read and apply the configuration (as SIGHUP does)",
        run: |c, _, _| c.reloader.reload(Trigger::ControlSocket).to_json(),
    },
    Command {
        name: "quarantine.list",
        summary: "quarantined files",
        run: watch_command,
    },
    Command {
        name: "quarantine.restore",
        summary: "restore one quarantined file exactly",
        run: watch_command,
    },
    Command {
        name: "firewall.*",
        summary: "svc firewall: status, list, check, block, allow, subnets, flush, rollback",
        run: |c, name, args| crate::api::firewall_control(&c.app, name, args),
    },
    Command {
        name: "mail.*",
        summary: "svc mail: status, stats, list, release, delete",
        run: |c, name, args| crate::api::mail_control(&c.app, name, args),
    },
    Command {
        name: "waf.*",
        summary: "svc waf: stats, rules, escalation, apply",
        run: |c, name, args| crate::api::waf_control(&c.app, name, args),
    },
    Command {
        name: "threat.*",
        summary: "svc threat: lookup, block, whitelist, clear, stats, undo",
        run: |c, name, args| crate::api::threat_control(&c.app, name, args),
    },
    Command {
        name: "bot_ranges.apply",
        summary: "svc update-bot-ranges: re-read the on-disk range snapshot and apply it",
        run: |c, _, args| {
            let ok = args.get("refresh_ok").and_then(Value::as_bool);
            match c
                .app
                .services
                .crawler
                .apply_snapshot(&c.app.cfg.state_path, ok)
            {
                Ok(n) => json!({ "ok": true, "prefixes": n }),
                Err(e) => json!({ "error": e }),
            }
        },
    },
    Command {
        name: "bot_verify.reset",
        summary: "svc store reset-bot-verify: clear crawler records and cached results",
        run: |c, _, _| match c.app.services.crawler.reset() {
            Ok(n) => json!({ "ok": true, "removed": n }),
            Err(e) => json!({ "error": format!("store: {e}") }),
        },
    },
    #[cfg(feature = "bench")]
    Command {
        name: "bench.inject",
        summary: "synthetic findings for benchmarks (feature bench only)",
        run: |c, _, args| super::bench::inject(&c.app, args),
    },
];

fn watch_command(c: &Ctx, name: &str, args: &Value) -> Value {
    let Some(quarantine) = c.collectors.quarantine_control() else {
        return json!({ "error": "the file watcher is restarting (configuration reload); try again" });
    };
    crate::watch::control_command(&quarantine, name, args)
        .unwrap_or_else(|| json!({ "error": format!("unknown command {name:?}") }))
}

/// Answers `name`; `None` for an unknown command.
pub fn dispatch(ctx: &Ctx, name: &str, args: &Value) -> Option<Value> {
    let command = COMMANDS.iter().find(|c| match c.name.strip_suffix('*') {
        // A family (`firewall.*`): every name with that prefix.
        Some(prefix) => name.starts_with(prefix) && name.len() > prefix.len(),
        None => c.name == name,
    })?;
    Some((command.run)(ctx, name, args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n);
        assert!(names.contains(&"reload"));
    }
}
