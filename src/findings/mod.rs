//! Findings: the model, the ingest dispatcher, the active set.
pub mod model;
pub use model::{Finding, Severity};
