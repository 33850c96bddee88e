//! The mail-log reader through the real binary, fed by a real Exim (Debian's exim4) on
//! loopback: an authenticated login sending as a domain it does not own shows up in
//! `/api/v1/email/relay-abuse` and as a `mail_per_account` finding, messages are grouped by
//! account in `/api/v1/email/groups`, and the date-range rules of `/history` apply.
//!
//! Exim runs with its own configuration in the test's directory (loopback only, a port the
//! test picked, `queue_only` so nothing leaves the host) and is stopped by its pid when the
//! test ends, also on failure. Without exim4 the test is skipped locally and fails in CI.

use crate::common::*;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;

const EXIM: &str = "/usr/sbin/exim4";

struct Exim {
    pidfile: PathBuf,
    port: u16,
}

impl Exim {
    fn start(dir: &Path) -> Option<Exim> {
        if !Path::new(EXIM).exists() {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "exim4 is required in CI (exim4-daemon-light)"
            );
            eprintln!("skipping: {EXIM} not installed");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        for d in ["log", "spool"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        // The reader attaches to the log before Exim writes to it.
        std::fs::write(dir.join("log/mainlog"), "").unwrap();
        let conf = dir.join("exim.conf");
        std::fs::write(
            &conf,
            format!(
                "primary_hostname = mail.example.com
log_file_path = {d}/log/%slog
spool_directory = {d}/spool
exim_user = root
exim_group = root
never_users =
daemon_smtp_ports = {port}
local_interfaces = 127.0.0.1
queue_only = true
tls_advertise_hosts =
domainlist local_domains = example.com
acl_smtp_rcpt = acl_check_rcpt
auth_advertise_hosts = *
begin acl
acl_check_rcpt:
  accept authenticated = *
  accept domains = +local_domains
  deny message = relay not permitted
begin routers
local:
  driver = accept
  domains = +local_domains
  transport = local_file
begin transports
local_file:
  driver = appendfile
  file = {d}/mbox
  user = root
begin authenticators
plain:
  driver = plaintext
  public_name = PLAIN
  server_condition = ${{if eq{{$auth3}}{{secret}}}}
  server_set_id = $auth2
",
                d = dir.display()
            ),
        )
        .unwrap();
        let pidfile = dir.join("exim.pid");
        // Exim forks its daemon and the command returns; its output goes to its own logs.
        let status = Command::new(EXIM)
            .arg("-C")
            .arg(&conf)
            .args(["-bd", "-oP"])
            .arg(&pidfile)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "exim did not start: {}", dir.display());
        let exim = Exim { pidfile, port };
        wait_until(10, "exim listening", || {
            TcpStream::connect(("127.0.0.1", port)).ok()
        });
        Some(exim)
    }

    fn send(&self, auth: Option<(&str, &str)>, from: &str, to: &str) -> String {
        let s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut w = s;
        let reply = |r: &mut BufReader<TcpStream>| {
            let mut all = String::new();
            loop {
                let mut l = String::new();
                r.read_line(&mut l).unwrap();
                all.push_str(&l);
                if l.len() < 4 || l.as_bytes()[3] != b'-' {
                    return all;
                }
            }
        };
        reply(&mut r);
        let cmd = |w: &mut TcpStream, r: &mut BufReader<TcpStream>, c: &str| {
            w.write_all(format!("{c}\r\n").as_bytes()).unwrap();
            reply(r)
        };
        cmd(&mut w, &mut r, "EHLO client.example.net");
        if let Some((user, pass)) = auth {
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("\0{user}\0{pass}"));
            let a = cmd(&mut w, &mut r, &format!("AUTH PLAIN {token}"));
            assert!(a.starts_with("235"), "{a}");
        }
        let mail = cmd(&mut w, &mut r, &format!("MAIL FROM:<{from}>"));
        assert!(mail.starts_with("250"), "{mail}");
        let rcpt = cmd(&mut w, &mut r, &format!("RCPT TO:<{to}>"));
        assert!(rcpt.starts_with("250"), "{rcpt}");
        cmd(&mut w, &mut r, "DATA");
        let done = cmd(&mut w, &mut r, "Subject: t\r\n\r\nhello\r\n.");
        cmd(&mut w, &mut r, "QUIT");
        done
    }
}

impl Drop for Exim {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.pidfile) {
            if let Ok(pid) = pid.trim().parse::<i32>() {
                let _ = Command::new("kill").arg(pid.to_string()).status();
            }
        }
    }
}

#[test]
fn live_exim_relay_abuse_and_groups() {
    let dir = temp_dir("mail-exim");
    let Some(exim) = Exim::start(&dir) else {
        return;
    };
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let extra = format!(
        "[logs]\nauth = []\nmail = [{log:?}]\n[files]\nwatch = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n",
        log = dir.join("log/mainlog").display().to_string()
    );
    std::fs::write(&config, format!("{}{extra}", base_config(&state))).unwrap();
    let d = Daemon::start_with(dir.clone(), config, state, &[]);
    let status = d.get("/api/v1/status", READ).expect(200).json();
    let queues = status["queues"].to_string();
    assert!(
        queues.contains("mail.file_source") && queues.contains("mail.delivery"),
        "{queues}"
    );

    let ok = exim.send(
        Some(("alice@example.com", "secret")),
        "alice@example.com",
        "bob@example.org",
    );
    assert!(ok.starts_with("250"), "{ok}");
    let ok = exim.send(
        Some(("alice@example.com", "secret")),
        "ceo@bank.example",
        "victim@example.org",
    );
    assert!(ok.starts_with("250"), "{ok}");
    exim.send(None, "x@example.org", "user@example.com");

    let abuse = wait_until(30, "relay abuse listed", || {
        let v = d.get("/api/v1/email/relay-abuse", READ).expect(200).json();
        (v["total"] == 1).then_some(v)
    });
    let item = &abuse["items"][0];
    assert_eq!(item["kind"], "foreign_domain");
    assert_eq!(item["auth_user"], "alice@example.com");
    assert_eq!(item["sender_domain"], "bank.example");
    assert_eq!(item["messages"], 1);
    assert_eq!(
        (abuse["offset"].as_u64(), abuse["limit"].as_u64()),
        (Some(0), Some(100))
    );
    assert_eq!(abuse["truncated"], false);

    let groups = wait_until(30, "three messages grouped", || {
        let v = d
            .get("/api/v1/email/groups?by=account", READ)
            .expect(200)
            .json();
        let n: i64 = v["items"]
            .as_array()?
            .iter()
            .map(|g| g["messages"].as_i64().unwrap_or(0))
            .sum();
        (n == 3).then_some(v)
    });
    let alice = groups["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["key"] == "alice@example.com")
        .unwrap();
    assert_eq!(alice["messages"], 2);
    assert_eq!(alice["relay_mismatches"], 1);
    // Direct SMTP egress beside the MTA's outbound count (none here: Exim sent it all).
    assert_eq!(alice["direct_smtp_egress"], 0);
    let by_sender = d.get("/api/v1/email/groups", READ).expect(200).json();
    assert!(by_sender["items"][0].get("direct_smtp_egress").is_none());

    let findings = wait_until(30, "mail_per_account finding", || {
        let v = d.get("/api/v1/findings", READ).expect(200).json();
        let s = v.to_string();
        s.contains("sent as bank.example").then_some(s)
    });
    assert!(findings.contains("mail_per_account"), "{findings}");

    // Date ranges exactly as /history: a date range that excludes today is empty, bad
    // bounds are 400 naming the parameter.
    let v = d
        .get("/api/v1/email/groups?from=2001-01-01&to=2001-01-02", READ)
        .expect(200)
        .json();
    assert_eq!(
        (v["total"].as_u64(), v["items"].as_array().map(Vec::len)),
        (Some(0), Some(0))
    );
    let e = d
        .get("/api/v1/email/relay-abuse?from=yesterday", READ)
        .expect(400)
        .json();
    assert_eq!(e["param"], "from");
    let e = d
        .get("/api/v1/email/groups?by=planet", READ)
        .expect(400)
        .json();
    assert_eq!(e["param"], "by");
    let f = d.get("/api/v1/email/forwarders", READ).expect(200).json();
    assert_eq!(f["summary"]["forwarders"], 0);
    assert_eq!(f["items"], serde_json::json!([]));
    // The queue listing (the host's Exim, `exim -bp`, taken at start): composition with a
    // summary. The log path names Exim, so the sampler lists Exim's queue.
    let qc = wait_until(30, "a queue listing", || {
        let v = d
            .get("/api/v1/email/queue-composition", READ)
            .expect(200)
            .json();
        (!v["summary"].is_null()).then_some(v)
    });
    assert_eq!(qc["summary"]["mta"], "exim");
    assert!(
        qc["summary"]["size"].is_i64() && qc["items"].is_array(),
        "{qc}"
    );
    let caps = d.get("/api/v1/capabilities", READ).expect(200).json();
    assert!(caps.to_string().contains("mail.queue.composition.v1"));
    // Without a token: refused.
    d.get("/api/v1/email/groups", "").expect(401);
}

const JOURNAL_REMOTE: &str = "/lib/systemd/systemd-journal-remote";

/// Writes a journal file into `dir` from (identifier, message) entries stamped now, with
/// Debian's systemd-journal-remote (export format in, journal file out; no systemd needed).
fn journal_file(dir: &Path, name: &str, entries: &[(&str, &str)]) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros();
    let mut export = String::new();
    for (i, (ident, msg)) in entries.iter().enumerate() {
        let t = now + i as u128;
        export.push_str(&format!(
            "__REALTIME_TIMESTAMP={t}\n__MONOTONIC_TIMESTAMP={t}\n_BOOT_ID=0123456789abcdef0123456789abcdef\nSYSLOG_FACILITY=2\nSYSLOG_IDENTIFIER={ident}\n_PID={}\n_HOSTNAME=mail\nMESSAGE={msg}\n\n",
            2000 + i
        ));
    }
    let stage = dir.parent().unwrap().join(format!("{name}.export"));
    std::fs::write(&stage, export).unwrap();
    let staged = dir.parent().unwrap().join(format!("{name}.journal"));
    let out = Command::new(JOURNAL_REMOTE)
        .arg(format!("--output={}", staged.display()))
        .arg(&stage)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Moved in whole, so journalctl's watch sees a complete file appear.
    std::fs::rename(&staged, dir.join(format!("{name}.journal"))).unwrap();
}

/// Without a mail log file the reader follows the systemd journal (`journalctl -o json -f`
/// on the journal directory under `checks.root`): Postfix entries written to the journal
/// become a relay-abuse item, and status shows `mail.journal_source` instead of
/// `mail.file_source`.
#[test]
fn journal_source_when_there_is_no_mail_log_file() {
    for tool in ["/usr/bin/journalctl", JOURNAL_REMOTE] {
        if !Path::new(tool).exists() {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "{tool} is required in CI (systemd, systemd-journal-remote)"
            );
            eprintln!("skipping: {tool} not installed");
            return;
        }
    }
    let dir = temp_dir("mail-journal");
    let root = dir.join("fixture");
    let jdir = root.join("var/log/journal");
    std::fs::create_dir_all(&jdir).unwrap();
    journal_file(&jdir, "boot", &[("kernel", "booted")]);
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        format!(
            "{}[logs]\nauth = []\n[files]\nwatch = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\nroot = {root:?}\n",
            base_config(&state),
            root = root.display().to_string()
        ),
    )
    .unwrap();
    let d = Daemon::start_with(dir.clone(), config, state, &[]);
    let row = wait_until(20, "mail.journal_source attached", || {
        let s = d.get("/api/v1/status", READ).expect(200).json();
        s["queues"].get("mail.journal_source").cloned()
    });
    assert_eq!(row["depth_unavailable"], true, "{row}");
    assert_eq!(row["capacity_unavailable"], true, "{row}");
    let s = d.get("/api/v1/status", READ).expect(200).json();
    assert!(s["queues"].get("mail.file_source").is_none());
    assert!(s["queues"].get("mail.delivery").is_some());
    // Direct SMTP egress sampling runs beside the reader: its reverse-DNS row is there.
    assert_eq!(s["queues"]["smtp_rdns.resolves"]["capacity"], 64);
    // journalctl sets up its watch after it starts.
    std::thread::sleep(std::time::Duration::from_secs(1));
    journal_file(
        &jdir,
        "mail",
        &[
            ("postfix/smtpd", "4ChQ1g3Rmtz9tXm: client=unknown[203.0.113.5], sasl_method=LOGIN, sasl_username=alice@example.com"),
            ("postfix/qmgr", "4ChQ1g3Rmtz9tXm: from=<ceo@bank.example>, size=700, nrcpt=1 (queue active)"),
            ("postfix/smtp", "4ChQ1g3Rmtz9tXm: to=<victim@example.org>, relay=mx.example.org[198.51.100.7]:25, delay=0.5, delays=0.1/0/0.2/0.2, dsn=2.0.0, status=sent (250 2.0.0 Ok)"),
            ("sshd", "Accepted password for root from 203.0.113.5"),
        ],
    );
    let abuse = wait_until(30, "relay abuse from the journal", || {
        let v = d.get("/api/v1/email/relay-abuse", READ).expect(200).json();
        (v["total"] == 1).then_some(v)
    });
    assert_eq!(abuse["items"][0]["auth_user"], "alice@example.com");
    assert_eq!(abuse["items"][0]["sender_domain"], "bank.example");
}
