//! PHP taint analysis through the real binary (issue 28): a PHP file written into the watched
//! web root, which no signature flags, with request data flowing into an include becomes a `php_taint_flow`
//! finding naming the source and sink lines; a look-alike written before it does not.

use crate::common::*;

fn start(tag: &str) -> Daemon {
    let dir = temp_dir(tag);
    std::fs::create_dir_all(dir.join("www/wp-content/uploads")).unwrap();
    std::fs::create_dir_all(dir.join("fixture")).unwrap();
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(
        &config,
        format!(
            "{}[files]\nwatch = [{www:?}]\n[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\nroot = {root:?}\n",
            base_config(&state),
            www = dir.join("www").display().to_string(),
            root = dir.join("fixture").display().to_string(),
        ),
    )
    .unwrap();
    Daemon::start_with(dir, config, state, &[])
}

fn taint_findings(d: &Daemon) -> Vec<serde_json::Value> {
    let v = d.get("/api/v1/findings", READ).expect(200).json();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "php_taint_flow")
        .cloned()
        .collect()
}

#[test]
fn taint_uploaded_php_flow_is_reported() {
    let d = start("taint-upload");
    let up = d.dir.join("www/wp-content/uploads");
    // Benign look-alike first: the analysis takes files in order, so once the flow below
    // is reported this one has been analysed too.
    let benign = up.join("search.php");
    std::fs::write(
        &benign,
        "<?php\n// system($_GET['x']) is what we never do\n$h = escapeshellarg($_GET['h']);\necho shell_exec('host ' . $h);\n",
    )
    .unwrap();
    let shell = up.join("cache.php");
    std::fs::write(
        &shell,
        "<?php\n$k = $_COOKIE['k'];\n$part = __DIR__ . '/parts/' . $k;\ninclude_once($part);\n",
    )
    .unwrap();
    let want = shell.display().to_string();
    let f = wait_until(60, "the php_taint_flow finding", || {
        taint_findings(&d)
            .into_iter()
            .find(|f| f["path"] == want.as_str())
    });
    assert_eq!(f["severity"], "CRITICAL");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.ends_with("$_COOKIE (line 2) reaches include_once (line 4)"),
        "{msg}"
    );
    let all = taint_findings(&d);
    assert_eq!(all.len(), 1, "{all:?}");
    let s = d.get("/api/v1/status", READ).expect(200).json();
    let row = &s["queues"]["php_taint.requests"];
    assert!(row.is_object(), "row php_taint.requests: {s}");
    eprintln!("php_taint.requests: {row}");
}
