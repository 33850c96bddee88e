//! The log tail every log collector shares (auth log now; access, mail and WAF logs next).
//!
//! Parts:
//! - [`FileSource`] (`source.rs`): follows one path across rotation by rename,
//!   copytruncate, truncate-and-refill (fingerprints), absence, and restarts (resume at a
//!   [`Checkpoint`], in the rotated file first when the log was rotated while the daemon was
//!   down). Complete lines only, bounded per poll, no allocation per line.
//! - [`Checkpoint`] (`checkpoint.rs`): inode, offset and fingerprint of the bytes before it.
//! - [`Waker`] (`wake.rs`): inotify wakeups (`IN_MODIFY` on each file, `IN_CREATE`,
//!   `IN_MOVED_TO`, `IN_MOVED_FROM`, `IN_DELETE` on its directory), with polling only as a
//!   safety net.
//! - [`Follower`] (`follow.rs`): the collector loop: wake, poll, hand lines to a
//!   [`LineHandler`], submit findings then checkpoints to the findings engine, publish the
//!   `<name>.file_source` row and the watcher row.
//!
//! A new log collector implements [`LineHandler`] for its parser and detector, registers a
//! `QueueHealth` row named `<name>.file_source` built with [`file_source_row`] and a
//! component, and runs a [`Follower`] on its own thread (see `watch/authlog/collector.rs`).

mod checkpoint;
mod follow;
mod running;
mod source;
mod wake;

#[cfg(test)]
pub(crate) mod testutil;

pub use checkpoint::{fingerprint, Checkpoint, FINGERPRINT_BYTES};
pub use follow::{
    Follower, Keys, LineHandler, GROUP_FINDINGS, MAX_IN_FLIGHT, MAX_REPLAY_BYTES,
    NEW_FILE_FROM_START, POSITION_EVERY, SAFETY_NET_POLL, SUBMIT_WAIT,
};
pub use running::{Running, StartError, STOP_FLUSH};
pub use source::{
    FileSource, PollStats, SourceTotals, MAX_BYTES_PER_POLL, MAX_LINE_BYTES, READ_CHUNK,
};
pub use wake::{WakeHandle, Waker, Wakeup, FALLBACK_POLL};

use std::sync::Arc;

use crate::clock::SharedClock;
use crate::queue::{LagBasis, QueueHealth, RowConfig};

/// The health row of a file source: depth in bytes, no fixed capacity, lag by consumer
/// progress (the spec's `*.file_source` rows).
pub fn file_source_row(clock: SharedClock) -> Arc<QueueHealth> {
    let mut cfg = RowConfig::new("bytes").lag_basis(LagBasis::ConsumerProgress);
    cfg.capacity = None;
    QueueHealth::new(clock, cfg)
}
