//! Integration tests: one binary (one link) whose modules start the real `svc` binary and
//! talk to it over real TLS. Shared helpers live in `common`.

mod common;

mod auth;
mod authlog;
mod data;
mod engine;
mod events;
mod history;
mod incidents;
mod ingest;
mod lifecycle;
mod server;
