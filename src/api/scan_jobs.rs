//! Scan-job routes: `GET /api/v1/scan-jobs` (read; the newest [`LIST_LIMIT`] jobs),
//! `POST /api/v1/scan-jobs` (admin; `{"kind": "critical"|"deep"|"full"}`, 202 with `{ok,
//! id, state}`, a full queue 429 with `Retry-After`), `GET /api/v1/scan-jobs/<id>` (read)
//! and `POST /api/v1/scan-jobs/<id>/cancel` (admin). The jobs themselves are
//! [`crate::checks::jobs`]; `svc check` queues the same jobs over the control socket.

use serde::Serialize;
use serde_json::{json, Value};

use crate::checks::jobs::{AccountScope, CancelError, JobKind, RequestError};
use crate::http::{Request, Response};
use crate::store::scan_jobs::JobRow;

use super::auth::Caller;
use super::data::store_failed;
use super::App;

/// Jobs `GET /api/v1/scan-jobs` lists at most (newest first).
pub const LIST_LIMIT: usize = 100;
/// Seconds a caller refused by a full queue is told to wait.
pub const RETRY_AFTER_SECS: u32 = 30;

/// A job as the API shows it; times follow the instant rule.
#[derive(Serialize)]
struct JobView {
    id: i64,
    kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    account: Option<String>,
    state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    requested_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    finished_at: Option<String>,
    findings: i64,
}

fn instant(micros: i64) -> String {
    jiff::Timestamp::from_microsecond(micros)
        .map(crate::timefmt::rfc3339)
        .unwrap_or_default()
}

impl From<JobRow> for JobView {
    fn from(r: JobRow) -> JobView {
        let (kind, account) = match r.kind.strip_prefix("account:") {
            Some(a) => ("account".to_string(), Some(a.to_string())),
            None => (r.kind, None),
        };
        JobView {
            id: r.id,
            kind,
            account,
            state: r.state,
            reason: r.reason,
            requested_at: instant(r.requested),
            started_at: r.started.map(instant),
            finished_at: r.finished.map(instant),
            findings: r.findings,
        }
    }
}

/// `GET /api/v1/scan-jobs`: `{items, total, truncated}`, newest first.
pub fn list(app: &App, _req: &Request, _c: &Caller) -> Response {
    let read = app.store.read(|c| {
        Ok((
            crate::store::scan_jobs::recent(c, LIST_LIMIT)?,
            crate::store::scan_jobs::count(c)?,
        ))
    });
    match read {
        Ok((rows, total)) => {
            let items: Vec<JobView> = rows.into_iter().map(JobView::from).collect();
            let truncated = (items.len() as i64) < total;
            Response::json(
                200,
                &json!({ "items": items, "total": total, "truncated": truncated }),
            )
        }
        Err(e) => store_failed(e),
    }
}

/// The job id of `/api/v1/scan-jobs/<id>[/cancel]`: a canonical positive number.
fn job_id(req: &Request) -> Result<i64, Response> {
    let seg = req
        .path
        .strip_prefix("/api/v1/scan-jobs/")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or("");
    match super::params::parse_uint(seg) {
        Ok(n) if n > 0 && n <= i64::MAX as u64 => Ok(n as i64),
        _ => Err(Response::error(
            400,
            &format!(
                "invalid scan job id {:?}: a positive number",
                crate::text::for_log(seg, 40)
            ),
        )),
    }
}

/// `GET /api/v1/scan-jobs/<id>`.
pub fn get(app: &App, req: &Request, _c: &Caller) -> Response {
    let id = match job_id(req) {
        Ok(id) => id,
        Err(r) => return r,
    };
    match app.store.read(move |c| crate::store::scan_jobs::get(c, id)) {
        Ok(Some(row)) => Response::json(200, &JobView::from(row)),
        Ok(None) => Response::error(404, &format!("no scan job {id}")),
        Err(e) => store_failed(e),
    }
}

/// `POST /api/v1/scan-jobs`: queues a job; 202 once it is recorded and queued.
pub fn create(app: &App, req: &Request, _c: &Caller) -> Response {
    let body = match app.json_body(req) {
        Ok(v) => v,
        Err(r) => return r,
    };
    if let Some(account) = body.get("account") {
        // `{"kind": "critical", "account": NAME}` is neither scan: refused, not guessed.
        if body.get("kind").is_some() {
            return Response::error(
                400,
                "give either kind (critical, deep or full) or account, not both",
            );
        }
        return create_account(app, account);
    }
    let kind = match body.get("kind").map(Value::as_str) {
        Some(Some(k)) => match JobKind::parse(k) {
            Some(kind) => kind,
            None => {
                return Response::error(
                    400,
                    &format!(
                        "unknown scan kind {:?}: critical, deep or full",
                        crate::text::for_log(k, 40)
                    ),
                )
            }
        },
        Some(None) => return Response::error(400, "kind must be a string"),
        None => return Response::error(400, "the body needs kind (critical, deep or full)"),
    };
    queued(app.services.jobs.submit_job(kind))
}

fn queued(r: Result<i64, RequestError>) -> Response {
    match r {
        Ok(id) => Response::json(202, &json!({ "ok": true, "id": id, "state": "queued" })),
        Err(RequestError::QueueFull) => Response::error(429, &RequestError::QueueFull.to_string())
            .with_header("Retry-After", RETRY_AFTER_SECS.to_string()),
        Err(e) => Response::error(503, &e.to_string()),
    }
}

/// `{"account": NAME}`: the web-root checks over that account's web roots; 404 for a
/// user without web roots.
fn create_account(app: &App, account: &Value) -> Response {
    let Some(name) = account.as_str() else {
        return Response::error(400, "account must be a string");
    };
    let ctx = app.services.jobs.context();
    let Some(web_roots) = super::accounts::web_roots_of(ctx, name) else {
        return Response::error(
            404,
            &format!(
                "no account {:?} with a web root",
                crate::text::for_log(name, 64)
            ),
        );
    };
    queued(app.services.jobs.submit_account(AccountScope {
        account: name.to_string(),
        web_roots,
    }))
}

/// `POST /api/v1/scan-jobs/<id>/cancel`: 200 `{ok, id, state: "cancelled", was}`; 404
/// unknown, 409 already ended.
pub fn cancel(app: &App, req: &Request, _c: &Caller) -> Response {
    let id = match job_id(req) {
        Ok(id) => id,
        Err(r) => return r,
    };
    match app.services.jobs.cancel(id) {
        Ok(was) => Response::json(
            200,
            &json!({ "ok": true, "id": id, "state": "cancelled", "was": was }),
        ),
        Err(e @ CancelError::NoSuchJob(_)) => Response::error(404, &e.to_string()),
        Err(e @ CancelError::Finished { .. }) => Response::error(409, &e.to_string()),
        Err(e @ CancelError::Store(_)) => Response::error(503, &e.to_string()),
    }
}
