//! `[probes]`: kernel probe backends (issue 29) and what their detections allow.
//!
//! `sensitive_files` patterns are parsed here ([`Pattern`]) so a pattern the kernel filter
//! cannot select is refused at load, naming the key.

use super::reader::{Errors, TableReader};
use crate::net::cidr::PortRange;

/// The backends, in the order `svc status` lists them.
pub const BACKENDS: [&str; 4] = ["execution", "connection", "sensitive_files", "af_alg"];

/// `[probes]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbesConfig {
    /// `probes.backends`: the backends to start (a subset of [`BACKENDS`]).
    pub backends: Vec<String>,
    /// `probes.allowed_out_ports`: outbound TCP ports that are not unusual.
    pub allowed_out_ports: Vec<PortRange>,
    /// `probes.sensitive_files`: patterns of files a non-owner must not open.
    pub sensitive_files: Vec<Pattern>,
    /// `probes.threat_score_high`: a connection to an address scored at or over it is
    /// unusual whatever its port.
    pub threat_score_high: u8,
}

impl Default for ProbesConfig {
    fn default() -> Self {
        let mut errs = Errors::default();
        let mut r = TableReader::new(None, "");
        read(&mut r, &mut errs)
    }
}

/// Reads `[probes]` from the root table.
pub(super) fn read(root: &mut TableReader<'_>, errs: &mut Errors) -> ProbesConfig {
    let mut t = root.table("probes", errs);
    let mut backends = t.string_list("backends", errs);
    for (i, b) in backends.iter().enumerate() {
        if !BACKENDS.contains(&b.as_str()) {
            errs.push(
                format!("{}[{i}]", t.key("backends")),
                super::reader::choice_message(&BACKENDS),
            );
        }
    }
    backends.retain(|b| BACKENDS.contains(&b.as_str()));
    backends.dedup();
    let allowed_out_ports = super::firewall::port_list(&mut t, "allowed_out_ports", errs);
    let mut sensitive_files = Vec::new();
    for (i, s) in t.string_list("sensitive_files", errs).iter().enumerate() {
        match Pattern::parse(s) {
            Ok(p) => sensitive_files.push(p),
            Err(e) => errs.push(format!("{}[{i}]", t.key("sensitive_files")), e),
        }
    }
    let threat_score_high = u8::try_from(t.int("threat_score_high", errs)).unwrap_or(80);
    t.finish(errs);
    ProbesConfig {
        backends,
        allowed_out_ports,
        sensitive_files,
        threat_score_high,
    }
}

/// One `[probes] sensitive_files` pattern: `*` matches within one path component; a
/// pattern without `/` matches that file name in any directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// As configured.
    pub text: String,
    parts: Vec<String>,
    anywhere: bool,
}

/// Why a `[probes] sensitive_files` pattern is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternError {
    Empty,
    /// Neither the file name nor its directory's name is literal: the kernel filter
    /// (exact names) could not select it.
    NoLiteralName,
    /// The literal name the kernel filter keys on is longer than 31 bytes.
    NameTooLong,
}

impl std::fmt::Display for PatternError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PatternError::Empty => "is empty",
            PatternError::NoLiteralName => {
                "needs a literal file name, or a literal directory name above a file name with *"
            }
            PatternError::NameTooLong => "has a file or directory name over 31 bytes",
        })
    }
}

impl std::error::Error for PatternError {}

/// Longest name the kernel filter holds (`NAME_LEN` - 1 in `bpf/sensitive_files.bpf.c`).
pub const MAX_KERNEL_NAME: usize = 31;

impl Pattern {
    pub fn parse(s: &str) -> Result<Pattern, PatternError> {
        let anywhere = !s.contains('/');
        let parts: Vec<String> = s
            .split('/')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
        if parts.is_empty() {
            return Err(PatternError::Empty);
        }
        let p = Pattern {
            text: s.to_string(),
            parts,
            anywhere,
        };
        let key = p.kernel_name()?;
        if key.len() > MAX_KERNEL_NAME {
            return Err(PatternError::NameTooLong);
        }
        Ok(p)
    }

    /// The exact name the kernel filter selects on: the file name when literal, else the
    /// directory name above it.
    pub fn kernel_name(&self) -> Result<&str, PatternError> {
        let n = self.parts.len();
        let last = &self.parts[n - 1];
        if !last.contains('*') {
            return Ok(last);
        }
        match n.checked_sub(2).map(|i| &self.parts[i]) {
            Some(dir) if !dir.contains('*') => Ok(dir),
            _ => Err(PatternError::NoLiteralName),
        }
    }

    /// True when the absolute `path` matches.
    pub fn matches(&self, path: &str) -> bool {
        let comps: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        if self.anywhere {
            return comps.last().is_some_and(|l| glob(&self.parts[0], l));
        }
        comps.len() == self.parts.len() && self.parts.iter().zip(&comps).all(|(p, c)| glob(p, c))
    }

    /// True when the tail of the pattern matches every component of `partial` (a path cut
    /// short at a mount's root by the kernel's dentry walk).
    pub fn matches_tail(&self, partial: &str) -> bool {
        let comps: Vec<&str> = partial.split('/').filter(|p| !p.is_empty()).collect();
        if self.anywhere || comps.len() > self.parts.len() {
            return self.matches(partial);
        }
        let tail = &self.parts[self.parts.len() - comps.len()..];
        !comps.is_empty() && tail.iter().zip(&comps).all(|(p, c)| glob(p, c))
    }
}

/// `*` matches any run of characters (within one component).
fn glob(pattern: &str, s: &str) -> bool {
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or("");
    let Some(mut rest) = s.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty();
    };
    for m in middle {
        match rest.find(m) {
            Some(i) => rest = &rest[i + m.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_paths_and_tails() {
        let p = |s: &str| Pattern::parse(s).unwrap();
        assert!(p("/etc/shadow").matches("/etc/shadow"));
        assert!(!p("/etc/shadow").matches("/etc/shadow-"));
        assert!(p("/etc/sudoers.d/*").matches("/etc/sudoers.d/90-cloud"));
        assert_eq!(p("/etc/sudoers.d/*").kernel_name(), Ok("sudoers.d"));
        assert!(p("/home/*/.ssh/id_*").matches("/home/ann/.ssh/id_ed25519"));
        assert!(!p("/home/*/.ssh/id_*").matches("/home/ann/x/.ssh/id_rsa"));
        assert!(p("wp-config.php").matches("/var/www/a/wp-config.php"));
        assert!(p("/home/*/.ssh/authorized_keys").matches_tail("/ann/.ssh/authorized_keys"));
        assert!(!p("/home/*/.ssh/authorized_keys").matches_tail("/ann/authorized_keys"));
        assert_eq!(Pattern::parse("/etc/*/*"), Err(PatternError::NoLiteralName));
        assert_eq!(Pattern::parse("/"), Err(PatternError::Empty));
        assert_eq!(
            Pattern::parse(&"a".repeat(40)),
            Err(PatternError::NameTooLong)
        );
        assert!(glob("a*b*c", "axxbyyc") && !glob("a*b", "ab_") && glob("*", ""));
    }

    #[test]
    fn defaults_parse() {
        let c = ProbesConfig::default();
        assert_eq!(c.backends, BACKENDS);
        assert!(c.sensitive_files.iter().any(|p| p.matches("/etc/shadow")));
        assert!(c
            .allowed_out_ports
            .iter()
            .any(|r| r.lo <= 443 && 443 <= r.hi));
    }
}
