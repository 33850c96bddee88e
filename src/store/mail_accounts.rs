//! SQL of the mail-account tables (`mail_messages`, `mail_forwards`, `mail_egress`,
//! `mail_queue_snapshots`, `mail_password_audit`). Times are microseconds since the epoch.
//! Every list query is bounded by its `limit`.

use std::collections::HashMap;

use rusqlite::{params, Connection};

/// A message accepted by the MTA (or first seen in a delivery line).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewMessage {
    pub key: String,
    pub at: i64,
    pub mta: &'static str,
    pub queue_id: String,
    pub sender: String,
    pub sender_domain: String,
    pub account: String,
    pub auth_user: String,
    pub client_ip: Option<String>,
    pub origin: &'static str,
    pub recipients: i64,
    pub relay_mismatch: bool,
}

/// One change the ledger writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MailWrite {
    Message(NewMessage),
    /// Raises the recipient count of a message to at least `recipients`.
    Recipients {
        key: String,
        recipients: i64,
    },
    /// A delivery outcome of a message.
    Outcome {
        key: String,
        sent: i64,
        deferred: i64,
        bounced: i64,
        forwarded: i64,
        remote: i64,
    },
    Forward {
        at: i64,
        original: String,
        target: String,
        target_domain: String,
        account: String,
    },
    Egress {
        at: i64,
        account: String,
        uid: u32,
        remote_ip: String,
        remote_port: u16,
        ptr: Option<String>,
        confirmed: bool,
    },
    QueueSnapshot {
        at: i64,
        mta: &'static str,
        size: i64,
        oldest: Option<i64>,
        bounces: i64,
        domains: String,
    },
}

/// Applies `writes` in order.
pub fn apply(c: &Connection, writes: &[MailWrite]) -> rusqlite::Result<()> {
    for w in writes {
        match w {
            MailWrite::Message(m) => {
                c.execute(
                    "INSERT INTO mail_messages(key, at, mta, queue_id, sender, sender_domain, account, auth_user, client_ip, origin, recipients, relay_mismatch)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                     ON CONFLICT(key) DO UPDATE SET sender = excluded.sender, sender_domain = excluded.sender_domain,
                        account = excluded.account, auth_user = excluded.auth_user, client_ip = excluded.client_ip,
                        origin = excluded.origin, recipients = max(recipients, excluded.recipients),
                        relay_mismatch = excluded.relay_mismatch",
                    params![
                        m.key,
                        m.at,
                        m.mta,
                        m.queue_id,
                        m.sender,
                        m.sender_domain,
                        m.account,
                        m.auth_user,
                        m.client_ip,
                        m.origin,
                        m.recipients,
                        m.relay_mismatch
                    ],
                )?;
            }
            MailWrite::Recipients { key, recipients } => {
                c.execute(
                    "UPDATE mail_messages SET recipients = max(recipients, ?2) WHERE key = ?1",
                    params![key, recipients],
                )?;
            }
            MailWrite::Outcome {
                key,
                sent,
                deferred,
                bounced,
                forwarded,
                remote,
            } => {
                c.execute(
                    "UPDATE mail_messages SET sent = sent + ?2, deferred = deferred + ?3, bounced = bounced + ?4,
                        forwarded = forwarded + ?5, remote = remote + ?6 WHERE key = ?1",
                    params![key, sent, deferred, bounced, forwarded, remote],
                )?;
            }
            MailWrite::Forward {
                at,
                original,
                target,
                target_domain,
                account,
            } => {
                c.execute(
                    "INSERT INTO mail_forwards(at, original, target, target_domain, account) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![at, original, target, target_domain, account],
                )?;
            }
            MailWrite::Egress {
                at,
                account,
                uid,
                remote_ip,
                remote_port,
                ptr,
                confirmed,
            } => {
                c.execute(
                    "INSERT INTO mail_egress(at, account, uid, remote_ip, remote_port, ptr, confirmed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![at, account, uid, remote_ip, remote_port, ptr, confirmed],
                )?;
            }
            MailWrite::QueueSnapshot {
                at,
                mta,
                size,
                oldest,
                bounces,
                domains,
            } => {
                c.execute(
                    "INSERT INTO mail_queue_snapshots(at, mta, size, oldest, bounces, domains) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![at, mta, size, oldest, bounces, domains],
                )?;
            }
        }
    }
    Ok(())
}

/// Removes rows older than `before` (retention).
pub fn purge(c: &Connection, before: i64) -> rusqlite::Result<usize> {
    let mut n = 0;
    for t in [
        "mail_messages",
        "mail_forwards",
        "mail_egress",
        "mail_queue_snapshots",
    ] {
        n += c.execute(&format!("DELETE FROM {t} WHERE at < ?1"), [before])?;
    }
    Ok(n)
}

/// Grouping of `/api/v1/email/groups`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupBy {
    Sender,
    Account,
    Domain,
}

impl GroupBy {
    fn column(self) -> &'static str {
        match self {
            GroupBy::Sender => "sender",
            GroupBy::Account => "account",
            GroupBy::Domain => "sender_domain",
        }
    }
}

/// One group of messages.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Group {
    pub key: String,
    pub messages: i64,
    pub recipients: i64,
    pub sent: i64,
    pub deferred: i64,
    pub bounced: i64,
    pub forwarded: i64,
    /// Messages with at least one delivery to a remote host (outbound through the local MTA).
    pub outbound_local_mta: i64,
    pub relay_mismatches: i64,
    #[serde(skip)]
    pub first: i64,
    #[serde(skip)]
    pub last: i64,
}

fn range_sql(from: Option<i64>, to: Option<i64>) -> (String, Vec<i64>) {
    let mut w = String::from("1=1");
    let mut p = Vec::new();
    if let Some(f) = from {
        p.push(f);
        w.push_str(&format!(" AND at >= ?{}", p.len()));
    }
    if let Some(t) = to {
        p.push(t);
        w.push_str(&format!(" AND at < ?{}", p.len()));
    }
    (w, p)
}

/// Messages grouped by `by` within `[from, to)`, most messages first; and the number of
/// groups.
pub fn groups(
    c: &Connection,
    by: GroupBy,
    from: Option<i64>,
    to: Option<i64>,
    limit: u64,
    offset: u64,
) -> rusqlite::Result<(Vec<Group>, u64)> {
    let (w, p) = range_sql(from, to);
    let col = by.column();
    let total: i64 = c.query_row(
        &format!("SELECT count(DISTINCT {col}) FROM mail_messages WHERE {w}"),
        rusqlite::params_from_iter(p.iter()),
        |r| r.get(0),
    )?;
    let sql = format!(
        "SELECT {col}, count(*), sum(recipients), sum(sent), sum(deferred), sum(bounced), sum(forwarded),
                sum(remote > 0), sum(relay_mismatch), min(at), max(at)
         FROM mail_messages WHERE {w} GROUP BY {col} ORDER BY count(*) DESC, {col} LIMIT {} OFFSET {}",
        limit.min(i64::MAX as u64),
        offset.min(i64::MAX as u64)
    );
    let mut st = c.prepare(&sql)?;
    let rows = st.query_map(rusqlite::params_from_iter(p.iter()), |r| {
        Ok(Group {
            key: r.get(0)?,
            messages: r.get(1)?,
            recipients: r.get(2)?,
            sent: r.get(3)?,
            deferred: r.get(4)?,
            bounced: r.get(5)?,
            forwarded: r.get(6)?,
            outbound_local_mta: r.get(7)?,
            relay_mismatches: r.get(8)?,
            first: r.get(9)?,
            last: r.get(10)?,
        })
    })?;
    Ok((rows.collect::<Result<_, _>>()?, total.max(0) as u64))
}

/// Direct SMTP egress connections per account within the range.
pub fn egress_by_account(
    c: &Connection,
    from: Option<i64>,
    to: Option<i64>,
) -> rusqlite::Result<HashMap<String, (i64, i64)>> {
    let (w, p) = range_sql(from, to);
    let mut st = c.prepare(&format!(
        "SELECT account, count(*), sum(confirmed) FROM mail_egress WHERE {w} GROUP BY account"
    ))?;
    let rows = st.query_map(rusqlite::params_from_iter(p.iter()), |r| {
        Ok((r.get::<_, String>(0)?, (r.get(1)?, r.get(2)?)))
    })?;
    rows.collect()
}

/// Recent direct egress connections (newest first).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Egress {
    #[serde(skip)]
    pub at: i64,
    pub account: String,
    pub uid: u32,
    pub remote_ip: String,
    pub remote_port: u16,
    pub ptr: Option<String>,
    pub confirmed: bool,
}

pub fn egress_since(c: &Connection, since: i64, limit: u64) -> rusqlite::Result<Vec<Egress>> {
    let mut st = c.prepare(
        "SELECT at, account, uid, remote_ip, remote_port, ptr, confirmed FROM mail_egress WHERE at >= ?1 ORDER BY at DESC LIMIT ?2",
    )?;
    let rows = st.query_map(params![since, limit.min(i64::MAX as u64) as i64], |r| {
        Ok(Egress {
            at: r.get(0)?,
            account: r.get(1)?,
            uid: r.get(2)?,
            remote_ip: r.get(3)?,
            remote_port: r.get(4)?,
            ptr: r.get(5)?,
            confirmed: r.get(6)?,
        })
    })?;
    rows.collect()
}

/// A sender that was not the owner of its domain, grouped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub auth_user: String,
    pub account: String,
    pub sender_domain: String,
    pub messages: i64,
    pub recipients: i64,
    pub first: i64,
    pub last: i64,
}

pub fn mismatches(
    c: &Connection,
    from: Option<i64>,
    to: Option<i64>,
    limit: u64,
) -> rusqlite::Result<(Vec<Mismatch>, u64)> {
    let (w, p) = range_sql(from, to);
    let total: i64 = c.query_row(
        &format!("SELECT count(*) FROM (SELECT 1 FROM mail_messages WHERE relay_mismatch = 1 AND {w} GROUP BY auth_user, sender_domain)"),
        rusqlite::params_from_iter(p.iter()),
        |r| r.get(0),
    )?;
    let mut st = c.prepare(&format!(
        "SELECT auth_user, max(account), sender_domain, count(*), sum(recipients), min(at), max(at) FROM mail_messages
         WHERE relay_mismatch = 1 AND {w} GROUP BY auth_user, sender_domain ORDER BY count(*) DESC, auth_user LIMIT {}",
        limit.min(i64::MAX as u64)
    ))?;
    let rows = st.query_map(rusqlite::params_from_iter(p.iter()), |r| {
        Ok(Mismatch {
            auth_user: r.get(0)?,
            account: r.get(1)?,
            sender_domain: r.get(2)?,
            messages: r.get(3)?,
            recipients: r.get(4)?,
            first: r.get(5)?,
            last: r.get(6)?,
        })
    })?;
    Ok((rows.collect::<Result<_, _>>()?, total.max(0) as u64))
}

/// Messages per (key, hour start) within the range, for senders (`auth_user`) or accounts,
/// where the count reaches `min`. Hours are UTC hours (microseconds of their start).
pub fn hourly_peaks(
    c: &Connection,
    column: &str,
    from: Option<i64>,
    to: Option<i64>,
    min: i64,
    limit: u64,
) -> rusqlite::Result<Vec<(String, i64, i64)>> {
    let col = match column {
        "account" => "account",
        _ => "auth_user",
    };
    let (w, mut p) = range_sql(from, to);
    p.push(min);
    let mut st = c.prepare(&format!(
        "SELECT {col}, (at / 3600000000) * 3600000000 AS h, count(*) AS n FROM mail_messages
         WHERE {col} != '' AND origin IN ('auth', 'local') AND {w} GROUP BY {col}, h HAVING n >= ?{}
         ORDER BY n DESC LIMIT {}",
        p.len(),
        limit.min(i64::MAX as u64)
    ))?;
    let rows = st.query_map(rusqlite::params_from_iter(p.iter()), |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })?;
    rows.collect()
}

/// Messages of `key` in `column` (auth_user or account) within `[from, to)`.
pub fn count_for(
    c: &Connection,
    column: &str,
    key: &str,
    from: i64,
    to: i64,
) -> rusqlite::Result<i64> {
    let col = match column {
        "account" => "account",
        _ => "auth_user",
    };
    c.query_row(
        &format!("SELECT count(*) FROM mail_messages WHERE {col} = ?1 AND at >= ?2 AND at < ?3"),
        params![key, from, to],
        |r| r.get(0),
    )
}

/// Observed forwards of one (original, target) pair within a range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardCount {
    pub original: String,
    pub target: String,
    pub account: String,
    pub count: i64,
    pub last: i64,
}

/// Observed forwards per (original, target) within the range.
pub fn forward_counts(
    c: &Connection,
    from: Option<i64>,
    to: Option<i64>,
    limit: u64,
) -> rusqlite::Result<Vec<ForwardCount>> {
    let (w, p) = range_sql(from, to);
    let mut st = c.prepare(&format!(
        "SELECT original, target, max(account), count(*), max(at) FROM mail_forwards WHERE {w}
         GROUP BY original, target ORDER BY count(*) DESC, original LIMIT {}",
        limit.min(i64::MAX as u64)
    ))?;
    let rows = st.query_map(rusqlite::params_from_iter(p.iter()), |r| {
        Ok(ForwardCount {
            original: r.get(0)?,
            target: r.get(1)?,
            account: r.get(2)?,
            count: r.get(3)?,
            last: r.get(4)?,
        })
    })?;
    rows.collect()
}

/// A stored queue snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub at: i64,
    pub mta: String,
    pub size: i64,
    pub oldest: Option<i64>,
    pub bounces: i64,
    pub domains: String,
}

pub fn snapshots(
    c: &Connection,
    from: Option<i64>,
    to: Option<i64>,
    limit: u64,
    offset: u64,
) -> rusqlite::Result<(Vec<Snapshot>, u64)> {
    let (w, p) = range_sql(from, to);
    let total: i64 = c.query_row(
        &format!("SELECT count(*) FROM mail_queue_snapshots WHERE {w}"),
        rusqlite::params_from_iter(p.iter()),
        |r| r.get(0),
    )?;
    let mut st = c.prepare(&format!(
        "SELECT at, mta, size, oldest, bounces, domains FROM mail_queue_snapshots WHERE {w}
         ORDER BY at DESC, id DESC LIMIT {} OFFSET {}",
        limit.min(i64::MAX as u64),
        offset.min(i64::MAX as u64)
    ))?;
    let rows = st.query_map(rusqlite::params_from_iter(p.iter()), |r| {
        Ok(Snapshot {
            at: r.get(0)?,
            mta: r.get(1)?,
            size: r.get(2)?,
            oldest: r.get(3)?,
            bounces: r.get(4)?,
            domains: r.get(5)?,
        })
    })?;
    Ok((rows.collect::<Result<_, _>>()?, total.max(0) as u64))
}

/// The password audit's record of one mailbox.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditRecord {
    pub mailbox: String,
    pub account: Option<String>,
    pub audited_fp: Option<String>,
    pub audited_version: Option<String>,
    pub weak: bool,
    pub breach_count: Option<i64>,
    pub audited: Option<i64>,
    pub failed_fp: Option<String>,
    pub failed_version: Option<String>,
    pub failed_reason: Option<String>,
    pub retry_after: Option<i64>,
}

pub fn load_audit(c: &Connection) -> rusqlite::Result<HashMap<String, AuditRecord>> {
    let mut st = c.prepare(
        "SELECT mailbox, account, audited_fp, audited_version, weak, breach_count, audited, failed_fp, failed_version, failed_reason, retry_after FROM mail_password_audit",
    )?;
    let rows = st.query_map([], |r| {
        Ok(AuditRecord {
            mailbox: r.get(0)?,
            account: r.get(1)?,
            audited_fp: r.get(2)?,
            audited_version: r.get(3)?,
            weak: r.get(4)?,
            breach_count: r.get(5)?,
            audited: r.get(6)?,
            failed_fp: r.get(7)?,
            failed_version: r.get(8)?,
            failed_reason: r.get(9)?,
            retry_after: r.get(10)?,
        })
    })?;
    rows.map(|r| r.map(|a| (a.mailbox.clone(), a))).collect()
}

/// Writes audit records (replacing), then deletes the records of `remove`.
pub fn save_audit(
    c: &Connection,
    records: &[AuditRecord],
    remove: &[String],
) -> rusqlite::Result<()> {
    for a in records {
        c.execute(
            "INSERT OR REPLACE INTO mail_password_audit(mailbox, account, audited_fp, audited_version, weak, breach_count, audited, failed_fp, failed_version, failed_reason, retry_after)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                a.mailbox,
                a.account,
                a.audited_fp,
                a.audited_version,
                a.weak,
                a.breach_count,
                a.audited,
                a.failed_fp,
                a.failed_version,
                a.failed_reason,
                a.retry_after
            ],
        )?;
    }
    for m in remove {
        c.execute("DELETE FROM mail_password_audit WHERE mailbox = ?1", [m])?;
    }
    Ok(())
}
