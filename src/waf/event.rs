//! [`WafEvent`] (one rule match a web server logged; defined in the leaf module
//! `model::waf_event` so the store keeps it without importing `waf`), and [`WafSink`],
//! where deny events go beyond the WAF's own store (the threat-intelligence attack
//! database, wired by the daemon).

pub use crate::model::waf_event::{
    Action, Format, WafEvent, MAX_HOST, MAX_MESSAGE, MAX_METHOD, MAX_UNIQUE_ID, MAX_URI,
};

/// Receives every deny event the WAF log collector reads (after de-duplication), on the
/// collector's thread. The threat-intelligence attack database implements it to record a
/// "WAF block" event per deny; the daemon installs it at start.
///
/// Implementations must return quickly and never block on I/O (queue the event and return);
/// a slow sink slows the collector, never loses lines.
pub trait WafSink: Send + Sync {
    fn waf_deny(&self, event: &WafEvent);
}
