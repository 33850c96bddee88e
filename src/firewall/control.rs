//! Firewall requests as JSON: the one place that parses a request body (HTTP routes and
//! control-socket commands alike), calls the engine and shapes the answer with its status.
//!
//! Commands: `status`, `list`, `check`, `block`, `unblock`, `allow`, `unallow`,
//! `deny_subnet`, `remove_subnet`, `flush`, `rollback`, `tentative_apply`, `confirm`,
//! `revert`. Unknown fields are refused (400) so a typo never changes a firewall silently.

use std::net::IpAddr;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::engine::{Actor, BlockItem, FirewallError, Outcome};
use super::net::Net;
use super::{duration, rollback, Handle};

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

    fn error(status: u16, msg: impl Into<String>) -> Reply {
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

fn from_error(e: FirewallError) -> Reply {
    match e {
        FirewallError::Invalid(m) => Reply::error(400, m),
        FirewallError::NotFound(m) => Reply::error(404, m),
        FirewallError::Refused(m) => Reply::error(409, m),
        FirewallError::Settings(errs) => {
            let list: Vec<Value> = errs
                .iter()
                .map(|e| json!({ "field": e.key, "message": e.message }))
                .collect();
            Reply {
                status: 400,
                body: json!({
                    "error": FirewallError::Settings(errs).to_string(),
                    "errors": list,
                }),
            }
        }
        e @ FirewallError::Store(_) => Reply::error(503, e.to_string()),
        e @ FirewallError::Kernel(_) => Reply::error(500, e.to_string()),
    }
}

type R<T> = Result<T, Reply>;

fn fields(args: &Value, allowed: &[&str]) -> R<Map<String, Value>> {
    let m = match args {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        _ => return Err(Reply::error(400, "the body must be a JSON object")),
    };
    // `command` is the control socket's own key.
    if let Some(k) = m
        .keys()
        .find(|k| *k != "command" && !allowed.contains(&k.as_str()))
    {
        return Err(Reply::error(400, format!("unknown field {k:?}")));
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

fn net_field(m: &Map<String, Value>, keys: &[&str]) -> R<Net> {
    for k in keys {
        if let Some(s) = text(m, k)? {
            return Net::parse(&s).map_err(|e| Reply::error(400, format!("invalid {k}: {e}")));
        }
    }
    Err(Reply::error(400, format!("missing field: {}", keys[0])))
}

fn ip_field(m: &Map<String, Value>) -> R<IpAddr> {
    let net = net_field(m, &["ip"])?;
    if !net.is_host() {
        return Err(Reply::error(
            400,
            format!("invalid ip: {net} is a range, not an address"),
        ));
    }
    Ok(net.addr())
}

fn lifetime(m: &Map<String, Value>) -> R<Option<Duration>> {
    let secs = match m.get("duration_seconds") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(s) if s >= 1 && Duration::from_secs(s) <= duration::MAX => Some(s),
            _ => {
                return Err(Reply::error(
                    400,
                    "duration_seconds must be an integer from 1 to 315360000 (ten years)",
                ))
            }
        },
    };
    let text_form = text(m, "for")?;
    match (secs, text_form) {
        (Some(_), Some(_)) => Err(Reply::error(
            400,
            "give either duration_seconds or for, not both",
        )),
        (Some(s), None) => Ok(Some(Duration::from_secs(s))),
        (None, Some(t)) => duration::parse(&t)
            .map(Some)
            .map_err(|e| Reply::error(400, e.to_string())),
        (None, None) => Ok(None),
    }
}

/// The actor of a block: `"force": true` drops the caller's own-address protection (the
/// operator means it); anything but a boolean is a 400.
fn forced(m: &Map<String, Value>, actor: &Actor) -> R<Actor> {
    match m.get("force") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(actor.clone()),
        Some(Value::Bool(true)) => Ok(match actor {
            Actor::Operator { name, .. } => Actor::Operator {
                name: name.clone(),
                protect: None,
            },
            a => a.clone(),
        }),
        Some(_) => Err(Reply::error(400, "force must be true or false")),
    }
}

fn reason(m: &Map<String, Value>, default: &str) -> R<String> {
    Ok(text(m, "reason")?.unwrap_or_else(|| default.to_string()))
}

fn entries(list: &[super::Listed]) -> Vec<Value> {
    list.iter().map(|l| l.to_json()).collect()
}

fn with_ok(mut v: Value) -> Value {
    if let Value::Object(m) = &mut v {
        m.insert("ok".into(), true.into());
    }
    v
}

/// Answers one request. `cmd` is one of the commands above.
pub fn run(handle: &Handle, cmd: &str, args: &Value, actor: &Actor) -> Reply {
    let fw = match handle.engine() {
        Ok(f) => f,
        Err(reason) => return Reply::error(503, Handle::absent_message(reason)),
    };
    let result = (|| -> R<Reply> {
        let ok = |v: Value| Ok(Reply::ok(v));
        match cmd {
            "status" => {
                fields(args, &[])?;
                ok(fw.status())
            }
            "list" => {
                let m = fields(args, &["limit", "offset"])?;
                let limit = m.get("limit").and_then(Value::as_u64).map(|l| l as usize);
                let offset = m.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
                let all = fw.list();
                let total = all.len();
                let items: Vec<Value> = all
                    .iter()
                    .skip(offset)
                    .take(limit.unwrap_or(usize::MAX))
                    .map(|l| l.to_json())
                    .collect();
                let truncated = offset.saturating_add(items.len()) < total;
                ok(json!({
                    "items": items, "total": total, "offset": offset,
                    "limit": limit.unwrap_or(total), "truncated": truncated,
                }))
            }
            "check" => {
                let m = fields(args, &["ip"])?;
                let ip = ip_field(&m)?;
                ok(fw.check(ip).to_json())
            }
            "block" => {
                let m = fields(
                    args,
                    &["ip", "ips", "reason", "duration_seconds", "for", "force"],
                )?;
                let actor = &forced(&m, actor)?;
                let why = reason(&m, "manual block")?;
                let d = lifetime(&m)?;
                let mut nets = Vec::new();
                if let Some(list) = m.get("ips") {
                    let Some(list) = list.as_array() else {
                        return Err(Reply::error(400, "ips must be a list of addresses"));
                    };
                    for (i, v) in list.iter().enumerate() {
                        let s = v.as_str().ok_or_else(|| {
                            Reply::error(400, format!("ips[{i}] must be a string"))
                        })?;
                        nets.push(
                            Net::parse(s)
                                .map_err(|e| Reply::error(400, format!("invalid ips[{i}]: {e}")))?,
                        );
                    }
                } else {
                    nets.push(Net::host(ip_field(&m)?));
                }
                if nets.is_empty() {
                    return Err(Reply::error(400, "no address to block"));
                }
                let bulk = m.contains_key("ips");
                let items = nets
                    .into_iter()
                    .map(|net| BlockItem {
                        net,
                        reason: why.clone(),
                        duration: d,
                    })
                    .collect();
                let out = fw.block(items, actor).map_err(from_error)?;
                if bulk {
                    let changed = out
                        .iter()
                        .filter(|o| matches!(o, Outcome::Blocked { .. } | Outcome::DryRun { .. }))
                        .count();
                    let body = json!({
                        "ok": changed > 0,
                        "changed": changed,
                        "items": out.iter().map(Outcome::to_json).collect::<Vec<_>>(),
                    });
                    if changed == 0 {
                        let mut b = body;
                        b["error"] = "nothing was blocked".into();
                        if let Value::Object(m) = &mut b {
                            m.remove("ok");
                        }
                        return Ok(Reply {
                            status: 409,
                            body: b,
                        });
                    }
                    return ok(body);
                }
                single_block(out.into_iter().next())
            }
            "unblock" => {
                let m = fields(args, &["ip"])?;
                let ip = ip_field(&m)?;
                let removed = fw.unblock(ip).map_err(from_error)?;
                ok(json!({
                    "ok": true, "success": true, "ip": ip.to_canonical().to_string(),
                    "removed": entries(&removed),
                }))
            }
            "allow" => {
                let m = fields(args, &["ip", "reason", "duration_seconds", "for"])?;
                let net = net_field(&m, &["ip"])?;
                let why = reason(&m, "manual allow")?;
                let d = lifetime(&m)?;
                let o = fw.allow(net, &why, d, actor).map_err(from_error)?;
                let mut b = json!({
                    "ok": true, "ip": o.net.to_string(), "permanent": o.expires_at.is_none(),
                    "unblocked": o.unblocked.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
                });
                if let Some(t) = o.expires_at {
                    b["expires_at"] = crate::timefmt::rfc3339(t).into();
                }
                if let Some(w) = o.warning {
                    b["warning"] = w.into();
                }
                ok(b)
            }
            "unallow" => {
                let m = fields(args, &["ip"])?;
                let net = net_field(&m, &["ip"])?;
                let removed = fw.unallow(net).map_err(from_error)?;
                ok(json!({ "ok": true, "ip": net.to_string(), "removed": removed.to_json() }))
            }
            "deny_subnet" => {
                let m = fields(args, &["subnet", "cidr", "ip", "reason", "force"])?;
                let actor = &forced(&m, actor)?;
                let net = net_field(&m, &["subnet", "cidr", "ip"])?;
                let why = reason(&m, "manual subnet block")?;
                let o = fw.deny_subnet(net, &why, actor).map_err(from_error)?;
                single_block(Some(o)).map(|mut r| {
                    if r.status == 200 {
                        r.body["subnet"] = net.to_string().into();
                    }
                    r
                })
            }
            "remove_subnet" => {
                let m = fields(args, &["subnet", "cidr", "ip"])?;
                let net = net_field(&m, &["subnet", "cidr", "ip"])?;
                let removed = fw.remove_subnet(net).map_err(from_error)?;
                ok(json!({
                    "ok": true, "subnet": net.to_string(), "removed": removed.to_json(),
                }))
            }
            "flush" => {
                fields(args, &[])?;
                let n = fw.flush_temporary().map_err(from_error)?;
                ok(json!({ "ok": true, "removed": n }))
            }
            "rollback" => {
                fields(args, &[])?;
                ok(with_ok(fw.rollback_view()))
            }
            "tentative_apply" => {
                let m = fields(args, &["changes", "timeout_min"])?;
                let Some(Value::Object(changes)) = m.get("changes") else {
                    return Err(Reply::error(
                        400,
                        "changes must be an object of [firewall] keys, e.g. {\"tcp_in\": [22, 443]}",
                    ));
                };
                let minutes = match m.get("timeout_min") {
                    None | Some(Value::Null) => rollback::DEFAULT_MINUTES,
                    Some(v) => v.as_u64().ok_or_else(|| {
                        Reply::error(400, "timeout_min must be an integer from 1 to 30")
                    })?,
                };
                let who = match actor {
                    Actor::Operator { name, .. } => name.clone(),
                    Actor::Automatic { source } => source.clone(),
                };
                let v = fw
                    .tentative_apply(changes.clone(), minutes, &who)
                    .map_err(from_error)?;
                let mut b = with_ok(v);
                b["settings"] = fw.settings().runtime_json();
                Ok(Reply {
                    status: 202,
                    body: b,
                })
            }
            "confirm" | "revert" => {
                fields(args, &[])?;
                let who = match actor {
                    Actor::Operator { name, .. } => name.clone(),
                    Actor::Automatic { source } => source.clone(),
                };
                let v = if cmd == "confirm" {
                    fw.confirm(&who)
                } else {
                    fw.revert(&who)
                }
                .map_err(from_error)?;
                let mut b = with_ok(v);
                b["settings"] = fw.settings().runtime_json();
                ok(b)
            }
            other => Err(Reply::error(
                400,
                format!("unknown firewall command {other:?}"),
            )),
        }
    })();
    result.unwrap_or_else(|r| r)
}

fn single_block(out: Option<Outcome>) -> R<Reply> {
    match out {
        Some(o @ (Outcome::Blocked { .. } | Outcome::DryRun { .. })) => {
            let mut b = o.to_json();
            b["ok"] = true.into();
            Ok(Reply::ok(b))
        }
        Some(Outcome::Unchanged { net, why }) => Err(Reply {
            status: 409,
            body: json!({ "error": format!("{net} not changed: {why}"), "ip": net.to_string() }),
        }),
        Some(Outcome::Refused { net, refusal }) => Err(Reply {
            status: 409,
            body: json!({
                "error": format!("refusing to block {net}: {refusal}"),
                "ip": net.to_string(),
                "refusal": refusal.kind(),
            }),
        }),
        None => Err(Reply::error(400, "no address to block")),
    }
}

/// Whether a command changes state (audited when it comes over the control socket).
pub fn writes(cmd: &str) -> bool {
    !matches!(cmd, "status" | "list" | "check" | "rollback")
}

/// Control-socket command `firewall.<cmd>` (from `svc firewall ...`, run by root on the
/// host): answers as operator `cli`, never protecting an address. The daemon's command
/// table audits the [`writes`] with [`audit_target`].
pub fn cli(handle: &Handle, cmd: &str, args: &Value) -> Reply {
    run(handle, cmd, args, &Actor::operator("cli"))
}

/// What a write names in the audit trail: its `ip` or `subnet` as the caller sent it.
pub fn audit_target(args: &Value) -> &str {
    args.get("ip")
        .or_else(|| args.get("subnet"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_engine_is_503_with_the_reason() {
        let h = Handle::Absent("firewall.enabled is false".into());
        let r = run(&h, "status", &json!({}), &Actor::operator("t"));
        assert_eq!(r.status, 503);
        assert_eq!(
            r.body["error"],
            "the firewall engine is not running: firewall.enabled is false"
        );
        let c = r.into_control();
        assert_eq!(c["status"], 503);
    }

    #[test]
    fn request_fields_are_strict() {
        let m = fields(&json!({"ip": "192.0.2.1", "bogus": 1}), &["ip"]).unwrap_err();
        assert_eq!(m.status, 400);
        assert!(m.body["error"].as_str().unwrap().contains("bogus"));
        let m = fields(&json!({"ip": "192.0.2.1"}), &["ip"]).unwrap();
        assert_eq!(ip_field(&m).unwrap().to_string(), "192.0.2.1");
        let m = fields(&json!({"ip": "192.0.2.0/24"}), &["ip"]).unwrap();
        assert_eq!(ip_field(&m).unwrap_err().status, 400);
        let m = fields(&json!({"ip": 5}), &["ip"]).unwrap();
        assert_eq!(ip_field(&m).unwrap_err().status, 400);
        let m = fields(&json!({"for": "15m"}), &["for"]).unwrap();
        assert_eq!(lifetime(&m).unwrap(), Some(Duration::from_secs(900)));
        let m = fields(&json!({"duration_seconds": 0}), &["duration_seconds"]).unwrap();
        assert_eq!(lifetime(&m).unwrap_err().status, 400);
        assert!(writes("block") && !writes("check"));
    }
}
