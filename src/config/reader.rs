//! Typed reading of a merged TOML tree with key-exact error messages.
//!
//! Each key is read exactly once through a [`TableReader`]; keys that were never read are
//! reported as unknown by [`TableReader::finish`]. Errors name the full dotted key, with list
//! indexes, e.g. `webui.tokens[1].scope: must be "admin" or "read"`. Defaults, ranges and
//! choices come from [`super::keys::KEYS`]: a read site names only the key.

use toml::value::Table;
use toml::Value;

use super::keys::{self, Kind};

#[cfg(test)]
thread_local! {
    /// Every key path a reader asked for on this thread (tests compare it with `KEYS`).
    pub(crate) static ASKED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// One configuration error, naming its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// Every error of one configuration, shown one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl std::fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Collects errors while reading.
#[derive(Debug, Default)]
pub struct Errors(pub Vec<ConfigError>);

impl Errors {
    /// `message` is any error or text: what follows the key in the error line.
    pub fn push(&mut self, key: impl Into<String>, message: impl std::fmt::Display) {
        self.0.push(ConfigError {
            key: key.into(),
            message: message.to_string(),
        });
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// `must be "a", "b" or "c"`.
pub fn choice_message(choices: &[&str]) -> String {
    let quoted: Vec<String> = choices.iter().map(|c| format!("{c:?}")).collect();
    match quoted.split_last() {
        Some((last, [])) => format!("must be {last}"),
        Some((last, rest)) => format!("must be {} or {last}", rest.join(", ")),
        None => "must be set".to_string(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a datetime",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

/// Reads the keys of one table, remembering which were consumed.
pub struct TableReader<'a> {
    table: Option<&'a Table>,
    prefix: String,
    seen: Vec<&'a str>,
}

impl<'a> TableReader<'a> {
    pub fn new(table: Option<&'a Table>, prefix: impl Into<String>) -> Self {
        TableReader {
            table,
            prefix: prefix.into(),
            seen: Vec::new(),
        }
    }

    /// True when the table has `key` (without consuming it).
    pub fn has(&self, key: &str) -> bool {
        self.table.is_some_and(|t| t.contains_key(key))
    }

    pub fn key(&self, key: &str) -> String {
        join(&self.prefix, key)
    }

    /// The table entry of `key`; a key missing from [`keys::KEYS`] is a bug the key-table
    /// test catches (release builds read it with no default and no range).
    fn spec(&self, key: &str) -> Option<&'static keys::Key> {
        let found = keys::find(&self.key(key));
        debug_assert!(
            found.is_some(),
            "{} is not in config::keys::KEYS",
            self.key(key)
        );
        found
    }

    fn default_of(&self, key: &str) -> Option<Value> {
        self.spec(key).and_then(keys::Key::default_value)
    }

    fn get(&mut self, key: &'a str) -> Option<&'a Value> {
        #[cfg(test)]
        ASKED.with(|a| a.borrow_mut().push(keys::normalize(&self.key(key))));
        let table = self.table?;
        let (k, v) = table.get_key_value(key)?;
        self.seen.push(k.as_str());
        Some(v)
    }

    /// The raw value of `key` (consumed), for kinds the typed readers do not cover.
    pub fn raw(&mut self, key: &'a str) -> Option<&'a Value> {
        self.get(key)
    }

    /// The raw value of `key`, or its default from the table when absent.
    pub fn raw_or_default(&mut self, key: &'a str) -> Option<Value> {
        match self.get(key) {
            Some(v) => Some(v.clone()),
            None => self.default_of(key),
        }
    }

    /// A string (the table's default when absent, empty when it has none); a
    /// [`Kind::Choice`] key must be one of its choices (and set when it has no default).
    pub fn string(&mut self, key: &'a str, errs: &mut Errors) -> String {
        let default = match self.default_of(key) {
            Some(Value::String(s)) => s,
            _ => String::new(),
        };
        let choices = match self.spec(key).map(|k| k.kind) {
            Some(Kind::Choice(c)) => Some(c),
            _ => None,
        };
        let v = match self.get(key) {
            // A choice without a default must be set.
            None if default.is_empty() && choices.is_some() => String::new(),
            None => return default,
            Some(Value::String(s)) => s.clone(),
            Some(v) => {
                errs.push(
                    self.key(key),
                    format!("must be a string, found {}", type_name(v)),
                );
                return default;
            }
        };
        if let Some(choices) = choices {
            if !choices.contains(&v.as_str()) {
                errs.push(self.key(key), choice_message(choices));
                return default;
            }
        }
        if let Err(m) = keys::check_path(&self.key(key), &v) {
            errs.push(self.key(key), m);
            return default;
        }
        v
    }

    pub fn bool(&mut self, key: &'a str, errs: &mut Errors) -> bool {
        let default = matches!(self.default_of(key), Some(Value::Boolean(true)));
        match self.get(key) {
            None => default,
            Some(Value::Boolean(b)) => *b,
            Some(v) => {
                errs.push(
                    self.key(key),
                    format!("must be a boolean, found {}", type_name(v)),
                );
                default
            }
        }
    }

    /// An integer within the key's range.
    pub fn int(&mut self, key: &'a str, errs: &mut Errors) -> i64 {
        let spec = self.spec(key);
        let default = spec
            .and_then(keys::Key::default_value)
            .and_then(|v| v.as_integer())
            .unwrap_or(0);
        let (min, max) = match spec.map(|k| k.kind) {
            Some(Kind::Int(lo, hi)) => (lo, hi),
            _ => (i64::MIN, i64::MAX),
        };
        match self.get(key) {
            None => default,
            Some(Value::Integer(i)) if (min..=max).contains(i) => *i,
            Some(Value::Integer(i)) => {
                errs.push(
                    self.key(key),
                    format!("must be between {min} and {max}, found {i}"),
                );
                default
            }
            Some(v) => {
                errs.push(
                    self.key(key),
                    format!("must be an integer, found {}", type_name(v)),
                );
                default
            }
        }
    }

    pub fn string_list(&mut self, key: &'a str, errs: &mut Errors) -> Vec<String> {
        let default: Vec<String> = match self.default_of(key) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        match self.get(key) {
            None => default,
            Some(Value::Array(items)) => {
                let full = self.key(key);
                if keys::is_path_list(&full) && items.len() > keys::MAX_PATH_ENTRIES {
                    errs.push(
                        full,
                        format!("must have at most {} entries", keys::MAX_PATH_ENTRIES),
                    );
                    return default;
                }
                let mut out = Vec::with_capacity(items.len().min(keys::MAX_PATH_ENTRIES));
                for (i, item) in items.iter().enumerate() {
                    match item {
                        // A path named twice is one path (a log followed twice would count
                        // every line twice).
                        Value::String(s) => match keys::check_path(&full, s) {
                            Ok(()) if keys::is_path_list(&full) && out.contains(s) => {}
                            Ok(()) => out.push(s.clone()),
                            Err(m) => errs.push(format!("{full}[{i}]"), m),
                        },
                        v => errs.push(
                            format!("{}[{i}]", self.key(key)),
                            format!("must be a string, found {}", type_name(v)),
                        ),
                    }
                }
                out
            }
            Some(v) => {
                errs.push(
                    self.key(key),
                    format!("must be an array of strings, found {}", type_name(v)),
                );
                default
            }
        }
    }

    /// A sub-table; absent gives an empty reader.
    pub fn table(&mut self, key: &'a str, errs: &mut Errors) -> TableReader<'a> {
        let prefix = self.key(key);
        match self.get(key) {
            Some(Value::Table(t)) => TableReader::new(Some(t), prefix),
            None => TableReader::new(None, prefix),
            Some(v) => {
                errs.push(
                    prefix.clone(),
                    format!("must be a table, found {}", type_name(v)),
                );
                TableReader::new(None, prefix)
            }
        }
    }

    /// An array of tables (`[[key]]`); each element gets its own reader named `key[i]`.
    pub fn table_list(&mut self, key: &'a str, errs: &mut Errors) -> Vec<TableReader<'a>> {
        let prefix = self.key(key);
        match self.get(key) {
            None => Vec::new(),
            Some(Value::Array(items)) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let p = format!("{prefix}[{i}]");
                    match item {
                        Value::Table(t) => out.push(TableReader::new(Some(t), p)),
                        v => errs.push(p, format!("must be a table, found {}", type_name(v))),
                    }
                }
                out
            }
            Some(v) => {
                errs.push(
                    prefix,
                    format!("must be an array of tables, found {}", type_name(v)),
                );
                Vec::new()
            }
        }
    }

    /// Reports every key of this table that was not read.
    pub fn finish(self, errs: &mut Errors) {
        if let Some(t) = self.table {
            for k in t.keys() {
                if !self.seen.contains(&k.as_str()) {
                    errs.push(join(&self.prefix, k), "unknown key");
                }
            }
        }
    }
}
