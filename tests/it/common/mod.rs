//! Test harness: starts the real `svc` binary with a temp config on a free loopback port and
//! talks to it over real TLS, pinned to the certificate the daemon generated.
#![allow(
    clippy::disallowed_methods,
    reason = "test and benchmark fixtures are built with plain std::fs calls, as an attacker would"
)]

pub mod browser;
pub mod dnsserver;
pub mod mmdb;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};

pub const ADMIN: &str = "admin-token-0123456789abcdef";
pub const READ: &str = "read-token-0123456789abcdef";
pub const METRICS: &str = "metrics-token-0123456789abcdef";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Polls `f` every 50 ms until it returns `Some`, for at most `secs` seconds; panics naming
/// `what` (and the last value `f` saw, when it records one) when the time runs out. Tests
/// wait on progress this way, never on fixed sleeps.
pub fn wait_until<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The active findings of `check` (`/api/v1/findings`, first 10,000).
pub fn findings_of(d: &Daemon, check: &str) -> Vec<serde_json::Value> {
    let v = d
        .get("/api/v1/findings?limit=10000", READ)
        .expect(200)
        .json();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == check)
        .cloned()
        .collect()
}

/// A fresh directory for one test. Kept after the run (a failure can be read there); the
/// first call of a run removes those of earlier runs whose process is gone.
pub fn temp_dir(tag: &str) -> PathBuf {
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(remove_dirs_of_finished_runs);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("svc-it-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Removes `svc-it-<tag>-<pid>-<n>` directories whose process no longer runs (a run with a
/// 100,000-row history leaves tens of MiB; thousands of runs filled /tmp).
fn remove_dirs_of_finished_runs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("svc-it-") else {
            continue;
        };
        let mut parts = rest.rsplitn(3, '-');
        let (_n, pid) = (parts.next(), parts.next());
        let Some(pid) = pid.and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The `[probes]` table of [`base_config`]: kernel probes see every process of the host, so
/// only tests/it/probes.rs (which replaces this table) starts them.
pub const PROBES_OFF: &str = "[probes]\nbackends = []\n";

/// A config for a test daemon. The firewall engine is off: tests run as root, and only
/// tests that create their own network namespace (tests/it/firewall.rs) may touch nftables.
/// The kernel probes are off ([`PROBES_OFF`]).
pub fn base_config(state: &Path) -> String {
    format!(
        "state_path = {state:?}\n\n{PROBES_OFF}\n[firewall]\nenabled = false\n\n[webui]\nlisten = \"127.0.0.1:0\"\nmetrics_token = {METRICS:?}\n\n[[webui.tokens]]\nname = \"ops-admin\"\ntoken = {ADMIN:?}\nscope = \"admin\"\n\n[[webui.tokens]]\nname = \"dash-read\"\ntoken = {READ:?}\nscope = \"read\"\n",
        state = state.display().to_string()
    )
}

/// Starts a daemon in `dir` on the base config plus `extra` (`dir/svc.toml`, state in
/// `dir/state`), with `env` for the daemon.
pub fn start_in_dir(dir: PathBuf, extra: &str, env: &[(&str, &str)]) -> Daemon {
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    std::fs::write(&config, format!("{}{extra}", base_config(&state))).unwrap();
    Daemon::start_with(dir, config, state, env)
}

pub fn svc_bin() -> &'static str {
    env!("CARGO_BIN_EXE_svc")
}

/// The certificate (DER) a daemon generated in its state directory `state`.
pub fn state_cert(state: &Path) -> Vec<u8> {
    let pem = std::fs::read(state.join("tls/cert.pem")).unwrap();
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .unwrap();
    certs[0].as_ref().to_vec()
}

/// A loopback HTTP/1.1 server for the rest of the test: each request's target goes to
/// `answer`, which gives the status line (`"200 OK"`) and a JSON body; one request per
/// connection.
pub fn json_server(answer: impl Fn(&str) -> (&'static str, String) + Send + 'static) -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut first = String::new();
            let _ = r.read_line(&mut first);
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
            }
            let (status, body) = answer(first.split_whitespace().nth(1).unwrap_or(""));
            let mut s = s;
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    addr
}

pub struct Daemon {
    pub dir: PathBuf,
    pub config: PathBuf,
    pub state: PathBuf,
    pub addr: SocketAddr,
    child: Option<Child>,
    stdout_lines: Arc<parking_lot::Mutex<Vec<String>>>,
}

impl Daemon {
    /// Starts a daemon with the base config plus `extra` TOML appended.
    pub fn start(tag: &str, extra: &str) -> Daemon {
        let dir = temp_dir(tag);
        let state = dir.join("state");
        let config = dir.join("svc.toml");
        std::fs::write(&config, format!("{}{extra}", base_config(&state))).unwrap();
        Daemon::start_with(dir, config, state, &[])
    }

    /// Starts the binary on an existing config file.
    pub fn start_with(
        dir: PathBuf,
        config: PathBuf,
        state: PathBuf,
        env: &[(&str, &str)],
    ) -> Daemon {
        let mut cmd = Command::new(svc_bin());
        cmd.arg("daemon")
            .arg("-c")
            .arg(&config)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start svc");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    // Stored before it is announced, so a test that saw the daemon start
                    // also sees the line in `stdout()`.
                    lines.lock().push(line.clone());
                    let _ = tx.send(line);
                }
            });
        }
        {
            let log = dir.join("stderr.log");
            std::thread::spawn(move || {
                let mut f = std::fs::File::create(log).unwrap();
                let _ = std::io::copy(&mut BufReader::new(stderr), &mut f);
            });
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let addr = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.split("listening on https://").nth(1) {
                        let a = rest.split_whitespace().next().unwrap();
                        break a.parse::<SocketAddr>().unwrap();
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let err = std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default();
                    panic!("daemon did not start: {err}");
                }
            }
        };
        Daemon {
            dir,
            config,
            state,
            addr,
            child: Some(child),
            stdout_lines: lines,
        }
    }

    pub fn cert(&self) -> Vec<u8> {
        state_cert(&self.state)
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr, self.cert())
    }

    /// One request on a fresh connection.
    pub fn req(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        self.client().send(method, path, headers, body)
    }

    pub fn get(&self, path: &str, token: &str) -> Resp {
        let auth = format!("Bearer {token}");
        self.req("GET", path, &[("Authorization", &auth)], b"")
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGTERM and wait; returns the exit code.
    pub fn stop(&mut self) -> i32 {
        let mut child = self.child.take().expect("running");
        unsafe_free_kill(child.id(), "TERM");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("daemon did not stop after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL and wait.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("running");
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Lines the daemon printed on standard output so far.
    pub fn stdout(&self) -> Vec<String> {
        self.stdout_lines.lock().clone()
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
    }

    /// Runs the svc CLI with this daemon's config.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        let mut full: Vec<&str> = args.to_vec();
        let c = self.config.to_str().unwrap();
        full.push("-c");
        full.push(c);
        Command::new(svc_bin()).args(&full).output().unwrap()
    }
}

fn unsafe_free_kill(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[derive(Debug)]
struct Pinned {
    cert: Vec<u8>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.cert.as_slice() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "certificate does not match the pinned one".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

pub fn client_config(cert: Vec<u8>) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned { cert, provider }))
        .with_no_client_auth();
    Arc::new(cfg)
}

#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Asserts the status and that a non-2xx body is JSON with a string `error`.
    pub fn expect(&self, status: u16) -> &Resp {
        assert_eq!(self.status, status, "body: {}", self.text());
        if !(200..300).contains(&status) {
            let v = self.json();
            assert!(
                v["error"].is_string(),
                "non-2xx without JSON error: {}",
                self.text()
            );
        }
        self
    }
}

pub struct Client {
    pub stream: StreamOwned<ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr, cert: Vec<u8>) -> Client {
        Client::from_tcp(TcpStream::connect(addr).unwrap(), cert)
    }

    /// A TLS client over an already connected socket (e.g. one with socket options set
    /// before connecting).
    pub fn from_tcp(tcp: TcpStream, cert: Vec<u8>) -> Client {
        tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let conn = ClientConnection::new(
            client_config(cert),
            ServerName::try_from("localhost").unwrap(),
        )
        .unwrap();
        Client {
            stream: StreamOwned::new(conn, tcp),
            buf: Vec::new(),
        }
    }

    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Resp {
        self.write_request(method, path, headers, body);
        self.read_response()
    }

    pub fn write_request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
        let mut has_len = false;
        for (k, v) in headers {
            if k.eq_ignore_ascii_case("content-length") {
                has_len = true;
            }
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if !body.is_empty() && !has_len {
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        self.stream.write_all(&bytes).unwrap();
        self.stream.flush().unwrap();
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 16384];
        match self.stream.read(&mut chunk) {
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                n
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => 0,
            Err(e) => panic!("read failed: {e}"),
        }
    }

    /// Reads the response head only (for streams).
    pub fn read_head(&mut self) -> Resp {
        loop {
            let mut hs = [httparse::EMPTY_HEADER; 64];
            let mut r = httparse::Response::new(&mut hs);
            if let httparse::Status::Complete(n) = r.parse(&self.buf).unwrap() {
                let resp = Resp {
                    status: r.code.unwrap(),
                    headers: r
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_string(),
                                String::from_utf8_lossy(h.value).into_owned(),
                            )
                        })
                        .collect(),
                    body: Vec::new(),
                };
                self.buf.drain(..n);
                return resp;
            }
            if self.fill() == 0 {
                panic!("connection closed before a response head");
            }
        }
    }

    pub fn read_response(&mut self) -> Resp {
        let mut resp = self.read_head();
        let len: usize = resp
            .header("content-length")
            .map(|v| v.parse().unwrap())
            .unwrap_or(0);
        while self.buf.len() < len {
            if self.fill() == 0 {
                panic!("connection closed mid-body");
            }
        }
        resp.body = self.buf.drain(..len).collect();
        resp
    }

    /// Reads whatever arrives until `pred` holds on the accumulated text (streams).
    /// Gives up after [`READ_UNTIL_LIMIT`] even while bytes keep arriving (a stream's
    /// keep-alive comments would otherwise hold a failing test forever); the caller's
    /// assertions then report what did arrive.
    pub fn read_until(&mut self, pred: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let text = String::from_utf8_lossy(&self.buf).into_owned();
            if pred(&text) || started.elapsed() > READ_UNTIL_LIMIT {
                return text;
            }
            if self.fill() == 0 {
                return text;
            }
        }
    }
}

/// Longest [`Client::read_until`] waits for its predicate.
pub const READ_UNTIL_LIMIT: Duration = Duration::from_secs(180);

/// Logs in with a token; returns (cookie value, csrf token).
pub fn login(d: &Daemon, token: &str) -> (String, String) {
    let body = format!("token={token}");
    let r = d.req(
        "POST",
        "/login",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        body.as_bytes(),
    );
    assert_eq!(r.status, 303, "login: {}", r.text());
    let set = r.header("set-cookie").unwrap().to_string();
    assert!(
        set.contains("HttpOnly")
            && set.contains("Secure")
            && set.contains("SameSite=Strict")
            && set.contains("Path=/")
    );
    let cookie = set
        .split(';')
        .next()
        .unwrap()
        .strip_prefix("svc_auth=")
        .unwrap()
        .to_string();
    let page = d.req(
        "GET",
        "/",
        &[("Cookie", &format!("svc_auth={cookie}"))],
        b"",
    );
    assert_eq!(page.status, 200);
    let html = page.text();
    let csrf = html
        .split("<meta name=\"csrf-token\" content=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    (cookie, csrf)
}

/// Appends `lines` to a log (made when missing) and syncs it, as a logging program would.
pub fn append_lines(log: &Path, lines: &[String]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
        .unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
    f.sync_all().unwrap();
}

/// Headless Chromium as root on this machine, with no network of its own: the flags every
/// browser test starts it with (a test adds its profile, mode and URL).
pub const CHROMIUM_HEADLESS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--ignore-certificate-errors",
];

/// A deflated zip of `files`.
pub fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    use std::io::Write;
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opt = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (n, d) in files {
            z.start_file(*n, opt).unwrap();
            z.write_all(d).unwrap();
        }
        z.finish().unwrap();
    }
    buf.into_inner()
}
