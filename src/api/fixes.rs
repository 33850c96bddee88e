//! Short remediation texts (`fix` on enriched findings), one per check name.

/// The text for checks without their own.
pub const GENERIC_FIX: &str = "Review the details and the file, account or address the finding names, remove the cause, and confirm at the next scan that the finding is gone.";

/// What an operator should do about a finding of `check`.
pub fn fix_for(check: &str) -> &'static str {
    match check {
        "webshell" => "Remove the file (or keep it in quarantine), then find how it got there: update the CMS, plugins and themes, change the site's passwords and look for other backdoors.",
        "obfuscated_php" => "Obfuscated code in a site is rarely legitimate: replace the file from a clean copy of the software it belongs to, or remove it.",
        "php_in_uploads" => "PHP files do not belong in upload directories: remove the file and deny PHP execution there in the web server configuration.",
        "htaccess_injection" => "Restore .htaccess from a clean copy, removing the injected redirect or handler lines, and find the code that wrote them.",
        "phishing" => "Remove the phishing kit and its directory, then close the way it was uploaded (compromised account or vulnerable plugin).",
        "malicious_js" => "Remove the injected script (or restore the file from a clean copy) and find what injected it, often a plugin or the database.",
        "uid0_account" => "Only root may have UID 0: lock the account (usermod -L), find out who created it, and delete it once the investigation no longer needs it.",
        "sshd_root_password_login" => "Set PermitRootLogin to prohibit-password or no in sshd_config, use key-based logins, and reload sshd.",
        "suspicious_cron" => "Remove the cron entry unless someone on the host created it on purpose, and find the process or account that wrote it.",
        "world_writable_php" => "Remove write permission for others (chmod o-w) and keep site files owned by the site's account, not writable by the web server.",
        "suid_unexpected" => "Remove the set-user-ID and set-group-ID bits (chmod u-s,g-s), or the file itself, unless a trusted package installed it.",
        "waf_status" => "Install and load ModSecurity with the hint in the details (or the panel's security centre), turn the engine back on for the scopes named, update stale rule sets, and fix the web-server reload so rule changes load.",
        "modsec_block_escalation" => "Block the address (offered as block_ip; the daemon blocks it automatically unless auto_response.dry_run is on), and check the WAF events of the rules and URIs named for what it was after.",
        "ssh_bruteforce" | "pam_bruteforce" => "Block the address (offered as block_ip), keep password logins disabled for exposed accounts, and check the log for a successful login from it.",
        "executable_in_uploads" => "Quarantine the program (offered as a fix), look for the process it started and how it got there, and deny execution in upload directories.",
        "php_dropper" => "Quarantine the dropper (offered as a fix), remove or quarantine the file it wrote (its own finding, if a signature matched), and find how the dropper got there.",
        "staged_package_malware" => "Quarantine the package before anyone extracts it (offered as a fix), and find out who uploaded it and why.",
        "file_index_changed" => "Compare the file with a clean copy of the software it belongs to (core files: the release's checksums); restore it or remove it, and find what wrote it.",
        "staged_package_unverified" => "Open the package by hand in a safe place, or remove it: it is over the archive limits, damaged or encrypted, so its members were not all scanned.",
        "phishing_page" => "Quarantine the page (offered as a fix), remove the rest of the kit beside it, and close the way it was uploaded (compromised account or vulnerable plugin).",
        "perf_error_log" => "Truncate the log (offered as a fix), then find what logs on every request: a PHP notice in a plugin or theme, usually.",
        "php_display_errors" => "Set display_errors = Off in the site's PHP settings (offered as a fix) and log errors instead; visitors must not see paths and queries.",
        "perf_cms_cron" => "Set DISABLE_WP_CRON in wp-config.php and run wp-cron.php from the account's crontab every 15 minutes (offered as a fix).",
        "php_taint_flow" => "Request data reaches code execution, a shell command or an include in this file: remove or quarantine it unless it is the site's own code, then fix that code to validate its input (allowlist, intval, escapeshellarg).",
        "db_option_injected" => "Clean the option (offered as a fix; the old value is kept in the database-object backups), change the site's admin and database passwords, and find the plugin or account that wrote it.",
        "db_post_injected" => "Remove the injected script or iframe from the post in the editor, change the site's admin passwords, and look for the same markup in other posts and options.",
        "db_trigger_injected" => "Drop the trigger (offered as a fix; its CREATE statement is kept in the database-object backups and can be restored), change the site's database and admin passwords, and check the users and options tables for what it wrote.",
        "db_event_injected" => "Drop the event (offered as a fix; its CREATE statement is kept in the database-object backups and can be restored), change the site's database password, and check what the event changed.",
        "db_routine_injected" => "Drop the procedure or function (offered as a fix; its CREATE statement is kept in the database-object backups and can be restored), change the site's database and admin passwords, and look for the trigger, event or code that calls it.",
        c if c.starts_with("hardening_") => "Change the setting the finding names to the value the hardening report recommends, then run the audit again.",
        _ => GENERIC_FIX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_checks_have_their_own_text_and_others_the_generic_one() {
        for c in [
            "webshell",
            "uid0_account",
            "ssh_bruteforce",
            "world_writable_php",
            "hardening_ssh_permit_root_login",
        ] {
            assert_ne!(fix_for(c), GENERIC_FIX, "{c}");
        }
        assert_eq!(fix_for("something_new"), GENERIC_FIX);
        for c in crate::checks::critical_checks()
            .iter()
            .chain(crate::checks::deep_checks())
        {
            assert_ne!(fix_for(c.name), GENERIC_FIX, "{}", c.name);
        }
    }
}
