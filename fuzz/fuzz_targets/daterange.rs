//! Fuzz target for the `from` / `to` date-range parser.
//!
//! Run from the repository root: `cargo fuzz run daterange`.
//! The first input byte picks the split point and which bounds are present; the rest, if
//! valid UTF-8, is split in two at a character boundary.
#![no_main]

use jiff::tz::TimeZone;
use libfuzzer_sys::fuzz_target;
use svc::api::daterange::{day_bounds, parse_range};

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let mut split = usize::from(control >> 2).min(text.len());
    while !text.is_char_boundary(split) {
        split -= 1;
    }
    let (a, b) = text.split_at(split);
    let from = (control & 1 == 0).then_some(a);
    let to = (control & 2 == 0).then_some(b);

    let zones = [
        TimeZone::UTC,
        TimeZone::get("America/Santiago").unwrap_or(TimeZone::UTC),
        // Gap and fold across midnight.
        TimeZone::posix("AAA3BBB,M9.1.0/23:30,M4.1.0/24:30").unwrap_or(TimeZone::UTC),
    ];
    for tz in &zones {
        match parse_range(from, to, tz) {
            Ok(r) => {
                if let (Some(f), Some(t)) = (r.from, r.to_exclusive) {
                    assert_eq!(r.empty, f >= t);
                }
                if let Some(f) = r.from {
                    let d = tz.to_datetime(f).date();
                    let (s, e) = day_bounds(d, tz);
                    assert!(s <= e);
                }
            }
            Err(e) => {
                let text = e.to_string();
                assert!(text.starts_with("from: ") || text.starts_with("to: "));
                assert!(e.message.len() <= 64 * 12 + 200, "echo is bounded");
            }
        }
    }
});
