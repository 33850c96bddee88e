//! Integration tests: one binary (one link) whose modules start the real `svc` binary and
//! talk to it over real TLS. Shared helpers live in `common`.

#![allow(
    clippy::disallowed_methods,
    reason = "test and benchmark fixtures are built with plain std::fs calls, as an attacker would"
)]

mod common;

mod abuse;
mod accesslog;
mod apisec;
mod auth;
mod authlog;
mod browser;
mod challenge;
mod cms;
mod console;
mod containment;
mod control;
mod crawler;
mod data;
mod engine;
mod events;
mod firewall;
mod fleet;
mod framing;
mod front;
mod history;
mod incidents;
mod ingest;
mod injection;
mod integrity;
mod lifecycle;
mod mail;
mod mail_accounts;
mod mail_password;
mod notify;
mod persist;
mod probes;
mod quarantine;
mod reload;
mod remedy;
mod server;
mod settings;
mod sitedb;
mod taint;
mod threat;
mod waf;
mod watcher;
mod webtraffic;
