//! Thin safe wrappers over system calls `nix` lacks. The only module where `unsafe` may
//! appear; every block carries a `// SAFETY:` comment.
pub mod fhandle;
pub mod poll;
pub mod priority;
