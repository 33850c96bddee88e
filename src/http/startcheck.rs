//! What a start needs beyond a configuration that loads: the API's TLS pair loads (the
//! certificate parses and matches the key) and its listen address can be bound on this
//! host. Used by `svc validate`, by settings saves and by the restart route, so a restart
//! is refused rather than ending the daemon (decision 455).

use std::io::ErrorKind;

use crate::config::Config;

/// One reason the configuration would not start: the key and the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unstartable {
    pub key: &'static str,
    pub message: String,
}

/// The reasons `cfg` would not start (empty: it would). A listen address already in use
/// passes: it may be this daemon's own.
pub fn check(cfg: &Config) -> Vec<Unstartable> {
    let mut out = Vec::new();
    let w = &cfg.webui;
    if !w.tls_cert.is_empty() || !w.tls_key.is_empty() {
        if let Err(e) = crate::http::tls::server_config(
            std::path::Path::new(&w.tls_cert),
            std::path::Path::new(&w.tls_key),
        ) {
            out.push(Unstartable {
                key: "webui.tls_cert",
                message: format!("the TLS pair does not load: {e}"),
            });
        }
    }
    match std::net::TcpListener::bind(w.listen) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::AddrInUse => {}
        Err(e) => out.push(Unstartable {
            key: "webui.listen",
            message: format!("cannot listen on {}: {e}", w.listen),
        }),
    }
    out
}
