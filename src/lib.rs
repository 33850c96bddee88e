//! svc: host security daemon for Linux web-hosting servers.
//!
//! See `docs/architecture.md` for the architecture (threads, data flow, module map, queue
//! rows, files on disk). Each module owns its data; the daemon builds every subsystem once
//! and passes handles down.
//!
//! The compiler holds two rules: `unsafe` appears only in `sys` (each block with a
//! `// SAFETY:` comment, `Cargo.toml` `[lints]`), and files inside trees users control are
//! touched only through `sys::dir` (clippy `disallowed-methods` in `clippy.toml`; daemon-owned
//! paths go through `fsutil`).

#![deny(unsafe_code)]
// Test fixtures are built with plain `std::fs` calls, the way an attacker would.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod abuse;
pub mod alerts;
pub mod api;
pub mod challenge;
pub mod checks;
pub mod cli;
pub mod clock;
pub mod cms;
pub mod components;
pub mod config;
pub mod crawler;
pub mod daemon;
pub mod dns;
pub mod events;
pub mod findings;
pub mod firewall;
pub mod fleet;
pub mod fsutil;
pub mod geoip;
pub mod hostfs;
pub mod http;
pub mod ids;
pub mod incidents;
#[cfg(test)]
mod layering;
pub mod lograte;
pub mod mail;
pub mod model;
pub mod net;
pub mod probes;
pub mod queue;
pub mod remedy;
pub mod scan;
pub mod store;
#[allow(unsafe_code)]
pub mod sys;
pub mod text;
pub mod threat;
pub mod timefmt;
pub mod waf;
pub mod watch;
