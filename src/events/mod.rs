//! The live event stream: every dispatched finding, fanned out to Server-Sent Events
//! subscribers (`GET /api/v1/events`).
//!
//! ```text
//! dispatcher --listener--> EventBus::publish --try_send--> [64 per subscriber] --> SSE writer
//! ```
//!
//! Guarantees:
//! - [`EventBus::publish`] runs on the dispatcher thread and never waits for a subscriber:
//!   the finding is encoded once, then offered to each subscriber's bounded buffer with a
//!   non-blocking `try_send`. A subscriber that stops reading only loses its own events.
//! - Each subscriber buffers at most [`BUFFER_PER_SUBSCRIBER`] findings. A finding that does
//!   not fit, one that cannot be encoded, and everything a failed stream had buffered or was
//!   writing count as losses on the `events.deliveries` row, once per finding per subscriber.
//! - Each write and each flush of a stream has a 3-second deadline (the server's
//!   [`crate::http`] stream writer); a failed write or flush ends the stream and frees its
//!   subscriber slot at once.
//! - At most `webui.limits.max_sse_subscribers` subscribers exist at once; more are refused
//!   ([`SubscribeError::Full`], a 503 answer).
//! - [`EventBus::close`] (shutdown) ends every stream promptly; what was still buffered is a
//!   shutdown drain, not a loss.
//! - While findings stream in continuously, a subscriber gathers for at most 1 ms before
//!   writing (woken early once its buffer reaches 16), so high rates cost one write and one
//!   wake-up per batch rather than per finding; after a quiet spell the first finding is
//!   written at once.
//! - The dispatcher commits at most 32 findings per transaction
//!   ([`crate::findings::engine`]), so the burst listeners get after one commit fits in half a
//!   subscriber buffer.
//!
//! # Wire format
//!
//! The stream starts with a comment and a reconnection hint, then one block per finding:
//!
//! ```text
//! : svc event stream
//! retry: 5000
//!
//! id: 42
//! event: finding
//! data: {"check":"webshell","severity":"CRITICAL",...,"first_seen":"2026-01-01T00:00:00.000000Z",...}
//!
//! ```
//!
//! - `data:` is one line: the finding as `/api/v1/findings` serialises it (the active-set
//!   entry after the merge: severity labels, RFC 3339 instants with six fraction digits,
//!   `count`).
//! - `event:` is always `finding` in this version.
//! - `id:` numbers dispatched findings in this daemon process (1, 2, 3, ...), whether or not
//!   anyone subscribed, so a gap in the ids one subscriber receives is exactly the findings
//!   it lost. Ids restart after a daemon restart (see `started_at_token`); `Last-Event-ID` is
//!   not replayed: resynchronise from `/api/v1/findings`.
//! - A comment line `: keep-alive` is sent after 15 s without any other write, so a dead
//!   peer is detected by the write deadline within about 18 s.
//!
//! # The `events.deliveries` row
//!
//! One row aggregates all subscribers (`depth_unit` `findings`):
//!
//! | Key | Value |
//! |---|---|
//! | `waiting` | Findings buffered for all subscribers together. |
//! | `capacity` | `64 × subscribers` (0 with none): the row is full only when every subscriber's buffer is full, and 30 s continuously full degrades it. |
//! | `running` | Streams being served. |
//! | `dropped_total`, `dropped_last_minute` | Overflow, encoding errors and findings buffered or in flight on a failed stream (one per finding per subscriber); three in a minute warn. |
//! | `lag_basis` | `consumer_progress`: time since the last delivery while findings wait. |
//!
//! The row is registered when the bus is built and removed when it is dropped.

mod bus;
mod subscriber;

pub use bus::{Counters, EventBus, SubscribeError};
pub use subscriber::{Step, Subscription};

use std::time::Duration;

/// Name of the health row.
pub const ROW: &str = "events.deliveries";
/// Findings buffered per subscriber.
pub const BUFFER_PER_SUBSCRIBER: usize = 64;
/// A comment is written after this long without any other write.
pub const HEARTBEAT: Duration = Duration::from_secs(15);
/// Reconnection delay suggested to clients (`retry:` field), milliseconds.
pub const RETRY_MILLIS: u64 = 5000;

#[cfg(test)]
mod tests;
