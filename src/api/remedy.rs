//! Remediation routes (issue 27; admin, CSRF for browser callers, audited):
//! - `POST /api/v1/fix` `{"id"}`: applies the finding's fix ([`crate::remedy`]) and resolves
//!   it; 404 unknown id, 400 malformed id or no fix, 409 the file changed since detection.
//! - `POST /api/v1/fix-bulk` `{"ids": [...]}`: each id as above; empty list 400; 200 when
//!   at least one was fixed, listing `failures`; nothing fixed: the first failure's status.
//! - `POST /api/v1/dismiss` `{"id"}`: resolves the finding without touching the host (it
//!   comes back when detected again).
//! - `POST /api/v1/verify-finding` `{"id"}`: re-checks the condition now; resolves the
//!   finding when it no longer holds.
//! - `POST /api/v1/quarantine-restore` `{"id"}`: puts a quarantined file back.
//! - `POST /api/v1/quarantine/bulk-delete` `{"ids": [...]}`: deletes quarantined copies.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::findings::Finding;
use crate::http::{Request, Response};
use crate::model::finding::is_finding_id;
use crate::remedy::FixError;

use super::auth::Caller;
use super::data::tri;
use super::App;

/// Ids one bulk request may name at most.
pub const MAX_BULK_IDS: usize = 10_000;

fn body_id(app: &App, req: &Request) -> Result<String, Response> {
    let v = app.json_body(req)?;
    match v.get("id") {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(Response::error(400, "id must be a string")),
        None => Err(Response::error(400, "the body needs id")),
    }
}

fn body_ids(app: &App, req: &Request) -> Result<Vec<String>, Response> {
    let v = app.json_body(req)?;
    let Some(list) = v.get("ids").and_then(Value::as_array) else {
        return Err(Response::error(
            400,
            "the body needs ids, a list of strings",
        ));
    };
    if list.is_empty() {
        return Err(Response::error(400, "ids is empty: nothing to do"));
    }
    if list.len() > MAX_BULK_IDS {
        return Err(Response::error(
            400,
            &format!("at most {MAX_BULK_IDS} ids per request"),
        ));
    }
    list.iter()
        .map(|v| {
            v.as_str()
                .map(String::from)
                .ok_or_else(|| Response::error(400, "ids must be strings"))
        })
        .collect()
}

/// A finding id's refusal: 400 when malformed (a path or traversal is never looked up).
fn check_id(id: &str) -> Result<(), (u16, String)> {
    if is_finding_id(id) {
        Ok(())
    } else {
        Err((
            400,
            format!(
                "invalid finding id {:?}: 16 lower-case hex digits",
                crate::text::for_log(id, 40)
            ),
        ))
    }
}

/// The active findings by id.
fn by_id(app: &App) -> HashMap<String, Arc<Finding>> {
    let listing = app.services.engine.listing();
    listing
        .items()
        .iter()
        .map(|f| (f.id(), f.clone()))
        .collect()
}

/// The active finding `id`, or the refusal.
fn lookup(app: &App, id: &str) -> Result<Arc<Finding>, (u16, String)> {
    check_id(id)?;
    let listing = app.services.engine.listing();
    let snap = app.services.engine.snapshot();
    listing
        .items()
        .iter()
        .find(|f| f.id() == id && snap.get(&f.check, &f.message).is_some())
        .cloned()
        .ok_or_else(|| (404, format!("no active finding {id}")))
}

/// Resolves fixed findings; a failure is logged (the host was changed either way, and the
/// next scan resolves them).
fn resolve(app: &App, found: &[&Finding]) -> bool {
    let keys = found
        .iter()
        .map(|f| (f.check.clone(), f.message.clone()))
        .collect();
    match app.services.engine.resolve(keys) {
        Ok(_) => true,
        Err(e) => {
            log::warn!("fixed findings not resolved: {e}");
            false
        }
    }
}

fn refusal((status, message): (u16, String)) -> Response {
    Response::error(status, &message)
}

fn fix_refusal(e: &FixError) -> (u16, String) {
    (e.status(), e.to_string())
}

/// The answer to a fix that was refused: `error`, and `reason` when the file is not the
/// site's alone (`hard_linked`, `foreign_owner`).
fn fix_refused(e: &FixError) -> Response {
    match e.reason() {
        Some(reason) => Response::json(
            e.status(),
            &json!({ "error": e.to_string(), "reason": reason }),
        ),
        None => refusal(fix_refusal(e)),
    }
}

/// `POST /api/v1/fix`.
pub fn fix(app: &App, req: &Request, _c: &Caller) -> Response {
    let id = tri!(body_id(app, req));
    let f = match lookup(app, &id) {
        Ok(f) => f,
        Err(r) => return refusal(r),
    };
    fix_one(app, &id, &f)
}

/// Applies the fix of `f` and resolves it.
fn fix_one(app: &App, id: &str, f: &Finding) -> Response {
    match app.services.fixer.apply(f) {
        Ok(done) => {
            let resolved = resolve(app, &[f]);
            Response::json(
                200,
                &json!({ "ok": true, "id": id, "check": f.check, "fixed": done, "resolved": resolved }),
            )
        }
        Err(e) => fix_refused(&e),
    }
}

/// A performance fix route: `{"id"}` of a finding of `check` only (another kind 400).
fn perf_fix(app: &App, req: &Request, check: &str) -> Response {
    let id = tri!(body_id(app, req));
    let f = match lookup(app, &id) {
        Ok(f) => f,
        Err(r) => return refusal(r),
    };
    if f.check != check {
        return Response::error(
            400,
            &format!(
                "this route fixes {check} findings only; {id} is a {} finding",
                crate::text::escape_controls(&f.check)
            ),
        );
    }
    fix_one(app, &id, &f)
}

/// `POST /api/v1/perf/fix-error-log`.
pub fn fix_error_log(app: &App, req: &Request, _c: &Caller) -> Response {
    perf_fix(app, req, crate::checks::perf::ERROR_LOG_CHECK)
}

/// `POST /api/v1/perf/fix-display-errors`.
pub fn fix_display_errors(app: &App, req: &Request, _c: &Caller) -> Response {
    perf_fix(app, req, crate::checks::perf::DISPLAY_ERRORS_CHECK)
}

/// `POST /api/v1/perf/fix-cms-cron`.
pub fn fix_cms_cron(app: &App, req: &Request, _c: &Caller) -> Response {
    perf_fix(app, req, crate::checks::perf::CMS_CRON_CHECK)
}

/// `POST /api/v1/fix-bulk`.
pub fn fix_bulk(app: &App, req: &Request, _c: &Caller) -> Response {
    let ids = tri!(body_ids(app, req));
    let active = by_id(app);
    let mut fixed = Vec::new();
    let mut done_findings: Vec<Arc<Finding>> = Vec::new();
    let mut failures = Vec::new();
    let mut first_status = None;
    for id in &ids {
        let outcome = check_id(id)
            .and_then(|()| {
                active
                    .get(id)
                    .cloned()
                    .ok_or_else(|| (404, format!("no active finding {id}")))
            })
            .map_err(|e| (e, None))
            .and_then(|f| {
                app.services
                    .fixer
                    .apply(&f)
                    .map(|d| (f, d))
                    .map_err(|e| (fix_refusal(&e), e.reason()))
            });
        match outcome {
            Ok((f, d)) => {
                fixed.push(json!({ "id": id, "fixed": d }));
                done_findings.push(f);
            }
            Err(((status, error), reason)) => {
                first_status.get_or_insert(status);
                let mut failure =
                    json!({ "id": crate::text::for_log(id, 40), "status": status, "error": error });
                if let Some(reason) = reason {
                    failure["reason"] = json!(reason);
                }
                failures.push(failure);
            }
        }
    }
    if fixed.is_empty() {
        let status = first_status.unwrap_or(400);
        return Response::json(
            status,
            &json!({ "error": "no finding was fixed", "failures": failures }),
        );
    }
    let refs: Vec<&Finding> = done_findings.iter().map(|f| &**f).collect();
    let resolved = resolve(app, &refs);
    Response::json(
        200,
        &json!({ "ok": true, "fixed": fixed, "failures": failures, "resolved": resolved }),
    )
}

/// `POST /api/v1/dismiss`.
pub fn dismiss(app: &App, req: &Request, _c: &Caller) -> Response {
    let id = tri!(body_id(app, req));
    let f = match lookup(app, &id) {
        Ok(f) => f,
        Err(r) => return refusal(r),
    };
    match app
        .services
        .engine
        .resolve(vec![(f.check.clone(), f.message.clone())])
    {
        Ok(_) => Response::json(200, &json!({ "ok": true, "id": id, "dismissed": true })),
        Err(e) => Response::error(503, &format!("cannot dismiss the finding: {e}")),
    }
}

/// `POST /api/v1/verify-finding`: `{ok, id, holds}`; a finding whose condition no longer
/// holds is resolved (`resolved: true`).
pub fn verify_finding(app: &App, req: &Request, _c: &Caller) -> Response {
    let id = tri!(body_id(app, req));
    let f = match lookup(app, &id) {
        Ok(f) => f,
        Err(r) => return refusal(r),
    };
    let Some(holds) = app.services.fixer.still_holds(&f) else {
        return Response::error(
            400,
            &format!(
                "findings of {} cannot be re-checked on demand (no file to read, or too large); their next scan re-checks them",
                crate::text::escape_controls(&f.check)
            ),
        );
    };
    let resolved = !holds && resolve(app, &[&f]);
    Response::json(
        200,
        &json!({ "ok": true, "id": id, "holds": holds, "resolved": resolved }),
    )
}

/// `POST /api/v1/quarantine-restore` `{"id"}`: the file goes back to its path, owner, mode
/// and times, refused (409) when its directory became a symlink or something is at the
/// path; 404 unknown entry.
pub fn quarantine_restore(app: &App, req: &Request, _c: &Caller) -> Response {
    use crate::scan::quarantine::control::{restore_entry, RestoreError};
    let id = tri!(body_id(app, req));
    let Some(q) = (app.services.quarantine)() else {
        return Response::error(503, &FixError::Unavailable.to_string());
    };
    match restore_entry(&q.store, &q.quarantine, &q.clock, &id, q.restored.as_ref()) {
        Ok(r) => Response::json(
            200,
            &json!({ "ok": true, "id": r.id, "original_path": r.original_path }),
        ),
        Err(e) => {
            let status = match &e {
                RestoreError::NoEntry(_) => 404,
                RestoreError::AlreadyRestored(_) | RestoreError::Failed { .. } => 409,
                RestoreError::Store(_) => 503,
                RestoreError::UnreadableRecord { .. } => 500,
            };
            Response::error(status, &e.to_string())
        }
    }
}

/// `POST /api/v1/quarantine/bulk-delete` `{"ids": [...]}`: deletes each entry and its copy;
/// 200 with `deleted` and `failures` when at least one went, else the first failure's
/// status.
pub fn quarantine_bulk_delete(app: &App, req: &Request, _c: &Caller) -> Response {
    use crate::scan::quarantine::control::{delete_entry, RestoreError};
    let ids = tri!(body_ids(app, req));
    let Some(q) = (app.services.quarantine)() else {
        return Response::error(503, &FixError::Unavailable.to_string());
    };
    let mut deleted = Vec::new();
    let mut failures = Vec::new();
    let mut first_status = None;
    for id in &ids {
        match delete_entry(&q.store, &q.quarantine, id) {
            Ok(()) => deleted.push(id.clone()),
            Err(e) => {
                let status = match &e {
                    RestoreError::NoEntry(_) => 404,
                    RestoreError::Store(_) => 503,
                    _ => 500,
                };
                first_status.get_or_insert(status);
                failures.push(json!({ "id": crate::text::for_log(id, 40), "status": status, "error": e.to_string() }));
            }
        }
    }
    if deleted.is_empty() {
        return Response::json(
            first_status.unwrap_or(400),
            &json!({ "error": "no quarantine entry was deleted", "failures": failures }),
        );
    }
    Response::json(
        200,
        &json!({ "ok": true, "deleted": deleted, "failures": failures }),
    )
}
