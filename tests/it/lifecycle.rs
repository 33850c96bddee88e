//! Restart, legacy migration, drop-ins, and the CLI, through the real binary.

use crate::common::*;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(svc_bin()).args(args).output().unwrap()
}

#[test]
fn restart_ends_every_session() {
    let mut d = Daemon::start("restart", "");
    let (cookie, _) = login(&d, ADMIN);
    let first = d.get("/api/v1/status", READ).json();
    assert_eq!(d.stop(), 0);
    let d2 = Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), &[]);
    d2.req(
        "GET",
        "/api/v1/status",
        &[("Cookie", &format!("svc_auth={cookie}"))],
        b"",
    )
    .expect(401);
    let list = d2.get("/api/v1/sessions", ADMIN).json();
    assert_eq!(list["items"].as_array().unwrap().len(), 0);
    let second = d2.get("/api/v1/status", READ).json();
    assert_ne!(first["started_at_token"], second["started_at_token"]);
    // The generated certificate is reused.
    assert_eq!(d.cert(), d2.cert());
}

#[test]
fn legacy_token_migrates_once_keeping_comments_and_mode() {
    let dir = temp_dir("legacy");
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let legacy = "legacy-token-abcdefghijklmnop";
    let text = format!(
        "# operator's comment\nstate_path = {:?} # inline comment\n\n[probes]\nbackends = []\n\n[firewall]\nenabled = false\n\n[webui]\n# old single token\nauth_token = {legacy:?}\nlisten = \"127.0.0.1:0\"\n",
        state.display().to_string()
    );
    std::fs::write(&config, &text).unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o640)).unwrap();

    let mut d = Daemon::start_with(dir.clone(), config.clone(), state.clone(), &[]);
    d.get("/api/v1/sessions", legacy).expect(200);
    let migrated = std::fs::read_to_string(&config).unwrap();
    assert!(migrated.contains("# operator's comment") && migrated.contains("# inline comment"));
    assert!(!migrated.contains("auth_token ="));
    assert!(migrated.contains("name = \"legacy-auth-token\""));
    assert!(migrated.contains("scope = \"admin\""));
    assert_eq!(
        std::fs::metadata(&config).unwrap().permissions().mode() & 0o777,
        0o640
    );
    assert_eq!(d.stop(), 0);

    let mut d2 = Daemon::start_with(dir.clone(), config.clone(), state.clone(), &[]);
    d2.get("/api/v1/sessions", legacy).expect(200);
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        migrated,
        "second start changes nothing"
    );
    assert_eq!(d2.stop(), 0);
    let out = run(&["validate", "-c", config.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn dropins_merge_in_order() {
    let dir = temp_dir("dropins");
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(&config, base_config(&state)).unwrap();
    std::fs::create_dir_all(dir.join("conf.d")).unwrap();
    std::fs::write(
        dir.join("conf.d/20-extra.toml"),
        "[[webui.tokens]]\nname = \"extra\"\ntoken = \"extra-token-0123456789\"\nscope = \"read\"\n[webui]\nsession_idle_minutes = 5\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("conf.d/10-first.toml"),
        "[webui]\nsession_idle_minutes = 99\n",
    )
    .unwrap();
    std::fs::write(dir.join("conf.d/ignored.txt"), "garbage = [").unwrap();
    let out = run(&["validate", "-c", config.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.starts_with("OK: ") && stdout.contains("3 files") && stdout.contains("3 API tokens"),
        "{stdout}"
    );
    let d = Daemon::start_with(dir, config, state, &[]);
    d.get("/api/v1/status", "extra-token-0123456789")
        .expect(200);
    d.get("/api/v1/sessions", "extra-token-0123456789")
        .expect(403);
}

#[test]
fn validate_reports_each_error_with_its_key() {
    let dir = temp_dir("validate");
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        "state_path = \"/var/lib/svc\"\nbogus = true\n[webui]\nlisten = \"nowhere\"\n[[webui.tokens]]\nname = \"a\"\ntoken = \"aaaaaaaaaaaaaaaaaaaa\"\nscope = \"admin\"\n[[webui.tokens]]\nname = \"b\"\ntoken = \"bbbbbbbbbbbbbbbbbbbbbb\"\nscope = \"superuser\"\n[[webui.tokens]]\nname = \"a\"\ntoken = \"short\"\nscope = \"read\"\n",
    )
    .unwrap();
    let out = run(&["validate", "-c", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines.contains(&"webui.tokens[1].scope: must be \"admin\" or \"read\""),
        "{stdout}"
    );
    assert!(lines.contains(&"bogus: unknown key"), "{stdout}");
    assert!(
        lines.iter().any(|l| l.starts_with("webui.listen: ")),
        "{stdout}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("webui.tokens[2].name: duplicate token name")),
        "{stdout}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("webui.tokens[2].token: must be at least 16")),
        "{stdout}"
    );
    assert_eq!(lines.len(), 5, "{stdout}");

    std::fs::write(&config, "[webui\nlisten=").unwrap();
    let out = run(&["validate", "-c", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);

    let out = run(&["validate", "-c", dir.join("missing.toml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("cannot read"));
}

#[test]
fn cli_usage_errors_exit_2_and_help_exits_0() {
    for args in [
        &["frobnicate"][..],
        &[][..],
        &["status", "--bogus"],
        &["validate", "extra"],
        &["daemon", "-x"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty(), "usage on stderr for {args:?}");
        assert!(out.stdout.is_empty());
    }
    for sub in ["daemon", "validate", "status", "version"] {
        let out = run(&[sub, "--help"]);
        assert_eq!(out.status.code(), Some(0), "{sub}");
        assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("svc {sub}")));
    }
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let out = run(&["version"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("svc {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn one_flag_table_parses_helps_and_generates() {
    // A verb-specific flag given to another verb is refused, not ignored.
    let out = run(&["firewall", "unblock", "192.0.2.1", "--for", "4s"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .starts_with("svc firewall: --for does not apply to unblock\n"));
    let out = run(&["status", "--dev", "-c", "/nonexistent.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--dev and --config cannot be combined"));
    // Completions and the man page come from the same table as --help.
    for shell in ["bash", "zsh", "fish"] {
        let out = run(&["gen", "completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("webserver-integration") && text.contains("deny-subnet"),
            "{shell}"
        );
    }
    assert_eq!(run(&["gen", "completions", "tcsh"]).status.code(), Some(2));
    let dir = temp_dir("genman");
    let out = run(&["gen", "man", dir.join("man").to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(dir.join("man/svc.8")).unwrap();
    assert_eq!(page, include_str!("../../man/svc.8"));
}

#[test]
fn the_man_pages_render_without_a_warning() {
    // Packagers ship man/svc.8 and man/svc.toml.5 as committed (tests in src/cli/gen.rs
    // keep them equal to `svc gen man`); man-db must read them without a warning.
    let has_man = Command::new("man").arg("--version").output().is_ok();
    if !has_man {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "man (man-db) is needed under CI=true"
        );
        eprintln!("skipped: no man command (apt-get install man-db)");
        return;
    }
    for page in ["man/svc.8", "man/svc.toml.5"] {
        let out = Command::new("man")
            .args(["--warnings", "-E", "UTF-8", "-l", page])
            .env("MANWIDTH", "80")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{page}: {out:?}");
        assert!(!out.stdout.is_empty(), "{page} rendered nothing");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{page}: warnings");
    }
}

#[test]
fn status_cli_matches_the_api_snapshot() {
    let mut d = Daemon::start("statuscli", "");
    // binary_hash appears once a background thread has hashed the executable; wait for it
    // so both snapshots below have the same keys.
    wait_until(120, "binary_hash", || {
        d.get("/api/v1/status", READ)
            .json()
            .get("binary_hash")
            .map(|_| ())
    });
    let out = d.cli(&["status", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let api = d.get("/api/v1/status", READ).json();
    let snap = v["snapshot"].as_object().unwrap();
    let mut cli_keys: Vec<&String> = snap.keys().collect();
    let mut api_keys: Vec<&String> = api.as_object().unwrap().keys().collect();
    cli_keys.sort();
    api_keys.sort();
    assert_eq!(cli_keys, api_keys);
    assert_eq!(snap["started_at_token"], api["started_at_token"]);
    let human = d.cli(&["status"]);
    assert!(human.status.success());
    assert!(String::from_utf8_lossy(&human.stdout).contains("running"));
    let sock = d.state.join("svc.sock");
    assert_eq!(
        std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(d.stop(), 0);
    let out = d.cli(&["status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not running"));
}

#[test]
fn status_fields_follow_the_conventions() {
    let d = Daemon::start("statusfields", "");
    let s = d.get("/api/v1/status", READ).expect(200).json();
    for key in [
        "version",
        "uptime_seconds",
        "started_at_token",
        "capabilities",
        "config_hash",
        "store",
        "security_posture",
        "queues",
    ] {
        assert!(s.get(key).is_some(), "missing {key}");
    }
    assert!(s["queues"].is_object());
    assert!(s["uptime_seconds"].is_u64());
    let started = s["started_at"].as_str().unwrap();
    assert!(
        started.ends_with('Z') && started.len() == "2026-01-01T00:00:00.000000Z".len(),
        "{started}"
    );
    assert!(["healthy", "warning", "critical"].contains(&s["security_posture"].as_str().unwrap()));
    let caps = d.get("/api/v1/capabilities", READ).json();
    assert!(caps["items"].is_array());
    assert!(caps["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "confd.dropins.v1"));
    let comps = d.get("/api/v1/components", READ).json();
    assert_eq!(
        comps["total"].as_u64().unwrap() as usize,
        comps["items"].as_array().unwrap().len()
    );
    let m = d.get("/metrics", METRICS).text();
    for needle in [
        "svc_build_info{version=",
        "svc_uptime_seconds ",
        "svc_http_requests_total{route=",
        "svc_auth_failures_total ",
        "svc_http_open_connections ",
    ] {
        assert!(m.contains(needle), "{needle} missing from metrics");
    }
}

#[test]
fn status_answers_while_the_store_writer_is_blocked() {
    let d = Daemon::start("storelock", "");
    // Hold the database's write lock from outside, as a stuck writer would.
    let db = rusqlite::Connection::open(d.state.join("svc.db")).unwrap();
    db.execute_batch("BEGIN EXCLUSIVE").unwrap();
    // A login needs a store write: it waits on the lock in the background.
    let addr = d.addr;
    let cert = d.cert();
    let login = std::thread::spawn(move || {
        let mut c = Client::connect(addr, cert);
        c.send(
            "POST",
            "/login",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            format!("token={ADMIN}").as_bytes(),
        )
        .status
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    for _ in 0..5 {
        d.get("/api/v1/status", READ).expect(200);
        d.get("/api/v1/health", READ).expect(200);
    }
    let out = d.cli(&["status", "--json"]);
    assert!(out.status.success());
    assert!(
        !login.is_finished(),
        "the login should still be waiting on the store"
    );
    db.execute_batch("COMMIT").unwrap();
    let status = login.join().unwrap();
    assert!(status == 303 || status == 503, "login after lock: {status}");
}

#[test]
fn sigterm_exits_even_when_the_state_directory_was_removed() {
    let mut d = Daemon::start("rmstate", "");
    assert!(
        d.stdout()
            .iter()
            .any(|l| l.contains("listening on https://")),
        "{:?}",
        d.stdout()
    );
    assert!(Path::new(&format!("/proc/{}", d.pid())).exists());
    std::fs::remove_dir_all(&d.state).unwrap();
    assert_eq!(d.stop(), 0);
    assert!(d.stderr().contains("shutting down"), "{}", d.stderr());
}

/// Issue 41 item 6: "takes one" usage errors read without a stray article.
#[test]
fn takes_one_usage_errors_read_right() {
    for (args, want) in [
        (
            &["firewall", "allow", "192.0.2.1", "192.0.2.2"][..],
            "allow takes one IP address or range",
        ),
        (
            &["threat", "lookup", "192.0.2.1", "192.0.2.2"][..],
            "lookup takes one IP address",
        ),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("one an "), "{args:?}: {err}");
    }
}
