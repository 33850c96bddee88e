//! Staged packages (`fanotify.staged_packages`): an archive or installer written, moved or
//! linked into a watched root (`.zip`, `.tar`, `.tar.gz`, `.tgz`, `.gz`, `.phar`, any case)
//! is opened as soon as its event is handled, before anyone extracts it, and each member
//! is scanned with the content signatures (the member's name decides which rules apply).
//!
//! - Zip, gzip and tar (and phars built on them) are read by a [`PackageReader`] the
//!   daemon hands in: the mail module's unpacker with its archive limits (`mail.archive_*`:
//!   total bytes, member count, compression ratio, nesting), so both paths refuse the same
//!   bombs. The watcher does not import the mail module; the daemon wires one to the other.
//! - Native phars (a PHP stub ending in `__HALT_COMPILER();`, then the manifest) are read
//!   by [`phar`]: uncompressed members are scanned; compressed ones are refused.
//! - A match: finding `staged_package_malware` (HIGH) naming the archive and the member.
//!   An archive that could not be verified fully (over a limit, damaged, encrypted,
//!   compressed phar members): finding `staged_package_unverified` (WARNING) naming the
//!   archive and the refusals, counted per reason in [`StagedCounters`].
//! - Row: one unit waiting from the event's hand-over until its verification ends; running
//!   while it runs (capacity 1,024). A panic while reading is a lost unit.

pub mod phar;

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::clock::SharedClock;
use crate::findings::{Finding, Severity};
use crate::queue::{QueueHealth, Registry, RowConfig, RowError, RowHandle};
use crate::scan::signatures::SignatureSet;
use crate::text::escape_path;

pub const CHECK_MALWARE: &str = "staged_package_malware";
pub const CHECK_UNVERIFIED: &str = "staged_package_unverified";
pub const ROW: &str = "fanotify.staged_packages";
/// Waiting packages at most (the analyzer handles one at a time).
pub const CAPACITY: u64 = 1024;

/// What a reader did with one archive.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PackageOutcome {
    /// The content was an archive the reader knows.
    pub recognised: bool,
    pub members: usize,
    /// Refusal tokens (`archive_ratio_limit`, `archive_error`, ...), each once.
    pub refused: Vec<&'static str>,
}

/// Opens an archive and hands each member (its `/`-joined path inside the archive and its
/// bytes) to `visit`, within its limits.
pub trait PackageReader: Send + Sync {
    fn read(&self, file: &File, name: &str, visit: &mut dyn FnMut(&str, &[u8])) -> PackageOutcome;
}

/// Refusals seen, by reason, and packages verified.
#[derive(Debug, Default)]
pub struct StagedCounters {
    pub packages: AtomicU64,
    pub members: AtomicU64,
    pub matches: AtomicU64,
    pub unverified: AtomicU64,
    pub refused: parking_lot::Mutex<std::collections::BTreeMap<&'static str, u64>>,
}

/// Whether `name` is a package name this verifier opens.
pub fn is_package_name(name: &[u8]) -> bool {
    let n = name.to_ascii_lowercase();
    [&b".zip"[..], b".tar", b".tar.gz", b".tgz", b".gz", b".phar"]
        .iter()
        .any(|e| n.ends_with(e) && n.len() > e.len())
}

pub struct StagedPackages {
    reader: Arc<dyn PackageReader>,
    health: Arc<QueueHealth>,
    _row: RowHandle,
    clock: SharedClock,
    pub counters: Arc<StagedCounters>,
}

impl StagedPackages {
    pub fn start(
        reader: Arc<dyn PackageReader>,
        clock: SharedClock,
        registry: &Arc<Registry>,
    ) -> Result<StagedPackages, RowError> {
        let health = QueueHealth::new(
            clock.clone(),
            RowConfig::new("files").capacity(CAPACITY).running_slots(1),
        );
        let row = registry
            .register(ROW, health.clone())
            .map_err(RowError::at(ROW))?;
        Ok(StagedPackages {
            reader,
            health,
            _row: row,
            clock,
            counters: Arc::default(),
        })
    }

    /// Verifies the package open as `file`, known as `path`; returns its findings.
    pub fn verify(&self, path: &Path, file: &File, signatures: &SignatureSet) -> Vec<Finding> {
        let ticket = self.health.admit();
        let running = self.health.start_running();
        ticket.finish();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut hits: Vec<(String, String)> = Vec::new();
        let mut members = 0u64;
        let mut visit = |member: &str, data: &[u8]| {
            members += 1;
            for m in signatures.scan_bytes(Path::new(member), data) {
                hits.push((member.to_string(), m.name.clone()));
            }
        };
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let head = read_head(file);
            if phar::is_native_phar(&head) {
                phar::read(file, &name, &mut visit)
            } else {
                self.reader.read(file, &name, &mut visit)
            }
        }));
        let outcome = match ran {
            Ok(o) => {
                running.finish();
                o
            }
            Err(_) => {
                log::error!("staged packages: reading {} panicked", escape_path(path));
                running.lose();
                PackageOutcome {
                    recognised: true,
                    members: 0,
                    refused: vec!["archive_error"],
                }
            }
        };
        let c = &self.counters;
        c.packages.fetch_add(1, Ordering::Relaxed);
        c.members.fetch_add(members, Ordering::Relaxed);
        c.matches.fetch_add(hits.len() as u64, Ordering::Relaxed);
        let now = self.clock.now();
        let shown = escape_path(path);
        let mut out: Vec<Finding> = hits
            .into_iter()
            .map(|(member, rule)| {
                Finding::new(
                    CHECK_MALWARE,
                    Severity::High,
                    format!(
                        "malware in staged package {shown}: {}",
                        crate::text::escape_controls(&member)
                    ),
                    now,
                )
                .with_details(format!("signature {rule}; the package was not extracted"))
                .with_path(path.to_string_lossy().into_owned())
            })
            .collect();
        if !outcome.refused.is_empty() || !outcome.recognised {
            let mut refused = outcome.refused.clone();
            if !outcome.recognised {
                refused.push("not_an_archive");
            }
            c.unverified.fetch_add(1, Ordering::Relaxed);
            {
                let mut by = c.refused.lock();
                for r in &refused {
                    *by.entry(r).or_default() += 1;
                }
            }
            out.push(
                Finding::new(
                    CHECK_UNVERIFIED,
                    Severity::Warning,
                    format!("staged package not fully verified: {shown}"),
                    now,
                )
                .with_details(format!(
                    "refused: {}; {} members scanned",
                    refused.join(", "),
                    outcome.members
                ))
                .with_path(path.to_string_lossy().into_owned()),
            );
        }
        out
    }
}

/// The first bytes of `file` (positioned read: the offset is not moved).
fn read_head(file: &File) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut head = vec![0u8; 64 * 1024];
    let mut n = 0;
    while n < head.len() {
        match file.read_at(&mut head[n..], n as u64) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    head.truncate(n);
    head
}

/// Reads all of `file` from its start, at most `limit` bytes; `None` when it is larger.
pub fn read_limited(file: &File, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut r = std::io::Read::take(positioned(file), limit.saturating_add(1));
    let mut v = Vec::new();
    r.read_to_end(&mut v)?;
    Ok((v.len() as u64 <= limit).then_some(v))
}

/// A reader of `file` from offset 0 with positioned reads.
fn positioned(file: &File) -> impl Read + '_ {
    struct At<'a> {
        f: &'a File,
        pos: u64,
    }
    impl Read for At<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = std::os::unix::fs::FileExt::read_at(self.f, buf, self.pos)?;
            self.pos += n as u64;
            Ok(n)
        }
    }
    At { f: file, pos: 0 }
}

#[cfg(test)]
mod tests;
