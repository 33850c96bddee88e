//! The parsers of remote verdict sources on arbitrary answers: RDAP JSON, the reputation
//! feed, the upstream cache, the spam-filter history and threat-feed lists. They must never
//! panic, and a feed list never yields more entries than its bound.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::threat::sources::{feeds, ipfeed, rdap, spamfilter, upstream};

fuzz_target!(|data: &[u8]| {
    let _ = rdap::parse(data);
    let _ = ipfeed::parse(data);
    let _ = upstream::parse(data);
    let _ = spamfilter::parse(data);
    let text = String::from_utf8_lossy(data);
    let (nets, _skipped) = feeds::parse_list(&text, 64);
    assert!(nets.len() <= 64);
});
