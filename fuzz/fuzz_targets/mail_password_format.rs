//! Stored mailbox password values (Dovecot `{SCHEME}` prefixes, crypt formats, hex and
//! base64 digests) and the password-file layouts: parsing never panics, and a parsed value
//! verifies a short candidate within its scheme's limits.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(svc::mail::password::Field::Value(stored)) = svc::mail::password::parse(data) {
        // Bounded by the scheme limits the parser enforces (at most 64 MiB Argon2 memory,
        // bcrypt cost 14, 1,000,000 SHA-crypt rounds): keep the fuzzer fast by verifying
        // only the cheap ones.
        if stored.cost_units() <= 1_000 {
            let _ = svc::mail::password::verify(&stored, b"password");
        }
    }
    // The same bytes as a password file (Dovecot passwd-file and panel shadow layouts).
    let mut entries = Vec::new();
    let mut stats = Default::default();
    svc::mail::password::files::parse_file(
        std::path::Path::new("/etc/dovecot/users"),
        data,
        &mut entries,
        &mut stats,
    );
});
