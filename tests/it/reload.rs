//! Configuration reload through the real binary: `svc reload` over the control socket and
//! SIGHUP; tokens, thresholds, watch roots and log paths change live; an invalid
//! configuration is refused as a whole; restart-only keys are reported.

use crate::common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const NEW_ADMIN: &str = "new-admin-token-0123456789abcdef";
const WEBSHELL: &str = "<?php\n// innocent looking header\n@eval($_POST['cmd']);\n?>\n";

/// The parts of a configuration a test varies.
struct Cfg<'a> {
    state: &'a Path,
    tokens: &'a [(&'a str, &'a str, &'a str)],
    extra: String,
}

impl Cfg<'_> {
    fn text(&self) -> String {
        let mut s = format!(
            "state_path = {:?}\n[probes]\nbackends = []\n[webui]\nlisten = \"127.0.0.1:0\"\nmetrics_token = {METRICS:?}\n",
            self.state.display().to_string()
        );
        for (name, token, scope) in self.tokens {
            s.push_str(&format!(
                "[[webui.tokens]]\nname = {name:?}\ntoken = {token:?}\nscope = {scope:?}\n"
            ));
        }
        s.push_str(&self.extra);
        s
    }
}

const BASE_TOKENS: &[(&str, &str, &str)] =
    &[("ops-admin", ADMIN, "admin"), ("dash-read", READ, "read")];

fn quiet(extra: &str) -> String {
    format!(
        "[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[logs]\nauth = []\n[files]\nwatch = []\n{extra}"
    )
}

fn start(tag: &str, tokens: &[(&str, &str, &str)], extra: &str) -> Daemon {
    let dir = temp_dir(tag);
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let c = Cfg {
        state: &state,
        tokens,
        extra: extra.to_string(),
    };
    std::fs::write(&config, c.text()).unwrap();
    Daemon::start_with(dir, config, state, &[])
}

fn rewrite(d: &Daemon, tokens: &[(&str, &str, &str)], extra: &str) {
    let c = Cfg {
        state: &d.state,
        tokens,
        extra: extra.to_string(),
    };
    std::fs::write(&d.config, c.text()).unwrap();
}

fn reload(d: &Daemon) -> (i32, String, String) {
    let out = d.cli(&["reload"]);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn reload_json(d: &Daemon) -> (i32, Value) {
    let out = d.cli(&["reload", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap_or(-1), v)
}

/// Audit entries of reloads, newest first.
fn reload_audits(d: &Daemon, token: &str) -> Vec<Value> {
    let v = d.get("/api/v1/audit", token).expect(200).json();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "config.reload")
        .cloned()
        .collect()
}

fn wait_audit(d: &Daemon, token: &str, n: usize) -> Vec<Value> {
    wait_until(20, "reload audit records", || {
        let a = reload_audits(d, token);
        (a.len() >= n).then_some(a)
    })
}

fn cookie_status(d: &Daemon, cookie: &str) -> u16 {
    d.req(
        "GET",
        "/api/v1/sessions",
        &[("Cookie", &format!("svc_auth={cookie}"))],
        b"",
    )
    .status
}

#[test]
fn reload_adds_and_removes_tokens_and_ends_the_sessions_of_removed_ones() {
    let d = start("reload-tokens", BASE_TOKENS, &quiet(""));
    let (old_cookie, _) = login(&d, ADMIN);
    d.get("/api/v1/sessions", NEW_ADMIN).expect(401);

    // Add an admin token.
    let added = [
        BASE_TOKENS[0],
        BASE_TOKENS[1],
        ("new-admin", NEW_ADMIN, "admin"),
    ];
    rewrite(&d, &added, &quiet(""));
    let (code, out, err) = reload(&d);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("applied webui.tokens"), "{out}");
    assert!(!out.contains("restart needed"), "{out}");
    d.get("/api/v1/sessions", NEW_ADMIN).expect(200);
    d.get("/api/v1/sessions", ADMIN).expect(200);
    let (new_cookie, _) = login(&d, NEW_ADMIN);
    assert_eq!(cookie_status(&d, &old_cookie), 200);

    // Remove the first one: it is refused from now on, and so is its browser session.
    let removed = [("new-admin", NEW_ADMIN, "admin"), BASE_TOKENS[1]];
    rewrite(&d, &removed, &quiet(""));
    let (code, out, err) = reload(&d);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ended 1 browser session"), "{out}");
    d.get("/api/v1/sessions", ADMIN).expect(401);
    assert_eq!(cookie_status(&d, &old_cookie), 401, "its session ended");
    assert_eq!(cookie_status(&d, &new_cookie), 200, "other sessions stay");
    d.get("/api/v1/status", READ).expect(200);

    // Demoting a token to read ends its browser sessions too.
    let demoted = [("new-admin", NEW_ADMIN, "read"), BASE_TOKENS[1]];
    rewrite(&d, &demoted, &quiet(""));
    let (code, v) = reload_json(&d);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["sessions_ended"], 1);
    assert_eq!(cookie_status(&d, &new_cookie), 401);
    d.get("/api/v1/sessions", NEW_ADMIN).expect(403);

    // Every reload is audited with actor `reload` via the control socket.
    rewrite(&d, &removed, &quiet(""));
    assert_eq!(reload(&d).0, 0);
    let audits = wait_audit(&d, NEW_ADMIN, 4);
    for a in &audits {
        assert_eq!(a["actor"], "reload");
        assert_eq!(a["via"], "control_socket");
        assert_eq!(a["outcome"], "ok");
    }
    assert!(audits[0]["target"]
        .as_str()
        .unwrap()
        .contains("webui.tokens"));
    let log = d.stderr();
    assert!(
        log.contains("configuration reload (control_socket"),
        "{log}"
    );
    assert!(
        !log.contains(NEW_ADMIN) && !log.contains(ADMIN),
        "no token in logs"
    );
}

#[test]
fn an_invalid_configuration_is_refused_whole_with_the_errors_validate_prints() {
    let d = start("reload-invalid", BASE_TOKENS, &quiet(""));
    let before = d.get("/api/v1/status", READ).expect(200).json()["config_hash"].clone();
    // A valid change next to invalid ones: nothing of it may apply.
    let bad = [
        BASE_TOKENS[0],
        BASE_TOKENS[1],
        ("new-admin", NEW_ADMIN, "admin"),
    ];
    rewrite(
        &d,
        &bad,
        &quiet("[thresholds]\nauth_failures = 0\nbogus = 1\n"),
    );
    let validate = d.cli(&["validate"]);
    assert_eq!(validate.status.code(), Some(1));
    let (code, out, err) = reload(&d);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(
        out,
        String::from_utf8_lossy(&validate.stdout),
        "exactly as validate"
    );
    assert!(
        out.contains("thresholds.auth_failures: must be between"),
        "{out}"
    );
    assert!(out.contains("thresholds.bogus: unknown key"), "{out}");
    // A drop-in that does not parse: its position, as validate prints it.
    let dropins = d.config.parent().unwrap().join("conf.d");
    std::fs::create_dir_all(&dropins).unwrap();
    std::fs::write(
        dropins.join("50-broken.toml"),
        "[alerts\nmax_per_hour = 3\n",
    )
    .unwrap();
    let validate = d.cli(&["validate"]);
    let (code, out, _) = reload(&d);
    assert_eq!(code, 1);
    assert_eq!(out, String::from_utf8_lossy(&validate.stdout));
    assert!(out.contains("50-broken.toml: line 1 column"), "{out}");
    // The running configuration stays.
    d.get("/api/v1/sessions", NEW_ADMIN).expect(401);
    d.get("/api/v1/sessions", ADMIN).expect(200);
    let s = d.get("/api/v1/status", READ).expect(200).json();
    assert_eq!(s["config_hash"], before);
    let (code, v) = reload_json(&d);
    assert_eq!((code, &v["ok"]), (1, &Value::Bool(false)));
    assert_eq!(v["errors"].as_array().unwrap().len(), 1, "{v}");
    let audits = wait_audit(&d, ADMIN, 3);
    assert_eq!(audits[0]["outcome"], "refused");
    assert_eq!(audits[0]["actor"], "reload");

    // Fixed: applied, and config_hash follows.
    std::fs::remove_file(dropins.join("50-broken.toml")).unwrap();
    rewrite(&d, &bad, &quiet(""));
    let (code, out, _) = reload(&d);
    assert_eq!(code, 0, "{out}");
    d.get("/api/v1/sessions", NEW_ADMIN).expect(200);
    let s = d.get("/api/v1/status", READ).expect(200).json();
    assert_ne!(s["config_hash"], before);
}

#[test]
fn sighup_reloads_and_is_audited_as_a_signal() {
    let d = start("reload-hup", BASE_TOKENS, &quiet(""));
    let added = [
        BASE_TOKENS[0],
        BASE_TOKENS[1],
        ("new-admin", NEW_ADMIN, "admin"),
    ];
    rewrite(&d, &added, &quiet(""));
    let st = Command::new("kill")
        .args(["-HUP", &d.pid().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    wait_until(20, "the new token to work after SIGHUP", || {
        (d.get("/api/v1/sessions", NEW_ADMIN).status == 200).then_some(())
    });
    let a = wait_audit(&d, NEW_ADMIN, 1);
    assert_eq!(
        (a[0]["via"].as_str(), a[0]["outcome"].as_str()),
        (Some("signal"), Some("ok"))
    );
    // An invalid configuration on SIGHUP: refused, logged, the daemon keeps running.
    std::fs::write(&d.config, "this is not toml = = =\n").unwrap();
    Command::new("kill")
        .args(["-HUP", &d.pid().to_string()])
        .status()
        .unwrap();
    let a = wait_audit(&d, NEW_ADMIN, 2);
    assert_eq!(a[0]["outcome"], "refused");
    d.get("/api/v1/sessions", NEW_ADMIN).expect(200);
    assert!(
        d.stderr().contains("refused: 1 configuration error"),
        "{}",
        d.stderr()
    );
}

#[test]
fn keys_that_need_a_restart_are_reported_and_keep_their_start_up_value() {
    let d = start("reload-restart", BASE_TOKENS, &quiet(""));
    let text = std::fs::read_to_string(&d.config).unwrap().replace(
        "listen = \"127.0.0.1:0\"",
        "listen = \"127.0.0.1:1\"\nsession_idle_minutes = 5",
    ) + "[incidents]\nwindow_minutes = 5\n";
    std::fs::write(&d.config, text).unwrap();
    let (code, out, err) = reload(&d);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("applied incidents.window_minutes"), "{out}");
    assert!(
        out.contains("restart needed for: webui.listen, webui.session_idle_minutes"),
        "{out}"
    );
    // Still served where it started.
    d.get("/api/v1/status", READ).expect(200);
    let (_, v) = reload_json(&d);
    assert_eq!(
        v["restart_required"],
        serde_json::json!(["webui.listen", "webui.session_idle_minutes"])
    );
    assert_eq!(
        v["applied"],
        serde_json::json!([]),
        "nothing new the second time"
    );
    let doctor = d.cli(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let config = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "config")
        .unwrap()
        .clone();
    assert_eq!(config["status"], "warning");
    assert!(config["detail"]
        .as_str()
        .unwrap()
        .contains("restart needed for webui.listen"));
}

fn failures(ip: &str, from: usize, n: usize) -> Vec<String> {
    (from..from + n)
        .map(|i| {
            format!(
                "Nov 21 10:00:{:02} web1 sshd[{}]: Failed password for root from {ip} port {} ssh2",
                i % 60,
                4000 + i,
                50000 + i
            )
        })
        .collect()
}

fn findings(d: &Daemon) -> Vec<Value> {
    d.get("/api/v1/findings", READ).expect(200).json()["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn bruteforce(d: &Daemon, ip: &str) -> Option<Value> {
    findings(d)
        .into_iter()
        .find(|f| f["check"] == "ssh_bruteforce" && f["ip"] == ip)
}

/// `logs.auth` and `thresholds` for one log file.
fn auth_extra(logs: &[&PathBuf], failures: u32) -> String {
    let list: Vec<String> = logs
        .iter()
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect();
    format!(
        "[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[files]\nwatch = []\n[logs]\nauth = [{}]\n[thresholds]\nauth_failures = {failures}\n",
        list.join(", ")
    )
}

fn auth_row_progress(d: &Daemon) -> bool {
    let s = d.get("/api/v1/status", READ).expect(200).json();
    s["queues"]["auth.file_source"]["waiting"] == 0
        && s["queues"]["findings.ingest"]["waiting"] == 0
}

#[test]
fn a_threshold_change_takes_effect_on_the_open_window() {
    let dir = temp_dir("reload-threshold");
    let log = dir.join("auth.log");
    std::fs::write(&log, "").unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let c = Cfg {
        state: &state,
        tokens: BASE_TOKENS,
        extra: auth_extra(&[&log], 10),
    };
    std::fs::write(&config, c.text()).unwrap();
    let d = Daemon::start_with(dir, config, state, &[]);
    let ip = "203.0.113.60";
    append_lines(&log, &failures(ip, 0, 3));
    // Read and dispatched: 3 of 10, no finding.
    wait_until(20, "the three lines to be read", || {
        let s = d.get("/api/v1/components", READ).expect(200).json();
        let events = s["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "auth_log")
            .map(|c| c["events_total"].as_u64().unwrap_or(0))
            .unwrap_or(0);
        (events >= 1 && auth_row_progress(&d)).then_some(())
    });
    assert!(bruteforce(&d, ip).is_none());
    rewrite(&d, BASE_TOKENS, &auth_extra(&[&log], 4));
    let (code, out, err) = reload(&d);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("applied thresholds"), "{out}");
    assert!(!out.contains("logs.auth"), "{out}");
    append_lines(&log, &failures(ip, 3, 1));
    let f = wait_until(20, "a brute-force finding at the new threshold", || {
        bruteforce(&d, ip)
    });
    assert!(
        f["details"]
            .as_str()
            .unwrap()
            .starts_with("4 failed logins"),
        "{f}"
    );
    assert!(
        f["details"].as_str().unwrap().contains("threshold 4"),
        "{f}"
    );
}

#[test]
fn a_log_path_change_restarts_the_auth_watcher_from_its_checkpoint() {
    let dir = temp_dir("reload-logs");
    let (a, b) = (dir.join("a.log"), dir.join("b.log"));
    std::fs::write(&a, "").unwrap();
    std::fs::write(&b, "").unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let c = Cfg {
        state: &state,
        tokens: BASE_TOKENS,
        extra: auth_extra(&[&a], 5),
    };
    std::fs::write(&config, c.text()).unwrap();
    let d = Daemon::start_with(dir, config, state, &[]);
    let ip = "198.51.100.61";
    append_lines(&a, &failures(ip, 0, 3));
    wait_until(20, "the first lines to be read", || {
        let s = d.get("/api/v1/components", READ).expect(200).json();
        let ok = s["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "auth_log" && c["events_total"].as_u64() >= Some(1));
        (ok && auth_row_progress(&d)).then_some(())
    });
    rewrite(&d, BASE_TOKENS, &auth_extra(&[&a, &b], 5));
    let (code, out, err) = reload(&d);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("applied logs.auth"), "{out}");
    // Two more in a.log: the restarted watcher resumes from its checkpoint and its
    // detector window was rebuilt, so these complete the five.
    append_lines(&a, &failures(ip, 3, 2));
    let f = wait_until(20, "the brute force across the restart", || {
        bruteforce(&d, ip)
    });
    assert!(
        f["details"]
            .as_str()
            .unwrap()
            .starts_with("5 failed logins"),
        "{f}"
    );
    // The new file is read too.
    let other = "198.51.100.62";
    append_lines(&b, &failures(other, 0, 5));
    wait_until(20, "a finding from the added log", || bruteforce(&d, other));
    let comp = d.get("/api/v1/components", READ).expect(200).json();
    let detail = comp["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "auth_log")
        .unwrap()["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(detail.contains("b.log"), "{detail}");
    // Nothing was read twice: one finding per address, counted once.
    let all: Vec<Value> = findings(&d)
        .into_iter()
        .filter(|f| f["check"] == "ssh_bruteforce")
        .collect();
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all.iter().all(|f| f["count"] == 1), "{all:?}");
}

#[test]
fn a_watch_root_change_takes_effect() {
    let dir = temp_dir("reload-roots");
    let (one, two) = (dir.join("www1"), dir.join("www2"));
    std::fs::create_dir_all(&one).unwrap();
    std::fs::create_dir_all(&two).unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let extra = |root: &Path| {
        format!(
            "[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\n[logs]\nauth = []\n[files]\nwatch = [{:?}]\n",
            root.display().to_string()
        )
    };
    let c = Cfg {
        state: &state,
        tokens: BASE_TOKENS,
        extra: extra(&one),
    };
    std::fs::write(&config, c.text()).unwrap();
    let d = Daemon::start_with(dir, config, state, &[]);
    rewrite(&d, BASE_TOKENS, &extra(&two));
    let (code, out, err) = reload(&d);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("applied files"), "{out}");
    let shell = two.join("shell.php");
    std::fs::write(&shell, WEBSHELL).unwrap();
    let want = shell.display().to_string();
    wait_until(20, "a finding under the new root", || {
        findings(&d)
            .into_iter()
            .find(|f| f["path"] == want.as_str())
    });
    // The old root is no longer watched.
    std::fs::write(one.join("old.php"), WEBSHELL).unwrap();
    let marker = two.join("later.php");
    std::fs::write(&marker, WEBSHELL).unwrap();
    let later = marker.display().to_string();
    wait_until(20, "the later file under the new root", || {
        findings(&d)
            .into_iter()
            .find(|f| f["path"] == later.as_str())
    });
    assert!(
        findings(&d)
            .iter()
            .all(|f| f["path"] != one.join("old.php").display().to_string()),
        "the old root is not watched any more"
    );
    let comp = d.get("/api/v1/components", READ).expect(200).json();
    let detail = comp["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "files")
        .unwrap()["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        detail.contains("www2") && !detail.contains("www1"),
        "{detail}"
    );
}
