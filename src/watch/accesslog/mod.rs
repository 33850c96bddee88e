//! Access-log collector: follows Apache, Nginx and LiteSpeed access logs (and panels'
//! per-domain logs) and reports WordPress login floods, XML-RPC abuse, user enumeration,
//! scanner profiles and crawler identities that are spoofed or unverified.
//!
//! Parts:
//! - [`parse_line_as`]: access-log line -> [`AccessLine`] in its file's [`Layout`] (`common`,
//!   `combined`, vhost-prefixed, decided per file; no regex, zero-copy, never panics);
//! - [`classify`](classify::classify): which checks a request counts towards;
//! - [`AccessDetector`]: requests -> findings `wp_login_bruteforce`, `xmlrpc_abuse`,
//!   `wp_user_enumeration`, `http_scanner_profile`, `http_ua_spoof`,
//!   `http_claimed_bot_unverified`, with [`AccessThresholds`] (keys in [`NAMES`]), an
//!   injected clock and a [`crate::crawler::BotOracle`];
//! - [`logs`]: which files to follow (`logs.access` paths and glob patterns, or the
//!   detected web servers' and panels' logs);
//! - [`AccessCollector`]: the daemon's collector on the shared log tail
//!   ([`crate::watch::tail`]), thread `access-log`, rows `access_log.file_source` and
//!   `access_log`; glob patterns are expanded again every [`RESCAN_EVERY`] so that a new
//!   domain's log is followed.
//!
//! Memory is bounded by `thresholds.http_max_tracked_addresses`.

pub mod classify;
mod collector;
mod detect;
pub mod logs;
mod parse;
mod thresholds;

pub use collector::{
    AccessCollector, AccessHandler, StartError, COMPONENT, KEY_PREFIX, RESCAN_EVERY, ROW,
};
pub use detect::{
    AccessDetector, AccessStats, BOT_FINAL_SECS, BOT_PROVISIONAL_SECS, CHECKS,
    CHECK_BOT_UNVERIFIED, CHECK_SCANNER, CHECK_UA_SPOOF, CHECK_USER_ENUM, CHECK_WP_LOGIN,
    CHECK_XMLRPC,
};
pub use parse::{parse_line, parse_line_as, AccessLine, Error as ParseError, Layout};
pub use thresholds::{AccessThresholds, SharedThresholds, NAMES};
