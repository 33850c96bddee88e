//! TLS configuration: configured PEM files, or a self-signed pair generated once.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Where the generated pair lives under the state directory.
pub fn generated_paths(state: &Path) -> (PathBuf, PathBuf) {
    let dir = state.join("tls");
    (dir.join("cert.pem"), dir.join("key.pem"))
}

/// Returns the (cert, key) paths to use, generating a self-signed pair under
/// `{state}/tls/` when none is configured and none was generated before.
pub fn ensure_pair(state: &Path, cert: &str, key: &str) -> io::Result<(PathBuf, PathBuf)> {
    if !cert.is_empty() && !key.is_empty() {
        return Ok((PathBuf::from(cert), PathBuf::from(key)));
    }
    let (cert_path, key_path) = generated_paths(state);
    if cert_path.exists() && key_path.exists() {
        return Ok((cert_path, key_path));
    }
    crate::fsutil::ensure_dir(&state.join("tls"), 0o700)?;
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if let Ok(h) = nix::unistd::gethostname() {
        let h = h.to_string_lossy().into_owned();
        if !h.is_empty() && h != "localhost" {
            names.push(h);
        }
    }
    let ck =
        rcgen::generate_simple_self_signed(names).map_err(|e| io::Error::other(e.to_string()))?;
    crate::fsutil::write_atomic(
        &key_path,
        ck.key_pair.serialize_pem().as_bytes(),
        0o600,
        None,
    )?;
    crate::fsutil::write_atomic(&cert_path, ck.cert.pem().as_bytes(), 0o644, None)?;
    log::info!(
        "generated a self-signed TLS certificate at {}",
        cert_path.display()
    );
    Ok((cert_path, key_path))
}

/// Loads certificate chain and key into a rustls server configuration (HTTP/1.1 ALPN).
pub fn server_config(cert: &Path, key: &Path) -> io::Result<Arc<rustls::ServerConfig>> {
    let certs: Vec<CertificateDer<'static>> = {
        let data = crate::fsutil::read_daemon_file(cert)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", cert.display())))?;
        rustls_pemfile::certs(&mut data.as_slice()).collect::<Result<_, _>>()?
    };
    if certs.is_empty() {
        return Err(io::Error::other(format!(
            "{}: no certificate found",
            cert.display()
        )));
    }
    let key: PrivateKeyDer<'static> = {
        let data = crate::fsutil::read_daemon_file(key)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", key.display())))?;
        rustls_pemfile::private_key(&mut data.as_slice())?
            .ok_or_else(|| io::Error::other(format!("{}: no private key found", key.display())))?
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| io::Error::other(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| io::Error::other(format!("TLS key does not match certificate: {e}")))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}
