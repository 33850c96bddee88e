//! The last configuration that started (issue 35 item 6).
//!
//! Every daemon that comes up (not `--dev`) keeps the merged configuration it started with
//! in `{state_path}/last-started.toml` (0600: it holds the tokens; written atomically). A
//! restart through `POST /api/v1/settings/restart` hands the re-executed process that file's
//! path; when that process then fails to start (the route checked what it could, but a
//! listen address taken meanwhile, a database file gone, ...), it logs why and executes the
//! daemon once more on the saved file, which shows the fallback as a fault (`faults` of
//! `/api/v1/health` and `/api/v1/status`) until the operator fixes the configuration and
//! restarts. Only
//! one fallback is tried: the process started on the saved file hands nothing on.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The saved configuration, in the state directory.
pub const FILE: &str = "last-started.toml";

/// The saved file a restarted process falls back to (set for the re-executed process only).
const ENV_SNAPSHOT: &str = "SVC_RESTART_FALLBACK";
/// Why this process runs on the saved file (set by the fallback for its process only).
const ENV_REASON: &str = "SVC_STARTED_WITH_FALLBACK";

/// The saved file of this process, once it has started.
static SAVED: OnceLock<PathBuf> = OnceLock::new();

/// Keeps the configuration `main` makes (with its drop-ins) as the last that started.
pub fn save(main: &Path, state: &Path) {
    let path = state.join(FILE);
    let text = match crate::config::merged_text(main) {
        Ok(t) => t,
        Err(errs) => {
            log::warn!(
                "the configuration that started is not kept for a fallback: {}",
                crate::config::ConfigErrors(errs)
            );
            return;
        }
    };
    match crate::fsutil::write_atomic(&path, text.as_bytes(), 0o600, None) {
        Ok(()) => {
            let _ = SAVED.set(path);
        }
        Err(e) => log::warn!(
            "the configuration that started is not kept for a fallback ({}): {e}",
            path.display()
        ),
    }
}

/// The environment a restart hands the re-executed process: the saved file to fall back to
/// (when one was saved), and no fallback reason of this process.
pub fn restart_env(cmd: &mut std::process::Command) {
    cmd.env_remove(ENV_REASON);
    match SAVED.get() {
        Some(p) => cmd.env(ENV_SNAPSHOT, p),
        None => cmd.env_remove(ENV_SNAPSHOT),
    };
}

/// Why this process runs on the last configuration that started, if it does.
pub fn reason() -> Option<String> {
    std::env::var(ENV_REASON).ok().filter(|r| !r.is_empty())
}

/// After a failed start: when this process was restarted through the API and has a saved
/// file to fall back to, executes the daemon on it (returns only when that fails);
/// otherwise `None`.
pub fn fall_back(why: &str) -> Option<std::io::Error> {
    use std::os::unix::process::CommandExt;
    let snapshot = std::env::var_os(ENV_SNAPSHOT).filter(|p| !p.is_empty())?;
    if !Path::new(&snapshot).is_file() {
        return None;
    }
    // One line, bounded: the reason is shown as a fault.
    let why = crate::text::cut(&crate::text::escape_controls(why), 500).into_owned();
    log::error!(
        "the restarted daemon did not start ({why}); starting again on the last configuration that started, {}",
        Path::new(&snapshot).display()
    );
    let err = std::process::Command::new("/proc/self/exe")
        .args([
            OsString::from("daemon"),
            OsString::from("--config"),
            snapshot,
        ])
        .env_remove(ENV_SNAPSHOT)
        .env(ENV_REASON, why)
        .exec();
    Some(err)
}
