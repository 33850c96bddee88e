//! Settings through the API (issue 35): keys that run programs or write files stay in the
//! files root owns, a posted list is the value, and concurrent saves keep every key.

use crate::common::*;
use crate::firewall::post;

use serde_json::{json, Value};

fn items(d: &Daemon, section: &str) -> Vec<Value> {
    d.get(&format!("/api/v1/settings/{section}"), ADMIN)
        .expect(200)
        .json()["items"]
        .as_array()
        .cloned()
        .unwrap()
}

fn item(d: &Daemon, section: &str, key: &str) -> Value {
    items(d, section)
        .into_iter()
        .find(|i| i["key"] == key)
        .unwrap_or_else(|| panic!("no {section}.{key}"))
}

/// `waf.reload_command` (a program run as root), `waf.overrides_file` (a file the daemon
/// overwrites), `challenge.reload_command`, `challenge.apache_file` and `firewall.nft_path`:
/// a save naming one answers 400 naming the key and writes nothing; GET marks them
/// `file_only`, and keys the API may set are not marked.
#[test]
fn a_save_naming_a_program_or_a_written_file_is_refused_and_shown_file_only() {
    let d = start_in_dir(temp_dir("settings-fileonly"), "", &[]);
    for (section, field, value) in [
        (
            "waf",
            "reload_command",
            json!(["/bin/sh", "-c", "id > /tmp/svc-pwned"]),
        ),
        ("waf", "overrides_file", json!("/etc/passwd")),
        ("waf", "rules_file", json!("/etc/shadow")),
        ("challenge", "reload_command", json!("/bin/sh -c id")),
        ("challenge", "apache_file", json!("/etc/cron.d/x")),
        ("firewall", "nft_path", json!("/tmp/nft")),
    ] {
        let r = post(
            &d,
            &format!("/api/v1/settings/{section}"),
            ADMIN,
            json!({ field: value }),
        );
        r.expect(400);
        let v = r.json();
        assert!(v["error"].is_string(), "{v}");
        let errors = v["errors"].as_array().cloned().unwrap();
        assert_eq!(errors[0]["field"], field, "{v}");
        let m = errors[0]["message"].as_str().unwrap();
        assert!(m.contains(&format!("{section}.{field}")), "{m}");
        assert!(!d.dir.join(format!("conf.d/90-api-{section}.toml")).exists());
        assert_eq!(item(&d, section, field)["file_only"], true);
    }
    assert_eq!(item(&d, "alerts", "max_per_hour")["file_only"], false);
}

/// With `threat.watched_countries = ["RU"]` in the main file, posting `["CN"]` makes it
/// `["CN"]` (not both), and posting `[]` empties it; the loader at a restart agrees.
#[test]
fn a_posted_list_is_the_value_not_appended() {
    let mut d = start_in_dir(
        temp_dir("settings-lists"),
        "[threat]\nwatched_countries = [\"RU\"]\n",
        &[],
    );
    let path = "/api/v1/settings/threat";
    post(&d, path, ADMIN, json!({ "watched_countries": ["CN"] })).expect(200);
    assert_eq!(
        item(&d, "threat", "watched_countries")["value"],
        json!(["CN"])
    );
    post(&d, path, ADMIN, json!({ "watched_countries": [] })).expect(200);
    assert_eq!(item(&d, "threat", "watched_countries")["value"], json!([]));
    post(
        &d,
        path,
        ADMIN,
        json!({ "watched_countries": ["CN", "IR"] }),
    )
    .expect(200);
    assert_eq!(d.stop(), 0);
    let d2 = Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), &[]);
    assert_eq!(
        item(&d2, "threat", "watched_countries")["value"],
        json!(["CN", "IR"])
    );
}

/// Six saves of six different keys of one section, sent at once from six threads: all
/// answer 200 and all six values are in effect afterwards.
#[test]
fn six_concurrent_saves_of_one_section_keep_every_key() {
    let d = start_in_dir(temp_dir("settings-concurrent"), "", &[]);
    let changes = [
        ("max_records", 5_001),
        ("half_life_hours", 7),
        ("event_retention_days", 9),
        ("max_events", 5_003),
        ("watched_country_score", 33),
        ("undo_minutes", 17),
    ];
    std::thread::scope(|s| {
        for (k, v) in changes {
            let d = &d;
            s.spawn(move || {
                post(d, "/api/v1/settings/threat", ADMIN, json!({ k: v })).expect(200);
            });
        }
    });
    let shown = items(&d, "threat");
    for (k, v) in changes {
        let i = shown.iter().find(|i| i["key"] == k).unwrap();
        assert_eq!(i["value"], json!(v), "{k} lost: {i}");
    }
}

/// Path keys take absolute paths of at most 4,096 bytes without control characters, lists
/// of paths at most 256 entries, from a save as from the files.
#[test]
fn path_keys_are_absolute_bounded_and_without_control_characters() {
    let d = start_in_dir(temp_dir("settings-paths"), "", &[]);
    let long = format!("/{}", "a".repeat(5_000));
    let many: Vec<String> = (0..5_000).map(|i| format!("/var/log/a{i}.log")).collect();
    for (section, field, value) in [
        ("mail", "spool_path", json!("var/spool/exim")),
        ("mail", "spool_path", json!("/var/spool\n[webui]\nx = 1")),
        ("mail", "clamd_socket", json!("/run/clamd\u{0}.sock")),
        ("cms", "vulnerability_file", json!(long)),
        ("logs", "auth", json!(["relative.log"])),
        ("logs", "auth", json!(many)),
    ] {
        let r = post(
            &d,
            &format!("/api/v1/settings/{section}"),
            ADMIN,
            json!({ field: value }),
        );
        r.expect(400);
        let v = r.json();
        let errors = v["errors"].as_array().cloned().unwrap_or_default();
        assert!(
            errors
                .iter()
                .any(|e| e["field"].as_str().unwrap_or("").starts_with(field)),
            "{section}.{field}: {v}"
        );
        assert!(!d.dir.join(format!("conf.d/90-api-{section}.toml")).exists());
    }
    // The same rules hold for the files: `svc validate` refuses a relative spool path.
    let bad = d.dir.join("bad.toml");
    let text = std::fs::read_to_string(&d.config).unwrap();
    std::fs::write(&bad, format!("{text}[mail]\nspool_path = \"spool\"\n")).unwrap();
    let out = std::process::Command::new(svc_bin())
        .args(["validate", "-c"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("mail.spool_path"), "{said}");
}

/// A URL key's `user:pass@` is not shown by GET.
#[test]
fn a_url_with_userinfo_is_shown_redacted() {
    let d = start_in_dir(
        temp_dir("settings-userinfo"),
        "[cms]\nchecksums_url = \"https://bob:hunter2@checksums.example.org/core/\"\n",
        &[],
    );
    let shown = d.get("/api/v1/settings/cms", ADMIN).text();
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(
        shown.contains("https://***@checksums.example.org/core/"),
        "{shown}"
    );
}

/// A save while an unrelated hand-written drop-in does not parse answers 409 naming that
/// file (not 500), and writes nothing.
#[test]
fn a_save_beside_a_broken_dropin_answers_409_naming_the_file() {
    let d = start_in_dir(temp_dir("settings-broken"), "", &[]);
    std::fs::create_dir_all(d.dir.join("conf.d")).unwrap();
    std::fs::write(
        d.dir.join("conf.d/50-local.toml"),
        "[alerts\nmax_per_hour = 3\n",
    )
    .unwrap();
    let r = post(
        &d,
        "/api/v1/settings/threat",
        ADMIN,
        json!({ "undo_minutes": 5 }),
    );
    r.expect(409);
    let e = r.json()["error"].as_str().unwrap().to_string();
    assert!(e.contains("50-local.toml"), "{e}");
    assert!(!d.dir.join("conf.d/90-api-threat.toml").exists());
}

/// A save of a TLS pair that is not a certificate, or of a listen address the host does
/// not have, is refused (400 naming the key); a drop-in written by hand with such a pair
/// makes the restart route answer 409 with the reason, and the daemon keeps running;
/// `svc validate` fails on it too.
#[test]
fn a_restart_into_a_configuration_that_would_not_start_is_refused() {
    let d = start_in_dir(temp_dir("settings-unstartable"), "", &[]);
    let junk = d.dir.join("junk.pem");
    std::fs::write(&junk, b"not a certificate").unwrap();
    let j = junk.display().to_string();
    let r = post(
        &d,
        "/api/v1/settings/webui",
        ADMIN,
        json!({ "tls_cert": j, "tls_key": j }),
    );
    r.expect(400);
    assert!(r.text().contains("TLS pair"), "{}", r.text());
    let r = post(
        &d,
        "/api/v1/settings/webui",
        ADMIN,
        json!({ "listen": "192.0.2.77:9443" }),
    );
    r.expect(400);
    assert!(r.text().contains("listen"), "{}", r.text());
    assert!(!d.dir.join("conf.d/90-api-webui.toml").exists());
    std::fs::create_dir_all(d.dir.join("conf.d")).unwrap();
    std::fs::write(
        d.dir.join("conf.d/50-tls.toml"),
        format!("[webui]\ntls_cert = {j:?}\ntls_key = {j:?}\n"),
    )
    .unwrap();
    let r = post(&d, "/api/v1/settings/restart", ADMIN, json!({}));
    r.expect(409);
    assert!(r.text().contains("TLS pair"), "{}", r.text());
    d.get("/api/v1/status", READ).expect(200);
    let out = std::process::Command::new(svc_bin())
        .args(["validate", "-c"])
        .arg(&d.config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("webui.tls_cert"));
}

/// Issue 35 item 6: a restart into a configuration the route could not prove wrong (a
/// listen address another process holds passes its check, as the daemon's own would) does
/// not kill the daemon: the re-executed process fails to bind, logs why, and starts again
/// on the last configuration that started, showing it as a fault.
#[test]
fn a_restart_that_fails_to_start_falls_back_to_the_last_configuration_that_started() {
    let d = start_in_dir(temp_dir("settings-fallback"), "", &[]);
    let saved = d.state.join("last-started.toml");
    let meta = std::fs::metadata(&saved).expect("the configuration that started is kept");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o600
    );
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    std::fs::create_dir_all(d.dir.join("conf.d")).unwrap();
    std::fs::write(
        d.dir.join("conf.d/50-listen.toml"),
        format!("[webui]\nlisten = \"127.0.0.1:{port}\"\n"),
    )
    .unwrap();
    let pid = d.pid();
    post(&d, "/api/v1/settings/restart", ADMIN, json!({})).expect(202);
    let addr = wait_until(60, "the fallback daemon's listening line", || {
        let lines: Vec<String> = d
            .stdout()
            .into_iter()
            .filter(|l| l.contains("listening on https://"))
            .collect();
        (lines.len() >= 2).then(|| {
            let rest = lines[1].split("listening on https://").nth(1).unwrap();
            rest.split_whitespace()
                .next()
                .unwrap()
                .parse::<std::net::SocketAddr>()
                .unwrap()
        })
    });
    assert_ne!(addr.port(), port, "not on the address it could not bind");
    let health = wait_until(30, "the fallback daemon to answer", || {
        let mut c = Client::connect(addr, d.cert());
        let r = c.send(
            "GET",
            "/api/v1/health",
            &[("Authorization", &format!("Bearer {READ}"))],
            b"",
        );
        (r.status == 200).then(|| r.json())
    });
    let faults = health["faults"].to_string();
    assert!(
        faults.contains("last configuration that started"),
        "{health}"
    );
    assert_eq!(d.pid(), pid, "the same process, executed again");
    let log = std::fs::read_to_string(d.dir.join("stderr.log")).unwrap_or_default();
    assert!(log.contains("did not start"), "{log}");
    drop(taken);
}
