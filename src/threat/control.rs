//! Threat requests as JSON: the one place that parses a request (HTTP routes and
//! control-socket commands alike), calls the subsystem and shapes the answer with its
//! status.
//!
//! Commands: `stats`, `top_attackers {limit}`, `lookup {ip}`, `events {ip, limit}`,
//! `whitelist`, `db_stats`, `block`, `block_permanent`, `whitelist_ip`, `unwhitelist`,
//! `clear` (each `{ip}` or `{ips: [...]}` up to 1,000, with `reason` on blocks and
//! whitelists), `temp_whitelist {ip, hours}`, `undo_pending`, `undo_run {undo_token}`.
//! Unknown fields are refused (400), so a typo never changes anything silently.
//!
//! Answers of changes: single form `{ok: true, ip, undo_token, ...}`, or an error status
//! (409 refused by the rules or the state, 400 invalid, 503/500 firewall or store). Bulk
//! form `{ok: true, changed, invalid, skipped, warnings, failed: [{ip, error}],
//! undo_token}`; nothing changed is 409 with `error` (400 when every address was invalid).

use std::net::IpAddr;

use serde_json::{json, Map, Value};

use super::actions::{Acted, Action, Caller, Res, TEMP_HOURS};
use super::Threat;
use crate::findings::evidence::AttackKind;
use crate::findings::Severity;
use crate::firewall::Handle;
use crate::timefmt::rfc3339;

/// Addresses in one bulk request at most.
pub const MAX_BULK: usize = 1_000;
/// `limit` of top attackers: default and maximum.
pub const TOP_LIMIT: (u64, u64) = (20, 1_000);
/// `limit` of events: default and maximum.
pub const EVENTS_LIMIT: (u64, u64) = (100, 1_000);
/// Events in a lookup answer.
pub const LOOKUP_EVENTS: usize = 20;

/// An answer and its HTTP status.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

impl Reply {
    fn ok(body: Value) -> Reply {
        Reply { status: 200, body }
    }

    pub fn error(status: u16, msg: impl Into<String>) -> Reply {
        Reply {
            status,
            body: json!({ "error": msg.into() }),
        }
    }

    /// The answer as a control-socket line: errors carry `error` and `status`.
    pub fn into_control(self) -> Value {
        let mut b = self.body;
        if self.status >= 400 {
            if let Value::Object(m) = &mut b {
                m.insert("status".into(), self.status.into());
            }
        }
        b
    }
}

type R<T> = Result<T, Reply>;

fn fields(args: &Value, allowed: &[&str]) -> R<Map<String, Value>> {
    let m = match args {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        _ => return Err(Reply::error(400, "the body must be a JSON object")),
    };
    if let Some(k) = m
        .keys()
        .find(|k| *k != "command" && !allowed.contains(&k.as_str()))
    {
        return Err(Reply::error(
            400,
            format!("unknown field {:?}", crate::text::for_log(k, 64)),
        ));
    }
    Ok(m)
}

fn text(m: &Map<String, Value>, key: &str) -> R<Option<String>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(_) => Err(Reply::error(400, format!("{key} must be a string"))),
    }
}

/// An address (surrounding whitespace ignored), IPv4-mapped IPv6 read as IPv4: the rule
/// of every `ip` input of the API.
fn parse_ip(s: &str) -> Option<IpAddr> {
    s.trim().parse::<IpAddr>().ok().map(|a| a.to_canonical())
}

/// A value quoted for an error message (cut and escaped).
fn echo(raw: &str) -> String {
    format!("\"{}\"", crate::text::for_log(raw, 64))
}

/// Plain ASCII digits without sign or leading zeros.
fn parse_uint(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    s.parse().ok()
}

fn one_ip(m: &Map<String, Value>) -> R<IpAddr> {
    let s = text(m, "ip")?.ok_or_else(|| Reply::error(400, "missing field: ip"))?;
    parse_ip(&s).ok_or_else(|| {
        Reply::error(
            400,
            format!("invalid ip: {} is not an IP address", echo(&s)),
        )
    })
}

/// `ips` of a bulk request: (distinct valid addresses, invalid entries as given).
fn many_ips(v: &Value) -> R<(Vec<IpAddr>, Vec<String>)> {
    let Some(list) = v.as_array() else {
        return Err(Reply::error(400, "ips must be a list of addresses"));
    };
    if list.is_empty() {
        return Err(Reply::error(400, "ips is empty: give at least one address"));
    }
    if list.len() > MAX_BULK {
        return Err(Reply::error(
            400,
            format!(
                "ips has {} addresses; at most {MAX_BULK} per request",
                list.len()
            ),
        ));
    }
    let mut ok: Vec<IpAddr> = Vec::new();
    let mut bad = Vec::new();
    for v in list {
        match v.as_str().and_then(parse_ip) {
            Some(ip) => {
                if !ok.contains(&ip) {
                    ok.push(ip);
                }
            }
            None => bad.push(match v {
                Value::String(s) => crate::text::for_log(s, 64),
                other => crate::text::for_log(&other.to_string(), 64),
            }),
        }
    }
    Ok((ok, bad))
}

fn limit(m: &Map<String, Value>, (def, max): (u64, u64)) -> R<u64> {
    match m.get("limit") {
        None | Some(Value::Null) => Ok(def),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(l) if (1..=max).contains(&l) => Ok(l),
            _ => Err(Reply::error(400, format!("limit must be from 1 to {max}"))),
        },
        Some(Value::String(s)) => match parse_uint(s) {
            Some(l) if (1..=max).contains(&l) => Ok(l),
            _ => Err(Reply::error(
                400,
                format!("limit: must be an integer from 1 to {max}, got {}", echo(s)),
            )),
        },
        Some(_) => Err(Reply::error(400, format!("limit must be from 1 to {max}"))),
    }
}

fn ts(us: i64) -> Value {
    jiff::Timestamp::from_microsecond(us)
        .map(|t| Value::String(rfc3339(t)))
        .unwrap_or(Value::Null)
}

fn types_json(counts: &[u64; 7]) -> Value {
    let mut m = Map::new();
    for k in AttackKind::ALL {
        let n = counts[k.index()];
        if n > 0 {
            m.insert(k.name().into(), n.into());
        }
    }
    Value::Object(m)
}

fn event_json(e: &crate::store::threat::EventRow) -> Value {
    let kind = AttackKind::parse(&e.kind);
    let mut v = json!({
        "at": ts(e.at),
        "ip": e.ip,
        "type": e.kind,
        "type_label": kind.map(|k| k.label()).unwrap_or("Unknown"),
        "sev": Severity::from_level(e.severity.clamp(0, 2) as u8).unwrap_or(Severity::Warning).label(),
        "check": e.check,
        "message": e.message,
    });
    if let Some(a) = &e.account {
        v["account"] = a.clone().into();
    }
    v
}

fn geo_of(t: &Threat, ip: IpAddr) -> Value {
    t.geoip
        .as_ref()
        .and_then(|g| g.lookup(ip))
        .map(|g| serde_json::to_value(g).unwrap_or(Value::Null))
        .unwrap_or(Value::Null)
}

/// Answers one request. `cmd` is one of the commands above.
pub fn run(t: &Threat, cmd: &str, args: &Value, caller: &Caller) -> Reply {
    let result = (|| -> R<Reply> {
        match cmd {
            "stats" => {
                fields(args, &[])?;
                Ok(Reply::ok(stats(t)))
            }
            "db_stats" => {
                fields(args, &[])?;
                Ok(Reply::ok(db_stats(t)))
            }
            "top_attackers" => {
                let m = fields(args, &["limit"])?;
                let n = limit(&m, TOP_LIMIT)?;
                let now = t.clock.now().as_microsecond();
                let (top, truncated) = t.db.top(n as usize, now);
                let items: Vec<Value> = top
                    .iter()
                    .map(|v| {
                        json!({
                            "ip": v.ip.to_string(),
                            "score": super::score::shown(v.score),
                            "events": v.events(),
                            "types": types_json(&v.counts),
                            "accounts": v.accounts,
                            "first_seen": ts(v.first_seen),
                            "last_seen": ts(v.last_seen),
                            "geo": geo_of(t, v.ip),
                        })
                    })
                    .collect();
                Ok(Reply::ok(
                    json!({ "items": items, "limit": n, "truncated": truncated }),
                ))
            }
            "events" => {
                let m = fields(args, &["ip", "limit"])?;
                let ip = one_ip(&m)?;
                let n = limit(&m, EVENTS_LIMIT)?;
                let key = ip.to_string();
                let (rows, truncated) = t
                    .store
                    .read(|c| crate::store::threat::events_of(c, &key, n as usize))
                    .map_err(|e| Reply::error(503, format!("store unavailable: {e}")))?;
                let items: Vec<Value> = rows.iter().map(event_json).collect();
                Ok(Reply::ok(json!({
                    "ip": key, "items": items, "limit": n, "truncated": truncated,
                })))
            }
            "lookup" => {
                let m = fields(args, &["ip"])?;
                let ip = one_ip(&m)?;
                lookup(t, ip)
            }
            "whitelist" => {
                fields(args, &[])?;
                whitelist(t)
            }
            "block" | "block_permanent" | "whitelist_ip" | "unwhitelist" | "clear" => {
                let with_reason = matches!(cmd, "block" | "block_permanent" | "whitelist_ip");
                let blocks = matches!(cmd, "block" | "block_permanent");
                let allowed: &[&str] = if blocks {
                    &["ip", "ips", "reason", "force"]
                } else if with_reason {
                    &["ip", "ips", "reason"]
                } else {
                    &["ip", "ips"]
                };
                let m = fields(args, allowed)?;
                // `"force": true` drops the caller's own-address protection (as the
                // firewall routes do); anything but a boolean is a 400.
                let forced_caller;
                let caller = match m.get("force") {
                    None | Some(Value::Null) | Some(Value::Bool(false)) => caller,
                    Some(Value::Bool(true)) => {
                        forced_caller = Caller {
                            name: caller.name.clone(),
                            protect: None,
                        };
                        &forced_caller
                    }
                    Some(_) => return Err(Reply::error(400, "force must be true or false")),
                };
                let reason = text(&m, "reason")?;
                if let Some(r) = &reason {
                    crate::firewall::types::check_reason(r)
                        .map_err(|e| Reply::error(400, e.to_string()))?;
                }
                let action = match cmd {
                    "block" => Action::Block,
                    "block_permanent" => Action::BlockPermanent,
                    "whitelist_ip" => Action::Whitelist,
                    "unwhitelist" => Action::Unwhitelist,
                    _ => Action::Clear,
                };
                match (m.get("ip"), m.get("ips")) {
                    (Some(_), Some(_)) => Err(Reply::error(400, "give either ip or ips, not both")),
                    (_, Some(list)) => {
                        let (ok, bad) = many_ips(list)?;
                        bulk(t, action, &ok, bad, reason.as_deref(), caller)
                    }
                    _ => {
                        let ip = one_ip(&m)?;
                        single(t, action, ip, reason.as_deref(), caller)
                    }
                }
            }
            "temp_whitelist" => {
                let m = fields(args, &["ip", "hours", "reason"])?;
                let ip = one_ip(&m)?;
                let reason = text(&m, "reason")?;
                if let Some(r) = &reason {
                    crate::firewall::types::check_reason(r)
                        .map_err(|e| Reply::error(400, e.to_string()))?;
                }
                let (lo, hi, def) = TEMP_HOURS;
                let hours = match m.get("hours") {
                    None | Some(Value::Null) => def,
                    Some(v) => match v.as_u64() {
                        Some(h) if (lo..=hi).contains(&h) => h,
                        _ => {
                            return Err(Reply::error(
                                400,
                                format!("hours must be an integer from {lo} to {hi}"),
                            ))
                        }
                    },
                };
                single(
                    t,
                    Action::TempWhitelist(hours),
                    ip,
                    reason.as_deref(),
                    caller,
                )
            }
            "undo_pending" => {
                fields(args, &[])?;
                let list = t.undo.pending(&caller.name);
                let items: Vec<Value> = list
                    .iter()
                    .map(|(e, valid)| {
                        let ips: Vec<String> =
                            e.items.iter().take(100).map(|i| i.ip.to_string()).collect();
                        let mut v = json!({
                            "undo_token": e.token,
                            "action": e.action,
                            "ips": ips,
                            "count": e.items.len(),
                            "created_at": ts(e.created),
                            "expires_at": ts(e.expires),
                            "valid": valid,
                        });
                        if let Some(ip) = e.invalidated_by {
                            v["invalidated_by"] = ip.to_string().into();
                        }
                        v
                    })
                    .collect();
                let n = items.len();
                Ok(Reply::ok(json!({ "items": items, "total": n })))
            }
            "undo_run" => {
                let m = fields(args, &["undo_token"])?;
                let token = text(&m, "undo_token")?
                    .ok_or_else(|| Reply::error(400, "missing field: undo_token"))?;
                if token.len() > 128 {
                    return Err(Reply::error(400, "undo_token is too long"));
                }
                match t.run_undo(&token, caller) {
                    Ok((action, restored, failed)) => Ok(Reply::ok(json!({
                        "ok": true,
                        "action": action,
                        "restored": restored.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
                        "failed": failed.iter().map(|(ip, e)| json!({"ip": ip.to_string(), "error": e})).collect::<Vec<_>>(),
                    }))),
                    Err((status, msg)) => Err(Reply::error(status, msg)),
                }
            }
            other => Err(Reply::error(
                400,
                format!(
                    "unknown threat command {:?}",
                    crate::text::for_log(other, 64)
                ),
            )),
        }
    })();
    result.unwrap_or_else(|r| r)
}

fn acted(
    t: &Threat,
    action: Action,
    ips: &[IpAddr],
    reason: Option<&str>,
    caller: &Caller,
) -> R<Acted> {
    t.act(action, ips, reason, caller)
        .map_err(|e| Reply::error(503, e.to_string()))
}

fn single(
    t: &Threat,
    action: Action,
    ip: IpAddr,
    reason: Option<&str>,
    caller: &Caller,
) -> R<Reply> {
    let out = acted(t, action, &[ip], reason, caller)?;
    let Some((_, res)) = out.results.into_iter().next() else {
        return Err(Reply::error(500, "no result"));
    };
    match res {
        Res::Changed(details) => {
            let mut b = json!({ "ok": true, "ip": ip.to_string() });
            if let Value::Object(d) = details {
                for (k, v) in d {
                    b[k] = v;
                }
            }
            if let Some(tok) = out.undo_token {
                b["undo_token"] = tok.into();
            }
            if let Some(e) = out.undo_error {
                b["undo_error"] = e.into();
            }
            Ok(Reply::ok(b))
        }
        Res::Skipped(w) => Err(Reply {
            status: 409,
            body: json!({ "error": w, "ip": ip.to_string() }),
        }),
        // The firewall's refusal shape (`refusal` names the rule), as `deny-subnet` answers.
        Res::Refused(w, kind) => Err(Reply {
            status: 409,
            body: json!({ "error": w, "ip": ip.to_string(), "refusal": kind }),
        }),
        Res::Failed(e, status) => Err(Reply {
            status,
            body: json!({ "error": e, "ip": ip.to_string() }),
        }),
    }
}

fn bulk(
    t: &Threat,
    action: Action,
    ips: &[IpAddr],
    invalid: Vec<String>,
    reason: Option<&str>,
    caller: &Caller,
) -> R<Reply> {
    if ips.is_empty() {
        return Err(Reply {
            status: 400,
            body: json!({
                "error": "no valid address in ips",
                "changed": [], "invalid": invalid, "skipped": [], "warnings": [], "failed": [],
            }),
        });
    }
    let out = acted(t, action, ips, reason, caller)?;
    let mut changed = Vec::new();
    let mut skipped = Vec::new();
    let mut warnings = Vec::new();
    let mut failed = Vec::new();
    let mut items = Vec::new();
    for (ip, r) in out.results {
        match r {
            Res::Changed(mut d) => {
                changed.push(ip.to_string());
                d["ip"] = ip.to_string().into();
                items.push(d);
            }
            Res::Skipped(w) | Res::Refused(w, _) => {
                skipped.push(ip.to_string());
                warnings.push(w);
            }
            Res::Failed(e, _) => failed.push(json!({ "ip": ip.to_string(), "error": e })),
        }
    }
    let mut body = json!({
        "changed": changed, "invalid": invalid, "skipped": skipped,
        "warnings": warnings, "failed": failed, "items": items,
    });
    if changed.is_empty() {
        body["error"] = "nothing changed".into();
        return Err(Reply { status: 409, body });
    }
    body["ok"] = true.into();
    if let Some(tok) = out.undo_token {
        body["undo_token"] = tok.into();
    }
    if let Some(e) = out.undo_error {
        body["undo_error"] = e.into();
    }
    Ok(Reply::ok(body))
}

fn lookup(t: &Threat, ip: IpAddr) -> R<Reply> {
    let now = t.clock.now().as_microsecond();
    let v = t.agg.verdict(ip, None);
    let blocked = v.blocked;
    let whitelisted = match &t.firewall {
        Handle::Active(f) => f.check(ip).allow.is_some(),
        Handle::Absent(_) => false,
    };
    let key = ip.to_string();
    let (events, truncated) = t
        .store
        .read(|c| crate::store::threat::events_of(c, &key, LOOKUP_EVENTS))
        .map_err(|e| Reply::error(503, format!("store unavailable: {e}")))?;
    let geo = v
        .line("geoip")
        .and_then(|l| l.answer.data.clone())
        .unwrap_or_else(|| geo_of(t, ip));
    let rdap = v
        .line("rdap")
        .and_then(|l| l.answer.data.clone())
        .unwrap_or(Value::Null);
    let record = t.db.view(ip, now).map(|r| {
        json!({
            "first_seen": ts(r.first_seen),
            "last_seen": ts(r.last_seen),
            "events": r.events(),
            "types": types_json(&r.counts),
            "accounts": r.accounts,
            "accounts_more": r.accounts_more,
            "score": super::score::shown(r.score),
            "evidence": r.evidence.name(),
            "scoring_version": r.scoring,
        })
    });
    Ok(Reply::ok(json!({
        "ip": key,
        "verdict": v.verdict,
        "score": v.score,
        "sources": v.lines.iter().map(|l| l.to_json()).collect::<Vec<_>>(),
        "geo": geo,
        "rdap": rdap,
        "blocked": blocked,
        "whitelisted": whitelisted,
        "flagged": t.flagged(ip, blocked),
        "events": events.iter().map(event_json).collect::<Vec<_>>(),
        "events_truncated": truncated,
        "record": record,
    })))
}

fn whitelist(t: &Threat) -> R<Reply> {
    let entry = |ip: String, reason: &str, created: i64, expires: Option<i64>, by: &str| {
        let mut v = json!({
            "ip": ip, "reason": reason, "created_at": ts(created),
            "permanent": expires.is_none(),
        });
        if let Some(e) = expires {
            v["expires_at"] = ts(e);
        }
        if !by.is_empty() {
            v["created_by"] = by.into();
        }
        v
    };
    let items: Vec<Value> = match &t.firewall {
        Handle::Active(f) => f
            .allows()
            .iter()
            .map(|l| {
                entry(
                    l.net.to_string(),
                    &l.entry.reason,
                    l.entry.created,
                    (!l.entry.permanent()).then_some(l.entry.expires),
                    &l.entry.by,
                )
            })
            .collect(),
        Handle::Absent(_) => {
            let now = t.clock.now().as_microsecond();
            let mut rows = t
                .store
                .read(|c| crate::store::firewall::load(c, crate::store::firewall::Kind::Allow))
                .map_err(|e| Reply::error(503, format!("store unavailable: {e}")))?;
            rows.retain(|r| r.expires.is_none_or(|e| e > now));
            rows.sort_by_key(|r| std::cmp::Reverse(r.created));
            rows.iter()
                .map(|r| entry(r.ip.clone(), &r.reason, r.created, r.expires, &r.created_by))
                .collect()
        }
    };
    let n = items.len();
    Ok(Reply::ok(json!({ "items": items, "total": n })))
}

fn stats(t: &Threat) -> Value {
    let now = t.clock.now().as_microsecond();
    let tot = t.db.totals(now);
    let by_type: Vec<Value> = AttackKind::ALL
        .iter()
        .map(|k| {
            json!({
                "type": k.name(), "label": k.label(),
                "events": tot.events[k.index()], "addresses": tot.addresses_by_kind[k.index()],
            })
        })
        .collect();
    let hourly: Vec<Value> = tot
        .hourly
        .iter()
        .map(|(h, counts)| {
            json!({
                "start": ts(h * 3_600_000_000),
                "count": counts.iter().sum::<u64>(),
                "by_type": types_json(counts),
            })
        })
        .collect();
    let events_24h: u64 = tot.hourly.iter().map(|(_, c)| c.iter().sum::<u64>()).sum();
    let mut v = json!({
        "total_addresses": tot.addresses,
        "total_events": tot.events.iter().sum::<u64>(),
        "events_24h": events_24h,
        "suspicious_addresses": tot.suspicious,
        "malicious_addresses": tot.malicious,
        "by_type": by_type,
        "hourly": hourly,
    });
    v["auto_block"] = match &t.autoblock {
        Some(a) => {
            let s = a.settings();
            json!({
                "active": s.enabled,
                "dry_run": a.dry_run(),
                "block_score": s.block_score,
                "max_blocks_per_hour": s.max_per_hour,
                "blocks_last_hour": a.blocks_last_hour(),
                "blocked_total": a.counters.blocked.load(std::sync::atomic::Ordering::Relaxed),
                "dry_run_total": a.counters.dry_run.load(std::sync::atomic::Ordering::Relaxed),
                "pending": a.pending().len(),
                "exempt_total": a.counters.exempt.load(std::sync::atomic::Ordering::Relaxed),
                "cycles": a.counters.cycles.load(std::sync::atomic::Ordering::Relaxed),
            })
        }
        None => json!({ "active": false, "reason": "the firewall engine is not running" }),
    };
    v
}

fn db_stats(t: &Threat) -> Value {
    use std::sync::atomic::Ordering::Relaxed;
    let records = t.db.len();
    let bytes = t.db.heap_bytes();
    let (pending_events, pending_records) = t.db.backlog();
    let (cfg, _) = &*t.config();
    let feeds: Vec<Value> = t
        .feedset
        .snapshot()
        .iter()
        .map(|(name, l)| {
            let mut v = json!({ "name": name, "entries": l.entries, "ranges": l.ranges.len() });
            if let Some(r) = l.refreshed {
                v["refreshed_at"] = ts(r);
            }
            v
        })
        .collect();
    json!({
        "records": records,
        "max_records": t.db.max_records(),
        "memory_bytes": bytes,
        "bytes_per_record": bytes.checked_div(records).unwrap_or(0),
        "events_recorded_total": t.db.counters.events_total.load(Relaxed),
        "events_stored": t.persist.stored_events.load(Relaxed),
        "events_pruned_total": t.persist.pruned_events.load(Relaxed),
        "events_dropped_total": t.db.counters.events_dropped.load(Relaxed),
        "evicted_total": t.db.counters.evicted_total.load(Relaxed),
        "pending_events": pending_events,
        "pending_records": pending_records,
        "write_failures_total": t.persist.write_failures.load(Relaxed),
        "half_life_hours": cfg.half_life_hours,
        "event_retention_days": cfg.event_retention_days,
        "scoring_version": super::score::SCORING_VERSION,
        "undo_entries": t.undo.len(),
        "feeds": feeds,
        "remote": t.remote_status(),
    })
}

/// Whether a command changes state (audited when it comes over the control socket).
pub fn writes(cmd: &str) -> bool {
    matches!(
        cmd,
        "block"
            | "block_permanent"
            | "whitelist_ip"
            | "temp_whitelist"
            | "unwhitelist"
            | "clear"
            | "undo_run"
    )
}

/// Control-socket command `threat.<cmd>` (from `svc threat ...`, run by root on the host):
/// caller `cli` (undo entries belong to it), no address protected. The daemon's command
/// table audits the [`writes`] with [`audit_target`].
pub fn cli(t: &Threat, cmd: &str, args: &Value) -> Reply {
    let who = Caller {
        name: "cli".into(),
        protect: None,
    };
    run(t, cmd, args, &who)
}

/// What a write names in the audit trail: its `ip`, else how many addresses `ips` lists.
pub fn audit_target(args: &Value) -> String {
    args.get("ip")
        .and_then(Value::as_str)
        .map(String::from)
        .or_else(|| {
            args.get("ips")
                .and_then(Value::as_array)
                .map(|l| format!("{} addresses", l.len()))
        })
        .unwrap_or_default()
}
