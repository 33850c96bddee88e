//! `phishing_page`: brand-kit phishing pages in the web roots, found by the shipped
//! `phishing` signatures (the file watcher reports the files it sees change as `phishing`;
//! this check finds the pages already there).
//!
//! Only `.html`, `.htm` and `.php` files of at most [`MAX_PAGE_BYTES`] are read (kit pages
//! are small), at most [`MAX_PAGES`] per run; symlinks are never followed. HIGH findings,
//! one per file, the rules in the details; the account is the file's owner.

use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

use super::context::CheckContext;
use super::sink::Sink;
use super::walk::{OwnerCache, Walker};
use crate::findings::{Finding, Severity};
use crate::hostfs::display_path;
use crate::scan::signatures::SignatureSet;

pub const CHECK: &str = "phishing_page";

/// Largest page read.
pub const MAX_PAGE_BYTES: u64 = 256 * 1024;
/// Pages read per run at most.
pub const MAX_PAGES: usize = 20_000;

const PAGE_EXTENSIONS: &[&str] = &["html", "htm", "php"];

fn signatures() -> Option<&'static SignatureSet> {
    static SET: OnceLock<Option<SignatureSet>> = OnceLock::new();
    SET.get_or_init(|| SignatureSet::shipped().ok()).as_ref()
}

/// One finding per page a `phishing` signature matches.
pub fn phishing_pages(ctx: &CheckContext) -> Vec<Finding> {
    let mut sink = Sink::new(ctx, CHECK);
    let Some(set) = signatures() else {
        return sink.finish(None);
    };
    let mut walker = Walker::new(ctx);
    let mut owners = OwnerCache::default();
    let mut read = 0usize;
    for root in ctx.glob_all(&ctx.web_roots) {
        walker.walk(&root, &mut |path, meta| {
            let page = path
                .extension()
                .map(|e| e.to_string_lossy().to_ascii_lowercase())
                .is_some_and(|e| PAGE_EXTENSIONS.contains(&e.as_str()));
            if !meta.is_file() || !page || meta.len() > MAX_PAGE_BYTES || read >= MAX_PAGES {
                return;
            }
            read += 1;
            let Ok(matches) = set.scan_file(path) else {
                return;
            };
            let rules: Vec<&str> = matches
                .iter()
                .filter(|m| m.category == "phishing")
                .map(|m| m.name.as_str())
                .collect();
            if rules.is_empty() {
                return;
            }
            let shown = display_path(path);
            let f = sink
                .finding(Severity::High, format!("phishing page {shown}"))
                .with_details(format!("signatures: {}", rules.join(", ")))
                .with_path(path.to_string_lossy().into_owned());
            sink.push_owned(f, owners.name(meta.uid()));
        });
    }
    sink.finish(Some(&walker))
}
