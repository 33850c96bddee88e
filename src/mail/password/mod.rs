//! The mailbox password audit (deep scan): Dovecot passwd-files and panel shadow files
//! (`mail.password_files`), every scheme of the spec's table with its limits
//! ([`scheme`]), account-derived and bundled candidates ([`candidates`]), three shared
//! verification slots ([`pool`]), the audit driver with its records, budgets and findings
//! ([`audit`]) and the optional breach-count range API ([`breach`]).
//!
//! Nothing secret leaves the process: passwords, candidates and stored values are never
//! passed to a subprocess, written to a log, a finding, an error, a queue row or the store
//! (which keeps keyed fingerprints only).

pub mod audit;
pub mod breach;
pub mod candidates;
pub mod files;
mod md5crypt;
pub mod pool;
pub mod scheme;
pub mod task;
pub mod verify;

#[cfg(test)]
mod tests;

pub use audit::{
    AuditSettings, Auditor, Outcome, RunStats, CHECK_INCOMPLETE, CHECK_WEAK, MAILBOXES_ROW,
};
pub use md5crypt::md5_crypt_hash;
pub use pool::{HashPool, PoolError, HASHES_ROW, HASH_SLOTS, WAITING_ROW};
pub use scheme::{parse, Field, FormatError, Stored};
pub use task::PasswordAudit;
pub use verify::{verify, MAX_CANDIDATE_BYTES};
