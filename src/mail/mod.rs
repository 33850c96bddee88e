//! Mail antivirus: spool watcher, tolerant MIME extraction, archives, clamd and the
//! content-signature scanner, mail quarantine and release.
pub mod archive;
pub mod clamd;
pub mod decode;
pub mod mime;
pub mod quarantine;
pub mod spool;
pub mod staging;
