//! Findings routes: `/api/v1/findings` (the active set, paged) and the paging rules shared
//! with `/api/v1/findings/enriched`.
//!
//! Both routes read one published snapshot of the active set (an `Arc` copy; no lock is held
//! while the page is selected and encoded), select the page without sorting the whole set
//! ([`crate::findings::active::Snapshot::page`]), and encode the body once, straight from
//! the findings into the response buffer.

use serde::Serialize;

use crate::findings::Finding;
use crate::http::{Request, Response};

use super::auth::Caller;
use super::data::{int_param, tri};
use super::App;

/// Items per page when `limit` is absent.
pub const DEFAULT_PAGE: u64 = 1_000;
/// Largest `limit`.
pub const MAX_PAGE: u64 = 10_000;
/// Largest `offset` (far beyond any active set).
pub const MAX_OFFSET: u64 = 100_000_000;

/// `offset` and `limit` of a paged findings route; out of range is a 400 naming the
/// parameter and its range.
pub(super) fn paging(req: &Request) -> Result<(usize, usize), Response> {
    let limit = int_param(req, "limit", 1, MAX_PAGE)?.unwrap_or(DEFAULT_PAGE);
    let offset = int_param(req, "offset", 0, MAX_OFFSET)?.unwrap_or(0);
    Ok((offset as usize, limit as usize))
}

/// The list envelope of a page.
#[derive(Serialize)]
struct Page<'a> {
    items: Vec<&'a Finding>,
    total: usize,
    offset: usize,
    limit: usize,
    truncated: bool,
}

/// `GET /api/v1/findings?limit=&offset=`: the active set in the list envelope, highest
/// severity first, newest first within a severity; `limit` 1-10,000 (default 1,000).
pub fn list(app: &App, req: &Request, _c: &Caller) -> Response {
    let (offset, limit) = tri!(paging(req));
    let snap = app.services.engine.snapshot();
    let items = snap.page(offset, limit);
    let total = snap.len();
    let truncated = offset.saturating_add(items.len()) < total;
    Response::json(
        200,
        &Page {
            items,
            total,
            offset,
            limit,
            truncated,
        },
    )
}
