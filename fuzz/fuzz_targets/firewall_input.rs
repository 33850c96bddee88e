//! Fuzz target for the firewall's parsers of outside input: addresses and CIDR ranges,
//! lifetimes (`15m`), port ranges, tentative settings changes (JSON), and netlink replies.
//!
//! Run from the repository root: `cargo fuzz run firewall_input`.
//! The first input byte picks the parser; the rest is its input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use svc::config::firewall::FirewallConfig;
use svc::firewall::net::{Net, PortRange};
use svc::firewall::{duration, netlink};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    if which % 4 == 3 {
        let _ = netlink::parse_for_fuzz(rest);
        return;
    }
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match which % 4 {
        0 => {
            if let Ok(n) = Net::parse(text) {
                // Printing and parsing round-trip; containment is consistent.
                assert_eq!(Net::parse(&n.to_string()), Ok(n));
                assert!(n.contains(&n) && n.contains_ip(n.first()) && n.contains_ip(n.last()));
            }
        }
        1 => {
            if let Ok(d) = duration::parse(text) {
                assert!(d <= duration::MAX && d.as_secs() >= 1);
            }
            let _ = PortRange::parse(text);
        }
        _ => {
            if let Ok(serde_json::Value::Object(changes)) = serde_json::from_str(text) {
                let file = FirewallConfig::default();
                let _ = file.with_changes(&file, &changes);
            }
        }
    }
});
