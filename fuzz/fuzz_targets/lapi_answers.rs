//! CrowdSec LAPI answers (decisions stream, watcher login) and the Go duration texts inside
//! them come from a remote server: they must never panic on any input.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::fleet::lapi;

fuzz_target!(|data: &[u8]| {
    let _ = lapi::parse_stream(data);
    let _ = lapi::parse_login(data);
    let _ = lapi::go_duration(&String::from_utf8_lossy(data));
});
