//! Authentication-log detector: follows `auth.log`/`secure`/`mail.log`, recognises sshd,
//! PAM and Dovecot authentication lines, and reports brute force and notable logins.
//!
//! Parts:
//! - [`parse_line`]: syslog line -> [`AuthEvent`] (no regex, never panics);
//! - [`AuthDetector`]: events -> findings `ssh_bruteforce`, `pam_bruteforce` (HIGH),
//!   `ssh_root_login`, `auth_new_address_login` (WARNING), with [`AuthThresholds`]
//!   (config keys in [`CONFIG_KEYS`]) and an injected clock;
//! - [`Tailer`]: follows a path across rotation, copytruncate and absence;
//! - [`run_auth_watcher`]: the thread body tying them together.
//!
//! Wiring: the daemon starts one thread running [`run_auth_watcher_with_health`] with the
//! configured paths (default [`DEFAULT_AUTH_LOG_PATHS`]), the thresholds from
//! `[thresholds]`, the shared clock, an `emit` closure that sends each finding to the
//! findings ingest queue, the shutdown flag, and a poll interval (1 s is reasonable).
//! Memory is bounded by `auth_max_tracked_addresses` and `auth_max_known_logins`.

mod detect;
mod known;
mod parse;
mod run;
mod table;
mod tail;
mod thresholds;

#[cfg(test)]
mod testutil;

pub use detect::{
    AuthDetector, AuthDetectorStats, CHECK_NEW_ADDRESS_LOGIN, CHECK_PAM_BRUTEFORCE,
    CHECK_SSH_BRUTEFORCE, CHECK_SSH_ROOT_LOGIN,
};
pub use parse::{parse_line, split_header, AuthEvent, AuthKind, AuthService, SyslogHeader};
pub use run::{
    run_auth_watcher, run_auth_watcher_with_health, AuthWatchHealth, AuthWatcher,
    DEFAULT_AUTH_LOG_PATHS,
};
pub use tail::{PollStats, Tailer, TailerTotals, MAX_BYTES_PER_POLL, MAX_LINE_BYTES};
pub use thresholds::{AuthThresholds, SharedThresholds, ThresholdError, CONFIG_KEYS};
