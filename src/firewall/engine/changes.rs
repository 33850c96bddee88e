//! Changes to blocks and allow entries: validation (refusals, lifetimes, limits), then the
//! store, memory and one kernel batch.

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::*;

impl Firewall {
    /// Why `net` may not be blocked by `actor`, if it may not.
    pub(super) fn refusal(
        &self,
        net: &Net,
        actor: &Actor,
        t: &Tables,
        s: &FirewallConfig,
        locals: &[IpAddr],
        now: i64,
    ) -> Option<Refusal> {
        if net.is_default_route() {
            return Some(Refusal::DefaultRoute);
        }
        if is_loopback_or_unspecified(net.addr()) {
            return Some(Refusal::Local(net.addr()));
        }
        if let Some(ip) = locals.iter().find(|ip| net.contains_ip(**ip)) {
            return Some(Refusal::Local(*ip));
        }
        if !net.is_host() {
            let lo = if net.is_v4() {
                Net::parse("127.0.0.0/8").ok()
            } else {
                Net::parse("::1").ok()
            };
            if let Some(lo) = lo.filter(|lo| net.overlaps(lo)) {
                return Some(Refusal::Local(lo.addr()));
            }
        }
        if let Some(i) = s.infra_ips.iter().find(|i| i.overlaps(net)) {
            return Some(Refusal::Infra(*i));
        }
        if let Some((entry, e)) = t.allows.overlapping(net, now) {
            return Some(Refusal::Allowed {
                entry,
                reason: e.reason.to_string(),
            });
        }
        if let Actor::Operator {
            protect: Some(ip), ..
        } = actor
        {
            // The address itself too, not only a range around it: blocking it locks the
            // operator out as surely (issue 23 item 11). `"force": true` drops `protect`.
            if net.contains_ip(ip.to_canonical()) {
                return Some(Refusal::OwnAddress(ip.to_canonical()));
            }
        }
        if !net.is_host() {
            if let Some((other, _)) = t.subnets.overlapping(net, now) {
                if other != *net {
                    return Some(Refusal::OverlapsSubnet(other));
                }
            }
        }
        None
    }

    /// Expiry of a temporary block made now: spread in 100 ms steps over five seconds
    /// across the blocks of one second (never more than a tenth of the duration), so a mass
    /// ban does not lapse at one instant.
    fn spread_expiry(ops: &mut Ops, now: i64, d: Duration) -> i64 {
        let sec = now.div_euclid(1_000_000);
        if ops.burst.0 != sec {
            ops.burst = (sec, 0);
        }
        let k = ops.burst.1;
        ops.burst.1 += 1;
        let d_ms = d.as_millis().min(u64::MAX as u128) as u64;
        let offset_ms = ((k % SPREAD_STEPS) * SPREAD_STEP_MS).min(d_ms / 10);
        now.saturating_add((d_ms.saturating_add(offset_ms) as i64).saturating_mul(1000))
    }

    /// Blocks addresses and subnets: all accepted items in one store transaction and one
    /// kernel transaction. Automatic callers in dry-run mode only record what they would
    /// have blocked. Each item gets an [`Outcome`]; the call fails only when the store or
    /// nftables does.
    pub fn block(
        &self,
        items: Vec<BlockItem>,
        actor: &Actor,
    ) -> Result<Vec<Outcome>, FirewallError> {
        for it in &items {
            check_reason(&it.reason)?;
        }
        let mut ops = self.ops.lock();
        let now = self.now();
        let settings = self.settings();
        let locals = self.locals(&mut ops, now);
        let dry = actor.automatic() && self.auto_dry_run;
        let mut outcomes = Vec::with_capacity(items.len());
        let mut puts: Vec<(Net, Entry)> = Vec::new();
        let mut replaced: std::collections::HashSet<Net> = std::collections::HashSet::new();
        let mut seen = std::collections::HashSet::new();
        {
            let mut t = self.tables.write();
            let mut count = if dry { t.dry.len() } else { t.block_count() };
            for it in items {
                let net = it.net;
                if !seen.insert(net) {
                    outcomes.push(Outcome::Unchanged {
                        net,
                        why: "listed twice in this request".into(),
                    });
                    continue;
                }
                if let Some(r) = self.refusal(&net, actor, &t, &settings, &locals, now) {
                    self.counters.refused.fetch_add(1, Ordering::Relaxed);
                    outcomes.push(Outcome::Refused { net, refusal: r });
                    continue;
                }
                let existing = if net.is_host() {
                    t.block_for(net.addr(), now).map(|(n, e)| (n, e.clone()))
                } else {
                    t.subnets.get(&net, now).map(|e| (net, e.clone()))
                };
                let expires = match it.duration {
                    None => PERMANENT,
                    Some(d) => Self::spread_expiry(&mut ops, now, d),
                };
                if let Some((by, e)) = &existing {
                    let longer = e.permanent() || (expires != PERMANENT && e.expires >= expires);
                    if longer || by != &net {
                        let why = if by != &net {
                            format!("already blocked by subnet {by}")
                        } else if e.permanent() {
                            "already blocked permanently; unblock first to change its lifetime"
                                .into()
                        } else {
                            format!(
                                "already blocked until {}; unblock first to shorten it",
                                e.expires_at().map(rfc3339).unwrap_or_default()
                            )
                        };
                        outcomes.push(Outcome::Unchanged { net, why });
                        continue;
                    }
                }
                let map_has = |t: &Tables| {
                    if dry {
                        t.dry.get(&net, now).cloned()
                    } else {
                        None
                    }
                };
                if let Some(e) = map_has(&t) {
                    if e.permanent() || (expires != PERMANENT && e.expires >= expires) {
                        outcomes.push(Outcome::Unchanged {
                            net,
                            why: "a dry-run record as long or longer exists".into(),
                        });
                        continue;
                    }
                }
                let is_new = if dry {
                    t.dry.get(&net, i64::MIN).is_none()
                } else {
                    existing.is_none()
                };
                if is_new && count >= settings.max_blocks {
                    self.counters.refused.fetch_add(1, Ordering::Relaxed);
                    outcomes.push(Outcome::Refused {
                        net,
                        refusal: Refusal::Limit(settings.max_blocks),
                    });
                    continue;
                }
                if is_new {
                    count += 1;
                }
                let entry = t.entry(now, expires, &it.reason, actor.source(), actor.name());
                let expires_at = entry.expires_at();
                if !dry && existing.is_some() {
                    replaced.insert(net);
                }
                puts.push((net, entry));
                outcomes.push(if dry {
                    Outcome::DryRun { net, expires_at }
                } else {
                    Outcome::Blocked { net, expires_at }
                });
            }
        }
        if puts.is_empty() {
            return Ok(outcomes);
        }
        let kind = if dry { Kind::DryRun } else { Kind::Block };
        let rows: Vec<sfw::Row> = puts.iter().map(|(n, e)| e.row(n)).collect();
        self.store.write(move |c| sfw::upsert(c, kind, &rows))?;
        let mut batch = Batch::new();
        {
            let mut t = self.tables.write();
            for (net, e) in &puts {
                if dry {
                    t.dry.insert(*net, e.clone());
                    self.counters.dry_run.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let map = if net.is_host() {
                    &mut t.blocks
                } else {
                    &mut t.subnets
                };
                if replaced.contains(net) {
                    batch.delete(set_of(net, Kind::Block), net);
                }
                map.insert(*net, e.clone());
                if let Some(to) = timeout_ms(e, now) {
                    batch.add(set_of(net, Kind::Block), net, to);
                }
            }
        }
        self.note_counts();
        if !dry {
            self.commit(&mut ops, batch)?;
        }
        Ok(outcomes)
    }

    /// Removes every block of address `ip` (its address block and any dry-run record), not
    /// subnets. Nothing to remove is `NotFound`, naming a subnet that still covers it.
    pub fn unblock(&self, ip: IpAddr) -> Result<Vec<Listed>, FirewallError> {
        let net = Net::host(ip);
        let mut ops = self.ops.lock();
        let now = self.now();
        let (block, dry) = {
            let t = self.tables.read();
            (
                t.blocks.get(&net, i64::MIN).cloned(),
                t.dry.get(&net, i64::MIN).cloned(),
            )
        };
        let active = block.as_ref().is_some_and(|e| e.active(now));
        let dry_active = dry.as_ref().is_some_and(|e| e.active(now));
        if !active && !dry_active {
            let t = self.tables.read();
            return Err(FirewallError::NotFound(match t.subnets.containing(ip, now) {
                Some((s, _)) => format!(
                    "{net} has no address block; it is covered by blocked subnet {s} (use remove-subnet)"
                ),
                None => format!("{net} is not blocked"),
            }));
        }
        let key = net.to_string();
        let (b, d) = (block.is_some(), dry.is_some());
        self.store.write(move |c| {
            if b {
                sfw::delete(c, Kind::Block, std::slice::from_ref(&key))?;
            }
            if d {
                sfw::delete(c, Kind::DryRun, std::slice::from_ref(&key))?;
            }
            Ok(())
        })?;
        let mut removed = Vec::new();
        let mut batch = Batch::new();
        {
            let mut t = self.tables.write();
            if let Some(e) = t.blocks.remove(&net) {
                if e.active(now) {
                    batch.delete(set_of(&net, Kind::Block), &net);
                    removed.push(Listed {
                        net,
                        entry: e,
                        dry_run: false,
                    });
                }
            }
            if let Some(e) = t.dry.remove(&net) {
                if e.active(now) {
                    removed.push(Listed {
                        net,
                        entry: e,
                        dry_run: true,
                    });
                }
            }
        }
        self.note_counts();
        self.commit(&mut ops, batch)?;
        Ok(removed)
    }

    /// Blocks a subnet permanently (`deny-subnet`).
    pub fn deny_subnet(
        &self,
        net: Net,
        reason: &str,
        actor: &Actor,
    ) -> Result<Outcome, FirewallError> {
        if net.is_host() {
            return Err(FirewallError::Invalid(format!(
                "{net} is a single address; give a range such as {}",
                Net::covering(net.addr(), if net.is_v4() { 24 } else { 64 })
            )));
        }
        let out = self.block(
            vec![BlockItem {
                net,
                reason: reason.into(),
                duration: None,
            }],
            actor,
        )?;
        out.into_iter()
            .next()
            .ok_or_else(|| FirewallError::Invalid("empty request".into()))
    }

    /// Removes a subnet block.
    pub fn remove_subnet(&self, net: Net) -> Result<Listed, FirewallError> {
        let mut ops = self.ops.lock();
        let now = self.now();
        let found = self.tables.read().subnets.get(&net, now).cloned();
        let Some(entry) = found else {
            return Err(FirewallError::NotFound(format!(
                "{net} is not a blocked subnet"
            )));
        };
        let key = net.to_string();
        self.store
            .write(move |c| sfw::delete(c, Kind::Block, std::slice::from_ref(&key)))?;
        self.tables.write().subnets.remove(&net);
        self.note_counts();
        let mut batch = Batch::new();
        batch.delete(set_of(&net, Kind::Block), &net);
        self.commit(&mut ops, batch)?;
        Ok(Listed {
            net,
            entry,
            dry_run: false,
        })
    }

    /// Removes every temporary block (addresses and subnets) and temporary dry-run record;
    /// permanent ones stay. Returns how many were removed.
    pub fn flush_temporary(&self) -> Result<usize, FirewallError> {
        let mut ops = self.ops.lock();
        let now = self.now();
        let (blocks, dry): (Vec<(Net, Entry)>, Vec<Net>) = {
            let t = self.tables.read();
            let temp = |m: &NetMap| -> Vec<(Net, Entry)> {
                m.active(now)
                    .filter(|(_, e)| !e.permanent())
                    .map(|(n, e)| (*n, e.clone()))
                    .collect()
            };
            let mut b = temp(&t.blocks);
            b.extend(temp(&t.subnets));
            (b, temp(&t.dry).into_iter().map(|(n, _)| n).collect())
        };
        if blocks.is_empty() && dry.is_empty() {
            return Ok(0);
        }
        let keys: Vec<String> = blocks.iter().map(|(n, _)| n.to_string()).collect();
        let dkeys: Vec<String> = dry.iter().map(|n| n.to_string()).collect();
        self.store.write(move |c| {
            sfw::delete(c, Kind::Block, &keys)?;
            sfw::delete(c, Kind::DryRun, &dkeys)
        })?;
        let mut batch = Batch::new();
        {
            let mut t = self.tables.write();
            for (n, _) in &blocks {
                if n.is_host() {
                    t.blocks.remove(n);
                } else {
                    t.subnets.remove(n);
                }
                batch.delete(set_of(n, Kind::Block), n);
            }
            for n in &dry {
                t.dry.remove(n);
            }
        }
        self.note_counts();
        self.commit(&mut ops, batch)?;
        Ok(blocks.len() + dry.len())
    }

    /// Adds (or renews) an allow entry. Address blocks and dry-run records inside it are
    /// removed in the same transactions; a blocked subnet overlapping it keeps dropping
    /// (blocked drop precedes allowed accept), reported as a warning.
    pub fn allow(
        &self,
        net: Net,
        reason: &str,
        duration: Option<Duration>,
        actor: &Actor,
    ) -> Result<AllowOutcome, FirewallError> {
        check_reason(reason)?;
        if net.is_default_route() {
            return Err(FirewallError::Invalid(
                "a default route (0.0.0.0/0, ::/0) cannot be allowed".into(),
            ));
        }
        let mut ops = self.ops.lock();
        let now = self.now();
        let settings = self.settings();
        let (entry, replaced, unblocked, undry, warning) = {
            let mut t = self.tables.write();
            let replaced = match t.allows.overlapping(&net, now) {
                Some((other, _)) if other != net => {
                    return Err(FirewallError::Refused(format!(
                        "{net} overlaps allow entry {other}; remove it first"
                    )))
                }
                Some(_) => true,
                None => false,
            };
            if !replaced && t.allows.len() >= settings.max_allows {
                return Err(FirewallError::Refused(format!(
                    "firewall.max_allows ({}) reached",
                    settings.max_allows
                )));
            }
            let expires = match duration {
                None => PERMANENT,
                Some(d) => now.saturating_add(d.as_micros().min(i64::MAX as u128) as i64),
            };
            let entry = t.entry(now, expires, reason, "", actor.name());
            let unblocked = t.blocks.inside(&net, now);
            let undry = t.dry.inside(&net, now);
            let warning = t.subnets.overlapping(&net, now).map(|(s, _)| {
                format!("blocked subnet {s} overlaps {net} and still drops it: blocked drop takes precedence over the allow list")
            });
            (entry, replaced, unblocked, undry, warning)
        };
        let row = entry.row(&net);
        let bkeys: Vec<String> = unblocked.iter().map(|n| n.to_string()).collect();
        let dkeys: Vec<String> = undry.iter().map(|n| n.to_string()).collect();
        self.store.write(move |c| {
            sfw::upsert(c, Kind::Allow, &[row])?;
            sfw::delete(c, Kind::Block, &bkeys)?;
            sfw::delete(c, Kind::DryRun, &dkeys)
        })?;
        let mut batch = Batch::new();
        {
            let mut t = self.tables.write();
            for n in &unblocked {
                t.blocks.remove(n);
                batch.delete(set_of(n, Kind::Block), n);
            }
            for n in &undry {
                t.dry.remove(n);
            }
            if replaced {
                batch.delete(set_of(&net, Kind::Allow), &net);
            }
            if let Some(to) = timeout_ms(&entry, now) {
                batch.add(set_of(&net, Kind::Allow), &net, to);
            }
            t.allows.insert(net, entry.clone());
        }
        self.note_counts();
        self.commit(&mut ops, batch)?;
        let mut unblocked = unblocked;
        unblocked.extend(undry);
        unblocked.sort();
        unblocked.dedup();
        Ok(AllowOutcome {
            net,
            expires_at: entry.expires_at(),
            unblocked,
            warning,
        })
    }

    /// Removes an allow entry (exactly `net`).
    pub fn unallow(&self, net: Net) -> Result<Listed, FirewallError> {
        let mut ops = self.ops.lock();
        let now = self.now();
        let found = self.tables.read().allows.get(&net, now).cloned();
        let Some(entry) = found else {
            let t = self.tables.read();
            return Err(FirewallError::NotFound(
                match t.allows.containing(net.addr(), now) {
                    Some((other, _)) if net.is_host() => {
                        format!(
                            "{net} has no allow entry of its own; allow entry {other} covers it"
                        )
                    }
                    _ => format!("{net} is not on the allow list"),
                },
            ));
        };
        let key = net.to_string();
        self.store
            .write(move |c| sfw::delete(c, Kind::Allow, std::slice::from_ref(&key)))?;
        self.tables.write().allows.remove(&net);
        let mut batch = Batch::new();
        batch.delete(set_of(&net, Kind::Allow), &net);
        self.commit(&mut ops, batch)?;
        Ok(Listed {
            net,
            entry,
            dry_run: false,
        })
    }
}
