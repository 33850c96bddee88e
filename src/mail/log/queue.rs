//! The MTA queue: size, age and composition (`mail_queue` check, `/api/v1/email/queue-composition`).
//!
//! The queue is listed by the MTA's own tool (`exim -bp`, `postqueue -j`), run as a child
//! process with no input, a deadline ([`LIST_DEADLINE`]) and an output cap
//! ([`MAX_OUTPUT`]); nothing secret is passed to it. The listing is parsed ([`parse_exim_bp`],
//! [`parse_postqueue_json`]; both never panic, at most [`MAX_ENTRIES`] entries) and summed
//! into a [`Composition`]: size, oldest age, bounces (empty sender) and messages per sender
//! domain (the [`TOP_DOMAINS`] largest, the rest summed under `other`).
//!
//! Findings (`mail_queue`): WARNING when the queue holds at least `size_limit` messages,
//! WARNING when its oldest message is older than [`MAX_AGE`], HIGH when at least
//! [`BOUNCE_FLOOR`] messages are queued and more than half are bounces (a backscatter or
//! spam-run sign). Messages are stable for the same condition; figures are in `details`.

use std::collections::HashMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jiff::Timestamp;

use crate::findings::{Finding, Severity};

use super::ledger::domain_of;
use super::parse::Mta;

pub const CHECK_QUEUE: &str = "mail_queue";
/// Deadline of one listing.
pub const LIST_DEADLINE: Duration = Duration::from_secs(30);
/// Bytes of listing read at most.
pub const MAX_OUTPUT: usize = 64 << 20;
/// Entries parsed at most (the rest are counted in `size` only when the tool says so).
pub const MAX_ENTRIES: usize = 1_000_000;
/// Sender domains listed by name.
pub const TOP_DOMAINS: usize = 20;
/// Oldest age before a finding.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// Queue size from which the bounce share is judged.
pub const BOUNCE_FLOOR: u64 = 100;

/// One queued message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub age_secs: u64,
    /// Envelope sender, `""` for a bounce.
    pub sender: String,
    pub frozen: bool,
}

/// What the queue holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Composition {
    pub size: u64,
    pub oldest_age_seconds: Option<u64>,
    pub bounces: u64,
    pub frozen: u64,
    /// (sender domain, messages), most first; bounces under `<>`, the rest under `other`.
    pub domains: Vec<(String, u64)>,
}

/// `0m`, `25m`, `3h`, `2d`, `45s` (Exim's age column).
fn exim_age(s: &str) -> Option<u64> {
    let (n, unit) = s.split_at(s.len().checked_sub(1)?);
    let n: u64 = n.parse().ok()?;
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// Parses `exim -bp`: a header line `<age> <size> <id> <sender> [*** frozen ***]` per
/// message, followed by indented recipient lines and a blank line.
pub fn parse_exim_bp(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    for line in text.lines() {
        if out.len() >= MAX_ENTRIES {
            break;
        }
        if line.starts_with("          ") || line.trim().is_empty() {
            continue;
        }
        let mut it = line.split_whitespace();
        let (Some(age), Some(_size), Some(_id), Some(sender)) =
            (it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        let Some(age_secs) = exim_age(age) else {
            continue;
        };
        let sender = sender.strip_prefix('<').and_then(|s| s.strip_suffix('>'));
        let Some(sender) = sender else { continue };
        out.push(Entry {
            age_secs,
            sender: sender.to_string(),
            frozen: line.contains("*** frozen ***"),
        });
    }
    out
}

/// Parses `postqueue -j`: one JSON object per line with `arrival_time` (seconds) and
/// `sender`; `queue_name` `hold` counts as frozen.
pub fn parse_postqueue_json(text: &str, now: Timestamp) -> Vec<Entry> {
    let now = now.as_second().max(0) as u64;
    let mut out = Vec::new();
    for line in text.lines() {
        if out.len() >= MAX_ENTRIES {
            break;
        }
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(sender) = v.get("sender").and_then(|s| s.as_str()) else {
            continue;
        };
        let arrival = v
            .get("arrival_time")
            .and_then(|t| t.as_u64())
            .unwrap_or(now);
        let sender = if sender == "MAILER-DAEMON" {
            ""
        } else {
            sender
        };
        out.push(Entry {
            age_secs: now.saturating_sub(arrival),
            sender: sender.to_string(),
            frozen: v.get("queue_name").and_then(|q| q.as_str()) == Some("hold"),
        });
    }
    out
}

/// Sums entries into a [`Composition`].
pub fn compose(entries: &[Entry]) -> Composition {
    let mut per: HashMap<String, u64> = HashMap::new();
    let mut c = Composition {
        size: entries.len() as u64,
        ..Composition::default()
    };
    for e in entries {
        c.oldest_age_seconds = Some(c.oldest_age_seconds.unwrap_or(0).max(e.age_secs));
        c.frozen += u64::from(e.frozen);
        let key = if e.sender.is_empty() {
            c.bounces += 1;
            "<>".to_string()
        } else {
            let d = domain_of(&e.sender);
            if d.is_empty() {
                "(local)".to_string()
            } else {
                d
            }
        };
        *per.entry(key).or_default() += 1;
    }
    let mut all: Vec<(String, u64)> = per.into_iter().collect();
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    if all.len() > TOP_DOMAINS {
        let rest: u64 = all[TOP_DOMAINS..].iter().map(|(_, n)| n).sum();
        all.truncate(TOP_DOMAINS);
        all.push(("other".to_string(), rest));
    }
    c.domains = all;
    c
}

/// The `mail_queue` findings for `c` (see the module documentation).
pub fn findings(c: &Composition, size_limit: u64, now: Timestamp) -> Vec<Finding> {
    let mut out = Vec::new();
    if c.size >= size_limit.max(1) {
        out.push(
            Finding::new(
                CHECK_QUEUE,
                Severity::Warning,
                format!("mail queue holds at least {size_limit} messages"),
                now,
            )
            .with_details(format!(
                "{} messages queued ({} bounces, {} frozen); limit thresholds.mail_queue_size = {size_limit}",
                c.size, c.bounces, c.frozen
            )),
        );
    }
    if let Some(age) = c.oldest_age_seconds.filter(|a| *a > MAX_AGE.as_secs()) {
        out.push(
            Finding::new(
                CHECK_QUEUE,
                Severity::Warning,
                "mail queue holds messages older than 24 hours",
                now,
            )
            .with_details(format!("oldest message queued {} hours ago", age / 3600)),
        );
    }
    if c.size >= BOUNCE_FLOOR && c.bounces * 2 > c.size {
        out.push(
            Finding::new(
                CHECK_QUEUE,
                Severity::High,
                "mail queue is mostly bounces",
                now,
            )
            .with_details(format!(
                "{} of {} queued messages are bounces (empty sender)",
                c.bounces, c.size
            )),
        );
    }
    out
}

/// Why the queue could not be listed.
#[derive(Debug)]
pub enum ListError {
    Spawn(std::io::Error),
    Deadline,
    Failed(String),
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::Spawn(e) => write!(f, "cannot run the queue listing: {e}"),
            ListError::Deadline => write!(
                f,
                "the queue listing took over {} s",
                LIST_DEADLINE.as_secs()
            ),
            ListError::Failed(s) => write!(f, "the queue listing failed: {s}"),
        }
    }
}

impl std::error::Error for ListError {}

/// How to list the queue of `mta`: the program and its arguments.
pub fn list_command(mta: Mta) -> (&'static str, &'static [&'static str]) {
    match mta {
        Mta::Exim => ("exim", &["-bp"]),
        Mta::Postfix => ("postqueue", &["-j"]),
    }
}

/// Runs `program args` (no input, output capped, killed at the deadline) and parses its
/// listing as `mta`'s.
pub fn list(
    mta: Mta,
    program: &str,
    args: &[&str],
    now: Timestamp,
) -> Result<Vec<Entry>, ListError> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(ListError::Spawn)?;
    let mut stdout = child.stdout.take().ok_or(ListError::Deadline)?;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stdout).take(MAX_OUTPUT as u64).read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + LIST_DEADLINE;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ListError::Deadline);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(ListError::Spawn(e)),
        }
    };
    let out = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(ListError::Failed(status.to_string()));
    }
    let text = String::from_utf8_lossy(&out);
    Ok(match mta {
        Mta::Exim => parse_exim_bp(&text),
        Mta::Postfix => parse_postqueue_json(&text, now),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BP: &str = include_str!("fixtures/exim-bp.txt");

    #[test]
    fn exim_listing_from_debian_exim() {
        let e = parse_exim_bp(BP);
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].sender, "alice@example.com");
        assert_eq!(e[1].sender, "");
        let c = compose(&e);
        assert_eq!((c.size, c.bounces, c.oldest_age_seconds), (3, 1, Some(0)));
        assert_eq!(c.domains.len(), 3);
        let old = "25h  2.9K 1xVYif-0004qX-1L <a@example.com> *** frozen ***\n          x@example.org\n\n";
        let e = parse_exim_bp(old);
        assert_eq!((e[0].age_secs, e[0].frozen), (90_000, true));
        assert_eq!(exim_age("2d"), Some(172_800));
        for bad in ["", "m", "99999999999999999999m", "x 1 2 <a>", "1m 1 2 a"] {
            let _ = parse_exim_bp(bad);
        }
    }

    #[test]
    fn postfix_json_listing() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let text = r#"{"queue_name": "deferred", "queue_id": "4ChQ1", "arrival_time": 1799996400, "message_size": 1, "forced_expire": false, "sender": "a@example.com", "recipients": [{"address": "b@example.org", "delay_reason": "x"}]}
{"queue_name": "hold", "queue_id": "4ChQ2", "arrival_time": 1800000000, "sender": "MAILER-DAEMON", "recipients": []}
not json
"#;
        let e = parse_postqueue_json(text, now);
        assert_eq!(e.len(), 2);
        assert_eq!(
            (e[0].age_secs, e[1].sender.as_str(), e[1].frozen),
            (3600, "", true)
        );
    }

    #[test]
    fn findings_and_top_domains() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let mut entries: Vec<Entry> = (0..150)
            .map(|i| Entry {
                age_secs: 60,
                sender: if i < 80 {
                    String::new()
                } else {
                    format!("u@d{}.example", i % 30)
                },
                frozen: false,
            })
            .collect();
        entries[0].age_secs = 2 * 86_400;
        let c = compose(&entries);
        assert_eq!(c.domains.len(), TOP_DOMAINS + 1);
        assert_eq!(c.domains[0], ("<>".to_string(), 80));
        assert_eq!(c.domains.last().unwrap().0, "other");
        assert_eq!(c.domains.iter().map(|d| d.1).sum::<u64>(), 150);
        let f = findings(&c, 100, now);
        let msgs: Vec<_> = f.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            msgs,
            [
                "mail queue holds at least 100 messages",
                "mail queue holds messages older than 24 hours",
                "mail queue is mostly bounces"
            ]
        );
        assert!(findings(&compose(&entries[..10]), 100, now).len() == 1);
    }

    #[test]
    fn listing_a_real_program_with_its_limits() {
        let now = Timestamp::now();
        let e = list(
            Mta::Exim,
            "printf",
            &["0m 1 1xVYif-0004qX-1L <a@example.com>\\n"],
            now,
        )
        .unwrap();
        assert_eq!(e.len(), 1);
        assert!(matches!(
            list(Mta::Exim, "false", &[], now),
            Err(ListError::Failed(_))
        ));
        assert!(matches!(
            list(Mta::Exim, "/nonexistent/exim", &[], now),
            Err(ListError::Spawn(_))
        ));
    }
}
