//! Verified crawlers through the real binary: rule 1 at load, the published-range refresh
//! (`svc update-bot-ranges` against feeds served on loopback, applied by the running daemon
//! without a restart, `svc_botranges_*` metrics), `svc store reset-bot-verify` with the
//! daemon running and stopped, and the `bot_verification.requests` queue row.

use std::process::Command;

use crate::common::{svc_bin, temp_dir, Daemon, METRICS, READ};

/// A loopback HTTP server answering `/ok/<name>.json` with one range list and everything
/// else with 500, until the test ends.
fn feed_server() -> std::net::SocketAddr {
    crate::common::json_server(|path| {
        match path {
        "/ok/googlebot.json" => (
            "200 OK",
            r#"{"creationTime":"2026-11-26","prefixes":[{"ipv4Prefix":"66.249.90.0/24"},{"ipv6Prefix":"2001:4860:4801:90::/64"},{"ipv4Prefix":"10.0.0.0/8"}]}"#.to_string(),
        ),
        p if p.starts_with("/ok/") => ("200 OK", r#"["20.171.206.0/24"]"#.to_string()),
        _ => ("500 Internal Server Error", String::new()),
    }
    })
}

fn metric(text: &str, name: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .map(|l| l[name.len() + 1..].to_string())
}

#[test]
fn verified_bots_rule_one_is_checked_at_load_naming_the_entry() {
    let dir = temp_dir("crawler-validate");
    let cfg = dir.join("svc.toml");
    std::fs::write(
        &cfg,
        format!(
            "{}\n[reputation]\nbot_verify_enabled = true\n\
             [[reputation.verified_bots]]\nname = \"hostedbot\"\nua_substrings = [\"hostedbot\"]\nrdns_suffixes = [\"herokuapp.com\"]\n\
             [[reputation.verified_bots]]\nname = \"widebot\"\nua_substrings = [\"widebot\"]\nip_ranges = [\"100.64.0.0/10\"]\n",
            crate::common::base_config(&dir.join("state"))
        ),
    )
    .unwrap();
    let out = Command::new(svc_bin())
        .args(["validate", "-c", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("reputation.verified_bots[0].rdns_suffixes[0]: entry \"hostedbot\""),
        "{text}"
    );
    assert!(
        text.contains("reputation.verified_bots[1].ip_ranges[0]: entry \"widebot\""),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn update_bot_ranges_applies_without_restart_and_reset_clears_records() {
    let feeds = feed_server();
    let mut urls = String::from("[reputation.bot_ranges.urls]\n");
    for name in [
        "googlebot",
        "bingbot",
        "applebot",
        "gptbot",
        "chatgpt-user",
        "oai-searchbot",
        "perplexitybot",
    ] {
        urls.push_str(&format!("{name:?} = \"http://{feeds}/ok/{name}.json\"\n"));
    }
    urls.push_str(&format!("amazonbot = \"http://{feeds}/broken\"\n"));
    let mut d = Daemon::start(
        "crawler-ranges",
        &format!(
            "\n[reputation]\nbot_verify_enabled = true\ndns_server = \"127.0.0.1:9\"\ntimeout_seconds = 5\n\
             [reputation.bot_ranges]\nenabled = false\n{urls}"
        ),
    );
    let m = d.get("/metrics", METRICS).expect(200).text();
    assert_eq!(
        metric(&m, "svc_botranges_refresh_success").as_deref(),
        Some("-1"),
        "{m}"
    );
    let embedded: usize = metric(&m, "svc_botranges_prefixes{crawler=\"googlebot\"}")
        .unwrap()
        .parse()
        .unwrap();
    assert!(embedded > 100, "the embedded snapshot is in force");
    let st = d.get("/api/v1/status", READ).json();
    assert_eq!(
        st["queues"]["bot_verification.requests"]["capacity"], 256,
        "{st}"
    );

    let out = d.cli(&["update-bot-ranges", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    // One feed failed: exit 1, the others are written and applied.
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(v["failed"][0]["crawler"], "amazonbot", "{v}");
    assert_eq!(
        v["refused_ranges"], 1,
        "10.0.0.0/8 is refused by the guards: {v}"
    );
    assert_eq!(v["daemon"], "applied by the running daemon", "{v}");
    assert!(d.state.join("bot-ranges.json").exists());
    let m = d.get("/metrics", METRICS).expect(200).text();
    assert_eq!(
        metric(&m, "svc_botranges_prefixes{crawler=\"googlebot\"}").as_deref(),
        Some("2"),
        "{m}"
    );
    assert_eq!(
        metric(&m, "svc_botranges_prefixes{crawler=\"gptbot\"}").as_deref(),
        Some("1"),
        "{m}"
    );
    assert_eq!(
        metric(&m, "svc_botranges_refresh_success").as_deref(),
        Some("0"),
        "{m}"
    );
    assert_eq!(
        metric(&m, "svc_botranges_refresh_failure_total").as_deref(),
        Some("1"),
        "{m}"
    );
    assert_eq!(
        metric(&m, "svc_botranges_last_success_timestamp_seconds").as_deref(),
        Some("0"),
        "{m}"
    );

    let out = d.cli(&["store", "reset-bot-verify"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout)
        .starts_with("cleared 0 crawler verification record(s)"));
    d.stop();
    // With the daemon stopped, the store is cleared directly.
    let out = d.cli(&["store", "reset-bot-verify", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = d.cli(&["store", "bogus"]);
    assert_eq!(out.status.code(), Some(2));
    // A restart reads the written snapshot.
    let d2 = Daemon::start_with(d.dir.clone(), d.config.clone(), d.state.clone(), &[]);
    let m = d2.get("/metrics", METRICS).expect(200).text();
    assert_eq!(
        metric(&m, "svc_botranges_prefixes{crawler=\"googlebot\"}").as_deref(),
        Some("2"),
        "{m}"
    );
    let dir = d.dir.clone();
    drop(d2);
    drop(d);
    let _ = std::fs::remove_dir_all(dir);
}
