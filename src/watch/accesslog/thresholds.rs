//! Detector thresholds (`thresholds.http_*`) and the handle a reload sets them through.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Thresholds of the access-log detector. Each field is one key of the `[thresholds]`
/// table; [`CONFIG_KEYS`] lists them with their ranges and defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessThresholds {
    /// `thresholds.http_window_seconds`: the counting window of every check, from an
    /// address's first counted request. Default 300.
    pub window_secs: u64,
    /// `thresholds.http_wp_login_posts`: POSTs to `wp-login.php`. Default 10.
    pub wp_login_posts: u32,
    /// `thresholds.http_xmlrpc_posts`: POSTs to `xmlrpc.php`. Default 10.
    pub xmlrpc_posts: u32,
    /// `thresholds.http_user_enum_requests`: `?author=N` and REST users-route requests.
    /// Default 5.
    pub user_enum_requests: u32,
    /// `thresholds.http_scanner_probe_404s`: 404 answers to known probe paths. Default 10.
    pub scanner_probe_404s: u32,
    /// `thresholds.http_scanner_agent_requests`: requests with a scanner's user agent.
    /// Default 3.
    pub scanner_agent_requests: u32,
    /// `thresholds.http_claimed_bot_requests`: requests claiming a crawler that is not
    /// verified (pending, unresolved or unverifiable). Default 300.
    pub claimed_bot_requests: u32,
    /// `thresholds.http_max_tracked_addresses`: addresses with state kept at once; past it
    /// the least recently active is evicted (counted). Default 65,536.
    pub max_tracked_addresses: usize,
}

impl Default for AccessThresholds {
    fn default() -> Self {
        AccessThresholds {
            window_secs: 300,
            wp_login_posts: 10,
            xmlrpc_posts: 10,
            user_enum_requests: 5,
            scanner_probe_404s: 10,
            scanner_agent_requests: 3,
            claimed_bot_requests: 300,
            max_tracked_addresses: 65_536,
        }
    }
}

/// `(config key, range and meaning)` for every field of [`AccessThresholds`], in order.
pub const CONFIG_KEYS: &[(&str, &str)] = &[
    (
        "thresholds.http_window_seconds",
        "window of every access-log check, from an address's first counted request (10-86400, default 300)",
    ),
    (
        "thresholds.http_wp_login_posts",
        "POSTs to wp-login.php from one address within the window that raise wp_login_bruteforce (1-1000000, default 10)",
    ),
    (
        "thresholds.http_xmlrpc_posts",
        "POSTs to xmlrpc.php from one address within the window that raise xmlrpc_abuse (1-1000000, default 10)",
    ),
    (
        "thresholds.http_user_enum_requests",
        "?author=N and REST users-route requests from one address within the window that raise wp_user_enumeration (1-1000000, default 5)",
    ),
    (
        "thresholds.http_scanner_probe_404s",
        "404 answers to known probe paths for one address within the window that raise http_scanner_profile (1-1000000, default 10)",
    ),
    (
        "thresholds.http_scanner_agent_requests",
        "requests with a vulnerability scanner's user agent from one address within the window that raise http_scanner_profile (1-1000000, default 3)",
    ),
    (
        "thresholds.http_claimed_bot_requests",
        "requests from one address within the window claiming a crawler that is not verified, that raise http_claimed_bot_unverified (1-10000000, default 300)",
    ),
    (
        "thresholds.http_max_tracked_addresses",
        "addresses with access-log state kept at once; the least recently active is evicted (16-10000000, default 65536)",
    ),
];

/// (key, min, max) of every numeric field, in [`CONFIG_KEYS`] order.
pub const RANGES: &[(&str, u64, u64)] = &[
    ("http_window_seconds", 10, 86_400),
    ("http_wp_login_posts", 1, 1_000_000),
    ("http_xmlrpc_posts", 1, 1_000_000),
    ("http_user_enum_requests", 1, 1_000_000),
    ("http_scanner_probe_404s", 1, 1_000_000),
    ("http_scanner_agent_requests", 1, 1_000_000),
    ("http_claimed_bot_requests", 1, 10_000_000),
    ("http_max_tracked_addresses", 16, 10_000_000),
];

impl AccessThresholds {
    /// The values in [`RANGES`] order.
    pub fn to_values(&self) -> [u64; 8] {
        [
            self.window_secs,
            u64::from(self.wp_login_posts),
            u64::from(self.xmlrpc_posts),
            u64::from(self.user_enum_requests),
            u64::from(self.scanner_probe_404s),
            u64::from(self.scanner_agent_requests),
            u64::from(self.claimed_bot_requests),
            self.max_tracked_addresses as u64,
        ]
    }

    /// Thresholds from values in [`RANGES`] order, each forced into its range.
    pub fn from_values(v: [u64; 8]) -> AccessThresholds {
        let c = |i: usize| {
            let (_, lo, hi) = RANGES[i];
            v[i].clamp(lo, hi)
        };
        let u = |i: usize| u32::try_from(c(i)).unwrap_or(u32::MAX);
        AccessThresholds {
            window_secs: c(0),
            wp_login_posts: u(1),
            xmlrpc_posts: u(2),
            user_enum_requests: u(3),
            scanner_probe_404s: u(4),
            scanner_agent_requests: u(5),
            claimed_bot_requests: u(6),
            max_tracked_addresses: usize::try_from(c(7)).unwrap_or(usize::MAX),
        }
    }

    /// The same thresholds forced into range (the detector never runs with a value that
    /// disables it or exhausts memory).
    pub fn clamped(&self) -> AccessThresholds {
        AccessThresholds::from_values(self.to_values())
    }
}

/// Thresholds shared with a running detector: a reload sets them; the detector applies
/// them before its next line (one atomic load per line), keeping its state.
pub struct SharedThresholds {
    generation: AtomicU64,
    value: Mutex<AccessThresholds>,
}

impl SharedThresholds {
    pub fn new(t: AccessThresholds) -> Arc<SharedThresholds> {
        Arc::new(SharedThresholds {
            generation: AtomicU64::new(0),
            value: Mutex::new(t),
        })
    }

    pub fn set(&self, t: AccessThresholds) {
        let mut v = self.value.lock();
        if *v != t {
            *v = t;
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    pub fn get(&self) -> AccessThresholds {
        self.value.lock().clone()
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_in_range_and_keys_match_ranges() {
        let d = AccessThresholds::default();
        assert_eq!(d.clamped(), d);
        assert_eq!(CONFIG_KEYS.len(), RANGES.len());
        for ((key, _), (name, lo, hi)) in CONFIG_KEYS.iter().zip(RANGES) {
            assert_eq!(*key, format!("thresholds.{name}"));
            assert!(lo <= hi);
        }
        let z = AccessThresholds::from_values([0; 8]);
        assert_eq!(
            (z.window_secs, z.wp_login_posts, z.max_tracked_addresses),
            (10, 1, 16)
        );
    }
}
