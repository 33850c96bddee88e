//! Apache, nginx and LiteSpeed error-log lines: the WAF log parser must never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = svc::waf::parse::fuzzing::errorlog(&text);
});
