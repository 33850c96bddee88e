//! Authentication-log lines: the parser and the detector must never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::watch::authlog::{parse_line, AuthDetector, AuthThresholds};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut detector = AuthDetector::new(AuthThresholds::default(), svc::clock::SystemClock::shared());
    for line in text.lines() {
        let _ = parse_line(line);
        detector.process_line(line, &mut |_| {});
    }
});
