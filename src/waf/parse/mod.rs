//! WAF log parsing: one [`Parser`] reads every format a web server's ModSecurity writes,
//! line by line, and turns rule matches into [`WafEvent`]s.
//!
//! Formats (each in its own module, each with a fuzz target):
//! - `errorlog`: Apache `error.log` lines of mod_security2 (`[...] [security2:error] ...
//!   [client A] ModSecurity: ...`), nginx `error.log` lines of the libmodsecurity connector
//!   (`YYYY/MM/DD HH:MM:SS [error] ... [client A] ModSecurity: ..., client: A, ...`) and
//!   LiteSpeed `error.log` lines (`YYYY-MM-DD HH:MM:SS.ffffff [NOTICE] [pid] [T0]
//!   [A:port-n#APVH_host] [MODSEC] mod_security rule [id "N"] ... triggered!`, whose deny or
//!   pass comes from the rule-action registry, and the `[Module:mod_security]` form);
//! - `json`: JSON audit-log lines of ModSecurity 2 and 3 (`SecAuditLogFormat JSON`);
//! - `native`: the native multipart audit log (`--id-A--` ... `--id-Z--`, sections A to K),
//!   assembled across lines (ModSecurity 2 and 3 boundaries).
//!
//! Guarantees:
//! - Never panics on any input (fuzzed); a line it cannot read yields nothing and is
//!   counted in [`ParseCounters::unparsed`] when it looked like a ModSecurity line.
//! - Addresses are IPv4 or IPv6; IPv4-mapped IPv6 becomes IPv4. A line without a
//!   readable client address yields nothing.
//! - Text fields are cut to the limits of [`super::event`]; a native audit entry keeps at
//!   most [`native::MAX_MESSAGES`] messages and reads at most [`native::MAX_ENTRY_LINES`]
//!   lines before it is closed.
//! - Local times (error logs, ModSecurity 3 JSON) are read in the time zone the parser was
//!   built with; audit-log times carry their offset. A time that does not parse becomes
//!   the caller's `now`.
//! - Field values are read the way ModSecurity escapes them (`\"` inside a quoted value),
//!   so text a client chose cannot end a field early; where a field repeats, the first
//!   occurrence counts.

mod errorlog;
mod fields;
mod json;
mod native;
mod time;

use std::net::IpAddr;

use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::event::{Action, WafEvent};
use crate::findings::Severity;

pub use fields::{Fields, ModsecMessage};
pub use native::{MAX_ENTRY_LINES, MAX_MESSAGES};

/// The disruptive action a rule declares (the rule-action registry), for formats that do
/// not say whether a match denied (LiteSpeed's "triggered!" lines, ModSecurity 3 JSON).
pub trait RuleActions {
    /// `Some(Deny)` / `Some(Pass)` for a rule the registry knows; `None` otherwise.
    fn action(&self, rule_id: u32) -> Option<Action>;
}

/// No registry: every lookup is unknown.
pub struct NoActions;

impl RuleActions for NoActions {
    fn action(&self, _: u32) -> Option<Action> {
        None
    }
}

/// Counters of one parser.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParseCounters {
    /// Lines given to the parser.
    pub lines: u64,
    /// Events produced.
    pub events: u64,
    /// Lines that looked like ModSecurity output but could not be read (no client address,
    /// broken JSON, ...).
    pub unparsed: u64,
    /// Native audit entries closed (complete or cut).
    pub native_entries: u64,
    /// Native audit entries closed early (over the line limit, or a new entry began
    /// before the previous one ended).
    pub native_cut: u64,
}

/// Reads WAF log lines of every supported format. See the module documentation.
pub struct Parser {
    tz: TimeZone,
    native: native::Assembler,
    times: time::Cache,
    pub counters: ParseCounters,
}

impl Parser {
    /// A parser reading local times in `tz`.
    pub fn new(tz: TimeZone) -> Parser {
        Parser {
            tz,
            native: native::Assembler::default(),
            times: time::Cache::default(),
            counters: ParseCounters::default(),
        }
    }

    /// Reads one line (without its newline); events go to `out`. `now` stands in for a
    /// time that does not parse; `actions` classifies matches whose line does not say.
    pub fn line(
        &mut self,
        line: &str,
        now: Timestamp,
        actions: &dyn RuleActions,
        out: &mut Vec<WafEvent>,
    ) {
        self.counters.lines += 1;
        let before = out.len();
        let line = line.strip_suffix('\r').unwrap_or(line);
        let outcome = self.dispatch(line, now, actions, out);
        if outcome == Outcome::Unreadable {
            self.counters.unparsed += 1;
        }
        self.counters.events += (out.len() - before) as u64;
    }

    /// Closes an open native audit entry (end of input); its events go to `out`.
    pub fn finish(&mut self, now: Timestamp, actions: &dyn RuleActions, out: &mut Vec<WafEvent>) {
        let before = out.len();
        if self
            .native
            .close(&self.tz, &mut self.times, now, actions, out)
        {
            self.counters.native_entries += 1;
            self.counters.native_cut += 1;
        }
        self.counters.events += (out.len() - before) as u64;
    }

    fn dispatch(
        &mut self,
        line: &str,
        now: Timestamp,
        actions: &dyn RuleActions,
        out: &mut Vec<WafEvent>,
    ) -> Outcome {
        if let Some(b) = native::boundary(line) {
            let n = self
                .native
                .boundary(b, &self.tz, &mut self.times, now, actions, out);
            self.counters.native_entries += n.closed;
            self.counters.native_cut += n.cut;
            return Outcome::Read;
        }
        if line.starts_with('{') {
            return json::line(line, &self.tz, &mut self.times, now, actions, out);
        }
        if !self.native.in_section_a() {
            match errorlog::line(line, &self.tz, &mut self.times, now, actions, out) {
                Outcome::NotMine => {}
                o => return o,
            }
        }
        if self.native.active() {
            let n = self
                .native
                .line(line, &self.tz, &mut self.times, now, actions, out);
            self.counters.native_entries += n.closed;
            self.counters.native_cut += n.cut;
            return Outcome::Read;
        }
        Outcome::NotMine
    }
}

/// What a format reader made of a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Not this format (or not a ModSecurity line at all).
    NotMine,
    /// Read (it may have produced no event: an engine notice, a match without a rule).
    Read,
    /// This format, but unreadable.
    Unreadable,
}

/// A client address as logs write it: `A`, `A:port`, `[A]:port`, IPv4-mapped IPv6 read as
/// IPv4. An IPv6 address followed by `:port` without brackets is ambiguous; the caller
/// passes the port-less form when the line has one.
pub fn parse_addr(s: &str) -> Option<IpAddr> {
    let s = s.trim();
    if let Some(rest) = s.strip_prefix('[') {
        let end = rest.find(']')?;
        return rest
            .get(..end)?
            .parse::<IpAddr>()
            .ok()
            .map(|a| a.to_canonical());
    }
    if let Ok(a) = s.parse::<IpAddr>() {
        return Some(a.to_canonical());
    }
    let (host, port) = s.rsplit_once(':')?;
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    host.parse::<IpAddr>().ok().map(|a| a.to_canonical())
}

/// ModSecurity's severity (a name or a level 0-7) as a label: 0-2 (EMERGENCY, ALERT,
/// CRITICAL) are CRITICAL, 3 (ERROR) is HIGH, 4-7 (WARNING, NOTICE, INFO, DEBUG) are
/// WARNING. Without one: HIGH for a deny, WARNING for a pass.
pub fn severity(value: Option<&str>, action: Action) -> Severity {
    let default = match action {
        Action::Deny => Severity::High,
        Action::Pass => Severity::Warning,
    };
    let Some(v) = value.map(str::trim) else {
        return default;
    };
    let level = match v.as_bytes() {
        [d @ b'0'..=b'7'] => d - b'0',
        _ => match v.to_ascii_uppercase().as_str() {
            "EMERGENCY" => 0,
            "ALERT" => 1,
            "CRITICAL" => 2,
            "ERROR" => 3,
            "WARNING" => 4,
            "NOTICE" => 5,
            "INFO" => 6,
            "DEBUG" => 7,
            _ => return default,
        },
    };
    match level {
        0..=2 => Severity::Critical,
        3 => Severity::High,
        _ => Severity::Warning,
    }
}

/// A rule id as ModSecurity writes it (`"900112"`, `'900112'`).
pub fn rule_id(s: &str) -> Option<u32> {
    let s = s.trim().trim_matches('\'');
    if s.is_empty() || s.len() > 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `Host` header value without its port (`[::1]:8080` -> `::1`, `example.com:443` ->
/// `example.com`).
pub fn host_without_port(h: &str) -> &str {
    let h = h.trim();
    if let Some(rest) = h.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match h.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => h,
    }
}

/// Entry points of each format reader alone, for the fuzz targets
/// (`fuzz/fuzz_targets/waf_*.rs`); not an API.
#[doc(hidden)]
pub mod fuzzing {
    use super::*;

    fn registry(rule_id: u32) -> Option<Action> {
        match rule_id % 3 {
            0 => Some(Action::Deny),
            1 => Some(Action::Pass),
            _ => None,
        }
    }

    struct Alternating;
    impl RuleActions for Alternating {
        fn action(&self, rule_id: u32) -> Option<Action> {
            registry(rule_id)
        }
    }

    /// Every line through the Apache/nginx/LiteSpeed error-log reader alone.
    pub fn errorlog(text: &str) -> usize {
        let tz = TimeZone::UTC;
        let mut times = time::Cache::default();
        let mut out = Vec::new();
        for l in text.lines() {
            let _ = errorlog::line(
                l,
                &tz,
                &mut times,
                Timestamp::UNIX_EPOCH,
                &Alternating,
                &mut out,
            );
        }
        out.len()
    }

    /// Every line through the JSON audit-log reader alone.
    pub fn json(text: &str) -> usize {
        let tz = TimeZone::UTC;
        let mut times = time::Cache::default();
        let mut out = Vec::new();
        for l in text.lines() {
            let _ = json::line(
                l,
                &tz,
                &mut times,
                Timestamp::UNIX_EPOCH,
                &Alternating,
                &mut out,
            );
        }
        out.len()
    }

    /// The whole stream through the [`Parser`] (native audit entries are assembled across
    /// lines there), then closed.
    pub fn stream(text: &str) -> usize {
        let mut p = Parser::new(TimeZone::UTC);
        let mut out = Vec::new();
        for l in text.lines() {
            p.line(l, Timestamp::UNIX_EPOCH, &Alternating, &mut out);
        }
        p.finish(Timestamp::UNIX_EPOCH, &Alternating, &mut out);
        out.len()
    }
}

#[cfg(test)]
mod tests;
