//! Authentication-log detector: follows `auth.log`/`secure`/`mail.log`, recognises sshd,
//! PAM and Dovecot authentication lines, and reports brute force and notable logins.
//!
//! Parts:
//! - [`parse_line`]: syslog line -> [`AuthEvent`] (no regex, never panics);
//! - [`AuthDetector`]: events -> findings `ssh_bruteforce`, `pam_bruteforce` (HIGH),
//!   `ssh_root_login`, `auth_new_address_login` (WARNING), with [`AuthThresholds`]
//!   (config keys in [`KEYS`]) and an injected clock;
//! - [`AuthCollector`]: the daemon's collector: the shared log tail
//!   ([`crate::watch::tail`]: inotify wakeups, rotation, checkpoints with fingerprints)
//!   feeding the detector, on its own thread, with the `auth.file_source` and `auth_log`
//!   rows.
//!
//! Memory is bounded by `auth_max_tracked_addresses` and `auth_max_known_logins`.

mod collector;
mod detect;
mod known;
mod names;
mod parse;
pub(crate) mod table;
mod thresholds;

pub use collector::{AuthCollector, StartError, COMPONENT, KEY_PREFIX, ROW};
pub use detect::{
    AuthDetector, AuthDetectorStats, CHECK_NEW_ADDRESS_LOGIN, CHECK_PAM_BRUTEFORCE,
    CHECK_SSH_BRUTEFORCE, CHECK_SSH_ROOT_LOGIN,
};
pub use parse::{parse_line, split_header, AuthEvent, AuthKind, AuthService, SyslogHeader};
pub use thresholds::{AuthThresholds, SharedThresholds, ThresholdError, KEYS};
