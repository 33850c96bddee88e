//! The mailbox password audit through the real binary: a Dovecot passwd-file whose hashes
//! the test computes at run time with independent tools (OpenSSL for SHA-crypt and
//! MD5-crypt, Apache's htpasswd for bcrypt), `svc check` (a full scan, which includes the
//! deep-scan audit), findings `email_weak_password` naming the mailbox and never the
//! password, `email_password_audit_incomplete` for an over-limit and a malformed value,
//! replacement when the file changes, the rows `email_password.*` in status, and the
//! breach-count range API served by the test on loopback (only 5 hex characters sent).
//!
//! A missing tool fails the test under CI (`CI=true`) and skips it locally.

use crate::common::*;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use parking_lot::Mutex;

/// Runs a hashing tool; `None` (skip) when it is not installed outside CI.
fn tool(cmd: &str, args: &[&str]) -> Option<String> {
    let out = match Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "{cmd} is required in CI: {e}"
            );
            eprintln!("skipping: {cmd} not available ({e})");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap().trim().to_string())
}

fn sha512_crypt(salt: &str, pw: &str) -> Option<String> {
    tool("openssl", &["passwd", "-6", "-salt", salt, pw])
}

/// bcrypt from htpasswd (`user:$2y$...`), the value only.
fn bcrypt(cost: u32, pw: &str) -> Option<String> {
    let line = tool("htpasswd", &["-nbB", "-C", &cost.to_string(), "u", pw])?;
    Some(line.split_once(':').unwrap().1.to_string())
}

/// Answers range queries like the Pwned Passwords range API: the suffix of SHA-1 of
/// `password1` with count 42, one padding line. Records every request line.
fn breach_server() -> (String, Arc<Mutex<Vec<String>>>) {
    use sha1::Digest as _;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hex = hex::encode_upper(sha1::Sha1::digest(b"password1"));
    let suffix = hex[5..].to_string();
    let log = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let mut request = String::new();
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                request.push_str(&line);
            }
            log.lock().push(request);
            let body = format!("0018A45C4D1DEF81644B54AB7F969B88D65:0\r\n{suffix}:42\r\n");
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (format!("http://{addr}/range/"), seen)
}

fn messages(d: &Daemon, check: &str) -> Vec<String> {
    let mut m: Vec<String> = findings_of(d, check)
        .iter()
        .map(|f| f["message"].as_str().unwrap().to_string())
        .collect();
    m.sort();
    m
}

fn check(d: &Daemon) -> String {
    let out = d.cli(&["check", "--json"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn write_users(root: &Path, text: &str) {
    let dir = root.join("etc/dovecot");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("users"), text).unwrap();
}

#[test]
fn deep_scan_password_audit_findings_replacement_and_breach_prefix() {
    let (Some(weak), Some(derived), Some(strong), Some(over), Some(strong2), Some(weak_bcrypt)) = (
        sha512_crypt("s4ltW", "password1"),
        tool("openssl", &["passwd", "-1", "-salt", "md5salt", "sales123"]),
        sha512_crypt("s4ltS", "Vt8#kq!2Lz@9wQ-x"),
        bcrypt(15, "whatever-it-is"),
        sha512_crypt("s4ltT", "Another#Strong9-Pass"),
        bcrypt(4, "letmein"),
    ) else {
        return;
    };
    let dir = temp_dir("mail-password");
    let root = dir.join("fixture");
    // The default `mail.password_files` include /etc/dovecot/users, read under checks.root.
    write_users(
        &root,
        &format!(
            "weak@example.com:{weak}:1000:1000::/home/weak::\nsales@example.org:{{MD5-CRYPT}}{derived}\nstrong@example.com:{{SHA512-CRYPT}}{strong}\nslow@example.com:{over}\nbroken@example.com:{{SSHA}}!!!not-base64\n"
        ),
    );
    let (breach_url, requests) = breach_server();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        format!(
            "{}[logs]\nauth = []\n[files]\nwatch = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\nroot = {root:?}\n[mail]\nbreach_api = {breach_url:?}\npassword_slow_candidates = 20\n",
            base_config(&state),
            root = root.display().to_string()
        ),
    )
    .unwrap();
    let d = Daemon::start_with(dir.clone(), config, state, &[]);
    let status = d.get("/api/v1/status", READ).expect(200).json();
    let queues = status["queues"].as_object().unwrap();
    for row in [
        "email_password.mailboxes",
        "email_password.hashes",
        "email_password.waiting",
    ] {
        assert!(queues.contains_key(row), "{row} missing: {queues:?}");
    }
    assert_eq!(queues["email_password.hashes"]["capacity"], 3);
    assert!(queues["email_password.waiting"]["capacity_unavailable"] == true);

    let out = check(&d);
    assert!(out.contains("email_weak_password"), "{out}");
    assert_eq!(
        messages(&d, "email_weak_password"),
        [
            "mailbox sales@example.org has a weak password",
            "mailbox weak@example.com has a weak password",
        ]
    );
    let weak_f = findings_of(&d, "email_weak_password");
    assert!(weak_f.iter().all(|f| f["severity"] == "HIGH"));
    let details = weak_f
        .iter()
        .find(|f| f["message"].as_str().unwrap().contains("weak@"))
        .unwrap()["details"]
        .to_string();
    assert!(details.contains("42 times"), "{details}");
    assert_eq!(
        messages(&d, "email_password_audit_incomplete"),
        [
            "password audit of mailbox broken@example.com incomplete",
            "password audit of mailbox slow@example.com incomplete",
        ]
    );
    let inc = findings_of(&d, "email_password_audit_incomplete").to_vec();
    assert!(inc.iter().all(|f| f["severity"] == "WARNING"));
    assert!(inc
        .iter()
        .any(|f| f["details"].as_str().unwrap_or("").contains("cost")));
    // Only 5 hex characters of the SHA-1 left the host, once per weak mailbox.
    let sent = requests.lock().clone();
    assert_eq!(sent.len(), 2, "{sent:?}");
    for r in &sent {
        let path = r.split_whitespace().nth(1).unwrap();
        let prefix = path.strip_prefix("/range/").unwrap();
        assert!(
            prefix.len() == 5 && prefix.bytes().all(|b| b.is_ascii_hexdigit()),
            "{r}"
        );
    }
    // No password, hash or mailbox in any row or log line.
    let status = d.get("/api/v1/status", READ).expect(200).json().to_string();
    let stderr = std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default();
    for secret in [
        "password1",
        "sales123",
        weak.as_str(),
        derived.as_str(),
        over.as_str(),
    ] {
        assert!(!status.contains(secret), "status holds {secret}");
        assert!(!stderr.contains(secret), "log holds {secret}");
        assert!(!out.contains(secret), "the check's answer holds {secret}");
    }
    assert!(!status.contains("example.com"), "{status}");

    // Again with nothing changed: the findings stay, nothing is audited again (no new
    // breach query).
    check(&d);
    assert_eq!(messages(&d, "email_weak_password").len(), 2);
    assert_eq!(messages(&d, "email_password_audit_incomplete").len(), 2);
    assert_eq!(requests.lock().len(), 2);

    // Changed file: the weak mailbox got a strong password (its finding is replaced), the
    // over-limit one a weak bcrypt value (audited at once despite the retry interval), the
    // malformed one is unchanged (keeps its warning), sales is gone (record removed).
    write_users(
        &root,
        &format!(
            "weak@example.com:{strong2}\nstrong@example.com:{{SHA512-CRYPT}}{strong}\nslow@example.com:{{BLF-CRYPT}}{weak_bcrypt}\nbroken@example.com:{{SSHA}}!!!not-base64\n"
        ),
    );
    check(&d);
    assert_eq!(
        messages(&d, "email_weak_password"),
        ["mailbox slow@example.com has a weak password"]
    );
    assert_eq!(
        messages(&d, "email_password_audit_incomplete"),
        ["password audit of mailbox broken@example.com incomplete"]
    );
    // Turned off by a live reload: the audit's findings are resolved.
    let cfg = std::fs::read_to_string(&d.config).unwrap();
    std::fs::write(&d.config, format!("{cfg}password_audit = false\n")).unwrap();
    let out = d.cli(&["reload"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    assert!(text.contains("mail.password"), "{text}");
    check(&d);
    assert!(messages(&d, "email_weak_password").is_empty());
    assert!(messages(&d, "email_password_audit_incomplete").is_empty());
}
