//! Findings: the model, the ingest dispatcher, the active set, parked findings.
pub mod active;
pub mod engine;
pub mod evidence;
pub mod model;
pub mod pending;
pub mod suppress;
pub use engine::{Engine, Ingest};
pub use model::{Finding, Severity};
