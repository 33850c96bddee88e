//! The mail-log reader: Exim `mainlog` and Postfix `mail.log` lines ([`parse`]) turned into
//! per-message records, forwards and findings ([`ledger`]), followed live by
//! [`collector::MailLogCollector`] from log files or the systemd journal ([`journal`]).

pub mod collector;
pub mod journal;
pub mod ledger;
pub mod parse;
pub mod queue;

pub use parse::{parse_line, MailEvent, Mta, Outcome, Parsed};
