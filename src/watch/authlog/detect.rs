//! Turns [`AuthEvent`]s into findings.
//!
//! Checks (names are stable API):
//! - `ssh_bruteforce` (HIGH): `failures` or more sshd failures from one address within
//!   `window_secs`. Message `SSH brute force from <ip>`.
//! - `pam_bruteforce` (HIGH): the same for PAM services other than sshd and for Dovecot.
//!   Message `Authentication brute force from <ip>`.
//! - `ssh_root_login` (WARNING): a successful sshd login as `root`. Message
//!   `SSH root login from <ip>`; emitted for every such login.
//! - `auth_new_address_login` (WARNING): a successful login (sshd; Dovecot too when
//!   `new_address_mail`) from an address the user never logged in from, for a user with at
//!   least one known address. A user's first login seen only records the baseline.
//!   Message `Login as <user> from new address <ip>`.
//!
//! Messages depend only on the address (and user), so the active set merges repeats.
//!
//! Counting rules (to count attempts, not log lines):
//! - the window starts at an address's first failure and restarts with the first failure
//!   after it has elapsed; a brute-force finding is emitted once per window, when the count
//!   reaches the threshold;
//! - sshd: each `Failed password`/`keyboard-interactive` line is one attempt; connection-level
//!   lines (`Invalid user`, `not allowed`, `Failed none`/`publickey`, `Connection closed by
//!   ... [preauth]`, `maximum authentication attempts`) count one per connection (source
//!   port), and an `Invalid user` line covers the first password attempt on its connection;
//! - PAM lines of the `sshd` service are ignored (sshd logs the same attempt itself);
//! - Dovecot login lines count their `N attempts`; Dovecot auth-process lines and
//!   `pam_unix(dovecot:auth)` lines describe the same attempts, so the Dovecot count is the
//!   largest of the three sources, added to the other PAM services' count.
//!
//! Failures without an address (local `su`, `rhost` a host name) are only counted.

use std::fmt::Write as _;
use std::net::IpAddr;

use crate::clock::SharedClock;
use crate::findings::{Finding, Severity};
use crate::text::{prefix_within, printable_prefix};

use super::known::{KnownLogins, Seen};
use super::names::AddrNames;
use super::parse::{parse_line, AuthEvent, AuthKind, AuthService};
use super::table::AddrTable;
use super::thresholds::{AuthThresholds, SharedThresholds};

/// Distinct user names remembered per address (for the finding's details).
const MAX_USERS_PER_ADDRESS: usize = 5;
/// Distinct raw service names remembered per address.
const MAX_SERVICES_PER_ADDRESS: usize = 4;
/// Longest user name copied into a finding.
const MAX_USER_IN_FINDING: usize = 64;
/// How often [`AuthDetector::maintain`] purges expired state.
const MAINTAIN_EVERY_NS: i64 = 60_000_000_000;

/// Check names.
pub const CHECK_SSH_BRUTEFORCE: &str = "ssh_bruteforce";
pub const CHECK_PAM_BRUTEFORCE: &str = "pam_bruteforce";
pub const CHECK_SSH_ROOT_LOGIN: &str = "ssh_root_login";
pub const CHECK_NEW_ADDRESS_LOGIN: &str = "auth_new_address_login";

/// Counters of the detector (cumulative since creation, except the two sizes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuthDetectorStats {
    /// Events observed.
    pub events: u64,
    /// Failures counted towards an address (after the counting rules).
    pub failures_counted: u64,
    /// Failures without a usable address.
    pub unattributed_failures: u64,
    /// Of those, lines whose address was ambiguous (client text imitating the daemon's
    /// layout, decisions 276-277): blamed on nobody; the first is logged.
    pub ambiguous_addresses: u64,
    /// Findings emitted.
    pub findings: u64,
    /// Addresses with failure state now (size).
    pub addresses_tracked: u64,
    /// Live address state evicted by `auth_max_tracked_addresses`.
    pub addresses_evicted: u64,
    /// (user, address) pairs remembered now (size).
    pub known_logins: u64,
    /// Pairs forgotten because of `auth_max_known_logins`.
    pub known_logins_evicted: u64,
    /// User names not recorded in an address's details (past 5 distinct per address).
    pub users_not_recorded: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Channel {
    Ssh,
    Pam,
    DovecotLogin,
    DovecotAuth,
    DovecotPam,
}

/// Failure state of one address (64 bytes: the table holds one per tracked address).
struct Track {
    window_start: i64,
    last_seen: i64,
    ssh: u32,
    pam: u32,
    dc_login: u32,
    dc_auth: u32,
    dc_pam: u32,
    /// The source port of the connection counted last, when [`CONN_PORT`] is set.
    conn_port: u16,
    /// [`SSH_ALERTED`], [`PAM_ALERTED`], [`CONN_PORT`], [`CREDIT`].
    flags: u8,
    names: AddrNames,
}

/// `ssh_bruteforce` was emitted in this window.
const SSH_ALERTED: u8 = 1;
/// `pam_bruteforce` was emitted in this window.
const PAM_ALERTED: u8 = 2;
/// `conn_port` holds a port.
const CONN_PORT: u8 = 4;
/// The connection's connection-level line covers its first password attempt.
const CREDIT: u8 = 8;

impl Track {
    fn new(now: i64) -> Track {
        Track {
            window_start: now,
            last_seen: now,
            ssh: 0,
            pam: 0,
            dc_login: 0,
            dc_auth: 0,
            dc_pam: 0,
            conn_port: 0,
            flags: 0,
            names: AddrNames::default(),
        }
    }

    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    fn set(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }

    fn conn_port(&self) -> Option<u16> {
        self.has(CONN_PORT).then_some(self.conn_port)
    }

    fn set_conn_port(&mut self, port: Option<u16>) {
        self.set(CONN_PORT, port.is_some());
        self.conn_port = port.unwrap_or(0);
    }

    fn restart_window(&mut self, now: i64) {
        let port = self.conn_port();
        *self = Track::new(now);
        self.set_conn_port(port);
    }

    fn pam_score(&self) -> u32 {
        let dovecot = self.dc_login.max(self.dc_auth).max(self.dc_pam);
        self.pam.saturating_add(dovecot)
    }

    /// How much an sshd event adds (see the module doc).
    fn ssh_weight(&mut self, ev: &AuthEvent<'_>) -> u32 {
        let same_conn = ev.port.is_some() && self.conn_port() == ev.port;
        let attempt =
            ev.kind == AuthKind::Failure && !matches!(ev.method, Some("none" | "publickey"));
        if attempt {
            let covered = same_conn && self.has(CREDIT);
            self.set_conn_port(ev.port);
            self.set(CREDIT, false);
            u32::from(!covered)
        } else if same_conn {
            0
        } else {
            self.set_conn_port(ev.port);
            self.set(
                CREDIT,
                matches!(ev.kind, AuthKind::InvalidUser | AuthKind::NotAllowed)
                    || ev.kind == AuthKind::Failure,
            );
            1
        }
    }

    /// Returns false when the user could not be recorded (cap).
    fn note(&mut self, user: Option<&str>, service: &str) -> bool {
        let service = prefix_within(service, 32);
        if self.names.services_len() < MAX_SERVICES_PER_ADDRESS && !self.names.has_service(service)
        {
            self.names.push_service(service);
        }
        let Some(user) = user else { return true };
        let user = prefix_within(user, MAX_USER_IN_FINDING);
        if self.names.has_user(user) {
            return true;
        }
        if self.names.users_len() < MAX_USERS_PER_ADDRESS {
            self.names.push_user(user);
            true
        } else {
            self.names.count_user_not_kept();
            false
        }
    }
}

/// The authentication-log detector. Single-threaded; owned by the watcher thread.
pub struct AuthDetector {
    th: AuthThresholds,
    clock: SharedClock,
    window_ns: i64,
    table: AddrTable<Track>,
    known: KnownLogins,
    stats: AuthDetectorStats,
    last_maintain: i64,
    /// Thresholds a reload may change (see [`AuthDetector::shared_thresholds`]).
    shared: std::sync::Arc<SharedThresholds>,
    shared_seen: u64,
}

impl AuthDetector {
    /// A detector with `thresholds` (forced into range, see [`AuthThresholds::clamped`]).
    pub fn new(thresholds: AuthThresholds, clock: SharedClock) -> Self {
        let th = thresholds.clamped();
        let window_ns = i64::try_from(th.window_secs)
            .unwrap_or(i64::MAX)
            .saturating_mul(1_000_000_000);
        let last_maintain = clock.monotonic_nanos();
        AuthDetector {
            table: AddrTable::new(th.max_tracked_addresses),
            known: KnownLogins::new(th.max_known_logins),
            shared: SharedThresholds::new(th.clone()),
            shared_seen: 0,
            th,
            clock,
            window_ns,
            stats: AuthDetectorStats::default(),
            last_maintain,
        }
    }

    pub fn thresholds(&self) -> &AuthThresholds {
        &self.th
    }

    /// The handle a configuration reload sets new thresholds through; the detector applies
    /// them before its next event, keeping its state.
    pub fn shared_thresholds(&self) -> std::sync::Arc<SharedThresholds> {
        self.shared.clone()
    }

    /// Applies new thresholds (forced into range): open failure windows keep their counts
    /// and are judged by the new window and threshold from now on; lower caps evict on the
    /// next insertion.
    pub fn set_thresholds(&mut self, thresholds: AuthThresholds) {
        let th = thresholds.clamped();
        self.window_ns = i64::try_from(th.window_secs)
            .unwrap_or(i64::MAX)
            .saturating_mul(1_000_000_000);
        self.table.set_cap(th.max_tracked_addresses);
        self.known.set_cap(th.max_known_logins);
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

    /// Parses `line` and observes the event. Returns whether the line was an auth event.
    pub fn process_line(&mut self, line: &str, emit: &mut dyn FnMut(Finding)) -> bool {
        match parse_line(line) {
            Some(ev) => {
                self.observe(&ev, emit);
                true
            }
            None => false,
        }
    }

    /// Observes one event, calling `emit` for each finding it completes.
    pub fn observe(&mut self, ev: &AuthEvent<'_>, emit: &mut dyn FnMut(Finding)) {
        self.refresh_thresholds();
        self.stats.events += 1;
        match ev.kind {
            AuthKind::SessionOpened => {}
            AuthKind::Success => self.on_success(ev, emit),
            _ => self.on_failure(ev, emit),
        }
    }

    fn on_failure(&mut self, ev: &AuthEvent<'_>, emit: &mut dyn FnMut(Finding)) {
        let channel = match ev.service {
            AuthService::Sshd => Channel::Ssh,
            AuthService::Pam if ev.raw_service == "sshd" => return,
            AuthService::Pam if ev.raw_service.starts_with("dovecot") => Channel::DovecotPam,
            AuthService::Pam => Channel::Pam,
            AuthService::Dovecot if ev.raw_service.ends_with("-login") => Channel::DovecotLogin,
            AuthService::Dovecot => Channel::DovecotAuth,
        };
        let Some(ip) = ev.ip else {
            self.stats.unattributed_failures += 1;
            if ev.ambiguous_address {
                self.stats.ambiguous_addresses += 1;
                if self.stats.ambiguous_addresses == 1 {
                    log::warn!(
                        "auth log: a {} failure line names more than one address in client-written fields; \
                         blamed on nobody (counted, logged once)",
                        ev.service
                    );
                }
            }
            return;
        };
        let now = self.clock.monotonic_nanos();
        let window = self.window_ns;
        let t = self.table.get_or_insert_with(
            ip,
            || Track::new(now),
            |t| now.saturating_sub(t.last_seen) <= window,
        );
        if now.saturating_sub(t.window_start) > window {
            t.restart_window(now);
        }
        t.last_seen = now;
        let add = match channel {
            Channel::Ssh => t.ssh_weight(ev),
            _ => ev.attempts.max(1),
        };
        let slot = match channel {
            Channel::Ssh => &mut t.ssh,
            Channel::Pam => &mut t.pam,
            Channel::DovecotLogin => &mut t.dc_login,
            Channel::DovecotAuth => &mut t.dc_auth,
            Channel::DovecotPam => &mut t.dc_pam,
        };
        *slot = slot.saturating_add(add);
        self.stats.failures_counted += u64::from(add);
        if !t.note(ev.user, ev.raw_service) {
            self.stats.users_not_recorded += 1;
        }
        let limit = self.th.failures;
        let (check, count) = if channel == Channel::Ssh {
            if t.ssh < limit || t.has(SSH_ALERTED) {
                return;
            }
            t.set(SSH_ALERTED, true);
            (CHECK_SSH_BRUTEFORCE, t.ssh)
        } else {
            let score = t.pam_score();
            if score < limit || t.has(PAM_ALERTED) {
                return;
            }
            t.set(PAM_ALERTED, true);
            (CHECK_PAM_BRUTEFORCE, score)
        };
        let f = bruteforce_finding(check, ip, count, t, &self.th, self.clock.now());
        self.stats.findings += 1;
        emit(f);
    }

    fn on_success(&mut self, ev: &AuthEvent<'_>, emit: &mut dyn FnMut(Finding)) {
        let (Some(ip), Some(user)) = (ev.ip, ev.user) else {
            return;
        };
        let method = ev.method.unwrap_or("unknown");
        if ev.service == AuthService::Sshd && user == "root" {
            let f = Finding::new(
                CHECK_SSH_ROOT_LOGIN,
                Severity::Warning,
                format!("SSH root login from {ip}"),
                self.clock.now(),
            )
            .with_ip(ip)
            .with_details(format!(
                "root logged in with {} from {ip} on host {} ({})",
                printable_prefix(method, 32),
                printable_prefix(ev.host, 64),
                printable_prefix(ev.raw_service, 32)
            ));
            self.stats.findings += 1;
            emit(f);
        }
        let tracked = ev.service == AuthService::Sshd
            || (ev.service == AuthService::Dovecot && self.th.new_address_mail);
        if !tracked {
            return;
        }
        if let Seen::New(before) = self.known.observe(user, ip) {
            let u = printable_prefix(user, MAX_USER_IN_FINDING);
            let f = Finding::new(
                CHECK_NEW_ADDRESS_LOGIN,
                Severity::Warning,
                format!("Login as {u} from new address {ip}"),
                self.clock.now(),
            )
            .with_ip(ip)
            .with_details(format!(
                "first successful {} login for {u} from {ip} (method {}; {before} other known address{})",
                ev.service,
                printable_prefix(method, 32),
                if before == 1 { "" } else { "es" }
            ));
            self.stats.findings += 1;
            emit(f);
        }
    }

    /// Drops expired address state (at most once a minute of monotonic time). Call it from
    /// the watcher loop; without it expired state still gives way under the cap.
    pub fn maintain(&mut self) {
        self.refresh_thresholds();
        let now = self.clock.monotonic_nanos();
        if now.saturating_sub(self.last_maintain) < MAINTAIN_EVERY_NS {
            return;
        }
        self.last_maintain = now;
        let window = self.window_ns;
        self.table
            .purge(|t| now.saturating_sub(t.last_seen) <= window);
    }

    /// Current counters.
    pub fn stats(&self) -> AuthDetectorStats {
        AuthDetectorStats {
            addresses_tracked: self.table.len() as u64,
            addresses_evicted: self.table.evicted(),
            known_logins: self.known.len() as u64,
            known_logins_evicted: self.known.evicted(),
            ..self.stats
        }
    }

    /// Every remembered (user, address) login pair, oldest first, so the caller can persist
    /// the baseline across restarts.
    pub fn known_logins(&self) -> Vec<(String, IpAddr)> {
        self.known.snapshot()
    }

    /// Restores pairs saved with [`AuthDetector::known_logins`] (no findings; the cap
    /// applies).
    pub fn restore_known_logins<'a>(&mut self, pairs: impl IntoIterator<Item = (&'a str, IpAddr)>) {
        for (user, ip) in pairs {
            self.known.observe(user, ip);
        }
    }
}

fn bruteforce_finding(
    check: &'static str,
    ip: IpAddr,
    count: u32,
    t: &Track,
    th: &AuthThresholds,
    now: jiff::Timestamp,
) -> Finding {
    let message = if check == CHECK_SSH_BRUTEFORCE {
        format!("SSH brute force from {ip}")
    } else {
        format!("Authentication brute force from {ip}")
    };
    let mut details = format!(
        "{count} failed logins from {ip} within {} s (threshold {}); users: ",
        th.window_secs, th.failures
    );
    if t.names.users_len() == 0 {
        details.push_str("(none logged)");
    }
    for (i, u) in t.names.users().enumerate() {
        if i > 0 {
            details.push_str(", ");
        }
        details.push_str(&printable_prefix(u, MAX_USER_IN_FINDING));
    }
    if t.names.users_more() > 0 {
        let _ = write!(details, " (+{} more)", t.names.users_more());
    }
    details.push_str("; services: ");
    for (i, s) in t.names.services().enumerate() {
        if i > 0 {
            details.push_str(", ");
        }
        details.push_str(&printable_prefix(s, 32));
    }
    Finding::new(check, Severity::High, message, now)
        .with_ip(ip)
        .with_details(details)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod size {
    #[test]
    fn track_is_64_bytes() {
        // The table keeps one per tracked address (Option<Track>: the box is the niche).
        assert_eq!(std::mem::size_of::<super::AddrNames>(), 24);
        assert_eq!(std::mem::size_of::<Option<super::Track>>(), 64);
    }
}
