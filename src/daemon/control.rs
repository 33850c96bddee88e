//! Control socket `{state_path}/svc.sock` (mode 0600): one JSON request line, one JSON
//! answer line. Used by `svc status`, `svc doctor` and friends.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

/// Answers one command; `None` for an unknown command.
pub type CommandFn = dyn Fn(&str, &Value) -> Option<Value> + Send + Sync;

/// Control clients served at once; more get an error answer.
const MAX_CLIENTS: usize = 16;

/// Largest request line accepted.
const MAX_REQUEST: usize = 64 * 1024;

pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControlServer {
    /// Binds the socket (replacing a stale one) and serves commands on a thread.
    pub fn start(path: &Path, handler: Arc<CommandFn>) -> io::Result<ControlServer> {
        if path.exists() {
            // A live daemon answers; a stale socket file is replaced.
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "{} is in use: is another svc daemon running?",
                        path.display()
                    ),
                ));
            }
            crate::fsutil::remove_daemon_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        crate::fsutil::set_daemon_mode(path, 0o600)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                let active = Arc::new(AtomicUsize::new(0));
                // Poll with a timeout rather than block in accept: stopping must not depend
                // on reaching the socket path (it may have been removed).
                while !stop2.load(Ordering::SeqCst) {
                    match crate::sys::poll::poll_readable(
                        &[listener.as_fd()],
                        Duration::from_millis(200),
                    ) {
                        Ok(ready) if ready.first().copied().unwrap_or(false) => {}
                        Ok(_) => continue,
                        Err(_) => {
                            std::thread::sleep(Duration::from_millis(50));
                            continue;
                        }
                    }
                    let Ok((mut conn, _)) = listener.accept() else {
                        continue;
                    };
                    if active.load(Ordering::SeqCst) >= MAX_CLIENTS {
                        let _ = writeln!(
                            conn,
                            "{}",
                            json!({ "error": "too many control clients; try again" })
                        );
                        continue;
                    }
                    active.fetch_add(1, Ordering::SeqCst);
                    let (h, a) = (handler.clone(), active.clone());
                    let spawned = std::thread::Builder::new()
                        .name("control-conn".into())
                        .spawn(move || {
                            serve(conn, &*h);
                            a.fetch_sub(1, Ordering::SeqCst);
                        });
                    if spawned.is_err() {
                        active.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            })?;
        Ok(ControlServer {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }

    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = crate::fsutil::remove_daemon_file(&self.path);
    }
}

fn serve(conn: UnixStream, handler: &CommandFn) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    });
    let mut line = String::new();
    let answer = match reader
        .by_ref()
        .take(MAX_REQUEST as u64)
        .read_line(&mut line)
    {
        Ok(_) => match serde_json::from_str::<Value>(&line) {
            Ok(req) => {
                let cmd = req.get("command").and_then(Value::as_str).unwrap_or("");
                handler(cmd, &req)
                    .unwrap_or_else(|| json!({ "error": format!("unknown command {cmd:?}") }))
            }
            Err(e) => json!({ "error": format!("invalid request: {e}") }),
        },
        Err(e) => json!({ "error": format!("cannot read request: {e}") }),
    };
    let mut w = conn;
    let _ = writeln!(w, "{answer}");
}
