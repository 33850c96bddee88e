//! Verifier tests against the loopback DNS server, with an injected clock.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::clock::{ManualClock, SharedClock};
use crate::crawler::identity::Identity;
use crate::dns::testserver::{reverse_name, Behavior, DnsServer};

const GOOGLE_UA: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

struct Fixture {
    v: Arc<Verifier>,
    clock: Arc<ManualClock>,
    dns: DnsServer,
    store: Store,
    dir: std::path::PathBuf,
    registry: Arc<Registry>,
}

fn dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "svc-crawler-{tag}-{}-{}",
        std::process::id(),
        crate::ids::random_hex(4)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn settings(dns: &DnsServer, operator: Vec<Identity>) -> VerifierSettings {
    VerifierSettings {
        enabled: true,
        operator,
        dns_server: Some(dns.addr()),
    }
}

fn fixture(tag: &str) -> Fixture {
    let dns = DnsServer::start();
    let d = dir(tag);
    let store = Store::open(&d.join("svc.db")).unwrap();
    let clock = ManualClock::at_epoch_2026();
    let registry = Registry::new();
    let shared: SharedClock = clock.clone();
    let v = Verifier::start(
        settings(&dns, vec![]),
        RangeSet::default(),
        shared,
        store.clone(),
        &registry,
    )
    .unwrap();
    Fixture {
        v,
        clock,
        dns,
        store,
        dir: d,
        registry,
    }
}

impl Fixture {
    /// Restarts the verifier on the same store and clock (a daemon restart).
    fn restart(&mut self) {
        self.v.stop();
        let shared: SharedClock = self.clock.clone();
        self.registry = Registry::new();
        self.v = Verifier::start(
            settings(&self.dns, vec![]),
            RangeSet::default(),
            shared,
            self.store.clone(),
            &self.registry,
        )
        .unwrap();
    }

    fn settle(&self) {
        let t0 = std::time::Instant::now();
        while !self.v.idle() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "verifier did not settle"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn check(&self, ip: &str) -> BotCheck {
        self.v.check(ip.parse().unwrap(), GOOGLE_UA)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.v.stop();
        self.store.close();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn g(n: &str) -> String {
    n.to_string()
}

#[test]
fn forward_confirmed_ptr_verifies_and_exempts() {
    let f = fixture("fcrdns");
    let ip: IpAddr = "192.0.2.10".parse().unwrap();
    f.dns.ptr(ip, "crawl-192-0-2-10.googlebot.com");
    f.dns.addr_record("crawl-192-0-2-10.googlebot.com", ip);
    assert_eq!(
        f.check("192.0.2.10"),
        BotCheck::Pending {
            name: g("googlebot")
        }
    );
    f.settle();
    assert_eq!(
        f.check("192.0.2.10"),
        BotCheck::Verified {
            name: g("googlebot")
        }
    );
    assert_eq!(
        f.v.exempt(ip).as_deref(),
        Some("verified crawler googlebot")
    );
    // Only one job ran for the address.
    assert_eq!(f.dns.asked(&reverse_name(ip)), 1);
    // No claim, no verification.
    assert_eq!(f.v.check(ip, "curl/8.0"), BotCheck::NoClaim);
}

#[test]
fn a_result_is_counted_only_once_check_answers_it() {
    let f = fixture("count-order");
    let ip: IpAddr = "192.0.2.11".parse().unwrap();
    f.dns.ptr(ip, "crawl-192-0-2-11.googlebot.com");
    f.dns.addr_record("crawl-192-0-2-11.googlebot.com", ip);
    // Hold the store's writer, so the verification's record waits behind it.
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let store = f.store.clone();
    let blocker = std::thread::spawn(move || {
        store.write(move |_| {
            let _ = started_tx.send(());
            let _ = release_rx.recv();
            Ok(())
        })
    });
    started_rx.recv().unwrap();
    // Jobs count as waiting until their batch commits: the blocker counts itself.
    let blocked = f.store.health().writer_waiting;
    assert!(matches!(f.check("192.0.2.11"), BotCheck::Pending { .. }));
    // The lookups are done once the record is queued for the writer.
    let t0 = std::time::Instant::now();
    while f.store.health().writer_waiting == blocked {
        assert!(t0.elapsed() < Duration::from_secs(20), "record not queued");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(f.v.counters.verified.load(Ordering::Relaxed), 0);
    assert!(matches!(f.check("192.0.2.11"), BotCheck::Pending { .. }));
    release_tx.send(()).unwrap();
    blocker.join().unwrap().unwrap();
    f.settle();
    assert_eq!(f.v.counters.verified.load(Ordering::Relaxed), 1);
    assert!(matches!(f.check("192.0.2.11"), BotCheck::Verified { .. }));
}

#[test]
fn spoofed_ptr_without_forward_confirmation_is_a_confirmed_negative() {
    let f = fixture("spoof");
    // PTR says googlebot, forward lookup does not exist.
    f.dns
        .ptr("192.0.2.20".parse().unwrap(), "crawl-1.googlebot.com");
    // PTR says googlebot, forward lookup names another address.
    f.dns
        .ptr("192.0.2.21".parse().unwrap(), "crawl-2.googlebot.com");
    f.dns
        .addr_record("crawl-2.googlebot.com", "198.51.100.2".parse().unwrap());
    // PTR outside the crawler's domain.
    f.dns.ptr("192.0.2.22".parse().unwrap(), "host.example.net");
    // Look-alike suffix.
    f.dns
        .ptr("192.0.2.23".parse().unwrap(), "crawl.evilgooglebot.com");
    f.dns
        .addr_record("crawl.evilgooglebot.com", "192.0.2.23".parse().unwrap());
    for ip in ["192.0.2.20", "192.0.2.21", "192.0.2.22", "192.0.2.23"] {
        assert_eq!(
            f.check(ip),
            BotCheck::Pending {
                name: g("googlebot")
            }
        );
    }
    f.settle();
    for ip in ["192.0.2.20", "192.0.2.21", "192.0.2.22", "192.0.2.23"] {
        assert_eq!(
            f.check(ip),
            BotCheck::Spoofed {
                name: g("googlebot")
            },
            "{ip}"
        );
        assert!(f.v.exempt(ip.parse().unwrap()).is_none());
    }
}

#[test]
fn missing_ptr_suppresses_for_one_fixed_hour_across_restarts_and_stays_a_day() {
    let mut f = fixture("noptr");
    let ip: IpAddr = "192.0.2.30".parse().unwrap();
    let rev = reverse_name(ip);
    assert_eq!(
        f.check("192.0.2.30"),
        BotCheck::Pending {
            name: g("googlebot")
        }
    );
    f.settle();
    assert_eq!(f.dns.asked(&rev), 1);
    assert_eq!(
        f.check("192.0.2.30"),
        BotCheck::Unresolved {
            name: g("googlebot")
        }
    );
    assert!(f.v.exempt(ip).is_none());
    // Checks during the hour neither look up nor extend the suppression.
    f.clock.advance_secs(1800);
    assert_eq!(
        f.check("192.0.2.30"),
        BotCheck::Unresolved {
            name: g("googlebot")
        }
    );
    f.restart();
    f.clock.advance_secs(1799);
    assert_eq!(
        f.check("192.0.2.30"),
        BotCheck::Unresolved {
            name: g("googlebot")
        }
    );
    f.settle();
    assert_eq!(f.dns.asked(&rev), 1, "suppressed across the restart");
    // The hour is over: a retry runs, but no fresh pending window is granted.
    f.clock.advance_secs(1);
    assert_eq!(
        f.check("192.0.2.30"),
        BotCheck::Unresolved {
            name: g("googlebot")
        }
    );
    f.settle();
    assert_eq!(f.dns.asked(&rev), 2);
    // Now the PTR exists and confirms: the definitive result replaces the history.
    f.dns.ptr(ip, "crawl-30.googlebot.com");
    f.dns.addr_record("crawl-30.googlebot.com", ip);
    f.clock.advance_secs(3600);
    assert_eq!(
        f.check("192.0.2.30"),
        BotCheck::Unresolved {
            name: g("googlebot")
        }
    );
    f.settle();
    assert_eq!(
        f.check("192.0.2.30"),
        BotCheck::Verified {
            name: g("googlebot")
        }
    );
    let kinds: Vec<String> = f
        .store
        .read(|c| {
            let mut st = c.prepare("SELECT kind FROM bot_verify WHERE ip = '192.0.2.30'")?;
            let r = st.query_map([], |r| r.get(0))?.collect();
            r
        })
        .unwrap();
    assert_eq!(kinds, vec!["verified".to_string()]);
}

#[test]
fn dns_failures_prove_nothing_and_retry_later_without_pending() {
    let f = fixture("fail");
    let ip: IpAddr = "192.0.2.40".parse().unwrap();
    f.dns.set(&reverse_name(ip), Behavior::ServFail);
    assert_eq!(
        f.check("192.0.2.40"),
        BotCheck::Pending {
            name: g("googlebot")
        }
    );
    f.settle();
    assert_eq!(
        f.check("192.0.2.40"),
        BotCheck::Unresolved {
            name: g("googlebot")
        }
    );
    // Timeout on the forward lookup is a failure too, not a negative.
    let ip2: IpAddr = "192.0.2.41".parse().unwrap();
    f.dns.ptr(ip2, "crawl-41.googlebot.com");
    f.dns.set("crawl-41.googlebot.com", Behavior::Drop);
    f.check("192.0.2.41");
    f.settle();
    assert_eq!(
        f.check("192.0.2.41"),
        BotCheck::Unresolved {
            name: g("googlebot")
        }
    );
    let asked = f.dns.asked(&reverse_name(ip));
    f.clock.advance_secs(FAILURE_RETRY_SECS as u64 - 1);
    f.check("192.0.2.40");
    f.settle();
    assert_eq!(f.dns.asked(&reverse_name(ip)), asked, "retry is delayed");
    f.clock.advance_secs(1);
    assert_eq!(
        f.check("192.0.2.40"),
        BotCheck::Unresolved {
            name: g("googlebot")
        }
    );
    f.settle();
    assert!(f.dns.asked(&reverse_name(ip)) > asked);
}

#[test]
fn pending_window_expires_into_unverified() {
    let f = fixture("window");
    let ip: IpAddr = "192.0.2.50".parse().unwrap();
    f.dns.set(&reverse_name(ip), Behavior::Delay(400));
    assert_eq!(
        f.check("192.0.2.50"),
        BotCheck::Pending {
            name: g("googlebot")
        }
    );
    f.clock.advance_secs(PENDING_WINDOW_SECS as u64);
    assert_eq!(
        f.check("192.0.2.50"),
        BotCheck::Unverified {
            name: g("googlebot")
        }
    );
    f.settle();
}

#[test]
fn failed_store_writes_prove_nothing() {
    let f = fixture("storefail");
    let ip: IpAddr = "192.0.2.60".parse().unwrap();
    f.dns.ptr(ip, "crawl-60.googlebot.com");
    f.dns.addr_record("crawl-60.googlebot.com", ip);
    f.store
        .write(|c| c.execute_batch("DROP TABLE bot_verify"))
        .unwrap();
    f.check("192.0.2.60");
    f.settle();
    assert_eq!(
        f.check("192.0.2.60"),
        BotCheck::Unresolved {
            name: g("googlebot")
        }
    );
    assert!(f.v.exempt(ip).is_none());
    assert!(f.v.counters.store_failures.load(Ordering::Relaxed) >= 1);
}

#[test]
fn history_is_bounded_replaces_cooled_entries_and_refuses_otherwise() {
    let f = fixture("bounded");
    // Fill the history with attempts directly (16k real lookups would make a slow test).
    {
        let mut st = f.v.state.lock();
        let now = f.v.now_secs();
        for i in 0..HISTORY_MAX {
            let ip = IpAddr::from([198, 18, (i >> 8) as u8, i as u8]);
            st.insert(
                ip,
                Arc::from("googlebot"),
                Entry::Attempt {
                    kind: Attempt::NoPtr,
                    at: now + (i as i64 % 7),
                    retry_at: now + NO_PTR_SUPPRESS_SECS,
                    expires: now + HISTORY_KEEP_SECS,
                    in_flight: false,
                },
            );
        }
    }
    // Nothing has cooled down: admission is refused, no lookup runs.
    assert_eq!(
        f.check("192.0.2.70"),
        BotCheck::Unverified {
            name: g("googlebot")
        }
    );
    assert_eq!(f.v.counters.history_refused.load(Ordering::Relaxed), 1);
    assert_eq!(f.dns.total(), 0);
    // After the cooldown the oldest completed entry is replaced.
    f.clock.advance_secs(NO_PTR_SUPPRESS_SECS as u64);
    assert_eq!(
        f.check("192.0.2.70"),
        BotCheck::Pending {
            name: g("googlebot")
        }
    );
    assert_eq!(f.v.counters.history_replaced.load(Ordering::Relaxed), 1);
    assert_eq!(f.v.sizes().0, HISTORY_MAX);
    f.settle();
}

#[test]
fn queue_full_is_unverified_and_counted() {
    let f = fixture("qfull");
    f.dns.set_default(Behavior::Drop);
    let mut pending = 0;
    let mut unverified = 0;
    for i in 0..(QUEUE_CAPACITY + 10) {
        let ip = IpAddr::from([198, 51, 100 + (i >> 8) as u8, i as u8]);
        match f.v.check(ip, GOOGLE_UA) {
            BotCheck::Pending { .. } => pending += 1,
            BotCheck::Unverified { .. } => unverified += 1,
            other => panic!("{other:?}"),
        }
    }
    assert!(unverified >= 9, "{pending} {unverified}");
    assert!(f.v.counters.queue_refused.load(Ordering::Relaxed) >= 9);
    f.v.stop();
    // A stopped worker: unverified.
    assert_eq!(
        f.check("192.0.2.99"),
        BotCheck::Unverified {
            name: g("googlebot")
        }
    );
}

#[test]
fn ranges_first_then_rdns_fallback_and_operator_ranges() {
    let f = fixture("ranges");
    let mut set = RangeSet::default();
    set.crawlers
        .insert("googlebot".into(), vec!["66.249.64.0/27".parse().unwrap()]);
    set.crawlers
        .insert("gptbot".into(), vec!["20.171.206.0/24".parse().unwrap()]);
    f.v.set_ranges(set);
    assert_eq!(
        f.v.check("66.249.64.7".parse().unwrap(), GOOGLE_UA),
        BotCheck::Verified {
            name: g("googlebot")
        }
    );
    // Outside the googlebot ranges: reverse DNS is the fallback.
    assert_eq!(
        f.check("192.0.2.80"),
        BotCheck::Pending {
            name: g("googlebot")
        }
    );
    // A ranges-only identity: outside is a confirmed negative, no DNS.
    let ua = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2)";
    assert_eq!(
        f.v.check("20.171.206.9".parse().unwrap(), ua),
        BotCheck::Verified { name: g("gptbot") }
    );
    assert_eq!(
        f.v.check("192.0.2.81".parse().unwrap(), ua),
        BotCheck::Spoofed { name: g("gptbot") }
    );
    // No list for a published identity: nothing can be said.
    assert_eq!(
        f.v.check("192.0.2.82".parse().unwrap(), "PerplexityBot/1.0"),
        BotCheck::Unverified {
            name: g("perplexitybot")
        }
    );
    // Operator identities; changing them resets records.
    f.settle();
    let op = Identity {
        name: Arc::from("partnerbot"),
        ua_substrings: vec!["partnerbot".into()],
        rdns_suffixes: vec![],
        ip_ranges: vec!["8.8.4.0/24".parse().unwrap()],
        published: false,
        builtin: false,
    };
    assert!(f.v.sizes().0 + f.v.sizes().1 > 0);
    f.v.reconfigure(settings(&f.dns, vec![op]));
    assert_eq!(f.v.sizes(), (0, 0));
    assert_eq!(
        f.v.check("8.8.4.4".parse().unwrap(), "PartnerBot/2"),
        BotCheck::Verified {
            name: g("partnerbot")
        }
    );
    assert_eq!(
        f.v.check("192.0.2.83".parse().unwrap(), "PartnerBot/2"),
        BotCheck::Spoofed {
            name: g("partnerbot")
        }
    );
    assert!(f.registry.snapshot().contains_key(ROW));
    // Off: no claims at all, and no queue row.
    f.v.reconfigure(VerifierSettings {
        enabled: false,
        ..settings(&f.dns, vec![])
    });
    assert_eq!(f.check("66.249.64.7"), BotCheck::NoClaim);
    assert!(!f.registry.snapshot().contains_key(ROW));
    f.v.reconfigure(settings(&f.dns, vec![]));
    assert!(f.registry.snapshot().contains_key(ROW));
}

#[test]
fn cleanup_runs_at_most_hourly_and_removes_day_old_history() {
    let f = fixture("cleanup");
    for i in 1..=3u8 {
        f.v.check(IpAddr::from([192, 0, 2, 100 + i]), GOOGLE_UA);
    }
    f.settle();
    assert_eq!(f.v.counters.cleanups.load(Ordering::Relaxed), 1);
    let count = || -> i64 {
        f.store
            .read(|c| c.query_row("SELECT count(*) FROM bot_verify", [], |r| r.get(0)))
            .unwrap()
    };
    assert_eq!(count(), 3);
    f.clock.advance_secs(HISTORY_KEEP_SECS as u64);
    f.v.check("192.0.2.120".parse().unwrap(), GOOGLE_UA);
    f.settle();
    assert_eq!(f.v.counters.cleanups.load(Ordering::Relaxed), 2);
    assert_eq!(count(), 1, "day-old rows removed");
    f.v.check("192.0.2.121".parse().unwrap(), GOOGLE_UA);
    f.settle();
    assert_eq!(
        f.v.counters.cleanups.load(Ordering::Relaxed),
        2,
        "not again within the hour"
    );
    assert_eq!(f.v.reset().unwrap(), 2);
    assert_eq!(f.v.sizes(), (0, 0));
}
