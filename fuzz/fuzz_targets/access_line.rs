//! Access-log lines: the parser, the classifier and the detector (with an oracle that
//! answers every crawler state) must never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::net::IpAddr;
use std::sync::Arc;
use svc::crawler::{BotCheck, BotOracle};
use svc::watch::accesslog::{classify::classify, parse_line, AccessDetector, AccessThresholds};

/// Answers from the last byte of the user agent, so every branch is reachable.
struct Any;

impl BotOracle for Any {
    fn check(&self, _ip: IpAddr, ua: &str) -> BotCheck {
        let name = "fuzzbot".to_string();
        match ua.bytes().last().unwrap_or(0) % 6 {
            0 => BotCheck::NoClaim,
            1 => BotCheck::Verified { name },
            2 => BotCheck::Spoofed { name },
            3 => BotCheck::Pending { name },
            4 => BotCheck::Unresolved { name },
            _ => BotCheck::Unverified { name },
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let th = AccessThresholds {
        wp_login_posts: 1,
        xmlrpc_posts: 1,
        user_enum_requests: 1,
        scanner_probe_404s: 1,
        scanner_agent_requests: 1,
        claimed_bot_requests: 1,
        ..AccessThresholds::default()
    };
    let mut detector = AccessDetector::new(th, svc::clock::SystemClock::shared(), Arc::new(Any));
    for line in text.lines() {
        if let Ok(l) = parse_line(line) {
            let _ = classify(&l);
            let _ = (l.path(), l.query());
        }
        detector.process_line(line, &mut |_| {});
    }
});
