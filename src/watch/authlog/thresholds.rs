//! Detector thresholds and their configuration key names.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Thresholds of the authentication-log detector. Each field is one config key in the
/// `[thresholds]` table; [`CONFIG_KEYS`] lists the names with their meaning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthThresholds {
    /// `thresholds.auth_failures`: failures from one address within the window that make
    /// a brute-force finding. Default 5.
    pub failures: u32,
    /// `thresholds.auth_window_seconds`: the window, counted from an address's first
    /// failure. Default 600.
    pub window_secs: u64,
    /// `thresholds.auth_max_tracked_addresses`: addresses with failure state kept at once;
    /// past it the least recently active is evicted (counted). Default 65,536.
    pub max_tracked_addresses: usize,
    /// `thresholds.auth_max_known_logins`: (user, address) pairs remembered for
    /// `auth_new_address_login`; past it the oldest pair is forgotten (counted). Default 65,536.
    pub max_known_logins: usize,
    /// `thresholds.auth_new_address_mail`: also report Dovecot (IMAP/POP3) logins from a
    /// new address. Off by default: mail clients roam between mobile addresses.
    pub new_address_mail: bool,
}

impl Default for AuthThresholds {
    fn default() -> Self {
        AuthThresholds {
            failures: 5,
            window_secs: 600,
            max_tracked_addresses: 65_536,
            max_known_logins: 65_536,
            new_address_mail: false,
        }
    }
}

/// `(config key, meaning)` for every field of [`AuthThresholds`], in field order.
pub const CONFIG_KEYS: &[(&str, &str)] = &[
    (
        "thresholds.auth_failures",
        "failed logins from one address within the window that raise ssh_bruteforce / pam_bruteforce (1-100000, default 5)",
    ),
    (
        "thresholds.auth_window_seconds",
        "window for counting failed logins, from the address's first failure (1-604800, default 600)",
    ),
    (
        "thresholds.auth_max_tracked_addresses",
        "addresses with failure state kept at once; the least recently active is evicted (1-10000000, default 65536)",
    ),
    (
        "thresholds.auth_max_known_logins",
        "(user, address) pairs remembered for auth_new_address_login (1-10000000, default 65536)",
    ),
    (
        "thresholds.auth_new_address_mail",
        "report Dovecot logins from a new address too (default false)",
    ),
];

/// Thresholds shared with a running detector: a configuration reload sets them, and the
/// detector picks them up before its next event (one atomic load per event), keeping its
/// failure windows and known logins.
pub struct SharedThresholds {
    generation: AtomicU64,
    value: Mutex<AuthThresholds>,
}

impl SharedThresholds {
    pub fn new(t: AuthThresholds) -> Arc<SharedThresholds> {
        Arc::new(SharedThresholds {
            generation: AtomicU64::new(0),
            value: Mutex::new(t),
        })
    }

    /// New thresholds for the detector.
    pub fn set(&self, t: AuthThresholds) {
        let mut v = self.value.lock();
        if *v != t {
            *v = t;
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    pub fn get(&self) -> AuthThresholds {
        self.value.lock().clone()
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// A threshold out of its range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThresholdError {
    /// The config key (see [`CONFIG_KEYS`]).
    pub key: &'static str,
    pub message: String,
}

impl fmt::Display for ThresholdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

impl std::error::Error for ThresholdError {}

impl AuthThresholds {
    /// Checks every range; the config loader reports the errors with their keys.
    pub fn validate(&self) -> Result<(), Vec<ThresholdError>> {
        let mut errs = Vec::new();
        let mut check = |ok: bool, key: &'static str, range: &str| {
            if !ok {
                errs.push(ThresholdError {
                    key,
                    message: format!("must be in {range}"),
                });
            }
        };
        check(
            (1..=100_000).contains(&self.failures),
            "thresholds.auth_failures",
            "1..=100000",
        );
        check(
            (1..=604_800).contains(&self.window_secs),
            "thresholds.auth_window_seconds",
            "1..=604800",
        );
        check(
            (1..=10_000_000).contains(&self.max_tracked_addresses),
            "thresholds.auth_max_tracked_addresses",
            "1..=10000000",
        );
        check(
            (1..=10_000_000).contains(&self.max_known_logins),
            "thresholds.auth_max_known_logins",
            "1..=10000000",
        );
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }

    /// The same thresholds with every value forced into its range (used by the detector
    /// so an unvalidated value can never disable it or exhaust memory).
    pub fn clamped(&self) -> AuthThresholds {
        AuthThresholds {
            failures: self.failures.clamp(1, 100_000),
            window_secs: self.window_secs.clamp(1, 604_800),
            max_tracked_addresses: self.max_tracked_addresses.clamp(1, 10_000_000),
            max_known_logins: self.max_known_logins.clamp(1, 10_000_000),
            new_address_mail: self.new_address_mail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_keys_cover_fields() {
        let t = AuthThresholds::default();
        assert_eq!((t.failures, t.window_secs), (5, 600));
        assert!(t.validate().is_ok());
        assert_eq!(CONFIG_KEYS.len(), 5);
        assert_eq!(CONFIG_KEYS[0].0, "thresholds.auth_failures");
        assert_eq!(CONFIG_KEYS[1].0, "thresholds.auth_window_seconds");
    }

    #[test]
    fn out_of_range_values_are_reported_by_key_and_clamped() {
        let t = AuthThresholds {
            failures: 0,
            window_secs: 0,
            max_tracked_addresses: 0,
            ..AuthThresholds::default()
        };
        let errs = t.validate().unwrap_err();
        let keys: Vec<_> = errs.iter().map(|e| e.key).collect();
        assert_eq!(
            keys,
            [
                "thresholds.auth_failures",
                "thresholds.auth_window_seconds",
                "thresholds.auth_max_tracked_addresses"
            ]
        );
        let c = t.clamped();
        assert_eq!(
            (c.failures, c.window_secs, c.max_tracked_addresses),
            (1, 1, 1)
        );
        assert!(c.validate().is_ok());
    }
}
