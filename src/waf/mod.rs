//! The WAF integration (ModSecurity on Apache, nginx and LiteSpeed).
//!
//! - [`parse`]: the log formats, into [`event::WafEvent`]s;
//! - [`escalate`]: repeated denies of one address into `modsec_block_escalation`;
//! - [`collector`]: the WAF log collector on the shared log tail;
//! - [`logs`]: which files it reads (`logs.waf`, globs, or the detected servers' logs);
//! - [`detect`]: engine detection and rule staleness (check `waf_status`);
//! - [`registry`]: the rule-action registry (which rules deny) and svc's shipped rules.
pub mod activation;
pub mod collector;
pub mod control;
pub mod detect;
pub mod escalate;
pub mod event;
pub mod logs;
pub mod parse;
pub mod registry;
pub mod rules;
pub mod service;
