//! Findings routes: `/api/v1/findings` (the active set, paged) and the paging rules shared
//! with `/api/v1/findings/enriched`.
//!
//! Both routes page through the engine's shared [`Listing`] of the active set (sorted at most
//! once a second while findings arrive, see [`crate::findings::engine::LISTING_MAX_AGE`];
//! no lock the dispatcher takes is held while it is built, paged or encoded), and encode
//! the body once, straight from the findings into the response buffer.
//!
//! [`Listing`]: crate::findings::engine::Listing

use std::sync::Arc;

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

/// Serialises shared findings as the findings themselves.
fn shared_findings<S: serde::Serializer>(items: &&[Arc<Finding>], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(items.iter().map(|f| &**f))
}

/// The list envelope of a page.
#[derive(Serialize)]
struct Page<'a> {
    #[serde(serialize_with = "shared_findings")]
    items: &'a [Arc<Finding>],
    total: usize,
    offset: usize,
    limit: usize,
    truncated: bool,
}

/// `GET /api/v1/findings?limit=&offset=`: the active set in the list envelope, highest
/// severity first, newest first within a severity; `limit` 1-10,000 (default 1,000).
pub fn list(app: &App, req: &Request, _c: &Caller) -> Response {
    let (offset, limit) = tri!(paging(req));
    let listing = app.services.engine.listing();
    let items = listing.page(offset, limit);
    let total = listing.items().len();
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
