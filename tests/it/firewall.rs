//! The firewall through the real binary, with real nftables inside network namespaces each
//! test creates: `srv` (the daemon, which only ever sees that namespace's ruleset) and
//! `peer` (the other end of a veth pair). Addresses: srv 192.0.2.1 and 198.51.100.1, peer
//! 192.0.2.2 and 198.51.100.2; connecting to one of srv's addresses picks peer's address of
//! the same range as the source.
//!
//! Without root or namespace support the tests print why and skip; with `CI=true` they
//! fail instead. Namespaces are deleted when a test ends, also when it fails.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;

static COUNTER: AtomicU32 = AtomicU32::new(0);
const PORT: u16 = 8080;

fn sh(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// One network namespace, deleted on drop.
struct Ns {
    name: String,
}

impl Ns {
    fn new(name: String) -> Result<Ns, String> {
        sh("ip", &["netns", "add", &name])?;
        let ns = Ns { name };
        sh("ip", &["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    fn enter(&self) {
        let f = std::fs::File::open(format!("/run/netns/{}", self.name)).unwrap();
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
    }

    fn nft(&self, args: &[&str]) -> String {
        self.try_nft(args).unwrap()
    }

    fn try_nft(&self, args: &[&str]) -> Result<String, String> {
        let mut full = vec!["netns", "exec", &self.name, "nft"];
        full.extend_from_slice(args);
        sh("ip", &full)
    }

    fn nft_script(&self, script: &str) {
        use std::io::Write;
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, "nft", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = sh("ip", &["netns", "del", &self.name]);
    }
}

/// The two namespaces joined by a veth pair, and a TCP listener on srv port 8080.
pub(crate) struct Net {
    srv: Ns,
    peer: Ns,
    stop: Arc<AtomicBool>,
}

fn setup(tag: &str) -> Result<Net, String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("not running as root".into());
    }
    sh("nft", &["--version"]).map_err(|e| format!("nft is not installed ({e})"))?;
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let id = format!("{}-{}-{n}", std::process::id(), tag);
    let srv = Ns::new(format!("svcit-s-{id}"))?;
    let peer = Ns::new(format!("svcit-p-{id}"))?;
    sh(
        "ip",
        &[
            "-n", &srv.name, "link", "add", "v0", "type", "veth", "peer", "name", "v1", "netns",
            &peer.name,
        ],
    )?;
    for (ns, dev, addrs) in [
        (&srv, "v0", ["192.0.2.1/24", "198.51.100.1/24"]),
        (&peer, "v1", ["192.0.2.2/24", "198.51.100.2/24"]),
    ] {
        for a in addrs {
            sh("ip", &["-n", &ns.name, "addr", "add", a, "dev", dev])?;
        }
        sh("ip", &["-n", &ns.name, "link", "set", dev, "up"])?;
    }
    let net = Net {
        srv,
        peer,
        stop: Arc::new(AtomicBool::new(false)),
    };
    // The listener lives in srv.
    let (tx, rx) = std::sync::mpsc::channel();
    let srv_name = net.srv.name.clone();
    let stop = net.stop.clone();
    std::thread::spawn(move || {
        let f = std::fs::File::open(format!("/run/netns/{srv_name}")).unwrap();
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let l = TcpListener::bind(("0.0.0.0", PORT)).unwrap();
        l.set_nonblocking(true).unwrap();
        tx.send(()).unwrap();
        let mut held = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            match l.accept() {
                Ok((s, _)) => held.push(s),
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(5))
        .map_err(|_| "listener did not start".to_string())?;
    // Addresses need a moment (duplicate address detection is off for IPv4).
    Ok(net)
}

/// The namespaces, or `None` after printing why (a failure under `CI=true`).
pub(crate) fn require(tag: &str) -> Option<Net> {
    match setup(tag) {
        Ok(n) => Some(n),
        Err(why) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("firewall tests need root and network namespaces: {why}");
            }
            eprintln!("skipping firewall test: {why}");
            None
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl Net {
    /// Whether a TCP connection from peer to `dst` port 8080 opens within a second.
    pub(crate) fn connects(&self, dst: &str) -> bool {
        let peer = self.peer.name.clone();
        let addr: SocketAddr = format!("{dst}:{PORT}").parse().unwrap();
        std::thread::spawn(move || {
            let f = std::fs::File::open(format!("/run/netns/{peer}")).unwrap();
            nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
        })
        .join()
        .unwrap()
    }

    /// Opens `n` connections from peer and keeps them; returns how many opened.
    fn hold(&self, dst: &str, n: usize) -> (usize, Vec<TcpStream>) {
        self.hold_port(dst, PORT, n)
    }

    /// [`Net::hold`] to another port of srv.
    fn hold_port(&self, dst: &str, port: u16, n: usize) -> (usize, Vec<TcpStream>) {
        let peer = self.peer.name.clone();
        let addr: SocketAddr = format!("{dst}:{port}").parse().unwrap();
        std::thread::spawn(move || {
            let f = std::fs::File::open(format!("/run/netns/{peer}")).unwrap();
            nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            let mut kept = Vec::new();
            for _ in 0..n {
                if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(700)) {
                    kept.push(s);
                }
            }
            (kept.len(), kept)
        })
        .join()
        .unwrap()
    }

    /// Starts the daemon inside srv with the firewall on and `extra` `[firewall]` keys.
    /// The calling thread stays in srv so it can reach the daemon's loopback listener.
    pub(crate) fn daemon(&self, tag: &str, firewall: &str, more: &str) -> Daemon {
        self.daemon_on(tag, "127.0.0.1:0", firewall, more)
    }

    /// [`Net::daemon`] with the API listening on `listen` (in srv).
    pub(crate) fn daemon_on(&self, tag: &str, listen: &str, firewall: &str, more: &str) -> Daemon {
        self.srv.enter();
        let (dir, config, state) = firewall_daemon_files(tag, listen, firewall, more);
        Daemon::start_with(dir, config, state, &[])
    }

    /// Runs `f` on a thread inside the peer's namespace (its addresses are 192.0.2.2 and
    /// 198.51.100.2; the daemon's side is 192.0.2.1 and 198.51.100.1).
    pub(crate) fn in_peer<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let peer = self.peer.name.clone();
        std::thread::spawn(move || {
            let f2 = std::fs::File::open(format!("/run/netns/{peer}")).unwrap();
            nix::sched::setns(f2.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            f()
        })
        .join()
        .unwrap()
    }

    /// Moves the calling thread into srv: servers it then binds on loopback are the
    /// daemon's loopback (a report collector).
    pub(crate) fn enter_srv(&self) {
        self.srv.enter();
    }

    pub(crate) fn set(&self, name: &str) -> String {
        self.srv.nft(&["list", "set", "inet", "svc", name])
    }

    /// [`Net::set`] in peer (a second daemon runs there: [`Net::peer_daemon`]).
    pub(crate) fn peer_set(&self, name: &str) -> String {
        self.peer.nft(&["list", "set", "inet", "svc", name])
    }

    /// Starts a second daemon inside peer with the firewall on, its API on 192.0.2.2 (so
    /// the calling thread, in srv, reaches it over the veth pair).
    pub(crate) fn peer_daemon(&self, tag: &str, more: &str) -> Daemon {
        let (dir, config, state) = firewall_daemon_files(tag, "192.0.2.2:0", "", more);
        self.in_peer(move || Daemon::start_with(dir, config, state, &[]))
    }
}

/// A daemon's directory, configuration (firewall on, the API on `listen`, `firewall` keys
/// and `more` appended) and state path.
fn firewall_daemon_files(
    tag: &str,
    listen: &str,
    firewall: &str,
    more: &str,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let dir = temp_dir(tag);
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let text = base_config(&state)
        .replace(
            "[firewall]\nenabled = false\n",
            &format!("[firewall]\nenabled = true\ncheck_interval_seconds = 1\n{firewall}\n"),
        )
        .replace("listen = \"127.0.0.1:0\"", &format!("listen = {listen:?}"));
    std::fs::write(&config, format!("{text}{more}")).unwrap();
    (dir, config, state)
}

pub(crate) fn post(d: &Daemon, path: &str, token: &str, body: Value) -> Resp {
    let auth = format!("Bearer {token}");
    d.req(
        "POST",
        path,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    )
}

fn cli(d: &Daemon, args: &[&str]) -> (i32, String, String) {
    let mut full = vec!["firewall"];
    full.extend_from_slice(args);
    let out = d.cli(&full);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn block_drops_packets_and_unblock_lets_them_through() {
    let Some(net) = require("block") else { return };
    let d = net.daemon("fw-block", "", "");
    assert!(net.connects("192.0.2.1"), "open before any block");
    let (code, out, err) = cli(&d, &["block", "192.0.2.2", "--reason", "ssh brute force"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "blocked 192.0.2.2 permanently\n");
    assert!(net.set("block4").contains("192.0.2.2"));
    assert!(
        !net.connects("192.0.2.1"),
        "a blocked source cannot connect"
    );
    // The other source address of the peer is not blocked.
    assert!(net.connects("198.51.100.1"));
    let c = d.get("/api/v1/firewall/check?ip=192.0.2.2", ADMIN);
    c.expect(200);
    let c = c.json();
    assert_eq!(c["ok"], true);
    assert_eq!(c["success"], true);
    assert_eq!(c["blocked"], true);
    assert_eq!(c["permanent"], "ssh brute force");
    assert_eq!(c["temporary"], Value::Null);
    assert_eq!(c["allowed"], false);
    assert_eq!(c["infra"], false);
    d.get("/api/v1/firewall/check?ip=nope", ADMIN).expect(400);
    d.get("/api/v1/firewall/check", ADMIN).expect(400);
    let b = d.get("/api/v1/blocked-ips", READ).json();
    assert_eq!(b["total"], 1);
    let item = &b["items"][0];
    assert_eq!(item["ip"], "192.0.2.2");
    assert_eq!(item["source"], "operator");
    assert_eq!(item["permanent"], true);
    assert!(item.get("expires_at").is_none());
    assert!(item["created_at"].as_str().unwrap().ends_with('Z'));
    let r = post(
        &d,
        "/api/v1/firewall/unban",
        ADMIN,
        json!({"ip": "192.0.2.2"}),
    );
    r.expect(200);
    let r = r.json();
    assert_eq!(
        (r["ok"].clone(), r["success"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(r["removed"][0]["ip"], "192.0.2.2");
    assert!(net.connects("192.0.2.1"), "unblocked");
    post(
        &d,
        "/api/v1/firewall/unban",
        ADMIN,
        json!({"ip": "192.0.2.2"}),
    )
    .expect(404);
    post(&d, "/api/v1/firewall/unban", ADMIN, json!({"ip": "x"})).expect(400);
    // CLI refusals exit 1 with the reason; usage errors exit 2.
    let (code, _, err) = cli(&d, &["block", "not-an-ip"]);
    assert_eq!(code, 1);
    assert!(err.contains("not an IP address"), "{err}");
    let (code, _, err) = cli(&d, &["block", "127.0.0.1"]);
    assert_eq!(code, 1);
    assert!(err.contains("never blocked"), "{err}");
    let (code, _, _) = cli(&d, &["block"]);
    assert_eq!(code, 2);
    let (code, _, err) = cli(&d, &["unblock", "192.0.2.2"]);
    assert_eq!(code, 1);
    assert!(err.contains("is not blocked"), "{err}");
    // Writes are audited with the route's action.
    let a = d.get("/api/v1/audit", ADMIN).json();
    let actions: Vec<&str> = a["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["action"].as_str())
        .collect();
    assert!(actions.contains(&"firewall.unban"), "{actions:?}");
    assert!(actions.contains(&"firewall.block"), "{actions:?}");
}

/// A POST from the peer (192.0.2.2) to the daemon's API on 192.0.2.1:9443.
fn peer_post(net: &Net, cert: Vec<u8>, path: &'static str, body: String) -> Resp {
    net.in_peer(move || {
        let auth = format!("Bearer {ADMIN}");
        Client::connect("192.0.2.1:9443".parse().unwrap(), cert).send(
            "POST",
            path,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            body.as_bytes(),
        )
    })
}

/// Issue 23 items 11-13 through the API of a daemon listening on every address: an admin
/// cannot block the address their request comes from (threat and firewall routes, as
/// `deny-subnet` already refused a range around it) unless they send `"force": true`; a
/// repeated key, a lifetime with a unit twice and a prefix length with a leading zero are
/// refused; the start-up line names the wildcard it is bound to.
#[test]
fn an_operator_cannot_block_their_own_address_without_force() {
    let Some(net) = require("own") else { return };
    let d = net.daemon_on("fw-own", "0.0.0.0:9443", "", "");
    let line = d
        .stdout()
        .into_iter()
        .find(|l| l.contains("listening on"))
        .unwrap();
    assert!(
        line.contains("listening on https://0.0.0.0:9443 (every IPv4 address of this host)"),
        "{line}"
    );
    let cert = d.cert();
    assert!(net.connects("192.0.2.1"));
    let post = |path: &'static str, body: &str| peer_post(&net, cert.clone(), path, body.into());

    // The caller's own address: refused on every block route, with the firewall's shape.
    for path in [
        "/api/v1/threat/block-ip",
        "/api/v1/threat/block-ip-permanent",
    ] {
        let r = post(path, r#"{"ip":"192.0.2.2"}"#);
        r.expect(409);
        let v = r.json();
        assert_eq!(v["refusal"], "own_address", "{path}: {v}");
        assert!(v["error"].as_str().unwrap().contains("force"), "{v}");
    }
    let r = post(
        "/api/v1/firewall/deny-subnet",
        r#"{"subnet":"192.0.2.2/31"}"#,
    );
    r.expect(409);
    assert_eq!(r.json()["refusal"], "own_address");
    // In bulk the own address is skipped, the others are blocked.
    let r = post(
        "/api/v1/threat/block-ip",
        r#"{"ips":["192.0.2.2","203.0.113.5"]}"#,
    );
    r.expect(200);
    let v = r.json();
    assert_eq!(v["changed"], json!(["203.0.113.5"]), "{v}");
    assert_eq!(v["skipped"], json!(["192.0.2.2"]), "{v}");
    assert!(!net.set("block4").contains("192.0.2.2"));
    assert!(net.connects("192.0.2.1"));

    // Strict input (item 12): none of these acts.
    for (path, body, says) in [
        (
            "/api/v1/threat/block-ip",
            r#"{"ip":"203.0.113.7","ip":"192.0.2.2","force":true}"#,
            "duplicate key",
        ),
        (
            "/api/v1/firewall/allow-ip",
            r#"{"ip":"203.0.113.9","for":"1h1h"}"#,
            "at most once",
        ),
        (
            "/api/v1/firewall/deny-subnet",
            r#"{"subnet":"203.0.113.0/024"}"#,
            "prefix length",
        ),
        (
            "/api/v1/threat/block-ip",
            r#"{"ip":"192.0.2.2","force":"yes"}"#,
            "force must be",
        ),
    ] {
        let r = post(path, body);
        r.expect(400);
        let e = r.json()["error"].as_str().unwrap().to_string();
        assert!(e.contains(says), "{body}: {e}");
    }
    let sets = format!("{}{}", net.set("block4"), net.set("allow4"));
    assert!(
        !sets.contains("203.0.113.9") && !sets.contains("203.0.113.0/24"),
        "{sets}"
    );
    assert!(!sets.contains("203.0.113.7"), "{sets}");

    // With force the operator means it: blocked, and locked out.
    let r = post(
        "/api/v1/threat/block-ip",
        r#"{"ip":"192.0.2.2","force":true}"#,
    );
    r.expect(200);
    assert!(net.set("block4").contains("192.0.2.2"));
    assert!(!net.connects("192.0.2.1"));
    // From loopback the peer's address is not the caller's own: no force needed.
    let r = post_local(&d, "/api/v1/firewall/unban", json!({"ip": "192.0.2.2"}));
    r.expect(200);
    post_local(&d, "/api/v1/threat/block-ip", json!({"ip": "192.0.2.2"})).expect(200);
}

fn post_local(d: &Daemon, path: &str, body: Value) -> Resp {
    post(d, path, ADMIN, body)
}

#[test]
fn a_two_second_block_expires_by_itself() {
    let Some(net) = require("expiry") else { return };
    let d = net.daemon("fw-expiry", "", "");
    let (code, out, err) = cli(&d, &["block", "192.0.2.2", "--for", "2s"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("blocked 192.0.2.2 until "), "{out}");
    assert!(!net.connects("192.0.2.1"));
    let c = d.get("/api/v1/firewall/check?ip=192.0.2.2", ADMIN).json();
    assert!(c["temporary"]
        .as_str()
        .unwrap()
        .starts_with("manual block (expires in "));
    assert!(c["expires_at"].is_string());
    wait_until(15, "the block to lapse", || {
        net.connects("192.0.2.1").then_some(())
    });
    wait_until(15, "the expired block to leave the list", || {
        (d.get("/api/v1/blocked-ips", READ).json()["total"] == 0).then_some(())
    });
}

#[test]
fn precedence_infra_accept_then_blocked_drop_then_allowed_accept() {
    let Some(net) = require("prec") else { return };
    // Full mode without port 8080: only allowed and infrastructure sources get in.
    let d = net.daemon("fw-prec", "mode = \"full\"\ntcp_in = [22]", "");
    assert!(!net.connects("192.0.2.1"), "default drop in full mode");
    let r = post(
        &d,
        "/api/v1/firewall/allow-ip",
        ADMIN,
        json!({"ip": "192.0.2.2", "reason": "office"}),
    );
    r.expect(200);
    assert_eq!(r.json()["ok"], true);
    assert!(
        net.connects("192.0.2.1"),
        "allowed accept precedes the default drop"
    );
    // Blocking an allowed address is refused, naming the allow entry.
    let (code, _, err) = cli(&d, &["block", "192.0.2.2"]);
    assert_eq!(code, 1);
    assert!(err.contains("allow-list entry 192.0.2.2 (office)"), "{err}");
    // A subnet containing this host's own address is refused.
    let r = post(
        &d,
        "/api/v1/firewall/deny-subnet",
        ADMIN,
        json!({"subnet": "198.51.100.0/30"}),
    );
    r.expect(409);
    assert!(r.json()["error"].as_str().unwrap().contains("198.51.100.1"));
    post(
        &d,
        "/api/v1/firewall/deny-subnet",
        ADMIN,
        json!({"subnet": "0.0.0.0/0"}),
    )
    .expect(409);
    // 198.51.100.2/31 holds only the peer's second address.
    let r = post(
        &d,
        "/api/v1/firewall/deny-subnet",
        ADMIN,
        json!({"subnet": "198.51.100.2/31", "reason": "bad range"}),
    );
    r.expect(200);
    post(
        &d,
        "/api/v1/firewall/allow-ip",
        ADMIN,
        json!({"ip": "198.51.100.2"}),
    )
    .expect(200);
    let r = d
        .get("/api/v1/firewall/check?ip=198.51.100.2", ADMIN)
        .json();
    assert_eq!(
        (r["blocked"].clone(), r["allowed"].clone()),
        (json!(true), json!(true))
    );
    assert!(
        !net.connects("198.51.100.1"),
        "blocked drop precedes allowed accept"
    );
    // Infrastructure accept precedes the blocked subnet.
    let r = post(
        &d,
        "/api/v1/settings/firewall/tentative-apply",
        ADMIN,
        json!({"changes": {"infra_ips": ["198.51.100.2"]}, "timeout_min": 5}),
    );
    r.expect(202);
    assert_eq!(r.json()["state"], "pending");
    assert!(
        net.connects("198.51.100.1"),
        "infra accept precedes the block"
    );
    post(&d, "/api/v1/settings/firewall/revert", ADMIN, json!({})).expect(200);
    assert!(!net.connects("198.51.100.1"));
    post(
        &d,
        "/api/v1/firewall/remove-subnet",
        ADMIN,
        json!({"subnet": "198.51.100.2/31"}),
    )
    .expect(200);
    assert!(net.connects("198.51.100.1"), "allowed again");
    post(
        &d,
        "/api/v1/firewall/remove-allow",
        ADMIN,
        json!({"ip": "198.51.100.2"}),
    )
    .expect(200);
    post(
        &d,
        "/api/v1/firewall/remove-allow",
        ADMIN,
        json!({"ip": "198.51.100.2"}),
    )
    .expect(404);
    assert!(!net.connects("198.51.100.1"));
}

#[test]
fn connection_cap_applies_per_source_and_dos_exempt_ranges_skip_it() {
    let Some(net) = require("dos") else { return };
    let d = net.daemon(
        "fw-dos",
        "mode = \"full\"\ntcp_in = [8080]\nconn_limit = 3\ndos_exempt_ranges = [\"198.51.100.0/24\"]",
        "",
    );
    let (n, held) = net.hold("192.0.2.1", 5);
    assert_eq!(
        n, 3,
        "the fourth concurrent connection from one source is dropped"
    );
    drop(held);
    let (n, _held) = net.hold("198.51.100.1", 5);
    assert_eq!(n, 5, "a DoS-exempt source skips the cap");
    let caps = d.get("/api/v1/capabilities", READ).json();
    let caps = caps["capabilities"].as_array().unwrap();
    assert!(caps.contains(&json!("firewall.dos_exempt.v1")));
    assert!(caps.contains(&json!("firewall.rollback.v1")));
}

/// The `ct count over N` limits the `conn4` meter's elements hold.
fn conn_limits(set: &str) -> Vec<u64> {
    set.split("ct count over ")
        .skip(1)
        .filter_map(|rest| {
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            digits.parse().ok()
        })
        .collect()
}

/// Issue 23 item 6: a tentative connection cap of 1, one connection kept open, revert, a
/// tentative `full` mode again (cap 300): the meter element made under the cap of 1 must
/// not outlive it, or the address's next connection is dropped.
#[test]
fn a_reverted_connection_cap_leaves_no_meter_behind() {
    let Some(net) = require("meter") else { return };
    let d = net.daemon("fw-meter", "tcp_in = [8080]", "");
    let tentative = |changes: Value| {
        post(
            &d,
            "/api/v1/settings/firewall/tentative-apply",
            ADMIN,
            json!({"changes": changes, "timeout_min": 5}),
        )
        .expect(202);
    };
    tentative(json!({"mode": "full", "conn_limit": 1}));
    let (n, _first) = net.hold("192.0.2.1", 2);
    assert_eq!(
        n, 1,
        "the cap of 1 holds: one connection, the second dropped"
    );
    assert_eq!(conn_limits(&net.set("conn4")), [1]);
    post(&d, "/api/v1/settings/firewall/revert", ADMIN, json!({})).expect(200);
    tentative(json!({"mode": "full"}));
    let (n, _next) = net.hold("192.0.2.1", 1);
    assert_eq!(n, 1, "the next connection of that address is accepted");
    let left = conn_limits(&net.set("conn4"));
    assert!(
        !left.contains(&1),
        "conn4 still holds the reverted cap: {left:?}"
    );
    assert_eq!(conn_limits(&net.set("conn4")), [300]);
}

/// Issue 23 item 6: the rule that keeps the API port open comes before the connection
/// meters, so a connection cap never throttles the operator's own API connections.
#[test]
fn the_api_port_is_accepted_before_the_connection_meters() {
    let Some(net) = require("apiport") else {
        return;
    };
    let d = net.daemon_on(
        "fw-apiport",
        "192.0.2.1:9443",
        "mode = \"full\"\ntcp_in = [8080]\nconn_limit = 1",
        "",
    );
    let (n, _held) = net.hold("192.0.2.1", 3);
    assert_eq!(n, 1, "the cap applies to port 8080");
    let (n, _api) = net.hold_port("192.0.2.1", 9443, 3);
    assert_eq!(n, 3, "connections to the API port are not capped");
    let chain = net.srv.nft(&["list", "chain", "inet", "svc", "input"]);
    let api = chain.find("tcp dport 9443 accept").expect(&chain);
    let dos = chain.find("jump dos").expect(&chain);
    assert!(api < dos, "{chain}");
    d.get("/api/v1/status", READ).expect(200);
}

#[test]
fn the_table_is_reasserted_after_a_ruleset_flush_and_a_foreign_table_is_untouched() {
    let Some(net) = require("flush") else { return };
    net.srv.nft_script(
        "table inet foreign {\n set keep { type ipv4_addr; flags interval; elements = { 10.9.0.0/16, 10.1.2.3 }; }\n chain c { type filter hook input priority 0; policy accept; ip saddr @keep counter accept; }\n}\n",
    );
    let before = net.srv.nft(&["list", "table", "inet", "foreign"]);
    let d = net.daemon("fw-flush", "", "");
    let status = |d: &Daemon| d.get("/api/v1/status", READ).json();
    let row = status(&d)["queues"]["auto_block.cleanup"].clone();
    assert_eq!(row["lag_basis"], "deferred_checkpoint", "{row}");
    assert_eq!(row["waiting"], 0);
    cli(&d, &["block", "192.0.2.2", "--for", "1h"]);
    cli(&d, &["allow", "198.51.100.2", "--for", "1h"]);
    cli(&d, &["unblock", "192.0.2.2"]);
    cli(&d, &["block", "192.0.2.2"]);
    cli(&d, &["flush"]);
    post(
        &d,
        "/api/v1/settings/firewall/tentative-apply",
        ADMIN,
        json!({"changes": {"mode": "full", "tcp_in": [8080, 22]}, "timeout_min": 1}),
    )
    .expect(202);
    post(&d, "/api/v1/settings/firewall/confirm", ADMIN, json!({})).expect(200);
    assert_eq!(
        net.srv.nft(&["list", "table", "inet", "foreign"]),
        before,
        "the daemon never changes another table"
    );
    assert!(!net.connects("192.0.2.1"));
    // Someone flushes the whole ruleset: the table comes back from the store.
    net.srv.nft(&["flush", "ruleset"]);
    assert!(
        net.connects("192.0.2.1"),
        "nothing blocks right after the flush"
    );
    wait_until(10, "re-assertion after the flush", || {
        net.srv
            .try_nft(&["list", "set", "inet", "svc", "block4"])
            .is_ok_and(|s| s.contains("192.0.2.2"))
            .then_some(())
    });
    assert!(net.set("block4").contains("192.0.2.2"));
    assert!(net.set("allow4").contains("198.51.100.2"));
    assert!(!net.connects("192.0.2.1"));
    let s = d.get("/api/v1/firewall/status", ADMIN).json();
    assert_eq!(s["table_present"], true);
    assert_eq!(s["mode"], "full");
    assert!(s["reasserts_total"].as_u64().unwrap() >= 2);
    assert!(s["last_reassert_at"].is_string());
    assert_eq!(status(&d)["queues"]["auto_block.cleanup"]["waiting"], 0);
    // A distribution firewall reload (`systemctl reload nftables` loads a file that starts
    // with `flush ruleset`): the table comes back again.
    net.srv.nft_script(
        "flush ruleset\ntable inet filter {\n chain input { type filter hook input priority 0; policy accept; }\n}\n",
    );
    wait_until(10, "re-assertion after a distribution reload", || {
        net.srv
            .try_nft(&["list", "set", "inet", "svc", "block4"])
            .is_ok_and(|s| s.contains("192.0.2.2"))
            .then_some(())
    });
    assert!(!net.connects("192.0.2.1"));
    drop(d);
    // The daemon stopped: its table stays (blocks keep working); the foreign table is
    // gone only because of the flush above.
    assert!(net.set("block4").contains("192.0.2.2"));
}

#[test]
fn rollback_state_survives_a_restart_and_a_passed_deadline_reverts_at_start() {
    let Some(net) = require("rollback") else {
        return;
    };
    let mut d = net.daemon("fw-rollback", "", "");
    let r = d.get("/api/v1/settings/firewall/rollback", ADMIN).json();
    assert_eq!(r["state"], "none");
    let r = post(
        &d,
        "/api/v1/settings/firewall/tentative-apply",
        ADMIN,
        json!({"changes": {"mode": "full", "tcp_in": [22]}, "timeout_min": 31}),
    );
    r.expect(400);
    let r = post(
        &d,
        "/api/v1/settings/firewall/tentative-apply",
        ADMIN,
        json!({"changes": {"tcp_in": [70000]}, "timeout_min": 2}),
    );
    r.expect(400);
    assert_eq!(r.json()["errors"][0]["field"], "firewall.tcp_in[0]");
    let r = post(
        &d,
        "/api/v1/settings/firewall/tentative-apply",
        ADMIN,
        json!({"changes": {"mode": "full", "tcp_in": [22]}, "timeout_min": 2}),
    );
    r.expect(202);
    let r = r.json();
    assert_eq!(r["ok"], true);
    assert_eq!(r["state"], "pending");
    assert!(r["remaining_seconds"].as_u64().unwrap() <= 120);
    assert!(r["deadline"].as_str().unwrap().ends_with('Z'));
    assert!(!net.connects("192.0.2.1"), "full mode without port 8080");
    let st = d.get("/api/v1/status", READ).json();
    assert_eq!(st["rollback"]["state"], "pending");
    assert!(st["rollback"]["remaining_seconds"].is_u64());
    let (code, out, _) = cli(&d, &["rollback", "status"]);
    assert_eq!(code, 0);
    assert!(out.contains("pending"), "{out}");
    // A restart (here after a crash) keeps the timer.
    d.kill9();
    let d2 = Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), &[]);
    let r = d2.get("/api/v1/settings/firewall/rollback", ADMIN).json();
    assert_eq!(r["state"], "pending");
    assert!(!net.connects("192.0.2.1"));
    drop(d2);
    // The deadline passes while the daemon is down: it reverts at start.
    let db = rusqlite::Connection::open(d.state.join("svc.db")).unwrap();
    let text: String = db
        .query_row(
            "SELECT value FROM kv WHERE key = 'firewall.rollback'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["pending"]["deadline"] = json!(jiff::Timestamp::now().as_microsecond() - 1_000_000);
    db.execute(
        "UPDATE kv SET value = ?1 WHERE key = 'firewall.rollback'",
        [v.to_string()],
    )
    .unwrap();
    drop(db);
    let d3 = Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), &[]);
    let r = d3.get("/api/v1/settings/firewall/rollback", ADMIN).json();
    assert_eq!(r["state"], "reverted");
    assert_eq!(r["reason"], "restart");
    assert!(r.get("remaining_seconds").is_none());
    assert!(net.connects("192.0.2.1"), "blocklist mode again");
    let (code, _, err) = cli(&d3, &["confirm"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("no tentative firewall change is pending"),
        "{err}"
    );
    post(&d3, "/api/v1/settings/firewall/confirm", ADMIN, json!({})).expect(409);
}

#[test]
fn dry_run_records_show_in_blocked_ips_and_never_reach_nftables() {
    let Some(net) = require("dry") else { return };
    // A record an automatic caller made in dry-run mode (the threat engine arrives later).
    let d = net.daemon("fw-dry", "", "");
    let dir = d.dir.clone();
    let (config, state) = (d.config.clone(), d.state.clone());
    drop(d);
    let db = rusqlite::Connection::open(state.join("svc.db")).unwrap();
    let now = jiff::Timestamp::now().as_microsecond();
    db.execute(
        "INSERT INTO firewall_dry_run(ip, reason, source, created, expires) VALUES ('192.0.2.2', 'ssh brute force', 'auto', ?1, ?2)",
        [now, now + 3_600_000_000],
    )
    .unwrap();
    drop(db);
    let d = Daemon::start_with(dir, config, state, &[]);
    let b = d.get("/api/v1/blocked-ips", READ).json();
    assert_eq!(b["total"], 1);
    assert_eq!(b["items"][0]["dry_run"], true);
    assert_eq!(b["items"][0]["source"], "auto");
    assert!(!net.set("block4").contains("192.0.2.2"));
    assert!(net.connects("192.0.2.1"));
    let c = d.get("/api/v1/firewall/check?ip=192.0.2.2", ADMIN).json();
    assert_eq!(c["blocked"], false);
    assert_eq!(c["dry_run"]["dry_run"], true);
    let s = d.get("/api/v1/firewall/status", ADMIN).json();
    assert_eq!(s["dry_run"], true);
    assert_eq!(s["dry_run_records"], 1);
    // The operator's unban removes the record too.
    let r = post(
        &d,
        "/api/v1/firewall/unban",
        ADMIN,
        json!({"ip": "192.0.2.2"}),
    )
    .json();
    assert_eq!(r["removed"][0]["dry_run"], true);
}

#[test]
fn a_hundred_thousand_stored_blocks_are_one_table_again_after_a_flush() {
    let Some(net) = require("100k") else { return };
    let d = net.daemon("fw-100k", "", "");
    let (dir, config, state) = (d.dir.clone(), d.config.clone(), d.state.clone());
    drop(d);
    let mut db = rusqlite::Connection::open(state.join("svc.db")).unwrap();
    let now = jiff::Timestamp::now().as_microsecond();
    let tx = db.transaction().unwrap();
    {
        let mut st = tx
            .prepare("INSERT INTO blocked_ips(ip, reason, source, created, expires) VALUES (?1, 'bulk', 'auto', ?2, ?3)")
            .unwrap();
        for i in 0..100_000u32 {
            let ip = std::net::Ipv4Addr::from(0x0a00_0000 + i * 2);
            st.execute(rusqlite::params![ip.to_string(), now, now + 86_400_000_000])
                .unwrap();
        }
    }
    tx.commit().unwrap();
    drop(db);
    let d = Daemon::start_with(dir, config, state, &[]);
    let count = |net: &Net| {
        net.srv
            .try_nft(&["list", "set", "inet", "svc", "block4"])
            .map_or(0, |s| s.matches(" expires ").count())
    };
    assert_eq!(count(&net), 100_000);
    let s = d.get("/api/v1/firewall/status", ADMIN).json();
    assert_eq!(s["sets"]["block4"], 100_000);
    let b = d.get("/api/v1/blocked-ips?limit=10", READ).json();
    assert_eq!(b["total"], 100_000);
    assert_eq!(b["items"].as_array().unwrap().len(), 10);
    assert_eq!(b["truncated"], true);
    // One more block on top is quick and exact.
    let (code, _, err) = cli(&d, &["block", "192.0.2.2"]);
    assert_eq!(code, 0, "{err}");
    assert!(!net.connects("192.0.2.1"));
    net.srv.nft(&["flush", "ruleset"]);
    wait_until(10, "100,000 blocks re-asserted", || {
        (count(&net) == 100_000).then_some(())
    });
    assert!(!net.connects("192.0.2.1"));
}

#[test]
fn without_the_engine_routes_answer_503_and_doctor_says_why() {
    // firewall.enabled = false (the test default, like --dev): nftables is never touched.
    let d = Daemon::start("fw-absent", "");
    for path in [
        "/api/v1/firewall/status",
        "/api/v1/firewall/check?ip=192.0.2.1",
        "/api/v1/settings/firewall/rollback",
    ] {
        let r = d.get(path, ADMIN);
        r.expect(503);
        assert!(r.json()["error"]
            .as_str()
            .unwrap()
            .contains("firewall.enabled is false"));
    }
    post(
        &d,
        "/api/v1/firewall/unban",
        ADMIN,
        json!({"ip": "192.0.2.1"}),
    )
    .expect(503);
    // Scopes: firewall internals are admin; blocked-IP summaries read.
    d.get("/api/v1/firewall/status", READ).expect(403);
    post(&d, "/api/v1/firewall/flush", READ, json!({})).expect(403);
    d.get("/api/v1/blocked-ips", READ).expect(200);
    // Cookie writes need the CSRF token.
    let (cookie, csrf) = login(&d, ADMIN);
    let c = format!("svc_auth={cookie}");
    d.req("POST", "/api/v1/firewall/flush", &[("Cookie", &c)], b"{}")
        .expect(403);
    d.req(
        "POST",
        "/api/v1/firewall/flush",
        &[("Cookie", &c), ("X-CSRF-Token", &csrf)],
        b"{}",
    )
    .expect(503);
    let st = d.get("/api/v1/status", READ).json();
    assert_eq!(st["rollback"]["state"], "unavailable");
    assert!(
        st["queues"].get("auto_block.cleanup").is_none(),
        "no row without the engine"
    );
    let out = d.cli(&["doctor", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let fw = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "firewall")
        .cloned()
        .unwrap();
    assert!(fw["detail"]
        .as_str()
        .unwrap()
        .contains("engine absent: firewall.enabled is false"));
    let (code, _, err) = cli(&d, &["status"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("the firewall engine is not running: firewall.enabled is false"),
        "{err}"
    );
}
