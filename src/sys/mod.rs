//! Thin safe wrappers over system calls `nix` lacks. The only module where `unsafe` may
//! appear (`lib.rs` denies it everywhere else); every block carries a `// SAFETY:` comment.
#[cfg(feature = "bpf")]
pub mod bpf;
pub mod dir;
pub mod dirstream;
pub mod fhandle;
pub mod malloc;
pub mod notify;
pub mod pageout;
pub mod poll;
pub mod priority;
