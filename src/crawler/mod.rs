//! Verified crawlers: whether a request that claims a crawler identity in its user agent
//! comes from that crawler (spec "Verified crawlers", issue 15).
//!
//! This file is the contract between the access-log collector (`watch::accesslog`), which
//! asks, and the verifier, which answers. The collector holds an `Arc<dyn BotOracle>`; the
//! daemon wires in the verifier when `reputation.bot_verify_enabled` is on and
//! [`NoVerification`] otherwise.

pub mod identity;
pub mod ranges;
pub mod updater;
pub mod verifier;

use std::net::IpAddr;

pub use crate::config::crawler::VerifierSettings;
/// Rule 1 lives in the leaf `net::guards` (config applies it to `verified_bots` too).
pub use crate::net::guards;
pub use updater::{Updater, UpdaterSettings};
pub use verifier::Verifier;

/// What is known about a request's claimed crawler identity. `name` is the identity's name
/// (`googlebot`, or an operator-defined `reputation.verified_bots` entry's `name`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BotCheck {
    /// The user agent claims no known crawler identity.
    NoClaim,
    /// Claims `name`, but nothing was or will be verified: verification is off, the
    /// identity has no method, the request queue was full, the worker is stopped, or the
    /// pending window expired. Ordinary flood and scanner controls apply (rule 4).
    Unverified { name: String },
    /// Claims `name`; a verification job is within its bounded pending window (rule 4).
    Pending { name: String },
    /// Claims `name` and the address is confirmed as that crawler (cached positive): the
    /// verified-crawler exemption applies (rule 7).
    Verified { name: String },
    /// Claims `name` and the address is confirmed not to be it (published ranges or
    /// forward-confirmed reverse DNS said no): eligible for spoof detection (rule 7).
    Spoofed { name: String },
    /// Claims `name`; DNS failed or there is no PTR record. Proves nothing (rules 5-6).
    Unresolved { name: String },
}

/// Answers [`BotCheck`] for one request. Implementations never block on the network:
/// a claim not yet verified starts (at most) one asynchronous verification and answers
/// from what is known now.
pub trait BotOracle: Send + Sync {
    fn check(&self, ip: IpAddr, user_agent: &str) -> BotCheck;
}

/// The oracle while verification is off: every request is [`BotCheck::NoClaim`], so no
/// request is exempted and none is reported as a spoof.
pub struct NoVerification;

impl BotOracle for NoVerification {
    fn check(&self, _ip: IpAddr, _user_agent: &str) -> BotCheck {
        BotCheck::NoClaim
    }
}
