//! Connection phases and their whole-phase deadlines.
//!
//! Every connection the front owns is in exactly one phase, and each phase has one deadline
//! fixed when the phase starts: bytes that arrive during the phase never move it. A peer
//! that trickles one byte a second is closed when its phase's time is up, exactly like one
//! that sends nothing.
//!
//! | phase       | starts                                  | deadline (defaults)                  |
//! |-------------|-----------------------------------------|--------------------------------------|
//! | `handshake` | accept                                  | 10 s                                 |
//! | `idle`      | handshake done, or a response sent      | 30 s (keep-alive idle)               |
//! | `head`      | first byte of a request                 | 10 s                                 |
//! | `body`      | head complete, body still missing       | 10 s + length at 1 KiB/s             |
//! | `worker`    | complete request handed to the pool     | none (the client has nothing to do)  |
//! | `write`     | response larger than the socket took    | 30 s                                 |
//!
//! Times are monotonic nanoseconds of the server's [`crate::clock::Clock`], so tests drive
//! them with a manual clock.

use serde::Serialize;

use crate::config::HttpLimits;

/// Where a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Handshake,
    Idle,
    Head,
    Body,
    Worker,
    Write,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Phase::Handshake,
        Phase::Idle,
        Phase::Head,
        Phase::Body,
        Phase::Worker,
        Phase::Write,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Phase::Handshake => "handshake",
            Phase::Idle => "idle",
            Phase::Head => "head",
            Phase::Body => "body",
            Phase::Worker => "worker",
            Phase::Write => "write",
        }
    }
}

const NANOS: i64 = 1_000_000_000;

/// Deadlines derived from the configured limits.
#[derive(Clone, Copy, Debug)]
pub struct Deadlines {
    handshake: i64,
    idle: i64,
    head: i64,
    write: i64,
    body_min_rate: u64,
}

fn secs(s: u64) -> i64 {
    i64::try_from(s)
        .unwrap_or(i64::MAX / NANOS)
        .saturating_mul(NANOS)
}

impl Deadlines {
    pub fn new(l: &HttpLimits) -> Deadlines {
        Deadlines {
            handshake: secs(l.handshake_timeout_seconds),
            idle: secs(l.idle_timeout_seconds),
            head: secs(l.head_timeout_seconds),
            write: secs(l.write_timeout_seconds),
            body_min_rate: l.body_min_bytes_per_second.max(1),
        }
    }

    /// The deadline of `phase` starting at `now`; `body_len` is the Content-Length for the
    /// body phase. `None` for the worker phase, which has no client deadline.
    pub fn of(&self, phase: Phase, now: i64, body_len: usize) -> Option<i64> {
        let span = match phase {
            Phase::Handshake => self.handshake,
            Phase::Idle => self.idle,
            Phase::Head => self.head,
            // The head deadline again, plus the time the body takes at the slowest rate
            // still accepted (rounded up to whole seconds).
            Phase::Body => {
                let len = u64::try_from(body_len).unwrap_or(u64::MAX);
                let body_secs = len.div_ceil(self.body_min_rate);
                self.head.saturating_add(secs(body_secs))
            }
            Phase::Write => self.write,
            Phase::Worker => return None,
        };
        Some(now.saturating_add(span))
    }
}

/// Connections per phase, as published in the status snapshot.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct PhaseCounts {
    pub handshake: usize,
    pub idle: usize,
    pub head: usize,
    pub body: usize,
    pub worker: usize,
    pub write: usize,
}

impl PhaseCounts {
    pub fn from_array(a: [usize; 6]) -> PhaseCounts {
        PhaseCounts {
            handshake: a[0],
            idle: a[1],
            head: a[2],
            body: a[3],
            worker: a[4],
            write: a[5],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_design() {
        let d = Deadlines::new(&HttpLimits::default());
        let now = 5 * NANOS;
        assert_eq!(d.of(Phase::Handshake, now, 0), Some(now + 10 * NANOS));
        assert_eq!(d.of(Phase::Head, now, 0), Some(now + 10 * NANOS));
        assert_eq!(d.of(Phase::Idle, now, 0), Some(now + 30 * NANOS));
        assert_eq!(d.of(Phase::Write, now, 0), Some(now + 30 * NANOS));
        assert_eq!(d.of(Phase::Worker, now, 0), None);
    }

    #[test]
    fn body_deadline_grows_with_length_at_the_minimum_rate() {
        let d = Deadlines::new(&HttpLimits::default());
        assert_eq!(d.of(Phase::Body, 0, 1), Some(11 * NANOS));
        assert_eq!(d.of(Phase::Body, 0, 1024), Some(11 * NANOS));
        assert_eq!(d.of(Phase::Body, 0, 1025), Some(12 * NANOS));
        // 1 MiB at 1 KiB/s: 1,024 s on top of the head time.
        assert_eq!(d.of(Phase::Body, 0, 1 << 20), Some(1034 * NANOS));
        // Never overflows.
        assert!(d.of(Phase::Body, i64::MAX - 1, usize::MAX).is_some());
    }
}
