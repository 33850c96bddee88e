//! Signature rule files and scanning: loading garbage rules gives an error, scanning garbage
//! content with the shipped rules never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::OnceLock;
use svc::scan::signatures::SignatureSet;

static SHIPPED: OnceLock<Option<SignatureSet>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    // Rule loading is costly; exercise it on short inputs only.
    if data.len() < 512 {
        if let Ok(text) = std::str::from_utf8(data) {
            let _ = SignatureSet::from_toml_strs(&[("fuzz.toml", text)]);
        }
    }
    if let Some(set) = SHIPPED.get_or_init(|| SignatureSet::shipped().ok()) {
        let _ = set.scan_bytes(Path::new("/var/www/x.php"), data);
        let _ = set.scan_bytes(Path::new("/var/www/.htaccess"), data);
    }
});
