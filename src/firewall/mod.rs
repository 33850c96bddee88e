//! The firewall: an nftables engine that owns table `inet svc` and nothing else.
//!
//! Guarantees:
//! - The engine never lists, changes or flushes another table: every `nft` statement and
//!   every netlink message names table `inet svc` (see `script` and `netlink`).
//! - Sets per family: addresses in hash sets with timeouts (`block4/6`, `allow4/6`), ranges
//!   in interval sets with timeouts (`blocknet4/6`, `allownet4/6`, `infra4/6`, `dosx4/6`).
//! - The store is the source of truth. Blocks, dry-run records and allow entries are stored
//!   first; nftables follows in one transaction per change (a netlink batch for elements,
//!   an `nft -f -` script for the structure). A change of 10,000 addresses is one batch.
//! - The table is re-created from the store within `firewall.check_interval_seconds`
//!   (default 2 s) after it disappears (a restart, `nft flush ruleset`, a distribution
//!   firewall reload). Row `auto_block.cleanup` counts the addresses waiting for it.
//! - Precedence in the input chain: infrastructure addresses accept, blocked addresses and
//!   subnets drop, allowed addresses accept; in `full` mode the default-drop policy follows.
//! - Infrastructure, local and loopback addresses, the default route and allow-listed
//!   addresses are never blocked (an operator gets a refusal naming the entry).
//! - Automatic callers obey `auto_response.dry_run` (default true): they record what they
//!   would block, visible in `/api/v1/blocked-ips` with `dry_run: true`; operator actions
//!   always apply.
//! - A settings change can be tentative: unless confirmed, it reverts by itself after 1-30
//!   minutes, also across a restart (see `rollback`).
//!
//! # For automatic callers (threat intelligence, WAF escalation)
//!
//! Use [`Firewall::block`] with [`Actor::Automatic`] (source `auto` or more precise) and
//! [`BlockItem`]s carrying an expiry. Each item answers an [`Outcome`]: `Blocked`,
//! `DryRun` (dry-run mode), `Unchanged` (already blocked as long or longer) or `Refused`
//! with a [`Refusal`] (`Allowed` names the allow entry). [`Firewall::check`] and
//! [`Firewall::is_allowed`] read memory only.

pub mod control;
pub mod duration;
pub mod engine;
pub mod netlink;
pub mod rollback;
pub mod script;
pub mod state;
#[cfg(test)]
pub mod testns;
#[cfg(test)]
mod tests;
pub mod types;

use std::sync::Arc;

/// The address and range type lives in the leaf `net::cidr` (config parses it too).
pub use crate::net::cidr as net;
pub use engine::{
    Actor, AllowOutcome, BlockItem, CheckResult, Firewall, FirewallError, Listed, Outcome,
    PriorBlock, Refusal,
};
pub use net::Net;

/// The only table the engine touches (family `inet`).
pub const TABLE: &str = "svc";

/// The firewall as the rest of the daemon sees it: running, or absent with the reason.
#[derive(Clone)]
pub enum Handle {
    Active(Arc<Firewall>),
    /// Why there is no engine (`firewall.enabled = false`, not root, no nftables, ...).
    Absent(String),
}

impl Handle {
    /// The engine, or the reason it is absent.
    pub fn engine(&self) -> Result<&Arc<Firewall>, &str> {
        match self {
            Handle::Active(f) => Ok(f),
            Handle::Absent(r) => Err(r),
        }
    }

    /// The message of routes and commands while the engine is absent.
    pub fn absent_message(reason: &str) -> String {
        format!("the firewall engine is not running: {reason}")
    }

    /// Rollback state for the status snapshot (memory only).
    pub fn rollback_view(&self) -> serde_json::Value {
        match self {
            Handle::Active(f) => f.rollback_view(),
            Handle::Absent(r) => serde_json::json!({ "state": "unavailable", "reason": r }),
        }
    }

    /// Stops the engine's timer (the table stays in place).
    pub fn shutdown(&self) {
        if let Handle::Active(f) = self {
            f.shutdown();
        }
    }
}

/// Blocks and dry-run records as stored, newest first (for readers while the engine is
/// absent).
pub fn stored_list(
    c: &rusqlite::Connection,
    now: jiff::Timestamp,
) -> rusqlite::Result<Vec<Listed>> {
    use crate::store::firewall::{load, Kind};
    let now = now.as_microsecond();
    let mut t = state::Tables::default();
    let mut out = Vec::new();
    for (kind, dry) in [(Kind::Block, false), (Kind::DryRun, true)] {
        for r in load(c, kind)? {
            let Ok(net) = Net::parse(&r.ip) else { continue };
            let e = t.entry(
                r.created,
                r.expires.unwrap_or(state::PERMANENT),
                &r.reason,
                &r.source,
                &r.created_by,
            );
            if e.active(now) {
                out.push(Listed {
                    net,
                    entry: e,
                    dry_run: dry,
                });
            }
        }
    }
    out.sort_by(|a, b| {
        b.entry
            .created
            .cmp(&a.entry.created)
            .then_with(|| a.net.cmp(&b.net))
    });
    Ok(out)
}

/// Starts the engine when it can run, or explains why it is absent (logged once).
pub fn start(
    cfg: &crate::config::Config,
    clock: crate::clock::SharedClock,
    store: crate::store::Store,
    registry: &Arc<crate::queue::Registry>,
) -> Handle {
    let nft = match engine::availability(&cfg.firewall) {
        Ok(p) => p,
        Err(reason) => {
            if cfg.firewall.enabled {
                log::warn!("firewall engine absent: {reason}");
            } else {
                log::info!("firewall engine absent: {reason}");
            }
            return Handle::Absent(reason.to_string());
        }
    };
    let port = cfg.webui.listen;
    let extra = if port.ip().is_loopback() {
        Vec::new()
    } else {
        vec![port.port()]
    };
    let opts = engine::Options {
        file: cfg.firewall.clone(),
        auto_dry_run: cfg.engine.auto_dry_run,
        extra_tcp_in: extra,
        nft,
    };
    match Firewall::start(opts, clock, store, registry) {
        Ok(f) => {
            log::info!(
                "firewall engine running: table inet {TABLE}, mode {}",
                f.settings().mode.as_str()
            );
            Handle::Active(f)
        }
        Err(e) => {
            log::error!("firewall engine absent: {e}");
            Handle::Absent(e.to_string())
        }
    }
}
