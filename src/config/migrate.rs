//! Legacy `webui.auth_token` migration.
//!
//! On first start a non-empty `webui.auth_token` in the main file becomes a
//! `[[webui.tokens]]` entry named `legacy-auth-token` with scope admin. The file is rewritten
//! atomically with its comments, owner and permissions kept. Running it again changes nothing.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use toml_edit::{value, ArrayOfTables, DocumentMut, Item, Table};

use super::LEGACY_TOKEN_NAME;

/// What the migration did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// No legacy token: the file was not touched.
    Unchanged,
    /// The token moved into a new `legacy-auth-token` entry.
    Migrated,
    /// The token already had an entry; only `auth_token` was removed.
    RemovedDuplicate,
}

/// Why the migration did not run (the file is then unchanged).
#[derive(Debug)]
pub enum MigrateError {
    Read(PathBuf, std::io::Error),
    Metadata(PathBuf, std::io::Error),
    Rewrite(PathBuf, std::io::Error),
    /// The text is not TOML (the parser's message on one line).
    Syntax(String),
    /// `webui.tokens` is neither an array of tables nor an array of inline tables.
    TokensNotTables,
    /// A `legacy-auth-token` entry exists with another token.
    NameTaken,
}

impl std::fmt::Display for MigrateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MigrateError::Read(p, e) => write!(f, "{}: cannot read: {e}", p.display()),
            MigrateError::Metadata(p, e) => write!(f, "{}: {e}", p.display()),
            MigrateError::Rewrite(p, e) => write!(f, "{}: cannot rewrite: {e}", p.display()),
            MigrateError::Syntax(m) => f.write_str(m),
            MigrateError::TokensNotTables => {
                f.write_str("webui.tokens: must be an array of tables")
            }
            MigrateError::NameTaken => write!(
                f,
                "webui.auth_token: cannot migrate: a token named {LEGACY_TOKEN_NAME:?} already exists with another value"
            ),
        }
    }
}

impl std::error::Error for MigrateError {}

/// Migrates the main configuration file in place.
pub fn migrate_file(path: &Path) -> Result<Outcome, MigrateError> {
    let text = crate::fsutil::read_daemon_string(path)
        .map_err(|e| MigrateError::Read(path.to_path_buf(), e))?;
    let (new_text, outcome) = migrate_text(&text)?;
    if outcome == Outcome::Unchanged {
        return Ok(outcome);
    }
    let meta =
        std::fs::metadata(path).map_err(|e| MigrateError::Metadata(path.to_path_buf(), e))?;
    crate::fsutil::write_atomic(
        path,
        new_text.as_bytes(),
        meta.mode() & 0o7777,
        Some((meta.uid(), meta.gid())),
    )
    .map_err(|e| MigrateError::Rewrite(path.to_path_buf(), e))?;
    Ok(outcome)
}

/// Pure text transformation behind [`migrate_file`].
pub fn migrate_text(text: &str) -> Result<(String, Outcome), MigrateError> {
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| MigrateError::Syntax(e.message().replace('\n', " ")))?;
    let Some(webui) = doc.get_mut("webui").and_then(Item::as_table_like_mut) else {
        return Ok((text.to_string(), Outcome::Unchanged));
    };
    let legacy = match webui.get("auth_token").and_then(Item::as_str) {
        Some(t) if !t.is_empty() => t.to_string(),
        _ => return Ok((text.to_string(), Outcome::Unchanged)),
    };

    let existing: Vec<(String, String)> = match webui.get("tokens") {
        Some(Item::ArrayOfTables(a)) => a
            .iter()
            .map(|t| {
                (
                    t.get("name")
                        .and_then(Item::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    t.get("token")
                        .and_then(Item::as_str)
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect(),
        Some(Item::Value(toml_edit::Value::Array(a))) => a
            .iter()
            .filter_map(|v| v.as_inline_table())
            .map(|t| {
                (
                    t.get("name")
                        .and_then(|v| v.as_str())
                        .unwrap_or_default()
                        .to_string(),
                    t.get("token")
                        .and_then(|v| v.as_str())
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect(),
        None => Vec::new(),
        Some(_) => return Err(MigrateError::TokensNotTables),
    };

    let outcome = if existing.iter().any(|(_, tok)| tok == &legacy) {
        Outcome::RemovedDuplicate
    } else {
        if existing.iter().any(|(name, _)| name == LEGACY_TOKEN_NAME) {
            return Err(MigrateError::NameTaken);
        }
        match webui.get_mut("tokens") {
            Some(Item::Value(toml_edit::Value::Array(a))) => {
                let mut t = toml_edit::InlineTable::new();
                t.insert("name", LEGACY_TOKEN_NAME.into());
                t.insert("token", legacy.as_str().into());
                t.insert("scope", "admin".into());
                a.push(t);
            }
            Some(Item::ArrayOfTables(a)) => a.push(legacy_table(&legacy)),
            _ => {
                let mut a = ArrayOfTables::new();
                a.push(legacy_table(&legacy));
                webui.insert("tokens", Item::ArrayOfTables(a));
            }
        }
        Outcome::Migrated
    };
    webui.remove("auth_token");
    Ok((doc.to_string(), outcome))
}

fn legacy_table(token: &str) -> Table {
    let mut t = Table::new();
    t.decor_mut()
        .set_prefix("\n# Migrated from the legacy webui.auth_token.\n");
    t.insert("name", value(LEGACY_TOKEN_NAME));
    t.insert("token", value(token));
    t.insert("scope", value("admin"));
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOK: &str = "0123456789abcdef0123";

    #[test]
    fn migrates_once_and_keeps_comments() {
        let text = format!("# main config\nstate_path = \"/var/lib/svc\" # where state lives\n\n[webui]\n# the old token\nauth_token = \"{TOK}\"\nlisten = \"127.0.0.1:9443\"\n");
        let (out, o) = migrate_text(&text).unwrap();
        assert_eq!(o, Outcome::Migrated);
        assert!(out.contains("# main config"));
        assert!(out.contains("# where state lives"));
        assert!(!out.contains("auth_token ="));
        let cfg =
            crate::config::from_table(&crate::config::parse_str(&out).unwrap(), vec![]).unwrap();
        assert_eq!(cfg.webui.tokens.len(), 1);
        assert_eq!(cfg.webui.tokens[0].name, LEGACY_TOKEN_NAME);
        assert_eq!(cfg.webui.tokens[0].token, TOK);
        let (again, o2) = migrate_text(&out).unwrap();
        assert_eq!(o2, Outcome::Unchanged);
        assert_eq!(again, out);
    }

    #[test]
    fn appends_to_existing_tokens_and_inline_arrays() {
        let text = format!("[webui]\nauth_token = \"{TOK}\"\n\n[[webui.tokens]]\nname = \"ops\"\ntoken = \"zzzzzzzzzzzzzzzzzzzz\"\nscope = \"read\"\n");
        let (out, _) = migrate_text(&text).unwrap();
        let cfg =
            crate::config::from_table(&crate::config::parse_str(&out).unwrap(), vec![]).unwrap();
        assert_eq!(cfg.webui.tokens.len(), 2);

        let text = format!("[webui]\nauth_token = \"{TOK}\"\ntokens = [{{ name = \"ops\", token = \"zzzzzzzzzzzzzzzzzzzz\", scope = \"read\" }}]\n");
        let (out, _) = migrate_text(&text).unwrap();
        let cfg =
            crate::config::from_table(&crate::config::parse_str(&out).unwrap(), vec![]).unwrap();
        assert_eq!(cfg.webui.tokens.len(), 2);
    }

    #[test]
    fn duplicate_value_only_removes_the_legacy_key() {
        let text = format!("[webui]\nauth_token = \"{TOK}\"\n[[webui.tokens]]\nname = \"a\"\ntoken = \"{TOK}\"\nscope = \"admin\"\n");
        let (out, o) = migrate_text(&text).unwrap();
        assert_eq!(o, Outcome::RemovedDuplicate);
        assert!(!out.contains("auth_token ="));
    }

    #[test]
    fn refusals_read_as_before_the_error_type() {
        let e = |t: &str| migrate_text(t).unwrap_err().to_string();
        let tokens = format!("[webui]\nauth_token = \"{TOK}\"\ntokens = 3\n");
        assert_eq!(e(&tokens), "webui.tokens: must be an array of tables");
        let taken = format!("[webui]\nauth_token = \"{TOK}\"\n[[webui.tokens]]\nname = \"{LEGACY_TOKEN_NAME}\"\ntoken = \"zzzzzzzzzzzzzzzzzzzz\"\n");
        assert_eq!(
            e(&taken),
            "webui.auth_token: cannot migrate: a token named \"legacy-auth-token\" already exists with another value"
        );
        assert!(!e("a = = 1\n").contains('\n'));
        let missing = Path::new("/nonexistent/svc.toml");
        let read = migrate_file(missing).unwrap_err().to_string();
        assert!(
            read.starts_with("/nonexistent/svc.toml: cannot read: "),
            "{read}"
        );
    }

    #[test]
    fn empty_or_absent_changes_nothing() {
        for text in ["", "[webui]\nauth_token = \"\"\n", "state_path = \"/x\"\n"] {
            assert_eq!(
                migrate_text(text).unwrap(),
                (text.to_string(), Outcome::Unchanged)
            );
        }
    }
}
