//! Reads of the engine's memory: check, lists, counts, status. None waits for the kernel.

use std::net::IpAddr;
use std::sync::atomic::Ordering;

use super::*;

impl Firewall {
    /// Whether `ip` is on the allow list (for automatic callers).
    pub fn is_allowed(&self, ip: IpAddr) -> bool {
        let now = self.now();
        self.tables.read().allows.containing(ip, now).is_some()
    }

    /// What the firewall does with `ip`.
    pub fn check(&self, ip: IpAddr) -> CheckResult {
        let now = self.now();
        let ip = ip.to_canonical();
        let settings = self.settings();
        let t = self.tables.read();
        CheckResult {
            ip,
            block: t.block_for(ip, now).map(|(n, e)| (n, e.clone())),
            allow: t.allows.containing(ip, now).map(|(n, e)| (n, e.clone())),
            infra: settings
                .infra_ips
                .iter()
                .find(|n| n.contains_ip(ip))
                .copied(),
            dry_run: t
                .dry
                .get(&Net::host(ip), now)
                .map(|e| (Net::host(ip), e.clone())),
            now,
        }
    }

    /// Blocks and dry-run records, newest first.
    pub fn list(&self) -> Vec<Listed> {
        let now = self.now();
        let t = self.tables.read();
        let mut out: Vec<Listed> = Vec::with_capacity(t.block_count() + t.dry.len());
        for (m, dry) in [(&t.blocks, false), (&t.subnets, false), (&t.dry, true)] {
            out.extend(m.active(now).map(|(n, e)| Listed {
                net: *n,
                entry: e.clone(),
                dry_run: dry,
            }));
        }
        out.sort_by(|a, b| {
            b.entry
                .created
                .cmp(&a.entry.created)
                .then_with(|| a.net.cmp(&b.net))
        });
        out
    }

    /// Allow entries, newest first.
    pub fn allows(&self) -> Vec<Listed> {
        let now = self.now();
        let t = self.tables.read();
        let mut out: Vec<Listed> = t
            .allows
            .active(now)
            .map(|(n, e)| Listed {
                net: *n,
                entry: e.clone(),
                dry_run: false,
            })
            .collect();
        out.sort_by_key(|l| std::cmp::Reverse(l.entry.created));
        out
    }

    /// Address and subnet blocks, for the status snapshot's blocklist size: an atomic, so
    /// health reads never wait for an operation (expired blocks count until the purge, at
    /// most five seconds).
    pub fn blocked_count(&self) -> u64 {
        self.counters.blocks.load(Ordering::Relaxed)
    }

    /// Bytes the engine's tables hold (benchmark).
    pub fn heap_bytes(&self) -> usize {
        self.tables.read().heap_bytes()
    }

    /// The rollback state (`GET /api/v1/settings/firewall/rollback`, status snapshot).
    pub fn rollback_view(&self) -> Value {
        let r = self.view.lock().rollback.clone();
        r.view(self.now())
    }

    /// `GET /api/v1/firewall/status`.
    pub fn status(&self) -> Value {
        let now = self.now();
        let settings = self.settings();
        let (sets, blocks, dry, allows) = {
            let t = self.tables.read();
            let mut sets = Map::new();
            let count =
                |m: &NetMap, v4: bool| m.active(now).filter(|(n, _)| n.is_v4() == v4).count();
            for (name, map) in [("block", &t.blocks), ("blocknet", &t.subnets)] {
                sets.insert(format!("{name}4"), count(map, true).into());
                sets.insert(format!("{name}6"), count(map, false).into());
            }
            for (name, host) in [("allow", true), ("allownet", false)] {
                for (v4, fam) in [(true, "4"), (false, "6")] {
                    let n = t
                        .allows
                        .active(now)
                        .filter(|(n, _)| n.is_v4() == v4 && n.is_host() == host)
                        .count();
                    sets.insert(format!("{name}{fam}"), n.into());
                }
            }
            for (name, list) in [
                ("infra", &settings.infra_ips),
                ("dosx", &settings.dos_exempt_ranges),
            ] {
                sets.insert(
                    format!("{name}4"),
                    list.iter().filter(|n| n.is_v4()).count().into(),
                );
                sets.insert(
                    format!("{name}6"),
                    list.iter().filter(|n| !n.is_v4()).count().into(),
                );
            }
            let temp = t.blocks.active(now).filter(|(_, e)| !e.permanent()).count()
                + t.subnets
                    .active(now)
                    .filter(|(_, e)| !e.permanent())
                    .count();
            let addr = t.blocks.active(now).count();
            let sub = t.subnets.active(now).count();
            (
                sets,
                json!({"addresses": addr, "subnets": sub, "temporary": temp, "permanent": addr + sub - temp}),
                t.dry.active(now).count(),
                t.allows.active(now).count(),
            )
        };
        let v = self.view.lock().clone();
        let mut m = Map::new();
        m.insert("ok".into(), true.into());
        m.insert("active".into(), true.into());
        m.insert("mode".into(), settings.mode.as_str().into());
        m.insert(
            "table".into(),
            format!("inet {}", crate::firewall::TABLE).into(),
        );
        m.insert("table_present".into(), v.table_present.into());
        m.insert("sets".into(), Value::Object(sets));
        m.insert("blocks".into(), blocks);
        m.insert("dry_run_records".into(), dry.into());
        m.insert("allows".into(), allows.into());
        m.insert("dry_run".into(), self.auto_dry_run.into());
        if let Some(t) = v.last_reassert {
            m.insert("last_reassert_at".into(), rfc3339(t).into());
        }
        m.insert(
            "reasserts_total".into(),
            self.counters.reasserts.load(Ordering::Relaxed).into(),
        );
        m.insert(
            "transactions_total".into(),
            self.counters.transactions.load(Ordering::Relaxed).into(),
        );
        m.insert(
            "kernel_failures_total".into(),
            self.counters.kernel_failures.load(Ordering::Relaxed).into(),
        );
        m.insert(
            "refused_total".into(),
            self.counters.refused.load(Ordering::Relaxed).into(),
        );
        m.insert(
            "dry_run_total".into(),
            self.counters.dry_run.load(Ordering::Relaxed).into(),
        );
        if let Some(e) = v.last_error {
            m.insert("last_error".into(), e.into());
        }
        m.insert("rollback".into(), v.rollback.view(now));
        m.insert("settings".into(), settings.runtime_json());
        m.insert("overrides".into(), Value::Object(v.overrides));
        Value::Object(m)
    }
}
