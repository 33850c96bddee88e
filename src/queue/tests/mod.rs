//! Rule tests, driven by `ManualClock` (no sleeps).

use std::sync::Arc;

use super::*;
use crate::clock::{ManualClock, SharedClock};

mod queue;
mod registry;
mod rules;

fn manual() -> (Arc<ManualClock>, SharedClock) {
    let c = ManualClock::at_epoch_2026();
    let shared: SharedClock = c.clone();
    (c, shared)
}

fn queue(cap: u64) -> (Arc<ManualClock>, BoundedQueue<u32>) {
    let (c, s) = manual();
    let q = BoundedQueue::new(s, RowConfig::new("findings").capacity(cap)).unwrap();
    (c, q)
}

fn gauge(config: RowConfig) -> (Arc<ManualClock>, Arc<QueueHealth>) {
    let (c, s) = manual();
    (c, QueueHealth::new(s, config))
}
