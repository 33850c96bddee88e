//! Mail antivirus requests as JSON, shared by the HTTP routes (`api/mail.rs`) and the
//! control-socket commands `mail.*` (`svc mail`, from the daemon's command table): the page
//! of the quarantine list, the status of each [`QError`], and the commands themselves.
//!
//! Commands: `mail.status`, `mail.stats`, `mail.list {offset, limit}`, `mail.release {id}`,
//! `mail.delete {id}`. Failures answer `{"error": ..., "status": N, "paths": [...]}`.

use serde_json::{json, Value};

use super::quarantine::QError;
use super::service::MailAv;

/// Largest page of the quarantine list.
pub const MAX_LIMIT: u64 = 500;
/// Page size when none is given.
pub const DEFAULT_LIMIT: u64 = 100;
/// Longest error message in an answer.
const MAX_MESSAGE: usize = 2000;

/// The HTTP status of a quarantine failure: a missing entry 404; the wrong state, the MTA
/// delivering the message or spool names taken 409; the store 503; the file system 500.
pub fn status(e: &QError) -> u16 {
    match e {
        QError::NotFound => 404,
        QError::State(_) | QError::Locked | QError::Conflict(_) => 409,
        QError::Store(_) => 503,
        QError::Missing(_) | QError::Storage { .. } => 500,
    }
}

/// A failure's message, escaped and bounded for an answer.
pub fn message(e: &QError) -> String {
    crate::text::for_log(&e.to_string(), MAX_MESSAGE)
}

/// One page of the quarantine list, newest first, as the list envelope (`items`, `total`,
/// `offset`, `limit`, `truncated`).
pub fn page(mail: &MailAv, offset: u64, limit: u64) -> Result<Value, QError> {
    let (items, total) = mail.list(offset, limit)?;
    let truncated = offset.saturating_add(items.len() as u64) < total;
    Ok(json!({
        "items": items,
        "total": total,
        "offset": offset,
        "limit": limit,
        "truncated": truncated,
    }))
}

/// The audit action of a command that changes state; `None` for reads.
pub fn audit_action(cmd: &str) -> Option<&'static str> {
    match cmd {
        "mail.release" => Some("email.quarantine.release"),
        "mail.delete" => Some("email.quarantine.delete"),
        _ => None,
    }
}

/// Control-socket command `cmd` (`mail.*`), run by root on the host as actor `cli`.
/// Returns the status (200 on success) and the answer; the daemon's command table audits
/// the commands [`audit_action`] names, with the `id` as target.
pub fn cli(mail: &MailAv, cmd: &str, args: &Value) -> (u16, Value) {
    let id = args.get("id").and_then(Value::as_str).unwrap_or("");
    let result = match cmd {
        "mail.status" => return (200, mail.status()),
        "mail.stats" => return (200, mail.stats()),
        "mail.list" => {
            let limit = args
                .get("limit")
                .and_then(Value::as_u64)
                .unwrap_or(DEFAULT_LIMIT)
                .clamp(1, MAX_LIMIT);
            let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(0);
            page(mail, offset, limit)
        }
        "mail.release" => mail.release(id, "cli"),
        "mail.delete" => mail.delete(id, "cli"),
        other => {
            let msg = format!("unknown command {}", crate::text::for_log(other, 64));
            return (400, json!({ "error": msg }));
        }
    };
    match result {
        Ok(v) => (200, v),
        Err(e) => {
            let status = status(&e);
            let answer = json!({"error": message(&e), "status": status, "paths": e.paths()});
            (status, answer)
        }
    }
}
