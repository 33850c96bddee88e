//! `uid0_account`: accounts other than `root` with UID 0 in passwd.

use std::os::unix::ffi::OsStrExt;

use super::context::{count, CheckContext};
use super::sink::Sink;
use crate::findings::{Finding, Severity};
use crate::hostfs::{display_path, sanitize};

pub const CHECK: &str = "uid0_account";

/// One passwd line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PasswdEntry {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: String,
    pub shell: String,
    /// 1-based line number.
    pub line: usize,
}

/// Why a passwd line was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PasswdLineError {
    TooFewFields,
    EmptyName,
    BadUid,
    BadGid,
}

/// Parses one line. `Ok(None)` for blank lines, comments and NIS compat (`+`/`-`) lines.
pub fn parse_passwd_line(
    line: &str,
    line_no: usize,
) -> Result<Option<PasswdEntry>, PasswdLineError> {
    let t = line.trim_end_matches('\r');
    if t.trim().is_empty() || t.starts_with('#') || t.starts_with('+') || t.starts_with('-') {
        return Ok(None);
    }
    let fields: Vec<&str> = t.split(':').collect();
    let [name, _pw, uid, gid, _gecos, home, shell, ..] = fields.as_slice() else {
        return Err(PasswdLineError::TooFewFields);
    };
    if name.is_empty() {
        return Err(PasswdLineError::EmptyName);
    }
    let uid: u32 = uid.trim().parse().map_err(|_| PasswdLineError::BadUid)?;
    let gid: u32 = gid.trim().parse().map_err(|_| PasswdLineError::BadGid)?;
    Ok(Some(PasswdEntry {
        name: (*name).to_string(),
        uid,
        gid,
        home: (*home).to_string(),
        shell: (*shell).to_string(),
        line: line_no,
    }))
}

/// Parses a whole passwd file (lossy UTF-8). Returns the entries and the count of bad lines.
pub fn parse_passwd(bytes: &[u8]) -> (Vec<PasswdEntry>, usize) {
    let text = String::from_utf8_lossy(bytes);
    let mut entries = Vec::new();
    let mut bad = 0;
    for (i, line) in text.split('\n').enumerate() {
        match parse_passwd_line(line, i + 1) {
            Ok(Some(e)) => entries.push(e),
            Ok(None) => {}
            Err(_) => bad += 1,
        }
    }
    (entries, bad)
}

/// The uids of login accounts, `UID_MIN..=UID_MAX` of `login.defs` beside the passwd file
/// (`/etc/login.defs`; 1000 and 60000 when absent or unset). Root and system accounts lie
/// outside it: a fix never gives them a crontab line a site chose.
pub fn login_uid_range(ctx: &CheckContext) -> std::ops::RangeInclusive<u32> {
    let text = ctx
        .passwd_path
        .as_deref()
        .and_then(std::path::Path::parent)
        .and_then(|etc| ctx.read_config(&etc.join("login.defs"), true).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    parse_uid_range(&text)
}

/// `UID_MIN` and `UID_MAX` of a `login.defs` text (defaults 1000 and 60000).
pub fn parse_uid_range(text: &str) -> std::ops::RangeInclusive<u32> {
    let value = |key: &str| {
        text.lines().find_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some(key))
                .then(|| words.next()?.parse::<u32>().ok())
                .flatten()
        })
    };
    // A UID_MIN of 0 would make root a login account: never.
    let min = value("UID_MIN").unwrap_or(1000).max(1);
    let max = value("UID_MAX").unwrap_or(60000);
    min..=max
}

/// CRITICAL finding per account other than `root` with UID 0 (message names the account,
/// so each account is its own active finding).
pub fn uid0_account(ctx: &CheckContext) -> Vec<Finding> {
    let mut sink = Sink::new(ctx, CHECK);
    let Some(path) = &ctx.passwd_path else {
        return sink.finish(None);
    };
    let Ok(bytes) = ctx.read_config(path, true) else {
        return sink.finish(None);
    };
    let (entries, bad) = parse_passwd(&bytes);
    count(&ctx.counters().unparsed_lines, bad as u64);
    for e in entries.iter().filter(|e| e.uid == 0 && e.name != "root") {
        let name = sanitize(&e.name, 64);
        let f = sink
            .finding(Severity::Critical, format!("extra UID 0 account: {name}"))
            .with_details(format!(
                "{} line {}: account {name} has UID 0 (home {}, shell {}); only root should",
                display_path(path),
                e.line,
                sanitize(&e.home, 256),
                sanitize(&e.shell, 256)
            ))
            .with_account(name)
            .with_path(String::from_utf8_lossy(path.as_os_str().as_bytes()));
        sink.push(f);
    }
    sink.finish(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::{garbage, Fixture};

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
        daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
        # comment\n\
        \n\
        toor:x:0:0::/root:/bin/sh\n\
        bob:x:1000:1000:Bob,,,:/home/bob:/bin/bash\r\n\
        backdoor:x:00:0::/tmp:/bin/bash\n\
        +@nis::::::\n\
        broken:x:zero:0::/:/bin/sh\n\
        short:x:0\n";

    #[test]
    fn login_uid_range_from_login_defs() {
        assert_eq!(parse_uid_range(""), 1000..=60000);
        assert_eq!(
            parse_uid_range("# UID_MIN 5\nUID_MIN\t\t 500\nUID_MAX 29999\n"),
            500..=29999
        );
        assert_eq!(parse_uid_range("UID_MIN 0\nUID_MAX x"), 1..=60000);
    }

    #[test]
    fn parses_lines_and_counts_bad_ones() {
        let (entries, bad) = parse_passwd(PASSWD.as_bytes());
        assert_eq!(entries.len(), 5);
        assert_eq!(bad, 2);
        assert_eq!(entries[3].name, "bob");
        assert_eq!(entries[3].shell, "/bin/bash");
        assert_eq!(entries[4].uid, 0);
        assert_eq!(entries[4].line, 7);
    }

    #[test]
    fn flags_extra_uid0_accounts_only() {
        let fx = Fixture::new();
        fx.write("etc/passwd", PASSWD.as_bytes());
        let ctx = fx.ctx();
        let f = uid0_account(&ctx);
        assert_eq!(f.len(), 2);
        assert!(f
            .iter()
            .all(|f| f.severity == Severity::Critical && f.check == CHECK));
        assert_eq!(f[0].message, "extra UID 0 account: toor");
        assert_eq!(f[0].account.as_deref(), Some("toor"));
        assert!(f[0].details.contains("line 5"));
        assert_eq!(f[1].account.as_deref(), Some("backdoor"));
        assert_eq!(ctx.counters().snapshot().unparsed_lines, 2);
        // Stable messages: a second run produces the same keys.
        let again = uid0_account(&ctx);
        assert_eq!(again[0].message, f[0].message);
    }

    #[test]
    fn clean_or_missing_passwd_has_no_findings() {
        let fx = Fixture::new();
        assert!(uid0_account(&fx.ctx()).is_empty());
        fx.write(
            "etc/passwd",
            b"root:x:0:0:root:/root:/bin/bash\nbob:x:1000:1000::/home/bob:/bin/sh\n",
        );
        assert!(uid0_account(&fx.ctx()).is_empty());
    }

    #[test]
    fn garbage_passwd_never_panics() {
        for seed in 0..200 {
            let _ = parse_passwd(&garbage(seed, 512));
        }
        let fx = Fixture::new();
        let mut junk = garbage(7, 4096);
        junk.extend_from_slice(b"\nevil:x:0:0::/:/bin/sh\n\xff\xfe\x00");
        fx.write("etc/passwd", &junk);
        let f = uid0_account(&fx.ctx());
        assert!(f.iter().any(|f| f.message == "extra UID 0 account: evil"));
    }
}
