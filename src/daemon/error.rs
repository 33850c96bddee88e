//! [`StartError`]: why `svc daemon` could not start, one variant per start-up phase.
//!
//! The text is what the operator reads after `svc daemon:`; every variant names what
//! failed (a path, a queue row, an address) and keeps its cause as `source()`.

use std::fmt;
use std::path::PathBuf;

use crate::config::ConfigError;
use crate::queue::RowError;
use crate::store::StoreError;

/// A subsystem's own error, kept whole behind its name.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why the daemon did not start (or its signal wait failed).
#[derive(Debug)]
pub enum StartError {
    /// The stop and reload signals could not be blocked or waited for.
    Signals {
        what: &'static str,
        source: nix::Error,
    },
    /// The configuration file did not load: every error found.
    Config(Vec<ConfigError>),
    /// The `--dev` configuration or its files could not be made.
    Dev(super::dev::DevError),
    /// A `[geoip]` database could not be used (the text names the key and file).
    GeoIp(crate::geoip::GeoIpError),
    /// Threat intelligence did not start (its text starts with `threat:`).
    Threat(crate::threat::StartError),
    /// The state directory could not be created or secured.
    StateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The store did not open (file, migrations, threads).
    Store { path: PathBuf, source: StoreError },
    /// Sessions left by the previous process could not be ended.
    Sessions(StoreError),
    /// The TLS certificate or key could not be made, read or used.
    Tls(std::io::Error),
    /// A queue row could not be built or registered.
    Queue(RowError),
    /// A subsystem's constructor failed; `name` is how the operator knows it.
    Subsystem {
        name: &'static str,
        source: BoxError,
    },
    /// The web interface could not listen.
    Listen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    /// The control socket could not be opened.
    Control {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A thread could not be started.
    Spawn {
        thread: &'static str,
        source: std::io::Error,
    },
}

impl StartError {
    /// For `map_err`: `.map_err(StartError::subsystem("mail antivirus"))`.
    pub fn subsystem<E: Into<BoxError>>(name: &'static str) -> impl FnOnce(E) -> StartError {
        move |e| StartError::Subsystem {
            name,
            source: e.into(),
        }
    }
}

impl From<RowError> for StartError {
    fn from(e: RowError) -> Self {
        StartError::Queue(e)
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Signals { what, source } => write!(f, "{what}: {source}"),
            StartError::Config(errs) => {
                for (i, e) in errs.iter().enumerate() {
                    if i > 0 {
                        f.write_str("\n")?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
            StartError::Dev(e) => write!(f, "{e}"),
            StartError::GeoIp(e) => write!(f, "{e}"),
            StartError::Threat(e) => write!(f, "{e}"),
            StartError::StateDir { path, source } => {
                write!(f, "state_path {}: {source}", path.display())
            }
            StartError::Store { path, source } => write!(f, "store {}: {source}", path.display()),
            StartError::Sessions(e) => write!(f, "cannot end previous sessions: {e}"),
            StartError::Tls(e) => write!(f, "TLS: {e}"),
            StartError::Queue(e) => write!(f, "{e}"),
            StartError::Subsystem { name, source } => write!(f, "{name}: {source}"),
            StartError::Listen { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            StartError::Control { path, source } => {
                write!(f, "control socket {}: {source}", path.display())
            }
            StartError::Spawn { thread, source } => {
                write!(f, "cannot start thread {thread}: {source}")
            }
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Signals { source, .. } => Some(source),
            // Every message is in the text; `ConfigError` is config/'s plain record.
            StartError::Config(_) => None,
            StartError::Dev(e) => Some(e),
            StartError::GeoIp(e) => Some(e),
            StartError::Threat(e) => Some(e),
            StartError::StateDir { source, .. }
            | StartError::Tls(source)
            | StartError::Listen { source, .. }
            | StartError::Control { source, .. }
            | StartError::Spawn { source, .. } => Some(source),
            StartError::Store { source, .. } | StartError::Sessions(source) => Some(source),
            StartError::Queue(e) => Some(e),
            StartError::Subsystem { source, .. } => Some(source.as_ref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The store's path and its I/O cause both reach the operator, and the cause stays
    /// reachable as `source()` (no flattening into a string).
    #[test]
    fn store_error_names_path_and_keeps_cause() {
        let e = StartError::Store {
            path: PathBuf::from("/var/lib/svc/svc.db"),
            source: StoreError::Io(std::io::Error::from_raw_os_error(20)),
        };
        let text = e.to_string();
        assert!(text.starts_with("store /var/lib/svc/svc.db: cannot create the database file"));
        let inner = std::error::Error::source(&e).unwrap();
        assert!(std::error::Error::source(inner).is_some());
    }

    #[test]
    fn queue_error_names_row() {
        let e: StartError =
            RowError::at("findings.ingest")(crate::queue::QueueConfigError::NoCapacity).into();
        assert!(e.to_string().contains("findings.ingest"), "{e}");
        assert!(std::error::Error::source(&e).is_some());
    }
}
