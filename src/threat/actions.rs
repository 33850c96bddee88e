//! Operator changes (block for 24 hours, permanent block, whitelist, temporary whitelist,
//! unwhitelist, clear) and their undo, following the state table of the spec ("Threat
//! evidence and blocks"):
//!
//! | State | Trigger | Result |
//! |---|---|---|
//! | unblocked | block 24 h | blocked, evidence expiring with the block |
//! | blocked permanently or longer than 24 h | block 24 h | refused (bulk: skipped with a warning); unblock first |
//! | any | permanent block | blocked, permanent evidence (stays until cleared) |
//! | unblocked with permanent evidence | lookup | `flagged: true`; blocked again when next seen |
//! | blocked | undo | prior lifetime restored (original deadline; expired stays expired); evidence restored only where the firewall reversal succeeded |
//! | any | later block, clear or whitelist decision | older undo entries invalidated |
//!
//! Clearing resets the score and evidence and keeps the events, the firewall and the
//! permanent blocklist (rule 2).

use std::net::IpAddr;
use std::time::Duration;

use serde_json::{json, Value};

use super::db::{Evidence, RecordState};
use super::undo::{self, Item, UndoError};
use super::Threat;
use crate::firewall::{
    Actor, BlockItem, Firewall, FirewallError, Handle, Net, Outcome, PriorBlock, Refusal,
};
use crate::timefmt::rfc3339;

/// Lifetime of `block-ip`.
pub const BLOCK_HOURS: u64 = 24;
/// `temp-whitelist-ip` hours: range and default.
pub const TEMP_HOURS: (u64, u64, u64) = (1, 168, 24);

/// One operator change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Block,
    BlockPermanent,
    Whitelist,
    TempWhitelist(u64),
    Unwhitelist,
    Clear,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Block => "block",
            Action::BlockPermanent => "block_permanent",
            Action::Whitelist => "whitelist",
            Action::TempWhitelist(_) => "temp_whitelist",
            Action::Unwhitelist => "unwhitelist",
            Action::Clear => "clear",
        }
    }

    fn needs_firewall(self) -> bool {
        !matches!(self, Action::Clear)
    }
}

/// Who acts: the credential's name (undo entries belong to it) and the caller's address.
#[derive(Clone, Debug)]
pub struct Caller {
    pub name: String,
    pub protect: Option<IpAddr>,
}

impl Caller {
    fn actor(&self) -> Actor {
        Actor::Operator {
            name: self.name.clone(),
            protect: self.protect,
        }
    }
}

/// What happened to one address.
#[derive(Clone, Debug, PartialEq)]
pub enum Res {
    /// Changed; details for the answer.
    Changed(Value),
    /// Not changed, by the rules or the state (the warning says why).
    Skipped(String),
    /// Refused by the firewall's rules: the warning and the refusal's kind
    /// (`firewall::Refusal::kind`, e.g. `own_address`).
    Refused(String, &'static str),
    /// The firewall or the store failed (message, HTTP status).
    Failed(String, u16),
}

/// The outcome of one request.
#[derive(Debug, Default)]
pub struct Acted {
    pub results: Vec<(IpAddr, Res)>,
    pub undo_token: Option<String>,
    /// Set when the change happened but its undo entry could not be stored.
    pub undo_error: Option<String>,
}

/// Why a request could not run at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActError {
    /// The firewall engine is absent (503).
    Engine(String),
}

impl std::fmt::Display for ActError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ActError::Engine(m) => f.write_str(m),
        }
    }
}

/// HTTP status of a firewall error.
pub fn status_of(e: &FirewallError) -> u16 {
    match e {
        FirewallError::Invalid(_) | FirewallError::Settings(_) => 400,
        FirewallError::NotFound(_) => 404,
        FirewallError::Refused(_) => 409,
        FirewallError::Store(_) => 503,
        FirewallError::Kernel(_) => 500,
    }
}

fn engine(h: &Handle) -> Result<&std::sync::Arc<Firewall>, ActError> {
    h.engine()
        .map_err(|r| ActError::Engine(Handle::absent_message(r)))
}

fn record_of(s: Option<RecordState>) -> Option<undo::Record> {
    s.map(|s| {
        let (evidence, until) = match s.evidence {
            Evidence::None => (0, 0),
            Evidence::Expiring(t) => (1, t),
            Evidence::Permanent => (2, 0),
        };
        undo::Record {
            score: s.score,
            score_at: s.score_at,
            evidence,
            evidence_until: until,
        }
    })
}

fn state_of(r: &Option<undo::Record>) -> Option<RecordState> {
    r.map(|r| RecordState {
        score: r.score,
        score_at: r.score_at,
        evidence: match r.evidence {
            1 => Evidence::Expiring(r.evidence_until),
            2 => Evidence::Permanent,
            _ => Evidence::None,
        },
    })
}

/// The allow entry of exactly `ip`, if any.
fn own_allow(fw: &Firewall, ip: IpAddr) -> Option<undo::Allow> {
    fw.check(ip)
        .allow
        .filter(|(net, _)| net.is_host())
        .map(|(_, e)| undo::Allow {
            reason: e.reason.to_string(),
            expires: (!e.permanent()).then_some(e.expires),
        })
}

fn expiry_json(expires_at: Option<jiff::Timestamp>) -> Value {
    let mut v = json!({ "permanent": expires_at.is_none() });
    if let Some(t) = expires_at {
        v["expires_at"] = rfc3339(t).into();
    }
    v
}

/// What an undo did: (action, restored addresses, failures with their reason).
pub type UndoOutcome = (String, Vec<IpAddr>, Vec<(IpAddr, String)>);

impl Threat {
    /// Applies `action` to `ips` (canonical, distinct) for `caller`.
    pub fn act(
        &self,
        action: Action,
        ips: &[IpAddr],
        reason: Option<&str>,
        caller: &Caller,
    ) -> Result<Acted, ActError> {
        let fw = if action.needs_firewall() {
            Some(engine(&self.firewall)?.clone())
        } else {
            None
        };
        let now = self.clock.now().as_microsecond();
        let mut results: Vec<(IpAddr, Res)> = Vec::with_capacity(ips.len());
        let mut items: Vec<Item> = Vec::new();
        match (action, &fw) {
            (Action::Block | Action::BlockPermanent, Some(fw)) => {
                let permanent = action == Action::BlockPermanent;
                let until = now + (BLOCK_HOURS * 3_600_000_000) as i64;
                let why = reason.unwrap_or(if permanent {
                    "operator: permanent block"
                } else {
                    "operator: 24-hour block"
                });
                let mut todo: Vec<(IpAddr, Item)> = Vec::new();
                for &ip in ips {
                    let c = fw.check(ip);
                    let evidence = self.db.view(ip, now).map(|v| v.evidence);
                    if let Some((net, e)) = &c.block {
                        let longer = e.permanent() || e.expires >= until;
                        if !permanent && longer {
                            let w = if !net.is_host() {
                                format!("{ip}: covered by blocked subnet {net}; remove the subnet first")
                            } else if e.permanent() {
                                format!("{ip}: already blocked permanently; unblock first to change its lifetime")
                            } else {
                                format!(
                                    "{ip}: already blocked until {}, longer than 24 hours; unblock first to change its lifetime",
                                    e.expires_at().map(rfc3339).unwrap_or_default()
                                )
                            };
                            results.push((ip, Res::Skipped(w)));
                            continue;
                        }
                        if permanent && e.permanent() && evidence == Some(Evidence::Permanent) {
                            results.push((
                                ip,
                                Res::Skipped(format!("{ip}: already blocked permanently")),
                            ));
                            continue;
                        }
                    }
                    todo.push((
                        ip,
                        Item {
                            ip,
                            block: PriorBlock::of(fw, ip).map(Into::into),
                            allow: None,
                            record: record_of(self.db.state(ip)),
                        },
                    ));
                }
                if !todo.is_empty() {
                    let block_items = todo
                        .iter()
                        .map(|(ip, _)| BlockItem {
                            net: Net::host(*ip),
                            reason: why.to_string(),
                            duration: (!permanent).then(|| Duration::from_secs(BLOCK_HOURS * 3600)),
                        })
                        .collect();
                    match fw.block(block_items, &caller.actor()) {
                        Ok(outcomes) => {
                            for (o, (ip, item)) in outcomes.into_iter().zip(todo) {
                                match o {
                                    Outcome::Blocked { expires_at, .. }
                                    | Outcome::DryRun { expires_at, .. } => {
                                        let ev = match expires_at {
                                            Some(t) => Evidence::Expiring(t.as_second()),
                                            None => Evidence::Permanent,
                                        };
                                        self.db.set_evidence(ip, ev, now);
                                        self.digest.note(ip, why, "operator", expires_at, false);
                                        let mut d = expiry_json(expires_at);
                                        d["result"] = "blocked".into();
                                        results.push((ip, Res::Changed(d)));
                                        items.push(item);
                                    }
                                    Outcome::Unchanged { why: w, .. } if permanent => {
                                        // Already dropped (by a subnet, or permanently):
                                        // the evidence becomes permanent.
                                        self.db.set_evidence(ip, Evidence::Permanent, now);
                                        let mut d = expiry_json(None);
                                        d["result"] = "evidence".into();
                                        d["warning"] = w.into();
                                        results.push((ip, Res::Changed(d)));
                                        items.push(item);
                                    }
                                    Outcome::Unchanged { why: w, .. } => {
                                        results.push((ip, Res::Skipped(format!("{ip}: {w}"))))
                                    }
                                    Outcome::Refused { refusal, .. } => results.push((
                                        ip,
                                        Res::Refused(
                                            format!("{ip}: refused: {refusal}"),
                                            refusal.kind(),
                                        ),
                                    )),
                                }
                            }
                        }
                        Err(e) => {
                            let st = status_of(&e);
                            for (ip, _) in todo {
                                results.push((ip, Res::Failed(e.to_string(), st)));
                            }
                        }
                    }
                }
            }
            (Action::Whitelist | Action::TempWhitelist(_), Some(fw)) => {
                let hours = match action {
                    Action::TempWhitelist(h) => Some(h),
                    _ => None,
                };
                let why = reason.unwrap_or(if hours.is_some() {
                    "operator: temporary whitelist"
                } else {
                    "operator: whitelist"
                });
                for &ip in ips {
                    let item = Item {
                        ip,
                        block: PriorBlock::of(fw, ip).map(Into::into),
                        allow: own_allow(fw, ip),
                        record: record_of(self.db.state(ip)),
                    };
                    let d = hours.map(|h| Duration::from_secs(h * 3600));
                    match fw.allow(Net::host(ip), why, d, &caller.actor()) {
                        Ok(o) => {
                            let mut v = expiry_json(o.expires_at);
                            if let Some(d) = d {
                                v["duration_seconds"] = d.as_secs().into();
                            }
                            v["unblocked"] = o
                                .unblocked
                                .iter()
                                .map(|n| n.to_string())
                                .collect::<Vec<_>>()
                                .into();
                            if let Some(w) = o.warning {
                                v["warning"] = w.into();
                            }
                            results.push((ip, Res::Changed(v)));
                            items.push(item);
                        }
                        Err(
                            e @ (FirewallError::Refused(_)
                            | FirewallError::Invalid(_)
                            | FirewallError::NotFound(_)),
                        ) => results.push((ip, Res::Skipped(format!("{ip}: {e}")))),
                        Err(e) => results.push((ip, Res::Failed(e.to_string(), status_of(&e)))),
                    }
                }
            }
            (Action::Unwhitelist, Some(fw)) => {
                for &ip in ips {
                    let item = Item {
                        ip,
                        block: None,
                        allow: own_allow(fw, ip),
                        record: None,
                    };
                    match fw.unallow(Net::host(ip)) {
                        Ok(_) => {
                            results.push((ip, Res::Changed(json!({ "result": "removed" }))));
                            items.push(item);
                        }
                        Err(e @ FirewallError::NotFound(_)) => {
                            results.push((ip, Res::Skipped(format!("{ip}: {e}"))))
                        }
                        Err(e) => results.push((ip, Res::Failed(e.to_string(), status_of(&e)))),
                    }
                }
            }
            (Action::Clear, _) => {
                for &ip in ips {
                    match self.db.clear(ip, now) {
                        Some(before) => {
                            results.push((ip, Res::Changed(json!({ "result": "cleared" }))));
                            items.push(Item {
                                ip,
                                block: None,
                                allow: None,
                                record: record_of(Some(before)),
                            });
                        }
                        None => results.push((
                            ip,
                            Res::Skipped(format!("{ip}: no record in the attack database")),
                        )),
                    }
                }
            }
            (_, None) => {}
        }
        let mut out = Acted {
            results,
            ..Acted::default()
        };
        if !items.is_empty() {
            let changed: Vec<IpAddr> = items.iter().map(|i| i.ip).collect();
            let seq = self.undo.decision(&changed);
            let lifetime = self.config().0.undo_minutes as i64 * 60_000_000;
            match self
                .undo
                .register(&caller.name, action.name(), seq, items, lifetime)
            {
                Ok(t) => out.undo_token = Some(t),
                Err(e) => out.undo_error = Some(e.to_string()),
            }
        }
        Ok(out)
    }

    /// Runs the caller's undo entry `token`: (action, restored addresses, failures), or
    /// (status, reason) when it cannot run.
    pub fn run_undo(&self, token: &str, caller: &Caller) -> Result<UndoOutcome, (u16, String)> {
        let fw = self.firewall.engine().ok().cloned();
        let e = self.undo.take(token, &caller.name).map_err(|e| match e {
            UndoError::NotFound => (404, e.to_string()),
            UndoError::Invalidated(_) => (409, e.to_string()),
            UndoError::Store(_) => (503, e.to_string()),
        })?;
        let now = self.clock.now().as_microsecond();
        let mut restored = Vec::new();
        let mut failed = Vec::new();
        for it in &e.items {
            let ip = it.ip;
            let r: Result<(), RestoreError> = match e.action.as_str() {
                "block" | "block_permanent" => match &fw {
                    None => Err(RestoreError::EngineAbsent),
                    Some(fw) => {
                        let prior: Option<PriorBlock> = it.block.as_ref().map(Into::into);
                        match fw.restore_block(ip, prior.as_ref()) {
                            Ok(Outcome::Refused { refusal, .. }) => {
                                Err(RestoreError::Refused(refusal))
                            }
                            Ok(_) => {
                                // Evidence comes back only with a successful reversal.
                                self.db.restore(ip, state_of(&it.record), now);
                                Ok(())
                            }
                            Err(e) => Err(RestoreError::Firewall(e)),
                        }
                    }
                },
                "whitelist" | "temp_whitelist" => match &fw {
                    None => Err(RestoreError::EngineAbsent),
                    Some(fw) => (|| {
                        match fw.unallow(Net::host(ip)) {
                            Ok(_) | Err(FirewallError::NotFound(_)) => {}
                            Err(e) => return Err(RestoreError::Firewall(e)),
                        }
                        if let Some(a) = &it.allow {
                            reallow(fw, ip, a, now, caller)?;
                        }
                        if let Some(b) = &it.block {
                            let prior: PriorBlock = b.into();
                            match fw.restore_block(ip, Some(&prior)) {
                                Ok(Outcome::Refused { refusal, .. }) => {
                                    return Err(RestoreError::Refused(refusal))
                                }
                                Ok(_) => {}
                                Err(e) => return Err(RestoreError::Firewall(e)),
                            }
                        }
                        Ok(())
                    })(),
                },
                "unwhitelist" => match &fw {
                    None => Err(RestoreError::EngineAbsent),
                    Some(fw) => match &it.allow {
                        Some(a) => reallow(fw, ip, a, now, caller),
                        None => Ok(()),
                    },
                },
                "clear" => {
                    self.db.restore(ip, state_of(&it.record), now);
                    Ok(())
                }
                other => Err(RestoreError::UnknownAction(other.to_string())),
            };
            match r {
                Ok(()) => restored.push(ip),
                Err(m) => failed.push((ip, m.to_string())),
            }
        }
        if restored.is_empty() && !failed.is_empty() {
            // Nothing changed: the entry stays for another try.
            let msg = failed
                .iter()
                .map(|(ip, m)| format!("{ip}: {m}"))
                .collect::<Vec<_>>()
                .join("; ");
            self.undo.put_back(e);
            return Err((
                if fw.is_none() { 503 } else { 500 },
                format!("nothing was restored: {msg}"),
            ));
        }
        if !restored.is_empty() {
            self.undo.decision(&restored);
        }
        Ok((e.action, restored, failed))
    }

    /// Whether `ip` carries permanent evidence without being blocked (state table: flagged
    /// again when next seen).
    pub fn flagged(&self, ip: IpAddr, blocked: bool) -> bool {
        let now = self.clock.now().as_microsecond();
        !blocked
            && self
                .db
                .view(ip, now)
                .is_some_and(|v| v.evidence == Evidence::Permanent)
    }
}

/// Why one address of an undo entry was not restored (its `failed` reason).
#[derive(Debug)]
enum RestoreError {
    EngineAbsent,
    /// The firewall refused the restored block (an allowed or infrastructure address).
    Refused(Refusal),
    Firewall(FirewallError),
    /// A stored entry of an action this version does not know.
    UnknownAction(String),
}

impl std::fmt::Display for RestoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RestoreError::EngineAbsent => f.write_str("the firewall engine is not running"),
            RestoreError::Refused(r) => write!(f, "{r}"),
            RestoreError::Firewall(e) => write!(f, "{e}"),
            RestoreError::UnknownAction(a) => write!(f, "unknown action {a:?}"),
        }
    }
}

impl std::error::Error for RestoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RestoreError::Firewall(e) => Some(e),
            _ => None,
        }
    }
}

/// Puts an allow entry back with its earlier deadline (an expired one stays removed).
fn reallow(
    fw: &Firewall,
    ip: IpAddr,
    a: &undo::Allow,
    now: i64,
    caller: &Caller,
) -> Result<(), RestoreError> {
    let d = match a.expires {
        None => None,
        Some(e) if e > now => Some(Duration::from_micros((e - now) as u64)),
        Some(_) => return Ok(()),
    };
    fw.allow(Net::host(ip), &a.reason, d, &caller.actor())
        .map(|_| ())
        .map_err(RestoreError::Firewall)
}
