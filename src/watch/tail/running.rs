//! [`Running`]: a [`Follower`] on a thread of its own, the way every log collector runs one.
//!
//! Stopping is woken, not polled: [`Running::request_stop`] sets the flag and wakes the
//! follower, which finishes the round it is in (submitting what it read).
//! [`Running::stop`] then waits until what it submitted is committed, so a collector started
//! next (a reload) resumes from its last position. Dropping stops and joins without that
//! wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::follow::{Follower, LineHandler};
use super::wake::WakeHandle;
use crate::findings::Engine;
use crate::queue::RegisterError;

/// Why a log collector could not start.
#[derive(Debug)]
pub enum StartError {
    /// The row name (first) is taken: a previous collector was not stopped.
    Row(&'static str, RegisterError),
    /// The wake pipe or the thread of the collector named first could not be created.
    Io(&'static str, std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Row(row, e) => write!(f, "queue row {row}: {e}"),
            StartError::Io(name, e) => write!(f, "{name} collector: {e}"),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Row(_, e) => Some(e),
            StartError::Io(_, e) => Some(e),
        }
    }
}

/// How long [`Running::stop`] waits for the follower's submissions to commit.
pub const STOP_FLUSH: Duration = Duration::from_secs(5);

/// A follower running on its own thread (see the module documentation).
pub struct Running {
    name: &'static str,
    engine: Arc<Engine>,
    stop: Arc<AtomicBool>,
    wake: WakeHandle,
    thread: Option<JoinHandle<()>>,
}

impl Running {
    /// Starts thread `thread_name` running `run(follower, stop flag)`: usually
    /// [`Follower::run`], or [`Follower::run_with`] for a collector with periodic work.
    pub fn spawn<H, F>(thread_name: &str, follower: Follower<H>, run: F) -> std::io::Result<Running>
    where
        H: LineHandler + Send + 'static,
        F: FnOnce(Follower<H>, &AtomicBool) + Send + 'static,
    {
        let name = follower.name();
        let engine = follower.engine().clone();
        let wake = follower.wake_handle();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(thread_name.into())
            .spawn(move || run(follower, &flag))?;
        Ok(Running {
            name,
            engine,
            stop,
            wake,
            thread: Some(thread),
        })
    }

    /// Asks the thread to stop without waiting.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.wake.wake();
    }

    /// Stops the thread and waits (up to [`STOP_FLUSH`]) until what it submitted is
    /// committed.
    pub fn stop(mut self) {
        self.join();
        if !self.engine.flush(STOP_FLUSH) {
            log::warn!(
                "{}: positions not committed within {} s of stopping",
                self.name,
                STOP_FLUSH.as_secs()
            );
        }
    }

    fn join(&mut self) {
        self.request_stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.join();
    }
}
