//! Direct SMTP egress: the sampler on this host's real socket tables (a connection the test
//! opens to a loopback listener standing in for a remote port 25), the reporter's
//! once-per-account-and-hour rule, and reverse DNS through `smtp_rdns.resolves` against the
//! loopback DNS server of `tests/it/common/dnsserver.rs` (names, NXDOMAIN, no answer).

use super::rdns::{PtrLookup, Rdns, RdnsPool, CALLER_DEADLINE, ROW, SLOTS};
use super::*;
use crate::clock::{Clock as _, ManualClock, SystemClock};
use crate::queue::Registry;
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use crate::dns::testserver as dnsserver;

#[test]
fn a_connection_to_the_smtp_port_is_found_with_its_account_and_process() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let settings = EgressSettings {
        proc_root: PathBuf::from("/proc"),
        passwd: PathBuf::from("/etc/passwd"),
        port,
        include_loopback: true,
    };
    let u = users(&settings.passwd);
    assert!(sample(&settings, &u).is_empty());
    let _client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (_server, _) = listener.accept().unwrap();
    let found = sample(&settings, &u);
    assert_eq!(found.len(), 1, "{found:?}");
    let e = &found[0];
    let me = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self").unwrap().uid()
    };
    assert_eq!(e.uid, me);
    assert_eq!(e.remote.port(), port);
    assert_eq!(e.pid, Some(std::process::id()));
    assert!(e.program.is_some());
    // Production ignores loopback destinations.
    let prod = EgressSettings {
        include_loopback: false,
        ..settings.clone()
    };
    assert!(sample(&prod, &u).is_empty());
    // The MTA's own connections are not egress.
    let mut as_mta = u.clone();
    as_mta.insert(e.uid, "postfix".into());
    assert!(sample(&settings, &as_mta).is_empty());
}

#[test]
fn one_finding_per_account_and_hour_naming_the_destinations() {
    let clock = ManualClock::at_epoch_2026();
    let e = |uid: u32, acct: &str, ip: &str| Egress {
        uid,
        account: acct.into(),
        remote: SocketAddr::new(ip.parse().unwrap(), 25),
        program: Some("perl".into()),
        pid: Some(4242),
    };
    let resolve = |ip: IpAddr| {
        if ip.to_string() == "192.0.2.25" {
            Rdns::Names(vec!["mx.example.net".into()])
        } else {
            Rdns::NoName
        }
    };
    let mut r = Reporter::default();
    let (f, observed) = r.report(
        clock.now(),
        &[
            e(1001, "shop", "192.0.2.25"),
            e(1001, "shop", "198.51.100.9"),
            e(1002, "blog", "203.0.113.4"),
        ],
        &resolve,
    );
    assert_eq!(f.len(), 2);
    assert_eq!(observed.len(), 3, "every new pair is recorded");
    match observed[0].record(7) {
        crate::store::mail_accounts::MailWrite::Egress {
            account,
            ptr,
            confirmed,
            remote_port,
            ..
        } => {
            assert_eq!(
                (account.as_str(), ptr.as_deref(), confirmed, remote_port),
                ("shop", Some("mx.example.net"), true, 25)
            );
        }
        _ => panic!("not an egress record"),
    }
    match observed[1].record(7) {
        crate::store::mail_accounts::MailWrite::Egress { ptr, confirmed, .. } => {
            assert_eq!(
                (ptr, confirmed),
                (None, true),
                "NXDOMAIN is a normal result"
            );
        }
        _ => panic!("not an egress record"),
    }
    assert_eq!(
        f[0].message,
        "account shop connected directly to remote SMTP servers (bypassing the MTA)"
    );
    assert_eq!(f[0].severity, Severity::High);
    let d = f[0].details.clone();
    assert!(d.contains("perl (pid 4242)"), "{d}");
    assert!(d.contains("192.0.2.25:25 (mx.example.net)"), "{d}");
    assert!(d.contains("198.51.100.9:25 (no reverse DNS name)"), "{d}");
    // Same hour: a new destination is recorded but raises no second finding; a known
    // one is neither; next hour: again.
    let (f, o) = r.report(
        clock.now(),
        &[
            e(1001, "shop", "203.0.113.77"),
            e(1001, "shop", "192.0.2.25"),
        ],
        &resolve,
    );
    assert_eq!((f.len(), o.len()), (0, 1));
    clock.advance_secs(3600);
    let (f, o) = r.report(clock.now(), &[e(1001, "shop", "192.0.2.25")], &resolve);
    assert_eq!((f.len(), o.len()), (1, 1));
    // At most LOOKUPS_PER_SAMPLE lookups per sample; the rest are recorded unconfirmed.
    let many: Vec<Egress> = (0..20)
        .map(|i| e(1003, "spam", &format!("198.51.100.{}", 100 + i)))
        .collect();
    let asked = std::cell::Cell::new(0);
    let counting = |ip: IpAddr| {
        asked.set(asked.get() + 1);
        resolve(ip)
    };
    let (_, o) = r.report(clock.now(), &many, &counting);
    assert_eq!((o.len(), asked.get()), (20, LOOKUPS_PER_SAMPLE));
    assert!(matches!(o[19].rdns, Rdns::Unavailable(_)));
}

#[test]
fn reverse_dns_on_the_row_with_names_nxdomain_and_a_one_second_deadline() {
    let server = dnsserver::DnsServer::start();
    let named: IpAddr = "192.0.2.25".parse().unwrap();
    let silent: IpAddr = "203.0.113.99".parse().unwrap();
    server.ptr(named, "mx.example.net");
    server.set(&dnsserver::reverse_name(silent), dnsserver::Behavior::Drop);
    let registry = Registry::new();
    let resolver: Arc<dyn PtrLookup> = Arc::new(crate::dns::Resolver::new(vec![server.addr()]));
    let pool = RdnsPool::start(resolver, SystemClock::shared(), &registry).unwrap();
    assert_eq!(
        pool.resolve(named),
        Rdns::Names(vec!["mx.example.net".into()])
    );
    assert_eq!(pool.resolve("198.51.100.1".parse().unwrap()), Rdns::NoName);
    let t = Instant::now();
    let r = pool.resolve(silent);
    assert!(matches!(r, Rdns::Unavailable(_)), "{r:?}");
    assert!(t.elapsed() < CALLER_DEADLINE + Duration::from_millis(500));
    let rows = registry.snapshot();
    let row = &rows[ROW];
    assert_eq!(row.capacity, Some(SLOTS));
    assert_eq!(row.dropped_total, 0, "NXDOMAIN and timeouts are not losses");
    pool.stop();
}

#[test]
fn the_sampler_records_and_reports_a_live_connection_with_its_reverse_name() {
    let dir = std::env::temp_dir().join(format!("svc-egress-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = crate::store::Store::open(&dir.join("svc.db")).unwrap();
    let server = dnsserver::DnsServer::start();
    server.ptr("127.0.0.1".parse().unwrap(), "mx.example.net");
    let registry = Registry::new();
    let pool = RdnsPool::start(
        Arc::new(crate::dns::Resolver::new(vec![server.addr()])),
        SystemClock::shared(),
        &registry,
    )
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let findings = Arc::new(parking_lot::Mutex::new(Vec::<Finding>::new()));
    let sink = findings.clone();
    let sampler = EgressSampler::start(
        EgressSettings {
            proc_root: PathBuf::from("/proc"),
            passwd: PathBuf::from("/etc/passwd"),
            port,
            include_loopback: true,
        },
        Duration::from_millis(100),
        pool,
        SystemClock::shared(),
        store.clone(),
        Arc::new(move |f| sink.lock().push(f)),
    )
    .unwrap();
    let _client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (_server_side, _) = listener.accept().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while findings.lock().is_empty() {
        assert!(Instant::now() < deadline, "no finding");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(registry.snapshot().contains_key(ROW));
    sampler.stop();
    assert!(
        !registry.snapshot().contains_key(ROW),
        "stopping removes the row"
    );
    let f = findings.lock().clone();
    assert_eq!(f.len(), 1, "one per account and hour: {f:?}");
    assert!(
        f[0].details.contains("(mx.example.net)"),
        "{}",
        f[0].details
    );
    let rows = store
        .read(|c| crate::store::mail_accounts::egress_since(c, 0, 10))
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].ptr.as_deref(), Some("mx.example.net"));
    assert!(rows[0].confirmed);
    assert_eq!(rows[0].remote_port, port);
    store.close();
    let _ = std::fs::remove_dir_all(&dir);
}
