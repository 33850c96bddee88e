//! The WAF's tables: `waf_events` (rule matches the WAF log collector read),
//! `waf_escalation_off` (rules whose denies never escalate to the firewall) and
//! `waf_rules_disabled` (the applied set of disabled svc rules).
//!
//! Times are microseconds since the Unix epoch. Severity is the legacy level (0 WARNING,
//! 1 HIGH, 2 CRITICAL). Text fields are stored as the parser bounded them.

use rusqlite::{params, params_from_iter, Connection, ToSql};

use crate::model::finding::Severity;
use crate::model::waf_event::WafEvent;

/// One stored event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub id: i64,
    pub at: i64,
    pub ip: String,
    pub country: Option<String>,
    pub host: String,
    pub uri: String,
    pub method: String,
    pub rule_id: Option<u32>,
    pub message: String,
    pub severity: Severity,
    pub action: String,
    pub format: String,
    pub unique_id: Option<String>,
    pub status: Option<u16>,
}

/// An event to insert, with its country when GeoIP knows it.
pub struct NewEvent {
    pub event: WafEvent,
    pub country: Option<String>,
}

/// Inserts `events` (the caller's write job is one transaction).
pub fn insert(c: &Connection, events: &[NewEvent]) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(
        "INSERT INTO waf_events (at, ip, country, host, uri, method, rule_id, message, severity,
            action, format, unique_id, status)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?;
    for n in events {
        let e = &n.event;
        st.execute(params![
            e.at.as_microsecond(),
            e.ip.to_string(),
            n.country,
            e.host,
            e.uri,
            e.method,
            e.rule_id,
            e.message,
            e.severity.level(),
            e.action.as_str(),
            e.format.as_str(),
            e.unique_id,
            e.status,
        ])?;
    }
    Ok(())
}

/// Deletes events before `before` and, beyond that, the oldest ones over `max_rows`.
/// Returns the rows deleted.
pub fn prune(c: &Connection, before: i64, max_rows: u64) -> rusqlite::Result<usize> {
    let mut n = c.execute("DELETE FROM waf_events WHERE at < ?1", [before])?;
    let count: i64 = c.query_row("SELECT count(*) FROM waf_events", [], |r| r.get(0))?;
    let over = count - max_rows.min(i64::MAX as u64) as i64;
    if over > 0 {
        n += c.execute(
            "DELETE FROM waf_events WHERE id IN (SELECT id FROM waf_events ORDER BY id LIMIT ?1)",
            [over],
        )?;
    }
    Ok(n)
}

/// Filters of the event routes; empty lists and `None` match everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub from: Option<i64>,
    /// Exclusive.
    pub to: Option<i64>,
    pub severities: Vec<Severity>,
    pub ip: Option<String>,
    pub rule: Option<u32>,
    /// ISO country code, upper case.
    pub country: Option<String>,
    /// `Some("deny")`: the blocked-request log.
    pub action: Option<&'static str>,
}

impl Filter {
    fn clause(&self) -> (String, Vec<Box<dyn ToSql>>) {
        let mut w: Vec<String> = Vec::new();
        let mut p: Vec<Box<dyn ToSql>> = Vec::new();
        if let Some(f) = self.from {
            p.push(Box::new(f));
            w.push(format!("at >= ?{}", p.len()));
        }
        if let Some(t) = self.to {
            p.push(Box::new(t));
            w.push(format!("at < ?{}", p.len()));
        }
        if !self.severities.is_empty() {
            let list: Vec<String> = self
                .severities
                .iter()
                .map(|s| s.level().to_string())
                .collect();
            w.push(format!("severity IN ({})", list.join(",")));
        }
        if let Some(ip) = &self.ip {
            p.push(Box::new(ip.clone()));
            w.push(format!("ip = ?{}", p.len()));
        }
        if let Some(r) = self.rule {
            p.push(Box::new(r));
            w.push(format!("rule_id = ?{}", p.len()));
        }
        if let Some(c) = &self.country {
            p.push(Box::new(c.clone()));
            w.push(format!("country = ?{}", p.len()));
        }
        if let Some(a) = self.action {
            p.push(Box::new(a));
            w.push(format!("action = ?{}", p.len()));
        }
        let clause = if w.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", w.join(" AND "))
        };
        (clause, p)
    }
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    let level: u8 = r.get(9)?;
    Ok(Row {
        id: r.get(0)?,
        at: r.get(1)?,
        ip: r.get(2)?,
        country: r.get(3)?,
        host: r.get(4)?,
        uri: r.get(5)?,
        method: r.get(6)?,
        rule_id: r.get(7)?,
        message: r.get(8)?,
        severity: Severity::from_level(level).unwrap_or(Severity::Warning),
        action: r.get(10)?,
        format: r.get(11)?,
        unique_id: r.get(12)?,
        status: r.get(13)?,
    })
}

/// One page of matching events, newest first, and the total of matches.
pub fn page(
    c: &Connection,
    f: &Filter,
    offset: u64,
    limit: u64,
) -> rusqlite::Result<(Vec<Row>, u64)> {
    let (clause, p) = f.clause();
    let refs: Vec<&dyn ToSql> = p.iter().map(|b| b.as_ref()).collect();
    let total: i64 = c.query_row(
        &format!("SELECT count(*) FROM waf_events{clause}"),
        params_from_iter(refs.iter()),
        |r| r.get(0),
    )?;
    let sql = format!(
        "SELECT id, at, ip, country, host, uri, method, rule_id, message, severity, action,
            format, unique_id, status FROM waf_events{clause}
         ORDER BY at DESC, id DESC LIMIT {} OFFSET {}",
        limit.min(i64::MAX as u64),
        offset.min(i64::MAX as u64)
    );
    let mut st = c.prepare(&sql)?;
    let rows = st
        .query_map(params_from_iter(refs.iter()), row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok((rows, total.max(0) as u64))
}

/// Denies since `since`, the top rules and top addresses among them (at most `top` each).
pub struct Stats {
    pub denies: u64,
    pub events: u64,
    pub top_rules: Vec<(Option<u32>, u64)>,
    pub top_ips: Vec<(String, u64)>,
}

pub fn stats(c: &Connection, since: i64, top: u32) -> rusqlite::Result<Stats> {
    let (denies, events): (i64, i64) = c.query_row(
        "SELECT coalesce(sum(action = 'deny'), 0), count(*) FROM waf_events WHERE at >= ?1",
        [since],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let mut st = c.prepare(
        "SELECT rule_id, count(*) AS n FROM waf_events WHERE at >= ?1 AND action = 'deny'
         GROUP BY rule_id ORDER BY n DESC, rule_id LIMIT ?2",
    )?;
    let top_rules = st
        .query_map(params![since, top], |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)? as u64))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut st = c.prepare(
        "SELECT ip, count(*) AS n FROM waf_events WHERE at >= ?1 AND action = 'deny'
         GROUP BY ip ORDER BY n DESC, ip LIMIT ?2",
    )?;
    let top_ips = st
        .query_map(params![since, top], |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)? as u64))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Stats {
        denies: denies.max(0) as u64,
        events: events.max(0) as u64,
        top_rules,
        top_ips,
    })
}

/// Matches per rule since `since` (every action).
pub fn hits_by_rule(c: &Connection, since: i64) -> rusqlite::Result<Vec<(u32, u64)>> {
    let mut st = c.prepare(
        "SELECT rule_id, count(*) FROM waf_events WHERE at >= ?1 AND rule_id IS NOT NULL
         GROUP BY rule_id",
    )?;
    let rows = st
        .query_map([since], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?
        .collect();
    rows
}

/// Rules excluded from escalation, ascending.
pub fn escalation_off(c: &Connection) -> rusqlite::Result<Vec<u32>> {
    let mut st = c.prepare("SELECT rule_id FROM waf_escalation_off ORDER BY rule_id")?;
    let rows = st.query_map([], |r| r.get(0))?.collect();
    rows
}

/// Excludes `rule_id` from escalation (`off` true) or turns it back on. Returns whether
/// the row changed.
pub fn set_escalation(
    c: &Connection,
    rule_id: u32,
    off: bool,
    now: i64,
    by: &str,
) -> rusqlite::Result<bool> {
    let n = if off {
        c.execute(
            "INSERT OR IGNORE INTO waf_escalation_off (rule_id, created, created_by)
             VALUES (?1, ?2, ?3)",
            params![rule_id, now, by],
        )?
    } else {
        c.execute(
            "DELETE FROM waf_escalation_off WHERE rule_id = ?1",
            [rule_id],
        )?
    };
    Ok(n > 0)
}

/// The applied set of disabled rules, ascending.
pub fn disabled(c: &Connection) -> rusqlite::Result<Vec<u32>> {
    let mut st = c.prepare("SELECT rule_id FROM waf_rules_disabled ORDER BY rule_id")?;
    let rows = st.query_map([], |r| r.get(0))?.collect();
    rows
}

/// Replaces the set of disabled rules.
pub fn set_disabled(c: &Connection, ids: &[u32]) -> rusqlite::Result<()> {
    c.execute("DELETE FROM waf_rules_disabled", [])?;
    let mut st =
        c.prepare_cached("INSERT OR IGNORE INTO waf_rules_disabled (rule_id) VALUES (?1)")?;
    for id in ids {
        st.execute([id])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::waf_event::{Action, Format};
    use jiff::Timestamp;

    fn conn() -> Connection {
        let mut c = Connection::open_in_memory().unwrap();
        crate::store::schema::migrate(&mut c).unwrap();
        c
    }

    fn ev(at: i64, ip: &str, rule: u32, action: Action) -> NewEvent {
        NewEvent {
            event: WafEvent {
                at: Timestamp::from_microsecond(at).unwrap(),
                ip: ip.parse().unwrap(),
                host: "example.test".into(),
                uri: "/wp-json/wp/v2/users".into(),
                method: "GET".into(),
                rule_id: Some(rule),
                message: "m".into(),
                severity: Severity::High,
                action,
                format: Format::ApacheError,
                unique_id: None,
                status: Some(403),
            },
            country: (ip == "192.0.2.1").then(|| "NL".into()),
        }
    }

    #[test]
    fn insert_filter_page_stats_prune() {
        let c = conn();
        insert(
            &c,
            &[
                ev(10, "192.0.2.1", 900112, Action::Deny),
                ev(20, "192.0.2.1", 900112, Action::Deny),
                ev(30, "198.51.100.2", 900109, Action::Deny),
                ev(40, "198.51.100.2", 990001, Action::Pass),
            ],
        )
        .unwrap();
        let (rows, total) = page(&c, &Filter::default(), 0, 2).unwrap();
        assert_eq!((rows.len(), total), (2, 4));
        assert_eq!(rows[0].at, 40);
        let f = Filter {
            action: Some("deny"),
            ip: Some("198.51.100.2".into()),
            ..Filter::default()
        };
        assert_eq!(page(&c, &f, 0, 10).unwrap().1, 1);
        let f = Filter {
            country: Some("NL".into()),
            from: Some(15),
            ..Filter::default()
        };
        assert_eq!(page(&c, &f, 0, 10).unwrap().1, 1);
        let s = stats(&c, 0, 10).unwrap();
        assert_eq!((s.denies, s.events), (3, 4));
        assert_eq!(s.top_rules[0], (Some(900112), 2));
        assert_eq!(s.top_ips[0], ("192.0.2.1".to_string(), 2));
        assert_eq!(prune(&c, 15, 2).unwrap(), 2);
        assert_eq!(page(&c, &Filter::default(), 0, 10).unwrap().1, 2);
    }

    #[test]
    fn escalation_and_disabled_sets() {
        let c = conn();
        assert!(set_escalation(&c, 900112, true, 1, "admin").unwrap());
        assert!(!set_escalation(&c, 900112, true, 1, "admin").unwrap());
        assert_eq!(escalation_off(&c).unwrap(), [900112]);
        assert!(set_escalation(&c, 900112, false, 1, "admin").unwrap());
        assert!(escalation_off(&c).unwrap().is_empty());
        set_disabled(&c, &[900112, 900109]).unwrap();
        assert_eq!(disabled(&c).unwrap(), [900109, 900112]);
        set_disabled(&c, &[]).unwrap();
        assert!(disabled(&c).unwrap().is_empty());
    }
}
