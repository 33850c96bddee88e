//! Starts the proof-of-work challenge (`crate::challenge`) when `challenge.enabled`: the
//! state and its timer, the hooks into automatic blocking (diversion, which also answers for
//! the (address, check) allows of solved routes; escalation as a hard block), and the TLS
//! listener on `challenge.listen`.

use std::io;
use std::sync::Arc;

use crate::challenge::listener::ChallengeHandler;
use crate::challenge::{Challenge, Diversion, Settings};
use crate::clock::SharedClock;
use crate::config::Config;
use crate::http::{self, Server, Stopper};
use crate::store::Store;
use crate::threat::autoblock::Trigger;
use crate::threat::Threat;

/// Worker threads of the challenge listener (a page or one SHA-256 per request).
const WORKERS: usize = 2;

/// The running challenge.
pub struct Running {
    pub challenge: Arc<Challenge>,
    pub addr: std::net::SocketAddr,
    stopper: Stopper,
    thread: std::thread::JoinHandle<()>,
}

impl Running {
    /// Stops the listener and the timer (the state is written).
    pub fn stop(self) {
        self.stopper.stop();
        let _ = self.thread.join();
        self.challenge.shutdown();
    }
}

/// The live settings from a configuration.
pub fn settings(cfg: &Config) -> Settings {
    Settings {
        cfg: cfg.challenge.clone(),
        scanner_challenge: cfg.threat.http_scanner_action == "challenge",
    }
}

/// Why the challenge server did not start (after `challenge: ` in the start-up error).
#[derive(Debug)]
pub enum ChallengeStartError {
    Secret(io::Error),
    Tls(io::Error),
    Listen {
        addr: std::net::SocketAddr,
        source: io::Error,
    },
    /// The bound socket's address or stopper could not be had.
    Socket(io::Error),
    Timer(io::Error),
    Spawn(io::Error),
}

impl std::fmt::Display for ChallengeStartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChallengeStartError::Secret(e) => {
                write!(f, "challenge: cannot read or create the cookie secret: {e}")
            }
            ChallengeStartError::Tls(e) => write!(f, "challenge TLS: {e}"),
            ChallengeStartError::Listen { addr, source } => {
                write!(f, "challenge: cannot listen on {addr}: {source}")
            }
            ChallengeStartError::Socket(e) => write!(f, "{e}"),
            ChallengeStartError::Timer(e) => write!(f, "challenge: cannot start the timer: {e}"),
            ChallengeStartError::Spawn(e) => {
                write!(f, "challenge: cannot start the listener: {e}")
            }
        }
    }
}

impl std::error::Error for ChallengeStartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ChallengeStartError::Secret(e)
            | ChallengeStartError::Tls(e)
            | ChallengeStartError::Listen { source: e, .. }
            | ChallengeStartError::Socket(e)
            | ChallengeStartError::Timer(e)
            | ChallengeStartError::Spawn(e) => Some(e),
        }
    }
}

pub fn start(
    cfg: &Config,
    clock: SharedClock,
    store: &Store,
    threat: &Arc<Threat>,
) -> Result<Option<Running>, ChallengeStartError> {
    let c = &cfg.challenge;
    if !c.enabled {
        return Ok(None);
    }
    let secret =
        crate::challenge::load_secret(&cfg.state_path).map_err(ChallengeStartError::Secret)?;
    let challenge = Challenge::new(clock.clone(), store.clone(), secret, settings(cfg));
    match &threat.autoblock {
        Some(ab) => {
            ab.set_diversion(Arc::new(Diversion(challenge.clone())));
            let weak = Arc::downgrade(ab);
            challenge.set_escalate(Arc::new(move |ip, check: &str| {
                if let Some(ab) = weak.upgrade() {
                    ab.offer(ip, Trigger::Challenge(check.to_string()));
                }
            }));
        }
        None => log::info!(
            "challenge: automatic blocking is not running; no address is routed to the challenge"
        ),
    }
    let (cert, key) = if c.tls_cert.is_empty() {
        http::tls::ensure_pair(&cfg.state_path, &cfg.webui.tls_cert, &cfg.webui.tls_key)
    } else {
        Ok((c.tls_cert.clone().into(), c.tls_key.clone().into()))
    }
    .map_err(ChallengeStartError::Tls)?;
    let tls = http::tls::server_config(&cert, &key).map_err(ChallengeStartError::Tls)?;
    let mut limits = cfg.webui.limits.clone();
    limits.workers = WORKERS;
    let server = Server::bind(c.listen, tls, limits)
        .map_err(|source| ChallengeStartError::Listen {
            addr: c.listen,
            source,
        })?
        .with_clock(clock);
    let addr = server.local_addr().map_err(ChallengeStartError::Socket)?;
    let stopper = server.stopper().map_err(ChallengeStartError::Socket)?;
    challenge.start().map_err(ChallengeStartError::Timer)?;
    let handler: Arc<dyn http::Handler> = Arc::new(ChallengeHandler {
        challenge: challenge.clone(),
    });
    let thread = std::thread::Builder::new()
        .name("challenge-http".into())
        .spawn(move || server.run(handler))
        .map_err(ChallengeStartError::Spawn)?;
    log::info!("challenge listening on https://{addr}");
    Ok(Some(Running {
        challenge,
        addr,
        stopper,
        thread,
    }))
}
