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
