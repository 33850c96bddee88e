//! Putting a block back exactly as it was (threat undo): the one change that may shorten
//! a block, because it returns an address to its earlier state.

use super::*;

/// A block as it was, to put back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriorBlock {
    pub reason: String,
    pub source: String,
    pub created_by: String,
    /// Microseconds since the epoch.
    pub created: i64,
    /// Microseconds since the epoch; `None` for a permanent block.
    pub expires: Option<i64>,
}

impl PriorBlock {
    /// The address block of `ip` in force now, if any.
    pub fn of(fw: &Firewall, ip: std::net::IpAddr) -> Option<PriorBlock> {
        let now = fw.now();
        let t = fw.tables.read();
        t.blocks.get(&Net::host(ip), now).map(|e| PriorBlock {
            reason: e.reason.to_string(),
            source: e.source.to_string(),
            created_by: e.by.to_string(),
            created: e.created,
            expires: (!e.permanent()).then_some(e.expires),
        })
    }
}

impl Firewall {
    /// Replaces the address block of `ip` with `prior` (same reason, source, creator,
    /// creation and deadline; no spreading of the expiry), or removes it when `prior` is
    /// `None` or its deadline has passed ("expired blocks stay expired"). Refusals (local,
    /// infrastructure, allow-listed) apply as for [`Firewall::block`].
    pub fn restore_block(
        &self,
        ip: std::net::IpAddr,
        prior: Option<&PriorBlock>,
    ) -> Result<Outcome, FirewallError> {
        let net = Net::host(ip.to_canonical());
        let now = self.now();
        let prior = prior.filter(|p| p.expires.is_none_or(|e| e > now));
        let Some(p) = prior else {
            return match self.unblock(net.addr()) {
                Ok(_) => Ok(Outcome::Unchanged {
                    net,
                    why: "the earlier state had no block (or it has expired)".into(),
                }),
                Err(FirewallError::NotFound(_)) => Ok(Outcome::Unchanged {
                    net,
                    why: "not blocked".into(),
                }),
                Err(e) => Err(e),
            };
        };
        check_reason(&p.reason)?;
        let mut ops = self.ops.lock();
        let settings = self.settings();
        let locals = self.locals(&mut ops, now);
        let actor = Actor::Operator {
            name: p.created_by.clone(),
            protect: None,
        };
        let expires = p.expires.unwrap_or(PERMANENT);
        let (entry, existed) = {
            let mut t = self.tables.write();
            if let Some(r) = self.refusal(&net, &actor, &t, &settings, &locals, now) {
                self.counters.refused.fetch_add(1, Ordering::Relaxed);
                return Ok(Outcome::Refused { net, refusal: r });
            }
            let existed = t.blocks.get(&net, i64::MIN).is_some();
            if !existed && t.block_count() >= settings.max_blocks {
                return Ok(Outcome::Refused {
                    net,
                    refusal: Refusal::Limit(settings.max_blocks),
                });
            }
            (
                t.entry(p.created, expires, &p.reason, &p.source, &p.created_by),
                existed,
            )
        };
        let row = entry.row(&net);
        let key = net.to_string();
        self.store.write(move |c| {
            sfw::upsert(c, Kind::Block, &[row])?;
            sfw::delete(c, Kind::DryRun, std::slice::from_ref(&key))
        })?;
        let mut batch = Batch::new();
        {
            let mut t = self.tables.write();
            if existed {
                batch.delete(set_of(&net, Kind::Block), &net);
            }
            t.dry.remove(&net);
            if let Some(to) = timeout_ms(&entry, now) {
                batch.add(set_of(&net, Kind::Block), &net, to);
            }
            t.blocks.insert(net, entry.clone());
        }
        self.note_counts();
        self.commit(&mut ops, batch)?;
        Ok(Outcome::Blocked {
            net,
            expires_at: entry.expires_at(),
        })
    }
}
