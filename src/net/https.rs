//! Outbound HTTP for the remote verdict sources and threat feeds.
//!
//! Guarantees:
//! - URLs are checked at configuration load: `https://`, or `http://` to a loopback address
//!   only (`config::alerts::validate_webhook_url`). Redirects are not followed (RDAP, whose
//!   bootstrap service redirects, follows up to three, `https://` only).
//! - One deadline per request (`reputation.timeout_seconds`) covers connect, send and the
//!   whole answer; answers are read up to a size cap, a longer one is an error.
//! - TLS uses rustls with the built-in Mozilla roots, or only the PEM roots of
//!   `reputation.ca_file` when set. Loopback destinations bypass any proxy.
//! - Error texts never contain the URL (it may carry a secret) or a header value.

use std::sync::Arc;
use std::time::Duration;

use ureq::tls::{Certificate, RootCerts, TlsConfig};

/// Roots for outbound TLS: the built-in ones, or the certificates of a PEM file.
#[derive(Clone, Default)]
pub struct Roots(Option<Arc<Vec<Certificate<'static>>>>);

impl std::fmt::Debug for Roots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => f.write_str("Roots(webpki)"),
            Some(c) => write!(f, "Roots({} from ca_file)", c.len()),
        }
    }
}

/// Why `reputation.ca_file` could not be used.
#[derive(Debug)]
pub enum RootsError {
    /// The file could not be read.
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// A PEM block did not decode.
    NotPem {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// The file holds no certificate.
    Empty { path: std::path::PathBuf },
}

impl std::fmt::Display for RootsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RootsError::Read { path, source } => {
                write!(f, "reputation.ca_file {}: {source}", path.display())
            }
            RootsError::NotPem { path, source } => {
                write!(
                    f,
                    "reputation.ca_file {}: not PEM: {source}",
                    path.display()
                )
            }
            RootsError::Empty { path } => write!(
                f,
                "reputation.ca_file {}: no certificate found",
                path.display()
            ),
        }
    }
}

impl std::error::Error for RootsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RootsError::Read { source, .. } | RootsError::NotPem { source, .. } => Some(source),
            RootsError::Empty { .. } => None,
        }
    }
}

impl Roots {
    /// Reads `path` (PEM certificates); `None` uses the built-in roots.
    pub fn load(path: Option<&std::path::Path>) -> Result<Roots, RootsError> {
        let Some(path) = path else {
            return Ok(Roots(None));
        };
        let pem = crate::fsutil::read_daemon_file(path).map_err(|source| RootsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut certs = Vec::new();
        for item in rustls_pemfile::certs(&mut pem.as_slice()) {
            let der = item.map_err(|source| RootsError::NotPem {
                path: path.to_path_buf(),
                source,
            })?;
            certs.push(Certificate::from_der(der.as_ref()).to_owned());
        }
        if certs.is_empty() {
            return Err(RootsError::Empty {
                path: path.to_path_buf(),
            });
        }
        Ok(Roots(Some(Arc::new(certs))))
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    /// Connect, TLS, send or read failed, or the deadline passed.
    Transport(String),
    /// The answer exceeded the size cap.
    TooLarge(u64),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Transport(m) => f.write_str(m),
            FetchError::TooLarge(n) => write!(f, "the answer is larger than {n} bytes"),
        }
    }
}

impl std::error::Error for FetchError {}

/// An answer: status, body, and `Retry-After` in seconds when sent as a number.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub status: u16,
    pub body: Vec<u8>,
    pub retry_after: Option<u64>,
}

/// A client for one destination.
pub struct Client {
    agent: ureq::Agent,
    cap: u64,
}

fn is_loopback_url(url: &str) -> bool {
    let Ok(uri) = url.parse::<ureq::http::Uri>() else {
        return false;
    };
    let host = uri
        .host()
        .unwrap_or("")
        .trim_start_matches('[')
        .trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl Client {
    /// A client for `url` (used for its proxy decision) with a deadline, answer cap and
    /// redirect count.
    pub fn new(url: &str, roots: &Roots, timeout: Duration, cap: u64, redirects: u32) -> Client {
        let mut tls = TlsConfig::builder();
        if let Some(c) = &roots.0 {
            tls = tls.root_certs(RootCerts::Specific(c.clone()));
        }
        let mut b = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .max_redirects(redirects)
            .https_only(redirects > 0 && !is_loopback_url(url))
            .http_status_as_error(false)
            .tls_config(tls.build())
            .user_agent(format!("svc/{}", env!("CARGO_PKG_VERSION")));
        if is_loopback_url(url) {
            b = b.proxy(None);
        }
        Client {
            agent: b.build().into(),
            cap,
        }
    }

    /// GET `url` with `headers`.
    pub fn get(&self, url: &str, headers: &[(&str, &str)]) -> Result<Fetched, FetchError> {
        let mut req = self.agent.get(url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.call().map_err(|e| scrub(url, e))?;
        self.answer(url, resp)
    }

    /// POST `body` to `url` with `headers` (abuse reports).
    pub fn post(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Fetched, FetchError> {
        let mut req = self.agent.post(url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send(body).map_err(|e| scrub(url, e))?;
        self.answer(url, resp)
    }

    fn answer(
        &self,
        url: &str,
        mut resp: ureq::http::Response<ureq::Body>,
    ) -> Result<Fetched, FetchError> {
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let body = resp
            .body_mut()
            .with_config()
            .limit(self.cap)
            .read_to_vec()
            .map_err(|e| match e {
                ureq::Error::BodyExceedsLimit(_) => FetchError::TooLarge(self.cap),
                e => scrub(url, e),
            })?;
        Ok(Fetched {
            status,
            body,
            retry_after,
        })
    }
}

fn scrub(url: &str, e: ureq::Error) -> FetchError {
    let msg = e.to_string().replace(url, "<url>");
    FetchError::Transport(crate::text::for_log(&msg, 200).to_string())
}

/// Test support: a loopback HTTP or HTTPS server whose answers a closure gives.
#[cfg(test)]
pub mod testsrv {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use parking_lot::Mutex;

    /// One request as the server saw it.
    #[derive(Clone, Debug)]
    pub struct Seen {
        pub path: String,
        pub headers: Vec<(String, String)>,
        /// The request body (`Content-Length` bytes).
        pub body: Vec<u8>,
    }

    impl Seen {
        pub fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }
    }

    /// (status, extra headers, body).
    pub type Reply = (u16, Vec<(String, String)>, Vec<u8>);
    type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

    pub struct Server {
        pub addr: SocketAddr,
        pub requests: Arc<AtomicU64>,
        pub seen: Arc<Mutex<Vec<Seen>>>,
        /// PEM of the test CA (HTTPS servers).
        pub ca_pem: Option<String>,
        stop: Arc<AtomicBool>,
    }

    impl Server {
        /// Plain HTTP on 127.0.0.1.
        pub fn http(h: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Server {
            Server::start(Arc::new(h), None)
        }

        /// HTTPS on 127.0.0.1 with a certificate for `localhost` and `127.0.0.1` signed by
        /// a fresh test CA ([`Server::ca_pem`]).
        pub fn https(h: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Server {
            let ca_key = rcgen::KeyPair::generate().unwrap();
            let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            ca_params
                .distinguished_name
                .push(rcgen::DnType::CommonName, "svc test CA");
            let ca = ca_params.self_signed(&ca_key).unwrap();
            let leaf_key = rcgen::KeyPair::generate().unwrap();
            let leaf_params = rcgen::CertificateParams::new(vec![
                "localhost".to_string(),
                "127.0.0.1".to_string(),
            ])
            .unwrap();
            let leaf = leaf_params.signed_by(&leaf_key, &ca, &ca_key).unwrap();
            let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
            )
            .unwrap();
            let mut s = Server::start(Arc::new(h), Some(Arc::new(cfg)));
            s.ca_pem = Some(ca.pem());
            s
        }

        fn start(h: Handler, tls: Option<Arc<rustls::ServerConfig>>) -> Server {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.set_nonblocking(true).unwrap();
            let addr = l.local_addr().unwrap();
            let requests = Arc::new(AtomicU64::new(0));
            let seen = Arc::new(Mutex::new(Vec::new()));
            let stop = Arc::new(AtomicBool::new(false));
            {
                let (requests, seen, stop) = (requests.clone(), seen.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        match l.accept() {
                            Ok((s, _)) => {
                                let (h, tls, requests, seen) =
                                    (h.clone(), tls.clone(), requests.clone(), seen.clone());
                                std::thread::spawn(move || {
                                    let _ = s.set_nonblocking(false);
                                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                                    serve(s, tls, &*h, &requests, &seen);
                                });
                            }
                            Err(_) => std::thread::sleep(Duration::from_millis(2)),
                        }
                    }
                });
            }
            Server {
                addr,
                requests,
                seen,
                ca_pem: None,
                stop,
            }
        }

        pub fn url(&self, path: &str) -> String {
            let scheme = if self.ca_pem.is_some() {
                "https"
            } else {
                "http"
            };
            let host = if self.ca_pem.is_some() {
                format!("localhost:{}", self.addr.port())
            } else {
                self.addr.to_string()
            };
            format!("{scheme}://{host}{path}")
        }

        pub fn count(&self) -> u64 {
            self.requests.load(Ordering::SeqCst)
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
        }
    }

    fn serve(
        s: TcpStream,
        tls: Option<Arc<rustls::ServerConfig>>,
        h: &(dyn Fn(&Seen) -> Reply + Send + Sync),
        requests: &AtomicU64,
        seen: &Mutex<Vec<Seen>>,
    ) {
        match tls {
            Some(cfg) => {
                let Ok(conn) = rustls::ServerConnection::new(cfg) else {
                    return;
                };
                let stream = rustls::StreamOwned::new(conn, s);
                exchange(stream, h, requests, seen);
            }
            None => exchange(s, h, requests, seen),
        }
    }

    fn exchange<S: Read + Write>(
        s: S,
        h: &(dyn Fn(&Seen) -> Reply + Send + Sync),
        requests: &AtomicU64,
        seen: &Mutex<Vec<Seen>>,
    ) {
        let mut r = BufReader::new(s);
        let mut line = String::new();
        if r.read_line(&mut line).is_err() || line.is_empty() {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut headers = Vec::new();
        loop {
            let mut l = String::new();
            if r.read_line(&mut l).is_err() {
                return;
            }
            let l = l.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let len = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(0)
            .min(1 << 20);
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let req = Seen {
            path,
            headers,
            body,
        };
        requests.fetch_add(1, Ordering::SeqCst);
        seen.lock().push(req.clone());
        let (status, extra, body) = h(&req);
        let mut head = format!(
            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let s = r.get_mut();
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(&body);
        let _ = s.flush();
    }

    /// Writes the server's CA to a file for `reputation.ca_file`.
    pub fn write_ca(s: &Server, dir: &std::path::Path) -> std::path::PathBuf {
        let p = dir.join("ca.pem");
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(&p, s.ca_pem.as_ref().unwrap()).unwrap();
        p
    }
}

#[cfg(test)]
mod tests {
    use super::testsrv::Server;
    use super::*;

    #[test]
    fn https_with_a_test_ca_and_caps() {
        let s = Server::https(|_| (200, vec![], b"hello".to_vec()));
        let dir = std::env::temp_dir().join(format!("svc-threat-http-{}", std::process::id()));
        let ca = testsrv::write_ca(&s, &dir);
        let roots = Roots::load(Some(&ca)).unwrap();
        let url = s.url("/x");
        let c = Client::new(&url, &roots, Duration::from_secs(5), 1024, 0);
        let f = c.get(&url, &[("X-Key", "secret")]).unwrap();
        assert_eq!((f.status, f.body.as_slice()), (200, &b"hello"[..]));
        assert_eq!(s.seen.lock()[0].header("x-key"), Some("secret"));
        // The built-in roots do not trust the test CA.
        let c = Client::new(&url, &Roots::default(), Duration::from_secs(5), 1024, 0);
        let e = c.get(&url, &[]).unwrap_err();
        assert!(!e.to_string().contains(&url), "{e}");
        // Over the cap.
        let c = Client::new(&url, &roots, Duration::from_secs(5), 3, 0);
        assert_eq!(c.get(&url, &[]).unwrap_err(), FetchError::TooLarge(3));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn retry_after_is_read() {
        let s = Server::http(|_| (429, vec![("Retry-After".into(), "120".into())], vec![]));
        let url = s.url("/");
        let c = Client::new(&url, &Roots::default(), Duration::from_secs(5), 1024, 0);
        let f = c.get(&url, &[]).unwrap();
        assert_eq!((f.status, f.retry_after), (429, Some(120)));
    }
}
