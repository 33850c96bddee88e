//! What a finding is evidence of, beyond its severity.

/// Checks whose findings name an attacker's address in `ip`: the evidence automatic
/// blocking acts on, and the only findings the enriched route offers `block_ip` for.
/// Other findings may carry an address (a cron line's download host, a client of a
/// suspicious request) that is not the attacker's own.
pub const ATTACKER_ADDRESS_CHECKS: &[&str] = &[
    "ssh_bruteforce",
    "pam_bruteforce",
    "modsec_block_escalation",
];

/// True when `check` reports an attacker address.
pub fn reports_attacker_address(check: &str) -> bool {
    ATTACKER_ADDRESS_CHECKS.contains(&check)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_login_attack_checks_report_attackers() {
        assert!(reports_attacker_address("ssh_bruteforce"));
        assert!(reports_attacker_address("pam_bruteforce"));
        assert!(reports_attacker_address("modsec_block_escalation"));
        assert!(!reports_attacker_address("suspicious_cron"));
        assert!(!reports_attacker_address("webshell"));
    }
}
