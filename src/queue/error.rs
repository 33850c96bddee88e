//! [`RowError`]: a queue row that could not be built or registered, with the row's name.

use std::fmt;

use super::{QueueConfigError, RegisterError};

/// Why a queue row could not be set up: which row, and the cause (kept as `source()`).
#[derive(Debug)]
pub struct RowError {
    pub row: String,
    pub cause: RowCause,
}

/// The cause inside a [`RowError`].
#[derive(Debug)]
pub enum RowCause {
    /// The row's queue configuration was refused.
    Config(QueueConfigError),
    /// The registry refused the row.
    Register(RegisterError),
}

impl From<QueueConfigError> for RowCause {
    fn from(e: QueueConfigError) -> Self {
        RowCause::Config(e)
    }
}

impl From<RegisterError> for RowCause {
    fn from(e: RegisterError) -> Self {
        RowCause::Register(e)
    }
}

impl RowError {
    /// For `map_err`: `.map_err(RowError::at("findings.ingest"))`.
    pub fn at<E: Into<RowCause>>(row: &str) -> impl FnOnce(E) -> RowError + '_ {
        move |e| RowError {
            row: row.to_string(),
            cause: e.into(),
        }
    }
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            RowCause::Config(e) => write!(f, "queue row {}: {e}", self.row),
            // The registry's text already names the row.
            RowCause::Register(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RowError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.cause {
            RowCause::Config(e) => Some(e),
            RowCause::Register(e) => Some(e),
        }
    }
}
