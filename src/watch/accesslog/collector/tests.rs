use super::*;
use crate::clock::ManualClock;
use crate::crawler::NoVerification;
use crate::watch::tail::testutil::TempDir;
use std::io::Write;
use std::path::Path;

fn append(path: &Path, s: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(s.as_bytes()).unwrap();
}

fn post(ip: &str, path: &str) -> String {
    format!("{ip} - - [26/Nov/2026:21:00:01 +0000] \"POST {path} HTTP/1.1\" 200 12 \"-\" \"Mozilla/5.0\"\n")
}

struct Rig {
    dir: TempDir,
    store: Store,
    engine: Arc<Engine>,
    reg: Arc<Registry>,
    clock: Arc<ManualClock>,
}

impl Rig {
    fn new(tag: &str) -> Rig {
        let dir = TempDir::new(tag);
        let store = Store::open(&dir.path().join("svc.db")).unwrap();
        let reg = Registry::new();
        let clock = ManualClock::at_epoch_2026();
        let engine = Engine::new(clock.clone(), store.clone(), &reg, dir.path()).unwrap();
        engine.start().unwrap();
        Rig {
            dir,
            store,
            engine,
            reg,
            clock,
        }
    }

    fn follower(&self, paths: &[PathBuf]) -> (Follower<AccessHandler>, Arc<Component>) {
        let row = file_source_row(self.clock.clone());
        let comps = Components::default();
        let comp = comps.add(COMPONENT, "log_watcher");
        let det = AccessDetector::new(
            AccessThresholds::default(),
            self.clock.clone(),
            Arc::new(NoVerification),
        );
        let f = Follower::new(
            "access log",
            KEY_PREFIX,
            paths,
            Duration::from_secs(300),
            AccessHandler::new(det, Some(&comp)),
            &self.store,
            self.engine.clone(),
            row,
            comp.clone(),
            self.clock.clone(),
        )
        .unwrap();
        (f, comp)
    }

    fn findings(&self) -> Vec<(String, String)> {
        assert!(self.engine.flush(Duration::from_secs(10)));
        self.store
            .read(|c| {
                let mut st = c.prepare("SELECT check_name, ip FROM history ORDER BY id")?;
                let rows = st.query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                    ))
                })?;
                rows.collect()
            })
            .unwrap()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.engine.shutdown();
        self.store.close();
    }
}

#[test]
fn findings_across_vhost_logs_rotation_and_a_new_domain_log() {
    let rig = Rig::new("acc-coll");
    let a = rig.dir.path().join("a.test");
    let b = rig.dir.path().join("b.test");
    append(&a, &post("192.0.2.20", "/wp-login.php").repeat(30));
    append(&b, "");
    let (mut f, comp) = rig.follower(&[a.clone(), b.clone()]);
    f.round();
    assert!(rig.findings().is_empty(), "history is skipped");
    // 5 POSTs in each domain's log, with a rotation between: one address, one finding.
    append(&a, &post("192.0.2.20", "/wp-login.php").repeat(3));
    std::fs::rename(&a, rig.dir.path().join("a.test.1")).unwrap();
    append(&a, &post("192.0.2.20", "/wp-login.php").repeat(2));
    append(&b, &post("192.0.2.20", "/blog/wp-login.php").repeat(5));
    append(&b, "garbage line\n");
    f.round();
    assert_eq!(
        rig.findings(),
        [("wp_login_bruteforce".into(), "192.0.2.20".into())]
    );
    assert_eq!(
        comp.counter("unparsed_lines_total").load(Ordering::Relaxed),
        1
    );
    assert_eq!(comp.counter("rotations_total").load(Ordering::Relaxed), 1);
    // A domain log that appears later (a glob rescan adds it) is read from its start.
    let c = rig.dir.path().join("c.test");
    append(&c, &post("198.51.100.20", "/xmlrpc.php").repeat(10));
    f.add_file(KEY_PREFIX, &c, &rig.store);
    f.add_file(KEY_PREFIX, &c, &rig.store);
    assert_eq!(f.paths().count(), 3);
    f.round();
    assert_eq!(rig.findings().len(), 2);
    assert_eq!(
        rig.findings()[1],
        ("xmlrpc_abuse".into(), "198.51.100.20".into())
    );
}

#[test]
fn a_collector_restarts_where_it_stopped_and_rescans_globs() {
    let rig = Rig::new("acc-restart");
    let logs = rig.dir.path().join("domlogs");
    std::fs::create_dir(&logs).unwrap();
    let a = logs.join("a.test");
    append(&a, "");
    let comps = Components::default();
    let start = || {
        AccessCollector::start(
            &[logs.join("*")],
            AccessThresholds::default(),
            Arc::new(NoVerification),
            rig.clock.clone(),
            &rig.engine,
            &rig.reg,
            &comps,
            &rig.store,
        )
        .unwrap()
    };
    let wait = |n: usize| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let got = rig.findings().len();
            if got >= n {
                return got;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{got} of {n} findings"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let c = start();
    assert_eq!(c.files(), 1);
    assert!(rig.reg.snapshot().contains_key(ROW));
    append(&a, &post("192.0.2.30", "/wp-login.php").repeat(10));
    assert_eq!(wait(1), 1);
    append(&a, &post("192.0.2.30", "/wp-login.php"));
    c.stop();
    assert!(
        !rig.reg.snapshot().contains_key(ROW),
        "the row leaves with it"
    );
    // Written while stopped, and a new domain: the next collector reads both, nothing twice.
    append(&a, &post("203.0.113.30", "/xmlrpc.php").repeat(10));
    append(
        &logs.join("b.test"),
        &post("203.0.113.31", "/xmlrpc.php").repeat(10),
    );
    append(&logs.join("b.test-bytes_log"), "1 2\n");
    let c = start();
    assert_eq!(c.files(), 2);
    assert_eq!(wait(2), 2);
    c.stop();
    let got = rig.findings();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[1], ("xmlrpc_abuse".into(), "203.0.113.30".into()));
}

#[test]
fn a_rescan_follows_a_new_domain_log_from_its_start() {
    let rig = Rig::new("acc-rescan");
    let logs_dir = rig.dir.path().join("vhosts");
    std::fs::create_dir_all(logs_dir.join("a.test/logs")).unwrap();
    append(&logs_dir.join("a.test/logs/access_log"), "");
    let patterns = [logs_dir.join("*/logs/access_log")];
    let files = logs::resolve(&patterns).files;
    let (mut f, comp) = rig.follower(&files);
    let refused = AtomicU64::new(0);
    assert_eq!(
        follow_new_files(&mut f, &patterns, &rig.store, &comp, &refused),
        0
    );
    // A domain added by the panel: its first requests are read.
    std::fs::create_dir_all(logs_dir.join("b.test/logs")).unwrap();
    append(
        &logs_dir.join("b.test/logs/access_log"),
        &post("203.0.113.40", "/wp-login.php").repeat(10),
    );
    append(&logs_dir.join("b.test/logs/error_log"), "x\n");
    assert_eq!(
        follow_new_files(&mut f, &patterns, &rig.store, &comp, &refused),
        1
    );
    f.round();
    assert_eq!(
        rig.findings(),
        [("wp_login_bruteforce".into(), "203.0.113.40".into())]
    );
    assert_eq!(refused.load(Ordering::Relaxed), 0);
}

/// Issue 23 item 7: each file keeps the layout its first line showed. In a `$host
/// $remote_addr` file a Host header holding an address is not the client; in a plain file
/// a line shaped like a vhost line does not fit and is unparsed.
#[test]
fn each_file_keeps_its_layout_and_a_host_field_never_names_the_client() {
    let rig = Rig::new("acc-layout");
    let v = rig.dir.path().join("hosts.log");
    let p = rig.dir.path().join("plain.log");
    append(&v, "");
    append(&p, "");
    let (mut f, comp) = rig.follower(&[v.clone(), p.clone()]);
    f.round();
    append(
        &v,
        &format!("example.com {}", post("203.0.113.111", "/wp-login.php")),
    );
    append(
        &v,
        &format!("41.0.0.2 {}", post("203.0.113.111", "/wp-login.php")).repeat(9),
    );
    append(&p, &post("198.51.100.30", "/xmlrpc.php").repeat(10));
    append(
        &p,
        &format!("example.org {}", post("198.51.100.31", "/xmlrpc.php")).repeat(10),
    );
    f.round();
    let mut got = rig.findings();
    got.sort();
    assert_eq!(
        got,
        [
            ("wp_login_bruteforce".into(), "203.0.113.111".into()),
            ("xmlrpc_abuse".into(), "198.51.100.30".into()),
        ]
    );
    assert_eq!(
        comp.counter("unparsed_lines_total").load(Ordering::Relaxed),
        10
    );
}
