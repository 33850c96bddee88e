//! Mail. The antivirus side: the spool watcher ([`watcher`]), tolerant MIME extraction
//! ([`mime`], [`decode`]), archives ([`archive`]), staging ([`staging`]), the engines (clamd
//! in [`clamd`], the daemon's content signatures), the `email_content` check ([`content`]),
//! the per-message pipeline ([`scanner`]), the mail quarantine ([`quarantine`]) and the
//! running service ([`service::MailAv`]). The account side: the mail-log reader, per-account
//! counters, queue and forwarder checks, relay abuse ([`log`]), direct SMTP egress
//! ([`egress`]) and the mailbox password audit ([`password`]).
//!
//! Files in the MTA's spool are touched only through `crate::sys::dir` (no symlink is
//! followed beneath the spool root); the staging and quarantine directories are
//! daemon-owned and private. See `docs/api.md` ("Mail antivirus") and
//! `docs/configuration.md` (`[mail]`).
pub mod archive;
pub mod clamd;
pub mod content;
pub mod control;
pub mod decode;
pub mod egress;
pub mod log;
pub mod mime;
pub mod password;
pub mod quarantine;
pub mod scanner;
pub mod service;
pub mod spool;
pub mod staging;
pub mod watcher;

pub use service::{MailAv, MailError};
