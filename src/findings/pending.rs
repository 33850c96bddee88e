//! `state.pending`: findings the store could not take, parked in a file and replayed at the
//! next start. Newest 10,000 kept; older ones are counted as losses.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{Finding, Severity};

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

    /// Reads parked findings. A missing file is empty; an unreadable one is an error.
    pub fn read(&self) -> Result<Vec<Finding>, String> {
        match crate::fsutil::read_daemon_file(&self.path) {
            Ok(bytes) => {
                let parked: Vec<Parked> = serde_json::from_slice(&bytes)
                    .map_err(|e| format!("{}: {e}", self.path.display()))?;
                Ok(parked
                    .into_iter()
                    .filter_map(Parked::into_finding)
                    .collect())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(format!("{}: {e}", self.path.display())),
        }
    }

    /// Replaces the file atomically with `findings` (mode 0600).
    pub fn write(&self, findings: &[Finding]) -> std::io::Result<()> {
        let parked: Vec<Parked> = findings.iter().map(Parked::from).collect();
        let bytes = serde_json::to_vec(&parked).map_err(std::io::Error::other)?;
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
        assert!(p.read().unwrap().is_empty());
        let f = Finding::new("x", Severity::High, "m", Timestamp::from_second(5).unwrap())
            .with_ip("192.0.2.1".parse().unwrap());
        p.write(std::slice::from_ref(&f)).unwrap();
        assert_eq!(p.read().unwrap(), vec![f]);
        std::fs::write(p.path(), b"\x00garbage").unwrap();
        assert!(p.read().is_err());
        p.remove().unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
