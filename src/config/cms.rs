//! `[cms]`: the content-management-system verification keys (`checksums_url`,
//! `vulnerability_file`), both live on reload.
//!
//! `checksums_url` is checked like a webhook URL (`https://`, or `http://` to loopback
//! only) and must carry no query of its own: the verifier appends `?version=V&locale=L`.

use std::path::PathBuf;

use super::reader::{Errors, TableReader};

/// `[cms]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmsConfig {
    /// `cms.checksums_url`: the WordPress core checksum source.
    pub checksums_url: String,
    /// `cms.vulnerability_file`; `None`: the updated list under `state_path`, else the
    /// shipped one.
    pub vulnerability_file: Option<PathBuf>,
}

impl Default for CmsConfig {
    /// The defaults of `config::keys::KEYS`.
    fn default() -> Self {
        read(&mut TableReader::new(None, ""), &mut Errors::default())
    }
}

/// Reads `[cms]` from the root table.
pub(super) fn read(root: &mut TableReader<'_>, errs: &mut Errors) -> CmsConfig {
    let mut t = root.table("cms", errs);
    let checksums_url = t.string("checksums_url", errs);
    if let Err(e) = super::alerts::validate_webhook_url(&checksums_url) {
        errs.push(t.key("checksums_url"), e);
    } else if checksums_url.contains(['?', '#']) {
        errs.push(
            t.key("checksums_url"),
            "must have no query or fragment (`?version=V&locale=L` is appended)",
        );
    }
    let file = t.string("vulnerability_file", errs);
    let vulnerability_file = if file.is_empty() {
        None
    } else if !file.starts_with('/') {
        errs.push(t.key("vulnerability_file"), "must be an absolute path");
        None
    } else {
        Some(PathBuf::from(file))
    };
    t.finish(errs);
    CmsConfig {
        checksums_url,
        vulnerability_file,
    }
}

#[cfg(test)]
mod tests {
    use crate::config::from_text;

    const BASE: &str = "state_path = \"/tmp/x\"\n";

    #[test]
    fn defaults_and_url_rules() {
        let c = from_text(BASE).unwrap();
        assert_eq!(
            c.cms.checksums_url,
            "https://api.wordpress.org/core/checksums/1.0/"
        );
        assert_eq!(c.cms.vulnerability_file, None);
        let c = from_text(&format!(
            "{BASE}[cms]\nchecksums_url = \"http://127.0.0.1:9/sums\"\nvulnerability_file = \"/etc/svc/v.json\"\n"
        ))
        .unwrap();
        assert_eq!(c.cms.checksums_url, "http://127.0.0.1:9/sums");
        for bad in [
            "checksums_url = \"http://sums.example.com/\"",
            "checksums_url = \"https://sums.example.com/?version=1\"",
            "vulnerability_file = \"v.json\"",
        ] {
            let e = from_text(&format!("{BASE}[cms]\n{bad}\n")).unwrap_err();
            assert!(e.to_string().contains("cms."), "{bad}: {e}");
        }
    }
}
