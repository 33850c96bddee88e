//! Stored copies: quarantined files and captured database objects, with bounded previews.

use std::io::Read;

use serde_json::json;

use crate::http::{Request, Response};
use crate::scan::quarantine::{open_stored, QuarantineRecord};
use crate::store::data as sdata;
use crate::text::prefix_within;

use super::auth::Caller;
use super::data::{required, store_failed, tri};
use super::App;

/// Bytes of a quarantined file a preview shows at most.
pub const QUARANTINE_PREVIEW: usize = 64 * 1024;
/// Bytes of a captured statement a preview shows at most.
pub const STATEMENT_PREVIEW: usize = 64 * 1024;

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (RFC 4648 section 4).
pub fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(B64[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// How a preview is sent: text when the bytes are UTF-8 without NUL (a multi-byte
/// character cut by the preview limit is left out), base64 otherwise. Returns
/// `(encoding, content, bytes represented)`.
pub fn encode_preview(bytes: &[u8], cut: bool) -> (&'static str, String, usize) {
    let text = match std::str::from_utf8(bytes) {
        Ok(s) => Some(s),
        Err(e) if cut && e.error_len().is_none() => bytes
            .get(..e.valid_up_to())
            .and_then(|b| std::str::from_utf8(b).ok()),
        Err(_) => None,
    };
    match text {
        Some(s) if !s.contains('\0') => ("utf-8", s.to_string(), s.len()),
        _ => ("base64", base64(bytes), bytes.len()),
    }
}

/// `GET /api/v1/quarantine`: each entry with `original_path` exact (JSON escapes it) and
/// `path_shown`, the path for people with control and bidirectional characters escaped as
/// findings show paths (a newline in a name is `\n`, never a space on a page).
pub fn quarantine(app: &App, _req: &Request, _c: &Caller) -> Response {
    match app.store.read(crate::store::quarantine::list) {
        Ok(items) => {
            let total = items.len();
            let items: Vec<_> = items
                .into_iter()
                .map(|e| {
                    let shown = crate::text::escape_controls(&e.original_path).into_owned();
                    let mut v = serde_json::to_value(e).unwrap_or_default();
                    v["path_shown"] = json!(shown);
                    v
                })
                .collect();
            Response::json(200, &json!({ "items": items, "total": total }))
        }
        Err(e) => store_failed(e),
    }
}

/// The preview as text for people: line by line, control and bidirectional characters and
/// invalid UTF-8 escaped (`\xNN`, `\u{..}`), lines kept.
fn preview_text(bytes: &[u8]) -> String {
    bytes
        .split(|b| *b == b'\n')
        .map(crate::text::escape_bytes)
        .collect::<Vec<_>>()
        .join("\n")
}

/// `GET /api/v1/quarantine-preview?id=`: the first 64 KiB of the quarantined copy, exact
/// (`content`, text or base64) and as escaped text (`text`).
pub fn quarantine_preview(app: &App, req: &Request, _c: &Caller) -> Response {
    let id = tri!(required(req, "id"));
    let id2 = id.clone();
    // The id as shown in composed messages (control and bidi characters escaped).
    let shown = format!("\"{}\"", crate::text::escape_controls(&id));
    let entry = match app
        .store
        .read(move |c| crate::store::quarantine::get(c, &id2))
    {
        Ok(Some(e)) => e,
        Ok(None) => return Response::error(404, &format!("no quarantine entry {shown}")),
        Err(e) => return store_failed(e),
    };
    if entry.restored_at.is_some() {
        return Response::error(
            404,
            &format!("quarantine entry {shown} was restored; no quarantined copy is kept"),
        );
    }
    let record: QuarantineRecord = match serde_json::from_value(entry.record.clone()) {
        Ok(r) => r,
        Err(e) => {
            return Response::error(
                500,
                &format!("quarantine record {shown} is unreadable: {e}"),
            )
        }
    };
    let qdir = app.cfg.state_path.join("quarantine");
    // A regular file in the daemon's quarantine directory, never through a symlink
    // (`sys::dir`); an invalid stored name in the record is refused there.
    let file = match open_stored(&qdir, &record) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Response::error(404, &format!("the quarantined copy of {shown} is missing"))
        }
        Err(e) => return Response::error(500, &format!("cannot open the quarantined copy: {e}")),
    };
    let size = match file.metadata() {
        Ok(m) if m.is_file() => m.len(),
        Ok(_) => return Response::error(500, "the quarantined copy is not a regular file"),
        Err(e) => return Response::error(500, &format!("cannot read the quarantined copy: {e}")),
    };
    let mut bytes = Vec::with_capacity(QUARANTINE_PREVIEW);
    if let Err(e) = file.take(QUARANTINE_PREVIEW as u64).read_to_end(&mut bytes) {
        return Response::error(500, &format!("cannot read the quarantined copy: {e}"));
    }
    let cut = (bytes.len() as u64) < size;
    let (encoding, content, shown) = encode_preview(&bytes, cut);
    Response::json(
        200,
        &json!({
            "id": entry.id,
            "original_path": entry.original_path,
            "size": size,
            "preview_bytes": shown,
            "truncated": (shown as u64) < size,
            "encoding": encoding,
            "content": content,
            "text": preview_text(&bytes),
            "sha256": record.sha256,
        }),
    )
}

/// `GET /api/v1/db-object-backups`.
pub fn db_object_backups(app: &App, _req: &Request, _c: &Caller) -> Response {
    match app.store.read(sdata::db_object_backups) {
        Ok(items) => Response::json(200, &json!({ "items": items, "total": items.len() })),
        Err(e) => store_failed(e),
    }
}

/// `GET /api/v1/db-object-backup-preview?key=`: the captured statement, first 64 KiB.
pub fn db_object_backup_preview(app: &App, req: &Request, _c: &Caller) -> Response {
    let key = tri!(required(req, "key"));
    let k2 = key.clone();
    let b = match app.store.read(move |c| sdata::db_object_backup(c, &k2)) {
        Ok(Some(b)) => b,
        Ok(None) => return Response::error(404, &format!("no database object backup {key:?}")),
        Err(e) => return store_failed(e),
    };
    let statement = prefix_within(&b.statement, STATEMENT_PREVIEW);
    let mut out = json!({
        "key": b.key,
        "kind": b.kind,
        "name": b.name,
        "database": b.database,
        "created": crate::timefmt::rfc3339(b.created),
        "statement": statement,
        "statement_bytes": b.statement.len(),
        "truncated": statement.len() < b.statement.len(),
    });
    if let Some(a) = b.account {
        out["account"] = json!(a);
    }
    Response::json(200, &out)
}

/// `POST /api/v1/db-object-backups/restore` `{"key"}`: runs a dropped trigger's, event's
/// or routine's captured `CREATE` statement in its site's database again. 404 unknown key;
/// 400 a backup of another kind; 409 an object of that name exists, or no site under the
/// web roots uses the database; 500 the database refused.
pub fn db_object_backup_restore(app: &App, req: &Request, _c: &Caller) -> Response {
    let v = match app.json_body(req) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let key = match v.get("key") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(_) => return Response::error(400, "key must be a string"),
        None => return Response::error(400, "the body needs key"),
    };
    let k2 = key.clone();
    let shown = crate::text::escape_controls(&key).into_owned();
    let b = match app.store.read(move |c| sdata::db_object_backup(c, &k2)) {
        Ok(Some(b)) => b,
        Ok(None) => return Response::error(404, &format!("no database object backup {shown:?}")),
        Err(e) => return store_failed(e),
    };
    match app.services.fixer.restore_db_object(&b) {
        Ok(site) => Response::json(
            200,
            &json!({ "ok": true, "key": b.key, "kind": b.kind, "name": b.name, "database": b.database, "site": site }),
        ),
        Err(e) => Response::error(e.status(), &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preview_text_escapes_controls_and_keeps_lines() {
        assert_eq!(
            preview_text(b"<?php\n\x1b[2Jx\xff\n"),
            "<?php\n\\x1b[2Jx\\xff\n"
        );
    }

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }

    #[test]
    fn previews_are_text_when_they_can_be() {
        assert_eq!(
            encode_preview(b"<?php echo 1;", false),
            ("utf-8", "<?php echo 1;".to_string(), 13)
        );
        // A character cut by the limit is left out, not turned into base64.
        let cut = "ab\u{e9}".as_bytes();
        assert_eq!(
            encode_preview(&cut[..3], true),
            ("utf-8", "ab".to_string(), 2)
        );
        // The same bytes at the real end of a file are not UTF-8.
        assert_eq!(encode_preview(&cut[..3], false).0, "base64");
        assert_eq!(encode_preview(b"MZ\0\x90", false).0, "base64");
        assert_eq!(encode_preview(b"\xff\xfe", true).0, "base64");
        assert_eq!(prefix_within("a\u{e9}b", 2), "a");
        assert_eq!(prefix_within("abc", 5), "abc");
    }
}
