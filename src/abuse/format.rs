//! Wire formats of a report.
//!
//! - `abuseipdb`: `POST` `application/x-www-form-urlencoded` with `ip`, `categories` (the
//!   numeric ids, comma-separated), `comment` and `timestamp` (RFC 3339), header `Key:`
//!   with the API key and `Accept: application/json`.
//! - `json`: `POST` `application/json`:
//!   `{"ip", "categories": [names], "category_ids": [ids], "comment", "time", "reporter": "svc"}`,
//!   with `Authorization: Bearer <key>` when a key is configured.
//!
//! The comment is the evidence summary: the block's reason and the event counts per attack
//! kind, never account names, paths or log lines (they stay on the host).

use crate::config::abuse::ReportFormat;
use crate::store::abuse::SpoolRow;

/// Longest comment sent (the central service accepts 1,024 characters).
pub const MAX_COMMENT: usize = 1024;

/// One request to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// Percent-encoding of a form value (RFC 3986 unreserved characters kept).
pub fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A comment fit to send: control characters replaced, at most [`MAX_COMMENT`] characters.
pub fn clean_comment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_COMMENT)
        .collect()
}

fn time_of(us: i64) -> String {
    jiff::Timestamp::from_microsecond(us)
        .map(crate::timefmt::rfc3339)
        .unwrap_or_default()
}

/// The request for `row` in `format` with the API key `key` (empty: none).
pub fn build(format: ReportFormat, row: &SpoolRow, key: &str) -> Request {
    let names: Vec<&str> = row
        .categories
        .split(',')
        .filter(|s| !s.is_empty())
        .collect();
    let ids: Vec<u8> = names
        .iter()
        .filter_map(|n| super::category::id_of(n))
        .collect();
    let comment = clean_comment(&row.comment);
    match format {
        ReportFormat::AbuseIpDb => {
            let cats = ids
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",");
            let body = format!(
                "ip={}&categories={}&comment={}&timestamp={}",
                form_encode(&row.ip),
                form_encode(&cats),
                form_encode(&comment),
                form_encode(&time_of(row.at))
            );
            Request {
                headers: vec![
                    (
                        "Content-Type",
                        "application/x-www-form-urlencoded".to_string(),
                    ),
                    ("Accept", "application/json".to_string()),
                    ("Key", key.to_string()),
                ],
                body: body.into_bytes(),
            }
        }
        ReportFormat::Json => {
            let v = serde_json::json!({
                "ip": row.ip,
                "categories": names,
                "category_ids": ids,
                "comment": comment,
                "time": time_of(row.at),
                "reporter": "svc",
            });
            let mut headers = vec![("Content-Type", "application/json".to_string())];
            if !key.is_empty() {
                headers.push(("Authorization", format!("Bearer {key}")));
            }
            Request {
                headers,
                body: v.to_string().into_bytes(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> SpoolRow {
        SpoolRow {
            id: 1,
            dest: "d".into(),
            created: 0,
            ip: "2001:db8::1".into(),
            categories: "brute_force,ssh".into(),
            comment: "auto: ssh_bruteforce (score 40); events: brute_force 8\n&x=1".into(),
            at: 1_764_000_000_000_000,
        }
    }

    #[test]
    fn abuseipdb_form_and_json_bodies() {
        let r = build(ReportFormat::AbuseIpDb, &row(), "K3Y");
        let body = String::from_utf8(r.body).unwrap();
        assert_eq!(
            body,
            "ip=2001%3Adb8%3A%3A1&categories=18%2C22&comment=auto%3A%20ssh_bruteforce%20%28score%2040%29%3B%20events%3A%20brute_force%208%20%26x%3D1&timestamp=2025-11-24T16%3A00%3A00.000000Z"
        );
        assert!(r.headers.contains(&("Key", "K3Y".to_string())));
        let r = build(ReportFormat::Json, &row(), "");
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["ip"], "2001:db8::1");
        assert_eq!(v["categories"], serde_json::json!(["brute_force", "ssh"]));
        assert_eq!(v["category_ids"], serde_json::json!([18, 22]));
        assert_eq!(v["time"], "2025-11-24T16:00:00.000000Z");
        assert!(!v["comment"].as_str().unwrap().contains('\n'));
        assert!(r.headers.iter().all(|(k, _)| *k != "Authorization"));
        let r = build(ReportFormat::Json, &row(), "t");
        assert!(r
            .headers
            .contains(&("Authorization", "Bearer t".to_string())));
        assert_eq!(
            clean_comment(&"é".repeat(2000)).chars().count(),
            MAX_COMMENT
        );
    }
}
