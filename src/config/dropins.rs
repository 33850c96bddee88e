//! Settings changed through the API (`/api/v1/settings/<section>`): the keys of a section as
//! the configuration in effect has them, and their change written as a drop-in.
//!
//! Guarantees:
//! - A section is a table of [`KEYS`] (`alerts`, `webui.limits`); its settings are the keys
//!   directly in it. Keys of arrays of tables (`webui.tokens[]`) and of free maps (`*`) are
//!   not settings here, nor are top-level keys.
//! - Values come from the main file and its drop-ins merged as the loader merges them, else
//!   the default. A secret ([`SECRET_KEYS`]) is never shown: only whether it is set.
//! - A change is validated before anything is written: every field must be a setting of
//!   the section with a value of its kind and range, and the whole configuration with the
//!   change must load. Refusals name the field (`{field, message}`); nothing is written.
//! - The change is written atomically (temporary file, fsync, rename; mode 0600) as
//!   `conf.d/90-api-<section>.toml` beside the main file, merged with that file's earlier
//!   API changes; the loader reads it after the main file at every start and reload.

use std::path::{Path, PathBuf};

use serde::Serialize;
use toml::value::Table;
use toml::Value;

use super::keys::{Class, Key, Kind, KEYS};

/// Keys whose value is never shown (tokens, API keys, URLs that may carry a secret).
pub const SECRET_KEYS: &[&str] = &[
    "webui.metrics_token",
    "webui.auth_token",
    "reputation.ipfeed_key",
    "alerts.webhook.url",
    "reputation.spamfilter.url",
    "reputation.upstream.url",
    "mail.breach_api",
    "fleet.bouncer_key",
    "fleet.password",
];

/// Prefix of the drop-ins the API writes (after operators' usual `10-`..`80-` names).
pub const API_DROPIN_PREFIX: &str = "90-api-";

/// One setting as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Setting {
    pub key: &'static str,
    #[serde(rename = "type")]
    pub type_name: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub range: String,
    /// The value in effect; absent for secrets and for unset keys without a default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
    /// Set in the main file or a drop-in.
    pub set: bool,
    pub secret: bool,
    /// Settable only in the files root owns (a program to run, a file written outside the
    /// state directory): shown read-only; a save naming it is refused.
    pub file_only: bool,
    /// `live` (applied by a reload) or `restart`.
    pub class: &'static str,
    pub doc: &'static str,
}

/// A refused field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// Why a settings change was not written.
#[derive(Debug)]
pub enum SettingsError {
    UnknownSection(String),
    /// The change is invalid; nothing was written.
    Invalid(Vec<FieldError>),
    /// A configuration file does not parse (its message names the file and line): the
    /// change is not written until root mends it.
    Broken(String),
    /// The configuration files could not be read or the drop-in written.
    Io(std::io::Error),
}

impl std::fmt::Display for SettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SettingsError::UnknownSection(s) => {
                write!(f, "no settings section {:?}", crate::text::for_log(s, 64))
            }
            SettingsError::Invalid(e) => {
                write!(f, "{} invalid setting(s); nothing written", e.len())
            }
            SettingsError::Broken(m) => write!(f, "a configuration file does not parse: {m}"),
            SettingsError::Io(e) => write!(f, "cannot write the settings: {e}"),
        }
    }
}

impl std::error::Error for SettingsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SettingsError::Io(e) => Some(e),
            _ => None,
        }
    }
}

fn is_setting(k: &Key) -> bool {
    !k.path.contains('[') && !k.path.contains('*') && !k.table().is_empty()
}

/// Every section, sorted.
pub fn sections() -> Vec<&'static str> {
    let mut s: Vec<&'static str> = KEYS
        .iter()
        .filter(|k| is_setting(k))
        .map(Key::table)
        .collect();
    s.sort_unstable();
    s.dedup();
    s
}

fn keys_of(section: &str) -> impl Iterator<Item = &'static Key> + '_ {
    KEYS.iter()
        .filter(move |k| is_setting(k) && k.table() == section)
}

fn lookup<'t>(table: &'t Table, path: &str) -> Option<&'t Value> {
    let mut parts = path.split('.');
    let mut cur = table.get(parts.next()?)?;
    for p in parts {
        cur = cur.as_table()?.get(p)?;
    }
    Some(cur)
}

fn to_json(v: &Value) -> Option<serde_json::Value> {
    serde_json::to_value(v).ok()
}

/// The settings of `section` as the files beside `main` have them.
pub fn view(main: &Path, section: &str) -> Result<Vec<Setting>, SettingsError> {
    let keys: Vec<&Key> = keys_of(section).collect();
    if keys.is_empty() {
        return Err(SettingsError::UnknownSection(section.to_string()));
    }
    let merged = merged(main, None)?;
    Ok(keys
        .into_iter()
        .map(|k| {
            let secret = SECRET_KEYS.contains(&k.path);
            let found = lookup(&merged, k.path);
            let default = k.default_value();
            let value = if secret {
                None
            } else {
                found
                    .cloned()
                    .or_else(|| default.clone())
                    .map(redact_userinfo)
            };
            Setting {
                key: k.name(),
                type_name: k.kind.type_name(),
                range: k.kind.range(),
                value: value.as_ref().and_then(to_json),
                default: if secret {
                    None
                } else {
                    default.as_ref().and_then(to_json)
                },
                set: found.is_some(),
                secret,
                file_only: k.file_only(),
                class: if k.class == Class::Live {
                    "live"
                } else {
                    "restart"
                },
                doc: k.doc,
            }
        })
        .collect())
}

static WRITES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Serialises settings changes: held by a caller across the read, edit and write of a
/// drop-in ([`apply`]) and the reload after it, so that concurrent saves do not lose each
/// other's keys.
pub fn write_lock() -> std::sync::MutexGuard<'static, ()> {
    WRITES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A URL's `user:pass@` is a secret: shown as `***@` (in a string or a list of strings).
fn redact_userinfo(v: Value) -> Value {
    match v {
        Value::String(s) => Value::String(redact_url(&s)),
        Value::Array(a) => Value::Array(a.into_iter().map(redact_userinfo).collect()),
        v => v,
    }
}

fn redact_url(s: &str) -> String {
    let Some((scheme, rest)) = s.split_once("://") else {
        return s.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => s.to_string(),
    }
}

/// The drop-in the API writes for `section`.
pub fn dropin_path(main: &Path, section: &str) -> PathBuf {
    main.parent()
        .unwrap_or(Path::new("."))
        .join("conf.d")
        .join(format!("{API_DROPIN_PREFIX}{section}.toml"))
}

fn io(e: std::io::Error) -> SettingsError {
    SettingsError::Io(e)
}

/// The main file and its drop-ins merged, with `replace` standing in for one drop-in's
/// content (added when that file does not exist yet).
fn merged(main: &Path, replace: Option<(&Path, &Table)>) -> Result<Table, SettingsError> {
    let mut files = vec![main.to_path_buf()];
    files.extend(super::dropins(main));
    if let Some((p, _)) = replace {
        if !files.iter().any(|f| f == p) {
            files.push(p.to_path_buf());
            files[1..].sort();
        }
    }
    let mut out = Table::new();
    for f in &files {
        let t = match replace {
            Some((p, t)) if p == f => t.clone(),
            _ => super::parse_file(f).map_err(|e| SettingsError::Broken(e.to_string()))?,
        };
        super::merge::merge_file(&mut out, f, t);
    }
    Ok(out)
}

/// Checks one value against its key's kind and range.
fn check_value(k: &Key, v: &Value) -> Result<(), String> {
    let ok = match (k.kind, v) {
        (Kind::Bool, Value::Boolean(_)) | (Kind::Str, Value::String(_)) => true,
        (Kind::Int(lo, hi), Value::Integer(n)) => {
            if *n < lo || *n > hi {
                return Err(format!("must be between {lo} and {hi}"));
            }
            true
        }
        (Kind::Choice(c), Value::String(s)) => {
            if !c.contains(&s.as_str()) {
                return Err(format!("must be one of {}", c.join(", ")));
            }
            true
        }
        (Kind::List, Value::Array(a)) => a.iter().all(Value::is_str),
        (Kind::Command, Value::String(_)) => true,
        (Kind::Command, Value::Array(a)) => a.iter().all(Value::is_str),
        (Kind::Ports, Value::Array(a)) => a.iter().all(|p| match p {
            Value::Integer(n) => (1..=65_535).contains(n),
            Value::String(s) => s.split_once('-').is_some(),
            _ => false,
        }),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("must be {}", with_article(k.kind.type_name())))
    }
}

fn with_article(t: &str) -> String {
    if t.starts_with(['a', 'e', 'i', 'o', 'u']) {
        format!("an {t}")
    } else {
        format!("a {t}")
    }
}

/// Validates `changes` (a flat JSON object of `section`'s keys), then writes them into the
/// section's API drop-in. Returns the drop-in's path and the changed keys that need a
/// restart. Callers that write concurrently hold [`write_lock`].
pub fn apply(
    main: &Path,
    section: &str,
    changes: &serde_json::Map<String, serde_json::Value>,
    starts: &dyn Fn(&super::Config) -> Vec<(String, String)>,
) -> Result<(PathBuf, Vec<&'static str>), SettingsError> {
    if keys_of(section).next().is_none() {
        return Err(SettingsError::UnknownSection(section.to_string()));
    }
    let mut errors = Vec::new();
    let mut values: Vec<(&'static Key, Value)> = Vec::new();
    if changes.is_empty() {
        errors.push(FieldError {
            field: String::new(),
            message: "no setting to change".into(),
        });
    }
    for (field, json) in changes {
        let fail = |m: String| FieldError {
            field: crate::text::for_log(field, 64),
            message: m,
        };
        let Some(k) = keys_of(section).find(|k| k.name() == field) else {
            errors.push(fail(format!("not a setting of {section}")));
            continue;
        };
        let v = match toml::Value::try_from(json) {
            Ok(v) => v,
            Err(_) => {
                errors.push(fail(
                    "null is not a value; remove the key from the file instead".into(),
                ));
                continue;
            }
        };
        if k.file_only() {
            errors.push(fail(format!(
                "{} names a program to run or a file to write: set it in svc.toml or a hand-written drop-in",
                k.path
            )));
            continue;
        }
        match check_value(k, &v) {
            Ok(()) => values.push((k, v)),
            Err(m) => errors.push(fail(m)),
        }
    }
    if !errors.is_empty() {
        return Err(SettingsError::Invalid(errors));
    }
    let path = dropin_path(main, section);
    let mut dropin = match super::parse_file(&path) {
        Ok(t) => t,
        Err(_) if !path.exists() => Table::new(),
        Err(e) => return Err(SettingsError::Broken(e.to_string())),
    };
    for (k, v) in &values {
        let mut cur = &mut dropin;
        for part in k.table().split('.') {
            let entry = cur
                .entry(part.to_string())
                .or_insert_with(|| Value::Table(Table::new()));
            if !entry.is_table() {
                *entry = Value::Table(Table::new());
            }
            let Value::Table(t) = entry else {
                unreachable!("made a table above")
            };
            cur = t;
        }
        cur.insert(k.name().to_string(), v.clone());
    }
    // The whole configuration must load with the change.
    let whole = merged(main, Some((&path, &dropin)))?;
    let prefix = format!("{section}.");
    let field = |key: &str| key.strip_prefix(&prefix).unwrap_or(key).to_string();
    let cfg = match super::from_table(&whole, Vec::new()) {
        Ok(cfg) => cfg,
        Err(errs) => {
            return Err(SettingsError::Invalid(
                errs.into_iter()
                    .map(|e| FieldError {
                        field: field(&e.key),
                        message: e.message,
                    })
                    .collect(),
            ))
        }
    };
    // And start with it (TLS pair, listen address): a restart must not end the daemon.
    let unstartable = starts(&cfg);
    if !unstartable.is_empty() {
        return Err(SettingsError::Invalid(
            unstartable
                .into_iter()
                .map(|(key, message)| FieldError {
                    field: field(&key),
                    message,
                })
                .collect(),
        ));
    }
    let text = toml::to_string(&dropin).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            e.to_string(),
        ))
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    if !dir.is_dir() {
        // Created when missing; an existing `conf.d` keeps the mode its operator gave it.
        crate::fsutil::ensure_dir(dir, 0o755).map_err(io)?;
    }
    let body =
        format!("# Written by svc through /api/v1/settings/{section}; edit with care.\n{text}");
    crate::fsutil::write_atomic(&path, body.as_bytes(), 0o600, None).map_err(io)?;
    let restart = values
        .iter()
        .filter(|(k, _)| k.class != Class::Live)
        .map(|(k, _)| k.path)
        .collect();
    Ok((path, restart))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_and_value_checks() {
        let s = sections();
        assert!(
            s.contains(&"alerts") && s.contains(&"webui.limits"),
            "{s:?}"
        );
        assert!(!s.iter().any(|s| s.contains('[') || s.is_empty()));
        let k = super::super::keys::find("alerts.max_per_hour").unwrap();
        assert!(check_value(k, &Value::Integer(77)).is_ok());
        assert!(check_value(k, &Value::Integer(0))
            .unwrap_err()
            .contains("between"));
        assert!(check_value(k, &Value::String("x".into()))
            .unwrap_err()
            .contains("an integer"));
    }

    fn temp_main(tag: &str, body: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("svc-dropins-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let main = dir.join("svc.toml");
        std::fs::write(&main, body).unwrap();
        main
    }

    fn obj(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn keys_that_run_programs_or_write_files_are_refused_and_shown_file_only() {
        let main = temp_main("fileonly", "");
        for (section, field) in [
            ("waf", "reload_command"),
            ("waf", "rules_file"),
            ("waf", "overrides_file"),
            ("challenge", "reload_command"),
            ("challenge", "apache_file"),
            ("firewall", "nft_path"),
        ] {
            let v = if field.ends_with("command") {
                serde_json::json!(["/bin/sh", "-c", "id > /tmp/x"])
            } else {
                serde_json::json!("/tmp/x")
            };
            match apply(
                &main,
                section,
                &obj(serde_json::json!({ field: v })),
                &|_| Vec::new(),
            ) {
                Err(SettingsError::Invalid(e)) => {
                    assert!(
                        e[0].message.contains(&format!("{section}.{field}")),
                        "{e:?}"
                    )
                }
                other => panic!("{section}.{field}: {other:?}"),
            }
            assert!(!dropin_path(&main, section).exists());
            let shown = view(&main, section).unwrap();
            assert!(shown.iter().any(|s| s.key == field && s.file_only));
        }
        for k in KEYS.iter().filter(|k| k.kind == Kind::Command) {
            assert!(k.file_only(), "{}", k.path);
        }
        for p in super::super::keys::FILE_ONLY {
            assert!(super::super::keys::find(p).is_some(), "{p}");
        }
    }

    #[test]
    fn userinfo_in_a_url_is_not_shown() {
        assert_eq!(
            redact_url("https://bob:hunter2@example.com/x@y"),
            "https://***@example.com/x@y"
        );
        assert_eq!(
            redact_url("https://example.com/a@b"),
            "https://example.com/a@b"
        );
        assert_eq!(redact_url("alice@example.com"), "alice@example.com");
    }

    #[test]
    fn a_posted_list_is_the_value_not_appended() {
        let main = temp_main("lists", "[threat]\nwatched_countries = [\"RU\"]\n");
        apply(
            &main,
            "threat",
            &obj(serde_json::json!({"watched_countries": ["CN"]})),
            &|_| Vec::new(),
        )
        .unwrap();
        let t = merged(&main, None).unwrap();
        assert_eq!(
            lookup(&t, "threat.watched_countries"),
            Some(&Value::Array(vec!["CN".into()]))
        );
        apply(
            &main,
            "threat",
            &obj(serde_json::json!({"watched_countries": []})),
            &|_| Vec::new(),
        )
        .unwrap();
        let (t, _) = super::super::read_merged(&main).unwrap();
        assert_eq!(
            lookup(&t, "threat.watched_countries"),
            Some(&Value::Array(vec![]))
        );
    }
}
