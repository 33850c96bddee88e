//! Fleet mode through the real binary against a real CrowdSec Local API (Debian's
//! `crowdsec` 1.4, extracted by `scripts/crowdsec-test.sh` into `/opt/crowdsec-test`; the
//! test starts `crowdsec -no-cs` itself with its SQLite database in the test directory).
//!
//! Two daemons in the two network namespaces of `tests/it/firewall.rs`, firewall on: A in
//! srv (192.0.2.1, watcher and bouncer), B in peer (192.0.2.2, bouncer). The LAPI listens
//! with TLS on 192.0.2.1 (a CA the test makes with openssl; both daemons verify it through
//! `fleet.ca_file`). A brute force in A's auth log becomes an alert in the LAPI, then a
//! block in B's nftables; `cscli decisions delete` removes it from B; a decision for B's
//! allow list is refused; the LAPI stopped and started again loses and duplicates nothing.
//!
//! Without the extracted LAPI the test prints why and skips; with `CI=true` it fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;
use crate::firewall::{post, require};

/// Where `scripts/crowdsec-test.sh` extracts the Debian packages.
pub(crate) const CROWDSEC_ROOT: &str = "/opt/crowdsec-test/root";
const BOUNCER_KEY: &str = "it-fleet-bouncer-key-4b9e21";
/// A's bouncer (each bouncer has its own key: the stream's deltas are per bouncer).
const BOUNCER_KEY_A: &str = "it-fleet-bouncer-key-a-90d2f3";
const MACHINE: &str = "svc-a";
const PASSWORD: &str = "it-fleet-password-77c1d3";

pub(crate) fn crowdsec_bin(name: &str) -> PathBuf {
    Path::new(CROWDSEC_ROOT).join("usr/bin").join(name)
}

/// The extracted binaries, or `None` after printing why (a failure under `CI=true`).
fn require_crowdsec() -> Option<()> {
    if crowdsec_bin("crowdsec").exists() && crowdsec_bin("cscli").exists() {
        return Some(());
    }
    let why = format!(
        "{} has no crowdsec and cscli (run scripts/crowdsec-test.sh)",
        CROWDSEC_ROOT
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("fleet tests need the CrowdSec LAPI: {why}");
    }
    eprintln!("skipping fleet test: {why}");
    None
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A CA and a server certificate for `ip` (openssl), as PEM files in `dir`.
fn make_certs(dir: &Path, ip: &str) {
    let p = |f: &str| dir.join(f).display().to_string();
    run(Command::new("openssl").args([
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=svc-it CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
        "-keyout",
        &p("ca.key"),
        "-out",
        &p("ca.pem"),
    ]));
    run(Command::new("openssl").args([
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=lapi",
        "-keyout",
        &p("lapi.key"),
        "-out",
        &p("lapi.csr"),
    ]));
    std::fs::write(
        dir.join("ext.cnf"),
        format!("subjectAltName=IP:{ip}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"),
    )
    .unwrap();
    run(Command::new("openssl").args([
        "x509",
        "-req",
        "-days",
        "2",
        "-in",
        &p("lapi.csr"),
        "-CA",
        &p("ca.pem"),
        "-CAkey",
        &p("ca.key"),
        "-CAcreateserial",
        "-extfile",
        &p("ext.cnf"),
        "-out",
        &p("lapi.pem"),
    ]));
}

/// A CrowdSec Local API process (`crowdsec -no-cs`), its configuration and database in `dir`.
pub(crate) struct Lapi {
    pub dir: PathBuf,
    pub url: String,
    config: PathBuf,
    child: Option<Child>,
}

impl Lapi {
    /// Writes the configuration (API only, no Central API, SQLite in `dir`, TLS when
    /// `tls`), registers nothing yet; not started.
    pub(crate) fn new(dir: &Path, listen: &str, tls: bool) -> Lapi {
        let d = dir.join("lapi");
        for sub in ["data", "hub", "notifications", "plugins"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        std::fs::write(d.join("hub/.index.json"), "{}").unwrap();
        std::fs::write(
            d.join("simulation.yaml"),
            "simulation: false\nexclusions: []\n",
        )
        .unwrap();
        std::fs::write(d.join("acquis.yaml"), "").unwrap();
        std::fs::write(
            d.join("profiles.yaml"),
            "name: default_ip_remediation\nfilters:\n - Alert.Remediation == true && Alert.GetScope() == \"Ip\"\ndecisions:\n - type: ban\n   duration: 4h\non_success: break\n",
        )
        .unwrap();
        let tls_block = if tls {
            format!(
                "    tls:\n      cert_file: {}\n      key_file: {}\n",
                dir.join("lapi.pem").display(),
                dir.join("lapi.key").display()
            )
        } else {
            String::new()
        };
        let p = |f: &str| d.join(f).display().to_string();
        let config = format!(
            "common:\n  daemonize: false\n  log_media: stdout\n  log_level: warning\n  working_dir: .\nconfig_paths:\n  config_dir: {dir}/\n  data_dir: {data}/\n  simulation_path: {sim}\n  hub_dir: {hub}/\n  index_path: {hub}/.index.json\n  notification_dir: {notif}/\n  plugin_dir: {plugins}/\ncrowdsec_service:\n  acquisition_path: {acquis}\ncscli:\n  output: human\ndb_config:\n  log_level: warning\n  type: sqlite\n  db_path: {data}/crowdsec.db\n  use_wal: true\napi:\n  client:\n    insecure_skip_verify: true\n    credentials_path: {creds}\n  server:\n    log_level: warning\n    listen_uri: {listen}\n{tls_block}    profiles_path: {profiles}\n    online_client:\n    trusted_ips:\n      - 127.0.0.1\n      - 192.0.2.0/24\nprometheus:\n  enabled: false\n",
            dir = d.display(),
            data = p("data"),
            sim = p("simulation.yaml"),
            hub = p("hub"),
            notif = p("notifications"),
            plugins = p("plugins"),
            acquis = p("acquis.yaml"),
            creds = p("local_api_credentials.yaml"),
            profiles = p("profiles.yaml"),
        );
        let config_path = d.join("config.yaml");
        std::fs::write(&config_path, config).unwrap();
        let scheme = if tls { "https" } else { "http" };
        Lapi {
            dir: d,
            url: format!("{scheme}://{listen}"),
            config: config_path,
            child: None,
        }
    }

    /// `cscli -c CONFIG args...`; its standard output.
    pub(crate) fn cscli(&self, args: &[&str]) -> String {
        run(Command::new(crowdsec_bin("cscli"))
            .arg("-c")
            .arg(&self.config)
            .args(args))
    }

    /// Registers a watcher, a bouncer, and cscli's own machine (for decisions and alerts).
    pub(crate) fn register(&self, machine: &str, password: &str, bouncer: &str, key: &str) {
        let creds = self.dir.join("machine.yaml").display().to_string();
        self.cscli(&[
            "machines",
            "add",
            machine,
            "--password",
            password,
            "-f",
            &creds,
        ]);
        self.cscli(&["bouncers", "add", bouncer, "-k", key]);
        self.cscli(&[
            "bouncers",
            "add",
            &format!("{bouncer}-a"),
            "-k",
            BOUNCER_KEY_A,
        ]);
        self.cscli(&[
            "machines",
            "add",
            "cscli-it",
            "--password",
            "cscli-it-password-1",
            "-f",
            &creds,
        ]);
        std::fs::write(
            self.dir.join("local_api_credentials.yaml"),
            format!(
                "url: {}\nlogin: cscli-it\npassword: cscli-it-password-1\n",
                self.url
            ),
        )
        .unwrap();
    }

    /// Starts the API and waits until it answers.
    pub(crate) fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("lapi.log"))
            .unwrap();
        let child = Command::new(crowdsec_bin("crowdsec"))
            .arg("-c")
            .arg(&self.config)
            .arg("-no-cs")
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        self.child = Some(child);
        let addr: std::net::SocketAddr = self.url.split("://").nth(1).unwrap().parse().unwrap();
        wait_until(30, "the LAPI listening", || {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200))
                .ok()
                .map(|_| ())
        });
    }

    /// SIGTERM and wait.
    pub(crate) fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(c.id().to_string())
                .status();
            let deadline = Instant::now() + Duration::from_secs(20);
            while c.try_wait().unwrap().is_none() {
                if Instant::now() > deadline {
                    let _ = c.kill();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// The alerts the LAPI holds (`cscli alerts list -o json`).
    pub(crate) fn alerts(&self) -> Vec<Value> {
        let out = self.cscli(&["alerts", "list", "-o", "json", "-l", "0"]);
        serde_json::from_str::<Value>(&out)
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
    }
}

impl Drop for Lapi {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A free TCP port on `ip` (in the calling thread's namespace).
fn free_port(ip: &str) -> u16 {
    std::net::TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn ssh_failures(ip: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("Nov 21 10:00:{i:02} web1 sshd[{}]: Failed password for root from {ip} port {} ssh2", 4000 + i, 50000 + i))
        .collect()
}

fn fleet(d: &Daemon) -> Value {
    d.get("/api/v1/fleet", READ).expect(200).json()
}

fn alerts_for(lapi: &Lapi, ip: &str) -> Vec<Value> {
    lapi.alerts()
        .into_iter()
        .filter(|a| a["source"]["value"] == ip && a["scenario"] == "svc/ssh_bruteforce")
        .collect()
}

fn blocked(d: &Daemon, ip: &str) -> bool {
    d.get(&format!("/api/v1/firewall/check?ip={ip}"), ADMIN)
        .json()["blocked"]
        == true
}

#[test]
fn a_brute_force_on_one_server_blocks_it_on_the_other_through_the_lapi() {
    let Some(()) = require_crowdsec() else { return };
    let Some(net) = require("fleet") else { return };
    // srv: the LAPI and daemon A; the calling thread stays in srv.
    net.enter_srv();
    let dir = temp_dir("fleet-lapi");
    make_certs(&dir, "192.0.2.1");
    let port = free_port("192.0.2.1");
    let mut lapi = Lapi::new(&dir, &format!("192.0.2.1:{port}"), true);
    lapi.register(MACHINE, PASSWORD, "svc-b", BOUNCER_KEY);
    lapi.start();
    let ca = dir.join("ca.pem").display().to_string();
    let fleet_cfg = |login: bool| {
        let key = if login { BOUNCER_KEY_A } else { BOUNCER_KEY };
        let mut s = format!(
            "[fleet]\nlapi_url = {:?}\nca_file = {ca:?}\nbouncer_key = {key:?}\npoll_seconds = 1\n",
            lapi.url
        );
        if login {
            s += &format!("machine_id = {MACHINE:?}\npassword = {PASSWORD:?}\n");
        }
        s
    };

    // A: an auth log, automatic blocks that take effect, watcher and bouncer.
    let log = dir.join("auth.log");
    std::fs::write(
        &log,
        "Nov 21 00:00:00 host sshd[1]: Server listening on 0.0.0.0 port 22.\n",
    )
    .unwrap();
    let a = net.daemon(
        "fleet-a",
        "",
        &format!(
            "[logs]\nauth = [{:?}]\n[files]\nwatch = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[thresholds]\nauth_failures = 5\n[auto_response]\ndry_run = false\n{}",
            log.display().to_string(),
            fleet_cfg(true)
        ),
    );
    // B: bouncer only, in peer.
    let b = net.peer_daemon(
        "fleet-b",
        &format!("[files]\nwatch = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[auto_response]\ndry_run = false\n{}", fleet_cfg(false)),
    );
    wait_until(30, "both bouncers polling", || {
        (fleet(&a)["lapi"]["connected"] == true && fleet(&b)["lapi"]["connected"] == true)
            .then_some(())
    });
    let row = &b.get("/api/v1/status", READ).json()["queues"];
    assert_eq!(row["central.actions"]["capacity"], 1024, "{row}");
    assert_eq!(row["fleet.lapi"]["status"], "ok", "{row}");

    // 1. A brute force against A: blocked there, an alert in the LAPI, a block in B's
    //    nftables within 15 s.
    append_lines(&log, &ssh_failures("203.0.113.10", 8));
    wait_until(30, "A's automatic block", || {
        blocked(&a, "203.0.113.10").then_some(())
    });
    let t0 = Instant::now();
    wait_until(15, "the block in B's nftables", || {
        net.peer_set("block4")
            .contains("203.0.113.10")
            .then_some(())
    });
    eprintln!(
        "fleet: A's block reached B's nftables in {:?}",
        t0.elapsed()
    );
    let al = wait_until(15, "the alert in the LAPI", || {
        let v = alerts_for(&lapi, "203.0.113.10");
        (!v.is_empty()).then_some(v)
    });
    assert_eq!(al.len(), 1, "{al:?}");
    assert_eq!(al[0]["machine_id"], MACHINE);
    assert!(
        al[0]["message"].as_str().unwrap().starts_with("svc on "),
        "{}",
        al[0]
    );
    assert_eq!(al[0]["decisions"][0]["type"], "ban");
    let listed = b.get("/api/v1/blocked-ips", READ).json();
    let item = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["ip"] == "203.0.113.10")
        .cloned()
        .unwrap();
    assert_eq!(item["source"], "fleet", "{item}");
    assert!(
        item["reason"]
            .as_str()
            .unwrap()
            .starts_with("fleet: svc/ssh_bruteforce"),
        "{item}"
    );
    let v = b
        .get("/api/v1/threat/ip?ip=203.0.113.10", ADMIN)
        .expect(200)
        .json();
    let src = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "fleet")
        .cloned()
        .unwrap();
    assert_eq!(src["score"], 100, "{src}");
    // A's own bouncer sees the decision of its alert: left as it is, never pushed back.
    wait_until(15, "A applying its own decision", || {
        (fleet(&a)["decisions"]["applied"].as_u64() >= Some(1)).then_some(())
    });
    assert_eq!(fleet(&a)["alerts"]["sent"], 1);

    // 2. `cscli decisions delete` removes it from B (A's local block stays).
    lapi.cscli(&["decisions", "delete", "-i", "203.0.113.10"]);
    wait_until(15, "the block gone from B's nftables", || {
        (!net.peer_set("block4").contains("203.0.113.10")).then_some(())
    });
    assert!(blocked(&a, "203.0.113.10"), "A's own block stays");
    assert_eq!(fleet(&b)["decisions"]["unblocked"], 1);

    // 3. A decision for an address on B's allow list is refused and counted; another type
    //    (captcha) is skipped and counted.
    post(
        &b,
        "/api/v1/firewall/allow-ip",
        ADMIN,
        json!({"ip": "198.51.100.77", "reason": "partner"}),
    )
    .expect(200);
    lapi.cscli(&[
        "decisions",
        "add",
        "-i",
        "198.51.100.77",
        "-d",
        "2h",
        "-R",
        "it",
    ]);
    lapi.cscli(&[
        "decisions",
        "add",
        "-i",
        "198.51.100.78",
        "-t",
        "captcha",
        "-d",
        "2h",
        "-R",
        "it",
    ]);
    let f = wait_until(15, "the refusal", || {
        let f = fleet(&b);
        (f["decisions"]["refused_by"]["allowed"] == 1 && f["decisions"]["skipped_by"]["type"] == 1)
            .then_some(f)
    });
    let set = net.peer_set("block4");
    assert!(
        !set.contains("198.51.100.77") && !set.contains("198.51.100.78"),
        "{f}"
    );

    // 4. The LAPI stops: B keeps its blocks; a brute force against A waits in A's spool.
    lapi.cscli(&[
        "decisions",
        "add",
        "-i",
        "203.0.113.20",
        "-d",
        "2h",
        "-R",
        "it",
    ]);
    wait_until(15, "B's block of 203.0.113.20", || {
        net.peer_set("block4")
            .contains("203.0.113.20")
            .then_some(())
    });
    lapi.stop();
    append_lines(&log, &ssh_failures("203.0.113.11", 8));
    wait_until(30, "A's second automatic block", || {
        blocked(&a, "203.0.113.11").then_some(())
    });
    wait_until(30, "a failed push and a failed poll", || {
        let fa = fleet(&a);
        let fb = fleet(&b);
        (fa["alerts"]["failed_attempts"].as_u64() >= Some(1)
            && fa["alerts"]["pending"] == 1
            && fb["lapi"]["connected"] == false)
            .then_some(())
    });
    assert!(
        net.peer_set("block4").contains("203.0.113.20"),
        "local protection unchanged"
    );
    let q = &b.get("/api/v1/status", READ).json()["queues"]["fleet.lapi"];
    assert!(
        q["conditions"]
            .as_array()
            .unwrap()
            .contains(&json!("source_io")),
        "{q}"
    );

    // 5. Started again: the spool drains, B applies it, nothing is lost or duplicated.
    lapi.start();
    wait_until(60, "the spooled alert in the LAPI", || {
        (!alerts_for(&lapi, "203.0.113.11").is_empty()).then_some(())
    });
    wait_until(15, "the block in B's nftables after the outage", || {
        net.peer_set("block4")
            .contains("203.0.113.11")
            .then_some(())
    });
    wait_until(15, "an empty spool", || {
        (fleet(&a)["alerts"]["pending"] == 0).then_some(())
    });
    for ip in ["203.0.113.10", "203.0.113.11"] {
        assert_eq!(alerts_for(&lapi, ip).len(), 1, "{ip}");
    }
    let fa = fleet(&a);
    assert_eq!(fa["alerts"]["sent"], 2, "{fa}");
    assert_eq!(fa["alerts"]["rejected"], 0, "{fa}");
    assert!(
        fleet(&b)["lapi"]["connected"] == true || fleet(&b)["lapi"]["failures"].as_u64() >= Some(1)
    );

    // Metrics, CLI, and no secret anywhere.
    let m = b.get("/metrics", METRICS).expect(200).text();
    // Counted again by the full list read after the outage: at least once.
    let refused: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("svc_fleet_decisions_refused_total{reason=\"allowed\"} "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(refused >= 1, "{m}");
    assert!(m.contains("svc_fleet_lapi_up "), "{m}");
    let out = b.cli(&["fleet", "status"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("refused"), "{text}");
    let settings = a.get("/api/v1/settings/fleet", ADMIN).json();
    let mut a = a;
    let mut b = b;
    assert_eq!(a.stop(), 0);
    assert_eq!(b.stop(), 0);
    lapi.stop();
    for d in [&a, &b] {
        let logs = format!("{}{}", d.stderr(), d.stdout().join("\n"));
        assert!(!logs.contains(BOUNCER_KEY) && !logs.contains(BOUNCER_KEY_A));
        assert!(!logs.contains(PASSWORD));
    }
    let s = settings.to_string();
    assert!(!s.contains(BOUNCER_KEY) && !s.contains(PASSWORD), "{s}");
    let _ = std::fs::remove_dir_all(dir);
}
