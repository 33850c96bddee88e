//! Scoring: what an event adds to an address's score, and how a score decays.
//!
//! Rules (classification version [`SCORING_VERSION`]):
//! - Each scored event adds its kind's base ([`base`]): brute force 40 (a brute-force
//!   finding already stands for `thresholds.auth_failures` failed logins), webshell upload
//!   60, phishing 50, command and control 80, WAF block 10.
//! - Event volume: every scored event after the address's first adds [`VOLUME_STEP`].
//! - Several accounts: an event that names an account this address had not targeted before
//!   (in a scored event) adds [`NEW_ACCOUNT`], from the second account on.
//! - `auth_success` (and the historical `file_upload`) add nothing: they are kept in the
//!   history and the account list only (spec rule 1).
//! - Scores are capped at 100 and decay exponentially with the half-life
//!   `threat.half_life_hours` (default 7 days): `score(t) = score(t0) * 0.5^((t - t0) /
//!   half_life)`. An address quiet for three weeks keeps an eighth of its score, so one at
//!   100 drifts below `suspicious` (40) after about 9 days and below 10 after 3.3 weeks.
//! - A stored score is the value reached after its last event, with the instant; decay is
//!   applied when read, so stored scores are never rewritten (rule 2). A change of these
//!   rules gets a new classification version; records keep the version they were scored
//!   under.

use crate::findings::evidence::AttackKind;

/// Classification version of these rules.
pub const SCORING_VERSION: u8 = 1;
/// Highest score.
pub const MAX: f32 = 100.0;
/// Added by each scored event after the first.
pub const VOLUME_STEP: f32 = 2.0;
/// Added by a scored event naming a new account, from the second account on.
pub const NEW_ACCOUNT: f32 = 5.0;

/// What one event of `kind` adds before volume and account terms.
pub fn base(kind: AttackKind) -> f32 {
    match kind {
        AttackKind::BruteForce => 40.0,
        AttackKind::WebshellUpload => 60.0,
        AttackKind::Phishing => 50.0,
        AttackKind::CommandAndControl => 80.0,
        AttackKind::WafBlock => 10.0,
        AttackKind::AuthSuccess | AttackKind::FileUpload => 0.0,
    }
}

/// What one event adds: `prior_scored` scored events were seen before it from the address,
/// `new_accounts` accounts it names were not targeted before, and `known_accounts` were.
pub fn increment(
    kind: AttackKind,
    prior_scored: u64,
    new_accounts: u32,
    known_accounts: u32,
) -> f32 {
    if !kind.scored() {
        return 0.0;
    }
    let mut add = base(kind);
    if prior_scored > 0 {
        add += VOLUME_STEP;
    }
    // The first account an address ever targets is not "multi-account".
    let extra = if known_accounts == 0 {
        new_accounts.saturating_sub(1)
    } else {
        new_accounts
    };
    add + NEW_ACCOUNT * extra as f32
}

/// `score` recorded `elapsed_secs` ago, decayed with `half_life_secs`.
pub fn decayed(score: f32, elapsed_secs: f64, half_life_secs: f64) -> f32 {
    if score <= 0.0 {
        return 0.0;
    }
    if elapsed_secs <= 0.0 || half_life_secs <= 0.0 {
        return score.min(MAX);
    }
    let v = f64::from(score) * 0.5f64.powf(elapsed_secs / half_life_secs);
    (v as f32).clamp(0.0, MAX)
}

/// A score as the API shows it: a whole number 0-100.
pub fn shown(score: f32) -> u8 {
    score.round().clamp(0.0, MAX) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEEK: f64 = 7.0 * 86400.0;

    #[test]
    fn auth_success_adds_nothing_and_volume_and_accounts_add() {
        assert_eq!(increment(AttackKind::AuthSuccess, 10, 3, 0), 0.0);
        assert_eq!(increment(AttackKind::FileUpload, 0, 0, 0), 0.0);
        assert_eq!(increment(AttackKind::BruteForce, 0, 1, 0), 40.0);
        assert_eq!(increment(AttackKind::BruteForce, 1, 0, 1), 42.0);
        assert_eq!(increment(AttackKind::BruteForce, 0, 3, 0), 50.0);
        assert_eq!(increment(AttackKind::WafBlock, 4, 1, 1), 17.0);
    }

    #[test]
    fn half_life_decays_to_clean() {
        assert!((decayed(80.0, WEEK, WEEK) - 40.0).abs() < 1e-3);
        assert!((decayed(80.0, 2.0 * WEEK, WEEK) - 20.0).abs() < 1e-3);
        assert!(decayed(100.0, 3.0 * WEEK + 86400.0, WEEK) < 12.5);
        assert_eq!(decayed(50.0, -5.0, WEEK), 50.0);
        assert_eq!(decayed(0.0, 1.0, WEEK), 0.0);
        assert_eq!(shown(79.6), 80);
        assert_eq!(shown(150.0), 100);
    }
}
