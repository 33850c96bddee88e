//! History queries: filtered pages with their totals (`/api/v1/history` and its CSV export)
//! and the counts of the stats routes.
//!
//! Guarantees:
//! - Rows come newest first: `at` descending, then `id` descending, whatever the plan.
//! - Without `search`, `total` is exact and cheap: whole UTC days inside the range are summed
//!   from `history_daily` (see "Derived tables" below), and only the partial days at the
//!   range edges are counted from the indexes. The cost grows with the number of days,
//!   checks and severities in `history_daily`, not with the number of rows.
//! - Without `search`, the page is read through the index that the counts say is cheapest
//!   ([`Plan`]); every plan returns the same rows.
//! - `search` is a case-insensitive substring test over check name, message, details,
//!   account, IP and path: ASCII letters match either case, every other character must match
//!   exactly (SQLite's `LIKE`, wildcards escaped). Terms of at least
//!   [`MIN_INDEXED_SEARCH_CHARS`] characters take candidates from the trigram index
//!   `history_fts` (rows holding the term's rarest trigrams; see [`candidate_query`]), the
//!   most recently recorded first, at most [`SEARCH_SCAN_CAP`] of them; rows not yet in the
//!   index (its backlog, below) are examined directly first and count against the same cap,
//!   so no row is missed, only examined in another way. Shorter terms, and
//!   terms with control characters, examine the newest [`SHORT_SEARCH_SCAN_CAP`] rows that
//!   pass the other filters. When the cap stops the examination, `total` counts the matches
//!   among the examined rows and [`Page::scan_capped`] is set.
//! - Every value reaches SQLite as a bound parameter; no input is spliced into SQL text.
//!
//! # Derived tables
//!
//! `history_daily` (rows per UTC day, check and severity, with id bounds) and `history_fts`
//! (the trigram index) are derived from `history` in bulk rather than by a trigger per row
//! (a row trigger costs a statement journal per INSERT, and FTS5 writes one index segment
//! per statement savepoint; together they cut ingest to a few thousand rows a second).
//! `history_derived` holds two watermarks, the newest id of each derived table:
//! - [`derive_pending`] counts new rows into `history_daily` in the transaction that wrote
//!   them (the findings dispatcher's commit), so totals are exact at every commit.
//! - The search index trails: the store's writer indexes the backlog in steps of about 10 ms
//!   (at most [`INDEX_STEP`] rows) when no write came for a moment and writes took less than
//!   half of its time lately ([`index_pending`]), so bursts of findings are committed at
//!   full speed and indexed right after. When the backlog exceeds [`MAX_UNINDEXED`] rows,
//!   writers of new rows index a step themselves, which bounds it under sustained load.
//!   The backlog is visible as `search_index_backlog` in the store's health.
//! - Rows written by other means (an older build, a restore) are derived when the store
//!   opens. Delete and update triggers adjust both tables for rows already derived.

use std::collections::BTreeMap;

use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection, OptionalExtension, Row as SqlRow};

use crate::model::finding::Severity;

/// Microseconds in a UTC day: the bucket of `history_daily`.
pub const DAY_MICROS: i64 = 86_400_000_000;
/// Shortest term that uses the trigram index.
pub const MIN_INDEXED_SEARCH_CHARS: usize = 3;
/// Most text-index candidates one search examines.
pub const SEARCH_SCAN_CAP: usize = 5_000;
/// Most rows a search without the index (short terms) examines.
pub const SHORT_SEARCH_SCAN_CAP: usize = 5_000;

const COLUMNS: &str = "id, at, check_name, severity, message, details, account, ip, path";
/// Columns `search` looks in.
const SEARCHED_COLUMNS: [&str; 6] = ["check_name", "message", "details", "account", "ip", "path"];
/// Most trigrams of a term whose frequency is probed.
const MAX_PROBED_TRIGRAMS: usize = 6;
/// Index rows a frequency probe looks at, in total.
const PROBE_WINDOW: i64 = 2_000;
/// Windows the probed rows are split into, spread over the ids of the range.
const PROBE_SAMPLES: usize = 4;
/// Trigrams a candidate must contain (the rarest of the probed ones).
const CANDIDATE_TRIGRAMS: usize = 2;

/// What to match. Empty lists and `None` mean "any".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Inclusive lower bound on `at`, microseconds since the epoch.
    pub from: Option<i64>,
    /// Exclusive upper bound on `at`, microseconds since the epoch.
    pub to: Option<i64>,
    /// Wanted severities (sorted, no duplicates).
    pub severities: Vec<Severity>,
    /// Wanted check names (exact, sorted, no duplicates).
    pub checks: Vec<String>,
    /// Substring to find (non-empty).
    pub search: Option<String>,
}

impl Filter {
    /// True when the range can hold nothing.
    pub fn empty_range(&self) -> bool {
        matches!((self.from, self.to), (Some(f), Some(t)) if f >= t)
    }

    fn has_columns(&self) -> bool {
        !self.severities.is_empty() || !self.checks.is_empty()
    }

    fn without_columns(&self) -> Filter {
        Filter {
            from: self.from,
            to: self.to,
            ..Filter::default()
        }
    }
}

/// One history row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub id: i64,
    /// Microseconds since the epoch.
    pub at: i64,
    pub check: String,
    pub severity: Severity,
    pub message: String,
    pub details: String,
    pub account: Option<String>,
    pub ip: Option<String>,
    pub path: Option<String>,
}

fn row(r: &SqlRow<'_>) -> rusqlite::Result<Row> {
    let level: i64 = r.get(3)?;
    Ok(Row {
        id: r.get(0)?,
        at: r.get(1)?,
        check: r.get(2)?,
        severity: u8::try_from(level)
            .ok()
            .and_then(Severity::from_level)
            .unwrap_or(Severity::Warning),
        message: r.get(4)?,
        details: r.get(5)?,
        account: r.get(6)?,
        ip: r.get(7)?,
        path: r.get(8)?,
    })
}

/// A page of matches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Page {
    pub rows: Vec<Row>,
    /// Matches counted (all of them unless `scan_capped`).
    pub total: u64,
    /// A search examined only part of the candidates; `total` covers the examined part.
    pub scan_capped: bool,
}

/// SQL text with numbered parameters.
#[derive(Debug, Default)]
struct Sql {
    text: String,
    params: Vec<Value>,
}

impl Sql {
    fn new(text: &str) -> Sql {
        Sql {
            text: text.to_string(),
            params: Vec::new(),
        }
    }

    fn push(&mut self, s: &str) -> &mut Self {
        self.text.push_str(s);
        self
    }

    /// Appends a placeholder for `v`.
    fn bind(&mut self, v: impl Into<Value>) -> &mut Self {
        self.params.push(v.into());
        let n = self.params.len();
        self.text.push_str(&format!("?{n}"));
        self
    }

    /// Appends `col = ?` for one value, `col IN (?, ...)` for several.
    fn one_of(&mut self, col: &str, values: Vec<Value>) -> &mut Self {
        self.push(col);
        if values.len() == 1 {
            self.push(" = ");
            for v in values {
                self.bind(v);
            }
            return self;
        }
        self.push(" IN (");
        for (i, v) in values.into_iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.bind(v);
        }
        self.push(")")
    }

    /// Appends the range, severity and check conditions on table alias `t`, each preceded by
    /// ` AND ` (so the caller starts with a true condition).
    fn conds(&mut self, t: &str, from: Option<i64>, to: Option<i64>, f: &Filter) -> &mut Self {
        if let Some(v) = from {
            self.push(&format!(" AND {t}.at >= ")).bind(v);
        }
        if let Some(v) = to {
            self.push(&format!(" AND {t}.at < ")).bind(v);
        }
        if !f.severities.is_empty() {
            let levels = f
                .severities
                .iter()
                .map(|s| Value::Integer(i64::from(s.level())))
                .collect();
            self.push(" AND ").one_of(&format!("{t}.severity"), levels);
        }
        if !f.checks.is_empty() {
            let names = f.checks.iter().map(|c| Value::Text(c.clone())).collect();
            self.push(" AND ").one_of(&format!("{t}.check_name"), names);
        }
        self
    }

    /// Appends the search test on alias `t`: `term` is a substring of one of the searched
    /// columns, ASCII letters in either case (SQLite's `LIKE` without ICU), every other
    /// character exactly.
    fn search(&mut self, t: &str, term: &str) -> &mut Self {
        self.params.push(Value::Text(like_pattern(term)));
        let n = self.params.len();
        let tests: Vec<String> = SEARCHED_COLUMNS
            .iter()
            .map(|col| format!("{t}.{col} LIKE ?{n} ESCAPE '\\'"))
            .collect();
        self.push(&format!("({})", tests.join(" OR ")))
    }

    fn count(&self, c: &Connection) -> rusqlite::Result<u64> {
        let n: i64 = c
            .prepare_cached(&self.text)?
            .query_row(params_from_iter(self.params.iter()), |r| r.get(0))?;
        Ok(n.max(0) as u64)
    }
}

/// The UTC day of an instant in microseconds (floor).
pub fn day_of(micros: i64) -> i64 {
    micros.div_euclid(DAY_MICROS)
}

/// Counts the rows matching `f`'s range, severities and checks (`search` is ignored; see
/// [`page`]). Exact.
pub fn count(c: &Connection, f: &Filter) -> rusqlite::Result<u64> {
    if f.empty_range() {
        return Ok(0);
    }
    // Whole UTC days inside [from, to): [first_day, end_day).
    let first_day = f
        .from
        .map(|v| day_of(v) + i64::from(v.rem_euclid(DAY_MICROS) != 0));
    let end_day = f.to.map(day_of);
    let has_whole_days = match (first_day, end_day) {
        (Some(a), Some(b)) => a < b,
        _ => true,
    };
    if !has_whole_days {
        return count_rows(c, f.from, f.to, f);
    }
    let mut total = count_days(c, first_day, end_day, f)?;
    if let (Some(from), Some(day)) = (f.from, first_day) {
        total += count_rows(c, Some(from), Some(day.saturating_mul(DAY_MICROS)), f)?;
    }
    if let (Some(to), Some(day)) = (f.to, end_day) {
        total += count_rows(c, Some(day.saturating_mul(DAY_MICROS)), Some(to), f)?;
    }
    Ok(total)
}

/// Sums `history_daily` over days `[first, end)`.
fn count_days(
    c: &Connection,
    first: Option<i64>,
    end: Option<i64>,
    f: &Filter,
) -> rusqlite::Result<u64> {
    let mut q = Sql::new("SELECT coalesce(sum(d.n), 0) FROM history_daily AS d WHERE 1");
    if let Some(v) = first {
        q.push(" AND d.day >= ").bind(v);
    }
    if let Some(v) = end {
        q.push(" AND d.day < ").bind(v);
    }
    q.conds(
        "d",
        None,
        None,
        &Filter {
            from: None,
            to: None,
            ..f.clone()
        },
    );
    q.count(c)
}

/// Counts rows of `history` in `[from, to)` with `f`'s severities and checks.
fn count_rows(
    c: &Connection,
    from: Option<i64>,
    to: Option<i64>,
    f: &Filter,
) -> rusqlite::Result<u64> {
    if matches!((from, to), (Some(a), Some(b)) if a >= b) {
        return Ok(0);
    }
    let mut q = Sql::new("SELECT count(*) FROM history AS h WHERE 1");
    q.conds("h", from, to, f);
    q.count(c)
}

/// How a page without `search` is read. Every plan yields the same rows; they differ in cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Walk `history_at` newest first, testing the other conditions on each row.
    Time,
    /// Walk `history_sev_at` (ordered when one severity is wanted, else sorted).
    Severity,
    /// Walk `history_check_at` (ordered when one check is wanted, else sorted).
    Check,
}

impl Plan {
    fn index(self) -> &'static str {
        match self {
            Plan::Time => "history_at",
            Plan::Severity => "history_sev_at",
            Plan::Check => "history_check_at",
        }
    }
}

/// Picks the cheapest plan from exact counts (estimated row visits; a visit that needs the
/// table row costs about three index-only visits).
fn choose_plan(c: &Connection, f: &Filter, total: u64, want: u64) -> rusqlite::Result<Plan> {
    if !f.has_columns() || total == 0 {
        return Ok(Plan::Time);
    }
    let total = total as f64;
    let want = want.max(1) as f64;
    let in_range = count(c, &f.without_columns())? as f64;
    let mut best = (Plan::Time, want * in_range / total * 3.0);
    let mut consider = |plan: Plan, wanted: usize, other_column: bool, dim: f64| {
        let visit = if other_column { 3.0 } else { 1.0 };
        let cost = if wanted == 1 {
            want * dim / total * visit
        } else {
            // Every matching index entry is read and sorted.
            dim * visit + dim * 0.5
        };
        if cost < best.1 {
            best = (plan, cost);
        }
    };
    if !f.severities.is_empty() {
        let only = Filter {
            checks: Vec::new(),
            ..f.clone()
        };
        let dim = count(c, &only)? as f64;
        consider(
            Plan::Severity,
            f.severities.len(),
            !f.checks.is_empty(),
            dim,
        );
    }
    if !f.checks.is_empty() {
        let only = Filter {
            severities: Vec::new(),
            ..f.clone()
        };
        let dim = count(c, &only)? as f64;
        consider(Plan::Check, f.checks.len(), !f.severities.is_empty(), dim);
    }
    Ok(best.0)
}

/// Ids of the page `[offset, offset + limit)` read with `plan`.
fn page_ids(
    c: &Connection,
    f: &Filter,
    plan: Plan,
    offset: u64,
    limit: u64,
) -> rusqlite::Result<Vec<i64>> {
    let mut q = Sql::new(&format!(
        "SELECT h.id FROM history AS h INDEXED BY {} WHERE 1",
        plan.index()
    ));
    q.conds("h", f.from, f.to, f);
    q.push(" ORDER BY h.at DESC, h.id DESC LIMIT ")
        .bind(clamp_i64(limit))
        .push(" OFFSET ")
        .bind(clamp_i64(offset));
    let mut st = c.prepare_cached(&q.text)?;
    let ids = st.query_map(params_from_iter(q.params.iter()), |r| r.get(0))?;
    ids.collect()
}

fn clamp_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Reads rows by id, keeping the order of `ids` (ids that vanished are skipped).
fn fetch(c: &Connection, ids: &[i64]) -> rusqlite::Result<Vec<Row>> {
    let mut st = c.prepare_cached(&format!("SELECT {COLUMNS} FROM history WHERE id = ?1"))?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(r) = st.query_row([id], row).optional()? {
            out.push(r);
        }
    }
    Ok(out)
}

/// The matches of `f` in `[offset, offset + limit)`, newest first, with the total.
/// Runs in one read transaction, so the total and the rows come from the same snapshot.
pub fn page(c: &Connection, f: &Filter, offset: u64, limit: u64) -> rusqlite::Result<Page> {
    let tx = c.unchecked_transaction()?;
    let page = page_with(&tx, f, offset, limit, None, Caps::DEFAULT)?;
    tx.finish()?;
    Ok(page)
}

/// Search examination limits (constants in production, small in tests).
#[derive(Clone, Copy, Debug)]
struct Caps {
    indexed: usize,
    scanned: usize,
}

impl Caps {
    const DEFAULT: Caps = Caps {
        indexed: SEARCH_SCAN_CAP,
        scanned: SHORT_SEARCH_SCAN_CAP,
    };
}

fn page_with(
    c: &Connection,
    f: &Filter,
    offset: u64,
    limit: u64,
    forced: Option<Plan>,
    caps: Caps,
) -> rusqlite::Result<Page> {
    if f.empty_range() {
        return Ok(Page::default());
    }
    if let Some(term) = f.search.as_deref() {
        return search_page(c, f, term, offset, limit, caps);
    }
    let total = count(c, f)?;
    if limit == 0 || offset >= total {
        return Ok(Page {
            rows: Vec::new(),
            total,
            scan_capped: false,
        });
    }
    let plan = match forced {
        Some(p) => p,
        None => choose_plan(c, f, total, offset.saturating_add(limit))?,
    };
    let ids = page_ids(c, f, plan, offset, limit)?;
    Ok(Page {
        rows: fetch(c, &ids)?,
        total,
        scan_capped: false,
    })
}

/// Whether a term goes through the trigram index.
pub fn uses_text_index(term: &str) -> bool {
    term.chars().count() >= MIN_INDEXED_SEARCH_CHARS && !term.chars().any(char::is_control)
}

/// A `LIKE` pattern (escape `\\`) matching `term` anywhere.
fn like_pattern(term: &str) -> String {
    let mut p = String::with_capacity(term.len() + 2);
    p.push('%');
    for ch in term.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(ch);
    }
    p.push('%');
    p
}

/// The distinct trigrams of `term` (ASCII-lower-cased; the index folds case), in order.
fn trigrams(term: &str) -> Vec<String> {
    let chars: Vec<char> = term.to_ascii_lowercase().chars().collect();
    let mut out: Vec<String> = Vec::new();
    for w in chars.windows(3) {
        let g: String = w.iter().collect();
        if !out.contains(&g) {
            out.push(g);
        }
    }
    out
}

/// An FTS5 string token: the text in double quotes, quotes doubled.
fn fts_token(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// At most `n` items spread evenly over `items`, first and last included.
fn spread<T: Clone>(items: &[T], n: usize) -> Vec<T> {
    if items.len() <= n {
        return items.to_vec();
    }
    if n < 2 {
        return items.iter().take(n).cloned().collect();
    }
    (0..n)
        .map(|i| items[i * (items.len() - 1) / (n - 1)].clone())
        .collect()
}

/// The FTS5 query finding candidates for `term` in index rows `[lo, hi]`: the conjunction
/// of its rarest trigrams. A row containing `term` (in any letter case) contains every
/// trigram of it in one column, so no match is lost; [`Sql::search`] then drops the rows
/// that only contain the trigrams. Rarity is measured by counting each probed trigram in
/// [`PROBE_SAMPLES`] windows of index rows spread over the range ([`PROBE_WINDOW`] rows in
/// all, the newest included).
fn candidate_query(c: &Connection, term: &str, lo: i64, hi: i64) -> rusqlite::Result<String> {
    let grams = trigrams(term);
    if grams.len() <= CANDIDATE_TRIGRAMS {
        let tokens: Vec<String> = grams.iter().map(|g| fts_token(g)).collect();
        return Ok(tokens.join(" AND "));
    }
    // Sample windows spread over the ids of the range, the newest included, so that a
    // trigram that is rare only lately is not mistaken for a rare one.
    let (first, last): (Option<i64>, Option<i64>) = c
        // Two subqueries: SQLite answers a lone min() or max() from the b-tree edge, but
        // scans for both in one query.
        .prepare_cached(
            "SELECT (SELECT min(id) FROM history WHERE id >= ?1), (SELECT max(id) FROM history WHERE id <= ?2)",
        )?
        .query_row([lo, hi], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let (Some(first), Some(last)) = (first, last) else {
        return Ok(fts_token(&grams[0]));
    };
    let width = (PROBE_WINDOW / PROBE_SAMPLES as i64).max(1);
    let windows: Vec<(i64, i64)> = (0..PROBE_SAMPLES as i64)
        .map(|k| {
            let end = first + (last - first) * (k + 1) / PROBE_SAMPLES as i64;
            (end.saturating_sub(width), end)
        })
        .collect();
    let mut probe = c.prepare_cached(
        "SELECT count(*) FROM (SELECT rowid FROM history_fts WHERE history_fts MATCH ?1 AND rowid > ?2 AND rowid <= ?3)",
    )?;
    let mut counted: Vec<(i64, usize, String)> = Vec::new();
    for (pos, g) in spread(&grams, MAX_PROBED_TRIGRAMS).into_iter().enumerate() {
        let token = fts_token(&g);
        let mut n = 0i64;
        for (after, upto) in &windows {
            n += probe.query_row(rusqlite::params![token, after, upto], |r| {
                r.get::<_, i64>(0)
            })?;
        }
        counted.push((n, pos, g));
    }
    counted.sort();
    let tokens: Vec<String> = counted
        .iter()
        .take(CANDIDATE_TRIGRAMS)
        .map(|(_, _, g)| fts_token(g))
        .collect();
    Ok(tokens.join(" AND "))
}

fn search_page(
    c: &Connection,
    f: &Filter,
    term: &str,
    offset: u64,
    limit: u64,
    caps: Caps,
) -> rusqlite::Result<Page> {
    let (mut matches, scan_capped) = if term.contains('\0') {
        // SQLite's LIKE ends a pattern at NUL; the API refuses such terms.
        (Vec::new(), false)
    } else if uses_text_index(term) {
        indexed_matches(c, f, term, caps.indexed)?
    } else {
        scanned_matches(c, f, term, caps.scanned)?
    };
    // Newest first: (at, id) descending.
    matches.sort_unstable_by(|a, b| b.cmp(a));
    let total = matches.len() as u64;
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(matches.len());
    let end = start
        .saturating_add(usize::try_from(limit).unwrap_or(usize::MAX))
        .min(matches.len());
    let ids: Vec<i64> = matches[start..end].iter().map(|m| m.1).collect();
    Ok(Page {
        rows: fetch(c, &ids)?,
        total,
        scan_capped,
    })
}

/// The smallest and largest history id that can lie in `f`'s range (from `history_daily`),
/// or `None` when no row can.
fn id_bounds(c: &Connection, f: &Filter) -> rusqlite::Result<Option<(i64, i64)>> {
    if f.from.is_none() && f.to.is_none() {
        return Ok(Some((i64::MIN, i64::MAX)));
    }
    let mut q = Sql::new("SELECT min(min_id), max(max_id) FROM history_daily WHERE 1");
    if let Some(v) = f.from {
        q.push(" AND day >= ").bind(day_of(v));
    }
    if let Some(v) = f.to {
        q.push(" AND day <= ").bind(day_of(v.saturating_sub(1)));
    }
    let (lo, hi): (Option<i64>, Option<i64>) = c
        .prepare_cached(&q.text)?
        .query_row(params_from_iter(q.params.iter()), |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    Ok(lo.zip(hi))
}

type Matches = (Vec<(i64, i64)>, bool);

/// (at, id) of the matches among the `cap` most recently recorded candidates: first the
/// rows of the range not yet in the search index ([`index_backlog`]), newest first, then
/// the index's candidates.
fn indexed_matches(
    c: &Connection,
    f: &Filter,
    term: &str,
    cap: usize,
) -> rusqlite::Result<Matches> {
    let Some((lo, hi)) = id_bounds(c, f)? else {
        return Ok((Vec::new(), false));
    };
    let (fts_upto, _) = index_backlog(c)?;
    let mut out = Vec::new();
    let mut left = cap;
    if hi > fts_upto {
        // Not indexed yet: examine these rows directly.
        let mut q = Sql::new("SELECT h.id, h.at, coalesce((1");
        q.conds("h", f.from, f.to, f)
            .push(" AND ")
            .search("h", term);
        q.push("), 0) FROM history AS h WHERE h.id > ")
            .bind(fts_upto.max(lo.saturating_sub(1)))
            .push(" AND h.id <= ")
            .bind(hi)
            .push(" ORDER BY h.id DESC LIMIT ")
            .bind(cap as i64 + 1);
        let (tail, examined, capped) = collect_matches(c, &q, cap)?;
        if capped {
            return Ok((tail, true));
        }
        out = tail;
        left = cap - examined;
    }
    let hi = hi.min(fts_upto);
    if hi < lo {
        return Ok((out, false));
    }
    let fts = candidate_query(c, term, lo, hi)?;
    let mut q = Sql::new("SELECT c.rid, h.at, coalesce((1");
    q.conds("h", f.from, f.to, f)
        .push(" AND ")
        .search("h", term);
    q.push("), 0) FROM (SELECT rowid AS rid FROM history_fts WHERE history_fts MATCH ")
        .bind(fts)
        .push(" AND rowid >= ")
        .bind(lo)
        .push(" AND rowid <= ")
        .bind(hi)
        .push(" ORDER BY rowid DESC LIMIT ")
        .bind(left as i64 + 1)
        .push(") AS c LEFT JOIN history AS h ON h.id = c.rid");
    let (more, _, capped) = collect_matches(c, &q, left)?;
    out.extend(more);
    Ok((out, capped))
}

/// (at, id) of the matches among the newest `cap` rows passing the other conditions.
fn scanned_matches(
    c: &Connection,
    f: &Filter,
    term: &str,
    cap: usize,
) -> rusqlite::Result<Matches> {
    let mut q = Sql::new("SELECT h.id, h.at, coalesce(");
    q.search("h", term);
    q.push(", 0) FROM history AS h INDEXED BY history_at WHERE 1");
    q.conds("h", f.from, f.to, f);
    q.push(" ORDER BY h.at DESC, h.id DESC LIMIT ")
        .bind(cap as i64 + 1);
    let (out, _, capped) = collect_matches(c, &q, cap)?;
    Ok((out, capped))
}

/// (at, id) of matches, rows examined, whether more rows were there.
type Examined = (Vec<(i64, i64)>, usize, bool);

/// Runs a query yielding (id, at, matched) per examined row; stops after `cap` rows.
/// Returns the matches, the rows examined, and whether more were there.
fn collect_matches(c: &Connection, q: &Sql, cap: usize) -> rusqlite::Result<Examined> {
    let mut st = c.prepare_cached(&q.text)?;
    let mut rows = st.query(params_from_iter(q.params.iter()))?;
    let mut out = Vec::new();
    let mut examined = 0usize;
    while let Some(r) = rows.next()? {
        if examined == cap {
            return Ok((out, examined, true));
        }
        examined += 1;
        let hit: Option<i64> = r.get(2)?;
        let at: Option<i64> = r.get(1)?;
        if let (Some(1..), Some(at)) = (hit, at) {
            out.push((at, r.get::<_, i64>(0)?));
        }
    }
    Ok((out, examined, false))
}

/// Rows of the search index's backlog ([`index_pending`]) above which the writer of new
/// rows indexes them itself, so the rows that searches must examine without the index stay
/// bounded even when ingest outpaces the index for a long time.
pub const MAX_UNINDEXED: i64 = 1_000_000;
/// Rows indexed per step when the backlog is worked off.
pub const INDEX_STEP: i64 = 2_048;

/// The derived-table watermarks: the newest history ids counted in `history_daily` and
/// indexed in `history_fts`.
fn watermarks(c: &Connection) -> rusqlite::Result<(i64, i64)> {
    c.prepare_cached("SELECT daily_upto, fts_upto FROM history_derived WHERE id = 1")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
}

/// Counts the rows above the day-count watermark into `history_daily` with one statement
/// and moves the watermark to the newest id. Call it in the transaction that inserted the
/// rows, so no reader ever sees a row that is not counted (the store also calls it at open,
/// for rows written by other means). When the search index's backlog exceeds
/// [`MAX_UNINDEXED`] it also indexes one step of it. Returns the rows counted.
pub fn derive_pending(c: &Connection) -> rusqlite::Result<u64> {
    let (daily, fts) = watermarks(c)?;
    let newest: Option<i64> = c
        .prepare_cached("SELECT max(id) FROM history")?
        .query_row([], |r| r.get(0))?;
    let Some(newest) = newest.filter(|n| *n > daily) else {
        return Ok(0);
    };
    let n = c
        .prepare_cached(
            "INSERT INTO history_daily(day, check_name, severity, n, min_id, max_id)
             SELECT CASE WHEN at >= 0 THEN at / 86400000000 ELSE (at + 1) / 86400000000 - 1 END AS d,
                    check_name, severity, count(*), min(id), max(id)
             FROM history WHERE id > ?1 AND id <= ?2 GROUP BY d, check_name, severity
             ON CONFLICT(day, check_name, severity) DO UPDATE SET n = n + excluded.n,
                 min_id = min(min_id, excluded.min_id), max_id = max(max_id, excluded.max_id)",
        )?
        .execute([daily, newest])?;
    c.prepare_cached("UPDATE history_derived SET daily_upto = ?1 WHERE id = 1")?
        .execute([newest])?;
    if newest - fts > MAX_UNINDEXED {
        index_step(c, fts, newest, INDEX_STEP)?;
    }
    Ok(n as u64)
}

/// History ids not yet in the search index: `(fts_upto, newest]` as (watermark, newest).
pub fn index_backlog(c: &Connection) -> rusqlite::Result<(i64, i64)> {
    let (_, fts) = watermarks(c)?;
    let newest: Option<i64> = c
        .prepare_cached("SELECT max(id) FROM history")?
        .query_row([], |r| r.get(0))?;
    Ok((fts, newest.unwrap_or(0).max(fts)))
}

/// Indexes the oldest `rows` rows (at most [`INDEX_STEP`]) of the search index's backlog
/// (one statement, so FTS5 writes one segment for them). Returns the rows still waiting.
pub fn index_pending(c: &Connection, rows: i64) -> rusqlite::Result<i64> {
    let (fts, newest) = index_backlog(c)?;
    if newest <= fts {
        return Ok(0);
    }
    index_step(c, fts, newest, rows)
}

fn index_step(c: &Connection, fts: i64, newest: i64, rows: i64) -> rusqlite::Result<i64> {
    let upto = newest.min(fts.saturating_add(rows.clamp(1, INDEX_STEP)));
    c.prepare_cached(
        "INSERT INTO history_fts(rowid, check_name, message, details, account, ip, path)
         SELECT id, check_name, message, details, account, ip, path FROM history
         WHERE id > ?1 AND id <= ?2",
    )?
    .execute([fts, upto])?;
    c.prepare_cached("UPDATE history_derived SET fts_upto = ?1 WHERE id = 1")?
        .execute([upto])?;
    Ok(newest - upto)
}

/// Rows per severity (index = level: 0 WARNING, 1 HIGH, 2 CRITICAL) with `at` in
/// `[from, to)`.
pub fn severity_counts(c: &Connection, from: i64, to: i64) -> rusqlite::Result<[u64; 3]> {
    let mut st = c.prepare_cached(
        "SELECT count(*) FROM history INDEXED BY history_sev_at WHERE severity = ?1 AND at >= ?2 AND at < ?3",
    )?;
    let mut out = [0u64; 3];
    for (level, slot) in out.iter_mut().enumerate() {
        let n: i64 = st.query_row(rusqlite::params![level as i64, from, to], |r| r.get(0))?;
        *slot = n.max(0) as u64;
    }
    Ok(out)
}

/// Findings per severity of one account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountCounts {
    pub account: String,
    /// Index = level: 0 WARNING, 1 HIGH, 2 CRITICAL.
    pub counts: [u64; 3],
}

/// Accounts named by history rows with `at` in `[from, to)`, most critical first (then
/// high, warning, name).
pub fn accounts_at_risk(
    c: &Connection,
    from: i64,
    to: i64,
) -> rusqlite::Result<Vec<AccountCounts>> {
    let mut st = c.prepare_cached(
        "SELECT account, severity, count(*) FROM history INDEXED BY history_at
         WHERE at >= ?1 AND at < ?2 AND account IS NOT NULL AND account <> ''
         GROUP BY account, severity",
    )?;
    let mut by: BTreeMap<String, [u64; 3]> = BTreeMap::new();
    let rows = st.query_map(rusqlite::params![from, to], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    })?;
    for item in rows {
        let (account, level, n) = item?;
        if let Some(slot) = usize::try_from(level).ok().filter(|l| *l < 3) {
            by.entry(account).or_default()[slot] += n.max(0) as u64;
        }
    }
    let mut out: Vec<AccountCounts> = by
        .into_iter()
        .map(|(account, counts)| AccountCounts { account, counts })
        .collect();
    out.sort_by(|a, b| {
        (b.counts[2], b.counts[1], b.counts[0])
            .cmp(&(a.counts[2], a.counts[1], a.counts[0]))
            .then_with(|| a.account.cmp(&b.account))
    });
    Ok(out)
}

/// Files quarantined with `at` in `[from, to)` (restored ones included).
pub fn quarantined_between(c: &Connection, from: i64, to: i64) -> rusqlite::Result<u64> {
    let n: i64 = c
        .prepare_cached("SELECT count(*) FROM quarantine WHERE at >= ?1 AND at < ?2")?
        .query_row(rusqlite::params![from, to], |r| r.get(0))?;
    Ok(n.max(0) as u64)
}

/// Blocked addresses created in `[from, to)`, by `source`.
pub fn blocks_between(
    c: &Connection,
    from: i64,
    to: i64,
) -> rusqlite::Result<BTreeMap<String, u64>> {
    let mut st = c.prepare_cached(
        "SELECT source, count(*) FROM blocked_ips WHERE created >= ?1 AND created < ?2 GROUP BY source",
    )?;
    let rows = st.query_map(rusqlite::params![from, to], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })?;
    let mut out = BTreeMap::new();
    for item in rows {
        let (source, n) = item?;
        out.insert(source, n.max(0) as u64);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
