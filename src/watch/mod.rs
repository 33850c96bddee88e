//! Collectors: file events (fanotify/inotify) with the content analyzer, and logs (every log
//! collector follows its files through the shared tail, `tail`).
pub mod accesslog;
pub mod analyzer;
pub mod authlog;
pub mod collectors;
pub mod dropper;
pub mod files;
pub mod staged;
pub mod tail;
pub mod taint;

pub use collectors::{start_collectors, CollectorError, Collectors};
