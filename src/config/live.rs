//! The configuration in effect, and which keys a reload cannot apply.
//!
//! Guarantees:
//! - [`Live::current`] is the last configuration a reload accepted (or the start-up one): a
//!   reader gets one whole configuration, never a mix of two.
//! - Keys whose class in [`super::keys::KEYS`] is not live are read once at start. A reload that changes one applies
//!   everything else, names the key in its answer and in [`Live::restart_required`], and the
//!   running daemon keeps the start-up value until it restarts.
//! - Reads take a short read lock only; nothing here touches a file.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use super::keys::{Key, KEYS};
use super::Config;

/// The value at a key's path in `root`: `name[]` stands for the whole array, `*` for the
/// whole table; absent keys take their default.
fn value_at(root: &toml::value::Table, key: &Key) -> Option<toml::Value> {
    let mut table = root;
    let mut segments = key.path.split('.').peekable();
    while let Some(seg) = segments.next() {
        if seg == "*" {
            return Some(toml::Value::Table(table.clone()));
        }
        if let Some(list) = seg.strip_suffix("[]") {
            return table.get(list).cloned();
        }
        match (table.get(seg), segments.peek()) {
            (None, _) => return key.default_value(),
            (Some(v), None) => return Some(v.clone()),
            (Some(toml::Value::Table(t)), Some(_)) => table = t,
            (Some(v), Some(_)) => return Some(v.clone()),
        }
    }
    key.default_value()
}

/// The value of every key whose class is not live, by the name a reload reports.
pub(super) fn restart_values(
    root: &toml::value::Table,
) -> Vec<(&'static str, Option<toml::Value>)> {
    KEYS.iter()
        .filter_map(|k| {
            let name = k.restart_name()?;
            let v = value_at(root, k);
            // A secret is kept as its digest: a change is still seen, the value never
            // reaches `Debug` output.
            let v = if super::dropins::SECRET_KEYS.contains(&k.path) {
                v.map(|v| {
                    use sha2::Digest;
                    toml::Value::String(hex::encode(sha2::Sha256::digest(v.to_string())))
                })
            } else {
                v
            };
            Some((name, v))
        })
        .collect()
}

/// Restart keys (by the name a reload reports, a group once) whose value differs between
/// `running` (what the process started with) and `next`, in table order.
pub fn restart_required(running: &Config, next: &Config) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for (a, b) in running.restart_values.iter().zip(&next.restart_values) {
        if a != b && !out.contains(&a.0) {
            out.push(a.0);
        }
    }
    out
}

/// The state directory a configuration names, read leniently: `svc reload` must reach the
/// daemon to report errors even when the new configuration is invalid. Files that do not
/// parse are skipped; `None` when no file names an absolute `state_path`.
pub fn state_path_hint(main: &std::path::Path) -> Option<std::path::PathBuf> {
    let mut files = vec![main.to_path_buf()];
    files.extend(super::dropins(main));
    let mut found = None;
    for f in files {
        if let Ok(t) = super::parse_file(&f) {
            if let Some(toml::Value::String(p)) = t.get("state_path") {
                if p.starts_with('/') {
                    found = Some(std::path::PathBuf::from(p));
                }
            }
        }
    }
    found
}

/// The configuration in effect, swapped as a whole by a reload.
pub struct Live {
    started: Arc<Config>,
    current: RwLock<Arc<Config>>,
    restart_required: RwLock<Vec<&'static str>>,
    reloads: AtomicU64,
    refused: AtomicU64,
}

impl Live {
    pub fn new(started: Arc<Config>) -> Live {
        Live {
            current: RwLock::new(started.clone()),
            started,
            restart_required: RwLock::new(Vec::new()),
            reloads: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// The configuration the process started with (restart keys are in effect from it).
    pub fn started(&self) -> &Arc<Config> {
        &self.started
    }

    /// The last accepted configuration.
    pub fn current(&self) -> Arc<Config> {
        self.current.read().clone()
    }

    /// SHA-256 of the last accepted configuration (status `config_hash`).
    pub fn hash(&self) -> String {
        self.current.read().hash.clone()
    }

    /// Restart keys the last accepted configuration changed (empty when none).
    pub fn restart_required(&self) -> Vec<&'static str> {
        self.restart_required.read().clone()
    }

    /// Records an accepted reload.
    pub fn accept(&self, next: Arc<Config>) {
        let pending = restart_required(&self.started, &next);
        *self.current.write() = next;
        *self.restart_required.write() = pending;
        self.reloads.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a refused reload (invalid configuration, or one that could not be applied).
    pub fn refuse(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// (accepted, refused) reloads since start.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.reloads.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{from_table, parse_str};

    fn cfg(text: &str) -> Config {
        from_table(&parse_str(text).unwrap(), vec![]).unwrap()
    }

    #[test]
    fn restart_keys_are_reported_against_the_start_up_configuration() {
        let a = Arc::new(cfg("[webui]\nlisten = \"127.0.0.1:1\"\n"));
        let live = Live::new(a.clone());
        assert_eq!(live.hash(), a.hash);
        let b = Arc::new(cfg(
            "[webui]\nlisten = \"127.0.0.1:2\"\n[webui.limits]\nmax_headers = 32\n[thresholds]\nauth_failures = 9\n",
        ));
        live.accept(b.clone());
        assert_eq!(live.restart_required(), ["webui.listen", "webui.limits.*"]);
        assert_eq!(live.hash(), b.hash);
        // Going back to the start-up value clears it: the running daemon has that value.
        live.accept(Arc::new(cfg(
            "[thresholds]\nauth_failures = 9\n[webui]\nlisten = \"127.0.0.1:1\"\n",
        )));
        assert!(live.restart_required().is_empty());
        live.refuse();
        assert_eq!(live.counts(), (2, 1));
    }
}
