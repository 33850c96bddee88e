//! Test helpers: fixture trees in unique private temp dirs, garbage bytes, a test context.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::context::CheckContext;
use crate::clock::ManualClock;

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A fresh directory (mode 0700) removed on drop.
pub struct Fixture {
    pub root: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let base = std::env::temp_dir();
        loop {
            let n = SEQ.fetch_add(1, Ordering::SeqCst);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let root = base.join(format!("svc-checks-{}-{n}-{nanos}", std::process::id()));
            if fs::create_dir(&root).is_ok() {
                fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).unwrap();
                return Fixture { root };
            }
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn write(&self, rel: &str, content: &[u8]) -> PathBuf {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&p, content).unwrap();
        p
    }

    pub fn write_mode(&self, rel: &str, content: &[u8], mode: u32) -> PathBuf {
        let p = self.write(rel, content);
        chmod(&p, mode);
        p
    }

    pub fn mkdir(&self, rel: &str, mode: u32) -> PathBuf {
        let p = self.path(rel);
        fs::create_dir_all(&p).unwrap();
        chmod(&p, mode);
        p
    }

    pub fn symlink(&self, target: &Path, rel: &str) -> PathBuf {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        symlink(target, &p).unwrap();
        p
    }

    /// A context with the whole system layout re-rooted at this fixture.
    pub fn ctx(&self) -> CheckContext {
        CheckContext::builder(ManualClock::at_epoch_2026())
            .system_layout(&self.root)
            .build()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

pub fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

/// An empty context on a manual clock.
pub fn test_ctx() -> CheckContext {
    CheckContext::builder(ManualClock::at_epoch_2026()).build()
}

/// Deterministic pseudo-random bytes (xorshift64*), biased towards the characters parsers
/// care about so garbage also reaches their deeper branches.
pub fn garbage(seed: u64, len: usize) -> Vec<u8> {
    const SPECIAL: &[u8] = b" \t\n\r:=#\"'\\[]*?-/|;&$()`%@0123456789";
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
            let b = (r >> 56) as u8;
            if b.is_multiple_of(3) {
                SPECIAL[usize::from(b) % SPECIAL.len()]
            } else {
                b
            }
        })
        .collect()
}
