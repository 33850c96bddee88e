//! Signature rule files and scanning: loading garbage rules gives an error, scanning garbage
//! content with the shipped rules never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use svc::scan::signatures::SignatureSet;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = SignatureSet::from_toml_strs(&[("fuzz.toml", text)]);
    }
    if let Ok(set) = SignatureSet::shipped() {
        let _ = set.scan_bytes(Path::new("/var/www/x.php"), data);
        let _ = set.scan_bytes(Path::new("/var/www/.htaccess"), data);
    }
});
