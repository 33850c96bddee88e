//! Starts the collectors the configuration asks for, each on its own thread with its own
//! queue row, and stops them at shutdown.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};

use super::analyzer::{Analyzer, Restored};
use super::authlog::{AuthCollector, AuthThresholds};
use super::files::{BackendChoice, FileEvent, FileWatcher, WatchOptions};
use crate::api::App;
use crate::clock::SharedClock;
use crate::components::Components;
use crate::config::Config;
use crate::findings::Engine;
use crate::queue::{BoundedQueue, Registry, RowConfig, RowHandle};
use crate::scan::signatures::SignatureSet;
use crate::store::Store;

/// Waiting file events the analyzer holds.
pub const ANALYZER_CAPACITY: u64 = 4096;

/// Running collectors.
pub struct Collectors {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    file_watcher: Option<FileWatcher>,
    queues: Vec<BoundedQueue<FileEvent>>,
    _rows: Vec<RowHandle>,
    /// The authentication-log collector (its own thread, row and stop).
    auth: Option<AuthCollector>,
    /// Files restored from quarantine (shared with the restore command).
    pub restored: Arc<Restored>,
}

impl Collectors {
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(a) = &self.auth {
            a.request_stop();
        }
        if let Some(mut w) = self.file_watcher.take() {
            w.stop();
        }
        for q in &self.queues {
            q.close();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Some(a) = self.auth.take() {
            a.stop();
        }
    }
}

/// Starts the file watcher with its analyzer and the authentication-log watcher.
pub fn start_collectors(
    cfg: &Config,
    clock: SharedClock,
    engine: &Arc<Engine>,
    registry: &Arc<Registry>,
    components: &Arc<Components>,
    store: &Store,
) -> Result<Collectors, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut c = Collectors {
        stop: stop.clone(),
        threads: Vec::new(),
        file_watcher: None,
        queues: Vec::new(),
        _rows: Vec::new(),
        auth: None,
        restored: Arc::new(Restored::load(store)),
    };
    let e = &cfg.engine;

    if !e.watch_roots.is_empty() {
        let signatures =
            Arc::new(SignatureSet::shipped().map_err(|err| format!("shipped signatures: {err}"))?);
        let queue: BoundedQueue<FileEvent> = BoundedQueue::new(
            clock.clone(),
            RowConfig::new("files")
                .capacity(ANALYZER_CAPACITY)
                .running_slots(1),
        )
        .map_err(|err| format!("fanotify.analyzer: {err:?}"))?;
        c._rows.push(
            registry
                .register("fanotify.analyzer", queue.health().clone())
                .map_err(|err| format!("{err:?}"))?,
        );
        let (tx, rx) = crossbeam_channel::bounded::<FileEvent>(1024);
        let mut opts = WatchOptions::new(tx, clock.clone());
        opts.backend = e
            .watch_backend
            .parse::<BackendChoice>()
            .unwrap_or(BackendChoice::Auto);
        // The daemon's own writes (quarantine copies, TLS files) are never analysed; the rest
        // of the state directory may hold a watched root (`--dev` watches `.svc-dev/www`).
        opts.excluded_dirs = vec![
            cfg.state_path.join("quarantine"),
            cfg.state_path.join("tls"),
        ];
        let watcher = FileWatcher::start(e.watch_roots.clone(), opts)
            .map_err(|err| format!("file watcher: {err}"))?;
        let component = components.add("files", "file_watcher");
        component.attached.store(true, Ordering::Relaxed);
        component.set_detail(format!(
            "{} on {}",
            watcher.description(),
            e.watch_roots
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        log::info!("file watcher: {}", watcher.description());
        let counters = watcher.counters();
        // Forward watcher events into the instrumented analyzer queue; refusals are losses.
        let fwd_q = queue.clone();
        let fwd_stop = stop.clone();
        c.threads.push(
            std::thread::Builder::new()
                .name("files-forward".into())
                .spawn(move || {
                    let mut seen_drops = 0u64;
                    while !fwd_stop.load(Ordering::SeqCst) {
                        if let Ok(ev) = rx.recv_timeout(Duration::from_millis(250)) {
                            let _ = fwd_q.try_push(ev);
                        }
                        // Events the watcher could not hand over are losses of this row too.
                        let drops = counters.dropped.load(Ordering::Relaxed);
                        if drops > seen_drops {
                            fwd_q.health().record_losses(drops - seen_drops);
                            seen_drops = drops;
                        }
                    }
                })
                .map_err(|err| err.to_string())?,
        );
        let analyzer = Analyzer::new(
            signatures,
            engine.clone(),
            store.clone(),
            clock.clone(),
            cfg.state_path.join("quarantine"),
            e.auto_quarantine,
            component,
            c.restored.clone(),
        );
        let aq = queue.clone();
        let astop = stop.clone();
        c.threads.push(
            std::thread::Builder::new()
                .name("files-analyzer".into())
                .spawn(move || analyzer.run(aq, astop))
                .map_err(|err| err.to_string())?,
        );
        c.queues.push(queue);
        c.file_watcher = Some(watcher);
    }

    if !e.auth_logs.is_empty() {
        let thresholds = AuthThresholds {
            failures: e.auth_failures,
            window_secs: e.auth_window_seconds,
            max_tracked_addresses: e.auth_max_tracked_addresses,
            max_known_logins: e.auth_max_known_logins,
            new_address_mail: e.auth_new_address_mail,
        };
        c.auth = Some(
            AuthCollector::start(
                &e.auth_logs,
                thresholds,
                clock.clone(),
                engine,
                registry,
                components,
                store,
            )
            .map_err(|err| err.to_string())?,
        );
    }
    Ok(c)
}

/// Control-socket commands of the collectors (`quarantine.list`, `quarantine.restore`).
pub fn control_command(app: &App, cmd: &str, args: &Value) -> Option<Value> {
    match cmd {
        "quarantine.list" => Some(match app.store.read(crate::store::quarantine::list) {
            Ok(items) => json!({ "items": items, "total": items.len() }),
            Err(e) => json!({ "error": format!("cannot read quarantine: {e}") }),
        }),
        "quarantine.restore" => {
            let id = args
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            Some(restore(app, &id))
        }
        _ => None,
    }
}

/// Puts a quarantined file back exactly (path, owner, mode, mtime) and records it.
pub fn restore(app: &App, id: &str) -> Value {
    let entry = match app.store.read(|c| crate::store::quarantine::get(c, id)) {
        Ok(Some(e)) => e,
        Ok(None) => return json!({ "error": format!("no quarantine entry {id:?}") }),
        Err(e) => return json!({ "error": format!("cannot read quarantine: {e}") }),
    };
    if entry.restored_at.is_some() {
        return json!({ "error": format!("{id} was already restored") });
    }
    let record: crate::scan::quarantine::QuarantineRecord =
        match serde_json::from_value(entry.record.clone()) {
            Ok(r) => r,
            Err(e) => {
                return json!({ "error": format!("quarantine record {id} is unreadable: {e}") })
            }
        };
    let qdir = app.cfg.state_path.join("quarantine");
    // Trust this content at this path before it reappears, so the watcher leaves it alone.
    if let Ok(p) = record.original_path_buf() {
        app.services.restored.add(p, record.sha256.clone());
    }
    if let Err(e) = crate::scan::quarantine::restore(&record, &qdir) {
        return json!({ "error": format!("cannot restore {}: {e}", entry.original_path) });
    }
    let now = app.clock.now();
    let idc = id.to_string();
    if let Err(e) = app
        .store
        .write(move |c| crate::store::quarantine::mark_restored(c, &idc, now))
    {
        log::warn!("restored {id} but could not record it: {e}");
    }
    json!({ "ok": true, "id": id, "original_path": entry.original_path })
}
