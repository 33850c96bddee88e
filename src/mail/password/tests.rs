//! Every scheme against vectors computed at test time by independent tools (OpenSSL,
//! Apache's htpasswd, Debian's argon2 CLI, Python's hashlib and passlib), with each limit's
//! edge and one past it; and the audit end to end on a password file.
//!
//! A missing tool fails the test under CI (`CI=true`) and skips it locally.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::scheme::{parse, Field, FormatError, Stored};
use super::verify::verify;

fn tool(cmd: &str, args: &[&str], stdin: Option<&[u8]>) -> Option<String> {
    let child = Command::new(cmd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{cmd} is required in CI: {e}");
            }
            eprintln!("skipping: {cmd} not available ({e})");
            return None;
        }
    };
    if let Some(data) = stdin {
        child.stdin.take().unwrap().write_all(data).unwrap();
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap().trim().to_string())
}

/// Debian's interpreter, which sees the `python3-passlib` package (a `python3` earlier on
/// PATH, such as a pyenv shim, may not).
fn py(code: &str) -> Option<String> {
    let python = if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    tool(python, &["-c", code], None)
}

fn stored(v: &str) -> Stored {
    match parse(v.as_bytes()) {
        Ok(Field::Value(s)) => s,
        other => panic!("{v}: {other:?}"),
    }
}

fn matches(v: &str, pw: &[u8]) -> bool {
    verify(&stored(v), pw).unwrap()
}

fn over_limit(v: &str) -> bool {
    matches!(parse(v.as_bytes()), Err(FormatError::OverLimit(..)))
}

#[test]
fn sha_crypt_from_openssl_and_passlib_with_limits() {
    for (flag, scheme) in [("-5", "SHA256-CRYPT"), ("-6", "SHA512-CRYPT")] {
        for salt in ["s", "0123456789abcdef"] {
            let Some(h) = tool(
                "openssl",
                &["passwd", flag, "-salt", salt, "Tr0ub4dor&3"],
                None,
            ) else {
                return;
            };
            assert!(matches(&h, b"Tr0ub4dor&3"), "{h}");
            assert!(!matches(&h, b"Tr0ub4dor&4"));
            assert!(matches(&format!("{{{scheme}}}{h}"), b"Tr0ub4dor&3"));
            assert!(matches(&format!("{{crypt}}{h}"), b"Tr0ub4dor&3"));
            assert!(matches!(stored(&h), Stored::ShaCrypt { rounds: 5000, .. }));
        }
        // A 17-character salt is one past the limit (tools truncate it, so it is edited in).
        let h = tool(
            "openssl",
            &["passwd", flag, "-salt", "0123456789abcdef", "x"],
            None,
        )
        .unwrap();
        let h17 = h.replacen("0123456789abcdef", "0123456789abcdefg", 1);
        assert!(over_limit(&h17), "{h17}");
        let empty = h.replacen("0123456789abcdef", "", 1);
        assert!(matches!(
            parse(empty.as_bytes()),
            Err(FormatError::Malformed(_))
        ));
    }
    for (kind, rounds, ok) in [
        ("sha512_crypt", 1_000u32, true),
        ("sha256_crypt", 1_000_000, true),
        ("sha512_crypt", 1_000_001, false),
    ] {
        let Some(h) = py(&format!(
            "from passlib.hash import {kind}; print({kind}.using(rounds={rounds}, salt='abcd').hash('Secret-9'))"
        )) else {
            return;
        };
        assert!(h.contains(&format!("rounds={rounds}$")), "{h}");
        if ok {
            assert!(matches(&h, b"Secret-9"), "{h}");
            assert!(!matches(&h, b"Secret-8"));
        } else {
            assert!(over_limit(&h), "{h}");
        }
    }
    // 999 rounds: passlib refuses to make one, so a 1,000-round value is edited.
    let h = py("from passlib.hash import sha512_crypt; print(sha512_crypt.using(rounds=1000, salt='ab').hash('x'))").unwrap();
    assert!(over_limit(&h.replace("rounds=1000$", "rounds=999$")));
}

#[test]
fn md5_crypt_from_openssl_with_salt_limits() {
    for salt in ["a", "abcdefgh"] {
        let Some(h) = tool("openssl", &["passwd", "-1", "-salt", salt, "hunter2"], None) else {
            return;
        };
        assert!(matches(&h, b"hunter2"), "{h}");
        assert!(!matches(&h, b"hunter3"));
        assert!(matches(&format!("{{MD5-CRYPT}}{h}"), b"hunter2"));
    }
    let h = tool("openssl", &["passwd", "-1", "-salt", "abcdefgh", ""], None).unwrap();
    assert!(matches(&h, b""), "empty password");
    assert!(over_limit(&h.replacen("abcdefgh", "abcdefghi", 1)));
}

#[test]
fn bcrypt_from_htpasswd_with_cost_limits() {
    let Some(line) = tool("htpasswd", &["-nbB", "-C", "4", "u", "letmein!"], None) else {
        return;
    };
    let h = line.split_once(':').unwrap().1.to_string();
    assert!(h.starts_with("$2y$04$"), "{h}");
    assert!(matches(&h, b"letmein!"));
    assert!(!matches(&h, b"letmein"));
    // 2a and 2b compute the same hash for passwords shorter than 255 bytes.
    assert!(matches(&h.replacen("$2y$", "$2a$", 1), b"letmein!"));
    assert!(matches(
        &format!("{{BLF-CRYPT}}{}", h.replacen("$2y$", "$2b$", 1)),
        b"letmein!"
    ));
    assert!(matches!(
        parse(h.replacen("$2y$", "$2x$", 1).as_bytes()),
        Err(FormatError::Unsupported("bcrypt 2x"))
    ));
    assert!(over_limit(&h.replacen("$04$", "$03$", 1)));
    let line = tool("htpasswd", &["-nbB", "-C", "14", "u", "letmein!"], None).unwrap();
    let h14 = line.split_once(':').unwrap().1.to_string();
    assert!(matches(&h14, b"letmein!"), "cost 14 is the edge");
    let line = tool("htpasswd", &["-nbB", "-C", "15", "u", "x"], None).unwrap();
    assert!(over_limit(line.split_once(':').unwrap().1));
    // 72-byte truncation as OpenBSD does.
    let long = "a".repeat(80);
    let line = tool("htpasswd", &["-nbB", "-C", "4", "u", &long], None).unwrap();
    let h = line.split_once(':').unwrap().1;
    assert!(matches(h, "a".repeat(72).as_bytes()));
}

fn argon2_cli(variant: &str, salt: &str, extra: &[&str], pw: &str) -> Option<String> {
    let mut args = vec![salt, variant, "-e"];
    args.extend_from_slice(extra);
    tool("argon2", &args, Some(pw.as_bytes()))
}

#[test]
fn argon2_from_the_debian_cli_with_limits() {
    // Edges: 64 MiB, 4 passes, 4 lanes, salt 8 bytes, digest 16 bytes.
    let Some(h) = argon2_cli(
        "-id",
        "saltsalt",
        &["-k", "65536", "-t", "4", "-p", "4", "-l", "16"],
        "correct horse",
    ) else {
        return;
    };
    assert!(h.starts_with("$argon2id$v=19$m=65536,t=4,p=4$"), "{h}");
    assert!(matches(&format!("{{ARGON2ID}}{h}"), b"correct horse"));
    let salt64 = "s".repeat(64);
    let h = argon2_cli(
        "-i",
        &salt64,
        &["-k", "64", "-t", "1", "-p", "1", "-l", "64"],
        "pw",
    )
    .unwrap();
    assert!(matches(&format!("{{argon2i}}{h}"), b"pw"));
    assert!(!matches(&format!("{{argon2i}}{h}"), b"pW"));
    // The variant must match the scheme name.
    assert!(matches!(
        parse(format!("{{ARGON2ID}}{h}").as_bytes()),
        Err(FormatError::Malformed(_))
    ));
    // One past each limit.
    for extra in [
        &["-k", "65537", "-t", "1", "-p", "1"][..],
        &["-k", "64", "-t", "5", "-p", "1"],
        &["-k", "64", "-t", "1", "-p", "5"],
        &["-k", "64", "-t", "1", "-p", "1", "-l", "15"],
        &["-k", "64", "-t", "1", "-p", "1", "-l", "65"],
    ] {
        let h = argon2_cli("-id", "saltsalt", extra, "pw").unwrap();
        assert!(over_limit(&format!("{{ARGON2ID}}{h}")), "{extra:?}: {h}");
    }
    let h = argon2_cli(
        "-id",
        &"s".repeat(65),
        &["-k", "64", "-t", "1", "-p", "1"],
        "pw",
    )
    .unwrap();
    assert!(over_limit(&format!("{{ARGON2ID}}{h}")), "salt 65");
    let h = argon2_cli(
        "-id",
        "saltsalt",
        &["-k", "64", "-t", "1", "-p", "1", "-v", "10"],
        "pw",
    )
    .unwrap();
    assert!(matches!(
        parse(format!("{{ARGON2ID}}{h}").as_bytes()),
        Err(FormatError::Unsupported(_))
    ));
    let h = argon2_cli("-d", "saltsalt", &["-k", "64", "-t", "1", "-p", "1"], "pw").unwrap();
    assert!(matches!(
        parse(format!("{{ARGON2I}}{h}").as_bytes()),
        Err(FormatError::Unsupported("Argon2d"))
    ));
}

#[test]
fn digest_schemes_from_python_hashlib_with_salt_limits_and_encodings() {
    let Some(out) = py(r#"
import hashlib, base64
pw = b"Summer2024"
def b64(x): return base64.b64encode(x).decode()
rows = []
rows.append("{PLAIN-MD5}" + hashlib.md5(pw).hexdigest())
rows.append("{PLAIN-MD5}" + b64(hashlib.md5(pw).digest()))
rows.append("{LDAP-MD5}" + b64(hashlib.md5(pw).digest()))
rows.append("{ldap-md5.HEX}" + hashlib.md5(pw).hexdigest())
rows.append("{SHA}" + b64(hashlib.sha1(pw).digest()))
rows.append("{SHA1}" + hashlib.sha1(pw).hexdigest())
rows.append("{sha1.b64}" + b64(hashlib.sha1(pw).digest()))
rows.append("{SHA256}" + b64(hashlib.sha256(pw).digest()))
rows.append("{SHA256.hex}" + hashlib.sha256(pw).hexdigest())
rows.append("{SHA512}" + b64(hashlib.sha512(pw).digest()))
rows.append("{SHA512.BASE64}" + b64(hashlib.sha512(pw).digest()))
rows.append("{PLAIN.b64}" + b64(pw))
for name, h in [("SMD5", hashlib.md5), ("SSHA", hashlib.sha1), ("SSHA256", hashlib.sha256), ("SSHA512", hashlib.sha512)]:
    for n in (1, 64):
        salt = bytes(range(n))
        rows.append("{%s}" % name + b64(h(pw + salt).digest() + salt))
    salt = bytes(range(8))
    rows.append("{%s.HEX}" % name + (h(pw + salt).digest() + salt).hex())
print("\n".join(rows))
over = []
for name, h in [("SMD5", hashlib.md5), ("SSHA", hashlib.sha1), ("SSHA256", hashlib.sha256), ("SSHA512", hashlib.sha512)]:
    salt = bytes(range(65))
    over.append("{%s}" % name + b64(h(pw + salt).digest() + salt))
print("--")
print("\n".join(over))
"#)
    else {
        return;
    };
    let (good, over) = out.split_once("\n--\n").unwrap();
    for v in good.lines() {
        assert!(matches(v, b"Summer2024"), "{v}");
        assert!(!matches(v, b"summer2024"), "{v}");
    }
    for v in over.lines() {
        assert!(over_limit(v), "salt 65: {v}");
    }
    // Salted schemes need a salt.
    assert!(matches!(
        parse(b"{SSHA}qUqP5cyxm6YcTAhz05Hph5gvu9M="),
        Err(FormatError::Malformed(_))
    ));
}

#[test]
fn stored_value_and_candidate_size_edges() {
    // A stored value of exactly 4 KiB is audited; one byte more is not.
    let pw = "p".repeat(4096 - "{PLAIN}".len());
    let v = format!("{{PLAIN}}{pw}");
    assert_eq!(v.len(), 4096);
    assert!(parse(v.as_bytes()).is_ok());
    assert!(matches!(
        parse(format!("{v}p").as_bytes()),
        Err(FormatError::TooLong(4097))
    ));
    // Candidates: 256 bytes are tried, 257 are not, NUL never.
    let Some(out) = py(r#"
import hashlib, base64
for n in (256, 257):
    pw = b"c" * n
    salt = b"salty"
    print("{SSHA256}" + base64.b64encode(hashlib.sha256(pw + salt).digest() + salt).decode())
"#)
    else {
        return;
    };
    let mut lines = out.lines();
    let v256 = lines.next().unwrap();
    let v257 = lines.next().unwrap();
    assert!(matches(v256, &[b'c'; 256]));
    assert!(
        !matches(v257, &[b'c'; 257]),
        "a 257-byte candidate is never tried"
    );
}

mod audit {
    use super::*;
    use crate::checks::CheckContext;
    use crate::clock::ManualClock;
    use crate::mail::password::{AuditSettings, Auditor, HashPool};
    use crate::queue::Registry;
    use crate::store::Store;

    struct Rig {
        dir: std::path::PathBuf,
        store: Store,
        registry: Arc<Registry>,
        clock: Arc<ManualClock>,
        auditor: Arc<Auditor>,
        pool: Arc<HashPool>,
    }

    impl Rig {
        fn new(tag: &str) -> Rig {
            let dir =
                std::env::temp_dir().join(format!("svc-pwaudit-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let store = Store::open(&dir.join("svc.db")).unwrap();
            let registry = Registry::new();
            let clock = ManualClock::at_epoch_2026();
            let pool = HashPool::start(clock.clone(), &registry).unwrap();
            let auditor =
                Auditor::new(pool.clone(), store.clone(), clock.clone(), &registry).unwrap();
            Rig {
                dir,
                store,
                registry,
                clock,
                auditor,
                pool,
            }
        }

        fn settings(&self) -> AuditSettings {
            AuditSettings {
                files: vec![self.dir.join("users")],
                ..AuditSettings::default()
            }
        }

        fn write(&self, text: &str) {
            std::fs::write(self.dir.join("users"), text).unwrap();
        }

        fn run(&self) -> (Vec<String>, Vec<String>, super::super::RunStats) {
            let ctx = CheckContext::builder(self.clock.clone()).build();
            let (weak, stats) = self
                .auditor
                .run(&ctx, &self.settings(), &AtomicBool::new(false));
            let inc = self.auditor.last_incomplete().unwrap();
            (
                weak.into_iter().map(|f| f.message).collect(),
                inc.into_iter().map(|f| f.message).collect(),
                stats,
            )
        }
    }

    impl Drop for Rig {
        fn drop(&mut self) {
            self.pool.shutdown();
            self.store.close();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    #[test]
    fn findings_records_interval_and_fresh_audits() {
        let rig = Rig::new("flow");
        let md5 = |pw: &str| format!("{{PLAIN-MD5}}{:x}", md5::Md5::digest(pw.as_bytes()));
        use md5::Digest;
        rig.write(&format!(
            "weak@example.com:{}\nderived@example.com:{}\nstrong@example.com:{}\nodd@example.com:{{PBKDF2}}$1$x\nbad@example.com:{{SSHA}}!!!\nlocked@example.com:!$6$x$y\n",
            md5("password1"),
            md5("derived2024"),
            md5("vT8#kq!2Lz@9wQ"),
        ));
        let (weak, inc, st) = rig.run();
        assert_eq!(
            weak,
            [
                "mailbox weak@example.com has a weak password",
                "mailbox derived@example.com has a weak password"
            ]
        );
        assert_eq!(
            inc,
            [
                "password audit of mailbox odd@example.com incomplete",
                "password audit of mailbox bad@example.com incomplete"
            ]
        );
        assert_eq!((st.audited, st.weak, st.incomplete), (4, 2, 2));
        // Nothing secret in any row.
        let rows = serde_json::to_string(&rig.registry.snapshot()).unwrap();
        assert!(
            !rows.contains("example.com") && !rows.contains("PLAIN"),
            "{rows}"
        );
        // Again: nothing re-audited, incomplete ones wait for the interval, findings stay.
        let (weak2, inc2, st) = rig.run();
        assert_eq!((weak2, inc2), (weak.clone(), inc.clone()));
        assert_eq!(
            (st.carried_over, st.skipped_by_interval, st.audited),
            (4, 2, 0)
        );
        // After the interval they are tried again (and still incomplete).
        rig.clock.advance_secs(1441 * 60);
        let (_, inc3, st) = rig.run();
        assert_eq!(inc3, inc);
        assert_eq!(st.incomplete, 2);
        // A changed hash is audited at once; a fixed one clears the finding; an unsupported
        // new value keeps the earlier weak finding.
        rig.write(&format!(
            "weak@example.com:{{PBKDF2}}$1$y\nderived@example.com:{}\nstrong@example.com:{}\n",
            md5("N0t-derived-anymore"),
            md5("vT8#kq!2Lz@9wQ"),
        ));
        let (weak, inc, st) = rig.run();
        assert_eq!(
            weak,
            ["mailbox weak@example.com has a weak password"],
            "earlier finding stays"
        );
        assert_eq!(
            inc,
            ["password audit of mailbox weak@example.com incomplete"]
        );
        assert_eq!(st.audited, 1);
        let records = rig
            .store
            .read(crate::store::mail_accounts::load_audit)
            .unwrap();
        assert_eq!(records.len(), 3, "removed mailboxes lose their records");
        let text = format!("{records:?}");
        // The scheme's name may appear in a failure reason; the stored value never does.
        assert!(
            !text.contains("N0t-derived") && !text.contains("$1$y"),
            "{text}"
        );
    }

    #[test]
    fn cancellation_returns_promptly_and_the_calculation_keeps_its_slot() {
        let rig = Rig::new("cancel");
        // A 64 MiB Argon2 value: slow enough that a calculation is running when cancelled.
        let Some(h) = argon2_cli(
            "-id",
            "saltsalt",
            &["-k", "65536", "-t", "4", "-p", "1"],
            "nope-nope",
        ) else {
            return;
        };
        let mut text = String::new();
        for i in 0..5 {
            text.push_str(&format!("m{i}@example.com:{{ARGON2ID}}{h}\n"));
        }
        rig.write(&text);
        let cancel = Arc::new(AtomicBool::new(false));
        let auditor = rig.auditor.clone();
        let settings = rig.settings();
        let ctx = CheckContext::builder(rig.clock.clone()).build();
        let c2 = cancel.clone();
        let t = std::thread::spawn(move || auditor.run(&ctx, &settings, &c2));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while rig.pool.running() == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "no calculation started"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(rig.pool.running() <= 3);
        cancel.store(true, std::sync::atomic::Ordering::Release);
        let cancelled_at = std::time::Instant::now();
        let (_, stats) = t.join().unwrap();
        let returned_after = cancelled_at.elapsed();
        assert_eq!(stats.audited + stats.incomplete, 0);
        assert_eq!(stats.temporary, 5, "cancelled audits record nothing");
        // Returning did not wait for the running calculations, which end on their own.
        eprintln!("returned {returned_after:?} after cancellation");
        let rows = rig.registry.snapshot();
        assert_eq!(rows["email_password.mailboxes"].dropped_total, 0);
        assert_eq!(rows["email_password.waiting"].dropped_total, 0);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while rig.pool.running() > 0 {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn an_audit_over_its_budget_on_the_injected_clock_is_incomplete_and_others_continue() {
        let rig = Rig::new("budget");
        let Some(h) = argon2_cli(
            "-id",
            "saltsalt",
            &["-k", "65536", "-t", "4", "-p", "1"],
            "nope-nope",
        ) else {
            return;
        };
        use md5::Digest;
        rig.write(&format!(
            "slow@example.com:{{ARGON2ID}}{h}\nweak@example.com:{{PLAIN-MD5}}{:x}\n",
            md5::Md5::digest(b"password1")
        ));
        let auditor = rig.auditor.clone();
        let settings = rig.settings();
        let ctx = CheckContext::builder(rig.clock.clone()).build();
        let t = std::thread::spawn(move || {
            let (weak, stats) = auditor.run(&ctx, &settings, &AtomicBool::new(false));
            (weak, stats, auditor.last_incomplete().unwrap())
        });
        // Advance the clock only once the slow mailbox's own calculation runs: its budget
        // starts when it enters processing, and mailboxes are audited side by side, so a
        // running calculation alone may be the weak mailbox's MD5 while the slow one is still
        // being admitted (on a loaded machine its budget then started after the advance and
        // all 500 Argon2 candidates ran). Both admitted, one left running (the weak one is
        // done in microseconds) and a calculation running: that is the slow one's.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let rows = rig.registry.snapshot();
            let mailboxes = &rows["email_password.mailboxes"];
            if mailboxes.waiting == Some(0) && mailboxes.running == 1 && rig.pool.running() > 0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the slow mailbox's calculation never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // Five minutes and a second pass on the daemon's clock: no real waiting.
        rig.clock.advance_secs(301);
        let (weak, stats, inc) = t.join().unwrap();
        assert_eq!(
            weak.iter().map(|f| f.message.as_str()).collect::<Vec<_>>(),
            ["mailbox weak@example.com has a weak password"]
        );
        assert_eq!(inc.len(), 1);
        assert_eq!(
            inc[0].message,
            "password audit of mailbox slow@example.com incomplete"
        );
        assert!(
            inc[0].details.contains("5-minute budget"),
            "{}",
            inc[0].details
        );
        assert_eq!((stats.incomplete, stats.weak), (1, 1));
        let rows = rig.registry.snapshot();
        assert_eq!(rows["email_password.mailboxes"].dropped_total, 1);
        // Not recorded as audited: it waits for the retry interval, then is tried again.
        let (_, inc2, st) = rig.run();
        assert_eq!((inc2.len(), st.skipped_by_interval), (1, 1));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while rig.pool.running() > 0 {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}
