//! Mail-account routes (all GET, read scope): `/api/v1/email/groups`,
//! `/api/v1/email/relay-abuse`, `/api/v1/email/forwarders`. The data is what the mail-log
//! reader recorded (`crate::mail::log`).
//!
//! Guarantees:
//! - Query parameters are validated before any store access, with the same rules and the
//!   same 400 answers as `/api/v1/history` (`limit` 0-1,000, default 100; `offset`; `from`
//!   and `to` as calendar dates in the server's zone or RFC 3339, DST-exact; see
//!   `api/daterange.rs`); `by` on the groups route is `sender`, `account` or `domain`.
//! - Every answer is the list envelope (`items`, `total`, `offset`, `limit`, `truncated`);
//!   the forwarders route adds `summary` beside `items` (spec envelope rule 2).
//! - Instants are RFC 3339 UTC with six fraction digits.

use jiff::Timestamp;
use serde::Serialize;
use serde_json::json;

use crate::http::{Request, Response};
use crate::store::mail_accounts::{self as store, GroupBy};
use crate::timefmt::rfc3339;

use super::auth::Caller;
use super::history::{parse_query, server_tz, Query};
use super::App;

/// Rows the forwarders route reads at most (its summary covers them).
pub const MAX_FORWARD_PAIRS: u64 = 10_000;

fn instant(micros: i64) -> String {
    rfc3339(Timestamp::from_microsecond(micros).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn query(req: &Request) -> Result<Query, Response> {
    parse_query(|n| req.query_param(n), &server_tz(), true)
        .map_err(|e| Response::json(400, &json!({ "error": e.message, "param": e.param })))
}

fn unavailable(e: impl std::fmt::Display) -> Response {
    log::warn!("mail records query failed: {e}");
    Response::error(503, &format!("mail records are unavailable: {e}"))
}

#[derive(Serialize)]
struct GroupItem {
    key: String,
    messages: i64,
    recipients: i64,
    sent: i64,
    deferred: i64,
    bounced: i64,
    forwarded: i64,
    outbound_local_mta: i64,
    relay_mismatches: i64,
    /// `by=account` only: direct SMTP egress connections of the account (new destinations
    /// per hour) in the range, beside `outbound_local_mta`.
    #[serde(skip_serializing_if = "Option::is_none")]
    direct_smtp_egress: Option<i64>,
    first_seen: String,
    last_seen: String,
}

/// `GET /api/v1/email/groups?by=sender|account|domain&from&to&limit&offset`.
pub fn groups(app: &App, req: &Request, _c: &Caller) -> Response {
    let by = match req.query_param("by").as_deref().map(str::trim) {
        None | Some("") | Some("sender") => GroupBy::Sender,
        Some("account") => GroupBy::Account,
        Some("domain") => GroupBy::Domain,
        Some(other) => {
            let shown: String = other.chars().take(64).collect();
            return Response::json(
                400,
                &json!({
                    "error": format!("by: expected sender, account or domain, got {shown:?}"),
                    "param": "by",
                }),
            );
        }
    };
    let q = match query(req) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let (from, to) = (q.filter.from, q.filter.to);
    let (limit, offset) = (q.limit, q.offset);
    let (rows, total) = if q.filter.empty_range() {
        (Vec::new(), 0)
    } else {
        match app
            .store
            .read(|c| store::groups(c, by, from, to, limit, offset))
        {
            Ok(r) => r,
            Err(e) => return unavailable(e),
        }
    };
    let egress = if by == GroupBy::Account && !rows.is_empty() {
        match app.store.read(|c| store::egress_by_account(c, from, to)) {
            Ok(m) => Some(m),
            Err(e) => return unavailable(e),
        }
    } else {
        None
    };
    let n = rows.len() as u64;
    let items: Vec<GroupItem> = rows
        .into_iter()
        .map(|g| GroupItem {
            direct_smtp_egress: egress
                .as_ref()
                .map(|m| m.get(&g.key).map_or(0, |(n, _)| *n)),
            key: g.key,
            messages: g.messages,
            recipients: g.recipients,
            sent: g.sent,
            deferred: g.deferred,
            bounced: g.bounced,
            forwarded: g.forwarded,
            outbound_local_mta: g.outbound_local_mta,
            relay_mismatches: g.relay_mismatches,
            first_seen: instant(g.first),
            last_seen: instant(g.last),
        })
        .collect();
    let by = match by {
        GroupBy::Sender => "sender",
        GroupBy::Account => "account",
        GroupBy::Domain => "domain",
    };
    Response::json(
        200,
        &json!({
            "items": items,
            "total": total,
            "offset": offset,
            "limit": limit,
            "truncated": offset.saturating_add(n) < total,
            "by": by,
        }),
    )
}

/// `GET /api/v1/email/relay-abuse?from&to&limit&offset`: authenticated logins that sent as
/// domains they do not own (`kind` `foreign_domain`), and logins or accounts whose hourly
/// volume reached `thresholds.mail_per_account_hourly` (`kind` `volume`), most messages
/// first.
pub fn relay_abuse(app: &App, req: &Request, _c: &Caller) -> Response {
    let q = match query(req) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let (from, to) = (q.filter.from, q.filter.to);
    let want = q.offset.saturating_add(q.limit);
    let threshold = i64::from(app.services.config.current().engine.mail_per_account_hourly);
    let read = if q.filter.empty_range() {
        Ok(((Vec::new(), 0), Vec::new()))
    } else {
        app.store.read(|c| {
            let m = store::mismatches(c, from, to, want)?;
            let peaks = store::hourly_peaks(c, "account", from, to, threshold, want)?;
            Ok((m, peaks))
        })
    };
    let ((mismatches, mismatch_total), peaks) = match read {
        Ok(r) => r,
        Err(e) => return unavailable(e),
    };
    let total = mismatch_total + peaks.len() as u64;
    let mut items: Vec<(i64, serde_json::Value)> = mismatches
        .into_iter()
        .map(|m| {
            (
                m.messages,
                json!({
                    "kind": "foreign_domain",
                    "auth_user": m.auth_user,
                    "account": m.account,
                    "sender_domain": m.sender_domain,
                    "messages": m.messages,
                    "recipients": m.recipients,
                    "first_seen": instant(m.first),
                    "last_seen": instant(m.last),
                }),
            )
        })
        .chain(peaks.into_iter().map(|(account, hour, n)| {
            (
                n,
                json!({
                    "kind": "volume",
                    "account": account,
                    "hour_start": instant(hour),
                    "messages": n,
                    "threshold": threshold,
                }),
            )
        }))
        .collect();
    items.sort_by_key(|i| std::cmp::Reverse(i.0));
    let page: Vec<serde_json::Value> = items
        .into_iter()
        .skip(usize::try_from(q.offset).unwrap_or(usize::MAX))
        .take(usize::try_from(q.limit).unwrap_or(usize::MAX))
        .map(|(_, v)| v)
        .collect();
    let n = page.len() as u64;
    Response::json(
        200,
        &json!({
            "items": page,
            "total": total,
            "offset": q.offset,
            "limit": q.limit,
            "truncated": q.offset.saturating_add(n) < total,
        }),
    )
}

/// `GET /api/v1/email/forwarders?limit&offset` (also `from`, `to`): observed forwards per
/// (mailbox, target), with `external` (the target's domain is not the mailbox's) and
/// `loop` (the target forwards back); `summary` counts pairs, external ones, loops and
/// forwarded messages over all pairs read (at most [`MAX_FORWARD_PAIRS`]).
pub fn forwarders(app: &App, req: &Request, _c: &Caller) -> Response {
    let q = match query(req) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let (from, to) = (q.filter.from, q.filter.to);
    let pairs = if q.filter.empty_range() {
        Vec::new()
    } else {
        match app
            .store
            .read(|c| store::forward_counts(c, from, to, MAX_FORWARD_PAIRS))
        {
            Ok(p) => p,
            Err(e) => return unavailable(e),
        }
    };
    let set: std::collections::HashSet<(&str, &str)> = pairs
        .iter()
        .map(|p| (p.original.as_str(), p.target.as_str()))
        .collect();
    let mut external = 0u64;
    let mut loops = 0u64;
    let mut messages = 0i64;
    let all: Vec<serde_json::Value> = pairs
        .iter()
        .map(|p| {
            let od = crate::mail::log::ledger::domain_of(&p.original);
            let td = crate::mail::log::ledger::domain_of(&p.target);
            let is_external = !td.is_empty() && od != td;
            let is_loop = set.contains(&(p.target.as_str(), p.original.as_str()));
            external += u64::from(is_external);
            loops += u64::from(is_loop);
            messages += p.count;
            json!({
                "mailbox": p.original,
                "target": p.target,
                "target_domain": td,
                "account": p.account,
                "messages": p.count,
                "external": is_external,
                "loop": is_loop,
                "last_seen": instant(p.last),
            })
        })
        .collect();
    let total = all.len() as u64;
    let page: Vec<serde_json::Value> = all
        .into_iter()
        .skip(usize::try_from(q.offset).unwrap_or(usize::MAX))
        .take(usize::try_from(q.limit).unwrap_or(usize::MAX))
        .collect();
    let n = page.len() as u64;
    Response::json(
        200,
        &json!({
            "items": page,
            "total": total,
            "offset": q.offset,
            "limit": q.limit,
            "truncated": q.offset.saturating_add(n) < total,
            "summary": {
                "forwarders": total,
                "external": external,
                "loops": loops,
                "messages": messages,
                "scan_capped": total >= MAX_FORWARD_PAIRS,
            },
        }),
    )
}

/// `GET /api/v1/email/queue-composition?limit`: the latest queue listing (taken every five
/// minutes by the mail-log reader) by sender domain, most messages first (bounces under
/// `<>`, domains past the 20 largest under `other`), with `summary` beside `items`: `at`,
/// `mta`, `size`, `oldest_age_seconds`, `bounces`, `bounce_share`. Before the first listing
/// (no MTA found, or not listed yet) `items` is `[]` and `summary` is `null`.
pub fn queue_composition(app: &App, req: &Request, _c: &Caller) -> Response {
    let q = match query(req) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let latest = match app.store.read(|c| store::snapshots(c, None, None, 1, 0)) {
        Ok((rows, _)) => rows.into_iter().next(),
        Err(e) => return unavailable(e),
    };
    let Some(s) = latest else {
        return Response::json(
            200,
            &json!({"items": [], "total": 0, "offset": q.offset, "limit": q.limit, "truncated": false, "summary": null}),
        );
    };
    let domains: Vec<(String, u64)> = serde_json::from_str(&s.domains).unwrap_or_default();
    let total = domains.len() as u64;
    let page: Vec<serde_json::Value> = domains
        .into_iter()
        .skip(usize::try_from(q.offset).unwrap_or(usize::MAX))
        .take(usize::try_from(q.limit).unwrap_or(usize::MAX))
        .map(|(domain, messages)| json!({"sender_domain": domain, "messages": messages}))
        .collect();
    let n = page.len() as u64;
    let share = if s.size > 0 {
        s.bounces as f64 / s.size as f64
    } else {
        0.0
    };
    Response::json(
        200,
        &json!({
            "items": page,
            "total": total,
            "offset": q.offset,
            "limit": q.limit,
            "truncated": q.offset.saturating_add(n) < total,
            "summary": {
                "at": instant(s.at),
                "mta": s.mta,
                "size": s.size,
                "oldest_age_seconds": s.oldest,
                "bounces": s.bounces,
                "bounce_share": share,
            },
        }),
    )
}
