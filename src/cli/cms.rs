//! `svc update-cms-vulnerabilities --from FILE|URL`: replaces the vulnerability list of the
//! plugin inventory, as `svc update-bot-ranges` replaces the crawler ranges.
//!
//! The source is read (a file, or an `https://` URL, `http://` only to loopback, under the
//! list's size cap and `reputation.timeout_seconds`), checked with the daemon's own parser
//! (at least one usable entry) and written atomically (mode 0644) to `cms.vulnerability_file`,
//! or to `state_path/cms-vulnerabilities.json` when that key is unset. The daemon reads the
//! list at each deep scan, so nothing needs applying. Exit 1 when nothing was written.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::Args;
use crate::cms::vulns;

fn fetch(cfg: &crate::config::Config, url: &str) -> Result<Vec<u8>, String> {
    crate::config::alerts::validate_webhook_url(url).map_err(|e| format!("--from {e}"))?;
    let roots = crate::net::https::Roots::load(cfg.reputation.ca_file.as_deref())
        .map_err(|e| e.to_string())?;
    let client = crate::net::https::Client::new(
        url,
        &roots,
        Duration::from_secs(cfg.reputation.timeout_seconds),
        vulns::MAX_LIST_BYTES,
        0,
    );
    let got = client
        .get(url, &[("accept", "application/json")])
        .map_err(|e| e.to_string())?;
    if got.status != 200 {
        return Err(format!("the source answered HTTP {}", got.status));
    }
    Ok(got.body)
}

pub fn update_vulnerabilities(flags: &Args) -> i32 {
    let what = "svc update-cms-vulnerabilities";
    let Some(source) = flags.value("from") else {
        eprintln!("{what}: --from FILE|URL is required");
        return 2;
    };
    let cfg = match super::crawler::load(flags, what) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let bytes = if source.starts_with("https://") || source.starts_with("http://") {
        fetch(&cfg, source)
    } else {
        vulns::read_bytes(Path::new(source)).map_err(|e| e.to_string())
    };
    let bytes = match bytes {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{what}: {e}; the list in force was not changed");
            return 1;
        }
    };
    let list = match vulns::parse(&bytes, false) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{what}: {e}; the list in force was not changed");
            return 1;
        }
    };
    let target = vulns::target_path(cfg.cms.vulnerability_file.as_deref(), &cfg.state_path);
    if let Err(e) = crate::fsutil::write_atomic(&target, &bytes, 0o644, None) {
        eprintln!("{what}: cannot write {}: {e}", target.display());
        return 1;
    }
    if flags.json {
        super::out(&format!(
            "{}\n",
            json!({ "written": target, "entries": list.entries.len(), "refused": list.refused })
        ));
    } else {
        super::out(&format!(
            "wrote {} ({} entries, {} refused); the daemon reads it at the next deep scan\n",
            target.display(),
            list.entries.len(),
            list.refused
        ));
    }
    0
}
