//! Engine tests against real nftables in a network namespace each test creates, with an
//! injected clock for the timers.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::engine::{Actor, BlockItem, Firewall, Options, Outcome, Refusal};
use super::net::Net;
use super::testns::TestNs;
use crate::clock::ManualClock;
use crate::config::firewall::{FirewallConfig, Mode};
use crate::queue::Registry;
use crate::store::Store;

struct Rig {
    fw: Option<Arc<Firewall>>,
    store: Store,
    clock: Arc<ManualClock>,
    registry: Arc<Registry>,
    dir: PathBuf,
    cfg: FirewallConfig,
    dry: bool,
    ns: TestNs,
}

impl Rig {
    fn new(tag: &str, cfg: FirewallConfig, dry: bool) -> Option<Rig> {
        let ns = TestNs::require(tag)?;
        ns.enter();
        let dir = std::env::temp_dir().join(format!("svc-fw-{}-{tag}", ns.name));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        let clock = ManualClock::new(jiff::Timestamp::now());
        let registry = Registry::new();
        let mut r = Rig {
            fw: None,
            store,
            clock,
            registry,
            dir,
            cfg,
            dry,
            ns,
        };
        r.start();
        Some(r)
    }

    fn start(&mut self) {
        let fw = Firewall::start(
            Options {
                file: self.cfg.clone(),
                auto_dry_run: self.dry,
                extra_tcp_in: vec![],
                nft: super::script::locate("nft").unwrap(),
            },
            self.clock.clone(),
            self.store.clone(),
            &self.registry,
        )
        .unwrap();
        self.fw = Some(fw);
    }

    fn stop(&mut self) {
        if let Some(f) = self.fw.take() {
            f.shutdown();
        }
    }

    fn fw(&self) -> &Firewall {
        self.fw.as_ref().unwrap()
    }

    fn set(&self, name: &str) -> String {
        self.ns.nft(&["list", "set", "inet", "svc", name])
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.stop();
        self.store.close();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn op() -> Actor {
    Actor::operator("tester")
}

fn auto() -> Actor {
    Actor::Automatic {
        source: "auto".into(),
    }
}

fn item(s: &str, secs: Option<u64>) -> BlockItem {
    BlockItem {
        net: Net::parse(s).unwrap(),
        reason: "ssh brute force".into(),
        duration: secs.map(Duration::from_secs),
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn block_check_unblock_reach_the_kernel() {
    let Some(r) = Rig::new("basic", FirewallConfig::default(), true) else {
        return;
    };
    let out = r
        .fw()
        .block(
            vec![item("192.0.2.7", Some(86_400)), item("2001:db8::7", None)],
            &op(),
        )
        .unwrap();
    assert!(matches!(
        out[0],
        Outcome::Blocked {
            expires_at: Some(_),
            ..
        }
    ));
    assert!(r.set("block4").contains("192.0.2.7 timeout"));
    assert!(r.set("block6").contains("2001:db8::7"));
    r.clock.advance_secs(1);
    let c = r.fw().check(ip("192.0.2.7")).to_json();
    assert_eq!(c["blocked"], true);
    assert_eq!(c["permanent"], serde_json::Value::Null);
    assert!(
        c["temporary"]
            .as_str()
            .unwrap()
            .starts_with("ssh brute force (expires in 23h59m"),
        "{c}"
    );
    assert!(c["expires_at"].is_string());
    let c = r.fw().check(ip("2001:db8::7")).to_json();
    assert_eq!(c["permanent"], "ssh brute force");
    // A shorter block of a permanently blocked address is refused (state table).
    let out = r
        .fw()
        .block(vec![item("2001:db8::7", Some(60))], &op())
        .unwrap();
    assert!(matches!(&out[0], Outcome::Unchanged { why, .. } if why.contains("permanently")));
    let removed = r.fw().unblock(ip("192.0.2.7")).unwrap();
    assert_eq!(removed.len(), 1);
    assert!(!r.set("block4").contains("192.0.2.7"));
    assert!(r.fw().unblock(ip("192.0.2.7")).is_err());
    // A subnet; an address inside it has no block of its own to remove.
    r.fw()
        .deny_subnet(Net::parse("198.51.100.0/24").unwrap(), "spam net", &op())
        .unwrap();
    assert!(r.set("blocknet4").contains("198.51.100.0/24"));
    let e = r.fw().unblock(ip("198.51.100.9")).unwrap_err().to_string();
    assert!(
        e.contains("covered by blocked subnet 198.51.100.0/24"),
        "{e}"
    );
    let c = r.fw().check(ip("198.51.100.9")).to_json();
    assert_eq!(c["permanent"], "spam net (subnet 198.51.100.0/24)");
    r.fw()
        .remove_subnet(Net::parse("198.51.100.0/24").unwrap())
        .unwrap();
    assert!(!r.set("blocknet4").contains("198.51.100.0/24"));
}

#[test]
fn ten_thousand_addresses_are_one_transaction() {
    let Some(r) = Rig::new("bulk", FirewallConfig::default(), true) else {
        return;
    };
    let before = r.fw().status()["transactions_total"].as_u64().unwrap();
    let items: Vec<BlockItem> = (0..10_000u32)
        .map(|i| BlockItem {
            net: Net::host(std::net::Ipv4Addr::from(0x0a00_0000 + i).into()),
            reason: "bulk".into(),
            duration: Some(Duration::from_secs(3600)),
        })
        .collect();
    let out = r.fw().block(items, &op()).unwrap();
    assert!(out.iter().all(|o| matches!(o, Outcome::Blocked { .. })));
    let after = r.fw().status()["transactions_total"].as_u64().unwrap();
    assert_eq!(after - before, 1, "one kernel transaction");
    let listed = r.set("block4");
    assert_eq!(listed.matches(" expires ").count(), 10_000);
    // Expiries made in one burst are spread over seconds, not one instant.
    let list = r.fw().list();
    let min = list.iter().map(|l| l.entry.expires).min().unwrap();
    let max = list.iter().map(|l| l.entry.expires).max().unwrap();
    assert!(max - min >= 4_000_000, "spread {} us", max - min);
    assert!(max - min < 6_000_000);
    assert_eq!(r.fw().flush_temporary().unwrap(), 10_000);
    assert!(!r.set("block4").contains(" expires "));
}

#[test]
fn refusals_name_what_protects_the_address() {
    let cfg = FirewallConfig {
        infra_ips: vec![Net::parse("203.0.113.10").unwrap()],
        ..FirewallConfig::default()
    };
    let Some(r) = Rig::new("refuse", cfg, true) else {
        return;
    };
    let fw = r.fw();
    fw.allow(Net::parse("192.0.2.50").unwrap(), "office", None, &op())
        .unwrap();
    assert!(r.set("allow4").contains("192.0.2.50"));
    let out = fw
        .block(
            vec![
                item("0.0.0.0/0", None),
                item("203.0.113.0/24", None),
                item("192.0.2.50", Some(60)),
                item("192.0.2.0/24", None),
                item("127.0.0.1", None),
                item("::/0", None),
            ],
            &auto(),
        )
        .unwrap();
    let kinds: Vec<&str> = out
        .iter()
        .map(|o| match o {
            Outcome::Refused { refusal, .. } => refusal.kind(),
            _ => "accepted",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "default_route",
            "infra",
            "allowed",
            "allowed",
            "local",
            "default_route"
        ]
    );
    match &out[2] {
        Outcome::Refused {
            refusal: Refusal::Allowed { entry, reason },
            ..
        } => {
            assert_eq!(entry.to_string(), "192.0.2.50");
            assert_eq!(reason, "office");
        }
        o => panic!("{o:?}"),
    }
    // The operator gets the same refusal, naming the entry.
    let out = fw.block(vec![item("192.0.2.50", None)], &op()).unwrap();
    let Outcome::Refused { refusal, .. } = &out[0] else {
        panic!()
    };
    assert!(refusal
        .to_string()
        .contains("allow-list entry 192.0.2.50 (office)"));
    // A subnet containing the caller's own address.
    let me = Actor::Operator {
        name: "t".into(),
        protect: Some(ip("198.51.100.20")),
    };
    let out = fw
        .deny_subnet(Net::parse("198.51.100.0/24").unwrap(), "x", &me)
        .unwrap();
    assert!(matches!(
        out,
        Outcome::Refused {
            refusal: Refusal::OwnAddress(_),
            ..
        }
    ));
    // The caller's own address itself too (issue 23 item 11), also written IPv4-mapped;
    // without the protection (`"force": true`, the CLI) it is blocked.
    for own in ["198.51.100.20", "::ffff:198.51.100.20"] {
        let out = fw.block(vec![item(own, None)], &me).unwrap();
        assert!(
            matches!(
                &out[0],
                Outcome::Refused {
                    refusal: Refusal::OwnAddress(_),
                    ..
                }
            ),
            "{own}: {out:?}"
        );
    }
    let mapped_me = Actor::Operator {
        name: "t".into(),
        protect: Some("::ffff:198.51.100.20".parse().unwrap()),
    };
    let out = fw
        .block(vec![item("198.51.100.20", None)], &mapped_me)
        .unwrap();
    assert!(matches!(&out[0], Outcome::Refused { .. }), "{out:?}");
    assert!(!r.set("block4").contains("198.51.100.20"));
    let out = fw.block(vec![item("198.51.100.20", None)], &op()).unwrap();
    assert!(matches!(&out[0], Outcome::Blocked { .. }), "{out:?}");
    // Allowing a blocked address removes its block; allowing inside a blocked subnet warns.
    fw.block(vec![item("192.0.2.60", None)], &op()).unwrap();
    let a = fw
        .allow(Net::parse("192.0.2.60").unwrap(), "vpn", None, &op())
        .unwrap();
    assert_eq!(a.unblocked, vec![Net::parse("192.0.2.60").unwrap()]);
    assert!(!r.set("block4").contains("192.0.2.60"));
    fw.deny_subnet(Net::parse("198.51.100.0/24").unwrap(), "x", &op())
        .unwrap();
    let a = fw
        .allow(Net::parse("198.51.100.7").unwrap(), "partner", None, &op())
        .unwrap();
    assert!(a.warning.unwrap().contains("takes precedence"));
}

#[test]
fn dry_run_records_automatic_blocks_without_touching_nftables() {
    let Some(r) = Rig::new("dry", FirewallConfig::default(), true) else {
        return;
    };
    let out = r
        .fw()
        .block(vec![item("192.0.2.9", Some(3600))], &auto())
        .unwrap();
    assert!(matches!(out[0], Outcome::DryRun { .. }));
    assert!(!r.set("block4").contains("192.0.2.9"));
    let list = r.fw().list();
    assert_eq!(list.len(), 1);
    let j = list[0].to_json();
    assert_eq!(j["dry_run"], true);
    assert_eq!(j["source"], "auto");
    assert_eq!(r.fw().check(ip("192.0.2.9")).to_json()["blocked"], false);
    // Operators always apply.
    let out = r
        .fw()
        .block(vec![item("192.0.2.9", Some(3600))], &op())
        .unwrap();
    assert!(matches!(out[0], Outcome::Blocked { .. }));
    assert!(r.set("block4").contains("192.0.2.9"));
    // Unblock removes both the block and the dry-run record.
    assert_eq!(r.fw().unblock(ip("192.0.2.9")).unwrap().len(), 2);
}

#[test]
fn automatic_blocks_apply_when_dry_run_is_off() {
    let Some(r) = Rig::new("live", FirewallConfig::default(), false) else {
        return;
    };
    let out = r
        .fw()
        .block(vec![item("192.0.2.11", Some(3600))], &auto())
        .unwrap();
    assert!(matches!(out[0], Outcome::Blocked { .. }));
    assert!(r.set("block4").contains("192.0.2.11"));
}

#[test]
fn table_is_reasserted_after_a_ruleset_flush_and_others_are_left_alone() {
    let Some(r) = Rig::new("flush", FirewallConfig::default(), true) else {
        return;
    };
    r.fw()
        .block(
            vec![item("192.0.2.20", None), item("192.0.2.21", Some(600))],
            &op(),
        )
        .unwrap();
    let other = "table inet other {\n set keep { type ipv4_addr; elements = { 10.1.2.3 }; }\n chain c { type filter hook input priority 0; policy accept; ip saddr @keep counter accept; }\n}\n";
    // Someone flushes the whole ruleset, then loads their own table again.
    r.ns.nft(&["flush", "ruleset"]);
    r.ns.nft_script(other);
    let before = r.ns.nft(&["list", "table", "inet", "other"]);
    r.clock.advance_secs(3);
    r.fw().tick();
    let rows = r.registry.snapshot();
    let row = &rows[super::engine::CLEANUP_ROW];
    assert_eq!(row.waiting, Some(0), "{row:?}");
    let s = r.set("block4");
    assert!(s.contains("192.0.2.20") && s.contains("192.0.2.21"), "{s}");
    assert_eq!(r.fw().status()["reasserts_total"], 2);
    // Our own changes never touch the other table.
    r.fw().unblock(ip("192.0.2.20")).unwrap();
    r.fw()
        .tentative_apply(
            json!({"mode": "full", "tcp_in": [22]})
                .as_object()
                .unwrap()
                .clone(),
            1,
            "t",
        )
        .unwrap();
    r.fw().revert("t").unwrap();
    assert_eq!(r.ns.nft(&["list", "table", "inet", "other"]), before);
}

#[test]
fn rollback_reverts_on_its_timer_and_across_a_restart() {
    let Some(mut r) = Rig::new("rollback", FirewallConfig::default(), true) else {
        return;
    };
    let changes = json!({"mode": "full", "tcp_in": [22, 2222]});
    let v = r
        .fw()
        .tentative_apply(changes.as_object().unwrap().clone(), 2, "ops")
        .unwrap();
    assert_eq!(v["state"], "pending");
    assert_eq!(v["remaining_seconds"], 120);
    let chain = r.ns.nft(&["list", "chain", "inet", "svc", "input"]);
    assert!(
        chain.contains("policy drop") && chain.contains("2222"),
        "{chain}"
    );
    // A second change waits for the first.
    assert!(r
        .fw()
        .tentative_apply(changes.as_object().unwrap().clone(), 2, "ops")
        .is_err());
    r.clock.advance_secs(119);
    r.fw().tick();
    assert_eq!(r.fw().rollback_view()["state"], "pending");
    r.clock.advance_secs(1);
    r.fw().tick();
    let v = r.fw().rollback_view();
    assert_eq!(v["state"], "reverted");
    assert_eq!(v["reason"], "timer");
    assert_eq!(r.fw().settings().mode, Mode::Blocklist);
    let chain = r.ns.nft(&["list", "chain", "inet", "svc", "input"]);
    assert!(
        chain.contains("policy accept") && !chain.contains("2222"),
        "{chain}"
    );

    // Across a restart: the deadline passes while the engine is stopped.
    r.fw()
        .tentative_apply(changes.as_object().unwrap().clone(), 1, "ops")
        .unwrap();
    r.stop();
    r.clock.advance_secs(61);
    r.start();
    let v = r.fw().rollback_view();
    assert_eq!(v["state"], "reverted");
    assert_eq!(v["reason"], "restart");
    assert_eq!(r.fw().settings().mode, Mode::Blocklist);
    assert!(r
        .ns
        .nft(&["list", "chain", "inet", "svc", "input"])
        .contains("policy accept"));

    // A pending change survives a restart with its deadline, and confirm keeps it.
    r.fw()
        .tentative_apply(changes.as_object().unwrap().clone(), 5, "ops")
        .unwrap();
    r.stop();
    r.clock.advance_secs(60);
    r.start();
    let v = r.fw().rollback_view();
    assert_eq!(v["state"], "pending");
    assert_eq!(v["remaining_seconds"], 240);
    r.fw().confirm("ops").unwrap();
    r.clock.advance_secs(600);
    r.fw().tick();
    assert_eq!(r.fw().rollback_view()["state"], "confirmed");
    assert_eq!(r.fw().settings().mode, Mode::Full);
    assert_eq!(r.fw().status()["overrides"]["mode"], "full");
}

#[test]
fn expired_blocks_leave_memory_store_and_kernel() {
    let Some(r) = Rig::new("expiry", FirewallConfig::default(), true) else {
        return;
    };
    r.fw()
        .block(vec![item("192.0.2.30", Some(2))], &op())
        .unwrap();
    assert!(r.set("block4").contains("192.0.2.30"));
    r.clock.advance_secs(3);
    assert_eq!(r.fw().check(ip("192.0.2.30")).to_json()["blocked"], false);
    r.fw().tick();
    assert!(r.fw().list().is_empty());
    let n: i64 = r
        .store
        .read(|c| c.query_row("SELECT count(*) FROM blocked_ips", [], |x| x.get(0)))
        .unwrap();
    assert_eq!(n, 0);
    // The kernel's own timeout removes it (real time: wait for it).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while r.set("block4").contains("192.0.2.30") {
        assert!(
            std::time::Instant::now() < deadline,
            "element did not expire"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Blocking it again works (no stale element in the way).
    r.fw()
        .block(vec![item("192.0.2.30", Some(60))], &op())
        .unwrap();
    assert!(r.set("block4").contains("192.0.2.30"));
}
