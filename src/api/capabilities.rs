//! `GET /api/v1/capabilities`: the feature identifiers of this build.
//!
//! Guarantees:
//! - The list is [`CAPABILITIES`], a constant: it is the same for the whole life of the
//!   process (an identifier never disappears at runtime, not even during shutdown), and
//!   `/api/v1/status` `capabilities` is the same list.
//! - It names only identifiers of the specification (Versioning 2, [`SPEC_IDENTIFIERS`]) whose
//!   feature this build has, end to end. A feature that lands adds its identifier here, in
//!   the same change (for example `firewall.rollback.v1`, `firewall.dos_exempt.v1` on Linux,
//!   `webhook.panel.v1`).

/// Feature identifiers this build supports, sorted. The one place to add one.
pub const CAPABILITIES: &[&str] = &[
    // `GET /api/v1/challenge/stats` (api/challenge.rs).
    "challenge.stats.v1",
    // `conf.d/*.toml` drop-ins beside the main file (config/mod.rs).
    "confd.dropins.v1",
    // `http_scanner_profile` findings from the access-log collector (watch/accesslog).
    "detect.http_scanner_profile.v1",
    // `GET /api/v1/events` (events/).
    "events.sse.v1",
    // `firewall.dos_exempt_ranges` skip the rate meters (firewall/): the firewall exists on
    // Linux builds only, so only they advertise it.
    #[cfg(target_os = "linux")]
    "firewall.dos_exempt.v1",
    // Tentative firewall settings with a revert timer (firewall/rollback.rs).
    "firewall.rollback.v1",
    // `/api/v1/email/queue-composition`: queue by sender domain and bounce share
    // (mail/log/queue.rs).
    "mail.queue.composition.v1",
    // `status.queues` protection-queue rows (queue/).
    "status.queue_health.v1",
    // Durable webhook spool, replayed after a restart (alerts/spool.rs, `panel.spool`).
    "webhook.panel.v1",
    // Console preferences per credential: `/api/v1/prefs/user`, `/api/v1/prefs/views`
    // (api/prefs.rs).
    "webui.prefs.v1",
    // Undo of threat changes: `undo_token`, `/api/v1/undo/pending`, `/api/v1/undo/run`
    // (threat/undo.rs, api/undo.rs).
    "webui.undo.v1",
];

/// Every identifier the specification names (Versioning 2). A capability outside this
/// list is an invention, refused by the tests.
pub const SPEC_IDENTIFIERS: &[&str] = &[
    "confd.dropins.v1",
    "events.sse.v1",
    "webhook.panel.v1",
    "webui.prefs.v1",
    "webui.undo.v1",
    "mail.queue.composition.v1",
    "detect.http_scanner_profile.v1",
    "challenge.stats.v1",
    "firewall.rollback.v1",
    "firewall.dos_exempt.v1",
    "status.queue_health.v1",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 41 item 6: the firewall exists on Linux builds only.
    #[test]
    fn dos_exempt_only_where_the_firewall_exists() {
        assert_eq!(
            CAPABILITIES.contains(&"firewall.dos_exempt.v1"),
            cfg!(target_os = "linux")
        );
    }

    #[test]
    fn only_spec_identifiers_sorted_and_unique() {
        for c in CAPABILITIES {
            assert!(SPEC_IDENTIFIERS.contains(c), "{c} is not in the spec");
        }
        let mut sorted = CAPABILITIES.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, CAPABILITIES, "keep the list sorted and unique");
    }

    /// A spec identifier whose route is in the route table is advertised (issue 23 item
    /// 10: `challenge.stats.v1` was routed but missing).
    #[test]
    fn routed_features_are_advertised() {
        let routed = [
            ("challenge.stats.v1", "/api/v1/challenge/stats"),
            ("events.sse.v1", "/api/v1/events"),
            ("firewall.rollback.v1", "/api/v1/settings/firewall/rollback"),
            (
                "mail.queue.composition.v1",
                "/api/v1/email/queue-composition",
            ),
            ("webui.undo.v1", "/api/v1/undo/run"),
            ("webui.prefs.v1", "/api/v1/prefs/user"),
        ];
        for (cap, path) in routed {
            assert!(
                crate::api::ROUTES.iter().any(|r| r.path == path),
                "{path} is not routed"
            );
            assert!(
                CAPABILITIES.contains(&cap),
                "{cap} ({path}) is not advertised"
            );
        }
    }
}
