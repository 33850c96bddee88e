//! Bounded directory walks that never follow symlinks.
//!
//! Guarantees: one [`Walker`] looks at no more than `max_walk_entries` directory entries in
//! total (all roots of one check run) and descends no deeper than `max_walk_depth`; symlinks
//! inside a tree are never followed nor reported to the visitor; a root that is itself a
//! symlink is followed only when the link is owned by root (uid 0), so a user cannot point a
//! configured root elsewhere; each directory (device, inode) is entered once; permission
//! errors and files vanishing mid-walk are counted and skipped. Entries are visited sorted
//! by name within a directory.

use std::collections::HashSet;
use std::fs::{self, Metadata};
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::context::{count, CheckContext};

pub struct Walker<'a> {
    ctx: &'a CheckContext,
    remaining: usize,
    walked: usize,
    truncated: bool,
    visited: HashSet<(u64, u64)>,
}

impl<'a> Walker<'a> {
    pub fn new(ctx: &'a CheckContext) -> Walker<'a> {
        Walker {
            ctx,
            remaining: ctx.limits.max_walk_entries,
            walked: 0,
            truncated: false,
            visited: HashSet::new(),
        }
    }

    /// True once the entry budget stopped a walk with entries left unseen.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// Entries looked at so far.
    pub fn walked(&self) -> usize {
        self.walked
    }

    fn io_error(&self, e: &std::io::Error) {
        if e.kind() != ErrorKind::NotFound {
            count(&self.ctx.counters().read_errors, 1);
        }
    }

    fn root_metadata(&self, root: &Path) -> Option<Metadata> {
        let lmeta = match fs::symlink_metadata(root) {
            Ok(m) => m,
            Err(e) => {
                self.io_error(&e);
                return None;
            }
        };
        if !lmeta.file_type().is_symlink() {
            return Some(lmeta);
        }
        if lmeta.uid() != 0 {
            count(&self.ctx.counters().symlinks_skipped, 1);
            return None;
        }
        fs::metadata(root).map_err(|e| self.io_error(&e)).ok()
    }

    /// Walks `root` recursively, calling `visit` for every non-symlink entry below it (files
    /// and directories; the root itself only when it is not a directory).
    pub fn walk(&mut self, root: &Path, visit: &mut dyn FnMut(&Path, &Metadata)) {
        let Some(meta) = self.root_metadata(root) else {
            return;
        };
        if !meta.is_dir() {
            visit(root, &meta);
            return;
        }
        if !self.visited.insert((meta.dev(), meta.ino())) {
            return;
        }
        let max_depth = self.ctx.limits.max_walk_depth;
        let mut stack = vec![(root.to_path_buf(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            if self.truncated {
                break;
            }
            let entries = self.read_dir_bounded(&dir);
            for (path, m) in entries.into_iter().rev() {
                visit(&path, &m);
                if m.is_dir() {
                    if depth + 1 > max_depth {
                        count(&self.ctx.counters().depth_refused, 1);
                    } else if self.visited.insert((m.dev(), m.ino())) {
                        stack.push((path, depth + 1));
                    }
                }
            }
        }
    }

    /// Lists the entries directly inside `dir` (bounded, symlinks skipped).
    pub fn list(&mut self, dir: &Path) -> Vec<(PathBuf, Metadata)> {
        match self.root_metadata(dir) {
            Some(m) if m.is_dir() => self.read_dir_bounded(dir),
            _ => Vec::new(),
        }
    }

    fn read_dir_bounded(&mut self, dir: &Path) -> Vec<(PathBuf, Metadata)> {
        let rd = match fs::read_dir(dir) {
            Ok(r) => r,
            Err(e) => {
                self.io_error(&e);
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        let mut seen = 0u64;
        for entry in rd {
            if self.remaining == 0 {
                if !self.truncated {
                    self.truncated = true;
                    count(&self.ctx.counters().walks_truncated, 1);
                }
                break;
            }
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    // A failing readdir does not recover; stop this directory.
                    self.io_error(&e);
                    break;
                }
            };
            self.remaining -= 1;
            self.walked += 1;
            seen += 1;
            // DirEntry::metadata does not traverse symlinks on Unix.
            let meta = match entry.metadata() {
                Ok(m) => m,
                Err(e) => {
                    self.io_error(&e);
                    continue;
                }
            };
            if meta.file_type().is_symlink() {
                count(&self.ctx.counters().symlinks_skipped, 1);
                continue;
            }
            out.push((entry.path(), meta));
        }
        count(&self.ctx.counters().entries_walked, seen);
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

pub use crate::hostfs::OwnerCache;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::{test_ctx, Fixture};

    fn collect(ctx: &CheckContext, root: &Path) -> (Vec<PathBuf>, bool) {
        let mut w = Walker::new(ctx);
        let mut seen = Vec::new();
        w.walk(root, &mut |p, _| seen.push(p.to_path_buf()));
        seen.sort();
        (seen, w.truncated())
    }

    #[test]
    fn walks_without_following_symlinks() {
        let fx = Fixture::new();
        fx.write("r/a/f1", b"");
        fx.write("r/b", b"");
        fx.write("outside/secret", b"");
        fx.symlink(&fx.path("outside"), "r/link_dir");
        fx.symlink(&fx.path("outside/secret"), "r/link_file");
        fx.symlink(&fx.path("nowhere"), "r/dangling");
        let ctx = test_ctx();
        let (seen, truncated) = collect(&ctx, &fx.path("r"));
        assert!(!truncated);
        assert_eq!(
            seen,
            vec![fx.path("r/a"), fx.path("r/a/f1"), fx.path("r/b")]
        );
        assert_eq!(ctx.counters().snapshot().symlinks_skipped, 3);
    }

    #[test]
    fn entry_budget_truncates_and_is_counted() {
        let fx = Fixture::new();
        for i in 0..10 {
            fx.write(&format!("r/f{i}"), b"");
        }
        let mut ctx = test_ctx();
        ctx.limits.max_walk_entries = 4;
        let (seen, truncated) = collect(&ctx, &fx.path("r"));
        assert!(truncated);
        assert_eq!(seen.len(), 4);
        assert_eq!(ctx.counters().snapshot().walks_truncated, 1);
        // Exactly at the limit is not truncation.
        ctx.limits.max_walk_entries = 10;
        assert!(!collect(&ctx, &fx.path("r")).1);
    }

    #[test]
    fn depth_limit_is_enforced_and_counted() {
        let fx = Fixture::new();
        fx.write("r/1/2/3/deep", b"");
        let mut ctx = test_ctx();
        ctx.limits.max_walk_depth = 2;
        let (seen, _) = collect(&ctx, &fx.path("r"));
        assert_eq!(
            seen,
            vec![fx.path("r/1"), fx.path("r/1/2"), fx.path("r/1/2/3")]
        );
        assert_eq!(ctx.counters().snapshot().depth_refused, 1);
    }

    #[test]
    fn missing_root_and_overlapping_roots() {
        let fx = Fixture::new();
        fx.write("r/sub/f", b"");
        let ctx = test_ctx();
        let mut w = Walker::new(&ctx);
        let mut n = 0;
        w.walk(&fx.path("missing"), &mut |_, _| n += 1);
        w.walk(&fx.path("r"), &mut |_, _| n += 1);
        w.walk(&fx.path("r/sub"), &mut |_, _| n += 1);
        assert_eq!(n, 2);
        assert_eq!(ctx.counters().snapshot().read_errors, 0);
    }

    #[test]
    fn owner_cache_resolves_root() {
        let mut c = OwnerCache::default();
        assert_eq!(c.name(0).as_deref(), Some("root"));
    }
}
