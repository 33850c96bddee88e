//! Mixed WAF log streams (native multipart audit entries assembled across lines): the WAF log parser must never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = svc::waf::parse::fuzzing::stream(&text);
});
