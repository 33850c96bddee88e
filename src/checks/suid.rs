//! `suid_unexpected`: SUID/SGID regular files under the search roots (temp dirs, homes,
//! web roots) that are not under an expected system directory.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::context::CheckContext;
use super::sink::Sink;
use super::walk::{OwnerCache, Walker};
use crate::findings::{Finding, Severity};
use crate::hostfs::display_path;

pub const CHECK: &str = "suid_unexpected";

const S_ISUID: u32 = 0o4000;
const S_ISGID: u32 = 0o2000;

/// "SUID", "SGID", "SUID+SGID", or `None` for neither.
pub fn special_bits(mode: u32) -> Option<&'static str> {
    match (mode & S_ISUID != 0, mode & S_ISGID != 0) {
        (true, true) => Some("SUID+SGID"),
        (true, false) => Some("SUID"),
        (false, true) => Some("SGID"),
        (false, false) => None,
    }
}

fn allowed(ctx: &CheckContext, path: &Path) -> bool {
    ctx.suid_allowed_dirs.iter().any(|d| path.starts_with(d))
}

/// HIGH finding per unexpected SUID/SGID file (message names the file).
pub fn suid_unexpected(ctx: &CheckContext) -> Vec<Finding> {
    let mut sink = Sink::new(ctx, CHECK);
    let mut walker = Walker::new(ctx);
    let mut owners = OwnerCache::default();
    for root in ctx.glob_all(&ctx.suid_search_roots) {
        walker.walk(&root, &mut |path, meta| {
            if !meta.is_file() || allowed(ctx, path) {
                return;
            }
            let mode = meta.mode();
            let Some(kind) = special_bits(mode) else {
                return;
            };
            let owner = owners.name(meta.uid());
            let shown = display_path(path);
            let f = sink
                .finding(Severity::High, format!("unexpected {kind} file {shown}"))
                .with_details(format!(
                    "mode {:04o}, owner uid {}{}, gid {}, {} bytes; {kind} files outside system directories are a common privilege-escalation backdoor",
                    mode & 0o7777,
                    meta.uid(),
                    owner.as_deref().map(|o| format!(" ({o})")).unwrap_or_default(),
                    meta.gid(),
                    meta.len()
                ))
                .with_path(shown);
            sink.push_owned(f, owner);
        });
    }
    sink.finish(Some(&walker))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::Fixture;

    #[test]
    fn bits() {
        assert_eq!(special_bits(0o4755), Some("SUID"));
        assert_eq!(special_bits(0o2755), Some("SGID"));
        assert_eq!(special_bits(0o6755), Some("SUID+SGID"));
        assert_eq!(special_bits(0o755), None);
    }

    #[test]
    fn finds_suid_outside_expected_dirs() {
        let fx = Fixture::new();
        fx.write_mode("tmp/.x/rootsh", b"\x7fELF", 0o4755);
        fx.write_mode("dev/shm/g", b"", 0o2755);
        fx.write_mode("home/bob/bin/tool", b"", 0o755);
        fx.write_mode("var/www/html/a", b"", 0o6755);
        fx.mkdir("var/tmp/shared", 0o2775); // SGID directory: fine
        fx.write_mode("usr/bin/passwd", b"", 0o4755); // not under a search root
        let ctx = fx.ctx();
        let f = suid_unexpected(&ctx);
        let msgs: Vec<_> = f.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(f.len(), 3, "{msgs:?}");
        assert!(msgs
            .iter()
            .any(|m| m.starts_with("unexpected SUID file ") && m.ends_with("tmp/.x/rootsh")));
        assert!(msgs.iter().any(|m| m.starts_with("unexpected SGID file ")));
        assert!(msgs
            .iter()
            .any(|m| m.starts_with("unexpected SUID+SGID file ")));
        assert!(f.iter().all(|f| f.severity == Severity::High));
        assert!(f[0].details.contains("owner uid"));
    }

    #[test]
    fn allow_listed_dirs_are_skipped_even_under_a_search_root() {
        let fx = Fixture::new();
        fx.write_mode("usr/bin/sudo", b"", 0o4755);
        fx.write_mode("usr/local/sbin/odd", b"", 0o4755);
        let mut ctx = fx.ctx();
        ctx.suid_search_roots = vec![fx.path("usr")];
        let f = suid_unexpected(&ctx);
        assert_eq!(f.len(), 1);
        assert!(f[0].message.ends_with("usr/local/sbin/odd"));
    }

    #[test]
    fn nothing_on_a_clean_tree() {
        let fx = Fixture::new();
        fx.write_mode("tmp/a", b"", 0o755);
        assert!(suid_unexpected(&fx.ctx()).is_empty());
    }
}
