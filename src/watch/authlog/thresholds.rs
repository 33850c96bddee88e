//! Detector thresholds and their configuration key names.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Thresholds of the authentication-log detector. Each field is one config key in the
/// `[thresholds]` table; [`KEYS`] names them.
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
    /// The defaults of `config::keys::KEYS`.
    fn default() -> Self {
        use crate::config::keys::int_default;
        AuthThresholds {
            failures: int_default(KEYS[0]) as u32,
            window_secs: int_default(KEYS[1]) as u64,
            max_tracked_addresses: int_default(KEYS[2]) as usize,
            max_known_logins: int_default(KEYS[3]) as usize,
            new_address_mail: crate::config::keys::bool_default(KEYS[4]),
        }
    }
}

/// The config key of every field of [`AuthThresholds`], in field order; ranges, defaults
/// and meaning are in `config::keys::KEYS`.
pub const KEYS: [&str; 5] = [
    "thresholds.auth_failures",
    "thresholds.auth_window_seconds",
    "thresholds.auth_max_tracked_addresses",
    "thresholds.auth_max_known_logins",
    "thresholds.auth_new_address_mail",
];

/// The range of an integer key in the key table.
fn range(key: &str) -> (u64, u64) {
    match crate::config::keys::find(key).map(|k| k.kind) {
        Some(crate::config::keys::Kind::Int(lo, hi)) => (lo.max(0) as u64, hi.max(0) as u64),
        _ => (0, u64::MAX),
    }
}

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
    /// The config key (see [`KEYS`]).
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
    /// The integer fields in [`KEYS`] order.
    fn values(&self) -> [u64; 4] {
        [
            u64::from(self.failures),
            self.window_secs,
            self.max_tracked_addresses as u64,
            self.max_known_logins as u64,
        ]
    }

    /// Checks every range (the key table's); the config loader reports the errors with
    /// their keys.
    pub fn validate(&self) -> Result<(), Vec<ThresholdError>> {
        let mut errs = Vec::new();
        for (v, key) in self.values().into_iter().zip(KEYS) {
            let (lo, hi) = range(key);
            if !(lo..=hi).contains(&v) {
                errs.push(ThresholdError {
                    key,
                    message: format!("must be in {lo}..={hi}"),
                });
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }

    /// The same thresholds with every value forced into its range (used by the detector
    /// so an unvalidated value can never disable it or exhaust memory).
    pub fn clamped(&self) -> AuthThresholds {
        let c = |i: usize| {
            let (lo, hi) = range(KEYS[i]);
            self.values()[i].clamp(lo, hi)
        };
        AuthThresholds {
            failures: u32::try_from(c(0)).unwrap_or(u32::MAX),
            window_secs: c(1),
            max_tracked_addresses: usize::try_from(c(2)).unwrap_or(usize::MAX),
            max_known_logins: usize::try_from(c(3)).unwrap_or(usize::MAX),
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
        for key in &KEYS[..4] {
            let (lo, hi) = range(key);
            assert!(lo <= hi && hi < u64::MAX, "{key} is in the key table");
        }
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
            (1, 1, 16)
        );
        assert!(c.validate().is_ok());
    }
}
