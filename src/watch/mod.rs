//! Collectors: file events (fanotify/inotify) with the content analyzer, and logs.
pub mod analyzer;
pub mod authlog;
pub mod collectors;
pub mod files;

pub use collectors::{control_command, start_collectors, Collectors, QuarantineControl};
