//! `svc doctor`: named checks over config, store, TLS, collectors and every queue row.
//!
//! Each check has a `status` of `ok`, `warning`, `degraded` or `fail`; the command exits
//! non-zero when any check is `degraded` or `fail`. Reads memory and a few file metadata.

use std::os::unix::fs::PermissionsExt;

use serde_json::{json, Value};

use crate::api::App;
use crate::queue::{LagBasis, Status};

fn check(name: &str, status: &str, detail: impl Into<String>) -> Value {
    json!({ "name": name, "status": status, "detail": detail.into() })
}

/// The doctor report of a running daemon.
pub fn report(app: &App) -> Value {
    let mut checks = Vec::new();
    // Restart-only keys (TLS paths) come from the start-up configuration.
    let cfg = &app.cfg;
    let live = app.services.config.current();
    let pending = app.services.config.restart_required();
    let (accepted, refused) = app.services.config.counts();
    let mut detail = format!(
        "{} file(s), hash {}, {accepted} reload(s) applied, {refused} refused",
        live.sources.len().max(1),
        &live.hash[..12.min(live.hash.len())]
    );
    if !pending.is_empty() {
        detail.push_str(&format!(
            "; restart needed for {} (changed since start)",
            pending.join(", ")
        ));
    }
    checks.push(check(
        "config",
        if pending.is_empty() { "ok" } else { "warning" },
        detail,
    ));
    let store = app.store.health();
    checks.push(check(
        "store",
        if store.ok { "ok" } else { "degraded" },
        format!(
            "{} ({} writes, {} failed, {} refused)",
            store.path, store.writes_ok, store.writes_failed, store.writes_refused
        ),
    ));
    let (cert, key) = if cfg.webui.tls_cert.is_empty() {
        crate::http::tls::generated_paths(&cfg.state_path)
    } else {
        (
            cfg.webui.tls_cert.clone().into(),
            cfg.webui.tls_key.clone().into(),
        )
    };
    let tls = match (std::fs::metadata(&cert), std::fs::metadata(&key)) {
        (Ok(_), Ok(k)) if k.permissions().mode() & 0o077 == 0 => {
            check("tls", "ok", format!("{}", cert.display()))
        }
        (Ok(_), Ok(_)) => check(
            "tls",
            "warning",
            format!("{} is readable by group or others", key.display()),
        ),
        _ => check(
            "tls",
            "fail",
            format!("{} or {} is missing", cert.display(), key.display()),
        ),
    };
    checks.push(tls);
    if let Some(ch) = &app.services.challenge {
        let (status, detail) =
            crate::challenge::webserver::doctor(&ch.settings().cfg, app.clock.now().as_second());
        checks.push(check("webserver_integration", status, detail));
    }
    checks.push(match &app.services.firewall {
        crate::firewall::Handle::Active(f) => {
            let s = f.status();
            let present = s["table_present"].as_bool().unwrap_or(false);
            check(
                "firewall",
                if present { "ok" } else { "warning" },
                format!(
                    "table inet svc {}, mode {}, {} blocks, {} allowed{}",
                    if present {
                        "present"
                    } else {
                        "missing (re-creating)"
                    },
                    s["mode"].as_str().unwrap_or("?"),
                    f.blocked_count(),
                    s["allows"],
                    s["last_error"]
                        .as_str()
                        .map(|e| format!(", last error: {e}"))
                        .unwrap_or_default()
                ),
            )
        }
        crate::firewall::Handle::Absent(reason) => check(
            "firewall",
            if app.cfg.firewall.enabled {
                "warning"
            } else {
                "ok"
            },
            format!("engine absent: {reason}"),
        ),
    });
    for c in app.services.components.rows() {
        let name = format!("collector:{}", c.name);
        // A kernel probe left out of the build is reported, not a fault.
        let not_built =
            c.kind == crate::probes::COMPONENT_KIND && c.detail == crate::probes::NOT_BUILT;
        checks.push(check(
            &name,
            if c.attached || not_built {
                "ok"
            } else {
                "warning"
            },
            c.detail,
        ));
    }
    for (name, row) in app.services.registry.snapshot() {
        let status = match row.status {
            Status::Ok => "ok",
            Status::Warning => "warning",
            Status::Degraded => "degraded",
        };
        let mut conds: Vec<String> = row.conditions.iter().map(|c| format!("{c:?}")).collect();
        if row.lag_basis == LagBasis::ObservedAge && row.lag_seconds.unwrap_or(0.0) > 0.0 {
            conds.push("observed_lag".into());
        }
        let detail = format!(
            "waiting {} running {} dropped {} (last minute {}) lag {}s{}",
            row.waiting
                .map(|w| w.to_string())
                .unwrap_or_else(|| "unknown".into()),
            row.running,
            row.dropped_total,
            row.dropped_last_minute,
            row.lag_seconds
                .map(|l| format!("{l:.1}"))
                .unwrap_or_else(|| "?".into()),
            if conds.is_empty() {
                String::new()
            } else {
                format!(" conditions {}", conds.join(","))
            }
        );
        checks.push(json!({ "name": format!("queue:{name}"), "status": status, "detail": detail, "row": row }));
    }
    let failing = checks
        .iter()
        .any(|c| matches!(c["status"].as_str(), Some("degraded" | "fail")));
    json!({ "ok": !failing, "checks": checks })
}
