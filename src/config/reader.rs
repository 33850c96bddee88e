//! Typed reading of a merged TOML tree with key-exact error messages.
//!
//! Each key is read exactly once through a [`TableReader`]; keys that were never read are
//! reported as unknown by [`TableReader::finish`]. Errors name the full dotted key, with list
//! indexes, e.g. `webui.tokens[1].scope: must be "admin" or "read"`.

use toml::value::Table;
use toml::Value;

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

/// Collects errors while reading.
#[derive(Debug, Default)]
pub struct Errors(pub Vec<ConfigError>);

impl Errors {
    pub fn push(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigError {
            key: key.into(),
            message: message.into(),
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

    fn get(&mut self, key: &'a str) -> Option<&'a Value> {
        let table = self.table?;
        let (k, v) = table.get_key_value(key)?;
        self.seen.push(k.as_str());
        Some(v)
    }

    /// The raw value of `key` (consumed), for kinds the typed readers do not cover.
    pub fn raw(&mut self, key: &'a str) -> Option<&'a Value> {
        self.get(key)
    }

    pub fn string(&mut self, key: &'a str, default: &str, errs: &mut Errors) -> String {
        match self.get(key) {
            None => default.to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(v) => {
                errs.push(
                    self.key(key),
                    format!("must be a string, found {}", type_name(v)),
                );
                default.to_string()
            }
        }
    }

    pub fn bool(&mut self, key: &'a str, default: bool, errs: &mut Errors) -> bool {
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

    /// An integer within `min..=max`.
    pub fn int(
        &mut self,
        key: &'a str,
        default: i64,
        min: i64,
        max: i64,
        errs: &mut Errors,
    ) -> i64 {
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

    pub fn string_list(
        &mut self,
        key: &'a str,
        default: &[&str],
        errs: &mut Errors,
    ) -> Vec<String> {
        match self.get(key) {
            None => default.iter().map(|s| s.to_string()).collect(),
            Some(Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::String(s) => out.push(s.clone()),
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
                default.iter().map(|s| s.to_string()).collect()
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
