//! History and stats routes: `/api/v1/history`, `/api/v1/history/csv`, `/api/v1/stats`,
//! `/api/v1/stats/trend`, `/api/v1/stats/timeline` (all GET, read scope).
//!
//! Guarantees:
//! - Query parameters are validated before any store access, in the order limit, offset,
//!   from, to, severity, checks, search; the first invalid one answers 400 with
//!   `{"error": "<param>: <reason>", "param": "<param>"}`. Unknown parameters are ignored;
//!   a repeated parameter counts with its first value. An empty or whitespace-only value is
//!   the same as leaving the parameter out.
//! - Calendar dates (`from`, `to`, trend days) are read in the server's time zone,
//!   `TimeZone::system()` (the `TZ` environment variable, else `/etc/localtime`), looked up
//!   again at most once a minute ([`server_tz`]).
//! - The CSV export holds exactly the rows `/api/v1/history?offset=0&limit=5000` would list
//!   with the same filters (the JSON route caps `limit` at 1,000, so compare page by page).
//! - Empty lists are `[]`, empty maps `{}`; instants are RFC 3339 UTC with six fraction
//!   digits.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value};

use crate::findings::Severity;
use crate::http::{Request, Response};
use crate::store::history::{self as store, Filter, Page, Row};
use crate::timefmt::rfc3339;

use super::auth::Caller;
use super::csv::CsvWriter;
use super::daterange::{self, RangeRejections};
use super::App;

/// Page size when `limit` is absent.
pub const DEFAULT_LIMIT: u64 = 100;
/// Largest accepted `limit`.
pub const MAX_LIMIT: u64 = 1_000;
/// Rows in the CSV export (the newest matches).
pub const CSV_ROWS: u64 = 5_000;
/// Longest accepted `search`, in characters.
pub const MAX_SEARCH_CHARS: usize = 256;
/// Most names in `checks`.
pub const MAX_CHECKS: usize = 64;
/// Longest check name in `checks`, in bytes.
pub const MAX_CHECK_NAME_BYTES: usize = 128;
/// Calendar days of the trend route.
pub const TREND_DAYS: usize = 30;
/// Hourly buckets of the timeline route.
pub const TIMELINE_HOURS: usize = 24;
/// Window of `/api/v1/stats`.
pub const STATS_WINDOW_SECONDS: i64 = 24 * 3600;
/// Most accounts listed under `accounts_at_risk`.
pub const MAX_ACCOUNTS_LISTED: usize = 1_000;
/// Characters of a refused value echoed in an error message.
const ECHO_CHARS: usize = 64;

/// How long a looked-up server time zone is reused.
const TZ_REFRESH: Duration = Duration::from_secs(60);
/// Stack of the thread that reads the time-zone database.
const TZ_LOOKUP_STACK: usize = 4 << 20;

/// The server time zone and when it was looked up.
static SERVER_TZ: Mutex<Option<(Instant, TimeZone)>> = Mutex::new(None);

/// The server's time zone, `TimeZone::system()` (the `TZ` environment variable, else
/// `/etc/localtime`), looked up again at most every [`TZ_REFRESH`].
///
/// The lookup reads the zone database on a short-lived thread: in debug builds jiff's
/// parsing needs more stack than an event-stream thread's 256 KiB. Using a zone needs little.
pub fn server_tz() -> TimeZone {
    let mut cached = SERVER_TZ.lock();
    if let Some((at, tz)) = cached.as_ref() {
        if at.elapsed() < TZ_REFRESH {
            return tz.clone();
        }
    }
    let looked_up = std::thread::Builder::new()
        .name("tz-lookup".into())
        .stack_size(TZ_LOOKUP_STACK)
        .spawn(TimeZone::system)
        .ok()
        .and_then(|h| h.join().ok());
    let tz = match (looked_up, cached.as_ref()) {
        (Some(tz), _) => tz,
        (None, Some((_, old))) => old.clone(),
        (None, None) => {
            log::warn!("cannot look up the server time zone; using UTC");
            TimeZone::UTC
        }
    };
    *cached = Some((Instant::now(), tz.clone()));
    tz
}

/// Refused `from` / `to` bounds (shown in `/metrics`).
static RANGE_REJECTIONS: LazyLock<RangeRejections> = LazyLock::new(RangeRejections::default);
/// Searches whose examination stopped at the scan cap.
static SEARCHES_CAPPED: AtomicU64 = AtomicU64::new(0);

/// Appends this module's counters to the Prometheus text of `/metrics`.
pub fn write_metrics(out: &mut String) {
    let r = RANGE_REJECTIONS.snapshot();
    let _ = writeln!(
        out,
        "# HELP svc_history_range_rejections_total Refused from/to bounds by reason.\n# TYPE svc_history_range_rejections_total counter"
    );
    for (reason, n) in [
        ("too_long", r.too_long),
        ("syntax", r.syntax),
        ("invalid_field", r.invalid_field),
    ] {
        let _ = writeln!(
            out,
            "svc_history_range_rejections_total{{reason=\"{reason}\"}} {n}"
        );
    }
    super::metrics::gauge(
        out,
        "svc_history_search_capped_total",
        "counter",
        "History searches that examined only the newest candidates (scan cap reached).",
        SEARCHES_CAPPED.load(Ordering::Relaxed),
    );
}

/// A refused query parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    pub param: &'static str,
    pub message: String,
}

impl ParamError {
    pub(super) fn new(param: &'static str, reason: &str, raw: &str) -> ParamError {
        ParamError {
            param,
            message: format!("{param}: {reason}, got {}", echo(raw)),
        }
    }

    pub(super) fn response(&self) -> Response {
        Response::json(400, &json!({ "error": self.message, "param": self.param }))
    }
}

/// Quotes at most [`ECHO_CHARS`] characters of `raw`, control characters escaped.
fn echo(raw: &str) -> String {
    let cut: String = raw.chars().take(ECHO_CHARS).collect();
    let more = if raw.chars().nth(ECHO_CHARS).is_some() {
        "..."
    } else {
        ""
    };
    format!("{cut:?}{more}")
}

/// Validated query parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub filter: Filter,
    pub offset: u64,
    pub limit: u64,
}

fn present(raw: Option<&str>) -> Option<&str> {
    raw.map(str::trim).filter(|s| !s.is_empty())
}

/// A whole number in `0..=max` written as canonical digits ([`super::params::parse_uint`]:
/// no sign, spaces or leading zeros). Absent or exactly empty is `default`.
pub(super) fn parse_count(
    param: &'static str,
    raw: Option<&str>,
    default: u64,
    max: u64,
) -> Result<u64, ParamError> {
    let s = match raw {
        None | Some("") => return Ok(default),
        Some(s) => s,
    };
    let reason = format!("expected a whole number from 0 to {max} (digits only, no leading zeros)");
    match super::params::parse_uint(s) {
        Ok(n) if n <= max => Ok(n),
        _ => Err(ParamError::new(param, &reason, s)),
    }
}

/// Comma-separated items, trimmed, empty items skipped.
fn items(raw: &str) -> impl Iterator<Item = &str> {
    raw.split(',').map(str::trim).filter(|s| !s.is_empty())
}

pub(super) fn parse_severities(raw: Option<&str>) -> Result<Vec<Severity>, ParamError> {
    let Some(s) = present(raw) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for item in items(s) {
        match Severity::parse_filter(item) {
            Some(sev) => out.push(sev),
            None => return Err(ParamError::new(
                "severity",
                "expected CRITICAL, HIGH or WARNING (any letter case) or 2, 1, 0, comma-separated",
                item,
            )),
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn parse_checks(raw: Option<&str>) -> Result<Vec<String>, ParamError> {
    let Some(s) = present(raw) else {
        return Ok(Vec::new());
    };
    let mut out: Vec<String> = Vec::new();
    for item in items(s) {
        if item.len() > MAX_CHECK_NAME_BYTES {
            return Err(ParamError::new(
                "checks",
                &format!("a check name has at most {MAX_CHECK_NAME_BYTES} bytes"),
                item,
            ));
        }
        out.push(item.to_string());
    }
    out.sort();
    out.dedup();
    if out.len() > MAX_CHECKS {
        return Err(ParamError::new(
            "checks",
            &format!("at most {MAX_CHECKS} check names"),
            s,
        ));
    }
    Ok(out)
}

fn parse_search(raw: Option<&str>) -> Result<Option<String>, ParamError> {
    let Some(s) = present(raw) else {
        return Ok(None);
    };
    if s.contains('\0') {
        return Err(ParamError::new("search", "NUL is not allowed", s));
    }
    if s.chars().count() > MAX_SEARCH_CHARS {
        return Err(ParamError::new(
            "search",
            &format!("at most {MAX_SEARCH_CHARS} characters"),
            s,
        ));
    }
    Ok(Some(s.to_string()))
}

/// Validates the parameters; `get` returns a parameter's decoded value. With `paging` false
/// (the CSV export) `limit` and `offset` are not read.
pub fn parse_query(
    get: impl Fn(&str) -> Option<String>,
    tz: &TimeZone,
    paging: bool,
) -> Result<Query, ParamError> {
    let (offset, limit) = if paging {
        let limit = parse_count("limit", get("limit").as_deref(), DEFAULT_LIMIT, MAX_LIMIT)?;
        let offset = parse_count("offset", get("offset").as_deref(), 0, i64::MAX as u64)?;
        (offset, limit)
    } else {
        (0, CSV_ROWS)
    };
    let range = daterange::parse_range(get("from").as_deref(), get("to").as_deref(), tz)
        .map_err(|e| {
            RANGE_REJECTIONS.record(&e);
            ParamError {
                param: e.param,
                message: e.to_string(),
            }
        })?
        .ceil_micros();
    let filter = Filter {
        from: range.from.map(|t| t.as_microsecond()),
        to: range.to_exclusive.map(|t| t.as_microsecond()),
        severities: parse_severities(get("severity").as_deref())?,
        checks: parse_checks(get("checks").as_deref())?,
        search: parse_search(get("search").as_deref())?,
    };
    Ok(Query {
        filter,
        offset,
        limit,
    })
}

fn query_of(req: &Request, paging: bool) -> Result<Query, ParamError> {
    parse_query(|name| req.query_param(name), &server_tz(), paging)
}

fn unavailable(e: impl std::fmt::Display) -> Response {
    log::warn!("history query failed: {e}");
    Response::error(503, &format!("history is unavailable: {e}"))
}

fn instant(micros: i64) -> String {
    rfc3339(Timestamp::from_microsecond(micros).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// One history entry as the API sends it.
#[derive(Serialize)]
struct Item<'a> {
    id: i64,
    check: &'a str,
    severity: &'static str,
    message: &'a str,
    details: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    account: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<&'a str>,
    at: String,
}

impl<'a> From<&'a Row> for Item<'a> {
    fn from(r: &'a Row) -> Item<'a> {
        Item {
            id: r.id,
            check: &r.check,
            severity: r.severity.label(),
            message: &r.message,
            details: &r.details,
            account: r.account.as_deref(),
            ip: r.ip.as_deref(),
            path: r.path.as_deref(),
            at: instant(r.at),
        }
    }
}

/// The list envelope of `/api/v1/history`, serialised straight to bytes.
#[derive(Serialize)]
struct ListBody<'a> {
    items: Vec<Item<'a>>,
    total: u64,
    offset: u64,
    limit: u64,
    truncated: bool,
    /// Sent when `search` is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    search_capped: Option<bool>,
}

fn run(app: &App, q: &Query) -> Result<Page, crate::store::StoreError> {
    let page = app
        .store
        .read(|c| store::page(c, &q.filter, q.offset, q.limit))?;
    if page.scan_capped {
        SEARCHES_CAPPED.fetch_add(1, Ordering::Relaxed);
    }
    Ok(page)
}

/// Matches exist that the answer leaves out (past the page, or beyond a search scan cap).
fn truncated(q: &Query, page: &Page) -> bool {
    page.scan_capped || q.offset.saturating_add(page.rows.len() as u64) < page.total
}

/// `GET /api/v1/history`.
pub fn list(app: &App, req: &Request, _c: &Caller) -> Response {
    let q = match query_of(req, true) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let page = match run(app, &q) {
        Ok(p) => p,
        Err(e) => return unavailable(e),
    };
    let body = ListBody {
        items: page.rows.iter().map(Item::from).collect(),
        total: page.total,
        offset: q.offset,
        limit: q.limit,
        truncated: truncated(&q, &page),
        search_capped: q.filter.search.as_ref().map(|_| page.scan_capped),
    };
    Response::json(200, &body)
}

/// The CSV header row.
pub const CSV_HEADER: [&str; 9] = [
    "id", "at", "severity", "check", "message", "details", "account", "ip", "path",
];

/// Encodes rows as CSV (header first).
fn encode_csv(rows: &[Row]) -> std::io::Result<Vec<u8>> {
    let mut w = CsvWriter::new(Vec::with_capacity(256 * (rows.len() + 1)));
    w.write_record(&CSV_HEADER)?;
    for r in rows {
        let id = r.id.to_string();
        let at = instant(r.at);
        w.write_record(&[
            &id,
            &at,
            r.severity.label(),
            &r.check,
            &r.message,
            &r.details,
            r.account.as_deref().unwrap_or(""),
            r.ip.as_deref().unwrap_or(""),
            r.path.as_deref().unwrap_or(""),
        ])?;
    }
    w.flush()?;
    Ok(w.into_inner())
}

/// `GET /api/v1/history/csv`.
pub fn csv(app: &App, req: &Request, _c: &Caller) -> Response {
    let q = match query_of(req, false) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let page = match run(app, &q) {
        Ok(p) => p,
        Err(e) => return unavailable(e),
    };
    let body = match encode_csv(&page.rows) {
        Ok(b) => b,
        Err(e) => return Response::error(500, &format!("CSV could not be encoded: {e}")),
    };
    Response::new(200, "text/csv; charset=utf-8", body)
        .with_header(
            "Content-Disposition",
            "attachment; filename=\"svc-history.csv\"",
        )
        .with_header("X-Total-Count", page.total.to_string())
        .with_header("X-Truncated", truncated(&q, &page).to_string())
}

/// Counts per severity as `{critical, high, warning}` (plus `total` when asked).
fn severity_map(counts: [u64; 3], with_total: bool) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("critical".into(), counts[2].into());
    m.insert("high".into(), counts[1].into());
    m.insert("warning".into(), counts[0].into());
    if with_total {
        m.insert("total".into(), counts.iter().sum::<u64>().into());
    }
    m
}

struct StatsData {
    severities: [u64; 3],
    accounts: Vec<store::AccountCounts>,
    quarantined: u64,
    blocks: BTreeMap<String, u64>,
}

/// The stats body for the window `[now - 24 h, now]`.
fn stats_body(now: Timestamp, d: StatsData) -> Value {
    let start = now
        .checked_sub(SignedDuration::from_secs(STATS_WINDOW_SECONDS))
        .unwrap_or(Timestamp::MIN);
    let accounts_total = d.accounts.len();
    let items: Vec<Value> = d
        .accounts
        .iter()
        .take(MAX_ACCOUNTS_LISTED)
        .map(|a| {
            let mut m = severity_map(a.counts, true);
            m.insert("account".into(), a.account.clone().into());
            Value::Object(m)
        })
        .collect();
    json!({
        "window_seconds": STATS_WINDOW_SECONDS,
        "start": rfc3339(start),
        "end": rfc3339(now),
        "severity_counts": severity_map(d.severities, true),
        "accounts_at_risk": {
            "items": items,
            "total": accounts_total,
            "truncated": accounts_total > MAX_ACCOUNTS_LISTED,
        },
        "auto_response": {
            "quarantined": d.quarantined,
            "blocked_ips": d.blocks.values().sum::<u64>(),
            "blocked_ips_by_source": d.blocks,
        },
    })
}

/// `GET /api/v1/stats`.
pub fn stats(app: &App, _req: &Request, _c: &Caller) -> Response {
    let now = app.clock.now();
    let end = now.as_microsecond().saturating_add(1);
    let start = now.as_microsecond() - STATS_WINDOW_SECONDS * 1_000_000;
    let data = app.store.read(|c| {
        // One snapshot for all four counts.
        let tx = c.unchecked_transaction()?;
        let data = StatsData {
            severities: store::severity_counts(&tx, start, end)?,
            accounts: store::accounts_at_risk(&tx, start, end)?,
            quarantined: store::quarantined_between(&tx, start, end)?,
            blocks: store::blocks_between(&tx, start, end)?,
        };
        tx.finish()?;
        Ok(data)
    });
    match data {
        Ok(d) => Response::json(200, &stats_body(now, d)),
        Err(e) => unavailable(e),
    }
}

/// Counts per severity for each `[start, end)` bucket (an empty bucket is not queried).
fn bucket_counts(
    app: &App,
    buckets: &[(Timestamp, Timestamp)],
) -> Result<Vec<[u64; 3]>, crate::store::StoreError> {
    app.store.read(|c| {
        let tx = c.unchecked_transaction()?;
        let counts = buckets
            .iter()
            .map(|(s, e)| {
                let (s, e) = (s.as_microsecond(), e.as_microsecond());
                if s >= e {
                    Ok([0; 3])
                } else {
                    store::severity_counts(&tx, s, e)
                }
            })
            .collect::<rusqlite::Result<Vec<_>>>()?;
        tx.finish()?;
        Ok(counts)
    })
}

/// The trend body: one item per calendar day.
fn trend_body(days: &[daterange::DayBucket], counts: &[[u64; 3]], tz: &TimeZone) -> Value {
    let items: Vec<Value> = days
        .iter()
        .zip(counts)
        .map(|(d, c)| {
            let mut m = serde_json::Map::new();
            m.insert("date".into(), d.date.to_string().into());
            m.insert("start".into(), rfc3339(d.start).into());
            m.insert("end".into(), rfc3339(d.end).into());
            m.extend(severity_map(*c, false));
            Value::Object(m)
        })
        .collect();
    json!({
        "items": items,
        "total": days.len(),
        "time_zone": tz.iana_name(),
    })
}

/// `GET /api/v1/stats/trend`.
pub fn trend(app: &App, _req: &Request, _c: &Caller) -> Response {
    let tz = server_tz();
    let days = daterange::trend_days(app.clock.now(), TREND_DAYS, &tz);
    let bounds: Vec<(Timestamp, Timestamp)> = days.iter().map(|d| (d.start, d.end)).collect();
    match bucket_counts(app, &bounds) {
        Ok(counts) => Response::json(200, &trend_body(&days, &counts, &tz)),
        Err(e) => unavailable(e),
    }
}

/// The hourly buckets of the timeline: `[start, start + 1 h)`, oldest first.
fn timeline_buckets(now: Timestamp) -> Vec<(Timestamp, Timestamp)> {
    daterange::hour_buckets(now, TIMELINE_HOURS)
        .into_iter()
        .map(|s| {
            let end = s
                .checked_add(SignedDuration::from_hours(1))
                .unwrap_or(Timestamp::MAX);
            (s, end)
        })
        .collect()
}

/// `GET /api/v1/stats/timeline`.
pub fn timeline(app: &App, _req: &Request, _c: &Caller) -> Response {
    let buckets = timeline_buckets(app.clock.now());
    let counts = match bucket_counts(app, &buckets) {
        Ok(c) => c,
        Err(e) => return unavailable(e),
    };
    let items: Vec<Value> = buckets
        .iter()
        .zip(counts)
        .map(|((s, e), c)| {
            let mut m = serde_json::Map::new();
            m.insert("start".into(), rfc3339(*s).into());
            m.insert("end".into(), rfc3339(*e).into());
            m.extend(severity_map(c, false));
            Value::Object(m)
        })
        .collect();
    Response::json(200, &json!({ "items": items, "total": buckets.len() }))
}

#[cfg(test)]
mod tests;
