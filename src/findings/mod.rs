//! Findings: the ingest dispatcher, the active set, parked findings. The model (`Finding`,
//! `Severity`) lives in the leaf module `model::finding` so the store can keep it.
pub mod active;
pub mod engine;
pub mod evidence;
pub mod pending;
pub mod suppress;
pub use crate::model::finding::{Finding, Severity};
pub use engine::{Engine, EngineError, Ingest};
