//! Collectors: file events (fanotify/inotify); logs come later.
pub mod files;
