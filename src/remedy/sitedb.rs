//! The fixes of the site-database findings. The site's settings come from its
//! `wp-config.php` (opened beneath its web root); the row is read again and must still
//! look injected; it is kept in `db_object_backups` (a statement that puts the old value
//! back), then replaced by its cleaned value only while it still holds the value backed up.
//! - `db_option_injected`: kind `option`, name `TABLE.OPTION`;
//! - `db_post_injected`: kind `post`, name `TABLE.ID`; the post loses its flagged scripts
//!   and iframes;
//! - `db_trigger_injected`, `db_event_injected`, `db_routine_injected` (issue 41): the
//!   object's exact `SHOW CREATE` statement is kept (kind `trigger`, `event`, `procedure`,
//!   `function`, name the object's), then the object is dropped once its definer, body and
//!   statement are read again unchanged. [`Fixer::restore_db_object`] puts it back.

use std::path::Path;

use super::{changed, open_sole, shown, FixAction, FixError, Fixed, Fixer};
use crate::checks::sitedb::{self, markup, wpconfig};
use crate::findings::Finding;
use crate::store::data::DbObjectBackup;
use crate::store::sitedb::{ObjectKind, OptionRow, SiteConn, SiteDbError};

fn db_failed(path: &Path) -> impl Fn(SiteDbError) -> FixError + '_ {
    move |error| FixError::Database {
        path: shown(path),
        error,
    }
}

impl Fixer {
    /// The site's settings, read again from its `wp-config.php`, which must be the site's
    /// alone: a `wp-config.php` hard-linked from another site would point the cleaning at
    /// that site's database.
    fn site_config(&self, path: &Path) -> Result<wpconfig::WpConfig, FixError> {
        let root = self.web_root_of(path)?;
        let (_dir, file, info) = open_sole(&[root], path, None)?;
        if info.size > wpconfig::MAX_CONFIG_BYTES {
            return Err(changed(path, "wp-config.php is too large to read"));
        }
        let text =
            super::clean::read_bounded(&file, info.size).map_err(|error| FixError::Failed {
                path: shown(path),
                error,
            })?;
        wpconfig::parse(&String::from_utf8_lossy(&text))
            .map_err(|_| changed(path, "wp-config.php no longer names a local database"))
    }

    /// The site's settings, a connection to its database and its watched options.
    fn open_site(
        &self,
        path: &Path,
    ) -> Result<(wpconfig::WpConfig, SiteConn, Vec<OptionRow>), FixError> {
        let config = self.site_config(path)?;
        let mut conn = SiteConn::open(&config.db).map_err(db_failed(path))?;
        let rows = conn.watched_options().map_err(db_failed(path))?;
        Ok((config, conn, rows))
    }

    /// Writes the backup of a row; its key.
    fn keep_db_backup(
        &self,
        f: &Finding,
        path: &Path,
        config: &wpconfig::WpConfig,
        kind: &str,
        name: String,
        statement: String,
    ) -> Result<String, FixError> {
        let backup = DbObjectBackup {
            key: crate::ids::random_hex(16),
            account: f.account.clone(),
            database: config.db.database.clone(),
            kind: kind.into(),
            name,
            created: self.clock.now(),
            statement_bytes: statement.len() as u64,
            statement,
        };
        let key = backup.key.clone();
        self.store
            .write(move |c| crate::store::data::add_db_object_backup(c, &backup))
            .map_err(|e| FixError::Failed {
                path: shown(path),
                error: std::io::Error::other(e.to_string()),
            })?;
        Ok(key)
    }

    pub(super) fn clean_db_option(&self, f: &Finding, path: &Path) -> Result<Fixed, FixError> {
        let name = sitedb::option_of(&f.details).ok_or_else(|| FixError::NoFix {
            check: f.check.clone(),
        })?;
        let (config, mut conn, rows) = self.open_site(path)?;
        let row = conn
            .option(name)
            .map_err(db_failed(path))?
            .ok_or_else(|| changed(path, &format!("option {name} is gone")))?;
        if !row.complete {
            return Err(changed(path, "the option is too large to clean"));
        }
        let host = sitedb::site_host(&config, &rows);
        let pinned = config.home.is_some() || config.siteurl.is_some();
        if sitedb::option_problem(&row, host.as_deref(), pinned).is_none() {
            return Err(changed(
                path,
                &format!("option {name} no longer looks injected"),
            ));
        }
        let home = rows.iter().find(|r| r.name == "home");
        let new = sitedb::clean_value(&row, &config, home, host.as_deref())
            .ok_or_else(|| changed(path, "no clean value is known (pin WP_HOME)"))?;
        let statement = conn.restore_option_statement(name, &row.value);
        let table_name = format!("{}options.{name}", config.db.prefix);
        let key = self.keep_db_backup(f, path, &config, "option", table_name, statement)?;
        if !conn
            .replace_option(name, &row.value, &new)
            .map_err(db_failed(path))?
        {
            return Err(changed(
                path,
                &format!("option {name} changed while cleaning"),
            ));
        }
        Ok(db_fixed(FixAction::CleanDbOption, path, key))
    }

    pub(super) fn clean_db_post(&self, f: &Finding, path: &Path) -> Result<Fixed, FixError> {
        let id = sitedb::post_of(&f.details).ok_or_else(|| FixError::NoFix {
            check: f.check.clone(),
        })?;
        let (config, mut conn, rows) = self.open_site(path)?;
        let row = conn
            .post(id)
            .map_err(db_failed(path))?
            .ok_or_else(|| changed(path, &format!("post {id} is gone")))?;
        if !row.complete {
            return Err(changed(path, "the post is too large to clean"));
        }
        let host = sitedb::site_host(&config, &rows);
        if markup::flagged(&row.content, host.as_deref(), false).is_empty() {
            return Err(changed(
                path,
                &format!("post {id} no longer looks injected"),
            ));
        }
        let new = markup::cleaned_plain(&row.content, host.as_deref(), false);
        let statement = conn.restore_post_statement(id, &row.content);
        let table_name = format!("{}posts.{id}", config.db.prefix);
        let key = self.keep_db_backup(f, path, &config, "post", table_name, statement)?;
        if !conn
            .replace_post(id, &row.content, &new)
            .map_err(db_failed(path))?
        {
            return Err(changed(path, &format!("post {id} changed while cleaning")));
        }
        Ok(db_fixed(FixAction::CleanDbPost, path, key))
    }
}

impl Fixer {
    pub(super) fn drop_db_object(
        &self,
        f: &Finding,
        path: &Path,
        action: FixAction,
    ) -> Result<Fixed, FixError> {
        let (kind, name) = sitedb::object_of(&f.details).ok_or_else(|| FixError::NoFix {
            check: f.check.clone(),
        })?;
        let config = self.site_config(path)?;
        let mut conn = SiteConn::open(&config.db).map_err(db_failed(path))?;
        let what = format!("{} {}", kind.name(), crate::text::escape_controls(&name));
        let obj = conn
            .object(kind, &name)
            .map_err(db_failed(path))?
            .ok_or_else(|| changed(path, &format!("{what} is gone")))?;
        if !obj.complete {
            return Err(changed(path, &format!("{what} is too large to check")));
        }
        if sitedb::objects::object_problem(&obj, &config.db.prefix).is_none() {
            return Err(changed(path, &format!("{what} no longer looks injected")));
        }
        let create = conn
            .show_create(kind, &name)
            .map_err(db_failed(path))?
            .ok_or_else(|| {
                changed(
                    path,
                    &format!("the CREATE statement of {what} cannot be read in full"),
                )
            })?;
        let key =
            self.keep_db_backup(f, path, &config, kind.name(), name.clone(), create.clone())?;
        // Compare and set: the definer, body and statement backed up must still be the
        // object's right before it is dropped.
        let now = conn.object(kind, &name).map_err(db_failed(path))?;
        let now_create = conn.show_create(kind, &name).map_err(db_failed(path))?;
        if now.as_ref() != Some(&obj) || now_create.as_deref() != Some(create.as_str()) {
            return Err(changed(path, &format!("{what} changed while dropping")));
        }
        conn.drop_object(kind, &name).map_err(db_failed(path))?;
        Ok(db_fixed(action, path, key))
    }

    /// Puts a dropped trigger, event or routine back: its captured `CREATE` statement runs
    /// in the database of the site under the web roots that uses the backup's database (and
    /// belongs to its account, when it names one). Returns the site's `wp-config.php` as
    /// shown. 409 ([`FixError::Changed`]) when an object of that name exists or no such
    /// site is found; 400 for a backup that is not a dropped object.
    pub fn restore_db_object(&self, b: &DbObjectBackup) -> Result<String, FixError> {
        let Some(kind) = ObjectKind::parse(&b.kind) else {
            return Err(FixError::NoFix {
                check: format!("a backup of kind {}", b.kind),
            });
        };
        let trimmed = b.statement.trim_start();
        if !trimmed
            .get(..7)
            .is_some_and(|s| s.eq_ignore_ascii_case("CREATE "))
        {
            return Err(FixError::NoFix {
                check: "a backup without a CREATE statement".into(),
            });
        }
        let mut walker = crate::checks::walk::Walker::new(&self.ctx);
        let mut owners = crate::checks::walk::OwnerCache::default();
        let site = sitedb::sites(&self.ctx, &mut walker)
            .into_iter()
            .find(|s| {
                s.config.db.database == b.database
                    && b.account
                        .as_ref()
                        .is_none_or(|a| owners.name(s.owner_uid).as_ref() == Some(a))
            })
            .ok_or_else(|| FixError::Changed {
                path: b.database.clone(),
                what: "no site under the web roots uses this database any more".into(),
            })?;
        let path = site.config_path.as_path();
        let config = self.site_config(path)?;
        let mut conn = SiteConn::open(&config.db).map_err(db_failed(path))?;
        if conn
            .object(kind, &b.name)
            .map_err(db_failed(path))?
            .is_some()
        {
            return Err(changed(
                path,
                &format!(
                    "a {} named {} exists",
                    kind.name(),
                    crate::text::escape_controls(&b.name)
                ),
            ));
        }
        conn.run_create(&b.statement).map_err(db_failed(path))?;
        Ok(shown(path))
    }
}

fn db_fixed(action: FixAction, path: &Path, key: String) -> Fixed {
    Fixed {
        action,
        path: shown(path),
        previous_mode: None,
        quarantine_id: None,
        removed_lines: Vec::new(),
        backup_key: Some(key),
    }
}
