//! Iterative directory walk that never follows symbolic links.

use std::fs;
use std::path::{Path, PathBuf};

/// What to do with a directory the walk reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Visit {
    /// List it (after `on_dir` returned, so a watch added there is in place first).
    Descend,
    /// Leave it and everything under it.
    Skip,
}

/// Walks `top` depth-first. `on_dir` is called for each directory before it is listed;
/// `on_file` for each regular file. Unreadable or vanished directories are skipped
/// silently (they are races, not errors). Symbolic links and special files are ignored.
/// Memory is bounded by the directories `on_dir` lets through.
pub(crate) fn walk(
    top: &Path,
    mut on_dir: impl FnMut(&Path) -> Visit,
    mut on_file: impl FnMut(&Path),
) {
    let mut stack: Vec<PathBuf> = vec![top.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if on_dir(&dir) == Visit::Skip {
            continue;
        }
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(ft) = entry.file_type() else {
                continue;
            };
            if ft.is_dir() {
                stack.push(entry.path());
            } else if ft.is_file() {
                on_file(&entry.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::files::testutil::TestDir;

    #[test]
    fn visits_dirs_before_files_and_ignores_symlinks() {
        let t = TestDir::new();
        fs::create_dir_all(t.path().join("a/b")).expect("mkdir");
        fs::write(t.path().join("a/b/f"), b"x").expect("write");
        fs::write(t.path().join("top"), b"x").expect("write");
        std::os::unix::fs::symlink("/etc", t.path().join("link")).expect("symlink");
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        walk(
            t.path(),
            |d| {
                dirs.push(d.to_path_buf());
                Visit::Descend
            },
            |f| files.push(f.to_path_buf()),
        );
        dirs.sort();
        files.sort();
        assert_eq!(
            dirs,
            vec![
                t.path().to_path_buf(),
                t.path().join("a"),
                t.path().join("a/b")
            ]
        );
        assert_eq!(files, vec![t.path().join("a/b/f"), t.path().join("top")]);
    }

    #[test]
    fn skip_prunes_the_subtree() {
        let t = TestDir::new();
        fs::create_dir_all(t.path().join("skip/deep")).expect("mkdir");
        fs::write(t.path().join("skip/deep/f"), b"x").expect("write");
        let mut files = 0;
        walk(
            t.path(),
            |d| {
                if d.ends_with("skip") {
                    Visit::Skip
                } else {
                    Visit::Descend
                }
            },
            |_| files += 1,
        );
        assert_eq!(files, 0);
    }
}
