//! `executable_in_uploads`: programs in the upload and configuration directories of the web
//! roots (a directory named `uploads`, `upload`, `config` or `conf` on the way): ELF
//! binaries, and scripts with a `#!` line and an execute bit. Sites keep media and settings
//! there, never programs; a binary there is a dropped miner, proxy or backdoor.
//!
//! The first bytes of at most [`MAX_OPENED`] candidate files are read per run, through
//! `sys::dir` (no symlink followed). HIGH findings, one per file; the account is the owner.

use std::io::Read;
use std::os::unix::fs::MetadataExt;

use super::context::CheckContext;
use super::sink::Sink;
use super::walk::{OwnerCache, Walker};
use crate::findings::{Finding, Severity};
use crate::hostfs::display_path;

pub const CHECK: &str = "executable_in_uploads";

/// Candidate files opened per run at most.
pub const MAX_OPENED: usize = 20_000;

const DIRS: &[&str] = &["uploads", "upload", "config", "conf"];

/// What the first bytes and the mode say the file is, if a program.
pub fn program_kind(head: &[u8], mode: u32) -> Option<&'static str> {
    if head.starts_with(b"\x7fELF") {
        Some("ELF binary")
    } else if head.starts_with(b"#!") && mode & 0o111 != 0 {
        Some("executable script")
    } else {
        None
    }
}

/// One finding per program in an upload or configuration directory.
pub fn executables(ctx: &CheckContext) -> Vec<Finding> {
    let mut sink = Sink::new(ctx, CHECK);
    let mut walker = Walker::new(ctx);
    let mut owners = OwnerCache::default();
    let mut opened = 0usize;
    for root in ctx.glob_all(&ctx.web_roots) {
        walker.walk(&root, &mut |path, meta| {
            if !meta.is_file() || meta.len() < 4 || opened >= MAX_OPENED {
                return;
            }
            let in_dir = path
                .strip_prefix(&root)
                .ok()
                .and_then(|rel| rel.parent())
                .is_some_and(|dirs| {
                    dirs.iter()
                        .any(|c| DIRS.contains(&c.to_string_lossy().to_ascii_lowercase().as_str()))
                });
            if !in_dir {
                return;
            }
            opened += 1;
            let Ok(file) = crate::sys::dir::open_regular_trusted(path, false) else {
                return;
            };
            let mut head = [0u8; 4];
            if file.take(4).read_exact(&mut head).is_err() {
                return;
            }
            let Some(kind) = program_kind(&head, meta.mode()) else {
                return;
            };
            let shown = display_path(path);
            let f = sink
                .finding(
                    Severity::High,
                    format!("executable in an upload or config directory: {shown}"),
                )
                .with_details(format!(
                    "{kind}, {} bytes, mode {:04o}",
                    meta.len(),
                    meta.mode() & 0o7777
                ))
                .with_path(path.to_string_lossy().into_owned());
            sink.push_owned(f, owners.name(meta.uid()));
        });
    }
    sink.finish(Some(&walker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_by_their_first_bytes() {
        assert_eq!(program_kind(b"\x7fELF", 0o644), Some("ELF binary"));
        assert_eq!(program_kind(b"#!/b", 0o755), Some("executable script"));
        assert_eq!(program_kind(b"#!/b", 0o644), None);
        assert_eq!(program_kind(b"\x89PNG", 0o755), None);
    }
}
