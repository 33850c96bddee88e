//! Starts the proof-of-work challenge (`crate::challenge`) when `challenge.enabled`: the
//! state and its timer, the hooks into automatic blocking (diversion, which also answers for
//! the (address, check) allows of solved routes; escalation as a hard block), and the TLS
//! listener on `challenge.listen`.

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

pub fn start(
    cfg: &Config,
    clock: SharedClock,
    store: &Store,
    threat: &Arc<Threat>,
) -> Result<Option<Running>, String> {
    let c = &cfg.challenge;
    if !c.enabled {
        return Ok(None);
    }
    let secret = crate::challenge::load_secret(&cfg.state_path)
        .map_err(|e| format!("challenge: cannot read or create the cookie secret: {e}"))?;
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
    .map_err(|e| format!("challenge TLS: {e}"))?;
    let tls = http::tls::server_config(&cert, &key).map_err(|e| format!("challenge TLS: {e}"))?;
    let mut limits = cfg.webui.limits.clone();
    limits.workers = WORKERS;
    let server = Server::bind(c.listen, tls, limits)
        .map_err(|e| format!("challenge: cannot listen on {}: {e}", c.listen))?
        .with_clock(clock);
    let addr = server.local_addr().map_err(|e| e.to_string())?;
    let stopper = server.stopper().map_err(|e| e.to_string())?;
    challenge
        .start()
        .map_err(|e| format!("challenge: cannot start the timer: {e}"))?;
    let handler: Arc<dyn http::Handler> = Arc::new(ChallengeHandler {
        challenge: challenge.clone(),
    });
    let thread = std::thread::Builder::new()
        .name("challenge-http".into())
        .spawn(move || server.run(handler))
        .map_err(|e| format!("challenge: cannot start the listener: {e}"))?;
    log::info!("challenge listening on https://{addr}");
    Ok(Some(Running {
        challenge,
        addr,
        stopper,
        thread,
    }))
}
