//! Turns access-log lines into findings.
//!
//! Checks (names are stable API; every finding carries the client address in `ip`, and
//! its message depends only on the address, so the active set merges repeats):
//! - `wp_login_bruteforce` (HIGH): `http_wp_login_posts` POSTs to `wp-login.php`.
//! - `xmlrpc_abuse` (HIGH): `http_xmlrpc_posts` POSTs to `xmlrpc.php`.
//! - `wp_user_enumeration` (WARNING): `http_user_enum_requests` `?author=N` or REST
//!   users-route requests.
//! - `http_scanner_profile` (WARNING): `http_scanner_probe_404s` 404 answers to known
//!   probe paths, or `http_scanner_agent_requests` requests with a scanner's user agent.
//! - `http_ua_spoof` (HIGH): a request whose claimed crawler the oracle reports as
//!   [`BotCheck::Spoofed`].
//! - `http_claimed_bot_unverified` (WARNING): `http_claimed_bot_requests` requests claiming
//!   a crawler the oracle reports as [`BotCheck::Pending`], [`BotCheck::Unresolved`] or
//!   [`BotCheck::Unverified`].
//!
//! Counting rules:
//! - Counts are per client address, within `http_window_seconds` from the address's first
//!   counted request; the window restarts with the first request after it has elapsed.
//!   Each check reports an address at most once per window, when its count reaches the
//!   threshold.
//! - A request whose claimed crawler the oracle reports as [`BotCheck::Verified`] is exempt:
//!   it counts towards no check.
//! - The oracle is asked only about requests whose user agent looks like a crawler's
//!   ([`super::classify::CRAWLER_WORDS`]), and once per address and user agent: a definitive
//!   answer (verified, spoofed, no claim) is kept for [`BOT_FINAL_SECS`], a provisional one
//!   (pending, unresolved, unverified) for [`BOT_PROVISIONAL_SECS`].
//! - Lines that are not access-log lines, or do not fit the layout their file showed first
//!   ([`super::Layout`]), are counted (`unparsed`) and otherwise ignored.
//! - Requests no check counts (most traffic) touch no state.
//!
//! Memory: at most `http_max_tracked_addresses` addresses (CLOCK eviction; live state
//! evicted is counted), each with at most [`MAX_SAMPLES`] sample paths.

use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

use crate::clock::SharedClock;
use crate::crawler::{BotCheck, BotOracle};
use crate::findings::{Finding, Severity};
use crate::text::{prefix_within, printable_prefix};
use crate::watch::authlog::table::AddrTable;

use super::classify::{Classifier, FxHasher, Request};
use super::parse::{parse_line_as, AccessLine, Error as ParseError, Layout};
use super::thresholds::{AccessThresholds, SharedThresholds};

pub const CHECK_WP_LOGIN: &str = "wp_login_bruteforce";
pub const CHECK_XMLRPC: &str = "xmlrpc_abuse";
pub const CHECK_USER_ENUM: &str = "wp_user_enumeration";
pub const CHECK_SCANNER: &str = "http_scanner_profile";
pub const CHECK_BOT_UNVERIFIED: &str = "http_claimed_bot_unverified";
pub const CHECK_UA_SPOOF: &str = "http_ua_spoof";

/// Every check of this detector.
pub const CHECKS: &[&str] = &[
    CHECK_WP_LOGIN,
    CHECK_XMLRPC,
    CHECK_USER_ENUM,
    CHECK_SCANNER,
    CHECK_BOT_UNVERIFIED,
    CHECK_UA_SPOOF,
];

/// How long a definitive oracle answer is kept per address (seconds).
pub const BOT_FINAL_SECS: i64 = 600;
/// How long a provisional oracle answer is kept per address (seconds).
pub const BOT_PROVISIONAL_SECS: i64 = 10;
/// Sample probe paths remembered per address (for the finding's details).
pub const MAX_SAMPLES: usize = 3;
/// Longest sample (path, user agent, vhost) copied into a finding.
const MAX_SAMPLE: usize = 96;
/// How often [`AccessDetector::maintain`] purges expired state.
const MAINTAIN_EVERY_NS: i64 = 60_000_000_000;
const NS: i64 = 1_000_000_000;

/// Counters (cumulative, except `addresses_tracked`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AccessStats {
    /// Lines seen (parsed or not).
    pub lines: u64,
    /// Lines that are not access-log lines.
    pub unparsed: u64,
    /// Requests at least one check counted (or asked the oracle about).
    pub counted: u64,
    /// Requests exempt because their crawler is verified.
    pub verified_exempt: u64,
    /// Oracle calls.
    pub oracle_calls: u64,
    pub findings: u64,
    /// Addresses with state now.
    pub addresses_tracked: u64,
    /// Live address state evicted by `http_max_tracked_addresses`.
    pub addresses_evicted: u64,
}

#[derive(Clone, Copy)]
enum Slot {
    WpLogin = 0,
    Xmlrpc = 1,
    UserEnum = 2,
    Probe404 = 3,
    ScannerAgent = 4,
    ClaimedBot = 5,
}

/// Alert bits (one per check).
const A_WP: u8 = 1;
const A_XMLRPC: u8 = 2;
const A_ENUM: u8 = 4;
const A_SCANNER: u8 = 8;
const A_BOT: u8 = 16;
const A_SPOOF: u8 = 32;

/// The oracle's answer, without its name.
enum Verdict {
    NoClaim,
    Verified,
    Spoofed,
    Provisional(&'static str),
}

struct BotMemo {
    ua_hash: u64,
    check: BotCheck,
    until: i64,
}

struct Track {
    window_start: i64,
    last_seen: i64,
    counts: [u32; 6],
    alerted: u8,
    samples: Vec<Box<str>>,
    bot: Option<BotMemo>,
}

impl Track {
    fn new(now: i64) -> Track {
        Track {
            window_start: now,
            last_seen: now,
            counts: [0; 6],
            alerted: 0,
            samples: Vec::new(),
            bot: None,
        }
    }

    fn bump(&mut self, s: Slot) -> u32 {
        let c = &mut self.counts[s as usize];
        *c = c.saturating_add(1);
        *c
    }
}

/// The access-log detector. Single-threaded; owned by the collector thread.
pub struct AccessDetector {
    th: AccessThresholds,
    window_ns: i64,
    clock: SharedClock,
    oracle: Arc<dyn BotOracle>,
    classifier: Classifier,
    table: AddrTable<Track>,
    stats: AccessStats,
    last_maintain: i64,
    shared: Arc<SharedThresholds>,
    shared_seen: u64,
    /// The layout of the one stream [`Self::process_line`] reads.
    layout: Option<Layout>,
}

impl AccessDetector {
    pub fn new(
        thresholds: AccessThresholds,
        clock: SharedClock,
        oracle: Arc<dyn BotOracle>,
    ) -> Self {
        let th = thresholds.clamped();
        AccessDetector {
            window_ns: window_ns(&th),
            table: AddrTable::new(th.max_tracked_addresses),
            shared: SharedThresholds::new(th.clone()),
            shared_seen: 0,
            th,
            last_maintain: clock.monotonic_nanos(),
            clock,
            oracle,
            classifier: Classifier::default(),
            stats: AccessStats::default(),
            layout: None,
        }
    }

    /// The handle a configuration reload sets new thresholds through.
    pub fn shared_thresholds(&self) -> Arc<SharedThresholds> {
        self.shared.clone()
    }

    pub fn thresholds(&self) -> &AccessThresholds {
        &self.th
    }

    /// Applies new thresholds, keeping the state (lower caps evict on later insertions).
    pub fn set_thresholds(&mut self, t: AccessThresholds) {
        let th = t.clamped();
        self.window_ns = window_ns(&th);
        self.table.set_cap(th.max_tracked_addresses);
        self.th = th;
    }

    fn refresh_thresholds(&mut self) {
        let g = self.shared.generation();
        if g != self.shared_seen {
            self.shared_seen = g;
            let t = self.shared.get();
            self.set_thresholds(t);
        }
    }

    /// Parses `line` as a line of one stream (a single file: its layout is decided by its
    /// first line that shows one, see [`Self::process_line_in`]) and observes it; findings
    /// go to `emit`. Returns whether it parsed.
    pub fn process_line(&mut self, line: &str, emit: &mut dyn FnMut(Finding)) -> bool {
        let mut layout = self.layout;
        let parsed = self.process_line_in(line, &mut layout, emit);
        self.layout = layout;
        parsed
    }

    /// Parses `line` in the layout of the file it comes from (`layout`: `None` until the
    /// file's first line that shows one decides it) and observes it; a line that does not
    /// fit the file's layout is unparsed. Returns whether it parsed.
    pub fn process_line_in(
        &mut self,
        line: &str,
        layout: &mut Option<Layout>,
        emit: &mut dyn FnMut(Finding),
    ) -> bool {
        self.stats.lines += 1;
        if layout.is_none() {
            *layout = Layout::of_line(line);
        }
        let parsed = match *layout {
            Some(l) => parse_line_as(line, l),
            None => Err(ParseError::Client),
        };
        match parsed {
            Ok(l) => {
                self.observe(&l, emit);
                true
            }
            Err(_) => {
                self.stats.unparsed += 1;
                false
            }
        }
    }

    /// Observes one parsed request.
    pub fn observe(&mut self, l: &AccessLine<'_>, emit: &mut dyn FnMut(Finding)) {
        let r = self.classifier.classify(l);
        if !r.interesting() {
            return;
        }
        self.refresh_thresholds();
        self.stats.counted += 1;
        let now = self.clock.monotonic_nanos();
        let window = self.window_ns;
        let ip = l.client;
        let t = self
            .table
            .get_or_insert_with(ip, || Track::new(now), |t| live(t, now, window));
        if now.saturating_sub(t.window_start) > window {
            t.window_start = now;
            t.counts = [0; 6];
            t.alerted = 0;
            t.samples.clear();
        }
        t.last_seen = now;
        let mut out: Vec<Finding> = Vec::new();
        if r.claims_crawler {
            let ua = l.user_agent.unwrap_or("");
            let h = ua_hash(ua);
            let fresh = t
                .bot
                .as_ref()
                .is_some_and(|m| m.ua_hash == h && m.until > now);
            if !fresh {
                let check = self.oracle.check(ip, ua);
                self.stats.oracle_calls += 1;
                let keep = match check {
                    BotCheck::NoClaim | BotCheck::Verified { .. } | BotCheck::Spoofed { .. } => {
                        BOT_FINAL_SECS
                    }
                    _ => BOT_PROVISIONAL_SECS,
                };
                t.bot = Some(BotMemo {
                    ua_hash: h,
                    check,
                    until: now.saturating_add(keep * NS),
                });
            }
            let name = |t: &Track| match t.bot.as_ref().map(|m| &m.check) {
                Some(
                    BotCheck::Verified { name }
                    | BotCheck::Spoofed { name }
                    | BotCheck::Pending { name }
                    | BotCheck::Unresolved { name }
                    | BotCheck::Unverified { name },
                ) => clean(name),
                _ => String::new(),
            };
            let verdict = match t.bot.as_ref().map(|m| &m.check) {
                Some(BotCheck::Verified { .. }) => Verdict::Verified,
                Some(BotCheck::Spoofed { .. }) => Verdict::Spoofed,
                Some(BotCheck::Pending { .. }) => Verdict::Provisional("pending"),
                Some(BotCheck::Unresolved { .. }) => Verdict::Provisional("unresolved"),
                Some(BotCheck::Unverified { .. }) => Verdict::Provisional("unverified"),
                _ => Verdict::NoClaim,
            };
            match verdict {
                Verdict::Verified => {
                    self.stats.verified_exempt += 1;
                    return;
                }
                Verdict::Spoofed => {
                    if t.alerted & A_SPOOF == 0 {
                        t.alerted |= A_SPOOF;
                        out.push(spoof_finding(ip, &name(t), l, self.clock.now()));
                    }
                }
                Verdict::Provisional(state) => {
                    let n = t.bump(Slot::ClaimedBot);
                    if n >= self.th.claimed_bot_requests && t.alerted & A_BOT == 0 {
                        t.alerted |= A_BOT;
                        let details = format!(
                            "{n} requests from {ip} within {} s (threshold {}) claim the crawler {} (verification {state}); user agent: {}{}",
                            self.th.window_secs,
                            self.th.claimed_bot_requests,
                            name(t),
                            clean(l.user_agent.unwrap_or("-")),
                            vhost_note(l),
                        );
                        out.push(
                            Finding::new(
                                CHECK_BOT_UNVERIFIED,
                                Severity::Warning,
                                format!("Unverified crawler traffic from {ip}"),
                                self.clock.now(),
                            )
                            .with_ip(ip)
                            .with_details(details),
                        );
                    }
                }
                Verdict::NoClaim => {}
            }
        }
        count_request(t, &self.th, self.clock.now(), &r, l, &mut out);
        for f in out {
            self.stats.findings += 1;
            emit(f);
        }
    }

    /// Drops expired address state (at most once a minute). Without it, expired state
    /// still gives way under the cap.
    pub fn maintain(&mut self) {
        self.refresh_thresholds();
        let now = self.clock.monotonic_nanos();
        if now.saturating_sub(self.last_maintain) < MAINTAIN_EVERY_NS {
            return;
        }
        self.last_maintain = now;
        let window = self.window_ns;
        self.table.purge(|t| live(t, now, window));
    }

    pub fn stats(&self) -> AccessStats {
        AccessStats {
            addresses_tracked: self.table.len() as u64,
            addresses_evicted: self.table.evicted(),
            ..self.stats
        }
    }
}

/// The per-check counters of one counted request.
fn count_request(
    t: &mut Track,
    th: &AccessThresholds,
    now_ts: jiff::Timestamp,
    r: &Request,
    l: &AccessLine<'_>,
    out: &mut Vec<Finding>,
) {
    let ip = l.client;
    let simple: [(bool, Slot, u8, u32, &'static str); 3] = [
        (
            r.wp_login,
            Slot::WpLogin,
            A_WP,
            th.wp_login_posts,
            CHECK_WP_LOGIN,
        ),
        (
            r.xmlrpc,
            Slot::Xmlrpc,
            A_XMLRPC,
            th.xmlrpc_posts,
            CHECK_XMLRPC,
        ),
        (
            r.user_enum,
            Slot::UserEnum,
            A_ENUM,
            th.user_enum_requests,
            CHECK_USER_ENUM,
        ),
    ];
    for (hit, slot, bit, limit, check) in simple {
        if !hit {
            continue;
        }
        let n = t.bump(slot);
        if n < limit || t.alerted & bit != 0 {
            continue;
        }
        t.alerted |= bit;
        let (sev, message, what) = match slot {
            Slot::WpLogin => (
                Severity::High,
                format!("WordPress login brute force from {ip}"),
                "POSTs to wp-login.php",
            ),
            Slot::Xmlrpc => (
                Severity::High,
                format!("XML-RPC abuse from {ip}"),
                "POSTs to xmlrpc.php",
            ),
            _ => (
                Severity::Warning,
                format!("WordPress user enumeration from {ip}"),
                "author or REST users-route requests",
            ),
        };
        let details = format!(
            "{n} {what} from {ip} within {} s (threshold {limit}); last: {} {} (status {}); user agent: {}{}",
            th.window_secs,
            l.method,
            clean(l.target),
            l.status,
            clean(l.user_agent.unwrap_or("-")),
            vhost_note(l),
        );
        out.push(
            Finding::new(check, sev, message, now_ts)
                .with_ip(ip)
                .with_details(details),
        );
    }
    let mut scanner_reason = None;
    if r.probe_404 {
        if t.samples.len() < MAX_SAMPLES && !t.samples.iter().any(|s| **s == *l.path()) {
            t.samples.push(prefix_within(l.path(), MAX_SAMPLE).into());
        }
        let n = t.bump(Slot::Probe404);
        if n >= th.scanner_probe_404s {
            scanner_reason = Some(format!(
                "{n} 404 answers to probe paths within {} s (threshold {})",
                th.window_secs, th.scanner_probe_404s
            ));
        }
    }
    if r.scanner_agent {
        let n = t.bump(Slot::ScannerAgent);
        if n >= th.scanner_agent_requests && scanner_reason.is_none() {
            scanner_reason = Some(format!(
                "{n} requests with a scanner user agent within {} s (threshold {})",
                th.window_secs, th.scanner_agent_requests
            ));
        }
    }
    if let Some(reason) = scanner_reason {
        if t.alerted & A_SCANNER == 0 {
            t.alerted |= A_SCANNER;
            let mut details = format!("{reason} from {ip}; probed: ");
            if t.samples.is_empty() {
                details.push_str("(none)");
            }
            for (i, s) in t.samples.iter().enumerate() {
                if i > 0 {
                    details.push_str(", ");
                }
                details.push_str(&clean(s));
            }
            let _ = write!(
                details,
                "; user agent: {}{}",
                clean(l.user_agent.unwrap_or("-")),
                vhost_note(l)
            );
            out.push(
                Finding::new(
                    CHECK_SCANNER,
                    Severity::Warning,
                    format!("Web vulnerability scanner from {ip}"),
                    now_ts,
                )
                .with_ip(ip)
                .with_details(details),
            );
        }
    }
}

fn window_ns(th: &AccessThresholds) -> i64 {
    i64::try_from(th.window_secs)
        .unwrap_or(i64::MAX)
        .saturating_mul(NS)
}

/// State is live while its window is open or its oracle answer is fresh.
fn live(t: &Track, now: i64, window: i64) -> bool {
    now.saturating_sub(t.last_seen) <= window || t.bot.as_ref().is_some_and(|m| m.until > now)
}

fn ua_hash(ua: &str) -> u64 {
    let mut h = FxHasher::default();
    ua.hash(&mut h);
    h.finish()
}

fn spoof_finding(ip: IpAddr, name: &str, l: &AccessLine<'_>, now: jiff::Timestamp) -> Finding {
    Finding::new(
        CHECK_UA_SPOOF,
        Severity::High,
        format!("Crawler user agent spoofed by {ip}"),
        now,
    )
    .with_ip(ip)
    .with_details(format!(
        "{ip} claims the crawler {} and is confirmed not to be it; request: {} {}; user agent: {}{}",
        clean(name),
        l.method,
        clean(l.target),
        clean(l.user_agent.unwrap_or("-")),
        vhost_note(l)
    ))
}

fn vhost_note(l: &AccessLine<'_>) -> String {
    match l.vhost {
        Some(v) => format!("; vhost: {}", clean(v)),
        None => String::new(),
    }
}

/// Log text is hostile: at most [`MAX_SAMPLE`] bytes, control characters replaced by `?`.
fn clean(s: &str) -> String {
    printable_prefix(s, MAX_SAMPLE)
}

#[cfg(test)]
mod tests;
