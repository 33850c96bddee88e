//! [`Registry`]: the named rows that `status.queues`, `svc status --json` and `svc doctor`
//! read.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::health::QueueHealth;
use super::row::Row;
use super::types::Status;

/// Named health rows. A row exists only while its [`RowHandle`] lives, so inactive
/// subsystems have no row.
///
/// Guarantees: the map lock is held only to insert, remove or copy the list of rows; it is
/// never held while a row is read, and no producer or consumer takes it. Reading rows touches
/// atomics only, so [`snapshot`](Self::snapshot) never waits for queue work.
pub struct Registry {
    rows: Mutex<BTreeMap<String, Arc<QueueHealth>>>,
    max_rows: usize,
    refused: AtomicU64,
}

/// Why a row was not registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterError {
    /// A row of that name is already registered.
    Duplicate(String),
    /// Names are 1-96 characters of `a-z`, `0-9`, `.`, `_`, `-`.
    InvalidName(String),
    /// The registry already holds its maximum number of rows.
    Full { max_rows: usize },
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::Duplicate(n) => write!(f, "queue row {n:?} is already registered"),
            RegisterError::InvalidName(n) => write!(f, "invalid queue row name {n:?}"),
            RegisterError::Full { max_rows } => {
                write!(f, "queue registry is full ({max_rows} rows)")
            }
        }
    }
}

impl std::error::Error for RegisterError {}

fn valid_name(name: &str) -> bool {
    (1..=96).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
}

impl Registry {
    /// Default bound on the number of rows.
    pub const DEFAULT_MAX_ROWS: usize = 1024;

    /// An empty registry holding at most [`Self::DEFAULT_MAX_ROWS`] rows.
    pub fn new() -> Arc<Registry> {
        Self::with_max_rows(Self::DEFAULT_MAX_ROWS)
    }

    /// An empty registry holding at most `max_rows` rows.
    pub fn with_max_rows(max_rows: usize) -> Arc<Registry> {
        Arc::new(Registry {
            rows: Mutex::new(BTreeMap::new()),
            max_rows,
            refused: AtomicU64::new(0),
        })
    }

    /// Adds a row; it is removed when the returned handle drops. Refusals are counted
    /// ([`refused_registrations`](Self::refused_registrations)).
    pub fn register(
        self: &Arc<Self>,
        name: impl Into<String>,
        health: Arc<QueueHealth>,
    ) -> Result<RowHandle, RegisterError> {
        let name = name.into();
        let result = self.insert(&name, &health);
        if result.is_err() {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        result.map(|()| RowHandle {
            registry: Arc::clone(self),
            name,
            health,
        })
    }

    fn insert(&self, name: &str, health: &Arc<QueueHealth>) -> Result<(), RegisterError> {
        if !valid_name(name) {
            return Err(RegisterError::InvalidName(name.chars().take(96).collect()));
        }
        let mut rows = self.rows.lock();
        if rows.contains_key(name) {
            return Err(RegisterError::Duplicate(name.to_string()));
        }
        if rows.len() >= self.max_rows {
            return Err(RegisterError::Full {
                max_rows: self.max_rows,
            });
        }
        rows.insert(name.to_string(), Arc::clone(health));
        Ok(())
    }

    /// Registrations refused (duplicate, invalid name, full) since creation.
    pub fn refused_registrations(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.lock().len()
    }

    /// Whether no row is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn rows(&self) -> Vec<(String, Arc<QueueHealth>)> {
        self.rows
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect()
    }

    /// Every row, by name. Reads atomics only (the map lock is released before any row is
    /// read).
    pub fn snapshot(&self) -> BTreeMap<String, Row> {
        self.rows()
            .into_iter()
            .map(|(name, h)| (name, h.snapshot()))
            .collect()
    }

    /// The worst status over all rows (`ok` when there are none).
    pub fn worst_status(&self) -> Status {
        self.rows()
            .iter()
            .map(|(_, h)| h.snapshot().status)
            .max()
            .unwrap_or(Status::Ok)
    }
}

/// Keeps a row registered; dropping it removes the row.
pub struct RowHandle {
    registry: Arc<Registry>,
    name: String,
    health: Arc<QueueHealth>,
}

impl RowHandle {
    /// The row's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The row's health.
    pub fn health(&self) -> &Arc<QueueHealth> {
        &self.health
    }
}

impl fmt::Debug for RowHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowHandle")
            .field("name", &self.name)
            .finish()
    }
}

impl Drop for RowHandle {
    fn drop(&mut self) {
        let mut rows = self.registry.rows.lock();
        if rows
            .get(&self.name)
            .is_some_and(|h| Arc::ptr_eq(h, &self.health))
        {
            rows.remove(&self.name);
        }
    }
}
