//! DNS responses from the network: the stub resolver's parser must never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::dns::wire::{parse_response, Qtype};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let id = u16::from_be_bytes([data[0], data[1]]);
    for (name, qt) in [
        ("7.2.0.192.in-addr.arpa", Qtype::Ptr),
        ("crawl-1.googlebot.com", Qtype::A),
        ("crawl-1.googlebot.com", Qtype::Aaaa),
    ] {
        let _ = parse_response(data, id, name, qt);
    }
});
