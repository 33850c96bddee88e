//! The fix of `db_option_injected`: the option is read again from the site's database
//! (settings from its `wp-config.php`, opened beneath its web root), must still look
//! injected, is kept in `db_object_backups` (kind `option`, name `table.option`, a
//! statement that puts the old value back), then replaced by its cleaned value only while
//! it still holds the value backed up.

use std::path::Path;

use super::{changed, open_beneath, shown, FixAction, FixError, Fixed, Fixer};
use crate::checks::sitedb::{self, wpconfig};
use crate::findings::Finding;
use crate::store::data::DbObjectBackup;
use crate::store::sitedb::{SiteConn, SiteDbError};

impl Fixer {
    pub(super) fn clean_db_option(&self, f: &Finding, path: &Path) -> Result<Fixed, FixError> {
        let name = sitedb::option_of(&f.details).ok_or_else(|| FixError::NoFix {
            check: f.check.clone(),
        })?;
        let root = self.web_root_of(path)?;
        let (_dir, file, info) = open_beneath(&[root], path)?;
        if info.size > wpconfig::MAX_CONFIG_BYTES {
            return Err(changed(path, "wp-config.php is too large to read"));
        }
        let text =
            super::clean::read_bounded(&file, info.size).map_err(|error| FixError::Failed {
                path: shown(path),
                error,
            })?;
        let config = wpconfig::parse(&String::from_utf8_lossy(&text))
            .map_err(|_| changed(path, "wp-config.php no longer names a local database"))?;
        let db_failed = |error: SiteDbError| FixError::Database {
            path: shown(path),
            error,
        };
        let mut conn = SiteConn::open(&config.db).map_err(db_failed)?;
        let rows = conn.watched_options().map_err(db_failed)?;
        let row = conn
            .option(name)
            .map_err(db_failed)?
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
        let backup = DbObjectBackup {
            key: crate::ids::random_hex(16),
            account: f.account.clone(),
            database: config.db.database.clone(),
            kind: "option".into(),
            name: format!("{}options.{name}", config.db.prefix),
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
        if !conn
            .replace_option(name, &row.value, &new)
            .map_err(db_failed)?
        {
            return Err(changed(
                path,
                &format!("option {name} changed while cleaning"),
            ));
        }
        Ok(Fixed {
            action: FixAction::CleanDbOption,
            path: shown(path),
            previous_mode: None,
            quarantine_id: None,
            removed_lines: Vec::new(),
            backup_key: Some(key),
        })
    }
}
