//! Control-socket commands: one table, dispatched by name.
//!
//! Each command answers one JSON object; an answer with an `error` string is a failure the
//! CLI prints. Unknown names get `unknown command` from the socket server.
//!
//! Subsystem families run their subsystem's own control function with its handle
//! (`firewall::control`, `threat::control`, `mail::control`, `waf::control`,
//! `scan::quarantine::control`); this table records their writes in the action log (actor
//! `cli`, via `control`), as the router does for HTTP routes (decision 305).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};

use super::reload::{Reloader, Trigger};
use crate::api::audit::{AuditLog, Entry};
use crate::api::App;
use crate::clock::SharedClock;
use crate::store::Store;

/// What a command can reach. The subsystem families (`firewall.*`, `threat.*`, `waf.*`,
/// `mail.*`, `quarantine.*`, crawler ranges) get only their own handles, taken from the
/// [`App`] once at start; the daemon-wide views (`status`, `doctor`, `check`,
/// `bench.inject`) read the whole `App`, as their HTTP twins do.
pub struct Ctx {
    pub app: Arc<App>,
    pub reloader: Arc<Reloader>,
    pub collectors: Arc<super::collectors::LiveCollectors>,
    pub firewall: crate::firewall::Handle,
    pub threat: Arc<crate::threat::Threat>,
    pub waf: Arc<crate::waf::service::WafService>,
    pub mail: Arc<crate::mail::MailAv>,
    pub crawler: Arc<crate::crawler::Verifier>,
    pub store: Store,
    pub clock: SharedClock,
    /// Writes that come over the socket are recorded with actor `cli`, via `control`.
    pub audit: Arc<AuditLog>,
    pub state_path: PathBuf,
}

impl Ctx {
    pub fn new(
        app: Arc<App>,
        reloader: Arc<Reloader>,
        collectors: Arc<super::collectors::LiveCollectors>,
    ) -> Ctx {
        let s = &app.services;
        Ctx {
            firewall: s.firewall.clone(),
            threat: s.threat.clone(),
            waf: s.waf.clone(),
            mail: s.mail.clone(),
            crawler: s.crawler.clone(),
            store: app.store.clone(),
            clock: app.clock.clone(),
            audit: app.audit.clone(),
            state_path: app.cfg.state_path.clone(),
            app,
            reloader,
            collectors,
        }
    }

    /// Records a write the CLI made: `status` is the answer's HTTP status.
    fn audit(&self, action: &str, target: &str, status: u16) {
        let outcome = match status {
            200..=299 => "ok",
            404 => "not_found",
            400 | 409 => "refused",
            _ => "error",
        };
        self.audit.record(Entry {
            at: self.clock.now(),
            actor: "cli",
            via: "control",
            action,
            target: &crate::text::cut(target, 64),
            outcome,
            remote_ip: "",
        });
    }
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
        run: quarantine,
    },
    Command {
        name: "quarantine.restore",
        summary: "restore one quarantined file exactly",
        run: quarantine,
    },
    Command {
        name: "firewall.*",
        summary: "svc firewall: status, list, check, block, allow, subnets, flush, rollback",
        run: firewall,
    },
    Command {
        name: "mail.*",
        summary: "svc mail: status, stats, list, release, delete",
        run: mail,
    },
    Command {
        name: "waf.*",
        summary: "svc waf: stats, rules, escalation, apply",
        run: |c, name, args| crate::waf::control::cli(&c.waf, &c.store, &c.clock, name, args),
    },
    Command {
        name: "fleet.status",
        summary: "svc fleet status: the LAPI link, decisions and alerts",
        run: |c, _, _| match &c.app.services.fleet {
            Some(f) => f.status(),
            None => json!({ "enabled": false }),
        },
    },
    Command {
        name: "threat.*",
        summary: "svc threat: lookup, block, whitelist, clear, stats, undo",
        run: threat,
    },
    Command {
        name: "bot_ranges.apply",
        summary: "svc update-bot-ranges: re-read the on-disk range snapshot and apply it",
        run: |c, _, args| {
            let ok = args.get("refresh_ok").and_then(Value::as_bool);
            match c.crawler.apply_snapshot(&c.state_path, ok) {
                Ok(n) => json!({ "ok": true, "prefixes": n }),
                Err(e) => json!({ "error": e.to_string() }),
            }
        },
    },
    Command {
        name: "bot_verify.reset",
        summary: "svc store reset-bot-verify: clear crawler records and cached results",
        run: |c, _, _| match c.crawler.reset() {
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

fn quarantine(c: &Ctx, name: &str, args: &Value) -> Value {
    let Some(quarantine) = c.collectors.quarantine_control() else {
        return json!({ "error": "the file watcher is restarting (configuration reload); try again" });
    };
    crate::scan::quarantine::control::command(&quarantine, name, args)
        .unwrap_or_else(|| json!({ "error": format!("unknown command {name:?}") }))
}

/// `firewall.<cmd>`: writes are audited with the `ip` or `subnet` they name.
fn firewall(c: &Ctx, name: &str, args: &Value) -> Value {
    use crate::firewall::control;
    let cmd = name.strip_prefix("firewall.").unwrap_or(name);
    let reply = control::cli(&c.firewall, cmd, args);
    if control::writes(cmd) {
        c.audit(name, control::audit_target(args), reply.status);
    }
    reply.into_control()
}

/// `threat.<cmd>`: writes are audited with the address or how many addresses they name.
fn threat(c: &Ctx, name: &str, args: &Value) -> Value {
    use crate::threat::control;
    let cmd = name.strip_prefix("threat.").unwrap_or(name);
    let reply = control::cli(&c.threat, cmd, args);
    if control::writes(cmd) {
        c.audit(name, &control::audit_target(args), reply.status);
    }
    reply.into_control()
}

/// `mail.<cmd>`: releases and deletes are audited with the entry id.
fn mail(c: &Ctx, name: &str, args: &Value) -> Value {
    use crate::mail::control;
    let (status, answer) = control::cli(&c.mail, name, args);
    if let Some(action) = control::audit_action(name) {
        let id = args.get("id").and_then(Value::as_str).unwrap_or("");
        c.audit(action, id, status);
    }
    answer
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
