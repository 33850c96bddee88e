//! The access-log detector's thresholds (`thresholds.http_*`): one field per key, each
//! forced into the key table's range (`watch::accesslog` runs with them).

/// Thresholds of the access-log detector. Each field is one key of the `[thresholds]`
/// table ([`NAMES`]); `config::keys::KEYS` holds their ranges and defaults.
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
    /// The defaults of `config::keys::KEYS`.
    fn default() -> Self {
        AccessThresholds::from_values(
            NAMES.map(|name| super::keys::int_default(&format!("thresholds.{name}")) as u64),
        )
    }
}

/// The `[thresholds]` key of every field, in field order; defaults, ranges and meaning are
/// in `config::keys::KEYS`.
pub const NAMES: [&str; 8] = [
    "http_window_seconds",
    "http_wp_login_posts",
    "http_xmlrpc_posts",
    "http_user_enum_requests",
    "http_scanner_probe_404s",
    "http_scanner_agent_requests",
    "http_claimed_bot_requests",
    "http_max_tracked_addresses",
];

/// The range of `thresholds.<name>` in the key table.
fn range(name: &str) -> (u64, u64) {
    match super::keys::find(&format!("thresholds.{name}")).map(|k| k.kind) {
        Some(super::keys::Kind::Int(lo, hi)) => (lo.max(0) as u64, hi.max(0) as u64),
        _ => (0, u64::MAX),
    }
}

impl AccessThresholds {
    /// The values in [`NAMES`] order.
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

    /// Thresholds from values in [`NAMES`] order, each forced into its range.
    pub fn from_values(v: [u64; 8]) -> AccessThresholds {
        let c = |i: usize| {
            let (lo, hi) = range(NAMES[i]);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_in_range_and_keys_match_ranges() {
        let d = AccessThresholds::default();
        assert_eq!(d.clamped(), d);
        assert_eq!(d.window_secs, 300);
        for name in NAMES {
            let (lo, hi) = range(name);
            assert!(lo <= hi && hi < u64::MAX, "{name} is in the key table");
        }
        let z = AccessThresholds::from_values([0; 8]);
        assert_eq!(
            (z.window_secs, z.wp_login_posts, z.max_tracked_addresses),
            (10, 1, 16)
        );
    }
}
