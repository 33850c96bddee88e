//! Network clients shared by several subsystems (a leaf: it imports no subsystem).
//!
//! - [`https`]: the outbound HTTPS client of the threat sources and feeds, crawler range
//!   updates, abuse reports and the CLI (deadline, size cap, rustls roots).

pub mod https;
