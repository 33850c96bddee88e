//! Row types shared by the store and the subsystems that produce them: a leaf module (it
//! imports only `text` and `timefmt`), so `store` keeps findings and WAF events without
//! importing `findings` or `waf`, and those subsystems depend on `store`, not the reverse.

pub mod finding;
pub mod waf_event;
