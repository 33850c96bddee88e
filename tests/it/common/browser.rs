//! Headless Chromium driven over its DevTools pipe (`--remote-debugging-pipe`: commands on
//! fd 3, answers on fd 4, JSON messages ended by a NUL byte). One driver for every browser
//! test: it attaches to the page, keeps the events the page reports (console, log,
//! exceptions, dialogs) and evaluates script, navigates and takes screenshots.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{wait_until, CHROMIUM_HEADLESS};

pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Whether Chromium is installed; without it a browser test prints why and returns (and
/// fails under `CI=true`).
pub fn chromium_present(what: &str) -> bool {
    if Path::new(CHROMIUM).exists() {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{what}: missing {CHROMIUM}");
    }
    eprintln!("skipping {what}: missing {CHROMIUM}");
    false
}

/// A headless Chromium, its DevTools pipe, and the events its targets sent.
pub struct Browser {
    child: Child,
    commands: std::fs::File,
    answers: mpsc::Receiver<Value>,
    events: Arc<parking_lot::Mutex<Vec<Value>>>,
    next_id: u64,
}

impl Browser {
    /// Starts Chromium on `url` with a fresh profile in `profile`.
    pub fn start(url: &str, profile: &Path) -> Browser {
        let (cmd_r, cmd_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (out_r, out_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (theirs_in, theirs_out) = (cmd_r.as_raw_fd(), out_w.as_raw_fd());
        let mut cmd = Command::new(CHROMIUM);
        cmd.args(CHROMIUM_HEADLESS)
            .args(["--remote-debugging-pipe"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork and exec, on
        // descriptors the parent keeps open until spawn returns. Both ends are first moved
        // above 4 (close-on-exec copies), so placing one on 3 never overwrites the other;
        // dup2 leaves 3 and 4 without close-on-exec, so Chromium inherits exactly those.
        unsafe {
            cmd.pre_exec(move || {
                let a = libc::fcntl(theirs_in, libc::F_DUPFD_CLOEXEC, 10);
                let b = libc::fcntl(theirs_out, libc::F_DUPFD_CLOEXEC, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("run chromium");
        drop(cmd_r);
        drop(out_w);
        let (tx, answers) = mpsc::channel();
        let events = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let kept = events.clone();
        let mut out = std::fs::File::from(out_r);
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 65536];
            while let Ok(n) = out.read(&mut chunk) {
                if n == 0 {
                    return;
                }
                buf.extend_from_slice(&chunk[..n]);
                while let Some(end) = buf.iter().position(|&b| b == 0) {
                    let msg: Vec<u8> = buf.drain(..=end).collect();
                    let Ok(v) = serde_json::from_slice::<Value>(&msg[..msg.len() - 1]) else {
                        continue;
                    };
                    if v.get("method").is_some() {
                        kept.lock().push(v);
                    } else if tx.send(v).is_err() {
                        return;
                    }
                }
            }
        });
        Browser {
            child,
            commands: std::fs::File::from(cmd_w),
            answers,
            events,
            next_id: 0,
        }
    }

    /// One DevTools command; its `result`, or its `error` as text.
    pub fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = s.into();
        }
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(0);
        self.commands.write_all(&bytes).expect("write to chromium");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .answers
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("chromium did not answer {method}"));
            if v["id"] == id {
                return match v.get("error") {
                    Some(e) => Err(e.to_string()),
                    None => Ok(v["result"].clone()),
                };
            }
        }
    }

    /// Attaches to the first page target; its session id.
    pub fn attach_page(&mut self) -> String {
        let target = wait_until(30, "the page target", || {
            let t = self.call(None, "Target.getTargets", json!({})).ok()?;
            t["targetInfos"]
                .as_array()?
                .iter()
                .find(|t| t["type"] == "page")
                .map(|t| t["targetId"].clone())
        });
        let attached = self
            .call(
                None,
                "Target.attachToTarget",
                json!({ "targetId": target, "flatten": true }),
            )
            .expect("attach");
        attached["sessionId"].as_str().unwrap().to_string()
    }

    /// Evaluates `expr` in the page; its value, or why not (e.g. mid-navigation).
    pub fn eval(&mut self, session: &str, expr: &str) -> Result<Value, String> {
        let r = self.call(
            Some(session),
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        )?;
        if let Some(e) = r.get("exceptionDetails") {
            return Err(e.to_string());
        }
        Ok(r["result"]["value"].clone())
    }

    /// Evaluates `expr` until `done` holds on its value (60 s at most); the last value.
    pub fn eval_until(
        &mut self,
        session: &str,
        expr: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = Value::Null;
        while Instant::now() < deadline {
            if let Ok(v) = self.eval(session, expr) {
                if done(&v) {
                    return v;
                }
                last = v;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        last
    }

    /// Loads `url` and waits until the document is complete at `path`.
    pub fn goto(&mut self, session: &str, url: &str, path: &str) {
        self.call(Some(session), "Page.navigate", json!({ "url": url }))
            .expect("navigate");
        let want = format!("complete|{path}");
        let got = self.eval_until(
            session,
            "document.readyState + '|' + location.pathname",
            |v| v == want.as_str(),
        );
        assert_eq!(got, want.as_str(), "loading {url}");
    }

    /// A PNG of the page at `width` x `height` (CSS pixels, scale 1), written to `file`.
    pub fn screenshot(&mut self, session: &str, width: u32, height: u32, file: &Path) {
        self.call(
            Some(session),
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600 }),
        )
        .expect("set the viewport");
        let shot = self
            .call(
                Some(session),
                "Page.captureScreenshot",
                json!({ "format": "png" }),
            )
            .expect("screenshot");
        use base64::Engine as _;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap_or_default())
            .expect("screenshot data");
        std::fs::write(file, png).unwrap();
    }

    /// The events received so far whose method is one of `methods`.
    pub fn events(&self, methods: &[&str]) -> Vec<Value> {
        self.events
            .lock()
            .iter()
            .filter(|e| methods.iter().any(|m| e["method"] == *m))
            .cloned()
            .collect()
    }

    /// Forgets the events received so far.
    pub fn clear_events(&self) {
        self.events.lock().clear();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
