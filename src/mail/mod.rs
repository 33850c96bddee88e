//! Mail: the account side (mail-log reader, per-account counters, queue and forwarder
//! checks, relay abuse, mailbox password audit). The antivirus side lives beside it.

pub mod log;
pub mod password;
