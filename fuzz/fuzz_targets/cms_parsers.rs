//! CMS verification parsers: `version.php`, Joomla and Drupal version files, plugin and
//! theme headers, checksum answers, the vulnerability list and the version comparison must
//! never panic on any input.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::cms::{checksums, plugins, version, vulns};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = version::parse_wp_version(&text);
    let _ = version::parse_joomla_version(&text);
    let _ = version::parse_drupal_version(&text);
    for field in ["Plugin Name", "Theme Name", "Version"] {
        let _ = plugins::header_value(&text, field);
    }
    let (a, b) = text.split_once('\n').unwrap_or((&text, "1.0"));
    let _ = version::compare(a, b);
    let _ = version::is_older(b, a);
    let _ = checksums::parse(data, a);
    let _ = vulns::parse(data, true);
});
