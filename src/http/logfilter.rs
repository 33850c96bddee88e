//! A `log::Log` wrapper that rate-limits warnings clients cause inside dependencies.
//!
//! rustls logs a WARN line for things any client can send at will: an IP address as SNI
//! (every handshake from `wrk` or a browser opened on `https://192.0.2.1/`), warning alerts,
//! duplicate extensions. Left alone, one client writes the log at handshake rate (83,762
//! lines in one 10-second `wrk` run). This wrapper lets through at most one such line per
//! call site a minute, with the number held back since the previous one appended, and
//! counts them all ([`client_warnings_total`]). Everything else passes unchanged.
//!
//! The daemon's own client-caused lines use [`crate::lograte`] directly where they are
//! written; this filter covers what dependencies write.

use std::sync::atomic::{AtomicU64, Ordering};

use log::{Level, Log, Metadata, Record};

use crate::clock::SharedClock;
use crate::lograte::LogLimiter;

/// Kind under which the limiter keys dependency warnings (the key is the call site).
const KIND: &str = "client_warning";

static CLIENT_WARNINGS: AtomicU64 = AtomicU64::new(0);

/// Client-caused warnings seen by the installed filter since start (logged or not).
pub fn client_warnings_total() -> u64 {
    CLIENT_WARNINGS.load(Ordering::Relaxed)
}

/// True for records a remote peer can trigger at will.
pub fn is_client_caused(r: &Metadata<'_>) -> bool {
    r.level() <= Level::Warn && (r.target() == "rustls" || r.target().starts_with("rustls::"))
}

/// See the module documentation.
pub struct ClientLogFilter<L> {
    inner: L,
    limiter: LogLimiter,
}

impl<L: Log> ClientLogFilter<L> {
    pub fn new(inner: L, clock: SharedClock) -> Self {
        ClientLogFilter {
            inner,
            limiter: LogLimiter::per_minute(clock),
        }
    }
}

impl<L: Log> Log for ClientLogFilter<L> {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        self.inner.enabled(m)
    }

    fn log(&self, record: &Record<'_>) {
        if !is_client_caused(record.metadata()) {
            self.inner.log(record);
            return;
        }
        CLIENT_WARNINGS.fetch_add(1, Ordering::Relaxed);
        if !self.inner.enabled(record.metadata()) {
            return;
        }
        let site = format!(
            "{}:{}",
            record.file().unwrap_or(record.target()),
            record.line().unwrap_or(0)
        );
        let Some(held_back) = self.limiter.admit(KIND, &site) else {
            return;
        };
        let text = crate::text::for_log(&record.args().to_string(), 300);
        self.inner.log(
            &Record::builder()
                .metadata(record.metadata().clone())
                .module_path(record.module_path())
                .file(record.file())
                .line(record.line())
                .args(format_args!(
                    "{text} (caused by a client; at most one line a minute{})",
                    if held_back > 0 {
                        format!(", {held_back} more since the last")
                    } else {
                        String::new()
                    }
                ))
                .build(),
        );
    }

    fn flush(&self) {
        self.inner.flush();
    }
}

/// Installs `inner` behind the filter as the process logger.
pub fn install(inner: env_logger::Logger) -> Result<(), log::SetLoggerError> {
    let max = inner.filter();
    log::set_boxed_logger(Box::new(ClientLogFilter::new(
        inner,
        crate::clock::SystemClock::shared(),
    )))?;
    log::set_max_level(max);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use parking_lot::Mutex;
    use std::sync::Arc;
    use std::time::Duration;

    #[derive(Default, Clone)]
    struct Capture(Arc<Mutex<Vec<String>>>);

    impl Log for Capture {
        fn enabled(&self, _m: &Metadata<'_>) -> bool {
            true
        }
        fn log(&self, r: &Record<'_>) {
            self.0.lock().push(format!("{} {}", r.target(), r.args()));
        }
        fn flush(&self) {}
    }

    fn warn(f: &ClientLogFilter<Capture>, target: &str, line: u32, msg: &str) {
        f.log(
            &Record::builder()
                .level(Level::Warn)
                .target(target)
                .file(Some("src/msgs/handshake.rs"))
                .line(Some(line))
                .args(format_args!("{msg}"))
                .build(),
        );
    }

    #[test]
    fn one_line_a_minute_per_call_site_with_the_count() {
        let clock = ManualClock::at_epoch_2026();
        let cap = Capture::default();
        let f = ClientLogFilter::new(cap.clone(), clock.clone());
        let before = client_warnings_total();
        for _ in 0..1000 {
            warn(
                &f,
                "rustls::msgs::handshake",
                348,
                "Illegal SNI extension: ip",
            );
        }
        warn(
            &f,
            "rustls::common_state",
            613,
            "TLS alert warning received",
        );
        assert_eq!(cap.0.lock().len(), 2);
        assert!(client_warnings_total() >= before + 1001);
        clock.advance(Duration::from_secs(61));
        warn(
            &f,
            "rustls::msgs::handshake",
            348,
            "Illegal SNI extension: ip",
        );
        let lines = cap.0.lock().clone();
        assert_eq!(lines.len(), 3);
        assert!(lines[2].contains("999 more since the last"), "{}", lines[2]);
    }

    #[test]
    fn other_lines_pass_and_control_characters_are_escaped() {
        let clock = ManualClock::at_epoch_2026();
        let cap = Capture::default();
        let f = ClientLogFilter::new(cap.clone(), clock);
        for _ in 0..3 {
            warn(&f, "svc::daemon", 1, "own warning");
        }
        f.log(
            &Record::builder()
                .level(Level::Info)
                .target("rustls::server")
                .args(format_args!("info line"))
                .build(),
        );
        warn(&f, "rustls::x", 9, "evil\nforged line");
        let lines = cap.0.lock().clone();
        assert_eq!(lines.len(), 5);
        assert!(lines[4].contains("evil\\nforged line"), "{}", lines[4]);
    }
}
