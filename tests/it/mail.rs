//! Mail antivirus (issue 13) against a real Exim spool and a real clamd.
//!
//! - Exim (`exim4-daemon-light`) runs with a test configuration (`-C`) whose
//!   `spool_directory` is in the test's directory, with `split_spool_directory`; messages
//!   are injected with `exim -odq -bm` (queued, never delivered), owned by `Debian-exim`.
//! - clamd (`clamav-daemon`) runs in the foreground on a unix socket in the test's
//!   directory, with a database the test writes: one `.ndb` signature for a marker string
//!   (clamd works offline with it).
//! - The mail quarantine is a tmpfs mounted by the test, so quarantine and release cross
//!   filesystems.
//!
//! These tests mount and run Exim as root (as the daemon does).

use crate::common::*;

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The string the test signature matches.
const MARKER: &str = "SVC-TEST-MALWARE-MARKER-7f3a9c";
const SIG_NAME: &str = "Svc.Test.Marker";
/// The EICAR test file; the test database names it as ClamAV's own does.
const EICAR: &str = r"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";
const EICAR_SIG: &str = "Eicar-Test-Signature";

fn hex(s: &[u8]) -> String {
    s.iter().map(|b| format!("{b:02x}")).collect()
}

fn b64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s.as_bytes()
        .chunks(76)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// clamd in the foreground on `{dir}/clamd.sock`; killed on drop.
pub struct Clamd {
    child: Child,
    pub socket: PathBuf,
}

impl Clamd {
    pub fn start(dir: &Path) -> Clamd {
        let db = dir.join("clamdb");
        std::fs::create_dir_all(&db).unwrap();
        std::fs::write(
            db.join("svc-test.ndb"),
            format!(
                "{SIG_NAME}:0:*:{}\n{EICAR_SIG}:0:*:{}\n",
                hex(MARKER.as_bytes()),
                hex(EICAR.as_bytes())
            ),
        )
        .unwrap();
        let socket = dir.join("clamd.sock");
        let conf = dir.join("clamd.conf");
        std::fs::write(
            &conf,
            format!(
                "LocalSocket {sock}\nDatabaseDirectory {db}\nTemporaryDirectory {dir}\nForeground yes\nLogFile {dir}/clamd.log\nUser root\nStreamMaxLength 200M\n",
                sock = socket.display(),
                db = db.display(),
                dir = dir.display()
            ),
        )
        .unwrap();
        let child = Command::new("clamd")
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("clamd (Debian clamav-daemon) must be installed");
        let c = Clamd { child, socket };
        wait_until(60, "clamd answering PING", || c.ping().then_some(()));
        c
    }

    fn ping(&self) -> bool {
        use std::io::Read;
        let Ok(mut s) = std::os::unix::net::UnixStream::connect(&self.socket) else {
            return false;
        };
        let _ = s.write_all(b"zPING\0");
        let mut buf = [0u8; 16];
        matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"PONG"))
    }
}

impl Drop for Clamd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tmpfs mounted for the test; unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs"])
            .arg(at)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mounting a tmpfs");
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// An Exim spool in `{dir}/spool` and the configuration that uses it.
struct Exim {
    conf: PathBuf,
    spool: PathBuf,
}

impl Exim {
    fn new(dir: &Path) -> Exim {
        Exim::with_options(dir, "")
    }

    /// `options` are main-section lines added to the configuration.
    fn with_options(dir: &Path, options: &str) -> Exim {
        let spool = dir.join("spool");
        std::fs::create_dir_all(&spool).unwrap();
        let ok = Command::new("chown")
            .arg("Debian-exim:Debian-exim")
            .arg(&spool)
            .status()
            .unwrap()
            .success();
        assert!(ok, "chown Debian-exim");
        let conf = dir.join("exim.conf");
        std::fs::write(
            &conf,
            format!(
                "spool_directory = {spool}\nsplit_spool_directory = true\nexim_user = Debian-exim\nexim_group = Debian-exim\nprimary_hostname = mail.example.test\nqualify_domain = example.test\nlog_file_path = {spool}/log/%slog\n{options}begin routers\nbegin transports\n",
                spool = spool.display()
            ),
        )
        .unwrap();
        Exim { conf, spool }
    }

    /// Queues a message (`exim -odq -bm`); returns its Exim id.
    fn inject(&self, msg: &str) -> String {
        let mut child = Command::new("exim")
            .arg("-C")
            .arg(&self.conf)
            .args(["-odq", "-bm", "-v", "rcpt@example.org"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("exim (Debian exim4-daemon-light) must be installed");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(msg.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "exim: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The id is the newest -H file (ids are time-ordered within one test).
        let mut newest: Option<(std::time::SystemTime, String)> = None;
        for e in walk(&self.spool.join("input")) {
            let name = e.file_name().unwrap().to_string_lossy().into_owned();
            if let Some(id) = name.strip_suffix("-H") {
                let t = e.metadata().unwrap().modified().unwrap();
                if !self.known(id) && newest.as_ref().is_none_or(|(n, _)| t >= *n) {
                    newest = Some((t, id.to_string()));
                }
            }
        }
        let id = newest.expect("exim queued the message").1;
        KNOWN.lock().push(id.clone());
        id
    }

    fn known(&self, id: &str) -> bool {
        KNOWN.lock().iter().any(|k| k == id)
    }

    /// The spool path of `{id}{suffix}` (hash directory = id's 6th character).
    fn file(&self, id: &str, suffix: &str) -> PathBuf {
        let hash = &id[5..6];
        self.spool
            .join("input")
            .join(hash)
            .join(format!("{id}{suffix}"))
    }

    /// `exim -bp` lists the message (Exim itself reads it).
    fn lists(&self, id: &str) -> bool {
        let out = Command::new("exim")
            .arg("-C")
            .arg(&self.conf)
            .arg("-bp")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).contains(id)
    }
}

static KNOWN: parking_lot::Mutex<Vec<String>> = parking_lot::Mutex::new(Vec::new());

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn message(subject: &str, body: &str) -> String {
    format!(
        "From: sender@example.test\nTo: rcpt@example.org\nSubject: {subject}\nMessage-ID: <{subject}@example.test>\nMIME-Version: 1.0\n{body}"
    )
}

fn attachment(subject: &str, name: &str, ctype: &str, data: &[u8]) -> String {
    message(
        subject,
        &format!(
            "Content-Type: multipart/mixed; boundary=\"b1\"\n\n--b1\nContent-Type: text/plain\n\nsee attached\n--b1\nContent-Type: {ctype}; name=\"{name}\"\nContent-Disposition: attachment; filename=\"{name}\"\nContent-Transfer-Encoding: base64\n\n{}\n--b1--\n",
            b64(data)
        ),
    )
}

fn zip_of(name: &str, data: &[u8]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    w.start_file(name, zip::write::SimpleFileOptions::default())
        .unwrap();
    w.write_all(data).unwrap();
    w.finish().unwrap().into_inner()
}

fn tar_gz_of(name: &str, data: &[u8]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut t = tar::Builder::new(gz);
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    t.append_data(&mut h, name, data).unwrap();
    t.into_inner().unwrap().finish().unwrap()
}

/// A zip whose one member inflates to 200 MB of zeros.
fn zip_bomb() -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    w.start_file(
        "zeros.bin",
        zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .large_file(false),
    )
    .unwrap();
    let block = vec![0u8; 1 << 20];
    for _ in 0..200 {
        w.write_all(&block).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn nested4(subject: &str) -> String {
    message(
        subject,
        &format!(
            "Content-Type: multipart/mixed; boundary=\"L1\"\n\n--L1\nContent-Type: multipart/alternative; boundary=\"L2\"\n\n--L2\nContent-Type: multipart/related; boundary=\"L3\"\n\n--L3\nContent-Type: multipart/mixed; boundary=\"L4\"\n\n--L4\nContent-Type: text/plain\n\nhello\n--L4\nContent-Type: application/octet-stream; name=\"deep.bin\"\nContent-Transfer-Encoding: base64\n\n{}\n--L4--\n--L3--\n--L2--\n--L1--\n",
            b64(format!("payload {MARKER} payload").as_bytes())
        ),
    )
}

/// Base64 with stray characters, a broken line and no padding; the payload is recoverable.
fn malformed_b64(subject: &str) -> String {
    let enc = b64(format!("xx {MARKER} yy!").as_bytes()).replace('\n', "");
    let enc = enc.trim_end_matches('=');
    let (a, b) = enc.split_at(20);
    message(
        subject,
        &format!(
            "Content-Type: multipart/mixed; boundary=\"b1\"\n\n--b1\nContent-Type: application/octet-stream; name=\"bad.bin\"\nContent-Transfer-Encoding: base64\n\n{a}*~\n {b}\n--b1\nContent-Type: text/plain\n\nlater part\n--b1--\n"
        ),
    )
}

fn mail_config(state: &Path, spool: &Path, clamd: &str, quarantine: &Path) -> String {
    format!(
        "{}[files]\nwatch = []\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[mail]\nenabled = true\nspool_path = {spool:?}\nclamd_socket = {clamd:?}\nquarantine_path = {q:?}\n",
        base_config(state),
        spool = spool.display().to_string(),
        q = quarantine.display().to_string(),
    )
}

fn start_daemon(dir: &Path, cfg: &str, env: &[(&str, &str)]) -> Daemon {
    let config = dir.join("svc.toml");
    std::fs::write(&config, cfg).unwrap();
    Daemon::start_with(dir.to_path_buf(), config, dir.join("state"), env)
}

/// The daemon on `exim`'s spool with `clamd`, quarantining into `qdir` (no other
/// collectors, no scheduled checks).
fn start_mail_daemon(dir: &Path, exim: &Exim, clamd: &Clamd, qdir: &Path) -> Daemon {
    let cfg = mail_config(
        &dir.join("state"),
        &exim.spool,
        &clamd.socket.display().to_string(),
        qdir,
    );
    start_daemon(dir, &cfg, &[])
}

fn quarantined(d: &Daemon) -> Vec<Value> {
    d.get("/api/v1/email/quarantine", ADMIN).expect(200).json()["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn findings(d: &Daemon) -> Vec<Value> {
    d.get("/api/v1/findings", READ).expect(200).json()["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn entry_for<'a>(items: &'a [Value], queue_id: &str) -> Option<&'a Value> {
    items.iter().find(|e| e["queue_id"] == queue_id)
}

fn post(d: &Daemon, path: &str, token: &str) -> Resp {
    let auth = format!("Bearer {token}");
    d.req(
        "POST",
        path,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        b"{}",
    )
}

/// (uid, gid, mode, mtime) of a file.
fn attrs(p: &Path) -> (u32, u32, u32, i64, i64) {
    let m = std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (
        m.uid(),
        m.gid(),
        m.mode() & 0o7777,
        m.mtime(),
        m.mtime_nsec(),
    )
}

#[test]
fn exim_spool_is_scanned_quarantined_and_released_across_filesystems() {
    let dir = temp_dir("mailav");
    let clamd = Clamd::start(&dir);
    let exim = Exim::new(&dir);
    let qfs = Tmpfs::mount(&dir.join("qfs"));
    let qdir = qfs.0.join("mail-quarantine");

    // Queued before the daemon starts, so the spool files' attributes are known.
    let clean = exim.inject(&attachment(
        "clean",
        "notes.txt",
        "text/plain",
        b"nothing to see",
    ));
    let plain = exim.inject(&message(
        "plain",
        &format!("Content-Type: text/plain\n\nhello {MARKER} bye\n"),
    ));
    let zipped = exim.inject(&attachment(
        "zipped",
        "invoice.zip",
        "application/zip",
        &zip_of("docs/invoice.exe", format!("MZ {MARKER}").as_bytes()),
    ));
    let targz = exim.inject(&attachment(
        "targz",
        "bundle.tar.gz",
        "application/gzip",
        &tar_gz_of(
            "inner/run.sh",
            format!("#!/bin/sh\n# {MARKER}\n").as_bytes(),
        ),
    ));
    let malformed = exim.inject(&malformed_b64("malformed"));
    let nested = exim.inject(&nested4("nested"));
    let bomb = exim.inject(&attachment(
        "bomb",
        "bomb.zip",
        "application/zip",
        &zip_bomb(),
    ));
    // Outbound (submitted locally) with credentials in a quoted-printable part.
    let creds = exim.inject(&message(
        "creds",
        "Content-Type: text/plain\nContent-Transfer-Encoding: quoted-printable\n\nNew account=\n\nUsername: bob\nPass=\nword: hunter22=3D\nsee http://203.0.113.9/login\n",
    ));
    let infected = [&plain, &zipped, &targz, &malformed, &nested];
    let before: Vec<_> = infected
        .iter()
        .map(|id| (attrs(&exim.file(id, "-H")), attrs(&exim.file(id, "-D"))))
        .collect();

    let d = start_mail_daemon(&dir, &exim, &clamd, &qdir);
    let items = wait_until(60, "five quarantined messages", || {
        let q = quarantined(&d);
        (q.iter().filter(|e| e["state"] == "quarantined").count() >= 5).then_some(q)
    });
    // Scanning the other two (clean, bomb) finishes too.
    let stats = wait_until(60, "eight messages scanned", || {
        let s = d.get("/api/v1/email/stats", READ).expect(200).json();
        (s["scanned"].as_u64() >= Some(8)).then_some(s)
    });
    assert_eq!(items.len(), 5, "{items:#?}");
    assert_eq!(stats["infected"], 5, "{stats}");
    assert_eq!(stats["quarantined"], 5, "{stats}");
    assert!(
        stats["incomplete"].as_u64() >= Some(2),
        "bomb and malformed base64: {stats}"
    );
    assert!(stats["since_start"]["engines"]["clamd"]["scanned"].as_u64() >= Some(7));
    assert!(stats["last_24h"].is_object(), "{stats}");

    for (i, id) in infected.iter().enumerate() {
        let e = entry_for(&items, id).unwrap_or_else(|| panic!("{id} quarantined: {items:#?}"));
        assert_eq!(e["state"], "quarantined");
        assert_eq!(e["sender"], "root@example.test");
        assert_eq!(e["recipients"][0], "rcpt@example.org");
        assert!(e["message_id"].as_str().unwrap().contains("@example.test"));
        assert!(e["quarantined_at"].as_str().unwrap().ends_with('Z'));
        let v = e["verdicts"].as_array().unwrap();
        assert!(
            v.iter()
                .any(|v| v["engine"] == "clamd"
                    && v["signature"].as_str().unwrap().contains(SIG_NAME)),
            "{e:#}"
        );
        assert!(!e["parts"].as_array().unwrap().is_empty());
        // Gone from the spool; the quarantine copy on the other filesystem keeps owner,
        // group, mode and mtime.
        assert!(!exim.file(id, "-H").exists() && !exim.file(id, "-D").exists());
        let qid = e["id"].as_str().unwrap();
        let qh = walk(&qdir.join(qid))
            .into_iter()
            .find(|p| p.file_name().is_some_and(|n| n == "H"))
            .expect("quarantined -H");
        assert_eq!(attrs(&qh), before[i].0, "{id} -H attributes in quarantine");
        assert!(!exim.lists(id), "exim no longer sees {id}");
    }
    // Archive members are named by sanitised base names beneath the attachment's name.
    let z = entry_for(&items, &zipped).unwrap();
    assert!(
        z["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["member"] == "invoice.zip/invoice.exe"),
        "{z:#}"
    );
    let t = entry_for(&items, &targz).unwrap();
    assert!(
        t["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["member"].as_str().is_some_and(|m| m.ends_with("/run.sh"))),
        "{t:#}"
    );
    // Clean and bomb stay in the spool; the bomb is reported, never inflated.
    for id in [&clean, &bomb] {
        assert!(exim.file(id, "-H").exists(), "{id} stays queued");
    }
    let fs = findings(&d);
    assert!(
        fs.iter().any(|f| f["check"] == "email_scan_incomplete"
            && f["details"].as_str().unwrap().contains(bomb.as_str())),
        "{fs:#?}"
    );
    let content: Vec<&Value> = fs
        .iter()
        .filter(|f| f["check"] == "email_content")
        .collect();
    assert!(
        content
            .iter()
            .any(|f| f["severity"] == "HIGH"
                && f["details"].as_str().unwrap().contains(creds.as_str())),
        "{content:#?}"
    );
    assert!(
        content
            .iter()
            .any(|f| f["details"].as_str().unwrap().contains("203.0.113.9")),
        "{content:#?}"
    );
    assert!(
        !format!("{content:?}").contains("hunter22"),
        "the secret is never reported"
    );
    assert!(exim.file(&creds, "-H").exists());
    assert!(fs.iter().any(|f| f["check"] == "email_malware"
        && f["details"].as_str().unwrap().contains("rcpt@example.org")));

    // Status: watcher active, clamd healthy with its version.
    let st = d.get("/api/v1/email/av/status", READ).expect(200).json();
    assert_eq!(st["active"], true, "{st:#}");
    assert_eq!(st["spool_path"], exim.spool.display().to_string());
    assert_eq!(st["engines"]["clamd"]["status"], "ok", "{st:#}");
    assert!(
        st["engines"]["signatures"]["rules"].as_u64() >= Some(20),
        "{st:#}"
    );
    assert!(
        st["engines"]["clamd"]["health"]["version"]["engine"]
            .as_str()
            .unwrap_or("")
            .contains("ClamAV"),
        "{st:#}"
    );
    assert!(
        st["watcher"]["watched_directories"].as_u64() >= Some(2),
        "{st:#}"
    );

    // Scopes and unknown ids.
    let qid_plain = entry_for(&items, &plain).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    d.get("/api/v1/email/quarantine", READ).expect(403);
    post(
        &d,
        &format!("/api/v1/email/quarantine/{qid_plain}/release"),
        READ,
    )
    .expect(403);
    post(&d, "/api/v1/email/quarantine/0123abcd/release", ADMIN).expect(404);
    post(&d, "/api/v1/email/quarantine/nothex!/delete", ADMIN).expect(404);

    // Release: back in the spool with the same owner, mode and mtime; Exim lists it; the
    // scanner does not quarantine it again.
    let r = post(
        &d,
        &format!("/api/v1/email/quarantine/{qid_plain}/release"),
        ADMIN,
    );
    r.expect(200);
    assert_eq!(r.json()["state"], "released");
    assert_eq!(attrs(&exim.file(&plain, "-H")), before[0].0);
    assert_eq!(attrs(&exim.file(&plain, "-D")), before[0].1);
    assert!(exim.lists(&plain));
    post(
        &d,
        &format!("/api/v1/email/quarantine/{qid_plain}/release"),
        ADMIN,
    )
    .expect(409);

    // Delete: the files are gone from both places.
    let qid_nested = entry_for(&items, &nested).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    post(
        &d,
        &format!("/api/v1/email/quarantine/{qid_nested}/delete"),
        ADMIN,
    )
    .expect(200);
    assert!(!qdir.join(&qid_nested).exists());
    assert!(!exim.file(&nested, "-H").exists());
    let left = quarantined(&d);
    assert_eq!(left.len(), 3, "{left:#?}");

    // A new message arriving while the daemon runs (a new hash directory possibly).
    let live = exim.inject(&message(
        "live",
        &format!("Content-Type: text/plain\n\n{MARKER}\n"),
    ));
    let e = wait_until(30, "the live message quarantined", || {
        entry_for(&quarantined(&d), &live).cloned()
    });
    // The CLI: list, status, delete (audited as cli).
    let out = d.cli(&["mail", "list", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["total"], 4, "{v:#}");
    let out = d.cli(&["mail", "status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("active") && text.contains("ClamAV"),
        "{text}"
    );
    let out = d.cli(&["mail", "delete", e["id"].as_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = d.cli(&["mail", "release", "ffff0000ffff0000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such quarantine entry"));
    // The released message was not taken again.
    assert!(exim.file(&plain, "-H").exists());
    let audit = d.get("/api/v1/audit", ADMIN).expect(200).json();
    assert!(
        audit["items"].as_array().unwrap().iter().any(|a| a["action"] == "email.quarantine.release" && a["target"] == qid_plain.as_str()),
        "{audit:#}"
    );
    drop(d);
    drop(qfs);
    drop(clamd);
}

/// Exim with `message_logs = false` keeps no `msglog/` directory: an EICAR message is
/// quarantined all the same (its `-H` and `-D` files), not left queued for delivery, and
/// release and delete work without a message log (issue 23 item 5).
#[test]
fn eicar_is_quarantined_from_a_spool_kept_without_message_logs() {
    let dir = temp_dir("mailav-nolog");
    let clamd = Clamd::start(&dir);
    let exim = Exim::with_options(&dir, "message_logs = false\n");
    let qdir = dir.join("mail-quarantine");
    let eicar = |subject: &str| {
        attachment(
            subject,
            "eicar.com",
            "application/octet-stream",
            EICAR.as_bytes(),
        )
    };
    let first = exim.inject(&eicar("eicar-one"));
    let second = exim.inject(&eicar("eicar-two"));
    let h0 = attrs(&exim.file(&first, "-H"));
    let d0 = attrs(&exim.file(&first, "-D"));
    assert!(
        !exim.spool.join("msglog").exists(),
        "Exim kept no message logs"
    );

    let d = start_mail_daemon(&dir, &exim, &clamd, &qdir);
    let items = wait_until(60, "both EICAR messages quarantined", || {
        let q = quarantined(&d);
        let done = [&first, &second]
            .iter()
            .all(|id| entry_for(&q, id).is_some_and(|e| e["state"] == "quarantined"));
        done.then_some(q)
    });
    for id in [&first, &second] {
        let e = entry_for(&items, id).unwrap();
        assert!(
            e["verdicts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["engine"] == "clamd"
                    && v["signature"].as_str().unwrap().contains(EICAR_SIG)),
            "{e:#}"
        );
        let roles: Vec<&str> = e["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["H", "D"], "{e:#}");
        assert!(!exim.file(id, "-H").exists() && !exim.file(id, "-D").exists());
        assert!(!exim.lists(id), "{id} is no longer queued for delivery");
    }
    let log = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(!log.contains("quarantine failed"), "{log}");

    // Release puts back -H and -D (same owner, mode and times) and makes no message log.
    let qid = entry_for(&items, &first).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = post(
        &d,
        &format!("/api/v1/email/quarantine/{qid}/release"),
        ADMIN,
    );
    r.expect(200);
    assert_eq!(r.json()["state"], "released");
    assert_eq!(attrs(&exim.file(&first, "-H")), h0);
    assert_eq!(attrs(&exim.file(&first, "-D")), d0);
    assert!(exim.lists(&first));
    assert!(!exim.spool.join("msglog").exists());
    assert!(!qdir.join(&qid).exists());

    // Delete removes the other one from the quarantine.
    let qid = entry_for(&items, &second).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    post(&d, &format!("/api/v1/email/quarantine/{qid}/delete"), ADMIN).expect(200);
    assert!(!qdir.join(&qid).exists());
    assert!(!exim.file(&second, "-H").exists() && !exim.lists(&second));
    assert!(quarantined(&d).is_empty());
    drop(d);
    drop(clamd);
}

/// SIGKILL in the middle of a quarantine and of a release (debug-build pause hook), then a
/// restart: each message is fully in the spool or fully in quarantine.
#[test]
fn sigkill_during_quarantine_and_release_loses_nothing() {
    let dir = temp_dir("mailav-kill");
    let clamd = Clamd::start(&dir);
    let exim = Exim::new(&dir);
    let qfs = Tmpfs::mount(&dir.join("qfs"));
    let qdir = qfs.0.join("mail-quarantine");
    let cfg = mail_config(
        &dir.join("state"),
        &exim.spool,
        &clamd.socket.display().to_string(),
        &qdir,
    );
    let id = exim.inject(&message(
        "kill",
        &format!("Content-Type: text/plain\n\n{MARKER}\n"),
    ));
    let (h0, d0) = (attrs(&exim.file(&id, "-H")), attrs(&exim.file(&id, "-D")));
    let pause = dir.join("pause");
    let pause_s = pause.display().to_string();
    let reached = |op: &str| PathBuf::from(format!("{pause_s}.{op}.reached"));

    let mut d = start_daemon(&dir, &cfg, &[("SVC_TEST_MAIL_PAUSE", &pause_s)]);
    wait_until(60, "quarantine paused after its first move", || {
        reached("quarantine").exists().then_some(())
    });
    // The header left first: the MTA no longer sees the message.
    assert!(!exim.file(&id, "-H").exists());
    d.kill9();
    let _ = std::fs::remove_file(reached("quarantine"));

    let mut d = start_daemon(&dir, &cfg, &[("SVC_TEST_MAIL_PAUSE", &pause_s)]);
    let e = wait_until(30, "the interrupted quarantine finished", || {
        quarantined(&d)
            .into_iter()
            .find(|e| e["queue_id"] == id.as_str() && e["state"] == "quarantined")
    });
    assert!(!exim.file(&id, "-H").exists() && !exim.file(&id, "-D").exists());
    let qid = e["id"].as_str().unwrap().to_string();
    let in_q = walk(&qdir.join(&qid));
    assert!(
        in_q.iter().any(|p| p.file_name().is_some_and(|n| n == "D")),
        "{in_q:?}"
    );

    // Release, killed after its first move (the body is back, the header not yet).
    {
        let (addr, cert) = (d.addr, d.cert());
        let path = format!("/api/v1/email/quarantine/{qid}/release");
        std::thread::spawn(move || {
            let auth = format!("Bearer {ADMIN}");
            let mut c = Client::connect(addr, cert);
            c.write_request("POST", &path, &[("Authorization", &auth)], b"{}");
        });
    }
    wait_until(30, "release paused after its first move", || {
        reached("release").exists().then_some(())
    });
    assert!(exim.file(&id, "-D").exists() && !exim.file(&id, "-H").exists());
    d.kill9();
    let _ = std::fs::remove_file(reached("release"));

    let d = start_daemon(&dir, &cfg, &[]);
    wait_until(30, "the interrupted release finished", || {
        (exim.file(&id, "-H").exists() && quarantined(&d).is_empty()).then_some(())
    });
    assert_eq!(attrs(&exim.file(&id, "-H")), h0);
    assert_eq!(attrs(&exim.file(&id, "-D")), d0);
    assert!(exim.lists(&id));
    assert!(walk(&qdir.join(&qid)).is_empty());
    // Scanned again after the restart, the released message stays in the spool.
    wait_until(30, "a sweep after the restart", || {
        let s = d.get("/api/v1/email/av/status", READ).expect(200).json();
        s["watcher"]["last_sweep"].is_string().then_some(())
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(exim.file(&id, "-H").exists());
    drop(d);
    drop(qfs);
    drop(clamd);
}

/// clamd unreachable: a WARNING finding and a condition on the row; mail keeps flowing.
#[test]
fn unreachable_clamd_fails_open_with_a_warning() {
    let dir = temp_dir("mailav-down");
    let exim = Exim::new(&dir);
    let id = exim.inject(&message(
        "down",
        &format!("Content-Type: text/plain\n\n{MARKER}\n"),
    ));
    let cfg = mail_config(
        &dir.join("state"),
        &exim.spool,
        &dir.join("no-clamd.sock").display().to_string(),
        &dir.join("q"),
    );
    let d = start_daemon(&dir, &cfg, &[]);
    let f = wait_until(30, "the clamd warning", || {
        findings(&d).into_iter().find(|f| {
            f["check"] == "email_av" && f["message"].as_str().unwrap().contains("clamd unreachable")
        })
    });
    assert_eq!(f["severity"], "WARNING");
    wait_until(30, "the message scanned", || {
        let s = d.get("/api/v1/email/stats", READ).expect(200).json();
        (s["scanned"].as_u64() >= Some(1)).then_some(())
    });
    let st = d.get("/api/v1/email/av/status", READ).expect(200).json();
    assert_eq!(st["engines"]["clamd"]["status"], "unreachable", "{st:#}");
    assert!(exim.file(&id, "-H").exists(), "mail keeps flowing");
    let status = d.get("/api/v1/status", READ).expect(200).json();
    let text = status.to_string();
    assert!(text.contains("email_av.scans"), "{text}");
}
