//! A site's own MySQL or MariaDB database (WordPress tables), read and cleaned for the
//! database-object checks. Kept here with the daemon's own SQL so that SQL text lives in
//! `store` only; the client is the `mysql` crate without TLS (decision 407). Only local
//! servers are reached: a Unix socket, or TCP on a loopback address. Every read is bounded
//! in rows and bytes; the password is never logged or shown (`Debug` hides it).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder};

/// Rows read at most per query.
pub const MAX_ROWS: usize = 1000;
/// Bytes of one value read at most (the rest is not fetched).
pub const MAX_VALUE_BYTES: usize = 256 * 1024;
/// Connect, read and write timeout.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Where the site's server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Socket(PathBuf),
    Loopback(IpAddr, u16),
}

/// The site's connection settings (from its `wp-config.php`).
#[derive(Clone, PartialEq, Eq)]
pub struct SiteDb {
    pub endpoint: Endpoint,
    pub database: String,
    pub user: String,
    pub password: String,
    /// The table prefix, checked to be `[A-Za-z0-9_]+` (WordPress's own rule).
    pub prefix: String,
}

impl std::fmt::Debug for SiteDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SiteDb")
            .field("endpoint", &self.endpoint)
            .field("database", &self.database)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// Why the site's database could not be used.
#[derive(Debug)]
pub enum SiteDbError {
    /// The table prefix is not a plain name (nothing is queried).
    BadPrefix,
    Mysql(mysql::Error),
}

impl std::fmt::Display for SiteDbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SiteDbError::BadPrefix => write!(f, "the table prefix is not a plain name"),
            SiteDbError::Mysql(e) => write!(f, "site database: {e}"),
        }
    }
}

impl std::error::Error for SiteDbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SiteDbError::Mysql(e) => Some(e),
            SiteDbError::BadPrefix => None,
        }
    }
}

impl From<mysql::Error> for SiteDbError {
    fn from(e: mysql::Error) -> Self {
        SiteDbError::Mysql(e)
    }
}

/// One option row (value cut at [`MAX_VALUE_BYTES`]; `complete` says whether it was).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionRow {
    pub name: String,
    pub value: Vec<u8>,
    pub complete: bool,
}

/// One post's content (cut like an option's value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostRow {
    pub id: u64,
    pub content: Vec<u8>,
    pub complete: bool,
}

/// An open connection to a site's database.
pub struct SiteConn {
    conn: Conn,
    prefix: String,
}

fn plain_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl SiteConn {
    pub fn open(db: &SiteDb) -> Result<SiteConn, SiteDbError> {
        if !plain_name(&db.prefix) {
            return Err(SiteDbError::BadPrefix);
        }
        let mut opts = OptsBuilder::new()
            .user(Some(&db.user))
            .pass(Some(&db.password))
            .db_name(Some(&db.database))
            .prefer_socket(false)
            .read_timeout(Some(TIMEOUT))
            .write_timeout(Some(TIMEOUT))
            .tcp_connect_timeout(Some(TIMEOUT));
        opts = match &db.endpoint {
            Endpoint::Socket(p) => opts.socket(Some(p.to_string_lossy().into_owned())),
            Endpoint::Loopback(ip, port) => {
                opts.ip_or_hostname(Some(ip.to_string())).tcp_port(*port)
            }
        };
        Ok(SiteConn {
            conn: Conn::new(opts)?,
            prefix: db.prefix.clone(),
        })
    }

    fn bounded<T>(
        &mut self,
        sql: String,
        params: impl Into<mysql::Params>,
        row: impl Fn(Vec<u8>, Vec<u8>, i64) -> T,
    ) -> Result<Vec<T>, SiteDbError> {
        let rows: Vec<(Vec<u8>, Vec<u8>, i64)> = self.conn.exec(sql, params)?;
        Ok(rows
            .into_iter()
            .take(MAX_ROWS)
            .map(|(a, b, n)| row(a, b, n))
            .collect())
    }

    /// `siteurl`, `home` and the `widget_*` options.
    pub fn watched_options(&mut self) -> Result<Vec<OptionRow>, SiteDbError> {
        let sql = format!(
            "SELECT option_name, LEFT(option_value, {MAX_VALUE_BYTES}), LENGTH(option_value) \
             FROM `{}options` WHERE option_name IN ('siteurl', 'home') \
             OR option_name LIKE 'widget\\_%' ORDER BY option_id LIMIT {MAX_ROWS}",
            self.prefix
        );
        self.bounded(sql, (), |name, value, len| OptionRow {
            name: String::from_utf8_lossy(&name).into_owned(),
            complete: len as usize <= value.len(),
            value,
        })
    }

    /// One option by name.
    pub fn option(&mut self, name: &str) -> Result<Option<OptionRow>, SiteDbError> {
        let sql = format!(
            "SELECT option_name, LEFT(option_value, {MAX_VALUE_BYTES}), LENGTH(option_value) \
             FROM `{}options` WHERE option_name = ? LIMIT 1",
            self.prefix
        );
        let mut rows = self.bounded(sql, (name,), |name, value, len| OptionRow {
            name: String::from_utf8_lossy(&name).into_owned(),
            complete: len as usize <= value.len(),
            value,
        })?;
        Ok(rows.pop())
    }

    /// Replaces an option's value only while it still holds `old` (a change in between
    /// leaves it alone); true when it was replaced.
    pub fn replace_option(
        &mut self,
        name: &str,
        old: &[u8],
        new: &[u8],
    ) -> Result<bool, SiteDbError> {
        let sql = format!(
            "UPDATE `{}options` SET option_value = ? WHERE option_name = ? AND option_value = ?",
            self.prefix
        );
        self.conn.exec_drop(sql, (new, name, old))?;
        Ok(self.conn.affected_rows() == 1)
    }

    /// Published or pending posts whose content holds a script or an iframe, newest first.
    pub fn posts_with_markup(&mut self) -> Result<Vec<PostRow>, SiteDbError> {
        let sql = format!(
            "SELECT CAST(ID AS CHAR), LEFT(post_content, {MAX_VALUE_BYTES}), LENGTH(post_content) \
             FROM `{}posts` WHERE post_status IN ('publish', 'future', 'draft', 'pending', 'private') \
             AND (post_content LIKE '%<script%' OR post_content LIKE '%<iframe%') \
             ORDER BY ID DESC LIMIT {MAX_ROWS}",
            self.prefix
        );
        self.bounded(sql, (), |id, content, len| PostRow {
            id: String::from_utf8_lossy(&id).parse().unwrap_or(0),
            complete: len as usize <= content.len(),
            content,
        })
    }

    /// One post's content by ID.
    pub fn post(&mut self, id: u64) -> Result<Option<PostRow>, SiteDbError> {
        let sql = format!(
            "SELECT CAST(ID AS CHAR), LEFT(post_content, {MAX_VALUE_BYTES}), LENGTH(post_content) \
             FROM `{}posts` WHERE ID = ? LIMIT 1",
            self.prefix
        );
        let mut rows = self.bounded(sql, (id,), |id, content, len| PostRow {
            id: String::from_utf8_lossy(&id).parse().unwrap_or(0),
            complete: len as usize <= content.len(),
            content,
        })?;
        Ok(rows.pop())
    }

    /// Replaces a post's content only while it still holds `old`; true when it was replaced.
    pub fn replace_post(&mut self, id: u64, old: &[u8], new: &[u8]) -> Result<bool, SiteDbError> {
        let sql = format!(
            "UPDATE `{}posts` SET post_content = ? WHERE ID = ? AND post_content = ?",
            self.prefix
        );
        self.conn.exec_drop(sql, (new, id, old))?;
        Ok(self.conn.affected_rows() == 1)
    }

    /// The statement that puts a post's content back, for its backup.
    pub fn restore_post_statement(&self, id: u64, content: &[u8]) -> String {
        format!(
            "UPDATE `{}posts` SET post_content = X'{}' WHERE ID = {id};",
            self.prefix,
            hex::encode(content)
        )
    }

    /// The statement that puts an option's value back, for its backup.
    pub fn restore_option_statement(&self, name: &str, value: &[u8]) -> String {
        format!(
            "UPDATE `{}options` SET option_value = X'{}' WHERE option_name = X'{}';",
            self.prefix,
            hex::encode(value),
            hex::encode(name.as_bytes())
        )
    }
}

/// Bytes of a `SHOW CREATE` statement kept at most: a longer one is not captured (its
/// object cannot be dropped by a fix, which needs the whole statement to put it back).
pub const MAX_CREATE_BYTES: usize = 1024 * 1024;

/// The kinds of stored programs a site's database can hold (issue 41).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    Trigger,
    Event,
    Procedure,
    Function,
}

impl ObjectKind {
    pub const ALL: [ObjectKind; 4] = [
        ObjectKind::Trigger,
        ObjectKind::Event,
        ObjectKind::Procedure,
        ObjectKind::Function,
    ];

    /// `trigger`, `event`, `procedure`, `function` (the backup's kind).
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Trigger => "trigger",
            ObjectKind::Event => "event",
            ObjectKind::Procedure => "procedure",
            ObjectKind::Function => "function",
        }
    }

    pub fn parse(s: &str) -> Option<ObjectKind> {
        ObjectKind::ALL.into_iter().find(|k| k.name() == s)
    }

    fn keyword(self) -> &'static str {
        match self {
            ObjectKind::Trigger => "TRIGGER",
            ObjectKind::Event => "EVENT",
            ObjectKind::Procedure => "PROCEDURE",
            ObjectKind::Function => "FUNCTION",
        }
    }

    /// The column of `SHOW CREATE <kind>` holding the statement.
    fn create_column(self) -> usize {
        match self {
            ObjectKind::Event => 3,
            _ => 2,
        }
    }
}

/// A trigger, event or routine of the site's database, its body cut at
/// [`MAX_VALUE_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbObject {
    pub kind: ObjectKind,
    pub name: String,
    /// The table of a trigger.
    pub table: Option<String>,
    pub definer: String,
    pub body: Vec<u8>,
    pub complete: bool,
}

/// An identifier quoted with backticks, backticks inside doubled.
pub fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

type ObjectRow = (
    Vec<u8>,
    Option<Vec<u8>>,
    Vec<u8>,
    Option<Vec<u8>>,
    Option<i64>,
);

impl SiteConn {
    /// The objects of `kind` in the site's database: triggers on the site's tables (names
    /// beginning with its prefix), every event, procedures or functions. At most
    /// [`MAX_ROWS`], bodies cut at [`MAX_VALUE_BYTES`].
    pub fn objects(&mut self, kind: ObjectKind) -> Result<Vec<DbObject>, SiteDbError> {
        let n = MAX_VALUE_BYTES;
        let (sql, params): (String, mysql::Params) = match kind {
            ObjectKind::Trigger => (
                format!(
                    "SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE, DEFINER, LEFT(ACTION_STATEMENT, {n}), \
                     LENGTH(ACTION_STATEMENT) FROM information_schema.TRIGGERS \
                     WHERE TRIGGER_SCHEMA = DATABASE() \
                     AND LEFT(EVENT_OBJECT_TABLE, CHAR_LENGTH(?)) = ? \
                     ORDER BY TRIGGER_NAME LIMIT {MAX_ROWS}"
                ),
                (self.prefix.as_str(), self.prefix.as_str()).into(),
            ),
            ObjectKind::Event => (
                format!(
                    "SELECT EVENT_NAME, NULL, DEFINER, LEFT(EVENT_DEFINITION, {n}), \
                     LENGTH(EVENT_DEFINITION) FROM information_schema.EVENTS \
                     WHERE EVENT_SCHEMA = DATABASE() ORDER BY EVENT_NAME LIMIT {MAX_ROWS}"
                ),
                ().into(),
            ),
            ObjectKind::Procedure | ObjectKind::Function => (
                format!(
                    "SELECT ROUTINE_NAME, NULL, DEFINER, LEFT(ROUTINE_DEFINITION, {n}), \
                     LENGTH(ROUTINE_DEFINITION) FROM information_schema.ROUTINES \
                     WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = ? \
                     ORDER BY ROUTINE_NAME LIMIT {MAX_ROWS}"
                ),
                (kind.keyword(),).into(),
            ),
        };
        let rows: Vec<ObjectRow> = self.conn.exec(sql, params)?;
        let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
        Ok(rows
            .into_iter()
            .take(MAX_ROWS)
            .map(|(name, table, definer, body, len)| {
                let body = body.unwrap_or_default();
                DbObject {
                    kind,
                    name: text(name),
                    table: table.map(text),
                    definer: text(definer),
                    complete: len.unwrap_or(0).max(0) as usize <= body.len(),
                    body,
                }
            })
            .collect())
    }

    /// One object of `kind` by name, if it exists.
    pub fn object(
        &mut self,
        kind: ObjectKind,
        name: &str,
    ) -> Result<Option<DbObject>, SiteDbError> {
        // Read by name through the bounded listing's own query, filtered here (names are
        // compared exactly; the listing is bounded).
        Ok(self
            .objects_named(kind, name)?
            .into_iter()
            .find(|o| o.name == name))
    }

    fn objects_named(
        &mut self,
        kind: ObjectKind,
        name: &str,
    ) -> Result<Vec<DbObject>, SiteDbError> {
        let n = MAX_VALUE_BYTES;
        let (sql, params): (String, mysql::Params) = match kind {
            ObjectKind::Trigger => (
                format!(
                    "SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE, DEFINER, LEFT(ACTION_STATEMENT, {n}), \
                     LENGTH(ACTION_STATEMENT) FROM information_schema.TRIGGERS \
                     WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = ? LIMIT 10"
                ),
                (name,).into(),
            ),
            ObjectKind::Event => (
                format!(
                    "SELECT EVENT_NAME, NULL, DEFINER, LEFT(EVENT_DEFINITION, {n}), \
                     LENGTH(EVENT_DEFINITION) FROM information_schema.EVENTS \
                     WHERE EVENT_SCHEMA = DATABASE() AND EVENT_NAME = ? LIMIT 10"
                ),
                (name,).into(),
            ),
            ObjectKind::Procedure | ObjectKind::Function => (
                format!(
                    "SELECT ROUTINE_NAME, NULL, DEFINER, LEFT(ROUTINE_DEFINITION, {n}), \
                     LENGTH(ROUTINE_DEFINITION) FROM information_schema.ROUTINES \
                     WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = ? \
                     AND ROUTINE_NAME = ? LIMIT 10"
                ),
                (kind.keyword(), name).into(),
            ),
        };
        let rows: Vec<ObjectRow> = self.conn.exec(sql, params)?;
        let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
        Ok(rows
            .into_iter()
            .map(|(name, table, definer, body, len)| {
                let body = body.unwrap_or_default();
                DbObject {
                    kind,
                    name: text(name),
                    table: table.map(text),
                    definer: text(definer),
                    complete: len.unwrap_or(0).max(0) as usize <= body.len(),
                    body,
                }
            })
            .collect())
    }

    /// The exact `SHOW CREATE` statement of an object; None when it is gone, not visible
    /// to the site's user, or longer than [`MAX_CREATE_BYTES`].
    pub fn show_create(
        &mut self,
        kind: ObjectKind,
        name: &str,
    ) -> Result<Option<String>, SiteDbError> {
        let sql = format!("SHOW CREATE {} {}", kind.keyword(), quote_ident(name));
        let row: Option<mysql::Row> = match self.conn.query_first(sql) {
            Ok(r) => r,
            // Gone in between: "does not exist" (1360 trigger, 1305 routine, 1539 event).
            Err(mysql::Error::MySqlError(e)) if [1360, 1305, 1539].contains(&e.code) => {
                return Ok(None)
            }
            Err(e) => return Err(e.into()),
        };
        let Some(row) = row else { return Ok(None) };
        let create: Option<Option<Vec<u8>>> = row.get(kind.create_column());
        Ok(create
            .flatten()
            .filter(|b| b.len() <= MAX_CREATE_BYTES)
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// Drops an object (`DROP <kind>` with the name quoted).
    pub fn drop_object(&mut self, kind: ObjectKind, name: &str) -> Result<(), SiteDbError> {
        let sql = format!("DROP {} {}", kind.keyword(), quote_ident(name));
        self.conn.query_drop(sql)?;
        Ok(())
    }

    /// Runs a captured `CREATE` statement in the site's database (text protocol: stored
    /// programs cannot be prepared).
    pub fn run_create(&mut self, statement: &str) -> Result<(), SiteDbError> {
        self.conn.query_drop(statement)?;
        Ok(())
    }
}

#[cfg(test)]
mod object_tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted_with_backticks_doubled() {
        assert_eq!(quote_ident("evil"), "`evil`");
        assert_eq!(quote_ident("a`b; DROP"), "`a``b; DROP`");
        assert_eq!(ObjectKind::parse("event"), Some(ObjectKind::Event));
        assert_eq!(ObjectKind::parse("option"), None);
    }
}
