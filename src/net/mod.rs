//! Network values and clients shared by several subsystems (a leaf: it imports no subsystem).
//!
//! - [`cidr`]: addresses, CIDR ranges and port ranges as the firewall keeps them (also
//!   parsed by the configuration and the threat feeds);
//! - [`guards`]: rule 1 of "Verified crawlers", what a crawler range and a reverse-DNS
//!   suffix must be (applied by the configuration and the range feeds);
//! - [`https`]: the outbound HTTPS client of the threat sources and feeds, crawler range
//!   updates, abuse reports and the CLI (deadline, size cap, rustls roots).

pub mod cidr;
pub mod guards;
pub mod https;
