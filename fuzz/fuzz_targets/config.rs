//! The config loader and the legacy migration must never panic on any text.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(table) = svc::config::parse_str(text) {
        let _ = svc::config::from_table(&table, vec![]);
    }
    if let Ok((out, _)) = svc::config::migrate::migrate_text(text) {
        // Migrating twice changes nothing the second time.
        let (again, outcome) = svc::config::migrate::migrate_text(&out).expect("migrated text parses");
        assert_eq!(outcome, svc::config::migrate::Outcome::Unchanged);
        assert_eq!(again, out);
    }
});
