//! Test helpers: unique temporary directories removed on drop.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A fresh directory under the system temp dir, unique to this process and call, created
/// with `create_dir` (fails rather than reuse an existing one). Canonical path.
pub(crate) struct TestDir(PathBuf);

impl TestDir {
    pub(crate) fn new() -> TestDir {
        let base = std::env::temp_dir();
        loop {
            let n = NEXT.fetch_add(1, Ordering::SeqCst);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let p = base.join(format!("svc-filewatch-{}-{n}-{nanos}", std::process::id()));
            if std::fs::create_dir(&p).is_ok() {
                let c = std::fs::canonicalize(&p).expect("canonicalize test dir");
                return TestDir(c);
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
