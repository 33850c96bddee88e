//! Rule management: the set of disabled svc rules, written as `SecRuleRemoveById` lines to
//! `waf.overrides_file`, applied with one run of `waf.reload_command`.
//!
//! Guarantees:
//! - [`apply`] refuses (and changes nothing) when one of the three `waf.*` keys is unset or
//!   an id is not a rule of the loaded set, naming the id.
//! - The overrides file is written atomically (mode 0644: the web server reads it), then
//!   the set is stored, then the reload command runs once, without a shell, with its
//!   output captured (at most [`MAX_OUTPUT`] bytes kept) and a deadline
//!   (`waf.reload_timeout_seconds`; the process is killed when it passes).
//! - The caller waits at most `answer_wait` for the reload; a longer one goes on after the
//!   answer ([`ApplyOutcome::Pending`]) and its result is recorded in [`ReloadState`].

use std::collections::BTreeSet;
use std::io::{self, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::config::waf::WafConfig;
use crate::store::StoreError;

/// Output of a reload kept (bytes of stdout and stderr together).
pub const MAX_OUTPUT: usize = 4096;

/// The result of the last reload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReloadState {
    /// A reload is running.
    pub running: bool,
    /// The last finished reload succeeded (`None`: none ran since start).
    pub ok: Option<bool>,
    /// Its exit status or the reason it failed, and its output.
    pub detail: String,
    /// The disabled set the web server runs with (after the last successful reload);
    /// `None` until one succeeded.
    pub applied: Option<BTreeSet<u32>>,
}

/// Why an apply was refused or failed.
#[derive(Debug)]
pub enum ApplyError {
    /// Rule management is not configured: the keys named are unset.
    NotConfigured(Vec<&'static str>),
    /// An id outside the loaded rules.
    UnknownRule(u32),
    /// The overrides file could not be written.
    Write { path: PathBuf, cause: io::Error },
    /// The disabled set could not be stored.
    Store(StoreError),
    /// The reload failed (the overrides file and the stored set are written).
    Reload(String),
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApplyError::NotConfigured(keys) => write!(
                f,
                "rule management is not configured: set {}",
                keys.join(", ")
            ),
            ApplyError::UnknownRule(id) => write!(f, "rule {id} is not a loaded rule"),
            ApplyError::Write { path, cause } => write!(
                f,
                "cannot write the overrides file: {}: {cause}",
                crate::text::escape_path(path)
            ),
            ApplyError::Store(e) => write!(f, "cannot write the overrides file: store: {e}"),
            ApplyError::Reload(e) => write!(f, "the web-server reload failed: {e}"),
        }
    }
}

impl std::error::Error for ApplyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ApplyError::Write { cause, .. } => Some(cause),
            ApplyError::Store(e) => Some(e),
            _ => None,
        }
    }
}

/// What an apply did.
#[derive(Debug, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// Written and reloaded.
    Reloaded,
    /// Written; the reload is still running.
    Pending,
}

/// The overrides file's text for `disabled`.
pub fn overrides_text(disabled: &BTreeSet<u32>) -> String {
    let mut s = String::from(
        "# Written by svc (POST /api/v1/waf/rules/apply); do not edit: the next apply replaces it.\n# Include it after every rule file.\n",
    );
    for id in disabled {
        s.push_str(&format!("SecRuleRemoveById {id}\n"));
    }
    s
}

/// Checks and writes `disabled`, then reloads (see the module documentation). `known`
/// says whether an id is a loaded rule; `store_set` persists the set.
pub fn apply(
    cfg: &WafConfig,
    disabled: &BTreeSet<u32>,
    known: impl Fn(u32) -> bool,
    store_set: impl FnOnce(&BTreeSet<u32>) -> Result<(), StoreError>,
    state: &Arc<Mutex<ReloadState>>,
    answer_wait: Duration,
) -> Result<ApplyOutcome, ApplyError> {
    let missing = cfg.management_missing();
    if !missing.is_empty() {
        return Err(ApplyError::NotConfigured(missing));
    }
    if let Some(&bad) = disabled.iter().find(|&&id| !known(id)) {
        return Err(ApplyError::UnknownRule(bad));
    }
    let Some(path) = &cfg.overrides_file else {
        return Err(ApplyError::NotConfigured(vec!["waf.overrides_file"]));
    };
    crate::fsutil::write_atomic(path, overrides_text(disabled).as_bytes(), 0o644, None).map_err(
        |cause| ApplyError::Write {
            path: path.clone(),
            cause,
        },
    )?;
    store_set(disabled).map_err(ApplyError::Store)?;
    run_reload(
        &cfg.reload_command,
        Duration::from_secs(cfg.reload_timeout_seconds),
        disabled.clone(),
        state,
        answer_wait,
    )
}

/// Runs the reload on its own thread; waits for it at most `answer_wait`.
pub fn run_reload(
    argv: &[String],
    deadline: Duration,
    set: BTreeSet<u32>,
    state: &Arc<Mutex<ReloadState>>,
    answer_wait: Duration,
) -> Result<ApplyOutcome, ApplyError> {
    let Some((prog, args)) = argv.split_first() else {
        return Err(ApplyError::NotConfigured(vec!["waf.reload_command"]));
    };
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            let msg = format!("{}: {e}", crate::text::escape_controls(prog));
            record(state, false, msg.clone(), None);
            ApplyError::Reload(msg)
        })?;
    state.lock().running = true;
    let (tx, rx) = crossbeam_channel::bounded(1);
    let st = state.clone();
    let spawned = std::thread::Builder::new()
        .name("waf-reload".into())
        .spawn(move || {
            let started = Instant::now();
            let mut out = Vec::new();
            // Output is read after exit or kill; a command that fills the pipe and waits is
            // killed at the deadline like a hung one.
            let status = loop {
                match child.try_wait() {
                    Ok(Some(s)) => break Ok(s),
                    Ok(None) if started.elapsed() >= deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break Err(format!("timed out after {} s", deadline.as_secs()));
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                    Err(e) => break Err(e.to_string()),
                }
            };
            for p in [
                child.stdout.take().map(|s| Box::new(s) as Box<dyn Read>),
                child.stderr.take().map(|s| Box::new(s) as Box<dyn Read>),
            ]
            .into_iter()
            .flatten()
            {
                let mut buf = Vec::new();
                let _ = p.take(MAX_OUTPUT as u64).read_to_end(&mut buf);
                out.extend_from_slice(&buf);
            }
            out.truncate(MAX_OUTPUT);
            let text =
                crate::text::escape_controls(String::from_utf8_lossy(&out).trim()).into_owned();
            let result = match status {
                Ok(s) if s.success() => Ok(()),
                Ok(s) => Err(format!("{s}: {text}")),
                Err(e) => Err(format!("{e}: {text}")),
            };
            match &result {
                Ok(()) => record(&st, true, text, Some(set)),
                Err(e) => {
                    log::warn!("WAF reload failed: {e}");
                    record(&st, false, e.clone(), None)
                }
            }
            let _ = tx.send(result);
        });
    if let Err(e) = spawned {
        record(state, false, e.to_string(), None);
        return Err(ApplyError::Reload(e.to_string()));
    }
    match rx.recv_timeout(answer_wait) {
        Ok(Ok(())) => Ok(ApplyOutcome::Reloaded),
        Ok(Err(e)) => Err(ApplyError::Reload(e)),
        Err(_) => Ok(ApplyOutcome::Pending),
    }
}

fn record(state: &Mutex<ReloadState>, ok: bool, detail: String, set: Option<BTreeSet<u32>>) {
    super::detect::set_reload_failure((!ok).then(|| detail.clone()));
    let mut s = state.lock();
    s.running = false;
    s.ok = Some(ok);
    s.detail = detail;
    if let Some(set) = set {
        s.applied = Some(set);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn cfg(dir: &std::path::Path, cmd: &[&str]) -> WafConfig {
        WafConfig {
            rules_file: Some(dir.join("rules.conf")),
            overrides_file: Some(dir.join("overrides.conf")),
            reload_command: cmd.iter().map(|s| s.to_string()).collect(),
            reload_timeout_seconds: 5,
            ..WafConfig::default()
        }
    }

    #[test]
    fn apply_writes_reloads_and_refuses_unknown_ids() {
        let d = crate::watch::tail::testutil::TempDir::new("waf-rules");
        let marker: PathBuf = d.path().join("reloaded");
        let script = format!("echo reloading; touch {}", marker.display());
        let c = cfg(d.path(), &["/bin/sh", "-c", &script]);
        let state = Arc::new(Mutex::new(ReloadState::default()));
        let set: BTreeSet<u32> = [900112, 900109].into();
        let stored = Mutex::new(None);
        let out = apply(
            &c,
            &set,
            |id| (900000..=900999).contains(&id),
            |s| {
                *stored.lock() = Some(s.clone());
                Ok(())
            },
            &state,
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(out, ApplyOutcome::Reloaded);
        assert!(marker.exists());
        let text = std::fs::read_to_string(d.path().join("overrides.conf")).unwrap();
        assert!(text.contains("SecRuleRemoveById 900109\nSecRuleRemoveById 900112\n"));
        assert_eq!(stored.lock().clone(), Some(set.clone()));
        let s = state.lock().clone();
        assert_eq!((s.ok, s.applied.clone()), (Some(true), Some(set)));
        assert_eq!(s.detail, "reloading");

        let bad: BTreeSet<u32> = [900112, 12].into();
        let e = apply(
            &c,
            &bad,
            |id| id >= 900000,
            |_| Ok(()),
            &state,
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(e, ApplyError::UnknownRule(12)), "{e}");
        assert!(e.to_string().contains("12"));
    }

    #[test]
    fn unconfigured_failing_and_slow_reloads() {
        let d = crate::watch::tail::testutil::TempDir::new("waf-rules2");
        let state = Arc::new(Mutex::new(ReloadState::default()));
        let e = apply(
            &WafConfig::default(),
            &BTreeSet::new(),
            |_| true,
            |_| Ok(()),
            &state,
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(e, ApplyError::NotConfigured(ref k) if k.len() == 3));

        let c = cfg(
            d.path(),
            &["/bin/sh", "-c", "echo broken config >&2; exit 3"],
        );
        let e = apply(
            &c,
            &BTreeSet::new(),
            |_| true,
            |_| Ok(()),
            &state,
            Duration::from_secs(10),
        )
        .unwrap_err();
        assert!(e.to_string().contains("broken config"), "{e}");
        assert_eq!(state.lock().ok, Some(false));

        let c = cfg(d.path(), &["/bin/sh", "-c", "sleep 1"]);
        let out = apply(
            &c,
            &BTreeSet::new(),
            |_| true,
            |_| Ok(()),
            &state,
            Duration::ZERO,
        )
        .unwrap();
        assert_eq!(out, ApplyOutcome::Pending);
        // The reload goes on after the answer and records its result.
        let started = Instant::now();
        while state.lock().running && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(state.lock().ok, Some(true));
    }
}
