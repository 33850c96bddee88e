//! `state.pending`: findings the store could not take, parked in a file and replayed at the
//! next start. Newest 10,000 kept; older ones are counted as losses.
//!
//! The file also keeps the newest log-source checkpoint of each refused batch (where the
//! lines behind the parked findings end), so that a restart neither re-reads those lines
//! (their findings are parked) nor loses them: see `Engine::new`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{Finding, Severity};

/// Why the parked-findings file could not be read.
#[derive(Debug)]
pub enum PendingError {
    /// The file exists but could not be read.
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not the JSON this module writes.
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
}

impl std::fmt::Display for PendingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PendingError::Read { path, source } => write!(f, "{}: {source}", path.display()),
            PendingError::Parse { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for PendingError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PendingError::Read { source, .. } => Some(source),
            PendingError::Parse { source, .. } => Some(source),
        }
    }
}

/// Parked findings kept at most.
pub const MAX_PARKED: usize = 10_000;

#[derive(Serialize, Deserialize)]
struct Parked {
    check: String,
    severity: u8,
    message: String,
    details: String,
    account: Option<String>,
    ip: Option<String>,
    path: Option<String>,
    first_seen_us: i64,
    last_seen_us: i64,
    count: u64,
}

impl From<&Finding> for Parked {
    fn from(f: &Finding) -> Self {
        Parked {
            check: f.check.clone(),
            severity: f.severity.level(),
            message: f.message.clone(),
            details: f.details.clone(),
            account: f.account.clone(),
            ip: f.ip.map(|i| i.to_string()),
            path: f.path.clone(),
            first_seen_us: f.first_seen.as_microsecond(),
            last_seen_us: f.last_seen.as_microsecond(),
            count: f.count,
        }
    }
}

impl Parked {
    fn into_finding(self) -> Option<Finding> {
        Some(Finding {
            check: self.check,
            severity: Severity::from_level(self.severity)?,
            message: self.message,
            details: self.details,
            account: self.account,
            ip: self.ip.and_then(|s| s.parse::<IpAddr>().ok()),
            path: self.path,
            first_seen: Timestamp::from_microsecond(self.first_seen_us).ok()?,
            last_seen: Timestamp::from_microsecond(self.last_seen_us).ok()?,
            count: self.count,
        })
    }
}

/// A source position whose commit was refused with its batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParkedCheckpoint {
    pub source: String,
    pub inode: u64,
    pub offset: u64,
}

/// What the file holds.
#[derive(Debug, Default, PartialEq)]
pub struct Contents {
    pub findings: Vec<Finding>,
    pub checkpoints: Vec<ParkedCheckpoint>,
}

/// The file's layout: an object since checkpoints were added; a bare list of findings
/// (the first layout) is still read.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Layout {
    Object {
        findings: Vec<Parked>,
        #[serde(default)]
        checkpoints: Vec<ParkedCheckpoint>,
    },
    List(Vec<Parked>),
}

/// The parked-findings file.
pub struct PendingFile {
    path: PathBuf,
}

impl PendingFile {
    pub fn new(state: &Path) -> PendingFile {
        PendingFile {
            path: state.join("pending-findings.json"),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads parked findings and checkpoints. A missing file is empty; an unreadable one is
    /// an error.
    pub fn read(&self) -> Result<Contents, PendingError> {
        match crate::fsutil::read_daemon_file(&self.path) {
            Ok(bytes) => {
                let layout: Layout =
                    serde_json::from_slice(&bytes).map_err(|source| PendingError::Parse {
                        path: self.path.clone(),
                        source,
                    })?;
                let (parked, checkpoints) = match layout {
                    Layout::Object {
                        findings,
                        checkpoints,
                    } => (findings, checkpoints),
                    Layout::List(findings) => (findings, Vec::new()),
                };
                Ok(Contents {
                    findings: parked
                        .into_iter()
                        .filter_map(Parked::into_finding)
                        .collect(),
                    checkpoints,
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Contents::default()),
            Err(source) => Err(PendingError::Read {
                path: self.path.clone(),
                source,
            }),
        }
    }

    /// Replaces the file atomically with `findings` and `checkpoints` (mode 0600).
    pub fn write(
        &self,
        findings: &[Finding],
        checkpoints: &[ParkedCheckpoint],
    ) -> std::io::Result<()> {
        let layout = Layout::Object {
            findings: findings.iter().map(Parked::from).collect(),
            checkpoints: checkpoints.to_vec(),
        };
        let bytes = serde_json::to_vec(&layout).map_err(std::io::Error::other)?;
        crate::fsutil::write_atomic(&self.path, &bytes, 0o600, None)
    }

    pub fn remove(&self) -> std::io::Result<()> {
        match crate::fsutil::remove_daemon_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let dir = std::env::temp_dir().join(format!("svc-pending-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = PendingFile::new(&dir);
        assert_eq!(p.read().unwrap(), Contents::default());
        let f = Finding::new("x", Severity::High, "m", Timestamp::from_second(5).unwrap())
            .with_ip("192.0.2.1".parse().unwrap());
        let cp = ParkedCheckpoint {
            source: "auth:/var/log/auth.log".into(),
            inode: 7,
            offset: 4096,
        };
        p.write(std::slice::from_ref(&f), std::slice::from_ref(&cp))
            .unwrap();
        let back = p.read().unwrap();
        assert_eq!(back.findings, vec![f.clone()]);
        assert_eq!(back.checkpoints, vec![cp]);
        // The first layout, a bare list of findings, is still read.
        let list = serde_json::to_vec(&vec![Parked::from(&f)]).unwrap();
        std::fs::write(p.path(), list).unwrap();
        let back = p.read().unwrap();
        assert_eq!(back.findings, vec![f]);
        assert!(back.checkpoints.is_empty());
        std::fs::write(p.path(), b"\x00garbage").unwrap();
        let e = p.read().err().unwrap();
        assert!(matches!(e, PendingError::Parse { .. }), "{e:?}");
        assert!(
            e.to_string().starts_with(&p.path().display().to_string()),
            "{e}"
        );
        p.remove().unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
