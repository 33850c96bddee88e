//! The data API through the real binary: scopes and envelopes of every data route, enriched
//! findings (limit, truncation, version polling, GeoIP, block_ip), finding detail with its
//! action history, suppressions (engine effect, scopes, CSRF, audit), quarantine previews,
//! accounts, performance and hardening.

use crate::common::mmdb;
use crate::common::*;

use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

const WEBSHELL: &str = "<?php\n// innocent looking header\n@eval($_POST['cmd']);\n?>\n";

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// Starts a daemon whose file watcher covers `{dir}/www` and whose checks read
/// `{dir}/fixture`; `prepare` runs on the directory first (fixture files, databases).
fn start(tag: &str, extra: &str, prepare: impl FnOnce(&Path) -> String) -> Daemon {
    let dir = temp_dir(tag);
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::create_dir_all(dir.join("fixture")).unwrap();
    let more = prepare(&dir);
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        format!(
            "{}[files]\nwatch = [{www:?}]\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\nroot = {root:?}\n{extra}{more}",
            base_config(&state),
            www = dir.join("www").display().to_string(),
            root = dir.join("fixture").display().to_string(),
        ),
    )
    .unwrap();
    Daemon::start_with(dir, config, state, &[])
}

/// Stops `d`, runs `sql` on its store, and starts it again on the same files.
fn with_rows(mut d: Daemon, sql: &str) -> Daemon {
    assert_eq!(d.stop(), 0);
    {
        let db = rusqlite::Connection::open(d.state.join("svc.db")).unwrap();
        db.execute_batch(sql).unwrap();
    }
    Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), &[])
}

/// An `active_findings` row (seen `ago_s` seconds ago) as SQL.
#[allow(clippy::too_many_arguments)]
fn active_row(
    check: &str,
    message: &str,
    level: u8,
    account: Option<&str>,
    ip: Option<&str>,
    path: Option<&str>,
    ago_s: i64,
) -> String {
    let q = |v: Option<&str>| v.map_or("NULL".to_string(), |s| format!("'{s}'"));
    let t = now_us() - ago_s * 1_000_000;
    format!(
        "INSERT INTO active_findings(check_name, message, severity, details, account, ip, path, first_seen, last_seen, count)
         VALUES ('{check}', '{message}', {level}, 'd', {}, {}, {}, {t}, {t}, 1);\n",
        q(account),
        q(ip),
        q(path)
    )
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn post_json(d: &Daemon, path: &str, token: &str, body: &str) -> Resp {
    let auth = bearer(token);
    d.req(
        "POST",
        path,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        body.as_bytes(),
    )
}

fn items(v: &Value) -> &Vec<Value> {
    v["items"].as_array().expect("items is a list")
}

fn write_geo_dbs(dir: &Path) -> String {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let city = dir.join("city.mmdb");
    let asn = dir.join("asn.mmdb");
    std::fs::write(
        &city,
        mmdb::build(
            6,
            "GeoLite2-City",
            &[(
                ip("203.0.113.0"),
                24,
                mmdb::city_record("AU", "Australia", "Sydney"),
            )],
        ),
    )
    .unwrap();
    std::fs::write(
        &asn,
        mmdb::build(
            4,
            "GeoLite2-ASN",
            &[(
                ip("203.0.113.0"),
                24,
                mmdb::asn_record(64_500, "Example Transit"),
            )],
        ),
    )
    .unwrap();
    format!(
        "[geoip]\ncity_db = {:?}\nasn_db = {:?}\n",
        city.display().to_string(),
        asn.display().to_string()
    )
}

fn write_accounts_fixture(dir: &Path) {
    let fx = dir.join("fixture");
    std::fs::create_dir_all(fx.join("etc")).unwrap();
    std::fs::write(
        fx.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/bash\nalice:x:1234:1234::/home/alice:/bin/bash\nbob:x:1235:1235::/home/bob:/bin/bash\n",
    )
    .unwrap();
    for (rel, uid) in [
        ("var/www", 0),
        ("var/www/site-alice", 1234),
        ("var/www/shared", 0),
        ("home/bob/public_html", 1235),
        ("home/bob/public_html/wp-content", 1235),
    ] {
        let p = fx.join(rel);
        std::fs::create_dir_all(&p).unwrap();
        std::os::unix::fs::chown(&p, Some(uid), Some(uid)).unwrap();
    }
}

/// The data daemon: GeoIP configured, an accounts fixture, and rows inserted into the store.
fn data_daemon(tag: &str) -> Daemon {
    let d = start(tag, "", |dir| {
        write_accounts_fixture(dir);
        write_geo_dbs(dir)
    });
    let t = now_us();
    let mut sql = String::new();
    sql += &active_row(
        "ssh_bruteforce",
        "SSH brute force from 203.0.113.9",
        1,
        Some("root"),
        Some("203.0.113.9"),
        None,
        30,
    );
    sql += &active_row(
        "suspicious_cron",
        "cron downloads from 203.0.113.7",
        2,
        None,
        Some("203.0.113.7"),
        None,
        20,
    );
    sql += &active_row(
        "world_writable_php",
        "world-writable PHP file /var/www/site-alice/index.php",
        0,
        Some("alice"),
        None,
        Some("/var/www/site-alice/index.php"),
        10,
    );
    sql += &active_row(
        "uid0_account",
        "extra UID 0 account: toor",
        2,
        Some("toor"),
        None,
        Some("/etc/passwd"),
        5,
    );
    // No account: the enriched route names the owner of its path.
    let site = d
        .dir
        .join("fixture/var/www/site-alice")
        .display()
        .to_string();
    sql += &active_row(
        "obfuscated_php",
        "Obfuscated PHP signature x in site-alice",
        0,
        None,
        None,
        Some(&site),
        2,
    );
    sql += &format!(
        "INSERT INTO history(at, check_name, severity, message, details, account) VALUES ({}, 'suid_unexpected', 1, 'old suid file', 'first', 'alice');
         INSERT INTO history(at, check_name, severity, message, details, account) VALUES ({}, 'suid_unexpected', 2, 'old suid file', 'second', 'alice');
         INSERT INTO blocked_ips(ip, reason, source, created, expires) VALUES ('203.0.113.9', 'ssh brute force', 'auto', {t}, {});
         INSERT INTO whitelist(ip, reason, created, created_by) VALUES ('192.0.2.10', 'office', {t}, 'ops-admin');
         INSERT INTO db_object_backups(key, account, database_name, kind, name, statement, created)
           VALUES ('wp_alice/trigger/evil', 'alice', 'wp_alice', 'trigger', 'evil', 'CREATE TRIGGER evil BEFORE INSERT ON wp_users FOR EACH ROW SET @x = 1', {t});",
        t - 7_200_000_000,
        t - 3_600_000_000,
        t + 86_400_000_000,
    );
    with_rows(d, &sql)
}

struct RouteCase {
    path: &'static str,
    admin: bool,
    /// Keys the admin answer must carry.
    keys: &'static [&'static str],
}

const ROUTES: &[RouteCase] = &[
    RouteCase {
        path: "/api/v1/findings/enriched",
        admin: false,
        keys: &[
            "items",
            "total",
            "version",
            "check_types",
            "severity_counts",
        ],
    },
    RouteCase {
        path: "/api/v1/finding-detail?check=ssh_bruteforce&message=SSH%20brute%20force%20from%20203.0.113.9",
        admin: false,
        keys: &["check", "message", "active", "actions", "first_seen"],
    },
    RouteCase {
        path: "/api/v1/blocked-ips",
        admin: false,
        keys: &["items", "total"],
    },
    RouteCase {
        path: "/api/v1/accounts",
        admin: false,
        keys: &["items", "total", "offset", "limit", "truncated"],
    },
    RouteCase {
        path: "/api/v1/account?name=alice",
        admin: true,
        keys: &["name", "findings", "quarantine", "history"],
    },
    RouteCase {
        path: "/api/v1/audit",
        admin: true,
        keys: &["items", "limit", "truncated"],
    },
    RouteCase {
        path: "/api/v1/export",
        admin: true,
        keys: &["suppressions", "whitelist", "exported_at"],
    },
    RouteCase {
        path: "/api/v1/suppressions",
        admin: true,
        keys: &["items", "total"],
    },
    RouteCase {
        path: "/api/v1/quarantine",
        admin: true,
        keys: &["items", "total"],
    },
    RouteCase {
        path: "/api/v1/db-object-backups",
        admin: true,
        keys: &["items", "total"],
    },
    RouteCase {
        path: "/api/v1/db-object-backup-preview?key=wp_alice/trigger/evil",
        admin: true,
        keys: &["key", "kind", "name", "database", "statement", "truncated"],
    },
    RouteCase {
        path: "/api/v1/performance",
        admin: true,
        keys: &["cpu", "memory", "threads", "store", "queues", "processed"],
    },
    RouteCase {
        path: "/api/v1/hardening",
        admin: true,
        // No scan has stored a report in these daemons (schedules off): the route says so
        // and starts no work.
        keys: &["report", "reason"],
    },
];

#[test]
fn every_data_route_answers_its_scope_and_envelope() {
    let d = data_daemon("scopes");
    for r in ROUTES {
        d.req("GET", r.path, &[], b"").expect(401);
        d.get(r.path, METRICS).expect(401);
        let read = d.get(r.path, READ);
        if r.admin {
            read.expect(403);
        } else {
            read.expect(200);
        }
        let v = d.get(r.path, ADMIN).expect(200).json();
        for k in r.keys {
            assert!(v.get(*k).is_some(), "{} lacks {k}: {v}", r.path);
        }
        if v.get("items").is_some() && r.path != "/api/v1/hardening" {
            assert!(v["items"].is_array(), "{}: {v}", r.path);
        }
        let auth = bearer(ADMIN);
        let post = d.req("POST", r.path, &[("Authorization", &auth)], b"{}");
        if r.path == "/api/v1/suppressions" {
            post.expect(400);
        } else {
            post.expect(405);
            assert_eq!(post.header("allow"), Some("GET, HEAD"), "{}", r.path);
        }
        d.req("DELETE", r.path, &[("Authorization", &auth)], b"")
            .expect(405);
    }
    // Audit: limit and truncated, no total.
    let a = d.get("/api/v1/audit", ADMIN).json();
    assert!(a.get("total").is_none(), "{a}");
    assert_eq!(a["limit"], 200);
    d.get("/api/v1/audit?limit=0", ADMIN).expect(400);
    d.get("/api/v1/audit?limit=201", ADMIN).expect(400);
    assert!(d.get("/api/v1/audit?limit=x", ADMIN).json()["error"]
        .as_str()
        .unwrap()
        .contains("limit"));
    // Blocked IPs carry reason and expiry.
    let b = d.get("/api/v1/blocked-ips", READ).json();
    assert_eq!(b["total"], 1);
    let row = &items(&b)[0];
    assert_eq!(row["ip"], "203.0.113.9");
    assert_eq!(row["source"], "auto");
    assert!(row["expires_at"].as_str().unwrap().ends_with('Z'));
    assert!(row["created_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(row["permanent"], false);
    // Export.
    let e = d.get("/api/v1/export", ADMIN).json();
    assert_eq!(e["whitelist"][0]["ip"], "192.0.2.10");
    assert_eq!(e["suppressions"], serde_json::json!([]));
    // DB-object backups.
    let list = d.get("/api/v1/db-object-backups", ADMIN).json();
    assert_eq!(list["total"], 1);
    assert!(items(&list)[0].get("statement").is_none());
    let p = d
        .get(
            "/api/v1/db-object-backup-preview?key=wp_alice/trigger/evil",
            ADMIN,
        )
        .json();
    assert_eq!(p["kind"], "trigger");
    assert_eq!(p["database"], "wp_alice");
    assert_eq!(p["truncated"], false);
    assert!(p["statement"]
        .as_str()
        .unwrap()
        .starts_with("CREATE TRIGGER"));
    d.get("/api/v1/db-object-backup-preview?key=nope", ADMIN)
        .expect(404);
    d.get("/api/v1/db-object-backup-preview", ADMIN).expect(400);
    // Performance.
    let perf = d.get("/api/v1/performance", ADMIN).json();
    assert!(perf["cpu"]["user_seconds"].as_f64().is_some(), "{perf}");
    assert!(perf["memory"]["rss_bytes"].as_u64().unwrap() > 1024 * 1024);
    assert!(perf["threads"].as_u64().unwrap() >= 4);
    assert!(perf["store"]["db_bytes"].as_u64().unwrap() > 0);
    let ingest = &perf["queues"]["findings.ingest"];
    for k in ["waiting", "running", "dropped_total", "processed_total"] {
        assert!(ingest.get(k).is_some(), "findings.ingest lacks {k}: {perf}");
    }
    assert!(perf["queues"]["fanotify.analyzer"]
        .get("processed_total")
        .is_some());
    assert!(perf["processed"]["store_writes"].as_u64().is_some());
    assert_eq!(perf["geoip"]["city_db"]["database_type"], "GeoLite2-City");
    // Hardening: nothing stored yet, no work started; `svc check` stores one, then the route
    // answers that stored report.
    let none = d.get("/api/v1/hardening", ADMIN).json();
    assert_eq!(none["report"], serde_json::Value::Null, "{none}");
    let out = d.cli(&["check"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let h1 = d.get("/api/v1/hardening", ADMIN).json();
    let h2 = d.get("/api/v1/hardening", ADMIN).json();
    assert_eq!(h1["generated_at"], h2["generated_at"]);
    assert!(h1["summary"].is_object(), "{h1}");
}

#[test]
fn enriched_findings_order_limit_version_geo_and_block_ip() {
    let d = data_daemon("enriched");
    let all = d.get("/api/v1/findings/enriched", READ).expect(200).json();
    assert_eq!(all["total"], 5);
    // Without limit: the default page (1,000).
    assert_eq!(
        (all["limit"].as_u64(), all["offset"].as_u64()),
        (Some(1000), Some(0))
    );
    assert_eq!(all["truncated"], false);
    assert_eq!(
        all["severity_counts"],
        serde_json::json!({ "critical": 2, "high": 1, "warning": 2 })
    );
    assert_eq!(
        all["check_types"]["ssh_bruteforce"],
        serde_json::json!({ "count": 1, "severity": "HIGH" })
    );
    assert_eq!(all["check_types"]["uid0_account"]["severity"], "CRITICAL");
    let by_check = |v: &Value, c: &str| {
        items(v)
            .iter()
            .find(|f| f["check"] == c)
            .cloned()
            .unwrap_or_else(|| panic!("no {c}: {v}"))
    };
    let ssh = by_check(&all, "ssh_bruteforce");
    assert_eq!(ssh["geo"]["country"], "AU");
    assert_eq!(ssh["geo"]["city"], "Sydney");
    assert_eq!(ssh["geo"]["asn"], 64_500);
    assert_eq!(ssh["geo"]["org"], "Example Transit");
    assert_eq!(ssh["block_ip"], "203.0.113.9");
    assert!(ssh["fix"].as_str().unwrap().contains("block_ip"));
    let cron = by_check(&all, "suspicious_cron");
    assert_eq!(
        cron["geo"]["country"], "AU",
        "geo for any finding with an ip"
    );
    assert!(cron.get("block_ip").is_none(), "not an attacker address");
    let php = by_check(&all, "world_writable_php");
    assert!(php.get("geo").is_none() && php.get("block_ip").is_none());
    assert_eq!(php["account"], "alice");
    assert!(!php["fix"].as_str().unwrap().is_empty());
    let derived = by_check(&all, "obfuscated_php");
    assert_eq!(derived["account"], "alice", "owner of the path");

    // limit: severity then newest, even when everything fits.
    let two = d.get("/api/v1/findings/enriched?limit=2", READ).json();
    assert_eq!(
        (two["limit"].as_u64(), two["offset"].as_u64()),
        (Some(2), Some(0))
    );
    assert_eq!(two["truncated"], true);
    assert_eq!(two["total"], 5);
    assert_eq!(
        two["severity_counts"]["warning"], 2,
        "counts cover all rows"
    );
    let order: Vec<&str> = items(&two)
        .iter()
        .map(|f| f["check"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["uid0_account", "suspicious_cron"]);
    let fit = d.get("/api/v1/findings/enriched?limit=10", READ).json();
    assert_eq!(fit["truncated"], false);
    let order: Vec<&str> = items(&fit)
        .iter()
        .map(|f| f["check"].as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        [
            "uid0_account",
            "suspicious_cron",
            "ssh_bruteforce",
            "obfuscated_php",
            "world_writable_php"
        ]
    );
    for bad in ["abc", "0", "-1", "1.5", "10001", "100001"] {
        let r = d.get(&format!("/api/v1/findings/enriched?limit={bad}"), READ);
        r.expect(400);
        assert!(r.json()["error"].as_str().unwrap().contains("limit"));
    }
    d.get("/api/v1/findings/enriched?fields=items", READ)
        .expect(400);

    // fields=version: only {version, total}; it moves when the set changes.
    let v1 = d
        .get("/api/v1/findings/enriched?fields=version", READ)
        .expect(200)
        .json();
    let keys: Vec<&String> = v1.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["total", "version"]);
    assert_eq!(v1["total"], 5);
    assert_eq!(v1["version"], all["version"]);
    post_json(
        &d,
        "/api/v1/suppressions",
        ADMIN,
        r#"{"check":"suspicious_cron","reason":"known backup job"}"#,
    )
    .expect(201);
    let v2 = d
        .get("/api/v1/findings/enriched?fields=version", READ)
        .json();
    assert_eq!(v2["total"], 4);
    assert!(v2["version"].as_u64() > v1["version"].as_u64());

    // Accounts: owners of web roots, one level below a shared root, root excluded.
    let acc = d.get("/api/v1/accounts", READ).expect(200).json();
    let names: Vec<&str> = items(&acc)
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alice", "bob"], "{acc}");
    let alice = &items(&acc)[0];
    assert_eq!(alice["uid"], 1234);
    assert_eq!(alice["findings_active"], 1);
    let roots = alice["web_roots"].as_array().unwrap();
    assert_eq!(roots.len(), 1);
    assert!(roots[0].as_str().unwrap().ends_with("/var/www/site-alice"));
    let bob = &items(&acc)[1];
    assert_eq!(bob["web_roots"].as_array().unwrap().len(), 1, "{bob}");
    assert_eq!(bob["findings_active"], 0);
    // Account detail.
    let a = d
        .get("/api/v1/account?name=alice", ADMIN)
        .expect(200)
        .json();
    assert_eq!(a["findings"].as_array().unwrap().len(), 1);
    assert_eq!(a["history"]["total"], 2);
    assert_eq!(a["history"]["items"][0]["details"], "second");
    assert_eq!(a["quarantine"], serde_json::json!([]));
    assert_eq!(a["uid"], 1234);
    let toor = d.get("/api/v1/account?name=toor", ADMIN).expect(200).json();
    assert_eq!(toor["findings"][0]["check"], "uid0_account");
    assert!(toor.get("uid").is_none());
    d.get("/api/v1/account?name=nobody-at-all", ADMIN)
        .expect(404);
    let missing = d.get("/api/v1/account", ADMIN);
    missing.expect(400);
    assert!(missing.json()["error"].as_str().unwrap().contains("name"));

    // Finding detail of a finding that is only in history.
    let old = d
        .get(
            "/api/v1/finding-detail?check=suid_unexpected&message=old%20suid%20file",
            READ,
        )
        .expect(200)
        .json();
    assert_eq!(old["active"], false);
    assert_eq!(old["count"], 2);
    assert_eq!(old["severity"], "CRITICAL");
    let acts = old["actions"].as_array().unwrap();
    assert_eq!(acts.len(), 2);
    assert_eq!(acts[0]["action"], "dispatch");
    assert_eq!(acts[0]["severity"], "CRITICAL");
    assert!(acts[0]["at"].as_str() > acts[1]["at"].as_str());
    // An active attacker finding shows its block.
    let ssh = d
        .get(
            "/api/v1/finding-detail?check=ssh_bruteforce&message=SSH%20brute%20force%20from%20203.0.113.9",
            READ,
        )
        .json();
    assert_eq!(ssh["active"], true);
    assert!(ssh["actions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["action"] == "block" && a["source"] == "auto"));
    // The suppressed cron finding: no longer active, its history empty, so unknown.
    d.get(
        "/api/v1/finding-detail?check=suspicious_cron&message=cron%20downloads%20from%20203.0.113.7",
        READ,
    )
    .expect(404);
    d.get("/api/v1/finding-detail?check=x&message=y", READ)
        .expect(404);
    d.get("/api/v1/finding-detail?check=x", READ).expect(400);
    d.get("/api/v1/finding-detail?message=y", READ).expect(400);
}

#[test]
fn quarantine_preview_detail_and_suppression_lifecycle() {
    let d = start("suppress", "[auto_response]\nquarantine = true\n", |_| {
        String::new()
    });
    let shell = d.dir.join("www/uploads/shell.php");
    std::fs::create_dir_all(shell.parent().unwrap()).unwrap();
    std::fs::write(&shell, WEBSHELL).unwrap();
    let shown = shell.display().to_string();
    let finding = wait_until(20, "the webshell finding", || {
        let v = d.get("/api/v1/findings", READ).json();
        items(&v)
            .iter()
            .find(|f| f["path"] == shown && f["check"] == "webshell")
            .cloned()
    });
    wait_until(20, "quarantine", || (!shell.exists()).then_some(()));
    let q = wait_until(20, "the quarantine row", || {
        let v = d.get("/api/v1/quarantine", ADMIN).expect(200).json();
        items(&v).first().cloned()
    });
    assert_eq!(q["original_path"], shown);
    let id = q["id"].as_str().unwrap().to_string();

    // Preview of the quarantined copy.
    let p = d
        .get(&format!("/api/v1/quarantine-preview?id={id}"), ADMIN)
        .expect(200)
        .json();
    assert_eq!(p["encoding"], "utf-8");
    assert_eq!(p["content"], WEBSHELL);
    assert_eq!(p["size"], WEBSHELL.len());
    assert_eq!(p["preview_bytes"], WEBSHELL.len());
    assert_eq!(p["truncated"], false);
    assert_eq!(p["original_path"], shown);
    assert_eq!(p["sha256"].as_str().unwrap().len(), 64);
    let preview = format!("/api/v1/quarantine-preview?id={id}");
    d.get(&preview, READ).expect(403);
    d.get(&preview, METRICS).expect(401);
    d.req("GET", &preview, &[], b"").expect(401);
    let auth = bearer(ADMIN);
    d.req("POST", &preview, &[("Authorization", &auth)], b"")
        .expect(405);
    d.get("/api/v1/quarantine-preview?id=nope", ADMIN)
        .expect(404);
    d.get("/api/v1/quarantine-preview", ADMIN).expect(400);

    // Finding detail carries the dispatch and the quarantine.
    let check = finding["check"].as_str().unwrap().to_string();
    let message = finding["message"].as_str().unwrap().to_string();
    let qs = format!(
        "/api/v1/finding-detail?check={}&message={}",
        enc(&check),
        enc(&message)
    );
    let det = d.get(&qs, READ).expect(200).json();
    assert_eq!(det["active"], true);
    let kinds: Vec<&str> = det["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"quarantine"), "{det}");
    assert!(kinds.contains(&"dispatch"), "{det}");
    let qa = det["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "quarantine")
        .unwrap();
    assert_eq!(qa["id"], id.as_str());

    // Creating a suppression: read token 403, cookie without CSRF 403, bad body 400.
    let body = format!(
        r#"{{"check":"{check}","path_prefix":"{}","reason":"test upload","expires_hours":24}}"#,
        d.dir.join("www").display()
    );
    post_json(&d, "/api/v1/suppressions", READ, &body).expect(403);
    let (cookie, csrf) = login(&d, ADMIN);
    let ch = format!("svc_auth={cookie}");
    d.req(
        "POST",
        "/api/v1/suppressions",
        &[("Cookie", &ch), ("Content-Type", "application/json")],
        body.as_bytes(),
    )
    .expect(403);
    let bad = post_json(
        &d,
        "/api/v1/suppressions",
        ADMIN,
        r#"{"check":"webshell","ip":"not-an-ip"}"#,
    );
    bad.expect(400);
    let bad = bad.json();
    let fields: Vec<&str> = bad["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert!(
        fields.contains(&"ip") && fields.contains(&"reason"),
        "{bad}"
    );
    assert!(bad["error"]
        .as_str()
        .unwrap()
        .starts_with("invalid suppression: "));
    let created = d
        .req(
            "POST",
            "/api/v1/suppressions",
            &[
                ("Cookie", &ch),
                ("X-CSRF-Token", &csrf),
                ("Content-Type", "application/json"),
            ],
            body.as_bytes(),
        )
        .expect(201)
        .json();
    assert_eq!(created["ok"], true);
    assert_eq!(created["removed_active"], 1);
    let sid = created["id"].as_i64().unwrap();
    assert!(created["suppression"]["expires"].as_str().is_some());

    // The finding left the active set but stays in history.
    let v = d.get("/api/v1/findings", READ).json();
    let gone = |v: &Value| {
        items(v)
            .iter()
            .all(|f| f["path"] != shown || f["check"] != "webshell")
    };
    assert!(gone(&v), "{v}");
    // The rule names one check: the upload-directory finding of the same file stays.
    assert!(items(&v)
        .iter()
        .any(|f| f["path"] == shown && f["check"] == "php_in_uploads"));
    let db = rusqlite::Connection::open(d.state.join("svc.db")).unwrap();
    let hist = |db: &rusqlite::Connection| -> i64 {
        db.query_row(
            "SELECT count(*) FROM history WHERE check_name = ?1 AND path = ?2",
            [&check, &shown],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert!(hist(&db) >= 1);
    let active_rows: i64 = db
        .query_row(
            "SELECT count(*) FROM active_findings WHERE check_name = ?1 AND path = ?2",
            [&check, &shown],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(active_rows, 0);
    // A new dispatch of the same content is recorded in history only.
    let before = hist(&db);
    std::fs::write(&shell, WEBSHELL).unwrap();
    wait_until(20, "the second history row", || {
        (hist(&db) > before).then_some(())
    });
    let v = d.get("/api/v1/findings", READ).json();
    assert!(gone(&v), "{v}");
    let det = d.get(&qs, READ).expect(200).json();
    assert_eq!(det["active"], false);
    assert_eq!(det["suppressed"], true);
    assert!(det["actions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["action"] == "suppress" && a["id"] == sid));
    let listed = d.get("/api/v1/suppressions", ADMIN).json();
    assert_eq!(listed["total"], 1);
    assert_eq!(items(&listed)[0]["in_force"], true);
    assert_eq!(items(&listed)[0]["created_by"], "ops-admin");
    let exported = d.get("/api/v1/export", ADMIN).json();
    assert_eq!(exported["suppressions"][0]["id"], sid);

    // Delete: unknown 404, read token 403, then 200.
    let rauth = bearer(READ);
    d.req(
        "DELETE",
        "/api/v1/suppressions/99999",
        &[("Authorization", &auth)],
        b"",
    )
    .expect(404);
    d.req(
        "DELETE",
        "/api/v1/suppressions/abc",
        &[("Authorization", &auth)],
        b"",
    )
    .expect(400);
    let path = format!("/api/v1/suppressions/{sid}");
    d.req("DELETE", &path, &[("Authorization", &rauth)], b"")
        .expect(403);
    let ok = d
        .req("DELETE", &path, &[("Authorization", &auth)], b"")
        .expect(200)
        .json();
    assert_eq!(ok["ok"], true);
    d.req("DELETE", &path, &[("Authorization", &auth)], b"")
        .expect(404);
    assert_eq!(d.get("/api/v1/suppressions", ADMIN).json()["total"], 0);

    // Audit shows each attempt with actor and via.
    let entries = wait_until(20, "audit entries", || {
        let v = d.get("/api/v1/audit", ADMIN).expect(200).json();
        let e = items(&v).clone();
        let deletes = e
            .iter()
            .filter(|x| x["action"] == "suppression.delete")
            .count();
        (deletes >= 5).then_some(e)
    });
    let find = |action: &str, via: &str, outcome: &str| {
        entries
            .iter()
            .find(|x| x["action"] == action && x["via"] == via && x["outcome"] == outcome)
    };
    let by_cookie = find("suppression.create", "browser", "ok").expect("browser create");
    assert_eq!(by_cookie["actor"], "ops-admin");
    assert!(by_cookie["at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(by_cookie["remote_ip"], "127.0.0.1");
    let denied = find("suppression.create", "token", "denied").expect("read-token create");
    assert_eq!(denied["actor"], "dash-read");
    assert!(find("suppression.create", "browser", "denied").is_some());
    let del = find("suppression.delete", "token", "ok").expect("delete");
    assert_eq!(del["actor"], "ops-admin");
    assert_eq!(del["target"], sid.to_string());
    assert!(find("suppression.delete", "token", "not_found").is_some());
    let limited = d.get("/api/v1/audit?limit=2", ADMIN).json();
    assert_eq!(items(&limited).len(), 2);
    assert_eq!(limited["truncated"], true);
    assert!(limited["items"][0]["id"].as_i64() > limited["items"][1]["id"].as_i64());
}

/// Percent-encodes a query value.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A database file that cannot be created stops start-up with its path and the I/O cause
/// (it was reported as a SQLite "conversion" failure).
/// Runs `svc daemon -c config`, which must refuse to start (exit 1); its standard error.
fn start_fails(config: &Path) -> String {
    let out = Command::new(svc_bin())
        .args(["daemon", "-c"])
        .arg(config)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_uncreatable_database_file_stops_startup_with_its_path() {
    let dir = temp_dir("nodb");
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    // The link points into a directory that does not exist: creating the file fails.
    std::os::unix::fs::symlink(dir.join("missing").join("svc.db"), state.join("svc.db")).unwrap();
    let config = dir.join("svc.toml");
    std::fs::write(&config, base_config(&state)).unwrap();
    let err = start_fails(&config);
    let db = state.join("svc.db");
    assert!(
        err.contains(&format!(
            "store {}: cannot create the database file",
            db.display()
        )),
        "{err}"
    );
}

#[test]
fn a_damaged_geoip_database_stops_startup_with_a_clear_message() {
    let dir = temp_dir("badgeo");
    let state = dir.join("state");
    let junk = dir.join("city.mmdb");
    // Has the marker, so validation passes; the reader refuses it at start.
    std::fs::write(&junk, b"garbage\xAB\xCD\xEFMaxMind.com\x00\x01").unwrap();
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        format!(
            "{}[geoip]\ncity_db = {:?}\n",
            base_config(&state),
            junk.display().to_string()
        ),
    )
    .unwrap();
    let err = start_fails(&config);
    assert!(
        err.contains("geoip.city_db") && err.contains("city.mmdb"),
        "{err}"
    );
    // Without the marker, `svc validate` already names the key.
    std::fs::write(&junk, b"plain text").unwrap();
    let v = Command::new(svc_bin())
        .args(["validate", "-c"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(v.status.code(), Some(1));
    let text = String::from_utf8_lossy(&v.stdout);
    assert!(
        text.contains("geoip.city_db: ") && text.contains("not a MaxMind DB file"),
        "{text}"
    );
}
