//! The native (multipart) audit log: entries of sections separated by boundary lines
//! (`--1a2b3c4d-A--` in ModSecurity 2, `---Xy12Ab34---A--` in ModSecurity 3):
//!
//! - A: `[23/Nov/2026:17:10:25.628043 +0000] <unique id> <client ip> <port> <server ip>
//!   <port>`;
//! - B: the request line and headers (`Host:`);
//! - F: the response status line;
//! - H: the audit trailer: `Message: ...` (ModSecurity 2) or `ModSecurity: ...`
//!   (ModSecurity 3) per matched rule, `Action: Intercepted (phase N)`;
//! - C, E, I, J, K and others are skipped without being kept;
//! - Z ends the entry.
//!
//! An entry is turned into events when its Z boundary arrives, when a new A boundary starts
//! before it (the previous entry is cut), or after [`MAX_ENTRY_LINES`] lines.

use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::super::event::{Action, Format, WafEvent};
use super::fields;
use super::time::{self, Cache};
use super::{host_without_port, parse_addr, rule_id, severity, RuleActions};

/// Lines one entry may have before it is closed (request and response bodies are skipped,
/// but still counted).
pub const MAX_ENTRY_LINES: usize = 10_000;
/// Messages kept from one entry's H section.
pub const MAX_MESSAGES: usize = 64;
/// Longest line kept from one entry (A line, request line, message).
const MAX_KEPT_LINE: usize = 8192;

/// A boundary line: entry id and section letter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Boundary<'a> {
    pub id: &'a str,
    pub section: u8,
}

/// Reads `--id-A--` / `---id---A--`.
pub fn boundary(line: &str) -> Option<Boundary<'_>> {
    let b = line.as_bytes();
    if b.len() < 7 || b.len() > 80 || !line.starts_with("--") || !line.ends_with("--") {
        return None;
    }
    let inner = line.get(..line.len() - 2)?.trim_start_matches('-');
    // inner = "<id>-A" / "<id>---A"
    let section = *inner.as_bytes().last()?;
    if !section.is_ascii_uppercase() {
        return None;
    }
    let id = inner.get(..inner.len() - 1)?.trim_end_matches('-');
    if id.is_empty()
        || id.len() > 64
        || id.len() + 1 == inner.len()
        || !id.bytes().all(|c| c.is_ascii_alphanumeric())
    {
        return None;
    }
    Some(Boundary { id, section })
}

#[derive(Default)]
struct Entry {
    id: String,
    section: u8,
    lines: usize,
    a_line: Option<String>,
    request_line: Option<String>,
    host: Option<String>,
    status: Option<u16>,
    messages: Vec<String>,
    intercepted: bool,
    saw_status: bool,
}

/// Entries closed by one call: all of them, and those cut short.
#[derive(Clone, Copy, Debug, Default)]
pub struct Closed {
    pub closed: u64,
    pub cut: u64,
}

/// Assembles native audit entries. See the module documentation.
#[derive(Default)]
pub struct Assembler {
    entry: Option<Entry>,
}

fn kept(s: &str) -> String {
    crate::text::prefix_within(s, MAX_KEPT_LINE).to_string()
}

impl Assembler {
    /// An entry is open.
    pub fn active(&self) -> bool {
        self.entry.is_some()
    }

    /// The open entry is in section A (its next line is the A line, which looks like an
    /// error-log line).
    pub fn in_section_a(&self) -> bool {
        self.entry
            .as_ref()
            .is_some_and(|e| e.section == b'A' && e.a_line.is_none())
    }

    pub fn boundary(
        &mut self,
        b: Boundary<'_>,
        tz: &TimeZone,
        times: &mut Cache,
        now: Timestamp,
        actions: &dyn RuleActions,
        out: &mut Vec<WafEvent>,
    ) -> Closed {
        let mut c = Closed::default();
        if b.section == b'A' {
            if self.close(tz, times, now, actions, out) {
                c.closed += 1;
                c.cut += 1;
            }
            self.entry = Some(Entry {
                id: b.id.to_string(),
                section: b'A',
                ..Entry::default()
            });
            return c;
        }
        let same = self.entry.as_ref().is_some_and(|e| e.id == b.id);
        if !same {
            // A section of an entry whose A was not seen (started before the file was
            // attached, or interleaved): skipped.
            return c;
        }
        if b.section == b'Z' {
            if let Some(e) = self.entry.take() {
                emit(e, times, now, actions, out);
                c.closed += 1;
            }
            return c;
        }
        if let Some(e) = &mut self.entry {
            e.section = b.section;
        }
        c
    }

    pub fn line(
        &mut self,
        line: &str,
        tz: &TimeZone,
        times: &mut Cache,
        now: Timestamp,
        actions: &dyn RuleActions,
        out: &mut Vec<WafEvent>,
    ) -> Closed {
        let mut c = Closed::default();
        let Some(e) = &mut self.entry else {
            return c;
        };
        e.lines += 1;
        if e.lines > MAX_ENTRY_LINES {
            if self.close(tz, times, now, actions, out) {
                c.closed += 1;
                c.cut += 1;
            }
            return c;
        }
        match e.section {
            b'A' if e.a_line.is_none() && !line.trim().is_empty() => {
                e.a_line = Some(kept(line));
            }
            b'B' => {
                if e.request_line.is_none() {
                    if !line.trim().is_empty() {
                        e.request_line = Some(kept(line));
                    }
                } else if e.host.is_none() {
                    if let Some((name, value)) = line.split_once(':') {
                        if name.trim().eq_ignore_ascii_case("host") {
                            e.host = Some(kept(host_without_port(value)));
                        }
                    }
                }
            }
            b'F' if !e.saw_status && !line.trim().is_empty() => {
                e.saw_status = true;
                e.status = line
                    .split_ascii_whitespace()
                    .nth(1)
                    .and_then(|s| s.parse().ok());
            }
            b'H' => {
                let msg = line
                    .strip_prefix("Message: ")
                    .or_else(|| line.strip_prefix("ModSecurity: "));
                if let Some(m) = msg {
                    if e.messages.len() < MAX_MESSAGES {
                        e.messages.push(kept(m));
                    }
                } else if line.starts_with("Action: Intercepted") {
                    e.intercepted = true;
                }
            }
            _ => {}
        }
        c
    }

    /// Closes the open entry, if any, turning it into events. Returns whether there was one.
    pub fn close(
        &mut self,
        _tz: &TimeZone,
        times: &mut Cache,
        now: Timestamp,
        actions: &dyn RuleActions,
        out: &mut Vec<WafEvent>,
    ) -> bool {
        match self.entry.take() {
            Some(e) => {
                emit(e, times, now, actions, out);
                true
            }
            None => false,
        }
    }
}

fn emit(
    e: Entry,
    _times: &mut Cache,
    now: Timestamp,
    actions: &dyn RuleActions,
    out: &mut Vec<WafEvent>,
) {
    let Some(a) = e.a_line.as_deref() else {
        return;
    };
    // `[ts] uid client port server port`
    let (ts, rest) = match a.strip_prefix('[').and_then(|r| r.split_once(']')) {
        Some((ts, rest)) => (Some(ts), rest),
        None => (None, a),
    };
    let mut words = rest.split_ascii_whitespace();
    let uid = words.next().filter(|u| *u != "-");
    let Some(ip) = words.next().and_then(parse_addr) else {
        return;
    };
    let at = ts.and_then(time::audit).unwrap_or(now);
    let (method, uri) = match e.request_line.as_deref() {
        Some(r) => {
            let mut p = r.split(' ');
            (p.next().unwrap_or(""), p.next().unwrap_or(""))
        }
        None => ("", ""),
    };
    let refused = e.status.is_some_and(|s| (400..600).contains(&s));
    let n = e.messages.len();
    for (i, text) in e.messages.iter().enumerate() {
        let m = fields::message(text);
        let rule = m.fields.id.as_deref().and_then(rule_id);
        let action = match m.disposition {
            Some(a) => a,
            None => match rule.and_then(|r| actions.action(r)) {
                Some(a) => a,
                None if e.intercepted && refused && i + 1 == n => Action::Deny,
                None => Action::Pass,
            },
        };
        if rule.is_none() && action == Action::Pass {
            continue;
        }
        let message = m
            .fields
            .msg
            .as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or(m.head)
            .to_string();
        let host = e
            .host
            .clone()
            .or_else(|| {
                m.fields
                    .hostname
                    .as_deref()
                    .map(|h| host_without_port(h).to_string())
            })
            .unwrap_or_default();
        out.push(
            WafEvent {
                at,
                ip,
                host,
                uri: if uri.is_empty() {
                    m.fields.uri.as_deref().unwrap_or("").to_string()
                } else {
                    uri.to_string()
                },
                method: if method.is_empty() {
                    fields::method_of(m.fields.data.as_deref())
                        .unwrap_or("")
                        .to_string()
                } else {
                    method.to_string()
                },
                rule_id: rule,
                message,
                severity: severity(m.fields.severity.as_deref(), action),
                action,
                format: Format::NativeAudit,
                unique_id: uid
                    .map(str::to_string)
                    .or_else(|| m.fields.unique_id.as_deref().map(str::to_string)),
                status: e.status,
            }
            .bounded(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_of_both_versions() {
        assert_eq!(
            boundary("--11239f56-A--"),
            Some(Boundary {
                id: "11239f56",
                section: b'A'
            })
        );
        assert_eq!(
            boundary("---IPSSsxfF---Z--"),
            Some(Boundary {
                id: "IPSSsxfF",
                section: b'Z'
            })
        );
        for bad in [
            "--",
            "----",
            "--abc--",
            "--a-b-c--",
            "--x-a--",
            "-- -A--",
            "--ab-A-",
        ] {
            assert_eq!(boundary(bad), None, "{bad}");
        }
    }
}
