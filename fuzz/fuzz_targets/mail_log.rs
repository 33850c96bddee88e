//! Mail-log lines (Exim mainlog, Postfix mail.log): the parser and the ledger must never
//! panic, and the ledger stays within its bounds.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::mail::log::ledger::{Ledger, LedgerSettings};
use svc::mail::log::parse_line;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut ledger = Ledger::new(
        LedgerSettings { hourly_limit: 2, auth_failures: 2 },
        svc::clock::SystemClock::shared(),
        jiff::tz::TimeZone::UTC,
    );
    for line in text.lines() {
        if let Some(p) = parse_line(line) {
            ledger.handle(&p, &mut |_| {});
        }
    }
    let _ = ledger.take_writes();
});
