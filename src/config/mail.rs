//! `[mail]`: the mail antivirus (see `mail`). A reload restarts the mail watcher and
//! scanners with the new section (reload section `mail`). The section's value types (the
//! MIME and archive limits, the password audit's settings, the clamd endpoint) live here;
//! `mail` re-exports them where it uses them.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use super::reader::{Errors, TableReader};

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

/// Limits of one message's extraction (the MIME walker's; three are `[mail]` keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Deepest MIME nesting (multiparts and attached messages) walked; deeper entities are
    /// scanned as one leaf.
    pub max_depth: usize,
    /// Most leaf parts extracted (interpretations and archive members not counted).
    pub max_parts: usize,
    /// Most decoded bytes per message, all parts, interpretations and archive members.
    pub max_extract_bytes: u64,
    /// Most extra base64 interpretations per message (the spec fixes 16).
    pub max_interpretations: usize,
    /// Largest header block.
    pub max_header_bytes: usize,
    /// A part stays in memory up to this size, then moves to a staged file.
    pub mem_part_bytes: usize,
}

/// The spec's limit of extra base64 interpretations per message.
pub const MAX_INTERPRETATIONS: usize = 16;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            // The configurable limits take their defaults from the key table.
            max_depth: super::keys::int_default("mail.max_depth") as usize,
            max_parts: super::keys::int_default("mail.max_parts") as usize,
            max_extract_bytes: super::keys::int_default("mail.max_extract_bytes") as u64,
            max_interpretations: MAX_INTERPRETATIONS,
            max_header_bytes: 256 * 1024,
            mem_part_bytes: 1024 * 1024,
        }
    }
}

/// Limits of one top-level archive (`mail.archive_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArchiveLimits {
    pub max_bytes: u64,
    pub max_files: usize,
    pub max_ratio: u64,
    pub max_depth: usize,
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        ArchiveLimits {
            // The defaults of `mail.archive_*` in the key table.
            max_bytes: super::keys::int_default("mail.archive_max_bytes") as u64,
            max_files: super::keys::int_default("mail.archive_max_files") as usize,
            max_ratio: super::keys::int_default("mail.archive_max_ratio") as u64,
            max_depth: super::keys::int_default("mail.archive_max_depth") as usize,
        }
    }
}

/// Settings of the mailbox password audit (`[mail]` keys, live).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditSettings {
    /// `mail.password_audit`.
    pub enabled: bool,
    /// `mail.password_files` (globs).
    pub files: Vec<std::path::PathBuf>,
    /// `mail.password_check_interval_min`.
    pub interval_min: u64,
    /// `mail.password_slow_candidates`: bundled-list entries tried on slow schemes.
    pub slow_candidates: usize,
    /// `mail.password_audit_scan_minutes`: time one deep scan gives the audit.
    pub scan_minutes: u64,
    /// `mail.breach_api` (empty: off).
    pub breach_api: String,
}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings {
            // The defaults of the `mail.password_*` keys; no files (the configuration's
            // default list is read by `config::mail`).
            enabled: super::keys::bool_default("mail.password_audit"),
            files: Vec::new(),
            interval_min: super::keys::int_default("mail.password_check_interval_min") as u64,
            slow_candidates: super::keys::int_default("mail.password_slow_candidates") as usize,
            scan_minutes: super::keys::int_default("mail.password_audit_scan_minutes") as u64,
            breach_api: String::new(),
        }
    }
}

/// Why a `mail.clamd_socket` value is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndpointError {
    /// Neither an absolute path nor `host:port`.
    Form,
    /// The text after the last `:` is not a port number.
    Port(String),
    /// The host is neither an IP address nor `localhost`.
    Host(String),
    /// A remote address: mail content never leaves the host.
    NotLoopback(IpAddr),
}

impl std::fmt::Display for EndpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndpointError::Form => {
                f.write_str("must be an absolute socket path or a loopback host:port")
            }
            EndpointError::Port(p) => write!(f, "{p:?} is not a port number"),
            EndpointError::Host(h) => write!(f, "{h:?} is not an IP address or localhost"),
            EndpointError::NotLoopback(ip) => write!(
                f,
                "{ip} is not a loopback address: mail content must not leave the host"
            ),
        }
    }
}

impl std::error::Error for EndpointError {}

/// Where clamd listens (`mail.clamd_socket`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "{}", crate::text::escape_path(p)),
            Endpoint::Tcp(a) => write!(f, "{a}"),
        }
    }
}

impl Endpoint {
    /// An absolute socket path, or `host:port` whose host is a loopback address or
    /// `localhost`.
    pub fn parse(s: &str) -> Result<Endpoint, EndpointError> {
        let s = s.trim();
        if s.starts_with('/') {
            return Ok(Endpoint::Unix(PathBuf::from(s)));
        }
        let (host, port) = s.rsplit_once(':').ok_or(EndpointError::Form)?;
        let port: u16 = port
            .parse()
            .map_err(|_| EndpointError::Port(port.to_string()))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let ip: IpAddr = if host.eq_ignore_ascii_case("localhost") {
            IpAddr::from([127, 0, 0, 1])
        } else {
            host.parse()
                .map_err(|_| EndpointError::Host(host.to_string()))?
        };
        if !ip.is_loopback() {
            return Err(EndpointError::NotLoopback(ip));
        }
        Ok(Endpoint::Tcp(SocketAddr::new(ip, port)))
    }

    /// The socket clamd's own configuration names (`LocalSocket` in
    /// `/etc/clamav/clamd.conf`), else Debian's default path.
    pub fn detect() -> Endpoint {
        let conf =
            crate::fsutil::read_daemon_string(std::path::Path::new("/etc/clamav/clamd.conf"))
                .unwrap_or_default();
        for line in conf.lines() {
            let mut it = line.split_whitespace();
            if it.next() == Some("LocalSocket") {
                if let Some(p) = it.next().filter(|p| p.starts_with('/')) {
                    return Endpoint::Unix(PathBuf::from(p));
                }
            }
        }
        Endpoint::Unix(PathBuf::from("/run/clamav/clamd.ctl"))
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
            Err(e) => {
                errs.push(t.key("clamd_socket"), e);
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
        let t = parse_str(text).map_err(|e| vec![e.to_string()])?;
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
    fn clamd_endpoint_refusals_read_as_before_the_error_type() {
        let e = |s: &str| super::Endpoint::parse(s).unwrap_err().to_string();
        assert_eq!(
            e("clamd"),
            "must be an absolute socket path or a loopback host:port"
        );
        assert_eq!(e("localhost:x"), "\"x\" is not a port number");
        assert_eq!(
            e("clamd:3310"),
            "\"clamd\" is not an IP address or localhost"
        );
        assert_eq!(
            e("[2001:db8::7]:3310"),
            "2001:db8::7 is not a loopback address: mail content must not leave the host"
        );
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
