//! Published crawler range feeds and snapshots: the parsers must never panic, and every
//! range they return passes the guards.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::crawler::guards::check_range;
use svc::crawler::ranges::{parse_feed, RangeSet};

fuzz_target!(|data: &[u8]| {
    if let Ok((nets, _)) = parse_feed(data) {
        assert!(nets.iter().all(|n| check_range(n).is_ok()));
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok((set, _)) = RangeSet::parse(text) {
            assert!(set.crawlers.values().flatten().all(|n| check_range(n).is_ok()));
        }
        let _ = svc::crawler::guards::check_rdns_suffix(text);
    }
});
