//! The WAF integration (ModSecurity on Apache, nginx and LiteSpeed).
pub mod event;
pub mod parse;
