//! Content scanning: shipped content signatures and file quarantine.
pub mod quarantine;
pub mod signatures;
pub mod taint;

#[cfg(test)]
pub(crate) mod testdir {
    //! A fresh, private temporary directory per test, removed on drop.
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU64, Ordering};

    static NEXT: AtomicU64 = AtomicU64::new(0);

    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new(tag: &str) -> TempDir {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let n = NEXT.fetch_add(1, Ordering::SeqCst);
            let p = std::env::temp_dir()
                .join(format!("svc-scan-{tag}-{}-{n}-{nanos}", std::process::id()));
            std::fs::create_dir(&p).expect("create fresh temp dir");
            TempDir(p)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }

        /// Writes `data` at `rel`, creating parent directories.
        pub fn write(&self, rel: &str, data: &[u8]) -> PathBuf {
            let p = self.0.join(rel);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).expect("create parents");
            }
            std::fs::write(&p, data).expect("write sample");
            p
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
