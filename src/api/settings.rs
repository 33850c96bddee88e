//! Settings routes (admin; writes need CSRF for browser callers and are audited):
//! - `GET /api/v1/settings`: `{sections, restart_required}`.
//! - `GET /api/v1/settings/<section>`: `{section, items, restart_required}`, each item a
//!   [`crate::config::dropins::Setting`] (secrets show only whether they are set).
//! - `POST /api/v1/settings/<section>`: the keys to change as a flat object; validated
//!   first (400 with `errors: [{field, message}]`, nothing written), written as the
//!   section's drop-in in `conf.d/`, then applied by a reload; `restart_required` names the
//!   changed keys a restart applies.
//! - `POST /api/v1/settings/restart`: 202, then the daemon re-executes itself.
//!
//! The firewall section keeps its rollback-timer routes (`/api/v1/settings/firewall/*`).

use serde_json::{json, Value};

use crate::config::dropins::{self, SettingsError};
use crate::http::{Request, Response};

use super::auth::Caller;
use super::App;

fn section(req: &Request) -> &str {
    req.path
        .strip_prefix("/api/v1/settings/")
        .unwrap_or_default()
}

/// The main configuration file; `None` for the embedded `--dev` configuration.
fn main_file(app: &App) -> Option<std::path::PathBuf> {
    app.services.config.current().sources.first().cloned()
}

/// `GET /api/v1/settings`.
pub fn list(app: &App, _req: &Request, _c: &Caller) -> Response {
    Response::json(
        200,
        &json!({
            "sections": dropins::sections(),
            "restart_required": app.services.config.restart_required(),
        }),
    )
}

fn no_file() -> Response {
    Response::error(
        409,
        "the daemon runs on the embedded --dev configuration: there is no file to change",
    )
}

/// `GET /api/v1/settings/<section>`.
pub fn get(app: &App, req: &Request, _c: &Caller) -> Response {
    let Some(main) = main_file(app) else {
        return no_file();
    };
    let name = section(req);
    match dropins::view(&main, name) {
        Ok(items) => Response::json(
            200,
            &json!({
                "section": name,
                "items": items,
                "restart_required": app.services.config.restart_required(),
            }),
        ),
        Err(e) => refused(&e),
    }
}

fn refused(e: &SettingsError) -> Response {
    match e {
        SettingsError::UnknownSection(_) => Response::error(404, &e.to_string()),
        SettingsError::Invalid(errors) => {
            Response::json(400, &json!({ "error": e.to_string(), "errors": errors }))
        }
        SettingsError::Broken(_) => Response::error(409, &e.to_string()),
        SettingsError::Io(_) => Response::error(500, &e.to_string()),
    }
}

/// `POST /api/v1/settings/<section>`.
pub fn set(app: &App, req: &Request, _c: &Caller) -> Response {
    let Some(main) = main_file(app) else {
        return no_file();
    };
    let body = match app.json_body(req) {
        Ok(Value::Object(m)) => m,
        Ok(_) => return Response::error(400, "the body must be a JSON object of settings"),
        Err(r) => return r,
    };
    let name = section(req);
    // Held across read-edit-write and the reload, so concurrent saves keep every key.
    let _writing = dropins::write_lock();
    let starts = |cfg: &crate::config::Config| {
        crate::http::startcheck::check(cfg)
            .into_iter()
            .map(|u| (u.key.to_string(), u.message))
            .collect()
    };
    let (written, restart) = match dropins::apply(&main, name, &body, &starts) {
        Ok(r) => r,
        Err(e) => return refused(&e),
    };
    let reload = app
        .control
        .get()
        .map(|c| (c.reload)())
        .unwrap_or_else(|| json!({ "ok": false, "error": "the reloader is not running yet" }));
    let applied = reload["ok"] == true;
    Response::json(
        200,
        &json!({
            "ok": true,
            "section": name,
            "written": written.display().to_string(),
            "applied": applied,
            "restart_required": restart,
            "reload": reload,
        }),
    )
}

/// `POST /api/v1/settings/restart`: 202; the restart begins once the answer is on its way.
pub fn restart(app: &App, _req: &Request, _c: &Caller) -> Response {
    let Some(control) = app.control.get() else {
        return Response::error(503, "the daemon is still starting");
    };
    // The configuration on disk is what the re-executed process reads: refuse a restart
    // into one that would not start.
    if let Some(main) = main_file(app) {
        let reasons: Vec<String> = match crate::config::load(&main) {
            Ok(cfg) => crate::http::startcheck::check(&cfg)
                .into_iter()
                .map(|u| format!("{}: {}", u.key, u.message))
                .collect(),
            Err(errs) => errs.iter().map(ToString::to_string).collect(),
        };
        if !reasons.is_empty() {
            return Response::json(
                409,
                &json!({
                    "error": format!(
                        "the configuration on disk would not start; not restarting: {}",
                        reasons.join("; ")
                    ),
                    "reasons": reasons,
                }),
            );
        }
    }
    (control.restart)();
    Response::json(
        202,
        &json!({ "ok": true, "restarting": true, "started_at_token": app.runtime.started_at_token }),
    )
}
