//! `[mail]`: the mail antivirus (see `crate::mail`). A reload restarts the mail watcher
//! and scanners with the new section (reload section `mail`).

use std::path::PathBuf;

use super::reader::{Errors, TableReader};
use crate::mail::archive::ArchiveLimits;
use crate::mail::clamd::Endpoint;
use crate::mail::mime::Limits;
use crate::mail::password::AuditSettings;

/// `[mail]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MailConfig {
    /// `mail.enabled`: watch the spool and scan messages.
    pub enabled: bool,
    /// `mail.spool_path`: the MTA's spool directory; `None` detects it.
    pub spool_path: Option<PathBuf>,
    /// `mail.clamd_socket`: `None` detects clamd's `LocalSocket`; `off` disables clamd.
    pub clamd: Option<Endpoint>,
    pub clamd_off: bool,
    /// `mail.clamd_timeout_seconds`: I/O deadline of one clamd call.
    pub clamd_timeout_seconds: u64,
    /// `mail.quarantine`: move infected messages out of the spool.
    pub quarantine: bool,
    /// `mail.quarantine_path`: `None` is `{state_path}/mail-quarantine`.
    pub quarantine_path: Option<PathBuf>,
    /// `mail.scan_threads`.
    pub scan_threads: usize,
    /// `mail.content_scan`: the `email_content` check on outbound mail.
    pub content_scan: bool,
    pub limits: Limits,
    pub archive: ArchiveLimits,
    /// The mailbox password audit of the deep scan (`mail.password_*`, `mail.breach_api`):
    /// applied live by its own reload section `mail.password`, which restarts nothing.
    pub password: AuditSettings,
}

impl Default for MailConfig {
    /// The defaults of `config::keys::KEYS`.
    fn default() -> Self {
        read(&mut TableReader::new(None, ""), &mut Errors::default())
    }
}

impl MailConfig {
    /// The section without the password audit (what the antivirus reload compares).
    pub fn antivirus_part(&self) -> MailConfig {
        MailConfig {
            password: AuditSettings::default(),
            ..self.clone()
        }
    }
}

impl MailConfig {
    /// The clamd endpoint in effect (`None` when turned off).
    pub fn clamd_endpoint(&self) -> Option<Endpoint> {
        if self.clamd_off {
            None
        } else {
            Some(self.clamd.clone().unwrap_or_else(Endpoint::detect))
        }
    }
}

fn opt_path(t: &mut TableReader<'_>, key: &'static str, errs: &mut Errors) -> Option<PathBuf> {
    let v = t.string(key, errs);
    if v.is_empty() {
        None
    } else if !v.starts_with('/') {
        errs.push(t.key(key), "must be an absolute path (or empty to detect)");
        None
    } else {
        Some(PathBuf::from(v))
    }
}

pub fn read(root: &mut TableReader<'_>, errs: &mut Errors) -> MailConfig {
    let mut t = root.table("mail", errs);
    let enabled = t.bool("enabled", errs);
    let spool_path = opt_path(&mut t, "spool_path", errs);
    let sock = t.string("clamd_socket", errs);
    let (clamd, clamd_off) = match sock.trim() {
        "" => (None, false),
        "off" => (None, true),
        s => match Endpoint::parse(s) {
            Ok(e) => (Some(e), false),
            Err(m) => {
                errs.push(t.key("clamd_socket"), m);
                (None, false)
            }
        },
    };
    let clamd_timeout_seconds = t.int("clamd_timeout_seconds", errs) as u64;
    let quarantine = t.bool("quarantine", errs);
    let quarantine_path = opt_path(&mut t, "quarantine_path", errs);
    let scan_threads = t.int("scan_threads", errs) as usize;
    let content_scan = t.bool("content_scan", errs);
    // Limits that are not configuration keys keep the parser's own values.
    let l = Limits::default();
    let limits = Limits {
        max_depth: t.int("max_depth", errs) as usize,
        max_parts: t.int("max_parts", errs) as usize,
        max_extract_bytes: t.int("max_extract_bytes", errs) as u64,
        ..l
    };
    let archive = ArchiveLimits {
        max_bytes: t.int("archive_max_bytes", errs) as u64,
        max_files: t.int("archive_max_files", errs) as usize,
        max_ratio: t.int("archive_max_ratio", errs) as u64,
        max_depth: t.int("archive_max_depth", errs) as usize,
    };
    let password = read_password(&mut t, errs);
    t.finish(errs);
    MailConfig {
        enabled,
        spool_path,
        clamd,
        clamd_off,
        clamd_timeout_seconds,
        quarantine,
        quarantine_path,
        scan_threads,
        content_scan,
        limits,
        archive,
        password,
    }
}

fn read_password(t: &mut TableReader<'_>, errs: &mut Errors) -> AuditSettings {
    let enabled = t.bool("password_audit", errs);
    let mut files = Vec::new();
    for (i, p) in t
        .string_list("password_files", errs)
        .into_iter()
        .enumerate()
    {
        if p.starts_with('/') && !p.contains('\0') {
            files.push(PathBuf::from(p));
        } else {
            errs.push(
                format!("{}[{i}]", t.key("password_files")),
                "must be an absolute path or glob",
            );
        }
    }
    let interval_min = t.int("password_check_interval_min", errs) as u64;
    let slow_candidates = t.int("password_slow_candidates", errs) as usize;
    let scan_minutes = t.int("password_audit_scan_minutes", errs) as u64;
    let mut breach_api = t.string("breach_api", errs).trim().to_string();
    if !breach_api.is_empty() {
        if let Err(e) = super::alerts::validate_webhook_url(&breach_api) {
            errs.push(t.key("breach_api"), e);
        } else if breach_api.contains(['?', '#']) {
            errs.push(
                t.key("breach_api"),
                "must be the range endpoint's base URL without a query (the 5-character prefix is appended)",
            );
        } else if !breach_api.ends_with('/') {
            breach_api.push('/');
        }
    }
    AuditSettings {
        enabled,
        files,
        interval_min,
        slow_candidates,
        scan_minutes,
        breach_api,
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{from_table, parse_str};

    fn check(text: &str) -> Result<super::MailConfig, Vec<String>> {
        let t = parse_str(text).map_err(|e| vec![e])?;
        from_table(&t, vec![])
            .map(|c| c.mail)
            .map_err(|es| es.iter().map(|e| e.to_string()).collect())
    }

    #[test]
    fn defaults_and_keys() {
        let m = check("").unwrap();
        assert!(!m.enabled && m.quarantine && m.spool_path.is_none());
        let m = check("[mail]\nenabled = true\nspool_path = \"/var/spool/exim4\"\nclamd_socket = \"127.0.0.1:3310\"\narchive_max_ratio = 50\nmax_depth = 4\n").unwrap();
        assert!(m.enabled);
        assert_eq!(m.archive.max_ratio, 50);
        assert_eq!(m.limits.max_depth, 4);
        assert!(m.clamd.is_some());
        assert!(check("[mail]\nclamd_socket = \"off\"\n")
            .unwrap()
            .clamd_endpoint()
            .is_none());
    }

    #[test]
    fn password_audit_keys() {
        let m = check("").unwrap();
        assert!(m.password.enabled && m.password.breach_api.is_empty());
        assert_eq!(m.password.files.len(), 4);
        assert_eq!(m.password.interval_min, 1440);
        let m = check("[mail]\npassword_files = [\"/etc/dovecot/users\"]\nbreach_api = \"https://api.pwnedpasswords.com/range\"\npassword_check_interval_min = 60\npassword_audit = false\n").unwrap();
        assert_eq!(
            m.password.breach_api,
            "https://api.pwnedpasswords.com/range/"
        );
        assert_eq!(m.password.interval_min, 60);
        assert!(!m.password.enabled);
        assert_eq!(m.antivirus_part(), check("").unwrap().antivirus_part());
        assert!(check("[mail]\nbreach_api = \"http://127.0.0.1:8/range/\"\n").is_ok());
        let e = check("[mail]\nbreach_api = \"http://breach.example.com/range/\"\npassword_files = [\"users\"]\npassword_check_interval_min = 0\n")
            .unwrap_err()
            .join("\n");
        assert!(e.contains("mail.breach_api"), "{e}");
        assert!(e.contains("mail.password_files[0]"), "{e}");
        assert!(e.contains("mail.password_check_interval_min"), "{e}");
        let e = check("[mail]\nbreach_api = \"https://b.example.com/range?x=1\"\n")
            .unwrap_err()
            .join("\n");
        assert!(e.contains("mail.breach_api"), "{e}");
    }

    #[test]
    fn remote_clamd_and_relative_paths_are_refused() {
        let e =
            check("[mail]\nclamd_socket = \"192.0.2.7:3310\"\nspool_path = \"spool\"\nbogus = 1\n")
                .unwrap_err()
                .join("\n");
        assert!(e.contains("mail.clamd_socket"), "{e}");
        assert!(e.contains("mail.spool_path"), "{e}");
        assert!(e.contains("mail.bogus: unknown key"), "{e}");
    }
}
