//! sshd_config reading with OpenSSH's semantics, and `sshd_root_password_login`.
//!
//! Semantics followed (OpenSSH servconf.c): keywords are case-insensitive and separated from
//! their arguments by whitespace or one `=`; arguments may be quoted; a token starting with
//! `#` starts a comment; for single-valued keywords the first value obtained wins;
//! `Include` splices files in place (glob patterns, sorted; relative paths under
//! `/etc/ssh`; no match is not an error; at most 16 levels); a `Match` line makes every
//! following line conditional until the end of the file it is in (a `Match` inside an
//! included file does not leak into the including file, and everything included from inside
//! a `Match` block is conditional). Conditional (`in_match`) directives are ignored for the
//! global decision.

use std::path::{Path, PathBuf};

use super::context::{count, CheckContext};
use super::sink::Sink;
use crate::findings::{Finding, Severity};
use crate::hostfs::{display_path, ReadError};
use crate::hostfs::{glob, reroot};

pub const CHECK: &str = "sshd_root_password_login";

/// Stable message of the finding.
pub const MESSAGE: &str = "sshd allows root login with a password";

/// Why a line was rejected (sshd would refuse to start on it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SshdLineError {
    EmptyKeyword,
    MissingArgument,
    UnterminatedQuote,
}

/// Splits arguments like OpenSSH's `argv_split(.., terminate_on_comment = 1)`.
fn split_args(s: &str) -> Result<Vec<String>, SshdLineError> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            chars.next();
        }
        match chars.peek() {
            None | Some('#') => return Ok(out),
            Some(_) => {}
        }
        let mut tok = String::new();
        let mut quote: Option<char> = None;
        while let Some(c) = chars.next() {
            match (c, quote) {
                ('\\', _) => match chars.peek() {
                    Some(&n)
                        if n == '"' || n == '\'' || n == '\\' || (quote.is_none() && n == ' ') =>
                    {
                        tok.push(n);
                        chars.next();
                    }
                    _ => tok.push('\\'),
                },
                ('"' | '\'', None) => quote = Some(c),
                (c, Some(q)) if c == q => quote = None,
                (c, None) if c.is_ascii_whitespace() => break,
                (c, _) => tok.push(c),
            }
        }
        if quote.is_some() {
            return Err(SshdLineError::UnterminatedQuote);
        }
        out.push(tok);
    }
}

/// Parses one line into (lower-case keyword, arguments). `Ok(None)` for blank lines and
/// comments.
pub fn parse_sshd_line(line: &str) -> Result<Option<(String, Vec<String>)>, SshdLineError> {
    let s = line
        .trim_end_matches(['\r', '\n'])
        .trim_start_matches(|c: char| c.is_ascii_whitespace());
    if s.is_empty() || s.starts_with('#') {
        return Ok(None);
    }
    let end = s
        .find(|c: char| c.is_ascii_whitespace() || c == '=')
        .unwrap_or(s.len());
    let (kw, rest) = s.split_at(end);
    if kw.is_empty() {
        return Err(SshdLineError::EmptyKeyword);
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    let rest = rest.strip_prefix('=').unwrap_or(rest);
    let args = split_args(rest)?;
    if args.is_empty() {
        return Err(SshdLineError::MissingArgument);
    }
    Ok(Some((kw.to_ascii_lowercase(), args)))
}

/// One directive as it appeared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SshdDirective {
    /// Lower-case keyword.
    pub keyword: String,
    pub args: Vec<String>,
    pub file: PathBuf,
    /// 1-based line number.
    pub line: usize,
    /// Inside a `Match` block (conditional).
    pub in_match: bool,
}

impl SshdDirective {
    /// The first argument, lower-cased.
    pub fn value(&self) -> String {
        self.args
            .first()
            .map(|a| a.to_ascii_lowercase())
            .unwrap_or_default()
    }

    pub fn location(&self) -> String {
        format!("{}:{}", display_path(&self.file), self.line)
    }
}

/// The flattened configuration (includes spliced in order).
#[derive(Clone, Debug, Default)]
pub struct SshdConfig {
    pub directives: Vec<SshdDirective>,
    /// Files read, in order.
    pub files: Vec<PathBuf>,
    pub bad_lines: usize,
}

/// An effective value and where it came from (`None` = OpenSSH's compiled-in default).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Effective {
    /// Lower-case value.
    pub value: String,
    pub source: Option<String>,
}

impl Effective {
    pub fn describe(&self) -> String {
        match &self.source {
            Some(s) => format!("{} ({s})", self.value),
            None => format!("{} (default)", self.value),
        }
    }
}

impl SshdConfig {
    /// Parses one file's text (Include lines are kept as directives, not followed).
    pub fn parse_str(text: &str, file: &Path) -> SshdConfig {
        let mut cfg = SshdConfig::default();
        let mut in_match = false;
        for (i, line) in text.split('\n').enumerate() {
            match parse_sshd_line(line) {
                Ok(Some((kw, args))) => {
                    if kw == "match" {
                        in_match = true;
                        continue;
                    }
                    cfg.directives.push(SshdDirective {
                        keyword: kw,
                        args,
                        file: file.to_path_buf(),
                        line: i + 1,
                        in_match,
                    });
                }
                Ok(None) => {}
                Err(_) => cfg.bad_lines += 1,
            }
        }
        cfg.files.push(file.to_path_buf());
        cfg
    }

    /// First global (non-Match) occurrence of any of `keywords` (lower-case aliases).
    pub fn global(&self, keywords: &[&str]) -> Option<&SshdDirective> {
        self.directives
            .iter()
            .find(|d| !d.in_match && keywords.contains(&d.keyword.as_str()))
    }

    /// All global occurrences (for accumulating keywords such as `AllowUsers`).
    pub fn global_all<'a>(&'a self, keyword: &'a str) -> impl Iterator<Item = &'a SshdDirective> {
        self.directives
            .iter()
            .filter(move |d| !d.in_match && d.keyword == keyword)
    }

    /// First-match-wins value of a single-valued keyword, or `default`.
    pub fn effective(&self, keywords: &[&str], default: &str) -> Effective {
        match self.global(keywords) {
            Some(d) => Effective {
                value: d.value(),
                source: Some(d.location()),
            },
            None => Effective {
                value: default.to_string(),
                source: None,
            },
        }
    }
}

/// Why the configuration could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SshdLoadError {
    NotConfigured,
    Read(ReadError),
}

struct Loader<'a> {
    ctx: &'a CheckContext,
    base: PathBuf,
    cfg: SshdConfig,
}

impl Loader<'_> {
    fn load(&mut self, path: &Path, text: &str, depth: usize, outer_match: bool) {
        self.cfg.files.push(path.to_path_buf());
        let mut in_match = outer_match;
        for (i, line) in text.split('\n').enumerate() {
            let (kw, args) = match parse_sshd_line(line) {
                Ok(Some(x)) => x,
                Ok(None) => continue,
                Err(_) => {
                    self.cfg.bad_lines += 1;
                    continue;
                }
            };
            if kw == "match" {
                in_match = true;
                continue;
            }
            if kw == "include" {
                self.include(&args, depth, in_match);
            }
            self.cfg.directives.push(SshdDirective {
                keyword: kw,
                args,
                file: path.to_path_buf(),
                line: i + 1,
                in_match,
            });
        }
    }

    fn include(&mut self, args: &[String], depth: usize, in_match: bool) {
        let limits = &self.ctx.limits;
        if depth + 1 > limits.max_include_depth {
            count(&self.ctx.counters().includes_refused, 1);
            return;
        }
        for arg in args {
            let pattern = if arg.starts_with('/') {
                reroot(&self.ctx.sysroot, Path::new(arg))
            } else {
                self.base.join(arg)
            };
            for file in self.ctx.glob(&pattern) {
                if self.cfg.files.len() >= limits.max_included_files {
                    count(&self.ctx.counters().includes_refused, 1);
                    continue;
                }
                let Ok(bytes) = self.ctx.read_config(&file, true) else {
                    continue;
                };
                let text = String::from_utf8_lossy(&bytes).into_owned();
                self.load(&file, &text, depth + 1, in_match);
            }
        }
    }
}

/// Reads the configured sshd_config and everything it includes.
pub fn load_sshd_config(ctx: &CheckContext) -> Result<SshdConfig, SshdLoadError> {
    let path = ctx
        .sshd_config_path
        .as_ref()
        .ok_or(SshdLoadError::NotConfigured)?;
    let bytes = ctx.read_config(path, true).map_err(SshdLoadError::Read)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let mut loader = Loader {
        ctx,
        base: ctx.sshd_include_base(),
        cfg: SshdConfig::default(),
    };
    loader.load(path, &text, 0, false);
    count(&ctx.counters().unparsed_lines, loader.cfg.bad_lines as u64);
    Ok(loader.cfg)
}

/// The global verdict on root password logins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RootPasswordLogin {
    NotAllowed {
        reason: String,
    },
    Allowed {
        detail: String,
        file: Option<PathBuf>,
    },
}

fn user_pattern_matches(pattern: &str, user: &str) -> Option<bool> {
    // Patterns limited to a host (`user@host`) are conditional: no global answer.
    if pattern.contains('@') {
        return None;
    }
    Some(glob::fnmatch(pattern.as_bytes(), user.as_bytes(), false))
}

fn root_excluded_by_user_lists(cfg: &SshdConfig) -> Option<String> {
    for d in cfg.global_all("denyusers") {
        if d.args
            .iter()
            .any(|p| user_pattern_matches(p, "root") == Some(true))
        {
            return Some(format!("DenyUsers excludes root ({})", d.location()));
        }
    }
    let allow: Vec<&SshdDirective> = cfg.global_all("allowusers").collect();
    let root_allowed = allow
        .iter()
        .flat_map(|d| d.args.iter())
        .any(|p| user_pattern_matches(p, "root") != Some(false));
    match allow.first() {
        Some(first) if !root_allowed => Some(format!(
            "AllowUsers does not list root ({})",
            first.location()
        )),
        _ => None,
    }
}

/// True if some `AuthenticationMethods` list can be completed with passwords alone.
fn methods_allow_password_only(methods: &[String], password: bool, kbd: bool) -> bool {
    methods.iter().any(|list| {
        list.eq_ignore_ascii_case("any")
            || list.split(',').all(|m| {
                let m = m.to_ascii_lowercase();
                (m == "password" && password) || (m.starts_with("keyboard-interactive") && kbd)
            })
    })
}

/// Decides whether root can log in with a password, from global settings only. OpenSSH
/// defaults (7.0+): PermitRootLogin prohibit-password, PasswordAuthentication yes,
/// KbdInteractiveAuthentication yes, UsePAM no.
pub fn assess_root_password_login(cfg: &SshdConfig) -> RootPasswordLogin {
    let prl = cfg.effective(&["permitrootlogin"], "prohibit-password");
    if prl.value != "yes" {
        return RootPasswordLogin::NotAllowed {
            reason: format!("PermitRootLogin {}", prl.describe()),
        };
    }
    if let Some(reason) = root_excluded_by_user_lists(cfg) {
        return RootPasswordLogin::NotAllowed { reason };
    }
    let pw = cfg.effective(&["passwordauthentication"], "yes");
    let kbd = cfg.effective(
        &[
            "kbdinteractiveauthentication",
            "challengeresponseauthentication",
        ],
        "yes",
    );
    let pam = cfg.effective(&["usepam"], "no");
    let pw_on = pw.value != "no";
    let kbd_on = kbd.value != "no" && pam.value == "yes";
    if !pw_on && !kbd_on {
        return RootPasswordLogin::NotAllowed {
            reason: format!(
                "PasswordAuthentication {}, keyboard-interactive via PAM off",
                pw.describe()
            ),
        };
    }
    if let Some(am) = cfg.global(&["authenticationmethods"]) {
        if !methods_allow_password_only(&am.args, pw_on, kbd_on) {
            return RootPasswordLogin::NotAllowed {
                reason: format!(
                    "AuthenticationMethods requires a non-password method ({})",
                    am.location()
                ),
            };
        }
    }
    let via = if pw_on {
        format!("PasswordAuthentication {}", pw.describe())
    } else {
        format!(
            "KbdInteractiveAuthentication {} with UsePAM {}",
            kbd.describe(),
            pam.describe()
        )
    };
    RootPasswordLogin::Allowed {
        detail: format!("PermitRootLogin {}; {via}", prl.describe()),
        file: cfg.global(&["permitrootlogin"]).map(|d| d.file.clone()),
    }
}

/// HIGH when the global sshd configuration lets root log in with a password.
pub fn sshd_root_password_login(ctx: &CheckContext) -> Vec<Finding> {
    let mut sink = Sink::new(ctx, CHECK);
    let Ok(cfg) = load_sshd_config(ctx) else {
        return sink.finish(None);
    };
    if let RootPasswordLogin::Allowed { detail, file } = assess_root_password_login(&cfg) {
        let mut f = sink.finding(Severity::High, MESSAGE).with_details(format!(
            "{detail}. Set PermitRootLogin prohibit-password (or no) or PasswordAuthentication no"
        ));
        if let Some(file) = file {
            f = f.with_path(display_path(&file));
        }
        sink.push(f);
    }
    sink.finish(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::{garbage, Fixture};

    fn run(fx: &Fixture) -> Vec<Finding> {
        sshd_root_password_login(&fx.ctx())
    }

    #[test]
    fn line_parsing_follows_openssh() {
        assert_eq!(
            parse_sshd_line("  PermitRootLogin=yes").unwrap(),
            Some(("permitrootlogin".into(), vec!["yes".into()]))
        );
        assert_eq!(
            parse_sshd_line("PERMITROOTLOGIN = Yes # trailing").unwrap(),
            Some(("permitrootlogin".into(), vec!["Yes".into()]))
        );
        assert_eq!(
            parse_sshd_line("Banner \"/etc/my banner\"\r").unwrap(),
            Some(("banner".into(), vec!["/etc/my banner".into()]))
        );
        assert_eq!(parse_sshd_line("   # x").unwrap(), None);
        assert_eq!(parse_sshd_line("").unwrap(), None);
        assert_eq!(
            parse_sshd_line("PermitRootLogin"),
            Err(SshdLineError::MissingArgument)
        );
        assert_eq!(parse_sshd_line("=yes"), Err(SshdLineError::EmptyKeyword));
        assert_eq!(
            parse_sshd_line("Banner \"x"),
            Err(SshdLineError::UnterminatedQuote)
        );
    }

    #[test]
    fn absent_permit_root_login_is_safe_by_modern_default() {
        let fx = Fixture::new();
        fx.write("etc/ssh/sshd_config", b"PasswordAuthentication yes\n");
        assert!(run(&fx).is_empty());
    }

    #[test]
    fn yes_with_password_auth_default_is_high() {
        let fx = Fixture::new();
        fx.write("etc/ssh/sshd_config", b"Port 22\npermitrootlogin YES\n");
        let f = run(&fx);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::High);
        assert_eq!(f[0].message, MESSAGE);
        assert!(f[0].details.contains("sshd_config:2"), "{}", f[0].details);
        assert!(f[0]
            .details
            .contains("PasswordAuthentication yes (default)"));
    }

    #[test]
    fn yes_with_password_auth_no_is_not_reported() {
        let fx = Fixture::new();
        fx.write(
            "etc/ssh/sshd_config",
            b"PermitRootLogin yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n",
        );
        assert!(run(&fx).is_empty());
    }

    #[test]
    fn keyboard_interactive_through_pam_counts_as_password() {
        let fx = Fixture::new();
        fx.write(
            "etc/ssh/sshd_config",
            b"PermitRootLogin yes\nPasswordAuthentication no\nUsePAM yes\n",
        );
        let f = run(&fx);
        assert_eq!(f.len(), 1);
        assert!(f[0].details.contains("KbdInteractiveAuthentication"));
        fx.write(
            "etc/ssh/sshd_config",
            b"PermitRootLogin yes\nPasswordAuthentication no\nChallengeResponseAuthentication no\nUsePAM yes\n",
        );
        assert!(run(&fx).is_empty());
    }

    #[test]
    fn include_that_sets_no_first_wins_over_later_yes() {
        let fx = Fixture::new();
        fx.write(
            "etc/ssh/sshd_config",
            b"Include /etc/ssh/sshd_config.d/*.conf\nPermitRootLogin yes\n",
        );
        fx.write(
            "etc/ssh/sshd_config.d/10-root.conf",
            b"PermitRootLogin no\n",
        );
        assert!(run(&fx).is_empty());
        // Without the include's value, the later yes applies.
        fx.write("etc/ssh/sshd_config.d/10-root.conf", b"# nothing\n");
        assert_eq!(run(&fx).len(), 1);
    }

    #[test]
    fn relative_include_and_sorted_glob_order() {
        let fx = Fixture::new();
        fx.write("etc/ssh/sshd_config", b"include conf.d/*.conf\n");
        fx.write("etc/ssh/conf.d/20-b.conf", b"PermitRootLogin no\n");
        fx.write("etc/ssh/conf.d/10-a.conf", b"PermitRootLogin yes\n");
        fx.write("etc/ssh/conf.d/.hidden.conf", b"PermitRootLogin no\n");
        let f = run(&fx);
        assert_eq!(f.len(), 1);
        assert!(f[0].path.as_deref().unwrap_or("").ends_with("10-a.conf"));
    }

    #[test]
    fn match_blocks_are_ignored_for_the_global_decision() {
        let fx = Fixture::new();
        fx.write(
            "etc/ssh/sshd_config",
            b"PermitRootLogin no\nMatch Address 10.0.0.0/8\n  PermitRootLogin yes\n",
        );
        assert!(run(&fx).is_empty());
        // A Match before the global line makes it conditional too.
        fx.write(
            "etc/ssh/sshd_config",
            b"Match User deploy\n PasswordAuthentication yes\nPermitRootLogin yes\n",
        );
        assert!(run(&fx).is_empty());
    }

    #[test]
    fn match_in_included_file_ends_at_that_file() {
        let fx = Fixture::new();
        fx.write(
            "etc/ssh/sshd_config",
            b"Include inc.conf\nPermitRootLogin yes\n",
        );
        fx.write("etc/ssh/inc.conf", b"Match User x\n  PermitRootLogin no\n");
        assert_eq!(run(&fx).len(), 1);
        // And a file included from inside a Match block is conditional.
        fx.write("etc/ssh/sshd_config", b"Match User x\nInclude inc2.conf\n");
        fx.write("etc/ssh/inc2.conf", b"PermitRootLogin yes\n");
        assert!(run(&fx).is_empty());
    }

    #[test]
    fn user_lists_and_authentication_methods() {
        let fx = Fixture::new();
        fx.write(
            "etc/ssh/sshd_config",
            b"PermitRootLogin yes\nDenyUsers ro*\n",
        );
        assert!(run(&fx).is_empty());
        fx.write(
            "etc/ssh/sshd_config",
            b"PermitRootLogin yes\nAllowUsers bob alice\n",
        );
        assert!(run(&fx).is_empty());
        fx.write(
            "etc/ssh/sshd_config",
            b"PermitRootLogin yes\nAllowUsers root@10.0.0.1\n",
        );
        assert_eq!(run(&fx).len(), 1);
        fx.write(
            "etc/ssh/sshd_config",
            b"PermitRootLogin yes\nAuthenticationMethods publickey,password\n",
        );
        assert!(run(&fx).is_empty());
        fx.write(
            "etc/ssh/sshd_config",
            b"PermitRootLogin yes\nAuthenticationMethods publickey password\n",
        );
        assert_eq!(run(&fx).len(), 1);
    }

    #[test]
    fn include_recursion_is_bounded() {
        let fx = Fixture::new();
        fx.write("etc/ssh/sshd_config", b"Include loop.conf\n");
        fx.write(
            "etc/ssh/loop.conf",
            b"Include loop.conf\nPermitRootLogin yes\n",
        );
        let ctx = fx.ctx();
        let f = sshd_root_password_login(&ctx);
        assert_eq!(f.len(), 1);
        assert!(ctx.counters().snapshot().includes_refused >= 1);
    }

    #[test]
    fn missing_config_yields_nothing() {
        let fx = Fixture::new();
        assert!(run(&fx).is_empty());
        assert_eq!(
            load_sshd_config(&fx.ctx()).err(),
            Some(SshdLoadError::Read(ReadError::NotFound))
        );
    }

    #[test]
    fn garbage_config_never_panics() {
        for seed in 0..300 {
            let g = garbage(seed, 600);
            let text = String::from_utf8_lossy(&g);
            for line in text.split('\n') {
                let _ = parse_sshd_line(line);
            }
            let cfg = SshdConfig::parse_str(&text, Path::new("/x"));
            let _ = assess_root_password_login(&cfg);
        }
        let fx = Fixture::new();
        let mut junk = garbage(99, 8192);
        junk.extend_from_slice(b"\n\x00\xffPermitRootLogin\x00 yes\n");
        fx.write("etc/ssh/sshd_config", &junk);
        let _ = run(&fx);
    }
}
